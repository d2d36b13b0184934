// Paged attention against a naive contiguous double-precision version, the reference bit for bit, and the
// determinism contract: page size, batch, thread count and ISA do not change a bit. The sweeps place
// queries on both sides of the kernel's tile and position-block boundaries, and the multi-sequence tests
// share pages between sequences in every way the kernel must tell apart (same page at the same index, at
// another index, from a later index on).
#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/dequant.h"
#include "kernels/test_util.h"
#include "kernels/thread_pool.h"

namespace llamay::kernels {
namespace {

using test_util::RandomFloats;
using test_util::SameBits;

constexpr int kLayers = 2;
constexpr int kLayer = 1;  // the layer under test: its rows sit after layer 0's in every page

// A paged cache of n_pos positions, pages in shuffled memory order, plus the exact f32 values it holds.
struct Cache {
  std::vector<uint8_t> memory;
  std::vector<const uint8_t*> pages;
  KvPageGeometry geo;
  std::vector<float> k, v;  // decoded contents: [n_pos][kv_dim]
};

Cache BuildCache(std::mt19937& rng, const AttentionParams& p, int64_t n_pos, int64_t page_tokens,
                 const std::vector<float>& k_src, const std::vector<float>& v_src) {
  const int64_t kv_dim = static_cast<int64_t>(p.n_kv_heads) * p.head_dim;
  Cache c;
  const size_t row = TypeRowBytes(p.kv_type, kv_dim);
  const size_t layer_bytes = 2 * page_tokens * row;
  const int64_t n_pages = (n_pos + page_tokens - 1) / page_tokens;
  c.geo = LayerMajorGeometry(page_tokens, row, kLayer);
  EXPECT_EQ(c.geo.k_offset, kLayer * layer_bytes);
  EXPECT_EQ(c.geo.v_offset, kLayer * layer_bytes + page_tokens * row);
  c.memory.assign(n_pages * kLayers * layer_bytes, 0xAB);  // stale bytes outside written rows
  std::vector<int64_t> order(n_pages);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  for (int64_t pg = 0; pg < n_pages; ++pg)
    c.pages.push_back(c.memory.data() + order[pg] * kLayers * layer_bytes);
  c.k.resize(n_pos * kv_dim);
  c.v.resize(n_pos * kv_dim);
  for (int64_t j = 0; j < n_pos; ++j) {
    uint8_t* page = const_cast<uint8_t*>(c.pages[j / page_tokens]);
    uint8_t* krow = page + c.geo.k_offset + (j % page_tokens) * row;
    uint8_t* vrow = page + c.geo.v_offset + (j % page_tokens) * row;
    QuantizeRow(p.kv_type, k_src.data() + j * kv_dim, krow, kv_dim);
    QuantizeRow(p.kv_type, v_src.data() + j * kv_dim, vrow, kv_dim);
    DequantizeRow(p.kv_type, krow, c.k.data() + j * kv_dim, kv_dim);
    DequantizeRow(p.kv_type, vrow, c.v.data() + j * kv_dim, kv_dim);
  }
  return c;
}

// Attention for one query over contiguous decoded K/V, in double; also the error bound for each output
// (see the comment inside).
void NaiveAttention(const float* q, int64_t pos, const Cache& c, const AttentionParams& p,
                    std::vector<double>* out, std::vector<double>* tol) {
  const int64_t hd = p.head_dim, kv_dim = static_cast<int64_t>(p.n_kv_heads) * hd;
  const int group = p.n_head / p.n_kv_heads;
  const int64_t lo = p.window > 0 ? std::max<int64_t>(0, pos - p.window + 1) : 0;
  out->assign(p.n_head * hd, 0.0);
  tol->assign(p.n_head * hd, 0.0);
  for (int h = 0; h < p.n_head; ++h) {
    const int g = h / group;
    std::vector<double> s;
    double max_score_err = 0, m = -INFINITY;
    for (int64_t j = lo; j <= pos; ++j) {
      double dot = 0, mass = 0;
      for (int64_t d = 0; d < hd; ++d) {
        dot += static_cast<double>(q[h * hd + d]) * c.k[j * kv_dim + g * hd + d];
        mass += std::fabs(static_cast<double>(q[h * hd + d]) * c.k[j * kv_dim + g * hd + d]);
      }
      s.push_back(dot * p.scale);
      m = std::max(m, s.back());
      // f32 dot: hd/8 + 4 roundings of size eps over the mass, then the scale.
      max_score_err = std::max(
          max_score_err, ((hd / 8.0 + 5) * mass * std::fabs(p.scale) + std::fabs(dot * p.scale)) * 0x1p-24);
    }
    double sum = 0;
    for (double& x : s) sum += (x = std::exp(x - m));
    const int64_t n = pos - lo + 1;
    // Relative error of each weight: two score errors (its own and the max's shift cancel only partly),
    // exp (4 eps), the lane sums (n/8 + 3), reciprocal and product; then the V sum adds n roundings.
    const double rel_w = 2 * max_score_err * 2 + (4 + n / 8.0 + 6) * 0x1p-24;
    for (int64_t d = 0; d < hd; ++d) {
      double acc = 0, vmass = 0;
      for (int64_t j = lo; j <= pos; ++j) {
        const double w = s[j - lo] / sum, vv = c.v[j * kv_dim + g * hd + d];
        acc += w * vv;
        vmass += w * std::fabs(vv);
      }
      (*out)[h * hd + d] = acc;
      (*tol)[h * hd + d] = vmass * (rel_w + (n + 2) * 0x1p-24) + 1e-30;
    }
  }
}

std::vector<float> RunBatch(const std::vector<float>& q, const std::vector<int64_t>& pos, const Cache& c,
                            const AttentionParams& p, ThreadPool* pool, Isa isa) {
  std::vector<float> out(pos.size() * p.n_head * p.head_dim);
  AttentionPagedBatch(q.data(), pos.data(), static_cast<int64_t>(pos.size()), c.pages.data(), c.geo, p,
                      out.data(), pool, isa);
  return out;
}

struct Case {
  TensorType kv_type;
  int n_head, n_kv_heads, head_dim;
  int64_t window;
};

class AttentionTest : public ::testing::TestWithParam<Case> {};

TEST_P(AttentionTest, MatchesNaiveReferenceAndIsDeterministic) {
  const Case cs = GetParam();
  const AttentionParams p{cs.n_head,   cs.n_kv_heads,
                          cs.head_dim, 1.0f / std::sqrt(static_cast<float>(cs.head_dim)),
                          cs.window,   cs.kv_type};
  std::mt19937 rng(30 + cs.head_dim + cs.n_head);
  const int64_t n_pos = 37, kv_dim = static_cast<int64_t>(p.n_kv_heads) * p.head_dim;
  const auto k_src = RandomFloats(rng, n_pos * kv_dim), v_src = RandomFloats(rng, n_pos * kv_dim);
  // Queries: the last 9 positions (a prefill chunk), plus two early ones out of order.
  std::vector<int64_t> pos = {3, 0};
  for (int64_t j = n_pos - 9; j < n_pos; ++j) pos.push_back(j);
  const auto q = RandomFloats(rng, pos.size() * p.n_head * p.head_dim, 2.0f);
  ThreadPool pool(3);

  const Cache c4 = BuildCache(rng, p, n_pos, 4, k_src, v_src);
  const auto base = RunBatch(q, pos, c4, p, nullptr, Isa::kScalar);

  // 1. Against the naive double version.
  const int64_t stride = static_cast<int64_t>(p.n_head) * p.head_dim;
  for (size_t i = 0; i < pos.size(); ++i) {
    std::vector<double> ref, tol;
    NaiveAttention(q.data() + i * stride, pos[i], c4, p, &ref, &tol);
    for (int64_t e = 0; e < stride; ++e)
      ASSERT_LE(std::fabs(base[i * stride + e] - ref[e]), tol[e]) << "query " << i << " element " << e;
  }
  // 2. The reference, other ISAs, a thread pool: the same bits.
  std::vector<float> ref(base.size());
  RefAttentionPagedBatch(q.data(), pos.data(), static_cast<int64_t>(pos.size()), c4.pages.data(), c4.geo, p,
                         ref.data());
  EXPECT_TRUE(SameBits(base, ref));
  for (Isa isa : test_util::SupportedIsas())
    EXPECT_TRUE(SameBits(base, RunBatch(q, pos, c4, p, &pool, isa))) << IsaName(isa);
  // 3. Page size does not matter.
  for (int64_t page_tokens : {1, 16, 64}) {
    const Cache c = BuildCache(rng, p, n_pos, page_tokens, k_src, v_src);
    EXPECT_TRUE(SameBits(base, RunBatch(q, pos, c, p, &pool, DetectIsa()))) << "page_tokens " << page_tokens;
  }
  // 4. Each query alone (AttentionPaged over pos + 1 positions) equals its row of the batch.
  for (size_t i = 0; i < pos.size(); ++i) {
    std::vector<float> one(stride);
    AttentionPaged(q.data() + i * stride, c4.pages.data(), c4.geo, p, pos[i] + 1, one.data(), nullptr,
                   DetectIsa());
    EXPECT_EQ(std::memcmp(one.data(), base.data() + i * stride, stride * sizeof(float)), 0) << "query " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionTest,
    ::testing::Values(Case{TensorType::kF32, 4, 4, 64, 0},    // multi-head
                      Case{TensorType::kF16, 8, 2, 64, 0},    // grouped-query
                      Case{TensorType::kQ8_0, 6, 3, 32, 0},   // q8_0 rows, one block per head
                      Case{TensorType::kF16, 4, 1, 16, 5},    // sliding window, multi-query
                      Case{TensorType::kQ8_0, 4, 4, 40, 0},   // heads straddle q8_0 blocks: scalar path
                      Case{TensorType::kF32, 2, 2, 12, 7}));  // head_dim not a multiple of 8

// A query sees nothing beyond its own position: changing later positions leaves it unchanged.
TEST(Attention, CausalMask) {
  const AttentionParams p{2, 1, 32, 0.2f, 0, TensorType::kF16};
  std::mt19937 rng(40);
  const int64_t n_pos = 20;
  auto k = RandomFloats(rng, n_pos * 32), v = RandomFloats(rng, n_pos * 32);
  const auto q = RandomFloats(rng, 2 * 32);
  const std::vector<int64_t> pos = {10};
  const auto a = RunBatch(q, pos, BuildCache(rng, p, n_pos, 8, k, v), p, nullptr, DetectIsa());
  for (int64_t i = 11 * 32; i < n_pos * 32; ++i) k[i] += 1.0f, v[i] -= 3.0f;
  EXPECT_TRUE(SameBits(a, RunBatch(q, pos, BuildCache(rng, p, n_pos, 8, k, v), p, nullptr, DetectIsa())));
  v[10 * 32] += 1.0f;  // its own position does count
  EXPECT_FALSE(SameBits(a, RunBatch(q, pos, BuildCache(rng, p, n_pos, 8, k, v), p, nullptr, DetectIsa())));
}

// The first element where two outputs differ, for a failure message that says where ("" when equal).
std::string FirstDifference(const std::vector<float>& got, const std::vector<float>& want, int64_t stride) {
  if (got.size() != want.size()) return "sizes differ";
  for (size_t e = 0; e < got.size(); ++e)
    if (test_util::Bits(got[e]) != test_util::Bits(want[e]))
      return "query " + std::to_string(e / stride) + " element " + std::to_string(e % stride) + ": " +
             std::to_string(got[e]) + " vs " + std::to_string(want[e]);
  return "";
}

// Query sets that put queries on both sides of the tile and block boundaries of attention.cc.
std::vector<std::pair<std::string, std::vector<int64_t>>> QuerySets(const AttentionParams& p, int64_t n_pos) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> sets;
  sets.push_back({"decode", {n_pos - 1}});
  const int64_t tile = std::max(1, kAttentionTileQueryHeads / (p.n_head / p.n_kv_heads));
  for (int64_t c : {tile - 1, tile, tile + 1, 2 * tile + 3}) {
    if (c < 2 || c > n_pos) continue;
    std::vector<int64_t> pos;
    for (int64_t j = n_pos - c; j < n_pos; ++j) pos.push_back(j);
    sets.push_back({"chunk of " + std::to_string(c), pos});
  }
  std::vector<int64_t> all(n_pos);
  std::iota(all.begin(), all.end(), 0);
  sets.push_back({"whole prefill", all});
  // Out of order, with gaps, a repeated position and both sides of positions 32, 64 and 128.
  sets.push_back({"scattered", {77, 3, 0, n_pos - 1, 64, 63, 64, 12, 127, 128, 31, 32, 100}});
  return sets;
}

struct SweepCase {
  TensorType kv_type;
  int n_head, n_kv_heads, head_dim;
  int64_t window;
  bool sinks = false;
};

class AttentionBitExactTest : public ::testing::TestWithParam<SweepCase> {};

// Every ISA, page size, query set and thread setting gives the reference's bits.
TEST_P(AttentionBitExactTest, MatchesReferenceBitForBit) {
  const SweepCase cs = GetParam();
  const AttentionParams base{cs.n_head,   cs.n_kv_heads,
                             cs.head_dim, 1.0f / std::sqrt(static_cast<float>(cs.head_dim)),
                             cs.window,   cs.kv_type};
  std::mt19937 rng(50 + cs.head_dim + cs.n_head + static_cast<int>(cs.window));
  const std::vector<float> sinks = RandomFloats(rng, cs.n_head, 3.0f);
  AttentionParams p = base;
  if (cs.sinks) p.sinks = sinks.data();
  // 150 positions: at least two position blocks for every head_dim here (32 to 128 rows per block).
  const int64_t n_pos = 150, kv_dim = static_cast<int64_t>(p.n_kv_heads) * p.head_dim;
  const int64_t stride = static_cast<int64_t>(p.n_head) * p.head_dim;
  const auto k_src = RandomFloats(rng, n_pos * kv_dim), v_src = RandomFloats(rng, n_pos * kv_dim);
  std::vector<Cache> caches;
  for (int64_t page_tokens : {1, 3, 16, 64})
    caches.push_back(BuildCache(rng, p, n_pos, page_tokens, k_src, v_src));
  ThreadPool pool(3);
  for (const auto& [name, pos] : QuerySets(p, n_pos)) {
    const auto q = RandomFloats(rng, pos.size() * stride, 2.0f);
    std::vector<float> ref(q.size());
    RefAttentionPagedBatch(q.data(), pos.data(), static_cast<int64_t>(pos.size()), caches[2].pages.data(),
                           caches[2].geo, p, ref.data());
    for (const Cache& c : caches)
      for (Isa isa : test_util::SupportedIsas())
        for (ThreadPool* tp : {static_cast<ThreadPool*>(nullptr), &pool}) {
          const std::string diff = FirstDifference(RunBatch(q, pos, c, p, tp, isa), ref, stride);
          EXPECT_EQ(diff, "") << name << ", page_tokens " << c.geo.page_tokens << ", " << IsaName(isa)
                              << (tp ? ", pool" : ", no pool");
        }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Sweep, AttentionBitExactTest, ::testing::ValuesIn([] {
      std::vector<SweepCase> v;
      for (TensorType t : {TensorType::kF32, TensorType::kF16, TensorType::kQ8_0}) {
        v.push_back({t, 4, 4, 32, 0});    // group 1, 128-row blocks
        v.push_back({t, 8, 4, 64, 0});    // group 2 (the peer model's shape), 64-row blocks
        v.push_back({t, 8, 2, 128, 0});   // group 4, 32-row blocks
        v.push_back({t, 8, 4, 64, 23});   // window shorter than a block
        v.push_back({t, 4, 1, 32, 70});   // window across a block boundary, multi-query
        v.push_back({t, 8, 2, 128, 40});  // window spanning blocks of 32
        v.push_back({t, 8, 4, 64, 0, true});  // attention sinks (gpt-oss)
        v.push_back({t, 8, 2, 64, 23, true});  // sinks on a windowed layer (gpt-oss's other half)
      }
      return v;
    }()));

// A sink takes its share of the softmax and gives no value: with every V row the same vector c, a head's
// output is c * (1 - w_sink), w_sink = e^sink / (e^sink + sum_j e^s_j), here checked in double. A sink of
// -inf changes nothing, bit for bit.
TEST(Attention, ASinkTakesItsShareOfTheSoftmaxAndAddsNoValue) {
  std::mt19937 rng(71);
  AttentionParams p{4, 2, 32, 0.25f, 0, TensorType::kF32};
  const int64_t n_pos = 40, kv_dim = p.n_kv_heads * p.head_dim, stride = p.n_head * p.head_dim;
  const auto k_src = RandomFloats(rng, n_pos * kv_dim);
  const auto c_row = RandomFloats(rng, kv_dim);
  std::vector<float> v_src;
  for (int64_t j = 0; j < n_pos; ++j) v_src.insert(v_src.end(), c_row.begin(), c_row.end());
  const Cache c = BuildCache(rng, p, n_pos, 16, k_src, v_src);
  const std::vector<int64_t> pos = {0, 17, n_pos - 1};
  const auto q = RandomFloats(rng, pos.size() * stride, 2.0f);
  const std::vector<float> sinks = {-1.0f, 0.0f, 2.5f, 6.0f};
  const std::vector<float> none = RunBatch(q, pos, c, p, nullptr, DetectIsa());
  p.sinks = sinks.data();
  for (Isa isa : test_util::SupportedIsas()) {
    const std::vector<float> got = RunBatch(q, pos, c, p, nullptr, isa);
    for (size_t i = 0; i < pos.size(); ++i)
      for (int h = 0; h < p.n_head; ++h) {
        const int g = h / (p.n_head / p.n_kv_heads);
        std::vector<double> s;
        double mx = sinks[h];
        for (int64_t j = 0; j <= pos[i]; ++j) {
          double d = 0;
          for (int e = 0; e < p.head_dim; ++e)
            d += static_cast<double>(q[i * stride + h * p.head_dim + e]) * c.k[j * kv_dim + g * p.head_dim + e];
          s.push_back(d * p.scale);
          mx = std::max(mx, s.back());
        }
        double sum = std::exp(sinks[h] - mx);
        for (double x : s) sum += std::exp(x - mx);
        const double keep = 1.0 - std::exp(sinks[h] - mx) / sum;
        for (int e = 0; e < p.head_dim; ++e) {
          const double want = c_row[g * p.head_dim + e] * keep;
          EXPECT_NEAR(got[i * stride + h * p.head_dim + e], want, 1e-5 + 1e-5 * std::fabs(want))
              << IsaName(isa) << " query " << i << " head " << h;
        }
      }
  }
  const std::vector<float> off(p.n_head, -std::numeric_limits<float>::infinity());
  p.sinks = off.data();
  EXPECT_EQ(FirstDifference(RunBatch(q, pos, c, p, nullptr, DetectIsa()), none, stride), "");
}

// Queries whose scores would pass the per-tile bound (a few MiB) go to smaller tiles; the bits stay.
TEST(Attention, LongContextMatchesReference) {
  const AttentionParams p{8, 1, 8, 0.3f, 0, TensorType::kF16};  // 8 query heads per kv head
  std::mt19937 rng(60);
  const int64_t n_pos = 40000, kv_dim = p.head_dim;
  const auto k_src = RandomFloats(rng, n_pos * kv_dim), v_src = RandomFloats(rng, n_pos * kv_dim);
  const Cache c = BuildCache(rng, p, n_pos, 64, k_src, v_src);
  std::vector<int64_t> pos;
  for (int64_t j = n_pos - 9; j < n_pos; ++j) pos.push_back(j);
  pos.push_back(5);
  const int64_t stride = static_cast<int64_t>(p.n_head) * p.head_dim;
  const auto q = RandomFloats(rng, pos.size() * stride, 2.0f);
  std::vector<float> ref(q.size());
  RefAttentionPagedBatch(q.data(), pos.data(), static_cast<int64_t>(pos.size()), c.pages.data(), c.geo, p,
                         ref.data());
  ThreadPool pool(3);
  for (Isa isa : test_util::SupportedIsas())
    EXPECT_EQ(FirstDifference(RunBatch(q, pos, c, p, &pool, isa), ref, stride), "") << IsaName(isa);
}

// Decode at the peer model's shape over a long context: tasks that take several kv heads (1, 2, 4 or 8 as
// the thread count allows), row prefetches running ahead across blocks and page boundaries (pages of 1, 7
// and 64 rows), and every ISA level give the reference's bits.
TEST(Attention, LongDecodeMatchesReferenceAtEveryHeadSplit) {
  std::mt19937 rng(61);
  const int64_t n_pos = 1100;
  ThreadPool pool2(2), pool3(3), pool8(8);
  for (TensorType t : {TensorType::kF32, TensorType::kF16, TensorType::kQ8_0}) {
    const AttentionParams p{16, 8, 64, 0.125f, 0, t};
    const int64_t kv_dim = static_cast<int64_t>(p.n_kv_heads) * p.head_dim;
    const int64_t stride = static_cast<int64_t>(p.n_head) * p.head_dim;
    const auto k_src = RandomFloats(rng, n_pos * kv_dim), v_src = RandomFloats(rng, n_pos * kv_dim);
    for (int64_t page_tokens : {1, 7, 64}) {
      const Cache c = BuildCache(rng, p, n_pos, page_tokens, k_src, v_src);
      for (const std::vector<int64_t>& pos :
           {std::vector<int64_t>{n_pos - 1}, std::vector<int64_t>{1000, 1001}}) {
        const auto q = RandomFloats(rng, pos.size() * stride, 2.0f);
        std::vector<float> ref(q.size());
        RefAttentionPagedBatch(q.data(), pos.data(), static_cast<int64_t>(pos.size()), c.pages.data(), c.geo,
                               p, ref.data());
        for (Isa isa : test_util::SupportedIsas())
          for (ThreadPool* tp : {static_cast<ThreadPool*>(nullptr), &pool2, &pool3, &pool8})
            EXPECT_EQ(FirstDifference(RunBatch(q, pos, c, p, tp, isa), ref, stride), "")
                << TensorTypeName(t) << ", page_tokens " << page_tokens << ", " << pos.size() << " queries, "
                << IsaName(isa) << ", " << (tp ? tp->num_threads() : 0) << " threads";
      }
    }
  }
}

// Pages with random rows in every slot of the layer under test, for sequences built from page indices.
struct PagePool {
  std::vector<uint8_t> memory;
  KvPageGeometry geo;
  size_t page_bytes = 0;
  const uint8_t* Page(int64_t i) const { return memory.data() + i * page_bytes; }
};

PagePool MakePagePool(std::mt19937& rng, const AttentionParams& p, int64_t page_tokens, int64_t n_pages) {
  const int64_t kv_dim = static_cast<int64_t>(p.n_kv_heads) * p.head_dim;
  const size_t row = TypeRowBytes(p.kv_type, kv_dim);
  PagePool pp;
  pp.geo = LayerMajorGeometry(page_tokens, row, kLayer);
  pp.page_bytes = kLayers * 2 * page_tokens * row;
  pp.memory.assign(n_pages * pp.page_bytes, 0xAB);
  for (int64_t pg = 0; pg < n_pages; ++pg)
    for (int64_t slot = 0; slot < 2 * page_tokens; ++slot) {  // K rows, then V rows
      const auto x = RandomFloats(rng, kv_dim);
      QuantizeRow(p.kv_type, x.data(), pp.memory.data() + pg * pp.page_bytes + pp.geo.k_offset + slot * row,
                  kv_dim);
    }
  return pp;
}

// One sequence of a multi-sequence test: page indices into the pool, query positions, q and the result.
struct TestSeq {
  TestSeq() = default;
  TestSeq(std::vector<int64_t> ids, std::vector<int64_t> pos)
      : page_ids(std::move(ids)), positions(std::move(pos)) {}
  std::vector<int64_t> page_ids;
  std::vector<int64_t> positions;
  std::vector<const uint8_t*> pages;
  std::vector<float> q, out;
};

struct MultiCase {
  TensorType kv_type;
  int n_head, n_kv_heads, head_dim;
  int64_t window, page_tokens;
};

class AttentionMultiTest : public ::testing::TestWithParam<MultiCase> {};

// Sequences that share leading pages (forks), share none, share a later page only, hold a shared page at
// another index, have different lengths or no queries: each query equals the reference and the
// single-sequence call bit for bit.
TEST_P(AttentionMultiTest, EachSequenceMatchesItsSingleCall) {
  const MultiCase cs = GetParam();
  const AttentionParams p{cs.n_head,   cs.n_kv_heads,
                          cs.head_dim, 1.0f / std::sqrt(static_cast<float>(cs.head_dim)),
                          cs.window,   cs.kv_type};
  const int64_t pt = cs.page_tokens, stride = static_cast<int64_t>(p.n_head) * p.head_dim;
  std::mt19937 rng(70 + cs.head_dim + static_cast<int>(pt));
  auto pages_for = [&](int64_t n_pos) { return (n_pos + pt - 1) / pt; };
  int64_t next_page = 0;
  auto fresh = [&](int64_t n) {
    std::vector<int64_t> ids(n);
    std::iota(ids.begin(), ids.end(), next_page);
    next_page += n;
    return ids;
  };
  // A fork of `base` that keeps its first `shared` pages and has n_pos positions.
  auto fork = [&](const std::vector<int64_t>& base, int64_t shared, int64_t n_pos) {
    std::vector<int64_t> ids(base.begin(), base.begin() + std::min<int64_t>(shared, base.size()));
    const auto rest = fresh(pages_for(n_pos) - static_cast<int64_t>(ids.size()));
    ids.insert(ids.end(), rest.begin(), rest.end());
    return ids;
  };
  auto range = [](int64_t from, int64_t to) {
    std::vector<int64_t> v(to - from);
    std::iota(v.begin(), v.end(), from);
    return v;
  };
  const int64_t prefix = 70;  // the forks' common prefix, in positions
  const auto root = fresh(pages_for(100));
  std::vector<TestSeq> seqs(11);
  seqs[0] = TestSeq{root, range(80, 100)};                               // the root: a prefill chunk
  seqs[1] = TestSeq{fork(root, prefix / pt, prefix + 3), {prefix + 2}};  // decode forks of several lengths
  seqs[2] = TestSeq{fork(root, prefix / pt, prefix + 30), {prefix + 29}};
  seqs[3] = TestSeq{fork(root, prefix / pt, prefix + 1), {prefix}};
  seqs[4] = TestSeq{fork(root, prefix / pt, 140), range(100, 140)};     // a longer fork, prefill chunk
  seqs[5] = TestSeq{fork(root, pages_for(100), 100), {99, 5, 64, 40}};  // all pages shared, scattered
  seqs[6] = TestSeq{fork(root, 1, 60), {}};                             // no queries
  seqs[7] = TestSeq{fresh(pages_for(90)), range(0, 90)};                // shares nothing, whole prefill
  seqs[8] = TestSeq{fresh(pages_for(33)), {32}};                        // shares nothing, decode
  seqs[9] = TestSeq{fork(root, pages_for(100), 100), {99, 98, 50}};     // page 0 private, later pages shared
  seqs[9].page_ids[0] = fresh(1)[0];
  seqs[10] = TestSeq{root, {99, 70, 1, 0}};  // the root's page 0, then its pages at other indices
  std::reverse(seqs[10].page_ids.begin() + 1, seqs[10].page_ids.end());
  seqs[10].page_ids.back() = root[0];
  const PagePool pool_pages = MakePagePool(rng, p, pt, next_page);
  for (TestSeq& s : seqs) {
    for (int64_t id : s.page_ids) s.pages.push_back(pool_pages.Page(id));
    s.q = RandomFloats(rng, s.positions.size() * stride, 2.0f);
  }
  // What each sequence alone gives: the reference.
  std::vector<std::vector<float>> ref(seqs.size());
  for (size_t s = 0; s < seqs.size(); ++s) {
    ref[s].resize(seqs[s].q.size());
    RefAttentionPagedBatch(seqs[s].q.data(), seqs[s].positions.data(),
                           static_cast<int64_t>(seqs[s].positions.size()), seqs[s].pages.data(),
                           pool_pages.geo, p, ref[s].data());
  }
  ThreadPool pool(3);
  for (Isa isa : test_util::SupportedIsas())
    for (ThreadPool* tp : {static_cast<ThreadPool*>(nullptr), &pool}) {
      std::vector<AttentionSeq> call;
      for (TestSeq& s : seqs) {
        s.out.assign(s.q.size(), -1.0f);
        call.push_back({s.q.data(), s.positions.data(), static_cast<int64_t>(s.positions.size()),
                        s.pages.data(), s.out.data()});
      }
      AttentionPagedMulti(call, pool_pages.geo, p, tp, isa);
      for (size_t s = 0; s < seqs.size(); ++s) {
        const std::string where = "sequence " + std::to_string(s) + ", " + std::string(IsaName(isa)) +
                                  (tp ? ", pool" : ", no pool");
        EXPECT_EQ(FirstDifference(seqs[s].out, ref[s], stride), "") << where;
        std::vector<float> single(seqs[s].q.size());
        AttentionPagedBatch(seqs[s].q.data(), seqs[s].positions.data(),
                            static_cast<int64_t>(seqs[s].positions.size()), seqs[s].pages.data(),
                            pool_pages.geo, p, single.data(), tp, isa);
        EXPECT_EQ(FirstDifference(seqs[s].out, single, stride), "") << where << " (single call)";
      }
    }
}

INSTANTIATE_TEST_SUITE_P(Sequences, AttentionMultiTest, ::testing::ValuesIn([] {
                           std::vector<MultiCase> v;
                           for (TensorType t : {TensorType::kF32, TensorType::kF16, TensorType::kQ8_0})
                             for (int64_t pt : {1, 3, 16, 64}) {
                               v.push_back({t, 8, 4, 64, 0, pt});   // group 2
                               v.push_back({t, 4, 4, 32, 0, pt});   // group 1
                               v.push_back({t, 8, 2, 128, 0, pt});  // group 4
                             }
                           v.push_back({TensorType::kF16, 8, 4, 64, 30, 16});  // a sliding window
                           v.push_back({TensorType::kQ8_0, 4, 4, 40, 0, 16});  // heads straddle q8_0 blocks
                           v.push_back({TensorType::kF32, 2, 2, 12, 9, 3});    // head_dim not a multiple of 8
                           return v;
                         }()));

}  // namespace
}  // namespace llamay::kernels

namespace llamay::kernels {
namespace {

// --- Sliding window -------------------------------------------------------------------------------------

// The first position a query at `pos` sees, written out here rather than taken from the kernel.
int64_t WindowStart(int64_t pos, int64_t window) {
  return window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
}

// `pages` with every page that lies wholly before min over `pos` of WindowStart set to null, as
// kv::Context::TrimWindows leaves a context: a kernel that reads one crashes.
std::vector<const uint8_t*> ReleaseBeforeWindow(std::vector<const uint8_t*> pages,
                                                const std::vector<int64_t>& pos, int64_t window,
                                                int64_t page_tokens) {
  int64_t lo = WindowStart(pos[0], window);
  for (int64_t p : pos) lo = std::min(lo, WindowStart(p, window));
  for (int64_t i = 0; i < lo / page_tokens; ++i) pages[i] = nullptr;
  return pages;
}

struct WindowCase {
  TensorType kv_type;
  int n_head, n_kv_heads, head_dim;
  int64_t window, page_tokens;
};

class AttentionWindowTest : public ::testing::TestWithParam<WindowCase> {};

// Windowed queries over a cache whose pages wholly before the window are null: within the naive double
// version's bound, and bit for bit the reference over the whole cache on every ISA, with and without a
// pool. Query sets: early queries (the window not yet full), a decode, a prefill chunk and scattered ones.
TEST_P(AttentionWindowTest, SeesOnlyItsWindowAndNeverReadsReleasedPages) {
  const WindowCase cs = GetParam();
  const AttentionParams p{cs.n_head,   cs.n_kv_heads,
                          cs.head_dim, 1.0f / std::sqrt(static_cast<float>(cs.head_dim)),
                          cs.window,   cs.kv_type};
  std::mt19937 rng(90 + cs.head_dim + static_cast<int>(cs.window) + static_cast<int>(cs.page_tokens));
  const int64_t n_pos = 150, kv_dim = static_cast<int64_t>(p.n_kv_heads) * p.head_dim;
  const int64_t stride = static_cast<int64_t>(p.n_head) * p.head_dim;
  const auto k_src = RandomFloats(rng, n_pos * kv_dim), v_src = RandomFloats(rng, n_pos * kv_dim);
  const Cache c = BuildCache(rng, p, n_pos, cs.page_tokens, k_src, v_src);
  std::vector<int64_t> chunk(30);
  std::iota(chunk.begin(), chunk.end(), n_pos - 30);
  const std::vector<std::pair<std::string, std::vector<int64_t>>> sets = {
      {"early", {0, 1, cs.window - 1, cs.window, cs.window + 1, 2}},
      {"decode", {n_pos - 1}},
      {"chunk", chunk},
      {"scattered", {149, 101, 120, 100, 133, 128, 127, 112, 111}}};
  ThreadPool pool(3);
  for (const auto& [name, pos_in] : sets) {
    std::vector<int64_t> pos;
    for (int64_t x : pos_in)
      if (x >= 0 && x < n_pos) pos.push_back(x);
    const auto q = RandomFloats(rng, pos.size() * stride, 2.0f);
    std::vector<float> ref(q.size());
    RefAttentionPagedBatch(q.data(), pos.data(), static_cast<int64_t>(pos.size()), c.pages.data(), c.geo, p,
                           ref.data());
    for (size_t i = 0; i < pos.size(); ++i) {
      std::vector<double> want, tol;
      NaiveAttention(q.data() + i * stride, pos[i], c, p, &want, &tol);
      for (int64_t e = 0; e < stride; ++e)
        ASSERT_LE(std::fabs(ref[i * stride + e] - want[e]), tol[e])
            << name << ", query " << i << ", element " << e;
    }
    const auto released = ReleaseBeforeWindow(c.pages, pos, cs.window, cs.page_tokens);
    if (name != "early" && cs.window + cs.page_tokens <= 100) {
      EXPECT_EQ(released[0], nullptr) << name << ": the test releases no page";
    }
    std::vector<float> ref_released(q.size());
    RefAttentionPagedBatch(q.data(), pos.data(), static_cast<int64_t>(pos.size()), released.data(), c.geo, p,
                           ref_released.data());
    EXPECT_EQ(FirstDifference(ref_released, ref, stride), "") << name << " (reference)";
    for (Isa isa : test_util::SupportedIsas())
      for (ThreadPool* tp : {static_cast<ThreadPool*>(nullptr), &pool}) {
        std::vector<float> out(q.size());
        AttentionPagedBatch(q.data(), pos.data(), static_cast<int64_t>(pos.size()), released.data(), c.geo, p,
                            out.data(), tp, isa);
        EXPECT_EQ(FirstDifference(out, ref, stride), "")
            << name << ", " << IsaName(isa) << (tp ? ", pool" : "");
      }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Windows, AttentionWindowTest,
    ::testing::Values(WindowCase{TensorType::kF32, 4, 2, 64, 1, 16},     // window 1
                      WindowCase{TensorType::kF16, 8, 4, 64, 5, 16},     // window < page
                      WindowCase{TensorType::kQ8_0, 8, 2, 128, 40, 16},  // spans 3-4 pages
                      WindowCase{TensorType::kF32, 4, 1, 32, 10, 3},     // many small pages
                      WindowCase{TensorType::kF32, 4, 2, 128, 32, 16},   // gemma3's shape
                      WindowCase{TensorType::kQ8_0, 4, 2, 128, 32, 16},  //
                      WindowCase{TensorType::kF16, 4, 4, 32, 64, 64},    // window = page
                      WindowCase{TensorType::kF32, 2, 2, 12, 7, 1},      // page of 1
                      WindowCase{TensorType::kF16, 8, 4, 64, 200, 64}),  // wider than all
    [](const auto& info) {
      const WindowCase& c = info.param;
      return std::string(TensorTypeName(c.kv_type)) + "_w" + std::to_string(c.window) + "_p" +
             std::to_string(c.page_tokens) + "_hd" + std::to_string(c.head_dim);
    });

// Window 1: a query sees only its own position, so its output is exactly its own V row (one weight of 1).
TEST(Attention, WindowOfOneIsTheOwnValueRow) {
  const AttentionParams p{4, 2, 32, 0.2f, 1, TensorType::kF16};
  std::mt19937 rng(91);
  const int64_t n_pos = 40, kv_dim = 64;
  const auto k = RandomFloats(rng, n_pos * kv_dim), v = RandomFloats(rng, n_pos * kv_dim);
  const Cache c = BuildCache(rng, p, n_pos, 8, k, v);
  const std::vector<int64_t> pos = {0, 7, 8, 39};
  const auto q = RandomFloats(rng, pos.size() * 4 * 32, 2.0f);
  for (Isa isa : test_util::SupportedIsas()) {
    const auto out = RunBatch(q, pos, c, p, nullptr, isa);
    for (size_t i = 0; i < pos.size(); ++i)
      for (int h = 0; h < 4; ++h)
        EXPECT_EQ(
            std::memcmp(&out[(i * 4 + h) * 32], &c.v[pos[i] * kv_dim + (h / 2) * 32], 32 * sizeof(float)), 0)
            << IsaName(isa) << ", query at " << pos[i] << ", head " << h;
  }
}

// The window's edge: with window 8, a query at 20 sees 13..20. Changing positions 0..12 leaves it alone;
// changing position 13 does not.
TEST(Attention, WindowMask) {
  const AttentionParams p{2, 1, 32, 0.2f, 8, TensorType::kF32};
  std::mt19937 rng(92);
  const int64_t n_pos = 21;
  auto k = RandomFloats(rng, n_pos * 32), v = RandomFloats(rng, n_pos * 32);
  const auto q = RandomFloats(rng, 2 * 32);
  const std::vector<int64_t> pos = {20};
  const auto a = RunBatch(q, pos, BuildCache(rng, p, n_pos, 4, k, v), p, nullptr, DetectIsa());
  for (int64_t i = 0; i < 13 * 32; ++i) k[i] += 1.0f, v[i] -= 3.0f;
  EXPECT_TRUE(SameBits(a, RunBatch(q, pos, BuildCache(rng, p, n_pos, 4, k, v), p, nullptr, DetectIsa())));
  v[13 * 32] += 1.0f;
  EXPECT_FALSE(SameBits(a, RunBatch(q, pos, BuildCache(rng, p, n_pos, 4, k, v), p, nullptr, DetectIsa())));
}

// Windowed forks decoded together: sequences share their window's pages (and some share nothing), each
// with every page wholly before its window null. Each query equals the reference on its sequence alone.
TEST(Attention, WindowedForksWithReleasedPagesMatchEachAlone) {
  for (TensorType t : {TensorType::kF32, TensorType::kQ8_0}) {
    const AttentionParams p{4, 2, 64, 0.125f, 20, t};
    const int64_t pt = 8, stride = 4 * 64;
    std::mt19937 rng(93);
    // Pages 0..12 are the root's (100 positions); 13.. are the forks' own tails and a stranger's pages.
    const PagePool pool_pages = MakePagePool(rng, p, pt, 40);
    auto ids = [](int64_t from, int64_t n) {
      std::vector<int64_t> v(n);
      std::iota(v.begin(), v.end(), from);
      return v;
    };
    std::vector<TestSeq> seqs;
    seqs.emplace_back(ids(0, 13), std::vector<int64_t>{99});    // the root decodes
    auto fork = ids(0, 12);                                     // shares pages 0..11
    fork.push_back(13);                                         // its own page 12
    seqs.emplace_back(fork, std::vector<int64_t>{97, 98, 99});  // a short chunk
    auto longer = ids(0, 12);
    for (int64_t i : {14, 15, 16, 17}) longer.push_back(i);  // 128 positions
    seqs.emplace_back(longer, std::vector<int64_t>{127, 110, 120});
    seqs.emplace_back(ids(20, 13), std::vector<int64_t>{99});  // shares nothing, same positions
    seqs.emplace_back(ids(0, 13), std::vector<int64_t>{});     // no queries
    for (TestSeq& s : seqs) {
      for (int64_t id : s.page_ids) s.pages.push_back(pool_pages.Page(id));
      if (!s.positions.empty()) s.pages = ReleaseBeforeWindow(s.pages, s.positions, p.window, pt);
      s.q = RandomFloats(rng, s.positions.size() * stride, 2.0f);
    }
    ThreadPool pool(3);
    for (Isa isa : test_util::SupportedIsas())
      for (ThreadPool* tp : {static_cast<ThreadPool*>(nullptr), &pool}) {
        std::vector<AttentionSeq> call;
        for (TestSeq& s : seqs) {
          s.out.assign(s.q.size(), -1.0f);
          call.push_back({s.q.data(), s.positions.data(), static_cast<int64_t>(s.positions.size()),
                          s.pages.data(), s.out.data()});
        }
        AttentionPagedMulti(call, pool_pages.geo, p, tp, isa);
        for (size_t s = 0; s < seqs.size(); ++s) {
          std::vector<float> ref(seqs[s].q.size());
          RefAttentionPagedBatch(seqs[s].q.data(), seqs[s].positions.data(),
                                 static_cast<int64_t>(seqs[s].positions.size()), seqs[s].pages.data(),
                                 pool_pages.geo, p, ref.data());
          EXPECT_EQ(FirstDifference(seqs[s].out, ref, stride), "")
              << TensorTypeName(t) << ", sequence " << s << ", " << IsaName(isa) << (tp ? ", pool" : "");
        }
      }
  }
}

}  // namespace
}  // namespace llamay::kernels
