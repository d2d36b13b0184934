#include <gtest/gtest.h>

#include <cstring>

#include "kv/cache.h"
#include "kv/snapshot.h"
#include "kv/test_util.h"

namespace llamay::kv {
namespace {

using namespace testing_util;

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

TEST(Layout, ValidatesAndComputesOffsets) {
  KvLayout l = SmallLayout(4);
  EXPECT_TRUE(l.Validate().ok());
  EXPECT_EQ(l.row_bytes(), 32u * 4);
  EXPECT_EQ(l.page_bytes(), 2u * 2 * 4 * 32 * 4);
  // [layer][k|v][slot][row]
  EXPECT_EQ(l.RowOffset(1, KvKind::kValue, 3), l.layer_bytes() + (4 + 3) * l.row_bytes());
  l.precision = KvPrecision::kQ8_0;
  EXPECT_EQ(l.row_bytes(), 34u);
  l.head_dim = 15;
  EXPECT_FALSE(l.Validate().ok());  // q8_0 rows must be whole blocks
  l = SmallLayout(0);
  EXPECT_FALSE(l.Validate().ok());
  EXPECT_EQ(ParseKvPrecision("q8_0").value(), KvPrecision::kQ8_0);
  EXPECT_FALSE(ParseKvPrecision("q4").ok());
}

TEST(Context, AppendedPositionsReadZeroAndBoundsAreChecked) {
  auto cache = MakeCache(SmallLayout());
  Context c = cache->NewContext();
  ASSERT_TRUE(c.Append(Iota(6)).ok());
  EXPECT_EQ(c.size(), 6u);
  EXPECT_EQ(c.n_pages(), 2u);
  for (float v : ReadAll(c)) ASSERT_EQ(v, 0.0f);
  std::vector<float> row(32);
  EXPECT_EQ(c.ReadRow(6, 0, KvKind::kKey, row).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(c.ReadRow(0, 2, KvKind::kKey, row).code(), StatusCode::kOutOfRange);
  std::vector<float> short_row(31);
  EXPECT_EQ(c.WriteRow(0, 0, KvKind::kKey, short_row).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.Rollback(7).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(c.size(), 6u);
  ExpectInvariants(*cache);
}

// Forks at a page boundary and one position either side: zero pages allocated, then the branch's first
// write into the shared tail page copies exactly that page and the parent never sees it.
TEST(Fork, AtPageBoundaryAndEitherSide) {
  for (uint32_t P : {4u, 64u}) {
    for (size_t n : {size_t{P} - 1, size_t{P}, size_t{P} + 1, 2 * size_t{P}, 2 * size_t{P} + 1}) {
      SCOPED_TRACE("P=" + std::to_string(P) + " n=" + std::to_string(n));
      auto cache = MakeCache(SmallLayout(P));
      Context parent = cache->NewContext();
      Fill(parent, n, 1);
      const auto parent_values = ReadAll(parent);
      const auto before = cache->Stats();
      Context child = parent.Fork();
      auto after = cache->Stats();
      EXPECT_EQ(after.pages_allocated_total, before.pages_allocated_total);
      EXPECT_EQ(after.pages_shared, parent.n_pages());
      EXPECT_TRUE(BitEqual(ReadAll(child), parent_values));
      // Write the last position: the page holding it is copied once.
      ASSERT_TRUE(child.WriteRow(n - 1, 1, KvKind::kValue, RowValues(child.layout(), n - 1, 1, KvKind::kValue, 9)).ok());
      EXPECT_EQ(cache->Stats().page_copies, 1u);
      // A second write to the now-private page copies nothing.
      ASSERT_TRUE(child.WriteRow(n - 1, 0, KvKind::kKey, RowValues(child.layout(), n - 1, 0, KvKind::kKey, 9)).ok());
      EXPECT_EQ(cache->Stats().page_copies, 1u);
      // Extending the branch never touches the parent.
      Fill(child, 3, 2, 100);
      EXPECT_TRUE(BitEqual(ReadAll(parent), parent_values)) << "a branch's write reached its parent";
      EXPECT_EQ(parent.size(), n);
      ExpectInvariants(*cache);
    }
  }
}

TEST(Fork, ThirtyTwoPagesEightWaysAllocatesNothing) {
  auto cache = MakeCache(SmallLayout(64));
  Context parent = cache->NewContext();
  Fill(parent, 32 * 64, 1);
  ASSERT_EQ(parent.n_pages(), 32u);
  const auto before = cache->Stats();
  std::vector<Context> branches = parent.Fork(8);
  const auto after = cache->Stats();
  EXPECT_EQ(after.pages_allocated_total - before.pages_allocated_total, 0u);
  EXPECT_EQ(after.pages_live, 32u);
  EXPECT_EQ(after.pages_shared, 32u);
  ExpectInvariants(*cache);
}

// Twelve-deep forks of branches that were themselves forked and written.
TEST(Fork, TwelveDeepChainsOfWrittenBranches) {
  auto cache = MakeCache(SmallLayout(4));
  std::vector<Context> chain;
  std::vector<std::vector<float>> expect;
  chain.push_back(cache->NewContext());
  Fill(chain[0], 10, 0);
  expect.push_back(ReadAll(chain[0]));
  for (int depth = 1; depth <= 12; ++depth) {
    chain.push_back(chain.back().Fork());
    Context& c = chain.back();
    // Overwrite one shared position (a different page at each depth) and append one of its own.
    const size_t pos = static_cast<size_t>(depth) % c.size();
    ASSERT_TRUE(c.WriteRow(pos, 0, KvKind::kKey, RowValues(c.layout(), pos, 0, KvKind::kKey, 100 + depth)).ok());
    Fill(c, 1, depth, 1000 + depth);
    expect.push_back(ReadAll(c));
  }
  for (size_t i = 0; i < chain.size(); ++i)
    EXPECT_TRUE(BitEqual(ReadAll(chain[i]), expect[i])) << "depth " << i << " changed";
  ExpectInvariants(*cache);
  chain.clear();
  EXPECT_EQ(cache->Stats().pages_live, 0u);
}

// Every truncation point of a shared context: the branch keeps exactly the prefix, grows on its own,
// and the parent is untouched.
TEST(Truncate, EveryPointOfASharedContext) {
  auto cache = MakeCache(SmallLayout(4));
  Context parent = cache->NewContext();
  Fill(parent, 13, 1);
  const auto parent_values = ReadAll(parent);
  const size_t per_pos = 2 * 2 * 32;
  for (size_t t = 0; t <= parent.size(); ++t) {
    SCOPED_TRACE("t=" + std::to_string(t));
    Context b = parent.Fork();
    ASSERT_TRUE(b.Rollback(t).ok());
    EXPECT_EQ(b.size(), t);
    EXPECT_EQ(b.n_pages(), (t + 3) / 4);
    auto got = ReadAll(b);
    EXPECT_TRUE(std::equal(got.begin(), got.end(), parent_values.begin()));
    // New positions read zero even where the shared tail page holds the parent's values.
    ASSERT_TRUE(b.Append(Iota(2, 500)).ok());
    auto grown = ReadAll(b);
    for (size_t i = t * per_pos; i < grown.size(); ++i) ASSERT_EQ(grown[i], 0.0f);
    Fill(b, 3, 7, 600);
    EXPECT_TRUE(BitEqual(ReadAll(parent), parent_values));
    ExpectInvariants(*cache);
  }
}

TEST(Budget, AllocationEvictsTheTreeThenFailsCleanly) {
  KvLayout l = SmallLayout(4);
  auto cache = MakeCache(l, 0, 4 * l.page_bytes());
  {
    Context a = cache->NewContext();
    Fill(a, 8, 1);  // 2 pages
    ASSERT_TRUE(cache->Retain(a).ok());
  }
  EXPECT_EQ(cache->Stats().pages_live, 2u);  // held by the tree only
  Context b = cache->NewContext();
  Fill(b, 16, 2);  // needs all 4 pages: the tree entry is evicted to make room
  EXPECT_EQ(cache->Stats().tree_entries, 0u);
  EXPECT_EQ(cache->Stats().tree_evictions, 1u);
  Status s = b.Append(Iota(1));
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("nothing is left to evict"), std::string::npos) << s.message();
  EXPECT_EQ(b.size(), 16u);  // unchanged
  // A failed copy-on-write leaves the branch as it was.
  Context c = b.Fork();
  EXPECT_EQ(c.WriteRow(0, 0, KvKind::kKey, RowValues(l, 0, 0, KvKind::kKey, 5)).code(),
            StatusCode::kResourceExhausted);
  EXPECT_TRUE(BitEqual(ReadAll(c), ReadAll(b)));
  ExpectInvariants(*cache);
}

// Regression: the prefix tree leaked arena slots (forty retains against a four-entry bound left eighty
// slots out for eight live pages). One release path: slots out == live pages, and clearing returns all.
TEST(Regression, TreeDoesNotLeakArenaSlots) {
  KvLayout l = SmallLayout(4);
  auto cache = MakeCache(l, /*arena_pages=*/256, 0, /*tree_max_entries=*/4);
  for (int i = 0; i < 40; ++i) {
    Context c = cache->NewContext();
    Fill(c, 8, i, i * 100);  // distinct tokens: 40 distinct entries
    ASSERT_TRUE(cache->Retain(c).ok());
  }
  auto s = cache->Stats();
  EXPECT_EQ(s.tree_entries, 4u);
  EXPECT_EQ(s.pages_live, 8u);
  EXPECT_EQ(s.arena_slots_out, 8u);
  ExpectInvariants(*cache);
  cache->ClearTree();
  EXPECT_EQ(cache->Stats().arena_slots_out, 0u);
  EXPECT_EQ(cache->Stats().pages_live, 0u);
}

// Regression: recycled arena slots were handed out dirty, so an unwritten position carried another
// conversation's KV (into snapshots too). Slots are zeroed on issue.
TEST(Regression, RecycledSlotsAreZeroed) {
  for (size_t arena : {size_t{2}, size_t{0}}) {
    KvLayout l = SmallLayout(4);
    auto cache = MakeCache(l, arena);
    {
      Context a = cache->NewContext();
      Fill(a, 8, 3);
    }
    Context b = cache->NewContext();
    ASSERT_TRUE(b.Append(Iota(8)).ok());
    for (float v : ReadAll(b)) ASSERT_EQ(v, 0.0f) << "arena=" << arena;
    Digest d{};
    auto bytes = SnapshotToBytes(b, d);
    ASSERT_TRUE(bytes.ok());
    auto info = InspectSnapshot(*bytes);
    ASSERT_TRUE(info.ok());
    // The KV section is all zero bytes.
    const size_t kv_bytes = 8 * 2 * 2 * 32 * 4;
    for (size_t i = bytes->size() - 4 - kv_bytes; i < bytes->size() - 4; ++i) ASSERT_EQ((*bytes)[i], 0);
  }
}

}  // namespace
}  // namespace llamay::kv
