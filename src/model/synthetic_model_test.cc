// The synthetic model writer: the llama path's bytes stay what they were (the demo model's weight digest is
// in golden snapshots), and written granitehybrid and qwen35 models load with the right layer map and
// geometry and run a prefill whose logits do not depend on how it is split into steps (the rest of the
// recurrent determinism contract on the qwen35 model: recurrent_model_test.cc, synth-qwen35-*). Small shapes
// only: the benchmark shapes (PeerShape, HybridShape, Qwen35Shape) take seconds to build.
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
using test_util::TinyQwen35Spec;

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

// 70 tokens (ids 3 + (i * 53) % mod) prefilled whole into a cache of `layout`, and again split into steps
// of each of `splits` tokens: finite logits with some spread (not a degenerate model), the same bits every
// way, and the cache's invariants hold.
void ExpectSplitsAgree(const Model& m, const kv::KvLayout& layout, int32_t mod, std::initializer_list<size_t> splits) {
  kv::CacheOptions co;
  co.layout = layout;
  auto cache = kv::Cache::Create(co);
  ASSERT_TRUE(cache.ok());
  std::vector<int32_t> prompt;
  for (int i = 0; i < 70; ++i) prompt.push_back(3 + (i * 53) % mod);
  const std::vector<float> whole = Prefill(m, **cache, prompt, prompt.size());
  ASSERT_EQ(whole.size(), m.hparams().n_vocab);
  float spread = 0.0f;
  for (float v : whole) {
    ASSERT_TRUE(std::isfinite(v));
    spread = std::max(spread, std::fabs(v));
  }
  EXPECT_GT(spread, 1.0f);
  for (size_t split : splits) {
    const std::vector<float> got = Prefill(m, **cache, prompt, split);
    EXPECT_EQ(std::memcmp(whole.data(), got.data(), whole.size() * 4), 0) << "split " << split;
  }
  EXPECT_TRUE((*cache)->CheckInvariants().ok());
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
    ExpectSplitsAgree(m, layout, 290, {13});  // splits at and around checkpoint boundaries
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

// Qwen3.5: the file says what the spec says, read back through the loader (layer map from
// full_attention_interval, gated attention with partial rotary, the delta net's geometry from the ssm.*
// keys), and a prefill gives the same bits whole or split across chunk and checkpoint boundaries.
TEST(SyntheticModel, AQwen35ModelLoadsWithItsGeometryAndRuns) {
  for (TensorType type : {TensorType::kF32, TensorType::kQ8_0, TensorType::kQ4_K}) {
    SCOPED_TRACE(std::string(TensorTypeName(type)));
    SyntheticSpec spec = TinyQwen35Spec(type);
    if (type == TensorType::kQ4_K) {  // 256-element blocks: every matrix's width a multiple of 256
      spec.n_embd = 256;
      spec.head_dim = 64;  // q 4 x 64
      spec.ssm_d_inner = 4 * 64;
      spec.ssm_d_state = 64;
    }
    auto bytes = BuildSyntheticModel(spec);
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    EXPECT_EQ(*bytes, *BuildSyntheticModel(spec));  // deterministic
    auto file = gguf::File::FromBuffer(std::move(*bytes));
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    EXPECT_EQ(file->FindTensor("blk.0.attn_qkv.weight")->type, type);
    EXPECT_EQ(file->FindTensor("blk.2.attn_q.weight")->type, type);
    auto model = Model::FromFile(std::move(*file), 2);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    const Model& m = **model;
    const HParams& hp = m.hparams();
    EXPECT_EQ(hp.arch, Arch::kQwen35);
    using enum MixerKind;
    EXPECT_EQ(hp.mixers, (std::vector<MixerKind>{kGatedDeltaNet, kGatedDeltaNet, kAttention, kGatedDeltaNet,
                                                 kGatedDeltaNet, kAttention}));
    EXPECT_EQ(hp.ffns, std::vector<FfnKind>(6, FfnKind::kDense));
    EXPECT_EQ(hp.n_embd, spec.n_embd);
    EXPECT_EQ(hp.n_vocab, 512u);
    EXPECT_EQ(hp.n_ff, 256u);
    EXPECT_EQ(hp.n_head, 4u);
    EXPECT_EQ(hp.n_head_kv, 2u);
    EXPECT_EQ(hp.head_dim, spec.head_dim);
    EXPECT_EQ(hp.n_rot, spec.head_dim / 4);  // partial rotary, Qwen3.5's quarter
    EXPECT_EQ(hp.rope_type, RopeType::kNeox);
    EXPECT_EQ(hp.rope_theta, 1e7f);
    EXPECT_FLOAT_EQ(hp.rms_eps, 1e-6f);
    EXPECT_TRUE(hp.qk_norm && hp.attn_output_gate);
    EXPECT_EQ(hp.ssm.mixer, kGatedDeltaNet);
    EXPECT_EQ(hp.ssm.n_head, 4u);                    // value heads
    EXPECT_EQ(hp.ssm.n_group, 2u);                   // key heads
    EXPECT_EQ(hp.ssm.d_state, spec.ssm_d_state);     // key head size
    EXPECT_EQ(hp.ssm.head_dim(), spec.ssm_d_state);  // value head size
    EXPECT_EQ(hp.ssm.d_conv, 4u);
    EXPECT_EQ(hp.ssm.conv_channels(),
              8 * spec.ssm_d_state);  // the rows of attn_qkv: q | k (2 heads each) | v (4)
    const kv::KvLayout layout = m.KvLayoutFor(16, kv::KvPrecision::kF32, 32);
    EXPECT_TRUE(layout.Validate().ok()) << layout.Validate().ToString();
    ASSERT_EQ(layout.layer_specs.size(), 6u);
    for (uint32_t l = 0; l < 6; ++l)
      EXPECT_EQ(layout.layer_specs[l].kind,
                l % 3 == 2 ? kv::LayerKind::kAttention : kv::LayerKind::kRecurrent)
          << l;
    EXPECT_EQ(layout.recurrent_layer_bytes, hp.ssm.state_bytes());
    EXPECT_EQ(layout.checkpoint_tokens, 32u);
    ExpectSplitsAgree(m, layout, 500, {1, 13, 16, 33});  // across chunk (16) and checkpoint (32) boundaries
  }
}

// The benchmark shape's geometry (with 4 layers and a small vocabulary, to build fast): what the header
// says, and the recurrent state it documents.
TEST(SyntheticModel, TheQwen35ShapeIsQwen35SmallLayer) {
  SyntheticSpec spec = Qwen35Shape(TensorType::kQ8_0, 4);
  EXPECT_EQ(Qwen35Shape(TensorType::kQ8_0).n_layer, 16u);
  EXPECT_EQ(spec.n_vocab, 32000u);
  spec.n_vocab = 512;
  auto bytes = BuildSyntheticModel(spec);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto file = gguf::File::FromBuffer(std::move(*bytes));
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto model = Model::FromFile(std::move(*file), 2);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const HParams& hp = (*model)->hparams();
  using enum MixerKind;
  EXPECT_EQ(hp.mixers, (std::vector<MixerKind>{kGatedDeltaNet, kGatedDeltaNet, kGatedDeltaNet, kAttention}));
  EXPECT_EQ(hp.n_embd, 1024u);
  EXPECT_EQ(hp.n_head, 8u);
  EXPECT_EQ(hp.n_head_kv, 2u);
  EXPECT_EQ(hp.head_dim, 256u);
  EXPECT_EQ(hp.n_rot, 64u);
  EXPECT_EQ(hp.n_ff, 3584u);
  EXPECT_EQ(hp.ssm.n_head, 16u);
  EXPECT_EQ(hp.ssm.n_group, 16u);
  EXPECT_EQ(hp.ssm.d_state, 128u);
  EXPECT_EQ(hp.ssm.head_dim(), 128u);
  EXPECT_EQ(hp.ssm.conv_channels(), 6144u);
  // 1.32 MiB per delta-net layer and sequence (synthetic_model.h).
  EXPECT_NEAR(static_cast<double>(hp.ssm.state_bytes()) / (1 << 20), 1.32, 0.005);
}

TEST(SyntheticModel, RefusesAQwen35ShapeThatDoesNotFit) {
  SyntheticSpec s = TinyQwen35Spec(TensorType::kQ8_0);
  s.ssm_n_group = 3;  // key heads must divide the value heads
  EXPECT_EQ(BuildSyntheticModel(s).status().code(), StatusCode::kInvalidArgument);
  s = TinyQwen35Spec(TensorType::kQ8_0);
  s.ssm_d_state = 16;  // value heads (d_inner / 4 = 32) wider than key heads: llama.cpp could not load it
  EXPECT_EQ(BuildSyntheticModel(s).status().code(), StatusCode::kInvalidArgument);
  s = TinyQwen35Spec(TensorType::kQ8_0);
  s.n_rot = 34;  // more rotated dims than the head's 32
  EXPECT_EQ(BuildSyntheticModel(s).status().code(), StatusCode::kInvalidArgument);
  s = TinyQwen35Spec(TensorType::kQ8_0);
  s.attention_every = 7;  // beyond the 6 layers: the loader would refuse full_attention_interval
  EXPECT_EQ(BuildSyntheticModel(s).status().code(), StatusCode::kInvalidArgument);
  s = TinyQwen35Spec(TensorType::kQ4_K);  // dim 128: not a multiple of Q4_K's 256
  EXPECT_EQ(BuildSyntheticModel(s).status().code(), StatusCode::kInvalidArgument);
  s = TinyQwen35Spec(TensorType::kQ8_0);
  s.granite_experts = true;
  EXPECT_EQ(BuildSyntheticModel(s).status().code(), StatusCode::kInvalidArgument);
}

// A tokenizer file gives the model its vocabulary: every tokenizer.ggml.* key of LLaMA's SentencePiece
// vocabulary (what `model synth` takes by default) is copied as it is, the model's rows follow its size, and
// the model runs. (That the copy tokenizes as its file does, a few tokens a word where the byte vocabulary
// takes seven, is tests/cli_synth.sh's: model/ does not see the tokenizer.)
TEST(SyntheticModel, ATokenizerFileGivesTheModelItsVocabulary) {
  auto vocab = gguf::File::Open(std::string(LLAMAY_SHARED_DIR) + "/ref/vocab/ggml-vocab-llama-spm.gguf");
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  SyntheticSpec spec;
  spec.n_vocab = 32000;
  spec.n_embd = 64;
  spec.n_layer = 2;
  spec.n_head = 4;
  spec.n_head_kv = 2;
  spec.n_ff = 128;
  spec.tokenizer = &*vocab;
  auto bytes = BuildSyntheticModel(spec);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto file = gguf::File::FromBuffer(std::move(*bytes));
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_NE(file->GetStringOr("tokenizer.chat_template", "").find("<|im_start|>"), std::string::npos);
  size_t copied = 0;
  for (std::string_view key : vocab->Keys()) {
    if (!key.starts_with("tokenizer.ggml.")) continue;
    SCOPED_TRACE(std::string(key));
    ++copied;
    ASSERT_TRUE(file->Has(key));
    const gguf::ValueType type = *vocab->TypeOf(key);
    if (type == gguf::ValueType::kArray) {
      const gguf::ValueType elem = *vocab->ArrayElementType(key);
      if (elem == gguf::ValueType::kString) {
        EXPECT_EQ(*file->GetStringArray(key), *vocab->GetStringArray(key));
      } else if (elem == gguf::ValueType::kFloat32) {
        EXPECT_EQ(*file->GetFloatArray(key), *vocab->GetFloatArray(key));
      } else {
        EXPECT_EQ(*file->GetIntArray(key), *vocab->GetIntArray(key));
      }
    } else if (type == gguf::ValueType::kString) {
      EXPECT_EQ(*file->GetString(key), *vocab->GetString(key));
    } else if (type == gguf::ValueType::kBool) {
      EXPECT_EQ(*file->GetBool(key), *vocab->GetBool(key));
    } else {
      EXPECT_EQ(*file->GetInt(key), *vocab->GetInt(key));
    }
  }
  EXPECT_GE(copied, 6u);  // model, tokens, scores, token_type and the special ids at least
  EXPECT_EQ(*file->ArrayLength("tokenizer.ggml.tokens"), 32000u);
  auto model = Model::FromFile(std::move(*file), 1);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ((*model)->hparams().n_vocab, 32000u);
  auto cache = test_util::NewCache(**model);
  kv::Context ctx = cache->NewContext();
  const std::vector<int32_t> prompt = {1, 450, 4996, 17354, 1701, 29916};  // <s> The quick brown fox
  model::SeqInput in{&ctx, std::span(prompt), false};
  std::vector<float> logits;
  ASSERT_TRUE((*model)->Forward(std::span(&in, 1), &logits).ok());
  EXPECT_EQ(logits.size(), 32000u);

  // The shape's vocabulary must be the tokenizer's.
  spec.n_vocab = 300;
  auto refused = BuildSyntheticModel(spec);
  ASSERT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("32000"), std::string::npos) << refused.status().ToString();
}

}  // namespace
}  // namespace llamay::model
