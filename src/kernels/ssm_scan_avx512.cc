// AVX-512 kernels of the chunked SSM scan (ssm_scan.h): the table avx512::kSsmScanKernels, which the driver
// in ssm_scan.cc calls per head and chunk; the same structure as ssm_scan_avx2.cc and the same bits as
// reference/ssm_scan_ref.cc:
//   - a FmaDot8 is eight lanes, lane n % 8 accumulating by fma in ascending n, then Reduce8. A 16-lane
//     register accumulating lane n % 16 would be another order, so a zmm holds two independent dots, one
//     per 256-bit half, each half exactly the AVX2 accumulator: for S (P x N) by C (N x tokens) two tokens
//     C_j, C_j+1 share a register and the row of S is broadcast to both halves (one load, no shuffle); for
//     one token (decode) two rows of S share a register against C broadcast. Each half is reduced with
//     Reduce8's additions in Reduce8's order (Reduce8x16: sixteen dots at once);
//   - the intra sums and the outputs run across p, 16 per register, s ascending as in the reference;
//   - the fold keeps a tile of 4 rows x 64 state entries in registers across the chunk's 16 tokens, each
//     entry its own fma chain over s.
// Tails (N not a multiple of 8, P or N not a multiple of 16) use masked loads and stores, and masked fmas
// that leave the unused lanes' accumulators untouched.
#if defined(__x86_64__)
#include <algorithm>
#include <cstdint>

#include "kernels/avx2_util.h"
#include "kernels/avx512_util.h"
#include "kernels/ssm_scan_simd.h"

namespace llamay::kernels::avx512 {
namespace {

constexpr int L = kRecurrentChunk;

// The accumulators of NA x NB pairs of FmaDot8: pair register a holds pa[2a] (low half) and pa[2a+1] (high
// half), broadcast b holds pb[b] in both halves; acc[a NB + b] half h accumulates (pa[2a+h], pb[b]).
template <int NA, int NB>
LLAMAY_AVX512_INLINE void DotAcc(const float* const* pa, const float* const* pb, int N, __m512* acc) {
  for (int i = 0; i < NA * NB; ++i) acc[i] = _mm512_setzero_ps();
  int n = 0;
  for (; n + 8 <= N; n += 8) {
    __m512 x[NA];
    for (int a = 0; a < NA; ++a)
      x[a] = Join(_mm256_loadu_ps(pa[2 * a] + n), _mm256_loadu_ps(pa[2 * a + 1] + n));
    for (int b = 0; b < NB; ++b) {
      const __m512 y = Both(_mm256_loadu_ps(pb[b] + n));
      for (int a = 0; a < NA; ++a) acc[a * NB + b] = _mm512_fmadd_ps(x[a], y, acc[a * NB + b]);
    }
  }
  if (n < N) {
    // The last N % 8 elements: lanes past them keep their accumulators, as in the reference.
    const __mmask8 t8 = static_cast<__mmask8>((1u << (N - n)) - 1u);
    const __mmask16 t16 = static_cast<__mmask16>(t8 | (t8 << 8));
    __m512 x[NA];
    for (int a = 0; a < NA; ++a)
      x[a] = Join(_mm256_maskz_loadu_ps(t8, pa[2 * a] + n), _mm256_maskz_loadu_ps(t8, pa[2 * a + 1] + n));
    for (int b = 0; b < NB; ++b) {
      const __m512 y = Both(_mm256_maskz_loadu_ps(t8, pb[b] + n));
      for (int a = 0; a < NA; ++a) acc[a * NB + b] = _mm512_mask3_fmadd_ps(x[a], y, acc[a * NB + b], t16);
    }
  }
}

// DotAcc's dots, reduced: dot (pa[2a+h], pb[b]) goes to *dst[2 (a NB + b) + h], or nowhere when that pointer
// is null (a padding slot).
template <int NA, int NB>
LLAMAY_AVX512_INLINE void DotPairs(const float* const* pa, const float* const* pb, int N, float* const* dst) {
  __m512 acc[NA * NB];
  DotAcc<NA, NB>(pa, pb, N, acc);
  alignas(64) float sums[2 * NA * NB];
  int i = 0;
  for (; i + 8 <= NA * NB; i += 8) _mm512_store_ps(sums + 2 * i, Reduce8x16(acc + i));
  for (; i < NA * NB; ++i) {
    sums[2 * i] = avx2::Reduce8(_mm512_castps512_ps256(acc[i]));
    sums[2 * i + 1] = avx2::Reduce8(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[i]), 1)));
  }
  for (int k = 0; k < 2 * NA * NB; ++k)
    if (dst[k] != nullptr) *dst[k] = sums[k];
}

// The dots of rows [r0, r0 + 2 NA) (pairs) against column k0 (broadcast): one token, as in decode.
template <int NA>
LLAMAY_AVX512_INLINE void RowPairTile(const float* const* rows, int nr, int r0, const float* col, int N,
                                      float* out, bool lower, int k_last) {
  const float* pa[2 * NA];
  if constexpr (NA == 8) {
    // Sixteen consecutive rows: their dots land in one register, stored at once. Rows past nr are dropped;
    // in the lower triangle the rows past k_last are written too, into slots nobody reads (bc[j][s], s > j).
    for (int i = 0; i < 16; ++i) pa[i] = rows[std::min(r0 + i, nr - 1)];
    __m512 acc[8];
    DotAcc<8, 1>(pa, &col, N, acc);
    _mm512_mask_storeu_ps(out + r0, FirstLanes16(std::min(16, nr - r0)), Reduce8x16(acc));
    return;
  }
  float* dst[2 * NA];
  for (int i = 0; i < 2 * NA; ++i) {
    const int r = r0 + i;
    const bool use = r < nr && (!lower || r <= k_last);
    pa[i] = rows[std::min(r, nr - 1)];
    dst[i] = use ? out + r : nullptr;
  }
  DotPairs<NA, 1>(pa, &col, N, dst);
}

// The dots of columns [k0, k0 + 2 NA) (pairs) against rows [r0, r0 + NB) (broadcast).
template <int NA, int NB>
LLAMAY_AVX512_INLINE void ColPairTile(const float* const* rows, int r0, const float* const* cols, int nc,
                                      int k0, int N, float* out, int64_t ld, bool lower, int k_off) {
  const float* pa[2 * NA];
  for (int i = 0; i < 2 * NA; ++i) pa[i] = cols[std::min(k0 + i, nc - 1)];
  if constexpr (NB == 8) {
    // Eight consecutive rows: each token's eight dots land in one half of a register, stored at once (in the
    // lower triangle also the ones past the diagonal, into slots nobody reads: bc[j][s], s > j).
    __m512 acc[8 * NA];
    DotAcc<NA, 8>(pa, rows + r0, N, acc);
    for (int a = 0; a < NA; ++a) {
      const __m512 sums = Reduce8x16(acc + 8 * a, /*halves_first=*/true);
      const int k = k0 + 2 * a;
      if (k < nc) _mm256_storeu_ps(out + k * ld + r0, _mm512_castps512_ps256(sums));
      if (k + 1 < nc)
        _mm256_storeu_ps(out + (k + 1) * ld + r0,
                         _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(sums), 1)));
    }
    return;
  }
  float* dst[2 * NA * NB];
  for (int a = 0; a < NA; ++a)
    for (int b = 0; b < NB; ++b)
      for (int h = 0; h < 2; ++h) {
        const int k = k0 + 2 * a + h, r = r0 + b;
        const bool use = k < nc && (!lower || r <= k + k_off);
        dst[2 * (a * NB + b) + h] = use ? out + k * ld + r : nullptr;
      }
  DotPairs<NA, NB>(pa, rows + r0, N, dst);
}

// Rows [r0, r0 + NB) against every column, four (two pairs) at a time, then a pair (the last maybe one).
template <int NB>
LLAMAY_AVX512_INLINE void TokenTiles(const float* const* rows, int r0, const float* const* cols, int nc,
                                     int N, float* out, int64_t ld, bool lower, int k_off) {
  int k = 0;
  for (; k + 4 <= nc; k += 4)
    if (!lower || r0 <= k + 3 + k_off) ColPairTile<2, NB>(rows, r0, cols, nc, k, N, out, ld, lower, k_off);
  for (; k < nc; k += 2)
    if (!lower || r0 <= std::min(k + 1, nc - 1) + k_off)
      ColPairTile<1, NB>(rows, r0, cols, nc, k, N, out, ld, lower, k_off);
}

// out[k * ld + r] = FmaDot8(rows[r], cols[k], N) for r < nr, k < nc. With `lower`, only the pairs with
// r <= k + k_off are needed (the intra dots B_s . C_j, s <= j): tiles holding none of them are skipped.
LLAMAY_AVX512 void DotAll(const float* const* rows, int nr, const float* const* cols, int nc, int N,
                          float* out, int64_t ld, bool lower, int k_off) {
  auto needed = [&](int r0, int k_last) { return !lower || r0 <= k_last + k_off; };
  if (nc == 1) {
    // One token (decode): pairs of rows against the one column, eight registers (16 rows) per tile.
    int r = 0;
    for (; r + 16 <= nr; r += 16)
      if (needed(r, 0)) RowPairTile<8>(rows, nr, r, cols[0], N, out, lower, k_off);
    for (; r + 8 <= nr; r += 8)
      if (needed(r, 0)) RowPairTile<4>(rows, nr, r, cols[0], N, out, lower, k_off);
    for (; r < nr; r += 4)
      if (needed(r, 0)) RowPairTile<2>(rows, nr, r, cols[0], N, out, lower, k_off);
    return;
  }
  // Rows outer, tokens inner: a few rows of S stay in L1 while the chunk's columns stream past them. A tile
  // is 8 rows x 4 tokens (two column pairs): sixteen accumulators, one Reduce8x16 each eight.
  int r = 0;
  for (; r + 8 <= nr; r += 8) TokenTiles<8>(rows, r, cols, nc, N, out, ld, lower, k_off);
  for (; r + 4 <= nr; r += 4) TokenTiles<4>(rows, r, cols, nc, N, out, ld, lower, k_off);
  for (; r < nr; ++r) TokenTiles<1>(rows, r, cols, nc, N, out, ld, lower, k_off);
}

// Register v of a block of V: only the last one may be partial (its lanes in tail).
template <int V, bool kMasked>
LLAMAY_AVX512_INLINE __m512 Load16(const float* q, int v, __mmask16 tail) {
  return kMasked && v == V - 1 ? _mm512_maskz_loadu_ps(tail, q) : _mm512_loadu_ps(q);
}

// The fold of rows [p, p + R) and state entries [n, n + 16 V) (the last register partial when kMasked):
// acc = gamma * S; acc = fma(w[s][p], B_s[n], acc) for s = 0..L-1; S = acc.
template <int R, int V, bool kMasked>
LLAMAY_AVX512_INLINE void FoldTile(float* S, int N, int p, int n, const float* w, int64_t wld,
                                   const float* const* Bs, float gamma, __mmask16 tail) {
  const __m512 g16 = _mm512_set1_ps(gamma);
  __m512 acc[R][V];
  for (int r = 0; r < R; ++r) {
    const float* row = S + int64_t{p + r} * N + n;
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_mul_ps(g16, Load16<V, kMasked>(row + 16 * v, v, tail));
  }
  for (int s = 0; s < L; ++s) {
    __m512 b[V];
    for (int v = 0; v < V; ++v) b[v] = Load16<V, kMasked>(Bs[s] + n + 16 * v, v, tail);
    for (int r = 0; r < R; ++r) {
      const __m512 wv = _mm512_set1_ps(w[s * wld + p + r]);
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(wv, b[v], acc[r][v]);
    }
  }
  for (int r = 0; r < R; ++r) {
    float* row = S + int64_t{p + r} * N + n;
    for (int v = 0; v < V; ++v) {
      if (kMasked && v == V - 1) {
        _mm512_mask_storeu_ps(row + 16 * v, tail, acc[r][v]);
      } else {
        _mm512_storeu_ps(row + 16 * v, acc[r][v]);
      }
    }
  }
}

template <int R>
LLAMAY_AVX512_INLINE void FoldRows(float* S, int N, int p, const float* w, int64_t wld,
                                   const float* const* Bs, float gamma, __mmask16 tail) {
  int n = 0;
  for (; n + 64 <= N; n += 64) FoldTile<R, 4, false>(S, N, p, n, w, wld, Bs, gamma, tail);
  for (; n + 16 <= N; n += 16) FoldTile<R, 1, false>(S, N, p, n, w, wld, Bs, gamma, tail);
  if (n < N) FoldTile<R, 1, true>(S, N, p, n, w, wld, Bs, gamma, tail);
}

// xdt rows: out[r * ld + p] = x[r * xs + p] * f[r], in whole registers (the padding past P written too).
LLAMAY_AVX512 void Scale(const float* x, int64_t xs, const float* f, int n, int P, float* out, int64_t ld) {
  const __mmask16 ptail = FirstLanes16(P % 16);
  for (int r = 0; r < n; ++r) {
    const __m512 f16 = _mm512_set1_ps(f[r]);
    const float* xr = x + r * xs;
    float* o = out + r * ld;
    int p = 0;
    for (; p + 16 <= P; p += 16) _mm512_storeu_ps(o + p, _mm512_mul_ps(_mm512_loadu_ps(xr + p), f16));
    if (p < P) _mm512_storeu_ps(o + p, _mm512_mul_ps(_mm512_maskz_loadu_ps(ptail, xr + p), f16));
  }
}

// Outputs, one token at a time, across p.
LLAMAY_AVX512 void Outputs(const SsmChunkOutputs& o) {
  const int P = o.head_dim;
  const int64_t Pp = o.padded;
  const __mmask16 ptail = FirstLanes16(P % 16);
  const __m512 d16 = _mm512_set1_ps(o.d != nullptr ? *o.d : 0.0f);
  for (int j = o.j0; j < o.j1; ++j) {
    const __m512 g16 = _mm512_set1_ps(o.gamma[j]);
    const float* xr = o.x + (j - o.j0) * o.x_stride;
    float* yr = o.y + (j - o.j0) * o.y_stride;
    for (int p = 0; p < P; p += 16) {
      const bool part = p + 16 > P;
      __m512 intra = _mm512_setzero_ps();
      for (int s = 0; s <= j; ++s)
        intra = _mm512_fmadd_ps(_mm512_set1_ps(o.coef[j][s]), _mm512_loadu_ps(o.xdt + s * Pp + p), intra);
      __m512 y = _mm512_fmadd_ps(g16, _mm512_loadu_ps(o.inter + j * Pp + p), intra);
      if (o.d != nullptr)
        y = _mm512_fmadd_ps(part ? _mm512_maskz_loadu_ps(ptail, xr + p) : _mm512_loadu_ps(xr + p), d16, y);
      if (part) {
        _mm512_mask_storeu_ps(yr + p, ptail, y);
      } else {
        _mm512_storeu_ps(yr + p, y);
      }
    }
  }
}

// The fold: w[s][p] = Dec(L-1, s) * xdt_s[p], then rows of S four at a time.
LLAMAY_AVX512 void Fold(float* S, int P, int N, const float* xdt, int64_t Pp, const float* dec,
                        const float* const* Bs, float gamma, float* w) {
  for (int s = 0; s < L; ++s) {
    const __m512 d16 = _mm512_set1_ps(dec[s]);
    for (int p = 0; p < P; p += 16)
      _mm512_storeu_ps(w + s * Pp + p, _mm512_mul_ps(d16, _mm512_loadu_ps(xdt + s * Pp + p)));
  }
  const __mmask16 ntail = FirstLanes16(N % 16);
  int p = 0;
  for (; p + 4 <= P; p += 4) FoldRows<4>(S, N, p, w, Pp, Bs, gamma, ntail);
  for (; p < P; ++p) FoldRows<1>(S, N, p, w, Pp, Bs, gamma, ntail);
}

}  // namespace

const SsmScanKernels kSsmScanKernels = {16, DotAll, Scale, Outputs, Fold};

}  // namespace llamay::kernels::avx512
#endif  // __x86_64__
