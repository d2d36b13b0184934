// The mixture-of-experts FFN (qwen3moe, qwen2moe, granitehybrid with experts, qwen35moe, gpt-oss, olmoe): the
// hyperparameters and expert tensors a file must have,
// parity with llama.cpp on small synthetic models (testdata/moe_ref_*.json, written by
// testdata/make_moe_ref.py),
// and the grouping of a batch's tokens by expert changing no token's bits. The determinism contract's own
// tests (model_test.cc, Determinism) run on this model too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kv/cache.h"
#include "model/model.h"
#include "model/model_test_util.h"
#include "model/synthetic_model.h"

namespace llamay::model {
namespace {

using test_util::NewCache;
using test_util::Same;
using test_util::Steps;

std::unique_ptr<Model> Load(std::vector<uint8_t> bytes, int threads = 0) {
  auto f = gguf::File::FromBuffer(std::move(bytes));
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  auto m = Model::FromFile(std::move(*f), threads);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(*m) : nullptr;
}

TEST(MoeHParams, Qwen3MoeReadsItsExpertsAndGating) {
  auto bytes = BuildSyntheticModel(test_util::TinyMoeSpec(TensorType::kQ8_0));
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto m = Load(std::move(*bytes));
  ASSERT_NE(m, nullptr);
  const HParams& hp = m->hparams();
  EXPECT_EQ(hp.arch, Arch::kQwen3Moe);
  EXPECT_EQ(hp.ffns, std::vector<FfnKind>(hp.n_layer, FfnKind::kMoe));
  EXPECT_EQ(hp.moe.n_expert, 16u);
  EXPECT_EQ(hp.moe.n_expert_used, 4u);
  EXPECT_EQ(hp.moe.n_ff_expert, 64u);
  EXPECT_EQ(hp.moe.gating, MoeGating::kSoftmax);
  EXPECT_TRUE(hp.moe.norm_topk);
  EXPECT_EQ(hp.head_dim, 32u);  // attention.key_length, not n_embd / n_head (128 / 4 = 32 here too)
  EXPECT_TRUE(hp.qk_norm);
  EXPECT_EQ(hp.rope_type, RopeType::kNeox);
}

// A file whose experts do not fit what it declares is refused by name, never read out of bounds.
TEST(MoeHParams, BadExpertDeclarationsAreClearErrors) {
  auto bytes = BuildSyntheticModel(test_util::TinyMoeSpec(TensorType::kF32));
  ASSERT_TRUE(bytes.ok());
  auto f = gguf::File::FromBuffer(*bytes);
  ASSERT_TRUE(f.ok());
  struct Case {
    std::string key;
    uint32_t value;
    std::string expect;  // in the error message
  };
  const Case cases[] = {
      {"qwen3moe.expert_used_count", 17, "expert_used_count"},  // more used than there are
      {"qwen3moe.expert_used_count", 0, "expert_used_count"},
      {"qwen3moe.expert_count", 8, "ffn_gate_inp"},  // the router and the slabs say 16
      {"qwen3moe.expert_feed_forward_length", 32, "ffn_gate_exps"},
      {"qwen3moe.expert_shared_feed_forward_length", 64, "qwen3moe has no shared expert"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.key);
    auto g = gguf::File::FromBuffer(
        test_util::RewriteKeys(*f, {c.key}, [&](gguf::Writer& w) { w.SetUint32(c.key, c.value); }));
    ASSERT_TRUE(g.ok());
    auto m = Model::FromFile(std::move(*g));
    ASSERT_FALSE(m.ok()) << c.key << " = " << c.value;
    EXPECT_NE(m.status().message().find(c.expect), std::string::npos) << m.status().ToString();
  }
}

TEST(MoeHParams, Qwen2MoeHasAGatedSharedExpert) {
  auto bytes = BuildSyntheticModel(test_util::TinyMoeSpec(TensorType::kQ8_0, SyntheticArch::kQwen2Moe));
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto f = gguf::File::FromBuffer(*bytes);
  ASSERT_TRUE(f.ok());
  auto m = Load(*bytes);
  ASSERT_NE(m, nullptr);
  const HParams& hp = m->hparams();
  EXPECT_EQ(hp.arch, Arch::kQwen2Moe);
  EXPECT_EQ(hp.moe.gating, MoeGating::kSoftmax);
  EXPECT_FALSE(hp.moe.norm_topk);
  EXPECT_EQ(hp.moe.n_ff_shared, 96u);
  EXPECT_TRUE(hp.moe.shared_gated);
  EXPECT_TRUE(hp.qkv_bias);
  EXPECT_FALSE(hp.qk_norm);
  // Its shared expert's width and gate are required, by name.
  auto no_width = Model::FromFile(*gguf::File::FromBuffer(
      test_util::RewriteKeys(*f, {"qwen2moe.expert_shared_feed_forward_length"}, [](gguf::Writer&) {})));
  ASSERT_FALSE(no_width.ok());
  EXPECT_NE(no_width.status().message().find("expert_shared_feed_forward_length is missing"),
            std::string::npos)
      << no_width.status().ToString();
  auto no_gate = Model::FromFile(*gguf::File::FromBuffer(
      test_util::RewriteKeys(*f, {}, [](gguf::Writer&) {}, {"blk.1.ffn_gate_inp_shexp.weight"})));
  ASSERT_FALSE(no_gate.ok());
  EXPECT_NE(no_gate.status().message().find("blk.1.ffn_gate_inp_shexp.weight"), std::string::npos)
      << no_gate.status().ToString();
}

TEST(MoeHParams, GraniteHybridWithExpertsHasAnUngatedSharedExpert) {
  auto bytes = BuildSyntheticModel(test_util::TinyMoeSpec(TensorType::kQ8_0, SyntheticArch::kGraniteHybrid));
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto m = Load(*bytes);
  ASSERT_NE(m, nullptr);
  const HParams& hp = m->hparams();
  EXPECT_EQ(hp.arch, Arch::kGraniteHybrid);
  EXPECT_EQ(hp.ffns, std::vector<FfnKind>(hp.n_layer, FfnKind::kMoe));
  EXPECT_EQ(hp.moe.n_ff_expert, 64u);  // feed_forward_length, as llama.cpp reads it for Granite's experts
  EXPECT_TRUE(hp.moe.norm_topk);
  EXPECT_EQ(hp.moe.n_ff_shared, 96u);
  EXPECT_FALSE(hp.moe.shared_gated);
  EXPECT_EQ(hp.mixers[0], MixerKind::kMamba2);
  EXPECT_EQ(hp.mixers[3], MixerKind::kAttention);
}

TEST(MoeHParams, Qwen35MoeHasDeltaNetsAndAGatedSharedExpert) {
  auto bytes = BuildSyntheticModel(test_util::TinyMoeSpec(TensorType::kQ8_0, SyntheticArch::kQwen35Moe));
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto m = Load(*bytes);
  ASSERT_NE(m, nullptr);
  const HParams& hp = m->hparams();
  EXPECT_EQ(hp.arch, Arch::kQwen35Moe);
  const MixerKind d = MixerKind::kGatedDeltaNet, a = MixerKind::kAttention;
  EXPECT_EQ(hp.mixers, (std::vector<MixerKind>{d, d, a, d, d, a}));  // full_attention_interval 3
  EXPECT_EQ(hp.ffns, std::vector<FfnKind>(hp.n_layer, FfnKind::kMoe));
  EXPECT_EQ(hp.moe.gating, MoeGating::kSoftmax);
  EXPECT_TRUE(hp.moe.norm_topk);
  EXPECT_EQ(hp.moe.n_ff_shared, 96u);
  EXPECT_TRUE(hp.moe.shared_gated);
  EXPECT_EQ(hp.n_ff, 0u);  // no dense FFN, and the file declares none
  EXPECT_TRUE(hp.attn_output_gate);
  EXPECT_TRUE(hp.qk_norm);
  EXPECT_EQ(hp.ssm.mixer, MixerKind::kGatedDeltaNet);
}

// Qwen3.5's converted files append a multi-token-prediction block (nextn_predict_layers, counted in
// block_count, with per-layer arrays one entry longer): a draft head that the forward pass never runs. A file
// with one gives the same logits, bit for bit, as the file without it; the same block counted as a layer is
// refused (its tensors are not a layer's).
TEST(MoeHParams, AMultiTokenPredictionBlockIsNotRun) {
  auto bytes = BuildSyntheticModel(test_util::TinyMoeSpec(TensorType::kQ8_0, SyntheticArch::kQwen35Moe));
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto f = gguf::File::FromBuffer(*bytes);
  ASSERT_TRUE(f.ok());
  // The block: an attention layer's and an MoE's tensors (blk.2's, renamed blk.6) and the MTP projections.
  auto add_block = [&](gguf::Writer& w) {
    for (const auto& t : f->tensors()) {
      if (!t.name.starts_with("blk.2.")) continue;
      EXPECT_TRUE(
          w.AddTensor("blk.6." + t.name.substr(6), t.dims, t.type, std::span(t.data, t.n_bytes)).ok());
    }
    const std::vector<float> proj(2 * 128 * 128, 0.01f), norm(128, 1.0f);
    auto raw = [](const std::vector<float>& v) {
      return std::span(reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(float));
    };
    EXPECT_TRUE(w.AddTensor("blk.6.nextn.eh_proj.weight", {256, 128}, TensorType::kF32, raw(proj)).ok());
    EXPECT_TRUE(w.AddTensor("blk.6.nextn.enorm.weight", {128}, TensorType::kF32, raw(norm)).ok());
    EXPECT_TRUE(w.AddTensor("blk.6.nextn.hnorm.weight", {128}, TensorType::kF32, raw(norm)).ok());
  };
  const std::vector<int32_t> prompt = test_util::Prompt(40, 5);
  auto base = Load(*bytes);
  ASSERT_NE(base, nullptr);
  auto c0 = NewCache(*base, 16);
  kv::Context ctx0 = c0->NewContext();
  const std::vector<float> want = Steps(*base, ctx0, prompt, true);
  // With the block declared, by full_attention_interval and by a per-block recurrent_layers array.
  for (bool by_array : {false, true}) {
    SCOPED_TRACE(by_array ? "attention.recurrent_layers" : "full_attention_interval");
    auto with = test_util::RewriteKeys(*f, {"qwen35moe.block_count"}, [&](gguf::Writer& w) {
      w.SetUint32("qwen35moe.block_count", 7);
      w.SetUint32("qwen35moe.nextn_predict_layers", 1);
      if (by_array) w.SetInt32Array("qwen35moe.attention.recurrent_layers", {1, 1, 0, 1, 1, 0, 0});
      add_block(w);
    });
    auto m = Load(with);
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->hparams().n_layer, 6u);
    EXPECT_EQ(m->hparams().n_layer_nextn, 1u);
    auto c = NewCache(*m, 16);
    kv::Context ctx = c->NewContext();
    EXPECT_TRUE(Same(want, Steps(*m, ctx, prompt, true)));
  }
  // Counted as a trunk layer, the block is a layer without its tensors: refused by name.
  auto f7 =
      gguf::File::FromBuffer(test_util::RewriteKeys(*f, {"qwen35moe.block_count"}, [&](gguf::Writer& w) {
        w.SetUint32("qwen35moe.block_count", 7);
        add_block(w);
      }));
  ASSERT_TRUE(f7.ok());
  auto m7 = Model::FromFile(std::move(*f7));
  ASSERT_FALSE(m7.ok());
  EXPECT_NE(m7.status().message().find("blk.6."), std::string::npos) << m7.status().ToString();
  // As many prediction blocks as blocks: refused, naming the key.
  auto all = gguf::File::FromBuffer(test_util::RewriteKeys(
      *f, {}, [](gguf::Writer& w) { w.SetUint32("qwen35moe.nextn_predict_layers", 6); }));
  ASSERT_TRUE(all.ok());
  auto none = Model::FromFile(std::move(*all));
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("nextn_predict_layers"), std::string::npos)
      << none.status().ToString();
}

// llama.cpp's --fuse-gate-up-exps writes each layer's gate and up experts as one ffn_gate_up_exps tensor (per
// expert, its gate rows then its up rows). Such a file gives the bits of the file with them apart, on a
// model with expert biases (gpt-oss, which keeps its gate and up biases apart) and one without.
TEST(MoeHParams, FusedGateUpExpertsGiveTheSameBitsAsSeparateOnes) {
  for (SyntheticArch arch : {SyntheticArch::kQwen3Moe, SyntheticArch::kGptOss}) {
    SCOPED_TRACE(arch == SyntheticArch::kGptOss ? "gpt-oss" : "qwen3moe");
    auto bytes = BuildSyntheticModel(test_util::TinyMoeSpec(TensorType::kQ8_0, arch));
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    auto f = gguf::File::FromBuffer(*bytes);
    ASSERT_TRUE(f.ok());
    std::vector<std::string> apart;
    std::vector<std::vector<uint8_t>> fused_bytes;  // kept alive until the file is written
    auto fuse = [&](gguf::Writer& w) {
      for (uint32_t l = 0; l < 3; ++l) {
        const std::string p = "blk." + std::to_string(l) + ".";
        const gguf::TensorInfo* g = f->FindTensor(p + "ffn_gate_exps.weight");
        const gguf::TensorInfo* u = f->FindTensor(p + "ffn_up_exps.weight");
        ASSERT_TRUE(g != nullptr && u != nullptr);
        const size_t slab = g->n_bytes / static_cast<size_t>(g->dims[2]);
        std::vector<uint8_t>& out = fused_bytes.emplace_back();
        for (int64_t e = 0; e < g->dims[2]; ++e) {
          out.insert(out.end(), g->data + e * slab, g->data + (e + 1) * slab);
          out.insert(out.end(), u->data + e * slab, u->data + (e + 1) * slab);
        }
        ASSERT_TRUE(w.AddTensor(p + "ffn_gate_up_exps.weight", {g->dims[0], 2 * g->dims[1], g->dims[2]},
                                g->type, std::span<const uint8_t>(out))
                        .ok());
        apart.push_back(p + "ffn_gate_exps.weight");
        apart.push_back(p + "ffn_up_exps.weight");
      }
    };
    std::vector<uint8_t> fused = test_util::RewriteKeys(*f, {}, fuse, {});
    // RewriteKeys copied the separate tensors too: drop them from a second rewrite of the fused file.
    auto ff = gguf::File::FromBuffer(fused);
    ASSERT_TRUE(ff.ok());
    std::vector<uint8_t> only_fused = test_util::RewriteKeys(
        *ff, {}, [](gguf::Writer&) {}, apart);
    auto a = Load(*bytes), b = Load(only_fused);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    const std::vector<int32_t> prompt = test_util::Prompt(60, 9);
    auto ca = NewCache(*a, 16), cb = NewCache(*b, 16);
    kv::Context xa = ca->NewContext(), xb = cb->NewContext();
    EXPECT_TRUE(Same(Steps(*a, xa, prompt, true), Steps(*b, xb, prompt, true)));
    // A fused tensor as high as one of the two (layer 1's gate alone under the fused name) is refused by
    // name.
    std::vector<std::string> drop = apart;
    drop.push_back("blk.1.ffn_gate_up_exps.weight");
    auto bad = gguf::File::FromBuffer(test_util::RewriteKeys(
        *ff, {},
        [&](gguf::Writer& w) {
          const gguf::TensorInfo* g = f->FindTensor("blk.1.ffn_gate_exps.weight");
          ASSERT_TRUE(
              w.AddTensor("blk.1.ffn_gate_up_exps.weight", g->dims, g->type, std::span(g->data, g->n_bytes))
                  .ok());
        },
        drop));
    ASSERT_TRUE(bad.ok());
    auto refused = Model::FromFile(std::move(*bad));
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.status().message().find("blk.1.ffn_gate_up_exps.weight"), std::string::npos)
        << refused.status().ToString();
  }
}

TEST(MoeHParams, GptOssHasSinksBiasesYarnAndWindowsOnItsEvenLayers) {
  auto bytes = BuildSyntheticModel(test_util::TinyMoeSpec(TensorType::kQ8_0, SyntheticArch::kGptOss));
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto f = gguf::File::FromBuffer(*bytes);
  ASSERT_TRUE(f.ok());
  auto m = Load(*bytes);
  ASSERT_NE(m, nullptr);
  const HParams& hp = m->hparams();
  EXPECT_EQ(hp.arch, Arch::kGptOss);
  EXPECT_EQ(hp.moe.gating, MoeGating::kSoftmaxTopK);
  EXPECT_FALSE(hp.moe.norm_topk);
  EXPECT_TRUE(hp.moe.biases);
  EXPECT_EQ(hp.moe.act, FfnActivation::kSwiGluOai);
  EXPECT_EQ(hp.moe.n_ff_shared, 0u);
  EXPECT_TRUE(hp.attn_sinks);
  EXPECT_TRUE(hp.qkv_bias);
  EXPECT_EQ(hp.rope_type, RopeType::kNeox);
  EXPECT_EQ(hp.windows, (std::vector<uint32_t>{8, 0, 8}));
  EXPECT_EQ(hp.rope_theta_swa, hp.rope_theta);
  EXPECT_EQ(hp.rope_freq_scale, 1.0f / 32.0f);
  EXPECT_EQ(hp.rope_freq_scale_swa, hp.rope_freq_scale);
  EXPECT_EQ(hp.rope_ext_factor, 1.0f);
  EXPECT_NEAR(hp.rope_attn_factor, 1.0f, 1e-6f);  // llama.cpp's mscale over the ln term rope applies
  EXPECT_EQ(hp.n_ctx_orig, 4096u);
  // The sinks, the output bias and the experts' biases are required, by name.
  for (const char* t : {"blk.0.attn_sinks.weight", "blk.1.attn_output.bias", "blk.2.ffn_down_exps.bias",
                        "blk.0.ffn_gate_inp.bias"}) {
    auto g =
        Model::FromFile(*gguf::File::FromBuffer(test_util::RewriteKeys(*f, {}, [](gguf::Writer&) {}, {t})));
    ASSERT_FALSE(g.ok()) << t;
    EXPECT_NE(g.status().message().find(t), std::string::npos) << g.status().ToString();
  }
  // A rope scaling llamay does not know is refused by name.
  auto longrope = Model::FromFile(
      *gguf::File::FromBuffer(test_util::RewriteKeys(*f, {"gpt-oss.rope.scaling.type"}, [](gguf::Writer& w) {
        w.SetString("gpt-oss.rope.scaling.type", "longrope");
      })));
  ASSERT_FALSE(longrope.ok());
  EXPECT_NE(longrope.status().message().find("longrope"), std::string::npos);
}

TEST(MoeHParams, OlmoeNormsWholeQAndKRows) {
  auto bytes = BuildSyntheticModel(test_util::TinyMoeSpec(TensorType::kQ8_0, SyntheticArch::kOlmoe));
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto m = Load(*bytes);
  ASSERT_NE(m, nullptr);
  const HParams& hp = m->hparams();
  EXPECT_EQ(hp.arch, Arch::kOlmoe);
  EXPECT_TRUE(hp.qk_norm_full);
  EXPECT_EQ(hp.moe.gating, MoeGating::kSoftmax);
  EXPECT_FALSE(hp.moe.norm_topk);
  EXPECT_EQ(hp.moe.n_ff_expert, 64u);  // feed_forward_length, as llama.cpp reads it for OLMoE's experts
  EXPECT_EQ(hp.rope_type, RopeType::kNeox);
  // It loaded with norms of [q_dim] and [kv_dim] (the binder checks every shape), not [head_dim].
  auto f = gguf::File::FromBuffer(*bytes);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->FindTensor("blk.0.attn_q_norm.weight")->dims[0], 128);
  EXPECT_EQ(f->FindTensor("blk.0.attn_k_norm.weight")->dims[0], 128);
}

// llama.cpp's distributions at every step of three prompts (6, 40 and 100 tokens) and four continuations:
// each of its top 16 tokens' log-probability within 1e-4 of llamay's (measured: a few 1e-6), and the same
// most probable token. A routing mistake (another gating, no renormalisation where there is one or one
// where there is none, a wrong tie or slot order with weights that differ, a shared expert or its gate left
// out) moves them by far more.
class MoeParity : public testing::TestWithParam<SyntheticArch> {};

std::string ArchName(SyntheticArch arch) {
  switch (arch) {
    case SyntheticArch::kQwen2Moe:
      return "qwen2moe";
    case SyntheticArch::kGraniteHybrid:
      return "granitehybrid";
    case SyntheticArch::kQwen35Moe:
      return "qwen35moe";
    case SyntheticArch::kGptOss:
      return "gpt_oss";
    case SyntheticArch::kOlmoe:
      return "olmoe";
    default:
      return "qwen3moe";
  }
}

// The reference file's name: llama.cpp's architecture name.
std::string RefName(SyntheticArch arch) {
  return arch == SyntheticArch::kGptOss ? "gpt-oss" : ArchName(arch);
}

TEST_P(MoeParity, MatchesLlamaCpp) {
  auto bytes = BuildSyntheticModel(test_util::TinyMoeSpec(TensorType::kF32, GetParam()));
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto ref = test_util::ReadReference("moe_ref_" + RefName(GetParam()) + ".json", *bytes, "make_moe_ref.py");
  ASSERT_NE(ref, nullptr);
  auto m = Load(std::move(*bytes));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(test_util::MatchesReference(*m, *ref, 1e-4, 1e-4, ArchName(GetParam())), 3);
}

INSTANTIATE_TEST_SUITE_P(Arch, MoeParity,
                         testing::Values(SyntheticArch::kQwen3Moe, SyntheticArch::kQwen2Moe,
                                         SyntheticArch::kGraniteHybrid, SyntheticArch::kQwen35Moe,
                                         SyntheticArch::kGptOss, SyntheticArch::kOlmoe),
                         [](const auto& info) { return ArchName(info.param); });

// Prefill groups the batch's (token, slot) pairs by expert and multiplies each expert's rows together;
// every token must still get the bits it gets alone (decoded one at a time), in f32 and in Q8_0, with a
// prompt long enough that experts get many rows (more than a token tile) and others none.
TEST(MoeDeterminism, GroupingByExpertChangesNoTokensBits) {
  for (SyntheticArch arch :
       {SyntheticArch::kQwen3Moe, SyntheticArch::kQwen2Moe, SyntheticArch::kGraniteHybrid,
        SyntheticArch::kQwen35Moe, SyntheticArch::kGptOss, SyntheticArch::kOlmoe}) {
    for (TensorType type : {TensorType::kF32, TensorType::kQ8_0}) {
      SCOPED_TRACE(std::string(TensorTypeName(type)) + ", " + ArchName(arch));
      auto bytes = BuildSyntheticModel(test_util::TinyMoeSpec(type, arch));
      ASSERT_TRUE(bytes.ok());
      auto m = Load(std::move(*bytes));
      ASSERT_NE(m, nullptr);
      const std::vector<int32_t> prompt = test_util::Prompt(150, 11);
      auto cache = NewCache(*m, 64);
      kv::Context batched = cache->NewContext(), single = cache->NewContext();
      const std::vector<float> all = Steps(*m, batched, prompt, true);
      std::vector<float> one_by_one;
      for (const int32_t& t : prompt) {
        const std::vector<float> l = Steps(*m, single, std::span(&t, 1), true);
        one_by_one.insert(one_by_one.end(), l.begin(), l.end());
      }
      EXPECT_TRUE(Same(all, one_by_one));
    }
  }
}

}  // namespace
}  // namespace llamay::model
