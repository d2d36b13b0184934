// The synthetic model writer: the llama path's bytes stay what they were (the demo model's weight digest is
// in golden snapshots), and a written granitehybrid model loads with the right layer map and runs a prefill
// whose logits do not depend on how it is split into steps. Small shapes only: the benchmark shapes
// (PeerShape, HybridShape) take seconds to build.
#include "model/synthetic_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "kv/cache.h"
#include "model/demo_model.h"
#include "model/model.h"
#include "model/model_test_util.h"

namespace llamay::model {
namespace {

using test_util::Fnv1a;

TEST(SyntheticModel, TheDemoModelsBytesNeverChange) {
  const std::vector<uint8_t> demo = BuildDemoModel();
  // FNV-1a of `llamay model demo` as written before the granitehybrid path existed (commit 540ff0b).
  EXPECT_EQ(demo.size(), 3411040u);
  EXPECT_EQ(Fnv1a(demo), 0x73f72c0577058f28ull);
}

SyntheticSpec SmallHybrid(TensorType type) {
  SyntheticSpec s;
  s.arch = SyntheticArch::kGraniteHybrid;
  s.name = "tiny-synthetic-hybrid";
  s.n_vocab = 300;
  s.n_embd = 128;
  s.n_layer = 4;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.n_ff = 256;
  s.attention_every = 2;  // M A M A
  s.ssm_d_inner = 256;
  s.ssm_d_state = 16;
  s.ssm_n_head = 8;
  s.ssm_n_group = 2;
  s.ssm_d_conv = 4;
  s.type = type;
  return s;
}

std::vector<float> Prefill(const Model& m, kv::Cache& cache, const std::vector<int32_t>& tokens, size_t split) {
  kv::Context ctx = cache.NewContext();
  std::vector<float> logits;
  for (size_t at = 0; at < tokens.size(); at += split) {
    const size_t n = std::min(split, tokens.size() - at);
    model::SeqInput in{&ctx, std::span(tokens).subspan(at, n), false};
    logits.clear();
    EXPECT_TRUE(m.Forward(std::span(&in, 1), &logits).ok());
  }
  EXPECT_EQ(ctx.size(), tokens.size());
  EXPECT_EQ(ctx.state_position(), tokens.size());
  return logits;
}

TEST(SyntheticModel, AHybridModelLoadsWithItsLayerMapAndRuns) {
  for (TensorType type : {TensorType::kF32, TensorType::kQ8_0}) {
    SCOPED_TRACE(std::string(TensorTypeName(type)));
    const SyntheticSpec spec = SmallHybrid(type);
    auto bytes = BuildSyntheticModel(spec);
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    EXPECT_EQ(*bytes, *BuildSyntheticModel(spec));  // deterministic
    auto file = gguf::File::FromBuffer(std::move(*bytes));
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    auto model = Model::FromFile(std::move(*file), 2);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    const Model& m = **model;
    const HParams& hp = m.hparams();
    EXPECT_EQ(hp.arch, Arch::kGraniteHybrid);
    EXPECT_EQ(hp.mixers, (std::vector<MixerKind>{MixerKind::kMamba2, MixerKind::kAttention, MixerKind::kMamba2,
                                                 MixerKind::kAttention}));
    EXPECT_EQ(hp.n_head_kv, 2u);
    EXPECT_EQ(hp.ssm.d_inner, 256u);
    EXPECT_EQ(hp.ssm.n_head, 8u);
    EXPECT_EQ(hp.ssm.n_group, 2u);
    EXPECT_EQ(hp.ssm.d_state, 16u);
    EXPECT_EQ(hp.ssm.d_conv, 4u);
    EXPECT_EQ(hp.n_ff, 256u);
    EXPECT_EQ(hp.n_vocab, 300u);
    const kv::KvLayout layout = m.KvLayoutFor(16, kv::KvPrecision::kF32, 32);
    ASSERT_EQ(layout.layer_specs.size(), 4u);
    for (uint32_t l = 0; l < 4; ++l)
      EXPECT_EQ(layout.layer_specs[l].kind, l % 2 ? kv::LayerKind::kAttention : kv::LayerKind::kRecurrent) << l;
    EXPECT_EQ(layout.recurrent_layer_bytes, hp.ssm.state_bytes());
    EXPECT_EQ(layout.checkpoint_tokens, 32u);

    kv::CacheOptions co;
    co.layout = layout;
    auto cache = kv::Cache::Create(co);
    ASSERT_TRUE(cache.ok());
    std::vector<int32_t> prompt;
    for (int i = 0; i < 70; ++i) prompt.push_back(3 + (i * 53) % 290);
    const std::vector<float> whole = Prefill(m, **cache, prompt, prompt.size());
    ASSERT_EQ(whole.size(), 300u);
    float spread = 0.0f;
    for (float v : whole) {
      ASSERT_TRUE(std::isfinite(v));
      spread = std::max(spread, std::fabs(v));
    }
    EXPECT_GT(spread, 1.0f);  // not a degenerate model
    // Split at and around checkpoint boundaries: the same bits.
    const std::vector<float> split = Prefill(m, **cache, prompt, 13);
    EXPECT_EQ(std::memcmp(whole.data(), split.data(), whole.size() * 4), 0);
    EXPECT_TRUE((*cache)->CheckInvariants().ok());
  }
}

TEST(SyntheticModel, RefusesAHybridShapeThatDoesNotFit) {
  SyntheticSpec s = SmallHybrid(TensorType::kQ8_0);
  s.ssm_n_head = 7;  // does not divide d_inner
  EXPECT_EQ(BuildSyntheticModel(s).status().code(), StatusCode::kInvalidArgument);
  s = SmallHybrid(TensorType::kQ8_0);
  s.ssm_d_inner = 8 * 18;  // not a multiple of Q8_0's 32
  s.ssm_n_head = 8;
  EXPECT_EQ(BuildSyntheticModel(s).status().code(), StatusCode::kInvalidArgument);
  s = SmallHybrid(TensorType::kQ8_0);
  s.attention_every = 0;
  EXPECT_EQ(BuildSyntheticModel(s).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace llamay::model
