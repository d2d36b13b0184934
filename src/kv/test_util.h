// Helpers shared by the kv/ tests.
#ifndef LLAMAY_KV_TEST_UTIL_H_
#define LLAMAY_KV_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <vector>

#include "kv/cache.h"

namespace llamay::kv::testing_util {

inline KvLayout SmallLayout(uint32_t page_tokens = 4, KvPrecision p = KvPrecision::kF32) {
  KvLayout l;
  l.n_layers = 2;
  l.n_kv_heads = 2;
  l.head_dim = 16;
  l.page_tokens = page_tokens;
  l.precision = p;
  return l;
}

inline std::unique_ptr<Cache> MakeCache(const KvLayout& layout, size_t arena_pages = 0, size_t max_bytes = 0,
                                        size_t tree_max_entries = 0, size_t tree_max_bytes = 0) {
  CacheOptions o;
  o.layout = layout;
  o.arena_pages = arena_pages;
  o.max_bytes = max_bytes;
  o.tree_max_entries = tree_max_entries;
  o.tree_max_bytes = tree_max_bytes;
  auto c = Cache::Create(o);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return std::move(*c);
}

// A deterministic value for (pos, layer, kind, element) tagged by `salt`; exactly representable in f16
// and on the q8_0 grid is not needed: tests compare reads with reads.
inline std::vector<float> RowValues(const KvLayout& l, size_t pos, uint32_t layer, KvKind kind, int salt) {
  std::vector<float> row(l.row_elems());
  for (size_t i = 0; i < row.size(); ++i)
    row[i] = static_cast<float>((static_cast<int>(pos * 131 + layer * 17 + i * 3 + salt * 7919) % 1000) - 500) /
                 64.0f +
             (kind == KvKind::kValue ? 0.25f : 0.0f);
  return row;
}

inline std::vector<int32_t> Iota(size_t n, int32_t start = 0) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), start);
  return t;
}

// Appends n positions and writes every row with RowValues(salt).
inline void Fill(Context& c, size_t n, int salt, int32_t first_token = 0) {
  const size_t start = c.size();
  ASSERT_TRUE(c.Append(Iota(n, first_token)).ok());
  const KvLayout& l = c.layout();
  for (size_t p = start; p < start + n; ++p)
    for (uint32_t layer = 0; layer < l.n_layers; ++layer)
      for (KvKind k : {KvKind::kKey, KvKind::kValue})
        ASSERT_TRUE(c.WriteRow(p, layer, k, RowValues(l, p, layer, k, salt)).ok());
}

// Every value of a context, position-major.
inline std::vector<float> ReadAll(const Context& c) {
  const KvLayout& l = c.layout();
  std::vector<float> out, row(l.row_elems());
  for (size_t p = 0; p < c.size(); ++p)
    for (uint32_t layer = 0; layer < l.n_layers; ++layer)
      for (KvKind k : {KvKind::kKey, KvKind::kValue}) {
        EXPECT_TRUE(c.ReadRow(p, layer, k, row).ok());
        out.insert(out.end(), row.begin(), row.end());
      }
  return out;
}

inline void ExpectInvariants(const Cache& c) {
  Status s = c.CheckInvariants();
  EXPECT_TRUE(s.ok()) << s.ToString();
}

}  // namespace llamay::kv::testing_util

#endif  // LLAMAY_KV_TEST_UTIL_H_
