// NEON version of the chunked SSM scan (ssm_scan.h), the structure of ssm_scan_avx2.cc at four lanes. Every
// number it produces is made by the operations of reference/ssm_scan_ref.cc in their order (vfmaq_f32 and
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
#include <vector>

#include "kernels/neon_util.h"
#include "kernels/reference/reference.h"
#include "kernels/ssm_scan_simd.h"

namespace llamay::kernels::neon {
namespace {

constexpr int L = kRecurrentChunk;

int64_t Stride(int64_t given, int64_t packed) { return given != 0 ? given : packed; }

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
LLAMAY_NEON_INLINE void DotAll(const float* const* rows, int nr, const float* const* cols, int nc, int N,
                               float* out, int64_t ld, bool lower, int k_off) {
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

// Per-thread scratch of one head's chunk (reused across calls: decode runs it once per token).
struct Scratch {
  std::vector<float> xdt, inter, w;  // [L][Pp] each
  std::vector<float> bc;             // [L][L]: bc[j][s] = FmaDot8(B_s, C_j)
};

}  // namespace

void SsmScanHead(const SsmScanArgs& a, int h, int m) {
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
  const int P4 = P / 4 * 4;

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
      const float* xr = a.x + t * xs + int64_t{h} * P;
      int p = 0;
      for (; p < P4; p += 4) vst1q_f32(xdt + j * Pp + p, vmulq_n_f32(vld1q_f32(xr + p), dth));
      for (; p < P; ++p) xdt[j * Pp + p] = xr[p] * dth;
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
      const float* xr = a.x + t * xs + int64_t{h} * P;
      float* yr = a.y + t * ys + int64_t{h} * P;
      int p = 0;
      for (; p < P4; p += 4) {
        float32x4_t intra = vdupq_n_f32(0.0f);
        for (int s = 0; s <= j; ++s)
          intra = vfmaq_f32(intra, vdupq_n_f32(coef[s]), vld1q_f32(xdt + s * Pp + p));
        float32x4_t y = vfmaq_f32(intra, vdupq_n_f32(gamma), vld1q_f32(inter + j * Pp + p));
        if (a.d != nullptr) y = vfmaq_f32(y, vld1q_f32(xr + p), vdupq_n_f32(Dh));
        vst1q_f32(yr + p, y);
      }
      for (; p < P; ++p) {
        float intra = 0.0f;
        for (int s = 0; s <= j; ++s) intra = std::fma(coef[s], xdt[s * Pp + p], intra);
        float y = std::fma(gamma, inter[j * Pp + p], intra);
        if (a.d != nullptr) y = std::fma(xr[p], Dh, y);
        yr[p] = y;
      }
    }
    if (j1 == L) {
      // The fold, with the chunk's last token's dec and gamma: w[s][p] = Dec(L-1, s) * xdt_s[p].
      for (int s = 0; s < L; ++s)
        for (int p = 0; p < Pp; p += 4)
          vst1q_f32(w + s * Pp + p, vmulq_n_f32(vld1q_f32(xdt + s * Pp + p), dec[s]));
      const int N16 = N / 16 * 16, N4 = N / 4 * 4;
      int p = 0;
      for (; p + 4 <= P; p += 4) {
        int n = 0;
        for (; n < N16; n += 16) FoldTile4<4>(S, N, p, n, w, Pp, Bp, gamma);
        for (; n < N4; n += 4) FoldTile4<1>(S, N, p, n, w, Pp, Bp, gamma);
        for (int r = 0; r < 4; ++r) FoldRow(S, N, p + r, n, w, Pp, Bp, gamma);
      }
      for (; p < P; ++p) FoldRow(S, N, p, 0, w, Pp, Bp, gamma);
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

}  // namespace llamay::kernels::neon
#endif  // __aarch64__
