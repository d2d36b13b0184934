// Paged attention against a naive contiguous double-precision version, the reference bit for bit, and the
// determinism contract: page size, batch, thread count and ISA do not change a bit.
#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
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
  for (Isa isa : {Isa::kScalar, DetectIsa()})
    EXPECT_TRUE(SameBits(base, RunBatch(q, pos, c4, p, &pool, isa)));
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

}  // namespace
}  // namespace llamay::kernels
