// The read-only views (inspect.h): a context's page identities and refcounts, the pool by holder, and the
// prefix tree's bounded walk with its hit counts, checked against what the operations did.
#include "kv/inspect.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "kv/cache.h"
#include "kv/test_util.h"

namespace llamay::kv {
namespace {

using namespace testing_util;

std::vector<uint64_t> Serials(const ContextView& v, size_t g = 0) {
  std::vector<uint64_t> out;
  for (const PageView& p : v.groups[g]) out.push_back(p.serial);
  return out;
}

Context Retained(Cache& cache, const std::vector<int32_t>& toks, bool pin = false) {
  Context c = cache.NewContext();
  EXPECT_TRUE(c.Append(toks).ok());
  EXPECT_TRUE(cache.Retain(c, pin).ok());
  return c;
}

// The path from the root to node i of a view (edges are whole in these tests: shorter than edge_head).
std::vector<int32_t> PathOf(const TreeView& v, size_t i) {
  std::vector<size_t> chain;
  for (int64_t n = static_cast<int64_t>(i); n >= 0; n = v.nodes[static_cast<size_t>(n)].parent)
    chain.push_back(static_cast<size_t>(n));
  std::vector<int32_t> out;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it)
    out.insert(out.end(), v.nodes[*it].edge.begin(), v.nodes[*it].edge.end());
  return out;
}

const TreeNodeView* NodeFor(const TreeView& v, const std::vector<int32_t>& path) {
  for (size_t i = 0; i < v.nodes.size(); ++i)
    if (PathOf(v, i) == path) return &v.nodes[i];
  return nullptr;
}

TEST(Inspect, AContextsPagesAreIdentifiedAndCountedAcrossAFork) {
  auto cache = MakeCache(SmallLayout(4));
  Context a = cache->NewContext();
  Fill(a, 10, 1);  // 3 pages
  ContextView va = a.Inspect();
  EXPECT_EQ(va.id, a.id());
  EXPECT_EQ(va.size, 10u);
  ASSERT_EQ(va.groups.size(), 1u);
  ASSERT_EQ(va.groups[0].size(), 3u);
  EXPECT_EQ(va.pages_owned, 3u);
  EXPECT_EQ(va.pages_shared, 0u);
  const std::vector<uint64_t> serials = Serials(va);
  EXPECT_EQ(std::set<uint64_t>(serials.begin(), serials.end()).size(), 3u);  // distinct pages

  Context b = a.Fork();
  ContextView vb = b.Inspect();
  va = a.Inspect();
  EXPECT_EQ(Serials(vb), Serials(va));  // the same pages
  for (const PageView& p : vb.groups[0]) EXPECT_EQ(p.refs, 2);
  EXPECT_EQ(vb.pages_shared, 3u);
  EXPECT_EQ(va.pages_shared, 3u);

  // A write to the fork's last page copies it: a new serial there, the first two still shared.
  ASSERT_TRUE(b.WriteRow(9, 0, KvKind::kKey, RowValues(b.layout(), 9, 0, KvKind::kKey, 5)).ok());
  vb = b.Inspect();
  va = a.Inspect();
  EXPECT_EQ(vb.groups[0][0].serial, va.groups[0][0].serial);
  EXPECT_EQ(vb.groups[0][1].serial, va.groups[0][1].serial);
  EXPECT_NE(vb.groups[0][2].serial, va.groups[0][2].serial);
  EXPECT_EQ(vb.groups[0][2].refs, 1);
  EXPECT_EQ(va.groups[0][2].refs, 1);
  EXPECT_EQ(va.pages_shared, 2u);
  EXPECT_EQ(va.pages_owned, 1u);
  ExpectInvariants(*cache);
}

TEST(Inspect, AWindowedGroupShowsTheFirstPagesItReleased) {
  KvLayout l = SmallLayout(4);
  l.layer_specs = {{LayerKind::kAttention, 8}, {LayerKind::kAttention, 0}};  // group 0: window 8
  auto cache = MakeCache(l);
  Context c = cache->NewContext();
  ASSERT_TRUE(c.Append(Iota(20)).ok());
  c.TrimWindows();
  const ContextView v = c.Inspect();
  ASSERT_EQ(v.groups.size(), 2u);
  ASSERT_EQ(v.groups[0].size(), 5u);
  ASSERT_EQ(v.groups[1].size(), 5u);
  // A query at 20 reads positions 13..20: pages 0-2 of the windowed group are gone, the rest held.
  EXPECT_EQ(v.first_held[1], 0u);
  EXPECT_GT(v.first_held[0], 0u);
  for (size_t i = 0; i < 5; ++i) {
    const bool released = (i + 1) * 4 <= v.first_held[0];
    EXPECT_EQ(v.groups[0][i].serial == 0, released) << i;
    EXPECT_EQ(v.groups[0][i].refs == 0, released) << i;
    EXPECT_NE(v.groups[1][i].serial, 0u);
  }
  EXPECT_EQ(v.pages_owned, c.n_pages());
}

TEST(Inspect, ThePoolIsClassifiedByHolder) {
  const KvLayout l = SmallLayout(4);
  const size_t page = l.page_bytes();
  auto cache = MakeCache(l, 0, /*max_bytes=*/100 * page);
  auto expect_covers = [&](const PoolView& v) {
    EXPECT_EQ(v.unique.bytes + v.shared.bytes + v.prefix_only.bytes, v.bytes_live);
    EXPECT_EQ(v.unique.pages + v.shared.pages + v.prefix_only.pages, cache->Stats().pages_live);
    EXPECT_EQ(v.free.bytes, 100 * page - v.bytes_live);
    EXPECT_EQ(v.free.pages, 100 - cache->Stats().pages_live);
    EXPECT_LE(v.evictable.pages, v.prefix_only.pages);
  };
  Context a = cache->NewContext();
  Fill(a, 12, 1);  // 3 pages
  PoolView v = cache->InspectPool();
  EXPECT_EQ(v.unique.pages, 3u);
  EXPECT_EQ(v.page_bytes, page);
  expect_covers(v);

  Context b = a.Fork();
  ASSERT_TRUE(b.WriteRow(0, 0, KvKind::kKey, RowValues(l, 0, 0, KvKind::kKey, 2)).ok());  // copies page 0
  v = cache->InspectPool();
  EXPECT_EQ(v.unique.pages, 2u);  // a's page 0 and b's copy of it
  EXPECT_EQ(v.shared.pages, 2u);
  expect_covers(v);

  ASSERT_TRUE(cache->Retain(a).ok());  // the tree shares a's pages
  b.Close();
  v = cache->InspectPool();
  EXPECT_EQ(v.shared.pages, 3u);
  EXPECT_EQ(v.prefix_only.pages, 0u);
  expect_covers(v);
  EXPECT_EQ(cache->TreePageSerials().size(), 3u);

  a.Close();  // now only the tree holds them, and eviction could free them
  v = cache->InspectPool();
  EXPECT_EQ(v.prefix_only.pages, 3u);
  EXPECT_EQ(v.evictable.pages, 3u);
  EXPECT_EQ(v.evictable.bytes, 3 * page);
  expect_covers(v);

  // Pinned: still the tree's alone, but not evictable.
  ASSERT_TRUE(cache->SetPinned(Iota(12), true));
  v = cache->InspectPool();
  EXPECT_EQ(v.prefix_only.pages, 3u);
  EXPECT_EQ(v.evictable.pages, 0u);
  ExpectInvariants(*cache);
}

TEST(Inspect, TreePageSerialsAreThePagesOfItsEntries) {
  auto cache = MakeCache(SmallLayout(4));
  Context a = cache->NewContext();
  Fill(a, 6, 1);
  Context b = a.Fork();
  Fill(b, 4, 2, 50);  // b: 10 positions, page 1 copied, page 2 new
  ASSERT_TRUE(cache->Retain(a).ok());
  ASSERT_TRUE(cache->Retain(b).ok());
  std::set<uint64_t> want;
  for (const Context* c : {&a, &b})
    for (uint64_t s : Serials(c->Inspect())) want.insert(s);
  const std::vector<uint64_t> got = cache->TreePageSerials();
  EXPECT_EQ(std::set<uint64_t>(got.begin(), got.end()), want);
  EXPECT_TRUE(std::is_sorted(got.begin(), got.end()));
}

TEST(Inspect, HitsFollowMatchesThroughSplitsAndCollapses) {
  auto cache = MakeCache(SmallLayout(4));
  const std::vector<int32_t> sys = {1, 2, 3, 4, 5};
  std::vector<int32_t> q1 = sys, q2 = sys;
  q1.insert(q1.end(), {10, 11, 12});
  q2.insert(q2.end(), {20, 21});
  Retained(*cache, q1);
  TreeView v = cache->InspectTree();
  ASSERT_EQ(v.nodes.size(), 2u);  // the root and one entry
  EXPECT_EQ(v.nodes[1].hits, 0u);
  EXPECT_EQ(v.nodes[1].last_hit_ms, 0);
  EXPECT_TRUE(v.top.empty());

  // A second request shares the system prompt: its match ends inside the entry's edge.
  MatchResult m = cache->Match(q2);
  ASSERT_EQ(m.matched, sys.size());
  v = cache->InspectTree();
  EXPECT_EQ(v.nodes[1].hits, 1u);
  EXPECT_GT(v.nodes[1].last_hit_ms, 0);
  EXPECT_EQ(cache->Stats().tree_hits, 1u);
  EXPECT_EQ(cache->Match(std::vector<int32_t>{42}).matched, 0u);  // no reuse: no hit
  EXPECT_EQ(cache->Stats().tree_hits, 1u);
  const uint64_t entry_id = v.nodes[1].id;

  // Its retain splits the edge where they part: the shared part takes the hit, the branches have none.
  Retained(*cache, q2);
  v = cache->InspectTree();
  ASSERT_EQ(v.nodes.size(), 4u);
  const TreeNodeView* split = NodeFor(v, sys);
  ASSERT_NE(split, nullptr);
  EXPECT_FALSE(split->entry);
  EXPECT_EQ(split->hits, 1u);
  EXPECT_EQ(split->children, 2u);
  EXPECT_EQ(split->depth, 5u);
  EXPECT_EQ(split->pages, 2u);  // positions 0-4 lie in pages 0 and 1
  EXPECT_EQ(NodeFor(v, q1)->hits, 0u);
  EXPECT_EQ(NodeFor(v, q1)->id, entry_id);  // the lower part keeps its identity
  EXPECT_EQ(NodeFor(v, q2)->hits, 0u);
  ASSERT_EQ(v.top.size(), 1u);
  EXPECT_EQ(v.top[0].id, split->id);
  EXPECT_EQ(v.top[0].head, sys);
  EXPECT_EQ(v.top[0].tokens, 5u);
  ExpectInvariants(*cache);

  // A whole-path match counts on every node of its path.
  std::vector<int32_t> longer = q1;
  longer.push_back(99);
  EXPECT_EQ(cache->Match(longer).matched, q1.size());
  v = cache->InspectTree();
  EXPECT_EQ(NodeFor(v, sys)->hits, 2u);
  EXPECT_EQ(NodeFor(v, q1)->hits, 1u);
  ASSERT_EQ(v.top.size(), 2u);
  EXPECT_EQ(v.top[0].hits, 2u);
  EXPECT_EQ(v.top[1].head, q1);

  // Evicting q2's leaf (the least recently used) collapses the split into q1's node, which then counts
  // every match that reached any of its tokens.
  ASSERT_EQ(*cache->NextVictim(), q2);
  ASSERT_TRUE(cache->EvictOne());
  v = cache->InspectTree();
  ASSERT_EQ(v.nodes.size(), 2u);
  EXPECT_EQ(v.nodes[1].hits, 2u);
  EXPECT_EQ(v.nodes[1].edge, q1);
  ExpectInvariants(*cache);
}

TEST(Inspect, TheTreeWalkIsBoundedAndSaysSo) {
  auto cache = MakeCache(SmallLayout(4));
  // 40 branches under one shared token: more than 32 children.
  for (int32_t i = 0; i < 40; ++i) Retained(*cache, {7, 100 + i});
  // Make branch 139 (sorted last) the most hit, so it is among those shown.
  for (int k = 0; k < 3; ++k) cache->Match(std::vector<int32_t>{7, 139});
  TreeView v = cache->InspectTree();
  EXPECT_TRUE(v.truncated);
  EXPECT_EQ(v.nodes_total, 42u);
  EXPECT_EQ(v.entries, 40u);
  ASSERT_EQ(v.nodes[1].children, 40u);
  size_t shown = 0;
  bool hot_shown = false;
  for (const TreeNodeView& n : v.nodes)
    if (n.parent == 1) {
      ++shown;
      hot_shown = hot_shown || n.edge == std::vector<int32_t>{139};
    }
  EXPECT_EQ(shown, 32u);
  EXPECT_TRUE(hot_shown);

  // A chain of 20 nested entries: 16 levels shown below the root.
  auto deep = MakeCache(SmallLayout(4));
  std::vector<int32_t> path;
  for (int32_t i = 0; i < 20; ++i) {
    path.push_back(i);
    Retained(*deep, path);
  }
  v = deep->InspectTree();
  EXPECT_TRUE(v.truncated);
  EXPECT_EQ(v.nodes.size(), 17u);
  EXPECT_EQ(v.nodes.back().level, 16u);
  EXPECT_EQ(v.nodes.back().children, 1u);
  TreeViewOptions wide;
  wide.max_depth = 32;
  EXPECT_FALSE(deep->InspectTree(wide).truncated);
  wide.max_nodes = 5;
  v = deep->InspectTree(wide);
  EXPECT_TRUE(v.truncated);
  EXPECT_EQ(v.nodes.size(), 5u);
  // Parents come before their children.
  for (size_t i = 1; i < v.nodes.size(); ++i) EXPECT_LT(v.nodes[i].parent, static_cast<int64_t>(i));
}

// Random retains and matches (no eviction, so every node that was ever reached still stands): each node's
// hit count equals the number of matches that reused at least one token of its edge, however the edges
// were split after those matches.
TEST(Inspect, HitCountsMatchAReferenceUnderRandomRetainsAndMatches) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    auto cache = MakeCache(SmallLayout(4));
    std::vector<std::vector<int32_t>> matched;  // every match's reused tokens
    auto random_seq = [&] {
      std::vector<int32_t> t(1 + rng() % 12);
      for (auto& x : t) x = static_cast<int32_t>(rng() % 3);  // a small alphabet: many shared prefixes
      return t;
    };
    for (int step = 0; step < 60; ++step) {
      const std::vector<int32_t> t = random_seq();
      if (rng() % 2) {
        Retained(*cache, t);
      } else {
        MatchResult m = cache->Match(t);
        if (m.matched > 0) matched.emplace_back(t.begin(), t.begin() + static_cast<ptrdiff_t>(m.matched));
      }
      ExpectInvariants(*cache);
    }
    TreeViewOptions all;
    all.max_depth = 64;
    const TreeView v = cache->InspectTree(all);
    ASSERT_FALSE(v.truncated);
    for (size_t i = 1; i < v.nodes.size(); ++i) {
      const std::vector<int32_t> path = PathOf(v, i);
      const size_t start = path.size() - v.nodes[i].edge.size();
      uint64_t want = 0;
      for (const auto& m : matched) {
        if (m.size() <= start) continue;
        const size_t n = std::min(m.size(), path.size());
        want += std::equal(m.begin(), m.begin() + static_cast<ptrdiff_t>(n), path.begin());
      }
      EXPECT_EQ(v.nodes[i].hits, want) << "seed " << seed << " node at depth " << path.size();
    }
  }
}

TEST(Inspect, PinnedAndCheckpointFlagsAreReported) {
  KvLayout l = SmallLayout(4);
  l.n_layers = 2;
  l.layer_specs = {{LayerKind::kAttention, 0}, {LayerKind::kRecurrent, 0}};
  l.recurrent_layer_bytes = 32;
  l.checkpoint_tokens = 4;
  auto cache = MakeCache(l);
  Context c = cache->NewContext();
  ASSERT_TRUE(c.Append(Iota(8)).ok());
  ASSERT_TRUE(c.MutableState().ok());
  ASSERT_TRUE(c.CommitState(4).ok());
  ASSERT_TRUE(c.Checkpoint().ok());
  ASSERT_TRUE(c.MutableState().ok());
  ASSERT_TRUE(c.CommitState(8).ok());
  ContextView cv = c.Inspect();
  EXPECT_EQ(cv.state_position, 8u);
  EXPECT_EQ(cv.checkpoints, std::vector<size_t>{4});
  EXPECT_NE(cv.state.serial, 0u);
  ASSERT_TRUE(cache->Retain(c, /*pin=*/true).ok());
  const TreeView v = cache->InspectTree();
  // The entry at 8 holds the donated live slot; the checkpoint at 4 splits off a node of its own.
  const TreeNodeView* at4 = NodeFor(v, Iota(4));
  const TreeNodeView* at8 = NodeFor(v, Iota(8));
  ASSERT_NE(at4, nullptr);
  ASSERT_NE(at8, nullptr);
  EXPECT_TRUE(at4->checkpoint);
  EXPECT_FALSE(at4->entry);
  EXPECT_TRUE(at8->entry);
  EXPECT_TRUE(at8->pinned);
  EXPECT_TRUE(at8->checkpoint);
  c.Close();
  const PoolView p = cache->InspectPool();
  EXPECT_EQ(p.states, 2u);
  EXPECT_EQ(p.states_bytes, 2 * 32u);  // one recurrent layer of 32 bytes
  EXPECT_EQ(p.prefix_only.pages, 2u);
  // The pinned entry's pages and its checkpoint stay; the checkpoint at 4 is not at a pinned entry.
  EXPECT_EQ(p.evictable.pages, 0u);
  EXPECT_EQ(p.evictable.bytes, 32u);
  ExpectInvariants(*cache);
}

}  // namespace
}  // namespace llamay::kv
