// AVX2 + FMA kernels of the chunked gated delta rule (delta_rule.h): the table avx2::kDeltaRuleKernels, which
// the driver in delta_rule.cc calls per value head and chunk. Every lane performs exactly the operations of
// reference/delta_rule_ref.cc for one column c (every accumulator a chain of fmas in the reference's order),
// so the results are the reference's bits. Per chunk of a head:
//   - A = S^T k_j and Q = S^T q_j for all the chunk's tokens of this call are one product against the fixed
//     S, blocked in registers (a few column registers x a few broadcast vectors, each accumulator one
//     column's sequential fma chain over i): S is read once per chunk, not once per token;
//   - the deltas and outputs follow token by token (forward substitution), across columns;
//   - the fold is a second register-blocked product (rows of S x column registers, the chain over s).
// Columns past a multiple of 8 go through masked loads and stores (the scratch rows are padded instead).
#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/avx2_util.h"
#include "kernels/delta_rule_simd.h"
#include "kernels/recurrent_chunk.h"

namespace llamay::kernels::avx2 {
namespace {

constexpr int L = kRecurrentChunk;

// The reference's FmaDot8 of four vectors a[r] against bk and against bq: out_k[r] = FmaDot8(a[r], bk, n),
// out_q[r] = FmaDot8(a[r], bq, n). One accumulator per dot (lane i % 8, fma in ascending i), a tail lane by
// lane, then Reduce8 of all eight at once (Reduce8x8: the same additions); eight independent chains keep
// the FMA units busy where one dot alone would wait on its single accumulator.
LLAMAY_AVX2_INLINE void FmaDots4x2(const float* const* a, const float* bk, const float* bq, int n,
                                   float* out_k, float* out_q) {
  const float* ar[4] = {a[0], a[1], a[2], a[3]};
  __m256 acc[8];
  for (int r = 0; r < 8; ++r) acc[r] = _mm256_setzero_ps();
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 vk = _mm256_loadu_ps(bk + i), vq = _mm256_loadu_ps(bq + i);
    for (int r = 0; r < 4; ++r) {
      const __m256 x = _mm256_loadu_ps(ar[r] + i);
      acc[r] = _mm256_fmadd_ps(x, vk, acc[r]);
      acc[4 + r] = _mm256_fmadd_ps(x, vq, acc[4 + r]);
    }
  }
  if (i < n) {
    alignas(32) float lanes[8][8];
    for (int r = 0; r < 8; ++r) _mm256_store_ps(lanes[r], acc[r]);
    for (; i < n; ++i) {
      for (int r = 0; r < 4; ++r) {
        lanes[r][i % 8] = std::fma(ar[r][i], bk[i], lanes[r][i % 8]);
        lanes[4 + r][i % 8] = std::fma(ar[r][i], bq[i], lanes[4 + r][i % 8]);
      }
    }
    for (int r = 0; r < 8; ++r) acc[r] = _mm256_load_ps(lanes[r]);
  }
  alignas(32) float sums[8];
  _mm256_store_ps(sums, Reduce8x8(acc));
  for (int r = 0; r < 4; ++r) {
    out_k[r] = sums[r];
    out_q[r] = sums[4 + r];
  }
}

// kk[j][s] for s < j and kq[j][s] for s <= j of every token j in [j0, j1), four keys k_s at a time (k_j
// again past s = j: unused).
LLAMAY_AVX2 void Dots(const float* const* kp, const float* const* qp, int j0, int j1, int Dk, float (*kk)[L],
                      float (*kq)[L]) {
  for (int j = j0; j < j1; ++j) {
    float row_k[L + 3], row_q[L + 3];
    for (int s = 0; s <= j; s += 4) {
      const float* ks[4];
      for (int r = 0; r < 4; ++r) ks[r] = kp[std::min(s + r, j)];
      FmaDots4x2(ks, kp[j], qp[j], Dk, row_k + s, row_q + s);
    }
    std::copy_n(row_k, j, kk[j]);
    std::copy_n(row_q, j + 1, kq[j]);
  }
}

// Register blocks: kNr broadcast rows by kNc column registers of accumulators (at most 12 of 16 registers).
template <int kNc>
constexpr int kMaxRows = kNc >= 4 ? 2 : (kNc == 3 ? 4 : 6);

// ---- A and Q: out[r][c] = sum over i ascending of fma(S[i][c], x[r][i]), for columns [0, 8 kNc) of S ----
template <int kNr, int kNc, bool kMasked>
LLAMAY_AVX2_INLINE void ProductTile(const float* S, int64_t Dv, int Dk, const float* const* x, __m256i mask,
                                    float* out, int64_t out_stride) {
  const float* xr[kNr];
  __m256 acc[kNr][kNc];
  for (int r = 0; r < kNr; ++r) {
    xr[r] = x[r];
    for (int u = 0; u < kNc; ++u) acc[r][u] = _mm256_setzero_ps();
  }
  for (int i = 0; i < Dk; ++i) {
    const float* row = S + int64_t{i} * Dv;
    __m256 s[kNc];
    for (int u = 0; u < kNc; ++u) s[u] = ColLoad<kNc, kMasked>(row + 8 * u, u, mask);
    for (int r = 0; r < kNr; ++r) {
      const __m256 b = _mm256_broadcast_ss(xr[r] + i);
      for (int u = 0; u < kNc; ++u) acc[r][u] = _mm256_fmadd_ps(s[u], b, acc[r][u]);
    }
  }
  for (int r = 0; r < kNr; ++r)
    for (int u = 0; u < kNc; ++u) _mm256_storeu_ps(out + r * out_stride + 8 * u, acc[r][u]);
}

// n <= kMaxRows<kNc> vectors on one block of columns (S and out offset to its first column).
template <int kNc, bool kMasked>
LLAMAY_AVX2_INLINE void ProductGroup(const float* S, int64_t Dv, int Dk, const float* const* x, int n,
                                     __m256i mask, float* out, int64_t os) {
  constexpr int R = kMaxRows<kNc>;
  switch (n) {
    case 6:
      if constexpr (R >= 6) ProductTile<6, kNc, kMasked>(S, Dv, Dk, x, mask, out, os);
      break;
    case 5:
      if constexpr (R >= 5) ProductTile<5, kNc, kMasked>(S, Dv, Dk, x, mask, out, os);
      break;
    case 4:
      if constexpr (R >= 4) ProductTile<4, kNc, kMasked>(S, Dv, Dk, x, mask, out, os);
      break;
    case 3:
      if constexpr (R >= 3) ProductTile<3, kNc, kMasked>(S, Dv, Dk, x, mask, out, os);
      break;
    case 2:
      ProductTile<2, kNc, kMasked>(S, Dv, Dk, x, mask, out, os);
      break;
    case 1:
      ProductTile<1, kNc, kMasked>(S, Dv, Dk, x, mask, out, os);
      break;
    default:
      break;
  }
}

// All n vectors on one block of columns, in groups of up to kMaxRows<kNc>. A short last group (too few
// independent chains to hide the fma latency) is avoided by splitting the last two groups evenly.
template <int kNc, bool kMasked>
LLAMAY_AVX2_INLINE void ProductColumns(const float* S, int64_t Dv, int Dk, const float* const* x, int n,
                                       __m256i mask, float* out, int64_t os) {
  constexpr int R = kMaxRows<kNc>, kMin = R / 2 + 1;
  for (int r = 0; r < n;) {
    const int left = n - r;
    const int take = left <= R ? left : (left - R < kMin ? (left + 1) / 2 : R);
    ProductGroup<kNc, kMasked>(S, Dv, Dk, x + r, take, mask, out + r * os, os);
    r += take;
  }
}

// out row r (stride out_stride, padded to whole registers) = S^T x[r] for r < n. Column blocks outermost:
// a block's Dk x 8 kNc slice of S stays in L1 while every vector passes over it.
LLAMAY_AVX2 void Product(const float* S, int Dv, int Dk, const float* const* x, int n, float* out,
                         int64_t out_stride) {
  const __m256i all = _mm256_set1_epi32(-1);
  const int full = Dv / 8;
  int cv = 0;
  if (n == 2) {
    // Decode: one k and one q, so more column registers keep enough independent chains in flight.
    for (; cv + 4 <= full; cv += 4)
      ProductColumns<4, false>(S + 8 * cv, Dv, Dk, x, n, all, out + 8 * cv, out_stride);
  } else {
    for (; cv + 2 <= full; cv += 2)
      ProductColumns<2, false>(S + 8 * cv, Dv, Dk, x, n, all, out + 8 * cv, out_stride);
  }
  for (; cv < full; ++cv) ProductColumns<1, false>(S + 8 * cv, Dv, Dk, x, n, all, out + 8 * cv, out_stride);
  if (Dv % 8 != 0)
    ProductColumns<1, true>(S + 8 * cv, Dv, Dk, x, n, FirstLanes(Dv % 8), out + 8 * cv, out_stride);
}

// ---- The fold: S[i][c] = Gamma * S[i][c], then fma(W[i][s], delta_s[c]) for s ascending ----
// S offset to (row i0, first column); w to row i0 of W [Dk][L]; d[s] + c0 is delta_s at the first column.
template <int kNr, int kNc, bool kMasked>
LLAMAY_AVX2_INLINE void FoldTile(float* S, int64_t Dv, const float* w, const float* const* d, int64_t c0,
                                 __m256 gamma, __m256i mask) {
  __m256 acc[kNr][kNc];
  for (int r = 0; r < kNr; ++r)
    for (int u = 0; u < kNc; ++u)
      acc[r][u] = _mm256_mul_ps(gamma, ColLoad<kNc, kMasked>(S + r * Dv + 8 * u, u, mask));
  for (int s = 0; s < L; ++s) {
    __m256 dv[kNc];
    for (int u = 0; u < kNc; ++u) dv[u] = ColLoad<kNc, kMasked>(d[s] + c0 + 8 * u, u, mask);
    for (int r = 0; r < kNr; ++r) {
      const __m256 b = _mm256_broadcast_ss(w + r * L + s);
      for (int u = 0; u < kNc; ++u) acc[r][u] = _mm256_fmadd_ps(b, dv[u], acc[r][u]);
    }
  }
  for (int r = 0; r < kNr; ++r)
    for (int u = 0; u < kNc; ++u) ColStore<kNc, kMasked>(S + r * Dv + 8 * u, u, mask, acc[r][u]);
}

template <int kNc, bool kMasked>
LLAMAY_AVX2_INLINE void FoldColumns(float* S, int64_t Dv, int Dk, const float* w, const float* const* d,
                                    int64_t c0, __m256 gamma, __m256i mask) {
  constexpr int R = kMaxRows<kNc>;
  int i = 0;
  for (; i + R <= Dk; i += R) FoldTile<R, kNc, kMasked>(S + i * Dv, Dv, w + i * L, d, c0, gamma, mask);
  for (; i < Dk; ++i) FoldTile<1, kNc, kMasked>(S + i * Dv, Dv, w + i * L, d, c0, gamma, mask);
}

LLAMAY_AVX2 void Fold(float* S, int Dv, int Dk, const float* w, const float* const* d, float gamma) {
  const __m256i all = _mm256_set1_epi32(-1);
  const __m256 g = _mm256_set1_ps(gamma);
  const int full = Dv / 8;
  int cv = 0;
  for (; cv + 2 <= full; cv += 2) FoldColumns<2, false>(S + 8 * cv, Dv, Dk, w, d, 8 * cv, g, all);
  for (; cv < full; ++cv) FoldColumns<1, false>(S + 8 * cv, Dv, Dk, w, d, 8 * cv, g, all);
  if (Dv % 8 != 0) FoldColumns<1, true>(S + 8 * cv, Dv, Dk, w, d, 8 * cv, g, FirstLanes(Dv % 8));
}

// ---- Deltas and outputs of tokens [j0, j1) of a chunk, across columns [c0, c0 + 8 kNc) ----
template <int kNc, bool kMasked>
LLAMAY_AVX2_INLINE void SubstColumns(const GatedDeltaRuleArgs& a, int64_t t0, int j0, int j1,
                                     const DeltaChunkCoefs& cf, const float* aq, int64_t Dvp,
                                     const float* const* d, float* dbuf, int64_t c0, __m256i mask) {
  const __m256 scale = _mm256_set1_ps(1.0f / std::sqrt(static_cast<float>(a.k_dim)));
  for (int j = j0; j < j1; ++j) {
    const int64_t t = t0 + (j - j0);
    const float* arow = aq + int64_t{2} * (j - j0) * Dvp + c0;
    const __m256 gam = _mm256_set1_ps(cf.gamma[j]);
    __m256 kv[kNc], o[kNc];
    for (int u = 0; u < kNc; ++u) {
      kv[u] = _mm256_mul_ps(gam, _mm256_loadu_ps(arow + 8 * u));
      o[u] = _mm256_mul_ps(gam, _mm256_loadu_ps(arow + Dvp + 8 * u));
    }
    for (int s = 0; s < j; ++s) {
      const __m256 bk = _mm256_set1_ps(cf.ck[j][s]), bq = _mm256_set1_ps(cf.cq[j][s]);
      for (int u = 0; u < kNc; ++u) {
        const __m256 ds = ColLoad<kNc, kMasked>(d[s] + c0 + 8 * u, u, mask);
        kv[u] = _mm256_fmadd_ps(bk, ds, kv[u]);
        o[u] = _mm256_fmadd_ps(bq, ds, o[u]);
      }
    }
    const __m256 beta = _mm256_set1_ps(a.beta[t * a.beta_stride]), bj = _mm256_set1_ps(cf.cq[j][j]);
    const float* v = a.v + t * a.v_stride + c0;
    float* out = a.out + t * a.out_stride + c0;
    for (int u = 0; u < kNc; ++u) {
      const __m256 dj = _mm256_mul_ps(_mm256_sub_ps(ColLoad<kNc, kMasked>(v + 8 * u, u, mask), kv[u]), beta);
      _mm256_storeu_ps(dbuf + int64_t{j} * Dvp + c0 + 8 * u, dj);
      o[u] = _mm256_fmadd_ps(bj, dj, o[u]);
      ColStore<kNc, kMasked>(out + 8 * u, u, mask, _mm256_mul_ps(o[u], scale));
    }
  }
}

// Every column: blocks of 32, then of 8, then the masked rest.
LLAMAY_AVX2 void Subst(const GatedDeltaRuleArgs& a, int64_t t0, int j0, int j1, const DeltaChunkCoefs& cf,
                       const float* aq, int64_t Dvp, const float* const* d, float* dbuf) {
  const __m256i all = _mm256_set1_epi32(-1);
  const int Dv = a.v_dim, full = Dv / 8;
  int cv = 0;
  for (; cv + 4 <= full; cv += 4) SubstColumns<4, false>(a, t0, j0, j1, cf, aq, Dvp, d, dbuf, 8 * cv, all);
  for (; cv < full; ++cv) SubstColumns<1, false>(a, t0, j0, j1, cf, aq, Dvp, d, dbuf, 8 * cv, all);
  if (Dv % 8 != 0) SubstColumns<1, true>(a, t0, j0, j1, cf, aq, Dvp, d, dbuf, 8 * cv, FirstLanes(Dv % 8));
}

}  // namespace

const DeltaRuleKernels kDeltaRuleKernels = {8, Dots, Product, Subst, Fold};

}  // namespace llamay::kernels::avx2
#endif  // __x86_64__
