// gemma3 (../shared/ref/models/tiny-gemma3-*): hyperparameters and the KV layout they imply (five
// sliding-window layers of window 32 in one windowed group, one global layer in a full group), and the
// determinism contract where part of the state is a sliding window whose pages Forward releases
// (Context::TrimWindows after every step): logits bit-identical (memcmp) whatever the split of a prompt
// into steps (so whether the pages behind the window were already released while a query ran), the batch
// composition, the page size or a fork; the windowed group's memory bounded by its window; and nothing
// behind a window ever read. Parity with llama.cpp is in model_test.cc (Parity).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>

#include "gguf/gguf.h"
#include "kv/cache.h"
#include "kv/snapshot.h"
#include "model/model.h"
#include "model/model_test_util.h"

namespace llamay::model {
namespace {

using namespace test_util;  // NOLINT: the shared model-test helpers

bool HaveRef() { return std::filesystem::exists(kModels + "tiny-gemma3-f32.gguf"); }

// Non-null entries of a page list.
size_t Held(const std::vector<const uint8_t*>& pages) {
  size_t n = 0;
  for (const uint8_t* p : pages) n += p != nullptr;
  return n;
}

TEST(Gemma3HParams, SlidingWindowLayout) {
  if (!HaveRef()) GTEST_SKIP() << "../shared/ref is absent";
  auto m = Model::Load(kModels + "tiny-gemma3-f32.gguf");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const HParams& hp = (*m)->hparams();
  EXPECT_EQ(hp.arch, Arch::kGemma3);
  EXPECT_EQ(hp.windows, (std::vector<uint32_t>{32, 32, 32, 32, 32, 0}));
  EXPECT_EQ(hp.rope_theta, 1e6f);
  EXPECT_EQ(hp.rope_theta_swa, 1e4f);
  EXPECT_EQ(hp.rope_type, RopeType::kNeox);
  EXPECT_EQ(hp.head_dim, 128u);
  EXPECT_EQ(hp.n_head, 4u);
  EXPECT_EQ(hp.n_head_kv, 2u);
  EXPECT_EQ(hp.embedding_scale, 16.0f);  // sqrt(256)
  EXPECT_EQ(hp.attention_scale, 1.0f / std::sqrt(128.0f));
  EXPECT_TRUE(hp.qk_norm && hp.post_norms);
  EXPECT_EQ(hp.ffn_act, FfnActivation::kGeGlu);
  EXPECT_FLOAT_EQ(hp.rms_eps, 1e-6f);
  const kv::KvLayout l = (*m)->KvLayoutFor(16, kv::KvPrecision::kF32);
  EXPECT_TRUE(l.Validate().ok()) << l.Validate().ToString();
  ASSERT_EQ(l.layer_specs.size(), 6u);
  EXPECT_EQ(l.spec(0), (kv::LayerSpec{kv::LayerKind::kAttention, 32}));
  EXPECT_EQ(l.spec(5), (kv::LayerSpec{kv::LayerKind::kAttention, 0}));
  const kv::StateGroups g = l.Groups();
  ASSERT_EQ(g.attention.size(), 2u);
  EXPECT_EQ(g.attention[0].window, 32u);
  EXPECT_EQ(g.attention[0].layers, (std::vector<uint32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(g.attention[1].window, 0u);
  EXPECT_EQ(g.attention[1].layers, (std::vector<uint32_t>{5}));
  EXPECT_EQ(g.slots[5].group, 1u);
  EXPECT_EQ(g.slots[5].index, 0u);
  EXPECT_EQ(g.slots[3].group, 0u);
  EXPECT_EQ(g.slots[3].index, 3u);
  EXPECT_FALSE(g.has_recurrent());
}

// The f32 file without the keys `replaced`, with what `extra` sets, as a model.
std::unique_ptr<Model> WithKeys(const std::vector<std::string>& replaced,
                                const std::function<void(gguf::Writer&)>& extra) {
  auto file = gguf::File::FromBuffer(RewriteKeys(kModels + "tiny-gemma3-f32.gguf", replaced, extra));
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  auto m = Model::FromFile(std::move(*file));
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(*m) : nullptr;
}

// The keys that shape the layers reach the forward pass: the pattern as a per-layer array equals the
// period 6 it spells; pattern 0 makes the last layer windowed too; each rope base changes every position
// but 0 (where rope is the identity).
TEST(Gemma3Keys, PatternAndRopeBasesAreApplied) {
  if (!HaveRef()) GTEST_SKIP() << "../shared/ref is absent";
  static constexpr const char* kPattern = "gemma3.attention.sliding_window_pattern";
  static constexpr const char* kBaseSwa = "gemma3.rope.freq_base_swa";
  static constexpr const char* kBase = "gemma3.rope.freq_base";
  const std::vector<int32_t> prompt = Prompt(60, 5);
  const size_t V = 512;
  auto logits = [&](const Model& m) {
    auto cache = NewCache(m);
    kv::Context ctx = cache->NewContext();
    return Steps(m, ctx, prompt);
  };
  auto same_rows = [&](const std::vector<float>& a, const std::vector<float>& b, size_t from, size_t to) {
    return std::memcmp(a.data() + from * V, b.data() + from * V, (to - from) * V * sizeof(float)) == 0;
  };
  auto base = WithKeys({}, [](gguf::Writer&) {});
  ASSERT_TRUE(base);
  const auto want = logits(*base);
  auto array = WithKeys({kPattern}, [](gguf::Writer& w) { w.SetInt32Array(kPattern, {1, 1, 1, 1, 1, 0}); });
  ASSERT_TRUE(array);
  EXPECT_EQ(array->hparams().windows, base->hparams().windows);
  EXPECT_TRUE(Same(want, logits(*array)));
  // Pattern 0 against the same model with the last layer still global, both with one rope base: equal
  // while the window covers every position (0..31), different after.
  auto one_base = WithKeys({kBase}, [](gguf::Writer& w) { w.SetFloat32(kBase, 1e4f); });
  auto all = WithKeys({kBase, kPattern}, [](gguf::Writer& w) {
    w.SetFloat32(kBase, 1e4f);
    w.SetUint32(kPattern, 0);
  });
  ASSERT_TRUE(one_base && all);
  EXPECT_EQ(all->hparams().windows, std::vector<uint32_t>(6, 32));
  const auto global = logits(*one_base), all_windowed = logits(*all);
  EXPECT_TRUE(same_rows(global, all_windowed, 0, 32));
  EXPECT_FALSE(same_rows(global, all_windowed, 32, 33));
  EXPECT_FALSE(same_rows(want, global, 1, 2));  // the global layer's base is applied
  auto base_swa = WithKeys({kBaseSwa}, [](gguf::Writer& w) { w.SetFloat32(kBaseSwa, 500.0f); });
  ASSERT_TRUE(base_swa);
  const auto other_rope = logits(*base_swa);
  EXPECT_TRUE(same_rows(want, other_rope, 0, 1));
  EXPECT_FALSE(same_rows(want, other_rope, 1, 2));
}

class Gemma3Determinism : public testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (!HaveRef()) GTEST_SKIP() << "../shared/ref is absent";
    auto m = Model::Load(kModels + GetParam() + ".gguf");
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::move(*m);
    prompt_ = Prompt(300, 11);
    V_ = model_->hparams().n_vocab;
  }
  std::vector<float> Rows(const std::vector<float>& l, size_t from, size_t to) const {
    return std::vector<float>(l.begin() + static_cast<long>(from * V_),
                              l.begin() + static_cast<long>(to * V_));
  }
  std::unique_ptr<Model> model_;
  std::vector<int32_t> prompt_;
  size_t V_ = 0;
};

// One prefill of 300 tokens computes every position while every page is held (Forward trims only after
// the step); split prefills and a token-by-token decode compute them after the pages behind the window
// were released. Every position's logits are the same bits: the windowed layers never needed (nor read:
// a released entry is null) a page behind their window. Cuts cross the window (32) and pages (16, 64).
TEST_P(Gemma3Determinism, IndependentOfHowThePromptIsSplit) {
  auto cache = NewCache(*model_);
  kv::Context whole = cache->NewContext();
  const auto want = Steps(*model_, whole, prompt_);
  ASSERT_EQ(want.size(), prompt_.size() * V_);
  for (const std::vector<size_t>& cuts :
       std::vector<std::vector<size_t>>{{1},
                                        {31},
                                        {32},
                                        {33},
                                        {63},
                                        {64},
                                        {65},
                                        {1, 2, 3, 31, 32, 33, 47, 48, 49, 64, 65, 96, 97, 128, 160, 200, 299},
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
  // Token by token: before every step, the pages wholly behind the window are gone.
  kv::Context ctx = cache->NewContext();
  std::vector<float> got;
  for (size_t i = 0; i < prompt_.size(); ++i) {
    const auto l = Steps(*model_, ctx, std::span(prompt_).subspan(i, 1));
    got.insert(got.end(), l.begin(), l.end());
  }
  EXPECT_TRUE(Same(want, got)) << "token by token";
  // Page size does not matter either (a window over pages of 7, of 64).
  for (uint32_t pt : {7u, 64u}) {
    auto other = NewCache(*model_, pt);
    kv::Context c = other->NewContext();
    EXPECT_TRUE(Same(want, Steps(*model_, c, prompt_))) << "page_tokens " << pt;
  }
}

// Sequences of different lengths (one deep past its window, with released pages) in one step compute
// what each computes alone.
TEST_P(Gemma3Determinism, IndependentOfBatchComposition) {
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
  // A decode step of x (pages behind its window released) batched with a new prefill; then x and y.
  kv::Context z = cache->NewContext();
  const std::vector<int32_t> step = {42}, step2 = {43};
  logits.clear();
  SeqInput mixed[2] = {{&z, a, false}, {&x, step, false}};
  ASSERT_TRUE(model_->Forward(mixed, &logits).ok());
  EXPECT_TRUE(Same(Rows(want_a, a.size() - 1, a.size()), Rows(logits, 0, 1)));
  EXPECT_TRUE(Same(Steps(*model_, a_alone, step, false), Rows(logits, 1, 2)));
  logits.clear();
  SeqInput both[2] = {{&x, step2, false}, {&y, step2, false}};
  ASSERT_TRUE(model_->Forward(both, &logits).ok());
  EXPECT_TRUE(Same(Steps(*model_, a_alone, step2, false), Rows(logits, 0, 1)));
  EXPECT_TRUE(Same(Steps(*model_, b_alone, step2, false), Rows(logits, 1, 2)));
}

// A fork of a long context (sharing its held window pages and its null released entries) continues as
// its parent does, alone and decoded together with siblings, and neither sees the other's writes.
// A snapshot (the window only, for the local layers) restored into another page size continues bit for bit
// like the original.
TEST_P(Gemma3Determinism, SnapshotRestoreContinuesExactly) {
  auto cache = NewCache(*model_);
  kv::Context ctx = cache->NewContext();
  const std::vector<int32_t> prompt = Prompt(200, 11);
  Steps(*model_, ctx, prompt);
  auto bytes = kv::SnapshotToBytes(ctx, model_->weight_digest());
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto other = NewCache(*model_, 40);
  auto restored = kv::RestoreSnapshot(*other, *bytes, model_->weight_digest());
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  for (int32_t t : {40, 41, 42}) {
    const std::vector<int32_t> one = {t};
    EXPECT_TRUE(Same(Steps(*model_, ctx, one), Steps(*model_, *restored, one))) << "token " << t;
  }
}

TEST_P(Gemma3Determinism, ForkContinuesLikeItsParent) {
  auto cache = NewCache(*model_);
  kv::Context parent = cache->NewContext(), twin = cache->NewContext();
  Steps(*model_, parent, std::span(prompt_).first(100));
  Steps(*model_, twin, std::span(prompt_).first(100));
  kv::Context branch = parent.Fork();
  const std::vector<int32_t> a = {10, 11, 12}, b = {20, 21};
  const auto parent_a = Steps(*model_, parent, a);
  const auto branch_b = Steps(*model_, branch, b);
  kv::Context reference = twin.Fork();
  EXPECT_TRUE(Same(branch_b, Steps(*model_, reference, b))) << "the branch saw its parent's write";
  EXPECT_TRUE(Same(parent_a, Steps(*model_, twin, a))) << "the parent drifted";
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

// After 300 tokens with pages of 16, the windowed group holds ceil(32 / 16) + 1 = 3 pages (positions
// 256..303; a query at 300 reads 269..300), the full group all 19, and the released pages went back to
// the cache. A rollback that would need a released page is refused; one inside the held window is not.
TEST_P(Gemma3Determinism, WindowedMemoryIsBounded) {
  auto cache = NewCache(*model_);
  kv::Context ctx = cache->NewContext();
  Steps(*model_, ctx, prompt_, false);
  const auto windowed = ctx.PageData(0), full = ctx.PageData(1);
  ASSERT_EQ(windowed.size(), 19u);
  EXPECT_EQ(Held(windowed), 3u);
  for (size_t i = 0; i < 16; ++i) EXPECT_EQ(windowed[i], nullptr) << "page " << i;
  EXPECT_EQ(Held(full), 19u);
  EXPECT_EQ(ctx.n_pages(), 22u);
  EXPECT_EQ(cache->Stats().pages_live, 22u);
  // Decoding on keeps it at 2 or 3 pages.
  for (int32_t t = 0; t < 40; ++t) {
    Steps(*model_, ctx, std::vector<int32_t>{static_cast<int32_t>(5 + t)}, false);
    EXPECT_LE(Held(ctx.PageData(0)), 3u);
  }
  EXPECT_EQ(ctx.Rollback(200).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(ctx.size(), 340u);
  EXPECT_TRUE(ctx.Rollback(338).ok());  // a query at 338 reads 307..337: pages 19..21, held
}

// A budget that fits the full group's pages and 4 windowed pages (never the 19 a whole 300-token context
// would take): a token-by-token decode of 300 tokens fits only because Forward releases the windowed pages
// behind the window after each step.
TEST_P(Gemma3Determinism, LongDecodeFitsAWindowSizedBudget) {
  auto probe = NewCache(*model_);
  const kv::StateGroups& g = probe->groups();
  const size_t budget = 19 * g.attention[1].page_bytes + 4 * g.attention[0].page_bytes;
  auto cache = NewCache(*model_, 16, 0, budget);
  kv::Context ctx = cache->NewContext();
  for (size_t i = 0; i < prompt_.size(); ++i) {
    std::vector<float> logits;
    SeqInput in{&ctx, std::span(prompt_).subspan(i, 1), false};
    const Status s = model_->Forward(std::span(&in, 1), &logits);
    ASSERT_TRUE(s.ok()) << "token " << i << ": " << s.ToString();
  }
  EXPECT_EQ(ctx.size(), 300u);
  // The same budget cannot hold a context whose windowed pages are all still there: one 300-token step.
  kv::Context one = cache->NewContext();
  std::vector<float> logits;
  ctx.Close();
  SeqInput in{&one, prompt_, false};
  EXPECT_EQ(model_->Forward(std::span(&in, 1), &logits).code(), StatusCode::kResourceExhausted);
}

// Nothing behind a window is read: garbage written into positions that are still held but behind the
// window of the next query (256..268 for a query at 300) changes none of the windowed layers' results,
// while garbage at the window's first position (269), or anywhere in the global layer, does.
TEST_P(Gemma3Determinism, PositionsBehindTheWindowAreNeverRead) {
  auto cache = NewCache(*model_);
  const std::vector<int32_t> next = {77};
  const uint32_t row = cache->layout().row_elems();
  auto continue_with = [&](const std::function<void(kv::Context&)>& poison) {
    kv::Context ctx = cache->NewContext();
    Steps(*model_, ctx, prompt_, false);
    poison(ctx);
    return Steps(*model_, ctx, next, false);
  };
  auto write = [&](kv::Context& ctx, size_t pos, uint32_t layer) {
    const std::vector<float> junk(row, 100.0f);
    for (kv::KvKind kind : {kv::KvKind::kKey, kv::KvKind::kValue})
      ASSERT_TRUE(ctx.WriteRow(pos, layer, kind, junk).ok()) << pos << ", layer " << layer;
  };
  const auto want = continue_with([](kv::Context&) {});
  EXPECT_TRUE(Same(want, continue_with([&](kv::Context& c) {
                     for (size_t pos = 256; pos < 269; ++pos)
                       for (uint32_t layer = 0; layer < 5; ++layer) write(c, pos, layer);
                   })))
      << "a windowed layer read a position behind its window";
  EXPECT_FALSE(Same(want, continue_with([&](kv::Context& c) { write(c, 269, 0); })))
      << "the window's first position is not read";
  EXPECT_FALSE(Same(want, continue_with([&](kv::Context& c) { write(c, 5, 5); })))
      << "the global layer does not see the whole context";
}

INSTANTIATE_TEST_SUITE_P(Models, Gemma3Determinism, testing::Values("tiny-gemma3-f32", "tiny-gemma3-q8_0"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace llamay::model
