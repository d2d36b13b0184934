#include <gtest/gtest.h>

#include <cstring>

#include "kv/cache.h"
#include "kv/test_util.h"

namespace llamay::kv {
namespace {

using namespace testing_util;

std::vector<int32_t> Seq(std::initializer_list<int32_t> v) { return v; }

Context Retained(Cache& cache, const std::vector<int32_t>& toks, int salt, bool pin = false) {
  Context c = cache.NewContext();
  EXPECT_TRUE(c.Append(toks).ok());
  const KvLayout& l = cache.layout();
  for (size_t p = 0; p < toks.size(); ++p)
    EXPECT_TRUE(c.WriteRow(p, 0, KvKind::kKey, RowValues(l, p, 0, KvKind::kKey, salt)).ok());
  EXPECT_TRUE(cache.Retain(c, pin).ok());
  return c;
}

TEST(PrefixTree, MatchReturnsLongestComputedPrefixEvenInsideAPage) {
  auto cache = MakeCache(SmallLayout(4));
  Context src = Retained(*cache, Iota(10), 1);
  const auto src_values = ReadAll(src);
  src.Close();
  std::vector<int32_t> q = Iota(6);
  q.push_back(99);
  MatchResult m = cache->Match(q);
  EXPECT_EQ(m.matched, 6u);
  ASSERT_EQ(m.context.size(), 6u);
  EXPECT_EQ(m.context.tokens(), Iota(6));
  auto got = ReadAll(m.context);
  EXPECT_TRUE(std::equal(got.begin(), got.end(), src_values.begin()));
  // Matching allocated nothing; position 5 sits in a page the entry shares: writing it copies that page.
  const auto before = cache->Stats();
  EXPECT_EQ(before.pages_live, 3u);
  ASSERT_TRUE(m.context.WriteRow(5, 0, KvKind::kKey, RowValues(cache->layout(), 5, 0, KvKind::kKey, 9)).ok());
  EXPECT_EQ(cache->Stats().page_copies, before.page_copies + 1);
  // The entry still reads the original values.
  MatchResult again = cache->Match(Iota(10));
  EXPECT_EQ(again.matched, 10u);
  EXPECT_EQ(ReadAll(again.context), src_values);
  // No match: an empty context.
  MatchResult none = cache->Match(Seq({42, 1}));
  EXPECT_EQ(none.matched, 0u);
  EXPECT_TRUE(none.context.valid());
  EXPECT_EQ(none.context.size(), 0u);
  ExpectInvariants(*cache);
}

TEST(PrefixTree, SplitNodesAreNeverVictimsAndCollapseAfterEviction) {
  auto cache = MakeCache(SmallLayout(4));
  Retained(*cache, Seq({1, 2, 3, 4}), 1);
  Retained(*cache, Seq({1, 2, 7, 8}), 2);  // splits after {1, 2}: a node without a context
  auto s = cache->Stats();
  EXPECT_EQ(s.tree_entries, 2u);
  EXPECT_EQ(s.tree_nodes, 4u);  // root, split {1,2}, two leaves
  EXPECT_EQ(*cache->NextVictim(), Seq({1, 2, 3, 4}));  // least recently used leaf
  ASSERT_TRUE(cache->EvictOne());
  s = cache->Stats();
  EXPECT_EQ(s.tree_entries, 1u);
  EXPECT_EQ(s.tree_nodes, 2u);  // the split collapsed into its remaining child
  EXPECT_EQ(cache->TreeEntries()[0].tokens, Seq({1, 2, 7, 8}));
  ASSERT_TRUE(cache->EvictOne());
  EXPECT_FALSE(cache->EvictOne());
  EXPECT_EQ(cache->Stats().tree_nodes, 1u);
  EXPECT_EQ(cache->Stats().pages_live, 0u);
  ExpectInvariants(*cache);
}

TEST(PrefixTree, LeavesGoBeforeInteriorEntriesAndPinnedStay) {
  auto cache = MakeCache(SmallLayout(4));
  Retained(*cache, Seq({1, 2}), 1);           // becomes an interior entry
  Retained(*cache, Seq({1, 2, 3}), 2);        // leaf
  Retained(*cache, Seq({5, 6}), 3, /*pin=*/true);
  cache->Match(Seq({1, 2, 3}));  // the leaf is now the most recent; the interior entry is older
  EXPECT_EQ(*cache->NextVictim(), Seq({1, 2, 3}));  // a leaf first, though more recent
  ASSERT_TRUE(cache->EvictOne());
  EXPECT_EQ(*cache->NextVictim(), Seq({1, 2}));
  ASSERT_TRUE(cache->EvictOne());
  EXPECT_FALSE(cache->NextVictim().has_value());  // only the pinned entry remains
  EXPECT_FALSE(cache->EvictOne());
  EXPECT_TRUE(cache->SetPinned(Seq({5, 6}), false));
  EXPECT_FALSE(cache->SetPinned(Seq({5}), false));
  EXPECT_TRUE(cache->EvictOne());
  ExpectInvariants(*cache);
}

TEST(PrefixTree, MatchPrefersTheMostRecentlyUsedEntry) {
  auto cache = MakeCache(SmallLayout(4));
  Context a = Retained(*cache, Seq({1, 2, 3}), 1);
  Context b = Retained(*cache, Seq({1, 2, 4}), 2);
  MatchResult m = cache->Match(Seq({1, 2, 9}));
  EXPECT_EQ(m.matched, 2u);
  auto want = ReadAll(b);
  want.resize(ReadAll(m.context).size());
  EXPECT_EQ(ReadAll(m.context), want);  // b was retained last
  ExpectInvariants(*cache);
}

TEST(PrefixTree, BoundedByBytesOfPagesHeld) {
  KvLayout l = SmallLayout(4);
  auto cache = MakeCache(l, 0, 0, 0, /*tree_max_bytes=*/5 * l.page_bytes());
  for (int i = 0; i < 10; ++i) Retained(*cache, Iota(8, i * 100), i);  // 2 pages each
  auto s = cache->Stats();
  EXPECT_LE(s.tree_bytes, 5 * l.page_bytes());
  EXPECT_EQ(s.tree_entries, 2u);
  EXPECT_EQ(s.pages_live, 4u);
  ExpectInvariants(*cache);
}

// Regression: eviction left the node standing (500 twelve-token inserts against a four-entry bound left
// 501 nodes). Eviction prunes upward and collapses one-child nodes.
TEST(Regression, EvictedNodesAreRemoved) {
  auto cache = MakeCache(SmallLayout(4), 0, 0, /*tree_max_entries=*/4);
  for (int i = 0; i < 500; ++i) {
    std::vector<int32_t> toks(12);
    for (int j = 0; j < 12; ++j) toks[static_cast<size_t>(j)] = (i * 7 + j * 13) % 50;
    Context c = cache->NewContext();
    ASSERT_TRUE(c.Append(toks).ok());
    ASSERT_TRUE(cache->Retain(c).ok());
  }
  auto s = cache->Stats();
  EXPECT_EQ(s.tree_entries, 4u);
  EXPECT_LE(s.tree_nodes, 2 * 4 + 1u);
  EXPECT_EQ(s.tree_evictions, 496u);
  ExpectInvariants(*cache);
}

TEST(PrefixTree, RetainIsAForkAndRejectsForeignContexts) {
  auto cache = MakeCache(SmallLayout(4));
  auto other = MakeCache(SmallLayout(4));
  Context c = cache->NewContext();
  Fill(c, 9, 1);
  const auto before = cache->Stats();
  ASSERT_TRUE(cache->Retain(c).ok());
  EXPECT_EQ(cache->Stats().pages_allocated_total, before.pages_allocated_total);
  EXPECT_EQ(other->Retain(c).code(), StatusCode::kInvalidArgument);
  Context empty = cache->NewContext();
  ASSERT_TRUE(cache->Retain(empty).ok());
  EXPECT_EQ(cache->Stats().tree_entries, 1u);
  // The retained entry is immutable: the caller's later writes do not reach it.
  const auto values = ReadAll(c);
  ASSERT_TRUE(c.WriteRow(0, 0, KvKind::kKey, RowValues(c.layout(), 0, 0, KvKind::kKey, 77)).ok());
  EXPECT_EQ(ReadAll(cache->Match(Iota(9)).context), values);
  ExpectInvariants(*cache);
}

}  // namespace
}  // namespace llamay::kv
