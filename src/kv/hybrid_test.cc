// The state engine for hybrid and windowed layouts: recurrent slots, checkpoints and their lifecycle
// (seed 003), rollback, windows, and the byte budget. The randomised lockstep test (kv_model_test)
// covers the same operations in random order; these pin each transition down by name.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <span>
#include <vector>

#include "kv/cache.h"
#include "kv/test_util.h"

namespace llamay::kv {
namespace {

using testing_util::ExpectInvariants;
using testing_util::Iota;
using testing_util::MakeCache;

constexpr size_t kLayerState = 32;

// Layers: full attention, recurrent, windowed attention (window 8), recurrent.
KvLayout HybridLayout(uint32_t page_tokens = 4) {
  KvLayout l = testing_util::SmallLayout(page_tokens);
  l.n_layers = 4;
  l.layer_specs = {{LayerKind::kAttention, 0},
                   {LayerKind::kRecurrent, 0},
                   {LayerKind::kAttention, 8},
                   {LayerKind::kRecurrent, 0}};
  l.recurrent_layer_bytes = kLayerState;
  l.checkpoint_tokens = page_tokens;
  return l;
}

// Writes `tag` over the whole live slot and commits it at size().
void Advance(Context& c, uint8_t tag) {
  auto st = c.MutableState();
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  std::memset(*st, tag, 2 * kLayerState);
  ASSERT_TRUE(c.CommitState(c.size()).ok());
}

uint8_t StateTag(const Context& c) {
  const uint8_t* s = c.StateData();
  return s ? s[0] : 0;
}

TEST(Layout, GroupsFollowTheSpecs) {
  const KvLayout l = HybridLayout();
  ASSERT_TRUE(l.Validate().ok());
  const StateGroups g = l.Groups();
  ASSERT_EQ(g.attention.size(), 2u);
  EXPECT_EQ(g.attention[0].layers, std::vector<uint32_t>({0}));
  EXPECT_EQ(g.attention[1].window, 8u);
  EXPECT_EQ(g.recurrent.layers, std::vector<uint32_t>({1, 3}));
  EXPECT_EQ(g.recurrent.page_bytes, 2 * kLayerState);
  EXPECT_EQ(g.slots[3].index, 1u);
  EXPECT_EQ(l.page_bytes(), 2 * l.layer_bytes());
  // A pure-attention layout is one group of every layer: today's page.
  const KvLayout pure = testing_util::SmallLayout();
  EXPECT_EQ(pure.Groups().attention.size(), 1u);
  EXPECT_EQ(pure.Groups().attention[0].page_bytes, pure.page_bytes());
  EXPECT_FALSE(pure.Groups().has_recurrent());
}

TEST(Layout, RefusesInconsistentSpecs) {
  KvLayout l = HybridLayout();
  l.recurrent_layer_bytes = 0;
  EXPECT_FALSE(l.Validate().ok());
  l = HybridLayout();
  l.layer_specs.pop_back();
  EXPECT_FALSE(l.Validate().ok());
  l = HybridLayout();
  l.checkpoint_tokens = 6;  // not a multiple of the page
  EXPECT_FALSE(l.Validate().ok());
  // A pure recurrent model needs no row geometry.
  KvLayout r;
  r.n_layers = 2;
  r.layer_specs = {{LayerKind::kRecurrent, 0}, {LayerKind::kRecurrent, 0}};
  r.recurrent_layer_bytes = 16;
  EXPECT_TRUE(r.Validate().ok());
}

TEST(Hybrid, RecurrentLayersHaveNoRows) {
  auto cache = MakeCache(HybridLayout());
  Context c = cache->NewContext();
  ASSERT_TRUE(c.Append(Iota(3)).ok());
  std::vector<float> row(c.layout().row_elems(), 1.0f);
  EXPECT_EQ(c.WriteRow(0, 1, KvKind::kKey, row).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(c.WriteRow(0, 2, KvKind::kKey, row).ok());
  EXPECT_EQ(c.n_pages(), 2u);  // one page per attention group
}

TEST(Hybrid, ForkSharesTheSlotAndTheFirstWriteCopiesIt) {
  auto cache = MakeCache(HybridLayout());
  Context parent = cache->NewContext();
  ASSERT_TRUE(parent.Append(Iota(5)).ok());
  Advance(parent, 7);
  const uint64_t before = cache->Stats().pages_allocated_total;
  Context child = parent.Fork();
  EXPECT_EQ(cache->Stats().pages_allocated_total, before) << "fork allocated";
  EXPECT_EQ(child.StateData(), parent.StateData());
  Advance(child, 9);
  EXPECT_EQ(StateTag(parent), 7);
  EXPECT_EQ(StateTag(child), 9);
  EXPECT_NE(child.StateData(), parent.StateData());
  EXPECT_EQ(cache->Stats().states_live, 2u);
  ExpectInvariants(*cache);
}

TEST(Hybrid, RollbackNeedsACheckpointBelowTheState) {
  auto cache = MakeCache(HybridLayout());
  Context c = cache->NewContext();
  ASSERT_TRUE(c.Append(Iota(4)).ok());
  Advance(c, 1);
  ASSERT_TRUE(c.Checkpoint().ok());
  ASSERT_TRUE(c.Append(Iota(4, 4)).ok());
  Advance(c, 2);
  ASSERT_TRUE(c.Append(Iota(3, 8)).ok());  // appended, not consumed yet
  EXPECT_EQ(c.state_position(), 8u);
  EXPECT_EQ(c.CheckpointPositions(), std::vector<size_t>({4}));
  // Dropping positions the state has not consumed is always possible.
  ASSERT_TRUE(c.Rollback(9).ok());
  EXPECT_EQ(StateTag(c), 2);
  // Below the state, only at a checkpoint; a refusal changes nothing.
  Status s = c.Rollback(6);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("checkpoints at: 4"), std::string::npos) << s.ToString();
  EXPECT_EQ(c.size(), 9u);
  EXPECT_EQ(StateTag(c), 2);
  ASSERT_TRUE(c.Rollback(4).ok());
  EXPECT_EQ(c.state_position(), 4u);
  EXPECT_EQ(StateTag(c), 1);
  // The checkpoint survives the rollback to it and is still the frozen state after a write.
  ASSERT_TRUE(c.Append(Iota(1, 4)).ok());
  Advance(c, 3);
  ASSERT_TRUE(c.Rollback(4).ok());
  EXPECT_EQ(StateTag(c), 1);
  ASSERT_TRUE(c.Rollback(0).ok());
  EXPECT_EQ(c.StateData(), nullptr);
  EXPECT_TRUE(c.CheckpointPositions().empty());
  ExpectInvariants(*cache);
}

// The owner rewound the live slot itself (the model taking back a verified draft's rejected tokens): the
// context drops the positions and the state position follows, with no checkpoint; the slot is untouched.
TEST(Hybrid, RollbackRewoundNeedsNoCheckpoint) {
  auto cache = MakeCache(HybridLayout());
  Context c = cache->NewContext();
  ASSERT_TRUE(c.Append(Iota(4)).ok());
  Advance(c, 1);
  ASSERT_TRUE(c.Checkpoint().ok());
  ASSERT_TRUE(c.Append(Iota(5, 4)).ok());
  Advance(c, 2);
  EXPECT_EQ(c.state_position(), 9u);
  EXPECT_EQ(c.Rollback(6).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(c.RollbackRewound(10).code(), StatusCode::kOutOfRange);
  ASSERT_TRUE(c.RollbackRewound(6).ok());
  EXPECT_EQ(c.size(), 6u);
  EXPECT_EQ(c.state_position(), 6u);
  EXPECT_EQ(StateTag(c), 2);  // what the owner left there
  EXPECT_EQ(c.CheckpointPositions(), std::vector<size_t>({4}));
  ASSERT_TRUE(c.RollbackRewound(3).ok());  // checkpoints past it go
  EXPECT_TRUE(c.CheckpointPositions().empty());
  ExpectInvariants(*cache);
}

TEST(Hybrid, ALongContextsCheckpointsStayBoundedAndSpanIt) {
  auto cache = MakeCache(HybridLayout());
  Context c = cache->NewContext();
  for (int i = 0; i < 40; ++i) {  // a checkpoint every 4 positions up to 160
    ASSERT_TRUE(c.Append(Iota(4, 4 * i)).ok());
    Advance(c, static_cast<uint8_t>(i + 1));
    ASSERT_TRUE(c.Checkpoint().ok());
  }
  const std::vector<size_t> cps = c.CheckpointPositions();
  ASSERT_LE(cps.size(), kMaxContextCheckpoints);
  EXPECT_GE(cps.size(), kMaxContextCheckpoints / 2);
  EXPECT_EQ(cps.front(), 4u);   // the first stays
  EXPECT_EQ(cps.back(), 160u);  // and the newest
  // The dropped ones released their states: the live slot and the kept checkpoints are all that remain.
  EXPECT_EQ(cache->Stats().states_live, cps.size());  // the newest checkpoint shares the live slot
  // A kept checkpoint still rolls back exactly.
  const size_t mid = cps[cps.size() / 2];
  ASSERT_TRUE(c.Rollback(mid).ok());
  EXPECT_EQ(StateTag(c), static_cast<uint8_t>(mid / 4));
  ExpectInvariants(*cache);
}

TEST(Hybrid, CommitStaysWithinTheContext) {
  auto cache = MakeCache(HybridLayout());
  Context c = cache->NewContext();
  ASSERT_TRUE(c.Append(Iota(2)).ok());
  EXPECT_EQ(c.CommitState(3).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(c.CommitState(1).code(), StatusCode::kFailedPrecondition);  // never written
  Advance(c, 1);
  EXPECT_EQ(c.CommitState(1).code(), StatusCode::kOutOfRange);  // backwards
}

// The seed's lifecycle: live slot -> frozen copy at an aligned boundary -> donated to the node ending
// there -> matched (reuse truncated to it) -> copied into the new request's slot on its first write,
// the cached one unchanged -> protected while held -> evicted independently of the KV.
TEST(Hybrid, CheckpointLifecycleThroughThePrefixTree) {
  auto cache = MakeCache(HybridLayout());
  Context a = cache->NewContext();
  ASSERT_TRUE(a.Append(Iota(8)).ok());
  Advance(a, 8);
  ASSERT_TRUE(a.Checkpoint().ok());  // at 8
  ASSERT_TRUE(a.Append(Iota(5, 8)).ok());
  Advance(a, 13);  // the final state at 13 (unaligned, but its node ends exactly there)
  ASSERT_TRUE(cache->Retain(a).ok());
  auto cps = cache->TreeCheckpoints();
  ASSERT_EQ(cps.size(), 2u);
  EXPECT_EQ(cps[0].tokens.size(), 8u);
  EXPECT_EQ(cps[1].tokens.size(), 13u);
  ExpectInvariants(*cache);

  // A prompt sharing 11 tokens resumes at 8: the deepest checkpoint on the shared path.
  std::vector<int32_t> q = Iota(11);
  q.push_back(99);
  MatchResult m = cache->Match(q);
  EXPECT_EQ(m.matched, 8u);
  EXPECT_EQ(m.context.size(), 8u);
  EXPECT_EQ(m.context.state_position(), 8u);
  EXPECT_EQ(StateTag(m.context), 8);
  // The whole prefix resumes at 13 with the final state.
  MatchResult full = cache->Match(Iota(14));
  EXPECT_EQ(full.matched, 13u);
  EXPECT_EQ(StateTag(full.context), 13);

  // Writing the matched context's slot copies it: the cached checkpoint never changes.
  Advance(m.context, 42);
  MatchResult again = cache->Match(q);
  EXPECT_EQ(StateTag(again.context), 8);

  // Evict everything: the contexts still hold their states (protected), the tree holds nothing.
  while (cache->EvictOne()) {
  }
  EXPECT_EQ(cache->Stats().tree_checkpoints, 0u);
  EXPECT_EQ(StateTag(again.context), 8);
  EXPECT_EQ(StateTag(full.context), 13);
  ExpectInvariants(*cache);
  a.Close();
  m.context.Close();
  full.context.Close();
  again.context.Close();
  EXPECT_EQ(cache->Stats().pages_live, 0u);
  EXPECT_EQ(cache->Stats().bytes_live, 0u);
}

TEST(Hybrid, NoCheckpointNoReuse) {
  auto cache = MakeCache(HybridLayout());
  Context a = cache->NewContext();
  ASSERT_TRUE(a.Append(Iota(8)).ok());
  Advance(a, 1);
  ASSERT_TRUE(a.Append(Iota(2, 8)).ok());  // 10 positions, the state only at 8: an unaligned tail
  ASSERT_TRUE(cache->Retain(a).ok());
  // No checkpoint was taken and the state does not cover the whole context: nothing is donated, and a
  // shorter prefix is never presented with that state.
  EXPECT_TRUE(cache->TreeCheckpoints().empty());
  MatchResult m = cache->Match(Iota(10));
  EXPECT_EQ(m.matched, 0u);
  EXPECT_EQ(m.context.size(), 0u);
}

// Under the last-use policy (CheckpointRetention::kLastUse); the value policy keeps this layout's
// checkpoints (64 bytes of state against 512 bytes of KV a token) longer, as ValuePolicy* below show.
TEST(Hybrid, CheckpointsAreEvictedBeforeOlderEntriesAndTheNodeCollapses) {
  CacheOptions o;
  o.layout = HybridLayout();
  o.checkpoint_retention = CheckpointRetention::kLastUse;
  auto created = Cache::Create(o);
  ASSERT_TRUE(created.ok());
  auto cache = std::move(*created);
  Context a = cache->NewContext();
  ASSERT_TRUE(a.Append(Iota(4)).ok());
  Advance(a, 4);
  ASSERT_TRUE(a.Checkpoint().ok());
  ASSERT_TRUE(a.Append(Iota(4, 4)).ok());
  Advance(a, 8);
  ASSERT_TRUE(cache->Retain(a).ok());  // entry tick 1, checkpoints at 8 (tick 2) and 4 (tick 3)
  const size_t nodes = cache->Stats().tree_nodes;
  auto v = cache->NextVictimOf();
  ASSERT_TRUE(v.has_value());
  EXPECT_FALSE(v->second) << "the entry was used before either checkpoint";
  // Pinning the entry protects it and the checkpoint at its end; the checkpoint at 4 goes first.
  ASSERT_TRUE(cache->SetPinned(Iota(8), true));
  v = cache->NextVictimOf();
  ASSERT_TRUE(v.has_value());
  EXPECT_TRUE(v->second);
  EXPECT_EQ(v->first.size(), 4u);
  ASSERT_TRUE(cache->EvictOne());
  EXPECT_EQ(cache->Stats().tree_nodes, nodes - 1) << "the checkpoint node collapsed";
  EXPECT_FALSE(cache->EvictOne());
  EXPECT_EQ(cache->Match(Iota(6)).matched, 0u);
  EXPECT_EQ(cache->Match(Iota(9)).matched, 8u);
  ExpectInvariants(*cache);
}

TEST(CheckpointWorth, IsTheSavedPrefillPerByteOfStateAgainstAnEntrysKv) {
  // 100 tokens saved; KV 4096 bytes a token (65536 for 16); a 1 MiB state: 100 * 4096 / 2^20.
  EXPECT_EQ(CheckpointWorth(100, 0, 65536, 16, 1 << 20), 0.390625);
  EXPECT_EQ(CheckpointWorth(100, 3, 65536, 16, 1 << 20), 4 * 0.390625);
  // Resumes count up to 15.
  EXPECT_EQ(CheckpointWorth(100, 15, 65536, 16, 1 << 20), 16 * 0.390625);
  EXPECT_EQ(CheckpointWorth(100, 1000, 65536, 16, 1 << 20), 16 * 0.390625);
  // No attention layers: entries hold no memory; saved pages of tokens.
  EXPECT_EQ(CheckpointWorth(40, 1, 0, 16, 1 << 20), 5.0);
  EXPECT_EQ(CheckpointWorth(0, 7, 65536, 16, 1 << 20), 0.0);
}

// A layout whose state is large beside its KV (two recurrent layers of 4 KiB: 8 KiB, the KV of 16 tokens),
// as on the real hybrids, where a checkpoint costs the KV of thousands of tokens.
KvLayout BigStateLayout() {
  KvLayout l = HybridLayout();
  l.recurrent_layer_bytes = 4096;
  return l;
}

// An agent's shape of traffic: a 64-token system prompt with a checkpoint at its end; three requests
// resume from it and are kept, each with a checkpoint 4 tokens further; then six short unrelated
// requests, each kept with a checkpoint of 4 tokens. Under pressure, evicts one item at a time until the
// system prompt's checkpoint is gone; returns how many evictions that took (and checks a new request on
// the system prompt then no longer resumes from it).
size_t EvictionsUntilTheSystemPromptIsLost(CheckpointRetention policy) {
  CacheOptions o;
  o.layout = BigStateLayout();
  o.checkpoint_retention = policy;
  auto created = Cache::Create(o);
  EXPECT_TRUE(created.ok());
  auto cache = std::move(*created);
  const size_t state = 2 * 4096;
  auto advance = [&](Context& c) {
    auto st = c.MutableState();
    ASSERT_TRUE(st.ok());
    std::memset(*st, static_cast<int>(c.size()), state);
    ASSERT_TRUE(c.CommitState(c.size()).ok());
  };
  const std::vector<int32_t> system = Iota(64, 1000);
  auto with = [&](int32_t first) {
    std::vector<int32_t> t = system;
    for (int32_t i = 0; i < 4; ++i) t.push_back(first + i);
    return t;
  };
  auto system_checkpoint = [&] {
    for (const auto& c : cache->TreeCheckpoints())
      if (c.tokens == system) return std::optional<TreeCheckpointInfo>(c);
    return std::optional<TreeCheckpointInfo>();
  };
  {
    Context a = cache->NewContext();
    EXPECT_TRUE(a.Append(system).ok());
    advance(a);
    EXPECT_TRUE(a.Checkpoint().ok());
    EXPECT_TRUE(a.Append(Iota(4, 5000)).ok());
    advance(a);
    EXPECT_TRUE(cache->Retain(a).ok());
  }
  for (int32_t r = 0; r < 3; ++r) {
    const std::vector<int32_t> q = with(6000 + 10 * r);
    MatchResult m = cache->Match(q);
    EXPECT_EQ(m.matched, 64u);
    EXPECT_TRUE(m.context.Append(std::span(q).subspan(64)).ok());
    advance(m.context);
    EXPECT_TRUE(cache->Retain(m.context).ok());
  }
  for (int32_t i = 0; i < 6; ++i) {
    Context c = cache->NewContext();
    EXPECT_TRUE(c.Append(Iota(4, 100 * (i + 1))).ok());
    advance(c);
    EXPECT_TRUE(cache->Retain(c).ok());
  }
  ExpectInvariants(*cache);
  EXPECT_EQ(cache->TreeCheckpoints().size(), 11u);  // 64, four at 68 and the six short ones
  auto sys = system_checkpoint();
  EXPECT_TRUE(sys.has_value());
  if (!sys) return 0;
  EXPECT_EQ(sys->resumes, 3u);
  size_t evictions = 0;
  while (system_checkpoint().has_value() && cache->EvictOne()) {
    ++evictions;
    ExpectInvariants(*cache);
  }
  EXPECT_LT(cache->Match(with(7000)).matched, 64u);
  return evictions;
}

TEST(Hybrid, TheValuePolicyKeepsACheckpointThatSavesALongPrefixOverOnesThatSaveLittle) {
  // Last use: the checkpoint at 64 was last used by the third request, so it goes seventh, after what
  // was used before that (the first entry and its checkpoint at 68, the first two requests' entries and
  // checkpoints), though each of those saves 4 tokens for 8 KiB of state.
  EXPECT_EQ(EvictionsUntilTheSystemPromptIsLost(CheckpointRetention::kLastUse), 7u);
  // Value: the ten checkpoints worth 4 tokens of prefill for 8 KiB (0.25 of an entry) go first, whenever
  // they were used; the one at 64 (64 tokens, resumed 3 times: worth 16) stays while an entry below it
  // holds its KV, and entries keep their last-use order: the four below it go next, the checkpoint with
  // the last of them.
  EXPECT_EQ(EvictionsUntilTheSystemPromptIsLost(CheckpointRetention::kValue), 14u);
}

TEST(Hybrid, TheBudgetCountsStatesAndCheckpoints) {
  const KvLayout l = HybridLayout();
  const size_t state = 2 * kLayerState;
  // Room for one position's pages (one per group) and one state, not two.
  auto cache = MakeCache(l, 0, l.page_bytes() + state + state / 2);
  Context a = cache->NewContext();
  ASSERT_TRUE(a.Append(Iota(2)).ok());
  Advance(a, 1);
  Context b = a.Fork();
  auto st = b.MutableState();  // a copy would exceed the budget and nothing is evictable
  EXPECT_EQ(st.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(StateTag(b), 1) << "a failed copy leaves the shared state";
  EXPECT_LE(cache->Stats().bytes_live, l.page_bytes() + state + state / 2);
  ExpectInvariants(*cache);
}

// With nothing left in the tree to evict, a context that needs memory gives up checkpoints only it holds,
// the one whose loss costs least first (the fewest positions since the checkpoint before it; ties: middle,
// then first, then newest), one at a time, and never one another context shares.
TEST(Hybrid, UnderMemoryPressureAContextGivesUpItsOwnCheckpointsLeastLossFirst) {
  const KvLayout l = HybridLayout(8);
  // Checkpoints at 4, 8, 10, 16 and 17 (the last shares the live slot); 17 positions fill 3 of 8-token pages.
  auto build = [](Cache& cache) {
    Context c = cache.NewContext();
    uint8_t tag = 0;
    for (size_t n : {4, 4, 2, 6, 1}) {
      EXPECT_TRUE(c.Append(Iota(n, static_cast<int32_t>(c.size()))).ok());
      Advance(c, ++tag);
      EXPECT_TRUE(c.Checkpoint().ok());
    }
    return c;
  };
  size_t full = 0;
  {
    auto roomy = MakeCache(l);
    Context c = build(*roomy);
    full = roomy->Stats().bytes_live;
  }
  auto cache = MakeCache(l, 0, full);  // not a byte to spare once built
  Context c = build(*cache);
  ASSERT_EQ(c.CheckpointPositions(), (std::vector<size_t>{4, 8, 10, 16, 17}));
  // A write to the live slot would copy it: 17 goes (1 position since 16), and then no copy is needed.
  ASSERT_TRUE(c.Append(Iota(1, 17)).ok());
  Advance(c, 6);
  EXPECT_EQ(c.CheckpointPositions(), (std::vector<size_t>{4, 8, 10, 16}));
  ASSERT_TRUE(c.Checkpoint().ok());  // at 18, sharing the live slot
  // Next: 10 and 18 would each cost 2 positions; the middle one goes first, and the copy then fits.
  ASSERT_TRUE(c.Append(Iota(1, 18)).ok());
  Advance(c, 7);
  EXPECT_EQ(c.CheckpointPositions(), (std::vector<size_t>{4, 8, 16, 18}));
  ASSERT_TRUE(c.Checkpoint().ok());  // at 19
  ExpectInvariants(*cache);
  // A fork shares every checkpoint and the live slot: the context has none of its own to give up, fails, and
  // keeps all of them and its state.
  {
    Context f = c.Fork();
    auto st = c.MutableState();
    EXPECT_EQ(st.status().code(), StatusCode::kResourceExhausted);
    EXPECT_EQ(c.CheckpointPositions(), (std::vector<size_t>{4, 8, 16, 18, 19}));
    EXPECT_EQ(f.CheckpointPositions(), (std::vector<size_t>{4, 8, 16, 18, 19}));
    EXPECT_EQ(StateTag(c), 7);
    ExpectInvariants(*cache);
  }
  // The fork gone, 19 (1 position since 18) is the context's own again, and goes.
  Advance(c, 8);
  EXPECT_EQ(c.CheckpointPositions(), (std::vector<size_t>{4, 8, 16, 18}));
  // Every kept checkpoint still rolls back to its own state.
  ASSERT_TRUE(c.Rollback(16).ok());
  EXPECT_EQ(StateTag(c), 4);
  EXPECT_LE(cache->Stats().bytes_live, full);
  ExpectInvariants(*cache);
}

TEST(Windowed, TrimKeepsOnlyTheWindowAndRefusesRollbackPastIt) {
  KvLayout l = testing_util::SmallLayout(4);
  l.n_layers = 2;
  l.layer_specs = {{LayerKind::kAttention, 8}, {LayerKind::kAttention, 0}};
  auto cache = MakeCache(l);
  Context c = cache->NewContext();
  for (int i = 0; i < 250; ++i) {  // a long context, trimmed as it grows
    ASSERT_TRUE(c.Append(Iota(4, i * 4)).ok());
    c.TrimWindows();
  }
  // 250 pages of the global layer; the windowed layer keeps the pages of the last 7 positions.
  EXPECT_EQ(c.n_pages(), 250u + 2u);
  std::vector<float> row(l.row_elems());
  EXPECT_EQ(c.ReadRow(0, 0, KvKind::kKey, row).code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(c.ReadRow(0, 1, KvKind::kKey, row).ok());
  EXPECT_TRUE(c.ReadRow(999, 0, KvKind::kKey, row).ok());
  EXPECT_EQ(c.Rollback(990).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(c.size(), 1000u);
  ASSERT_TRUE(c.Rollback(999).ok());
  ASSERT_TRUE(cache->Retain(c).ok());
  // A match whose window was released resumes nothing; one where it is held resumes.
  EXPECT_EQ(cache->Match(Iota(500)).matched, 0u);
  EXPECT_EQ(cache->Match(Iota(999)).matched, 999u);
  ExpectInvariants(*cache);
}

}  // namespace
}  // namespace llamay::kv
