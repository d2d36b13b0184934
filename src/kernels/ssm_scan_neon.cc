// NEON kernels of the chunked SSM scan (ssm_scan.h): the table neon::kSsmScanKernels, which the driver in
// ssm_scan.cc calls per head and chunk; the structure of ssm_scan_avx2.cc at four lanes. Every number they
// produce is made by the operations of reference/ssm_scan_ref.cc in their order (vfmaq_f32 and
// vfmaq_laneq_f32 are the fused multiply-add, rounded once), so the results match bit for bit:
//   - a FmaDot8 of two rows is one accumulator of two registers (lanes 0..3 and 4..7: lane n % 8, ascending
//     n), reduced by neon::Reduce8; the dots of a chunk are computed in register tiles of a few rows of S
//     (or B) by a few tokens, so each row is read once per chunk from memory;
//   - the intra sums and the outputs run across p (4 per register), s ascending as in the reference;
//   - the fold keeps a tile of 4 rows x 16 state entries in registers across the chunk's 16 tokens.
// Tails (N or P not a multiple of 8 or 4) run lane by lane with std::fma (a single instruction here) in the
// same lane order.
#if defined(__aarch64__)
#include <arm_neon.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/neon_util.h"
#include "kernels/reference/reference.h"
#include "kernels/ssm_scan_simd.h"

namespace llamay::kernels::neon {
namespace {

constexpr int L = kRecurrentChunk;

// FmaDot8(rows[r], cols[k], N) for r < R, k < C, written to out[k * ld + r].
template <int R, int C>
LLAMAY_NEON_INLINE void DotTile(const float* const* rows, const float* const* cols, int N, float* out,
                                int64_t ld) {
  float32x4_t lo[C][R], hi[C][R];
  for (int k = 0; k < C; ++k)
    for (int r = 0; r < R; ++r) lo[k][r] = hi[k][r] = vdupq_n_f32(0.0f);
  int n = 0;
  for (; n + 8 <= N; n += 8) {
    float32x4_t cl[C], ch[C];
    for (int k = 0; k < C; ++k) cl[k] = vld1q_f32(cols[k] + n), ch[k] = vld1q_f32(cols[k] + n + 4);
    for (int r = 0; r < R; ++r) {
      const float32x4_t sl = vld1q_f32(rows[r] + n), sh = vld1q_f32(rows[r] + n + 4);
      for (int k = 0; k < C; ++k) {
        lo[k][r] = vfmaq_f32(lo[k][r], sl, cl[k]);
        hi[k][r] = vfmaq_f32(hi[k][r], sh, ch[k]);
      }
    }
  }
  for (int k = 0; k < C; ++k) {
    for (int r = 0; r < R; ++r) {
      if (n == N) {
        out[k * ld + r] = Reduce8(lo[k][r], hi[k][r]);
        continue;
      }
      float lanes[8];
      vst1q_f32(lanes, lo[k][r]);
      vst1q_f32(lanes + 4, hi[k][r]);
      for (int i = n; i < N; ++i) lanes[i % 8] = std::fma(rows[r][i], cols[k][i], lanes[i % 8]);
      out[k * ld + r] = kernels::Reduce8(lanes);
    }
  }
}

// out[k * ld + r] = FmaDot8(rows[r], cols[k], N) for r < nr, k < nc. With `lower`, only the pairs with
// r <= k + k_off are needed (the intra dots B_s . C_j, s <= j): tiles holding none of them are skipped.
void DotAll(const float* const* rows, int nr, const float* const* cols, int nc, int N, float* out, int64_t ld,
            bool lower, int k_off) {
  auto needed = [&](int r0, int k_last) { return !lower || r0 <= k_last + k_off; };
  if (nc == 1) {
    int r = 0;
    for (; r + 8 <= nr; r += 8)
      if (needed(r, 0)) DotTile<8, 1>(rows + r, cols, N, out + r, ld);
    for (; r + 4 <= nr; r += 4)
      if (needed(r, 0)) DotTile<4, 1>(rows + r, cols, N, out + r, ld);
    for (; r < nr; ++r)
      if (needed(r, 0)) DotTile<1, 1>(rows + r, cols, N, out + r, ld);
    return;
  }
  int r = 0;
  for (; r + 4 <= nr; r += 4) {
    int k = 0;
    for (; k + 2 <= nc; k += 2)
      if (needed(r, k + 1)) DotTile<4, 2>(rows + r, cols + k, N, out + k * ld + r, ld);
    if (k < nc && needed(r, k)) DotTile<4, 1>(rows + r, cols + k, N, out + k * ld + r, ld);
  }
  for (; r < nr; ++r) {
    int k = 0;
    for (; k + 2 <= nc; k += 2)
      if (needed(r, k + 1)) DotTile<1, 2>(rows + r, cols + k, N, out + k * ld + r, ld);
    if (k < nc && needed(r, k)) DotTile<1, 1>(rows + r, cols + k, N, out + k * ld + r, ld);
  }
}

// The fold of rows [p, p + 4) and state entries [n, n + 4 * V): acc = gamma * S; acc = fma(w[s][p + r],
// B_s[n], acc) for s = 0..L-1; S = acc. w rows are padded, so w[s][p..p+4) is one register.
template <int V>
LLAMAY_NEON_INLINE void FoldTile4(float* S, int N, int p, int n, const float* w, int64_t wld,
                                  const float* const* Bs, float gamma) {
  float32x4_t acc[4][V];
  for (int r = 0; r < 4; ++r)
    for (int v = 0; v < V; ++v) acc[r][v] = vmulq_n_f32(vld1q_f32(S + int64_t{p + r} * N + n + 4 * v), gamma);
  for (int s = 0; s < L; ++s) {
    float32x4_t b[V];
    for (int v = 0; v < V; ++v) b[v] = vld1q_f32(Bs[s] + n + 4 * v);
    const float32x4_t wv = vld1q_f32(w + s * wld + p);
    for (int v = 0; v < V; ++v) {
      acc[0][v] = vfmaq_laneq_f32(acc[0][v], b[v], wv, 0);
      acc[1][v] = vfmaq_laneq_f32(acc[1][v], b[v], wv, 1);
      acc[2][v] = vfmaq_laneq_f32(acc[2][v], b[v], wv, 2);
      acc[3][v] = vfmaq_laneq_f32(acc[3][v], b[v], wv, 3);
    }
  }
  for (int r = 0; r < 4; ++r)
    for (int v = 0; v < V; ++v) vst1q_f32(S + int64_t{p + r} * N + n + 4 * v, acc[r][v]);
}

// One row p, entries [n, n + 4) at a time, then the last entries one by one.
LLAMAY_NEON_INLINE void FoldRow(float* S, int N, int p, int n, const float* w, int64_t wld,
                                const float* const* Bs, float gamma) {
  float* row = S + int64_t{p} * N;
  for (; n + 4 <= N; n += 4) {
    float32x4_t acc = vmulq_n_f32(vld1q_f32(row + n), gamma);
    for (int s = 0; s < L; ++s) acc = vfmaq_f32(acc, vdupq_n_f32(w[s * wld + p]), vld1q_f32(Bs[s] + n));
    vst1q_f32(row + n, acc);
  }
  for (; n < N; ++n) {
    float acc = gamma * row[n];
    for (int s = 0; s < L; ++s) acc = std::fma(w[s * wld + p], Bs[s][n], acc);
    row[n] = acc;
  }
}

// xdt rows: out[r * ld + p] = x[r * xs + p] * f[r].
void Scale(const float* x, int64_t xs, const float* f, int n, int P, float* out, int64_t ld) {
  const int P4 = P / 4 * 4;
  for (int r = 0; r < n; ++r) {
    const float fr = f[r];
    const float* xr = x + r * xs;
    float* o = out + r * ld;
    int p = 0;
    for (; p < P4; p += 4) vst1q_f32(o + p, vmulq_n_f32(vld1q_f32(xr + p), fr));
    for (; p < P; ++p) o[p] = xr[p] * fr;
  }
}

// Outputs, one token at a time, across p.
void Outputs(const SsmChunkOutputs& o) {
  const int P = o.head_dim, P4 = P / 4 * 4;
  const int64_t Pp = o.padded;
  const float Dh = o.d != nullptr ? *o.d : 0.0f;
  for (int j = o.j0; j < o.j1; ++j) {
    const float gamma = o.gamma[j];
    const float* coef = o.coef[j];
    const float* xr = o.x + (j - o.j0) * o.x_stride;
    float* yr = o.y + (j - o.j0) * o.y_stride;
    int p = 0;
    for (; p < P4; p += 4) {
      float32x4_t intra = vdupq_n_f32(0.0f);
      for (int s = 0; s <= j; ++s)
        intra = vfmaq_f32(intra, vdupq_n_f32(coef[s]), vld1q_f32(o.xdt + s * Pp + p));
      float32x4_t y = vfmaq_f32(intra, vdupq_n_f32(gamma), vld1q_f32(o.inter + j * Pp + p));
      if (o.d != nullptr) y = vfmaq_f32(y, vld1q_f32(xr + p), vdupq_n_f32(Dh));
      vst1q_f32(yr + p, y);
    }
    for (; p < P; ++p) {
      float intra = 0.0f;
      for (int s = 0; s <= j; ++s) intra = std::fma(coef[s], o.xdt[s * Pp + p], intra);
      float y = std::fma(gamma, o.inter[j * Pp + p], intra);
      if (o.d != nullptr) y = std::fma(xr[p], Dh, y);
      yr[p] = y;
    }
  }
}

// The fold: w[s][p] = Dec(L-1, s) * xdt_s[p], then rows of S four at a time, 16 entries then 4 at a time,
// the rest one by one.
void Fold(float* S, int P, int N, const float* xdt, int64_t Pp, const float* dec, const float* const* Bs,
          float gamma, float* w) {
  for (int s = 0; s < L; ++s)
    for (int p = 0; p < Pp; p += 4)
      vst1q_f32(w + s * Pp + p, vmulq_n_f32(vld1q_f32(xdt + s * Pp + p), dec[s]));
  const int N16 = N / 16 * 16, N4 = N / 4 * 4;
  int p = 0;
  for (; p + 4 <= P; p += 4) {
    int n = 0;
    for (; n < N16; n += 16) FoldTile4<4>(S, N, p, n, w, Pp, Bs, gamma);
    for (; n < N4; n += 4) FoldTile4<1>(S, N, p, n, w, Pp, Bs, gamma);
    for (int r = 0; r < 4; ++r) FoldRow(S, N, p + r, n, w, Pp, Bs, gamma);
  }
  for (; p < P; ++p) FoldRow(S, N, p, 0, w, Pp, Bs, gamma);
}

}  // namespace

// Scratch rows padded to eight floats (whole registers: a multiple of four is all the kernels need).
const SsmScanKernels kSsmScanKernels = {8, DotAll, Scale, Outputs, Fold};

}  // namespace llamay::kernels::neon
#endif  // __aarch64__
