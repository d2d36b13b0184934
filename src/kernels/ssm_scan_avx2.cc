// AVX2 + FMA version of the chunked SSM scan (ssm_scan.h), one head at a time. Every number it produces is
// made by the operations of reference/ssm_scan_ref.cc in their order, so the results match bit for bit:
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
#include <vector>

#include "kernels/avx2_util.h"
#include "kernels/reference/reference.h"
#include "kernels/ssm_scan_simd.h"

namespace llamay::kernels::avx2 {
namespace {

constexpr int L = kRecurrentChunk;

int64_t Stride(int64_t given, int64_t packed) { return given != 0 ? given : packed; }

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
LLAMAY_AVX2_INLINE void DotAll(const float* const* rows, int nr, const float* const* cols, int nc, int N,
                               float* out, int64_t ld, bool lower, int k_off) {
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

// Per-thread scratch of one head's chunk (reused across calls: decode runs it once per token).
struct Scratch {
  std::vector<float> xdt, inter, w;  // [L][Pp] each
  std::vector<float> bc;             // [L][L]: bc[j][s] = FmaDot8(B_s, C_j)
};

}  // namespace

LLAMAY_AVX2 void SsmScanHead(const SsmScanArgs& a, int h, int m) {
  const int H = a.n_heads, P = a.head_dim, N = a.d_state, G = a.n_groups;
  const int64_t g = h / (H / G);
  const int64_t T = a.n_tokens, xs = Stride(a.x_stride, int64_t{H} * P), dts = Stride(a.dt_stride, H),
                bcs = Stride(a.bc_stride, int64_t{G} * N), ys = Stride(a.y_stride, int64_t{H} * P);
  const SsmScanParts parts = SsmScanStateParts(a);
  float* S = parts.s + int64_t{h} * P * N;
  const int Pp = (P + 7) / 8 * 8;  // local rows padded to whole registers
  thread_local Scratch scratch;
  if (static_cast<int64_t>(scratch.xdt.size()) < int64_t{L} * Pp) {
    scratch.xdt.assign(int64_t{L} * Pp, 0.0f);
    scratch.inter.assign(int64_t{L} * Pp, 0.0f);
    scratch.w.assign(int64_t{L} * Pp, 0.0f);
  }
  scratch.bc.resize(L * L);
  float* xdt = scratch.xdt.data();  // xdt[j * Pp + p]
  float* inter = scratch.inter.data();
  float* w = scratch.w.data();
  float* bc = scratch.bc.data();
  float dA[L];
  const float* Bp[L];  // B_j of the chunk's tokens: stored slots for j < m of the first chunk, else input
  const float* Cp[L];  // C of the tokens output in this chunk
  const float* Srows[64];
  const __m256i ptail = FirstLanes(P % 8);
  const __m256i ntail = FirstLanes(N % 8);

  for (int s = 0; s < m; ++s) {
    dA[s] = parts.da[int64_t{s} * H + h];
    std::copy_n(parts.xdt + (int64_t{s} * H + h) * P, P, xdt + s * Pp);
    Bp[s] = parts.b + (int64_t{s} * G + g) * N;
  }
  const float Dh = a.d != nullptr ? a.d[h] : 0.0f;
  int j0 = m;
  for (int64_t t0 = 0; t0 < T;) {
    const int j1 = static_cast<int>(std::min<int64_t>(L, j0 + (T - t0)));
    // This chunk's new tokens: dt, dA, xdt, and where their B and C are.
    for (int j = j0; j < j1; ++j) {
      const int64_t t = t0 + (j - j0);
      float v = a.dt[t * dts + h];
      if (a.dt_bias != nullptr) v = v + a.dt_bias[h];
      const float dth = RefSoftplus(v);
      dA[j] = RefExp(dth * a.a[h]);
      const __m256 dth8 = _mm256_set1_ps(dth);
      const float* xr = a.x + t * xs + int64_t{h} * P;
      int p = 0;
      for (; p + 8 <= P; p += 8)
        _mm256_storeu_ps(xdt + j * Pp + p, _mm256_mul_ps(_mm256_loadu_ps(xr + p), dth8));
      if (p < P) _mm256_storeu_ps(xdt + j * Pp + p, _mm256_mul_ps(_mm256_maskload_ps(xr + p, ptail), dth8));
      Bp[j] = a.b + t * bcs + g * N;
      Cp[j] = a.c + t * bcs + g * N;
    }
    // inter[j][p] = FmaDot8(S[p], C_j) and bc[j][s] = FmaDot8(B_s, C_j), s <= j.
    for (int p0 = 0; p0 < P; p0 += 64) {
      const int np = std::min(64, P - p0);
      for (int r = 0; r < np; ++r) Srows[r] = S + int64_t{p0 + r} * N;
      DotAll(Srows, np, Cp + j0, j1 - j0, N, inter + j0 * Pp + p0, Pp, false, 0);
    }
    DotAll(Bp, j1, Cp + j0, j1 - j0, N, bc + j0 * L, L, true, j0);
    // Outputs, one token at a time, across p.
    float dec[L], gamma = 0.0f;
    for (int j = j0; j < j1; ++j) {
      const int64_t t = t0 + (j - j0);
      dec[j] = 1.0f;
      for (int s = j - 1; s >= 0; --s) dec[s] = dec[s + 1] * dA[s + 1];
      gamma = dec[0] * dA[0];
      float coef[L];
      for (int s = 0; s <= j; ++s) coef[s] = dec[s] * bc[j * L + s];
      const __m256 g8 = _mm256_set1_ps(gamma), d8 = _mm256_set1_ps(Dh);
      const float* xr = a.x + t * xs + int64_t{h} * P;
      float* yr = a.y + t * ys + int64_t{h} * P;
      for (int p = 0; p < P; p += 8) {
        const bool part = p + 8 > P;
        __m256 intra = _mm256_setzero_ps();
        for (int s = 0; s <= j; ++s)
          intra = _mm256_fmadd_ps(_mm256_set1_ps(coef[s]), _mm256_loadu_ps(xdt + s * Pp + p), intra);
        __m256 y = _mm256_fmadd_ps(g8, _mm256_loadu_ps(inter + j * Pp + p), intra);
        if (a.d != nullptr)
          y = _mm256_fmadd_ps(part ? _mm256_maskload_ps(xr + p, ptail) : _mm256_loadu_ps(xr + p), d8, y);
        if (part) {
          _mm256_maskstore_ps(yr + p, ptail, y);
        } else {
          _mm256_storeu_ps(yr + p, y);
        }
      }
    }
    if (j1 == L) {
      // The fold, with the chunk's last token's dec and gamma: w[s][p] = Dec(L-1, s) * xdt_s[p].
      for (int s = 0; s < L; ++s) {
        const __m256 d8 = _mm256_set1_ps(dec[s]);
        for (int p = 0; p < P; p += 8)
          _mm256_storeu_ps(w + s * Pp + p, _mm256_mul_ps(d8, _mm256_loadu_ps(xdt + s * Pp + p)));
      }
      int p = 0;
      for (; p + 4 <= P; p += 4) FoldRows<4>(S, N, p, w, Pp, Bp, gamma, ntail);
      for (; p < P; ++p) FoldRows<1>(S, N, p, w, Pp, Bp, gamma, ntail);
    }
    t0 += j1 - j0;
    j0 = j1 == L ? 0 : j1;
  }
  // The head's own pending slots, once it no longer reads the old ones: the call's last min(T, L) tokens.
  for (int64_t t = std::max<int64_t>(0, T - L); t < T; ++t) {
    const int64_t slot = (m + t) % L;
    parts.da[slot * H + h] = dA[slot];
    std::copy_n(xdt + slot * Pp, P, parts.xdt + (slot * H + h) * P);
  }
}

}  // namespace llamay::kernels::avx2
#endif  // __x86_64__
