// Models with recurrent layers (mamba2, granitehybrid, qwen35; ../shared/ref/models/tiny-*, and synthetic
// qwen35 and qwen35moe models built in memory, test_util::TinyQwen35Spec): hyperparameters, the KV layout
// they imply, and the determinism contract (DESIGN.md section 3) where the state is a recurrent slot: logits
// bit-identical (memcmp) whatever the split of a prompt into steps, the batch composition, the thread count,
// a fork, or a rollback to a checkpoint; and a failed step leaves every context as it was. Parity with
// llama.cpp for these models is in model_test.cc (Parity).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "gguf/gguf.h"
#include "kv/cache.h"
#include "kv/snapshot.h"
#include "model/model.h"
#include "model/model_test_util.h"

namespace llamay::model {
namespace {

using namespace test_util;  // NOLINT: the shared model-test helpers

bool HaveRef() { return std::filesystem::exists(kModels + "tiny-mamba2-f32.gguf"); }

TEST(RecurrentHParams, MambaAndGraniteGeometry) {
  if (!HaveRef()) GTEST_SKIP() << "../shared/ref is absent";
  auto mamba = Model::Load(kModels + "tiny-mamba2-f32.gguf");
  ASSERT_TRUE(mamba.ok()) << mamba.status().ToString();
  const HParams& hp = (*mamba)->hparams();
  EXPECT_EQ(hp.arch, Arch::kMamba2);
  EXPECT_EQ(hp.ffns, std::vector<FfnKind>(hp.n_layer, FfnKind::kNone));
  EXPECT_EQ(hp.n_attention_layers(), 0u);
  EXPECT_EQ(hp.ssm.d_inner, 512u);
  EXPECT_EQ(hp.ssm.head_dim(), 64u);
  EXPECT_EQ(hp.ssm.in_proj_dim(), 1160u);  // the rows of ssm_in in the file
  // conv [3][512 + 2*64], the folded ssm [8][64][64], the chunk header (16), then 16 pending tokens' xdt
  // [8*64], B [64] and dA [8] floats. Before the chunked scan: the conv and the folded state alone.
  EXPECT_EQ(hp.ssm.state_bytes(), 4u * (3 * 640 + 8 * 64 * 64 + 16 + 16 * (512 + 64 + 8)));
  EXPECT_EQ(hp.ssm.legacy_state_bytes(), 4u * (3 * 640 + 8 * 64 * 64));
  const kv::KvLayout l = (*mamba)->KvLayoutFor(16, kv::KvPrecision::kF32);
  EXPECT_TRUE(l.Validate().ok()) << l.Validate().ToString();
  EXPECT_EQ(l.n_attention_layers(), 0u);
  EXPECT_EQ(l.recurrent_layer_bytes, hp.ssm.state_bytes());
  EXPECT_EQ(l.recurrent_legacy_layer_bytes, hp.ssm.legacy_state_bytes());
  EXPECT_EQ(l.checkpoint_tokens, 256u);
  EXPECT_EQ((*mamba)->KvLayoutFor(100, kv::KvPrecision::kF32).checkpoint_tokens,
            300u);  // rounded up to pages
  EXPECT_EQ((*mamba)->KvLayoutFor(16, kv::KvPrecision::kF32, 40).checkpoint_tokens, 48u);

  auto granite = Model::Load(kModels + "tiny-granitehybrid-f32.gguf");
  ASSERT_TRUE(granite.ok()) << granite.status().ToString();
  const HParams& g = (*granite)->hparams();
  EXPECT_EQ(g.arch, Arch::kGraniteHybrid);
  ASSERT_EQ(g.mixers.size(), 4u);
  EXPECT_EQ(g.mixers[0], MixerKind::kMamba2);
  EXPECT_EQ(g.mixers[1], MixerKind::kAttention);
  EXPECT_EQ(g.mixers[2], MixerKind::kMamba2);
  EXPECT_EQ(g.mixers[3], MixerKind::kAttention);
  EXPECT_EQ(g.n_head_kv, 4u);
  EXPECT_EQ(g.head_dim, 32u);
  EXPECT_EQ(g.ffns, std::vector<FfnKind>(g.n_layer, FfnKind::kDense));
  EXPECT_TRUE(g.use_rope);
  const kv::KvLayout gl = (*granite)->KvLayoutFor(64, kv::KvPrecision::kQ8_0);
  EXPECT_TRUE(gl.Validate().ok()) << gl.Validate().ToString();
  EXPECT_EQ(gl.n_attention_layers(), 2u);
  EXPECT_EQ(gl.Groups().slots[3].index, 1u);  // layer 3 is the second attention layer of its group
  EXPECT_EQ(gl.Groups().slots[2].index, 1u);  // layer 2 is the second recurrent layer
}

// Qwen3.5: gated delta net in three of every four layers, gated attention with partial rotary in the fourth;
// the delta net's geometry read through SsmParams (Hv = n_head, Hk = n_group, Dk = d_state, Dv = head_dim).
TEST(RecurrentHParams, Qwen35Geometry) {
  if (!HaveRef()) GTEST_SKIP() << "../shared/ref is absent";
  auto m = Model::Load(kModels + "tiny-qwen35-f32.gguf");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const HParams& hp = (*m)->hparams();
  EXPECT_EQ(hp.arch, Arch::kQwen35);
  ASSERT_EQ(hp.mixers.size(), 8u);
  for (uint32_t l = 0; l < 8; ++l)
    EXPECT_EQ(hp.mixers[l], l % 4 == 3 ? MixerKind::kAttention : MixerKind::kGatedDeltaNet) << l;
  EXPECT_EQ(hp.n_head, 4u);
  EXPECT_EQ(hp.n_head_kv, 2u);
  EXPECT_EQ(hp.head_dim, 64u);
  EXPECT_EQ(hp.n_rot, 16u);  // partial rotary
  EXPECT_EQ(hp.rope_type, RopeType::kNeox);
  EXPECT_EQ(hp.rope_theta, 1e7f);
  EXPECT_TRUE(hp.qk_norm && hp.attn_output_gate);
  EXPECT_EQ(hp.ffns, std::vector<FfnKind>(hp.n_layer, FfnKind::kDense));
  EXPECT_EQ(hp.n_ff, 768u);
  EXPECT_FLOAT_EQ(hp.rms_eps, 1e-6f);
  EXPECT_EQ(hp.ssm.n_head, 4u);             // value heads
  EXPECT_EQ(hp.ssm.n_group, 2u);            // key heads
  EXPECT_EQ(hp.ssm.d_state, 64u);           // key head dim
  EXPECT_EQ(hp.ssm.head_dim(), 64u);        // value head dim
  EXPECT_EQ(hp.ssm.conv_channels(), 512u);  // the rows of attn_qkv: q 128 | k 128 | v 256
  // conv [3][512], the folded delta state [4][64][64], the chunk header (16), then 16 pending tokens' keys
  // [2*64], deltas [4*64] and decays [4] floats.
  EXPECT_EQ(hp.ssm.state_bytes(), 4u * (3 * 512 + 4 * 64 * 64 + 16 + 16 * (2 * 64 + 4 * 64 + 4)));
  EXPECT_EQ(hp.ssm.legacy_state_bytes(), 4u * (3 * 512 + 4 * 64 * 64));
  const kv::KvLayout l = (*m)->KvLayoutFor(16, kv::KvPrecision::kQ8_0);
  EXPECT_TRUE(l.Validate().ok()) << l.Validate().ToString();
  EXPECT_EQ(l.n_attention_layers(), 2u);
  EXPECT_EQ(l.recurrent_layer_bytes, hp.ssm.state_bytes());
  EXPECT_EQ(l.recurrent_bytes(), 6 * hp.ssm.state_bytes());
  EXPECT_EQ(l.Groups().slots[7].index, 1u);  // the second attention layer
  EXPECT_EQ(l.Groups().slots[4].index, 3u);  // the fourth recurrent layer
}

// The file at `path` with the keys `extra` sets added (or replaced), as a GGUF buffer.
std::vector<uint8_t> WithKeys(const std::string& path, const std::function<void(gguf::Writer&)>& extra) {
  return RewriteKeys(path, {}, extra);
}

// Granite's optional keys reach the forward pass: scalings by exact factors (1, a power of two) give exact
// results, an explicit attention scale equal to the default changes nothing, and rope switched off leaves
// position 0 (where rope is the identity) alone and changes the rest.
TEST(GraniteKeys, ScalesAndTheRopeSwitchAreApplied) {
  if (!HaveRef()) GTEST_SKIP() << "../shared/ref is absent";
  const std::string path = kModels + "tiny-granitehybrid-f32.gguf";
  auto logits_with = [&](const std::function<void(gguf::Writer&)>& extra) {
    auto f = gguf::File::FromBuffer(WithKeys(path, extra));
    EXPECT_TRUE(f.ok());
    auto m = Model::FromFile(std::move(*f));
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    auto cache = NewCache(**m);
    kv::Context ctx = cache->NewContext();
    return Steps(**m, ctx, Prompt(20, 3));
  };
  const auto base = logits_with([](gguf::Writer&) {});
  const auto ones = logits_with([](gguf::Writer& w) {
    w.SetFloat32("granitehybrid.embedding_scale", 1.0f);
    w.SetFloat32("granitehybrid.residual_scale", 1.0f);
    w.SetFloat32("granitehybrid.attention.scale", 1.0f / std::sqrt(32.0f));
  });
  EXPECT_TRUE(Same(base, ones));
  auto quarter = logits_with([](gguf::Writer& w) { w.SetFloat32("granitehybrid.logit_scale", 4.0f); });
  for (float& v : quarter) v *= 4.0f;
  EXPECT_TRUE(Same(base, quarter));
  const auto residual =
      logits_with([](gguf::Writer& w) { w.SetFloat32("granitehybrid.residual_scale", 0.5f); });
  EXPECT_FALSE(Same(base, residual));
  const auto no_rope =
      logits_with([](gguf::Writer& w) { w.SetBool("granitehybrid.rope.scaling.finetuned", false); });
  const size_t V = 512;
  EXPECT_EQ(std::memcmp(base.data(), no_rope.data(), V * sizeof(float)), 0);
  EXPECT_NE(std::memcmp(base.data() + V, no_rope.data() + V, V * sizeof(float)), 0);
}

class RecurrentDeterminism : public testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (!Synthetic() && !HaveRef()) GTEST_SKIP() << "../shared/ref is absent";
    auto m = LoadModel();
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::move(*m);
    prompt_ = Prompt(300, 7);
    V_ = model_->hparams().n_vocab;
  }
  // "synth-qwen35-<type>", "synth-qwen35moe-<type>" and "synth-granitemoe-<type>": TinyQwen35Spec, or
  // TinyMoeSpec's qwen35moe (the same layers with experts) or Granite 4.0-H with experts, in that weight
  // type, built in memory; otherwise a reference file.
  bool Synthetic() const { return std::string(GetParam()).starts_with(kSynth); }
  Result<std::unique_ptr<Model>> LoadModel(int threads = 0) const {
    if (!Synthetic()) return Model::Load(kModels + GetParam() + ".gguf", threads);
    const std::string rest = std::string(GetParam()).substr(kSynth.size());
    const size_t dash = rest.find('-');
    const auto type = TensorTypeFromName(rest.substr(dash + 1));
    if (dash == std::string::npos || !type)
      return InvalidArgumentError("unknown type in " + std::string(GetParam()));
    const std::string arch = rest.substr(0, dash);
    const SyntheticSpec spec = arch == "qwen35moe" ? test_util::TinyMoeSpec(*type, SyntheticArch::kQwen35Moe)
                               : arch == "granitemoe"
                                   ? test_util::TinyMoeSpec(*type, SyntheticArch::kGraniteHybrid)
                                   : TinyQwen35Spec(*type);
    LLAMAY_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, BuildSyntheticModel(spec));
    LLAMAY_ASSIGN_OR_RETURN(gguf::File file, gguf::File::FromBuffer(std::move(bytes)));
    return Model::FromFile(std::move(file), threads);
  }
  static inline const std::string kSynth = "synth-";
  // Rows [from, to) of a logits vector with one row per position.
  std::vector<float> Rows(const std::vector<float>& l, size_t from, size_t to) const {
    return std::vector<float>(l.begin() + static_cast<long>(from * V_),
                              l.begin() + static_cast<long>(to * V_));
  }
  std::unique_ptr<Model> model_;
  std::vector<int32_t> prompt_;
  size_t V_ = 0;
};

// One prefill of 300 tokens versus the same tokens split at many points (crossing page boundaries, the
// checkpoint at 256, single-token steps): every position's logits are the same bits.
TEST_P(RecurrentDeterminism, IndependentOfHowThePromptIsSplit) {
  auto cache = NewCache(*model_);
  kv::Context whole = cache->NewContext();
  const auto want = Steps(*model_, whole, prompt_);
  ASSERT_EQ(want.size(), prompt_.size() * V_);
  EXPECT_EQ(whole.state_position(), prompt_.size());
  for (const std::vector<size_t>& cuts :
       std::vector<std::vector<size_t>>{{1},
                                        {63},
                                        {64},
                                        {65},
                                        {127},
                                        {1, 2, 3, 63, 64, 65, 127, 128, 129, 255, 256, 257, 299},
                                        {100, 256}}) {
    kv::Context ctx = cache->NewContext();
    std::vector<float> got;
    size_t at = 0;
    for (size_t i = 0; i <= cuts.size(); ++i) {
      const size_t end = i < cuts.size() ? cuts[i] : prompt_.size();
      const auto l = Steps(*model_, ctx, std::span(prompt_).subspan(at, end - at));
      got.insert(got.end(), l.begin(), l.end());
      at = end;
    }
    EXPECT_TRUE(Same(want, got)) << "split at " << cuts.front() << " (" << cuts.size() << " cuts)";
  }
  // Page size and checkpoint spacing do not matter either.
  auto other = NewCache(*model_, 7, 21);
  kv::Context ctx = other->NewContext();
  EXPECT_TRUE(Same(want, Steps(*model_, ctx, prompt_)));
}

// Several sequences in one step (a prefill chunk next to decode steps, and two prefills) compute what each
// computes alone.
TEST_P(RecurrentDeterminism, IndependentOfBatchComposition) {
  auto cache = NewCache(*model_);
  const std::vector<int32_t> a = Prompt(90, 1), b = Prompt(37, 2);
  kv::Context a_alone = cache->NewContext(), b_alone = cache->NewContext();
  const auto want_a = Steps(*model_, a_alone, a), want_b = Steps(*model_, b_alone, b);
  kv::Context x = cache->NewContext(), y = cache->NewContext();
  std::vector<float> logits;
  SeqInput in[2] = {{&y, b, true}, {&x, a, true}};
  ASSERT_TRUE(model_->Forward(in, &logits).ok());
  EXPECT_TRUE(Same(want_b, Rows(logits, 0, b.size())));
  EXPECT_TRUE(Same(want_a, Rows(logits, b.size(), b.size() + a.size())));
  // A decode step of x batched with a new prefill; then x and y decode together.
  kv::Context z = cache->NewContext();
  const std::vector<int32_t> step = {42}, step2 = {43};
  logits.clear();
  SeqInput mixed[2] = {{&z, a, false}, {&x, step, false}};
  ASSERT_TRUE(model_->Forward(mixed, &logits).ok());
  EXPECT_TRUE(Same(Rows(want_a, a.size() - 1, a.size()), Rows(logits, 0, 1)));
  const auto want_x = Steps(*model_, a_alone, step, false);
  EXPECT_TRUE(Same(want_x, Rows(logits, 1, 2)));
  logits.clear();
  SeqInput both[2] = {{&x, step2, false}, {&y, step2, false}};
  ASSERT_TRUE(model_->Forward(both, &logits).ok());
  EXPECT_TRUE(Same(Steps(*model_, a_alone, step2, false), Rows(logits, 0, 1)));
  EXPECT_TRUE(Same(Steps(*model_, b_alone, step2, false), Rows(logits, 1, 2)));
}

TEST_P(RecurrentDeterminism, IndependentOfThreadCount) {
  auto cache = NewCache(*model_);
  kv::Context a = cache->NewContext();
  const auto want = Steps(*model_, a, std::span(prompt_).first(150));
  for (int threads : {1, 3}) {
    auto m = LoadModel(threads);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    kv::Context b = cache->NewContext();
    EXPECT_TRUE(Same(want, Steps(**m, b, std::span(prompt_).first(150)))) << threads << " threads";
  }
}

// A fork continues exactly as its parent does, and neither sees the other's writes to the shared state.
TEST_P(RecurrentDeterminism, ForkContinuesLikeItsParent) {
  auto cache = NewCache(*model_);
  kv::Context parent = cache->NewContext(), twin = cache->NewContext();
  Steps(*model_, parent, std::span(prompt_).first(100));
  Steps(*model_, twin, std::span(prompt_).first(100));
  kv::Context branch = parent.Fork();
  const std::vector<int32_t> a = {10, 11, 12}, b = {20, 21};
  const auto parent_a = Steps(*model_, parent, a);  // the parent writes first: the branch must not see it
  const auto branch_b = Steps(*model_, branch, b);
  kv::Context reference = twin.Fork();
  EXPECT_TRUE(Same(branch_b, Steps(*model_, reference, b))) << "the branch saw its parent's write";
  EXPECT_TRUE(Same(parent_a, Steps(*model_, twin, a))) << "the parent drifted";
  // Forks decoded together in one batch get what each gets alone.
  std::vector<kv::Context> forks = parent.Fork(3);
  std::vector<float> logits;
  const std::vector<int32_t> t0 = {5}, t1 = {6}, t2 = {5};
  SeqInput in[3] = {{&forks[0], t0, false}, {&forks[1], t1, false}, {&forks[2], t2, false}};
  ASSERT_TRUE(model_->Forward(in, &logits).ok());
  kv::Context alone = parent.Fork();
  const auto want0 = Steps(*model_, alone, t0, false);
  EXPECT_TRUE(Same(want0, Rows(logits, 0, 1)));
  EXPECT_TRUE(Same(want0, Rows(logits, 2, 3)));
  EXPECT_FALSE(Same(want0, Rows(logits, 1, 2)));
}

// A forward that ends on the checkpoint grid leaves a checkpoint; rolling back to it and recomputing gives
// the same bits, while a rollback into the state without a checkpoint is refused and changes nothing.
// A snapshot restored into another page size and checkpoint grid continues bit for bit like the original,
// its checkpoints included.
TEST_P(RecurrentDeterminism, SnapshotRestoreContinuesExactly) {
  auto cache = NewCache(*model_, 16, 32);
  kv::Context ctx = cache->NewContext();
  Steps(*model_, ctx, std::span(prompt_).first(64));
  Steps(*model_, ctx, std::span(prompt_).subspan(64, 41));  // 105 positions, checkpoints at 32 and 64
  kv::SnapshotOptions o;
  o.checkpoints = true;
  auto bytes = kv::SnapshotToBytes(ctx, model_->weight_digest(), o);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto other = NewCache(*model_, 48, 96);  // another page size and checkpoint grid
  auto restored = kv::RestoreSnapshot(*other, *bytes, model_->weight_digest());
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  const std::vector<int32_t> more = {40, 41, 42, 43};
  EXPECT_TRUE(Same(Steps(*model_, ctx, more), Steps(*model_, *restored, more)));
  // The restored checkpoints are real: rolling both back to 64 and recomputing agrees too.
  ASSERT_TRUE(ctx.Rollback(64).ok());
  ASSERT_TRUE(restored->Rollback(64).ok());
  EXPECT_TRUE(Same(Steps(*model_, ctx, more), Steps(*model_, *restored, more)));
}

TEST_P(RecurrentDeterminism, RollbackToACheckpointRecomputesExactly) {
  auto cache = NewCache(*model_, 16, 32);
  kv::Context ctx = cache->NewContext();
  std::vector<float> want;
  for (size_t end : {32, 50, 64, 100, 128}) {  // steps ending at 50 and 100 are off the grid: no checkpoint
    const auto l = Steps(*model_, ctx, std::span(prompt_).subspan(ctx.size(), end - ctx.size()));
    want.insert(want.end(), l.begin(), l.end());
  }
  EXPECT_EQ(ctx.CheckpointPositions(), (std::vector<size_t>{32, 64, 128}));
  // Refused: no checkpoint at 100 (the state has consumed 128).
  EXPECT_EQ(ctx.Rollback(100).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(ctx.size(), 128u);
  EXPECT_EQ(ctx.state_position(), 128u);
  for (size_t back : {64, 32}) {
    ASSERT_TRUE(ctx.Rollback(back).ok()) << back;
    EXPECT_EQ(ctx.state_position(), back);
    const auto again = Steps(*model_, ctx, std::span(prompt_).subspan(back, 128 - back));
    EXPECT_TRUE(Same(Rows(want, back, 128), again)) << "recomputed from the checkpoint at " << back;
  }
  // Continuing after the recompute: the same as a context that never rolled back.
  kv::Context straight = cache->NewContext();
  Steps(*model_, straight, std::span(prompt_).first(128));
  const std::vector<int32_t> more = {7, 8, 9};
  EXPECT_TRUE(Same(Steps(*model_, straight, more), Steps(*model_, ctx, more)));
}

// Speculative decoding's rollback: a step of T tokens recorded for undo, then taken back to keep k of them,
// leaves the recurrent state byte for byte as a step of only those k tokens (conv window, pending count,
// every pending slot, stale ones too) and continues with the same logits; at every chunk phase, for every
// k. A step that could fold a chunk is refused, and so is a rewind of a context the step did not leave.
TEST_P(RecurrentDeterminism, RewindOfAStepIsExactAtEveryChunkPhase) {
  auto cache = NewCache(*model_, 16, 0);
  const size_t state_bytes = cache->groups().recurrent.page_bytes;
  auto state_of = [&](const kv::Context& c) {
    return std::vector<uint8_t>(c.StateData(), c.StateData() + state_bytes);
  };
  for (size_t start : {size_t{20}, size_t{32}, size_t{37}, size_t{45}}) {
    const size_t room = model_->RewindableTokens(start);
    EXPECT_EQ(room, 15 - start % 16) << start;
    if (room < 2) continue;
    for (size_t keep = 1; keep < room; keep += 3) {
      kv::Context spec = cache->NewContext();
      Steps(*model_, spec, std::span(prompt_).first(start), false);
      RecurrentUndo undo;
      std::vector<float> logits;
      SeqInput in{&spec, std::span(prompt_).subspan(start, room), true, false, &undo};
      ASSERT_TRUE(model_->Forward(std::span(&in, 1), &logits).ok());
      ASSERT_TRUE(model_->RewindRecurrent(spec, start + keep, undo).ok()) << start << " " << keep;
      EXPECT_EQ(spec.size(), start + keep);
      EXPECT_EQ(spec.state_position(), start + keep);
      kv::Context plain = cache->NewContext();
      Steps(*model_, plain, std::span(prompt_).first(start), false);
      Steps(*model_, plain, std::span(prompt_).subspan(start, keep), false);
      EXPECT_TRUE(state_of(spec) == state_of(plain)) << "start " << start << ", keep " << keep;
      const std::vector<int32_t> more = {5, 6, 7, 8};
      EXPECT_TRUE(Same(Steps(*model_, plain, more), Steps(*model_, spec, more))) << start << " " << keep;
    }
  }
  // Refused: a step that reaches a chunk's last slot, and a rewind of a context grown since.
  kv::Context ctx = cache->NewContext();
  Steps(*model_, ctx, std::span(prompt_).first(40), false);
  RecurrentUndo undo;
  std::vector<float> logits;
  SeqInput too_long{&ctx, std::span(prompt_).subspan(40, 8), true, false, &undo};
  EXPECT_EQ(model_->Forward(std::span(&too_long, 1), &logits).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ctx.size(), 40u);
  SeqInput ok{&ctx, std::span(prompt_).subspan(40, 4), true, false, &undo};
  ASSERT_TRUE(model_->Forward(std::span(&ok, 1), &logits).ok());
  Steps(*model_, ctx, std::span(prompt_).subspan(44, 1), false);
  EXPECT_EQ(model_->RewindRecurrent(ctx, 42, undo).code(), StatusCode::kFailedPrecondition);
}

// A context matched in the prefix tree starts from a cached recurrent state (a checkpoint, or the live slot
// of a retained context) and continues with the bits of a context that computed everything itself.
TEST_P(RecurrentDeterminism, PrefixTreeReuseContinuesExactly) {
  auto cache = NewCache(*model_, 16, 32);
  kv::Context first = cache->NewContext();
  for (size_t end : {32, 64, 74})
    Steps(*model_, first, std::span(prompt_).subspan(first.size(), end - first.size()));
  ASSERT_TRUE(cache->Retain(first).ok());
  first.Close();
  kv::Context straight = cache->NewContext();
  const auto want = Steps(*model_, straight, std::span(prompt_).first(100));
  kv::MatchResult m = cache->Match(std::span(prompt_).first(100));
  ASSERT_TRUE(m.context.valid());
  EXPECT_TRUE(m.matched == 64 || m.matched == 74) << m.matched;
  EXPECT_EQ(m.context.size(), m.matched);
  EXPECT_EQ(m.context.state_position(), m.matched);
  const auto rest = Steps(*model_, m.context, std::span(prompt_).subspan(m.matched, 100 - m.matched));
  EXPECT_TRUE(Same(Rows(want, m.matched, 100), rest));
}

// A step that fails (a bad token; the memory budget when the state must be copied) leaves every context as
// it was: the next step computes what it would have computed.
TEST_P(RecurrentDeterminism, FailedStepLeavesContextsIntact) {
  auto probe = NewCache(*model_);
  const size_t slot = probe->layout().recurrent_bytes();
  const size_t page = probe->layout().page_bytes();
  // Room for the parent's slot and 3 pages and a branch's copy of the last page, not for a second slot.
  auto cache = NewCache(*model_, 16, 0, slot + 4 * page + slot / 2);
  kv::Context parent = cache->NewContext(), twin = probe->NewContext();
  Steps(*model_, parent, std::span(prompt_).first(40));
  Steps(*model_, twin, std::span(prompt_).first(40));
  const std::vector<int32_t> bad = {5, 100000};
  std::vector<float> logits;
  SeqInput in{&parent, bad, false};
  EXPECT_EQ(model_->Forward(std::span(&in, 1), &logits).code(), StatusCode::kInvalidArgument);
  kv::Context branch = parent.Fork();
  const std::vector<int32_t> next = {9, 10};
  SeqInput b{&branch, next, true};
  EXPECT_EQ(model_->Forward(std::span(&b, 1), &logits).code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(logits.empty());
  EXPECT_EQ(branch.size(), 40u);
  EXPECT_EQ(branch.state_position(), 40u);
  branch.Close();
  EXPECT_TRUE(Same(Steps(*model_, twin, next), Steps(*model_, parent, next)));
}

// Snapshots written before the chunked scans (src/model/testdata: `llamay ctx build --f32` of a 41-token
// prompt by commit 9a59bc9, whose kernels updated the state token by token) still restore: each layer's
// state, zero-extended, is the folded state with nothing pending. They continue as a cold run of today's
// kernels does, to rounding: the same mathematics in two orders, within the f32 parity bound (1e-3).
TEST(RecurrentLegacy, SnapshotsOfThePerTokenScansStillLoadAndContinue) {
  if (!HaveRef()) GTEST_SKIP() << "../shared/ref is absent";
  auto max_diff = [](const std::vector<float>& a, const std::vector<float>& b) {
    EXPECT_EQ(a.size(), b.size());
    double d = 0;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) d = std::max(d, std::fabs(double{a[i]} - b[i]));
    return d;
  };
  for (const std::string name : {"granitehybrid", "qwen35"}) {
    auto m = Model::Load(kModels + "tiny-" + name + "-f32.gguf");
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    std::ifstream in(std::string(LLAMAY_SOURCE_DIR) + "/src/model/testdata/legacy_" + name + ".llamayctx",
                     std::ios::binary);
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_GT(bytes.size(), 1000u) << name;
    auto cache = NewCache(**m, 64);
    ASSERT_GT(cache->layout().recurrent_layer_bytes, cache->layout().recurrent_legacy_layer_bytes);
    std::vector<float> stored;
    auto restored = kv::RestoreSnapshot(*cache, bytes, (*m)->weight_digest(), &stored);
    ASSERT_TRUE(restored.ok()) << name << ": " << restored.status().ToString();
    const std::vector<int32_t> tokens = restored->tokens();
    ASSERT_EQ(tokens.size(), 41u);
    EXPECT_EQ(restored->state_position(), 41u);
    kv::Context cold = cache->NewContext();
    EXPECT_LT(max_diff(stored, Steps(**m, cold, tokens, false)), 1e-3)
        << name << ": the stored next-token logits";
    const std::vector<int32_t> more = {42, 43};
    EXPECT_LT(max_diff(Steps(**m, *restored, more), Steps(**m, cold, more)), 1e-3) << name << ": continued";
  }
}

INSTANTIATE_TEST_SUITE_P(Models, RecurrentDeterminism,
                         testing::Values("tiny-mamba2-f32", "tiny-mamba2-q8_0", "tiny-granitehybrid-f32",
                                         "tiny-granitehybrid-q8_0", "tiny-qwen35-f32", "tiny-qwen35-q8_0",
                                         "synth-qwen35-f32", "synth-qwen35-q8_0", "synth-qwen35moe-q8_0",
                                         "synth-granitemoe-q8_0"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace llamay::model
