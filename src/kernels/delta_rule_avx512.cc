// AVX-512 kernels of the chunked gated delta rule (delta_rule.h): the table avx512::kDeltaRuleKernels, which
// the driver in delta_rule.cc calls per value head and chunk; the structure of delta_rule_avx2.cc and the
// bits of reference/delta_rule_ref.cc:
//   - A = S^T k_j, Q = S^T q_j, the deltas and outputs (forward substitution) and the fold are chains that
//     run along i or s for one column c each: 16 columns per register instead of 8 change no operation;
//   - the dots kk(s) = FmaDot8(k_s, k_j) and kq(s) = FmaDot8(k_s, q) are eight lanes each, lane i % 8 in
//     ascending i, then Reduce8: a 16-lane accumulator would be another order, so a zmm holds two dots, k_j
//     in its low half and q in its high half against k_s broadcast to both, each half exactly an AVX2
//     accumulator, reduced with Reduce8's additions in its order (Reduce8x16, eight keys at once).
// Columns past a multiple of 16 go through masked loads and stores (the scratch rows are padded instead).
#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/avx2_util.h"
#include "kernels/avx512_util.h"
#include "kernels/delta_rule_simd.h"
#include "kernels/recurrent_chunk.h"

namespace llamay::kernels::avx512 {
namespace {

constexpr int L = kRecurrentChunk;

// Register u of a block of kNc: only the last one may be partial (its lanes in mask).
template <int kNc, bool kMasked>
LLAMAY_AVX512_INLINE __m512 ColLoad(const float* p, int u, __mmask16 mask) {
  return kMasked && u == kNc - 1 ? _mm512_maskz_loadu_ps(mask, p) : _mm512_loadu_ps(p);
}
template <int kNc, bool kMasked>
LLAMAY_AVX512_INLINE void ColStore(float* p, int u, __mmask16 mask, __m512 v) {
  if (kMasked && u == kNc - 1) {
    _mm512_mask_storeu_ps(p, mask, v);
  } else {
    _mm512_storeu_ps(p, v);
  }
}

// The reference's FmaDot8 of eight keys a[r] against bk and against bq: out_k[r] = FmaDot8(a[r], bk, n),
// out_q[r] = FmaDot8(a[r], bq, n). Register r: [bk | bq] times a[r] broadcast to both halves, so its low
// half is the dot with bk and its high half the dot with bq (lane i % 8, fma in ascending i); a tail by a
// masked fma that leaves the unused lanes' accumulators untouched. Eight independent chains.
LLAMAY_AVX512_INLINE void FmaDots8x2(const float* const* a, const float* bk, const float* bq, int n,
                                     float* out_k, float* out_q) {
  __m512 acc[8];
  for (int r = 0; r < 8; ++r) acc[r] = _mm512_setzero_ps();
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m512 kq = Join(_mm256_loadu_ps(bk + i), _mm256_loadu_ps(bq + i));
    for (int r = 0; r < 8; ++r) acc[r] = _mm512_fmadd_ps(kq, Both(_mm256_loadu_ps(a[r] + i)), acc[r]);
  }
  if (i < n) {
    const __mmask8 t8 = static_cast<__mmask8>((1u << (n - i)) - 1u);
    const __mmask16 t16 = static_cast<__mmask16>(t8 | (t8 << 8));
    const __m512 kq = Join(_mm256_maskz_loadu_ps(t8, bk + i), _mm256_maskz_loadu_ps(t8, bq + i));
    for (int r = 0; r < 8; ++r)
      acc[r] = _mm512_mask3_fmadd_ps(kq, Both(_mm256_maskz_loadu_ps(t8, a[r] + i)), acc[r], t16);
  }
  alignas(64) float sums[16];
  _mm512_store_ps(sums, Reduce8x16(acc));
  for (int r = 0; r < 8; ++r) {
    out_k[r] = sums[2 * r];
    out_q[r] = sums[2 * r + 1];
  }
}

// kk[j][s] for s < j and kq[j][s] for s <= j of every token j in [j0, j1), eight keys k_s at a time (k_j
// again past s = j: unused).
LLAMAY_AVX512 void Dots(const float* const* kp, const float* const* qp, int j0, int j1, int Dk,
                        float (*kk)[L], float (*kq)[L]) {
  for (int j = j0; j < j1; ++j) {
    float row_k[L + 7], row_q[L + 7];
    for (int s = 0; s <= j; s += 8) {
      const float* ks[8];
      for (int r = 0; r < 8; ++r) ks[r] = kp[std::min(s + r, j)];
      FmaDots8x2(ks, kp[j], qp[j], Dk, row_k + s, row_q + s);
    }
    std::copy_n(row_k, j, kk[j]);
    std::copy_n(row_q, j + 1, kq[j]);
  }
}

// Register blocks: kNr broadcast rows by kNc column registers of accumulators (at most 24 of 32 registers).
template <int kNc>
constexpr int kMaxRows = kNc >= 4 ? 6 : 8;

// ---- A and Q: out[r][c] = sum over i ascending of fma(S[i][c], x[r][i]), for columns [0, 16 kNc) of S ----
template <int kNr, int kNc, bool kMasked>
LLAMAY_AVX512_INLINE void ProductTile(const float* S, int64_t Dv, int Dk, const float* const* x,
                                      __mmask16 mask, float* out, int64_t out_stride) {
  const float* xr[kNr];
  __m512 acc[kNr][kNc];
  for (int r = 0; r < kNr; ++r) {
    xr[r] = x[r];
    for (int u = 0; u < kNc; ++u) acc[r][u] = _mm512_setzero_ps();
  }
  for (int i = 0; i < Dk; ++i) {
    const float* row = S + int64_t{i} * Dv;
    __m512 s[kNc];
    for (int u = 0; u < kNc; ++u) s[u] = ColLoad<kNc, kMasked>(row + 16 * u, u, mask);
    for (int r = 0; r < kNr; ++r) {
      const __m512 b = _mm512_set1_ps(xr[r][i]);
      for (int u = 0; u < kNc; ++u) acc[r][u] = _mm512_fmadd_ps(s[u], b, acc[r][u]);
    }
  }
  for (int r = 0; r < kNr; ++r)
    for (int u = 0; u < kNc; ++u) _mm512_storeu_ps(out + r * out_stride + 16 * u, acc[r][u]);
}

// n <= kMaxRows<kNc> vectors on one block of columns (S and out offset to its first column).
template <int kNc, bool kMasked>
LLAMAY_AVX512_INLINE void ProductGroup(const float* S, int64_t Dv, int Dk, const float* const* x, int n,
                                       __mmask16 mask, float* out, int64_t os) {
  constexpr int R = kMaxRows<kNc>;
  switch (n) {
    case 8:
      if constexpr (R >= 8) ProductTile<8, kNc, kMasked>(S, Dv, Dk, x, mask, out, os);
      break;
    case 7:
      if constexpr (R >= 7) ProductTile<7, kNc, kMasked>(S, Dv, Dk, x, mask, out, os);
      break;
    case 6:
      ProductTile<6, kNc, kMasked>(S, Dv, Dk, x, mask, out, os);
      break;
    case 5:
      ProductTile<5, kNc, kMasked>(S, Dv, Dk, x, mask, out, os);
      break;
    case 4:
      ProductTile<4, kNc, kMasked>(S, Dv, Dk, x, mask, out, os);
      break;
    case 3:
      ProductTile<3, kNc, kMasked>(S, Dv, Dk, x, mask, out, os);
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
LLAMAY_AVX512_INLINE void ProductColumns(const float* S, int64_t Dv, int Dk, const float* const* x, int n,
                                         __mmask16 mask, float* out, int64_t os) {
  constexpr int R = kMaxRows<kNc>, kMin = R / 2 + 1;
  for (int r = 0; r < n;) {
    const int left = n - r;
    const int take = left <= R ? left : (left - R < kMin ? (left + 1) / 2 : R);
    ProductGroup<kNc, kMasked>(S, Dv, Dk, x + r, take, mask, out + r * os, os);
    r += take;
  }
}

// out row r (stride out_stride, padded to whole registers) = S^T x[r] for r < n. Column blocks outermost:
// a block's Dk x 16 kNc slice of S stays in L1 while every vector passes over it.
LLAMAY_AVX512 void Product(const float* S, int Dv, int Dk, const float* const* x, int n, float* out,
                           int64_t out_stride) {
  const __mmask16 all = 0xFFFF;
  const int full = Dv / 16;
  int cv = 0;
  if (n == 2) {
    // Decode: one k and one q, so more column registers keep enough independent chains in flight.
    for (; cv + 8 <= full; cv += 8)
      ProductColumns<8, false>(S + 16 * cv, Dv, Dk, x, n, all, out + 16 * cv, out_stride);
  }
  for (; cv + 4 <= full; cv += 4)
    ProductColumns<4, false>(S + 16 * cv, Dv, Dk, x, n, all, out + 16 * cv, out_stride);
  for (; cv < full; ++cv) ProductColumns<1, false>(S + 16 * cv, Dv, Dk, x, n, all, out + 16 * cv, out_stride);
  if (Dv % 16 != 0)
    ProductColumns<1, true>(S + 16 * cv, Dv, Dk, x, n, FirstLanes16(Dv % 16), out + 16 * cv, out_stride);
}

// ---- The fold: S[i][c] = Gamma * S[i][c], then fma(W[i][s], delta_s[c]) for s ascending ----
// S offset to (row i0, first column); w to row i0 of W [Dk][L]; d[s] + c0 is delta_s at the first column.
template <int kNr, int kNc, bool kMasked>
LLAMAY_AVX512_INLINE void FoldTile(float* S, int64_t Dv, const float* w, const float* const* d, int64_t c0,
                                   __m512 gamma, __mmask16 mask) {
  __m512 acc[kNr][kNc];
  for (int r = 0; r < kNr; ++r)
    for (int u = 0; u < kNc; ++u)
      acc[r][u] = _mm512_mul_ps(gamma, ColLoad<kNc, kMasked>(S + r * Dv + 16 * u, u, mask));
  for (int s = 0; s < L; ++s) {
    __m512 dv[kNc];
    for (int u = 0; u < kNc; ++u) dv[u] = ColLoad<kNc, kMasked>(d[s] + c0 + 16 * u, u, mask);
    for (int r = 0; r < kNr; ++r) {
      const __m512 b = _mm512_set1_ps(w[r * L + s]);
      for (int u = 0; u < kNc; ++u) acc[r][u] = _mm512_fmadd_ps(b, dv[u], acc[r][u]);
    }
  }
  for (int r = 0; r < kNr; ++r)
    for (int u = 0; u < kNc; ++u) ColStore<kNc, kMasked>(S + r * Dv + 16 * u, u, mask, acc[r][u]);
}

template <int kNc, bool kMasked>
LLAMAY_AVX512_INLINE void FoldColumns(float* S, int64_t Dv, int Dk, const float* w, const float* const* d,
                                      int64_t c0, __m512 gamma, __mmask16 mask) {
  constexpr int R = kNc >= 4 ? 4 : 8;
  int i = 0;
  for (; i + R <= Dk; i += R) FoldTile<R, kNc, kMasked>(S + i * Dv, Dv, w + i * L, d, c0, gamma, mask);
  for (; i < Dk; ++i) FoldTile<1, kNc, kMasked>(S + i * Dv, Dv, w + i * L, d, c0, gamma, mask);
}

LLAMAY_AVX512 void Fold(float* S, int Dv, int Dk, const float* w, const float* const* d, float gamma) {
  const __mmask16 all = 0xFFFF;
  const __m512 g = _mm512_set1_ps(gamma);
  const int full = Dv / 16;
  int cv = 0;
  for (; cv + 4 <= full; cv += 4) FoldColumns<4, false>(S + 16 * cv, Dv, Dk, w, d, 16 * cv, g, all);
  for (; cv < full; ++cv) FoldColumns<1, false>(S + 16 * cv, Dv, Dk, w, d, 16 * cv, g, all);
  if (Dv % 16 != 0) FoldColumns<1, true>(S + 16 * cv, Dv, Dk, w, d, 16 * cv, g, FirstLanes16(Dv % 16));
}

// ---- Deltas and outputs of tokens [j0, j1) of a chunk, across columns [c0, c0 + 16 kNc) ----
template <int kNc, bool kMasked>
LLAMAY_AVX512_INLINE void SubstColumns(const GatedDeltaRuleArgs& a, int64_t t0, int j0, int j1,
                                       const DeltaChunkCoefs& cf, const float* aq, int64_t Dvp,
                                       const float* const* d, float* dbuf, int64_t c0, __mmask16 mask) {
  const __m512 scale = _mm512_set1_ps(1.0f / std::sqrt(static_cast<float>(a.k_dim)));
  for (int j = j0; j < j1; ++j) {
    const int64_t t = t0 + (j - j0);
    const float* arow = aq + int64_t{2} * (j - j0) * Dvp + c0;
    const __m512 gam = _mm512_set1_ps(cf.gamma[j]);
    __m512 kv[kNc], o[kNc];
    for (int u = 0; u < kNc; ++u) {
      kv[u] = _mm512_mul_ps(gam, _mm512_loadu_ps(arow + 16 * u));
      o[u] = _mm512_mul_ps(gam, _mm512_loadu_ps(arow + Dvp + 16 * u));
    }
    for (int s = 0; s < j; ++s) {
      const __m512 bk = _mm512_set1_ps(cf.ck[j][s]), bq = _mm512_set1_ps(cf.cq[j][s]);
      for (int u = 0; u < kNc; ++u) {
        const __m512 ds = ColLoad<kNc, kMasked>(d[s] + c0 + 16 * u, u, mask);
        kv[u] = _mm512_fmadd_ps(bk, ds, kv[u]);
        o[u] = _mm512_fmadd_ps(bq, ds, o[u]);
      }
    }
    const __m512 beta = _mm512_set1_ps(a.beta[t * a.beta_stride]), bj = _mm512_set1_ps(cf.cq[j][j]);
    const float* v = a.v + t * a.v_stride + c0;
    float* out = a.out + t * a.out_stride + c0;
    for (int u = 0; u < kNc; ++u) {
      const __m512 dj = _mm512_mul_ps(_mm512_sub_ps(ColLoad<kNc, kMasked>(v + 16 * u, u, mask), kv[u]), beta);
      _mm512_storeu_ps(dbuf + int64_t{j} * Dvp + c0 + 16 * u, dj);
      o[u] = _mm512_fmadd_ps(bj, dj, o[u]);
      ColStore<kNc, kMasked>(out + 16 * u, u, mask, _mm512_mul_ps(o[u], scale));
    }
  }
}

// Every column: blocks of 128, then of 64, then of 16, then the masked rest.
LLAMAY_AVX512 void Subst(const GatedDeltaRuleArgs& a, int64_t t0, int j0, int j1, const DeltaChunkCoefs& cf,
                         const float* aq, int64_t Dvp, const float* const* d, float* dbuf) {
  const __mmask16 all = 0xFFFF;
  const int Dv = a.v_dim, full = Dv / 16;
  int cv = 0;
  for (; cv + 8 <= full; cv += 8) SubstColumns<8, false>(a, t0, j0, j1, cf, aq, Dvp, d, dbuf, 16 * cv, all);
  for (; cv + 4 <= full; cv += 4) SubstColumns<4, false>(a, t0, j0, j1, cf, aq, Dvp, d, dbuf, 16 * cv, all);
  for (; cv < full; ++cv) SubstColumns<1, false>(a, t0, j0, j1, cf, aq, Dvp, d, dbuf, 16 * cv, all);
  if (Dv % 16 != 0)
    SubstColumns<1, true>(a, t0, j0, j1, cf, aq, Dvp, d, dbuf, 16 * cv, FirstLanes16(Dv % 16));
}

}  // namespace

const DeltaRuleKernels kDeltaRuleKernels = {16, Dots, Product, Subst, Fold};

}  // namespace llamay::kernels::avx512
#endif  // __x86_64__
