// AVX2 + FMA kernels of the chunked SSM scan (ssm_scan.h): the table avx2::kSsmScanKernels, which the driver
// in ssm_scan.cc calls per head and chunk. Every number they produce is made by the operations of
// reference/ssm_scan_ref.cc in their order, so the results match bit for bit:
//   - a FmaDot8 of two rows is one ymm accumulator (lane n % 8, ascending n) reduced by Reduce8; the dots a
//     chunk needs form matrix products, S (P x N) by C (N x tokens) and B (tokens x N) by C, computed in
//     register tiles of a few rows by a few tokens so each row of S is read once per chunk from memory;
//   - the intra sums and the outputs run across p (8 per register), s ascending as in the reference;
//   - the fold keeps a tile of 4 rows x 16 state entries in registers across the chunk's 16 tokens.
// Tails (N or P not a multiple of 8) use masked loads and stores; a dot's partial last register blends so
// its unused lanes keep their accumulators untouched.
#if defined(__x86_64__)
#include <algorithm>
#include <cstdint>

#include "kernels/avx2_util.h"
#include "kernels/ssm_scan_simd.h"

namespace llamay::kernels::avx2 {
namespace {

constexpr int L = kRecurrentChunk;

// FmaDot8(rows[r], cols[k], N) for r < R, k < C, written to out[k * ld + r]. Accumulator k * R + r; the tile
// shapes with R * C == 8 reduce all eight at once (Reduce8x8: the same bits as Reduce8 on each).
template <int R, int C>
LLAMAY_AVX2_INLINE void DotTile(const float* const* rows, const float* const* cols, int N, __m256i tail,
                                float* out, int64_t ld) {
  __m256 acc[C * R];
  for (int i = 0; i < C * R; ++i) acc[i] = _mm256_setzero_ps();
  int n = 0;
  for (; n + 8 <= N; n += 8) {
    __m256 c[C];
    for (int k = 0; k < C; ++k) c[k] = _mm256_loadu_ps(cols[k] + n);
    for (int r = 0; r < R; ++r) {
      const __m256 s = _mm256_loadu_ps(rows[r] + n);
      for (int k = 0; k < C; ++k) acc[k * R + r] = _mm256_fmadd_ps(s, c[k], acc[k * R + r]);
    }
  }
  if (n < N) {
    const __m256 keep = _mm256_castsi256_ps(tail);
    __m256 c[C];
    for (int k = 0; k < C; ++k) c[k] = _mm256_maskload_ps(cols[k] + n, tail);
    for (int r = 0; r < R; ++r) {
      const __m256 s = _mm256_maskload_ps(rows[r] + n, tail);
      for (int k = 0; k < C; ++k)
        acc[k * R + r] = _mm256_blendv_ps(acc[k * R + r], _mm256_fmadd_ps(s, c[k], acc[k * R + r]), keep);
    }
  }
  // Eight accumulators at a time through Reduce8x8, the rest one by one.
  alignas(32) float sums[C * R];
  int i = 0;
  for (; i + 8 <= C * R; i += 8) _mm256_store_ps(sums + i, Reduce8x8(acc + i));
  for (; i < C * R; ++i) sums[i] = Reduce8(acc[i]);
  for (int k = 0; k < C; ++k)
    for (int r = 0; r < R; ++r) out[k * ld + r] = sums[k * R + r];
}

// out[k * ld + r] = FmaDot8(rows[r], cols[k], N) for r < nr, k < nc. With `lower`, only the pairs with
// r <= k + k_off are needed (the intra dots B_s . C_j, s <= j): tiles holding none of them are skipped.
// Rows outer, tokens inner: a few rows of S stay in L1 while the chunk's columns stream past them.
LLAMAY_AVX2 void DotAll(const float* const* rows, int nr, const float* const* cols, int nc, int N, float* out,
                        int64_t ld, bool lower, int k_off) {
  const __m256i tail = FirstLanes(N % 8);
  auto needed = [&](int r0, int k_last) { return !lower || r0 <= k_last + k_off; };
  if (nc == 1) {
    // One token (decode): eight rows per tile keep eight independent accumulators in flight.
    int r = 0;
    for (; r + 8 <= nr; r += 8)
      if (needed(r, 0)) DotTile<8, 1>(rows + r, cols, N, tail, out + r, ld);
    for (; r + 4 <= nr; r += 4)
      if (needed(r, 0)) DotTile<4, 1>(rows + r, cols, N, tail, out + r, ld);
    for (; r < nr; ++r)
      if (needed(r, 0)) DotTile<1, 1>(rows + r, cols, N, tail, out + r, ld);
    return;
  }
  int r = 0;
  for (; r + 4 <= nr; r += 4) {
    int k = 0;
    for (; k + 3 <= nc; k += 3)
      if (needed(r, k + 2)) DotTile<4, 3>(rows + r, cols + k, N, tail, out + k * ld + r, ld);
    if (k + 2 <= nc) {
      if (needed(r, k + 1)) DotTile<4, 2>(rows + r, cols + k, N, tail, out + k * ld + r, ld);
      k += 2;
    }
    if (k < nc && needed(r, k)) DotTile<4, 1>(rows + r, cols + k, N, tail, out + k * ld + r, ld);
  }
  for (; r < nr; ++r) {
    int k = 0;
    for (; k + 2 <= nc; k += 2)
      if (needed(r, k + 1)) DotTile<1, 2>(rows + r, cols + k, N, tail, out + k * ld + r, ld);
    if (k < nc && needed(r, k)) DotTile<1, 1>(rows + r, cols + k, N, tail, out + k * ld + r, ld);
  }
}

// The fold of rows [p, p + R) and state entries [n, n + 8 * V) (the last register partial when kMasked):
// acc = gamma * S; acc = fma(w[s][p], B_s[n], acc) for s = 0..L-1; S = acc.
template <int R, int V, bool kMasked>
LLAMAY_AVX2_INLINE void FoldTile(float* S, int N, int p, int n, const float* w, int64_t wld,
                                 const float* const* Bs, float gamma, __m256i tail) {
  const __m256 g8 = _mm256_set1_ps(gamma);
  __m256 acc[R][V];
  for (int r = 0; r < R; ++r) {
    const float* row = S + int64_t{p + r} * N + n;
    for (int v = 0; v < V; ++v) {
      const __m256 sv =
          kMasked && v == V - 1 ? _mm256_maskload_ps(row + 8 * v, tail) : _mm256_loadu_ps(row + 8 * v);
      acc[r][v] = _mm256_mul_ps(g8, sv);
    }
  }
  for (int s = 0; s < L; ++s) {
    __m256 b[V];
    for (int v = 0; v < V; ++v)
      b[v] = kMasked && v == V - 1 ? _mm256_maskload_ps(Bs[s] + n + 8 * v, tail)
                                   : _mm256_loadu_ps(Bs[s] + n + 8 * v);
    for (int r = 0; r < R; ++r) {
      const __m256 wv = _mm256_broadcast_ss(w + s * wld + p + r);
      for (int v = 0; v < V; ++v) acc[r][v] = _mm256_fmadd_ps(wv, b[v], acc[r][v]);
    }
  }
  for (int r = 0; r < R; ++r) {
    float* row = S + int64_t{p + r} * N + n;
    for (int v = 0; v < V; ++v) {
      if (kMasked && v == V - 1) {
        _mm256_maskstore_ps(row + 8 * v, tail, acc[r][v]);
      } else {
        _mm256_storeu_ps(row + 8 * v, acc[r][v]);
      }
    }
  }
}

template <int R>
LLAMAY_AVX2_INLINE void FoldRows(float* S, int N, int p, const float* w, int64_t wld, const float* const* Bs,
                                 float gamma, __m256i tail) {
  int n = 0;
  for (; n + 16 <= N; n += 16) FoldTile<R, 2, false>(S, N, p, n, w, wld, Bs, gamma, tail);
  for (; n + 8 <= N; n += 8) FoldTile<R, 1, false>(S, N, p, n, w, wld, Bs, gamma, tail);
  if (n < N) FoldTile<R, 1, true>(S, N, p, n, w, wld, Bs, gamma, tail);
}

// xdt rows: out[r * ld + p] = x[r * xs + p] * f[r], in whole registers (the padding past P written too).
LLAMAY_AVX2 void Scale(const float* x, int64_t xs, const float* f, int n, int P, float* out, int64_t ld) {
  const __m256i ptail = FirstLanes(P % 8);
  for (int r = 0; r < n; ++r) {
    const __m256 f8 = _mm256_set1_ps(f[r]);
    const float* xr = x + r * xs;
    float* o = out + r * ld;
    int p = 0;
    for (; p + 8 <= P; p += 8) _mm256_storeu_ps(o + p, _mm256_mul_ps(_mm256_loadu_ps(xr + p), f8));
    if (p < P) _mm256_storeu_ps(o + p, _mm256_mul_ps(_mm256_maskload_ps(xr + p, ptail), f8));
  }
}

// Outputs, one token at a time, across p.
LLAMAY_AVX2 void Outputs(const SsmChunkOutputs& o) {
  const int P = o.head_dim;
  const int64_t Pp = o.padded;
  const __m256i ptail = FirstLanes(P % 8);
  const __m256 d8 = _mm256_set1_ps(o.d != nullptr ? *o.d : 0.0f);
  for (int j = o.j0; j < o.j1; ++j) {
    const __m256 g8 = _mm256_set1_ps(o.gamma[j]);
    const float* xr = o.x + (j - o.j0) * o.x_stride;
    float* yr = o.y + (j - o.j0) * o.y_stride;
    for (int p = 0; p < P; p += 8) {
      const bool part = p + 8 > P;
      __m256 intra = _mm256_setzero_ps();
      for (int s = 0; s <= j; ++s)
        intra = _mm256_fmadd_ps(_mm256_set1_ps(o.coef[j][s]), _mm256_loadu_ps(o.xdt + s * Pp + p), intra);
      __m256 y = _mm256_fmadd_ps(g8, _mm256_loadu_ps(o.inter + j * Pp + p), intra);
      if (o.d != nullptr)
        y = _mm256_fmadd_ps(part ? _mm256_maskload_ps(xr + p, ptail) : _mm256_loadu_ps(xr + p), d8, y);
      if (part) {
        _mm256_maskstore_ps(yr + p, ptail, y);
      } else {
        _mm256_storeu_ps(yr + p, y);
      }
    }
  }
}

// The fold: w[s][p] = Dec(L-1, s) * xdt_s[p], then rows of S four at a time.
LLAMAY_AVX2 void Fold(float* S, int P, int N, const float* xdt, int64_t Pp, const float* dec,
                      const float* const* Bs, float gamma, float* w) {
  for (int s = 0; s < L; ++s) {
    const __m256 d8 = _mm256_set1_ps(dec[s]);
    for (int p = 0; p < P; p += 8)
      _mm256_storeu_ps(w + s * Pp + p, _mm256_mul_ps(d8, _mm256_loadu_ps(xdt + s * Pp + p)));
  }
  const __m256i ntail = FirstLanes(N % 8);
  int p = 0;
  for (; p + 4 <= P; p += 4) FoldRows<4>(S, N, p, w, Pp, Bs, gamma, ntail);
  for (; p < P; ++p) FoldRows<1>(S, N, p, w, Pp, Bs, gamma, ntail);
}

}  // namespace

const SsmScanKernels kSsmScanKernels = {8, DotAll, Scale, Outputs, Fold};

}  // namespace llamay::kernels::avx2
#endif  // __x86_64__
