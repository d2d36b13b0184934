// NEON kernels of the chunked gated delta rule (delta_rule.h): the table neon::kDeltaRuleKernels, which the
// driver in delta_rule.cc calls per value head and chunk; the structure of delta_rule_avx2.cc at four
// lanes. Every lane performs exactly the operations of reference/delta_rule_ref.cc for one column c: each
// accumulator is a chain of fused multiply-adds (vfmaq_f32, one rounding, as std::fma) in the reference's
// order, every other operation a plain f32 one, so the results are the reference's bits. Per chunk of a
// head: A = S^T k_j and Q = S^T q_j for the chunk's tokens as one register-blocked product against the
// fixed S (read once per chunk); the deltas and outputs token by token across columns; the fold as a second
// blocked product. FmaDot8 keeps lanes i % 8 as two registers (lanes 0..3 and 4..7), then neon::Reduce8.
// Partial registers (columns not a multiple of 4) go through a small buffer: lanes past the end are zero,
// never stored, and lanes never mix.
#if defined(__aarch64__)
#include <arm_neon.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/delta_rule_simd.h"
#include "kernels/neon_util.h"
#include "kernels/recurrent_chunk.h"

namespace llamay::kernels::neon {
namespace {

constexpr int L = kRecurrentChunk;

// The reference's FmaDot8 of four vectors a[r] against bk and against bq: out_k[r] = FmaDot8(a[r], bk, n),
// out_q[r] = FmaDot8(a[r], bq, n). Each dot's lanes i % 8 are two registers (0..3, 4..7); a tail lane by
// lane; then Reduce8. Eight independent dots keep the FMA pipes busy.
LLAMAY_NEON_INLINE void FmaDots4x2(const float* const* a, const float* bk, const float* bq, int n,
                                   float* out_k, float* out_q) {
  const float* ar[4] = {a[0], a[1], a[2], a[3]};
  float32x4_t lo[8], hi[8];
  for (int r = 0; r < 8; ++r) lo[r] = hi[r] = vdupq_n_f32(0.0f);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const float32x4_t kl = vld1q_f32(bk + i), kh = vld1q_f32(bk + i + 4);
    const float32x4_t ql = vld1q_f32(bq + i), qh = vld1q_f32(bq + i + 4);
    for (int r = 0; r < 4; ++r) {
      const float32x4_t xl = vld1q_f32(ar[r] + i), xh = vld1q_f32(ar[r] + i + 4);
      lo[r] = vfmaq_f32(lo[r], xl, kl);
      hi[r] = vfmaq_f32(hi[r], xh, kh);
      lo[4 + r] = vfmaq_f32(lo[4 + r], xl, ql);
      hi[4 + r] = vfmaq_f32(hi[4 + r], xh, qh);
    }
  }
  if (i < n) {
    float lanes[8][8];
    for (int r = 0; r < 8; ++r) {
      vst1q_f32(lanes[r], lo[r]);
      vst1q_f32(lanes[r] + 4, hi[r]);
    }
    for (; i < n; ++i) {
      for (int r = 0; r < 4; ++r) {
        lanes[r][i % 8] = std::fma(ar[r][i], bk[i], lanes[r][i % 8]);
        lanes[4 + r][i % 8] = std::fma(ar[r][i], bq[i], lanes[4 + r][i % 8]);
      }
    }
    for (int r = 0; r < 8; ++r) {
      lo[r] = vld1q_f32(lanes[r]);
      hi[r] = vld1q_f32(lanes[r] + 4);
    }
  }
  for (int r = 0; r < 4; ++r) {
    out_k[r] = Reduce8(lo[r], hi[r]);
    out_q[r] = Reduce8(lo[4 + r], hi[4 + r]);
  }
}

// kk[j][s] for s < j and kq[j][s] for s <= j of every token j in [j0, j1), four keys k_s at a time (k_j
// again past s = j: unused).
void Dots(const float* const* kp, const float* const* qp, int j0, int j1, int Dk, float (*kk)[L],
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

// Register blocks: kNr rows (broadcast scalars) by kNc column registers (16 or 8 accumulators of 32).
template <int kNc>
constexpr int kMaxRows = kNc >= 4 ? 4 : 8;

// ---- A and Q: out[r][c] = sum over i ascending of fma(S[i][c], x[r][i]), for columns [0, 4 kNc) of S ----
template <int kNr, int kNc, bool kMasked>
LLAMAY_NEON_INLINE void ProductTile(const float* S, int64_t Dv, int Dk, const float* const* x, int lanes,
                                    float* out, int64_t out_stride) {
  const float* xr[kNr];
  float32x4_t acc[kNr][kNc];
  for (int r = 0; r < kNr; ++r) {
    xr[r] = x[r];
    for (int u = 0; u < kNc; ++u) acc[r][u] = vdupq_n_f32(0.0f);
  }
  for (int i = 0; i < Dk; ++i) {
    const float* row = S + int64_t{i} * Dv;
    float32x4_t s[kNc];
    for (int u = 0; u < kNc; ++u) s[u] = ColLoad<kNc, kMasked>(row + 4 * u, u, lanes);
    for (int r = 0; r < kNr; ++r) {
      const float b = xr[r][i];
      for (int u = 0; u < kNc; ++u) acc[r][u] = vfmaq_n_f32(acc[r][u], s[u], b);
    }
  }
  for (int r = 0; r < kNr; ++r)
    for (int u = 0; u < kNc; ++u) vst1q_f32(out + r * out_stride + 4 * u, acc[r][u]);
}

template <int kNc, bool kMasked>
LLAMAY_NEON_INLINE void ProductColumns(const float* S, int64_t Dv, int Dk, const float* const* x, int n,
                                       int lanes, float* out, int64_t os) {
  constexpr int R = kMaxRows<kNc>;
  int r = 0;
  for (; r + R <= n; r += R) ProductTile<R, kNc, kMasked>(S, Dv, Dk, x + r, lanes, out + r * os, os);
  for (; r + 2 <= n; r += 2) ProductTile<2, kNc, kMasked>(S, Dv, Dk, x + r, lanes, out + r * os, os);
  if (r < n) ProductTile<1, kNc, kMasked>(S, Dv, Dk, x + r, lanes, out + r * os, os);
}

// out row r (stride out_stride, padded to whole registers) = S^T x[r] for r < n. Column blocks outermost:
// a block's slice of S stays in L1 while every vector passes over it.
void Product(const float* S, int Dv, int Dk, const float* const* x, int n, float* out, int64_t out_stride) {
  const int full = Dv / 4;
  int cv = 0;
  for (; cv + 4 <= full; cv += 4)
    ProductColumns<4, false>(S + 4 * cv, Dv, Dk, x, n, 4, out + 4 * cv, out_stride);
  for (; cv < full; ++cv) ProductColumns<1, false>(S + 4 * cv, Dv, Dk, x, n, 4, out + 4 * cv, out_stride);
  if (Dv % 4 != 0) ProductColumns<1, true>(S + 4 * cv, Dv, Dk, x, n, Dv % 4, out + 4 * cv, out_stride);
}

// ---- The fold: S[i][c] = Gamma * S[i][c], then fma(W[i][s], delta_s[c]) for s ascending ----
// S offset to (row i0, first column); w to row i0 of W [Dk][L]; d[s] + c0 is delta_s at the first column.
template <int kNr, int kNc, bool kMasked>
LLAMAY_NEON_INLINE void FoldTile(float* S, int64_t Dv, const float* w, const float* const* d, int64_t c0,
                                 float32x4_t gamma, int lanes) {
  float32x4_t acc[kNr][kNc];
  for (int r = 0; r < kNr; ++r)
    for (int u = 0; u < kNc; ++u)
      acc[r][u] = vmulq_f32(gamma, ColLoad<kNc, kMasked>(S + r * Dv + 4 * u, u, lanes));
  for (int s = 0; s < L; ++s) {
    float32x4_t dv[kNc];
    for (int u = 0; u < kNc; ++u) dv[u] = ColLoad<kNc, kMasked>(d[s] + c0 + 4 * u, u, lanes);
    for (int r = 0; r < kNr; ++r) {
      const float b = w[r * L + s];
      for (int u = 0; u < kNc; ++u) acc[r][u] = vfmaq_n_f32(acc[r][u], dv[u], b);
    }
  }
  for (int r = 0; r < kNr; ++r)
    for (int u = 0; u < kNc; ++u) ColStore<kNc, kMasked>(S + r * Dv + 4 * u, u, lanes, acc[r][u]);
}

template <int kNc, bool kMasked>
LLAMAY_NEON_INLINE void FoldColumns(float* S, int64_t Dv, int Dk, const float* w, const float* const* d,
                                    int64_t c0, float32x4_t gamma, int lanes) {
  constexpr int R = kMaxRows<kNc>;
  int i = 0;
  for (; i + R <= Dk; i += R) FoldTile<R, kNc, kMasked>(S + i * Dv, Dv, w + i * L, d, c0, gamma, lanes);
  for (; i < Dk; ++i) FoldTile<1, kNc, kMasked>(S + i * Dv, Dv, w + i * L, d, c0, gamma, lanes);
}

void Fold(float* S, int Dv, int Dk, const float* w, const float* const* d, float gamma) {
  const float32x4_t g = vdupq_n_f32(gamma);
  const int full = Dv / 4;
  int cv = 0;
  for (; cv + 4 <= full; cv += 4) FoldColumns<4, false>(S + 4 * cv, Dv, Dk, w, d, 4 * cv, g, 4);
  for (; cv < full; ++cv) FoldColumns<1, false>(S + 4 * cv, Dv, Dk, w, d, 4 * cv, g, 4);
  if (Dv % 4 != 0) FoldColumns<1, true>(S + 4 * cv, Dv, Dk, w, d, 4 * cv, g, Dv % 4);
}

// ---- Deltas and outputs of tokens [j0, j1) of a chunk, across columns [c0, c0 + 4 kNc) ----
template <int kNc, bool kMasked>
LLAMAY_NEON_INLINE void SubstColumns(const GatedDeltaRuleArgs& a, int64_t t0, int j0, int j1,
                                     const DeltaChunkCoefs& cf, const float* aq, int64_t Dvp,
                                     const float* const* d, float* dbuf, int64_t c0, int lanes) {
  const float32x4_t scale = vdupq_n_f32(1.0f / std::sqrt(static_cast<float>(a.k_dim)));
  for (int j = j0; j < j1; ++j) {
    const int64_t t = t0 + (j - j0);
    const float* arow = aq + int64_t{2} * (j - j0) * Dvp + c0;
    const float32x4_t gam = vdupq_n_f32(cf.gamma[j]);
    float32x4_t kv[kNc], o[kNc];
    for (int u = 0; u < kNc; ++u) {
      kv[u] = vmulq_f32(gam, vld1q_f32(arow + 4 * u));
      o[u] = vmulq_f32(gam, vld1q_f32(arow + Dvp + 4 * u));
    }
    for (int s = 0; s < j; ++s) {
      const float bk = cf.ck[j][s], bq = cf.cq[j][s];
      for (int u = 0; u < kNc; ++u) {
        const float32x4_t ds = ColLoad<kNc, kMasked>(d[s] + c0 + 4 * u, u, lanes);
        kv[u] = vfmaq_n_f32(kv[u], ds, bk);
        o[u] = vfmaq_n_f32(o[u], ds, bq);
      }
    }
    const float32x4_t beta = vdupq_n_f32(a.beta[t * a.beta_stride]);
    const float bj = cf.cq[j][j];
    const float* v = a.v + t * a.v_stride + c0;
    float* out = a.out + t * a.out_stride + c0;
    for (int u = 0; u < kNc; ++u) {
      const float32x4_t dj = vmulq_f32(vsubq_f32(ColLoad<kNc, kMasked>(v + 4 * u, u, lanes), kv[u]), beta);
      vst1q_f32(dbuf + int64_t{j} * Dvp + c0 + 4 * u, dj);
      o[u] = vfmaq_n_f32(o[u], dj, bj);
      ColStore<kNc, kMasked>(out + 4 * u, u, lanes, vmulq_f32(o[u], scale));
    }
  }
}

// Every column: blocks of 16, then of 4, then the partial rest.
void Subst(const GatedDeltaRuleArgs& a, int64_t t0, int j0, int j1, const DeltaChunkCoefs& cf,
           const float* aq, int64_t Dvp, const float* const* d, float* dbuf) {
  const int Dv = a.v_dim, full = Dv / 4;
  int cv = 0;
  for (; cv + 4 <= full; cv += 4) SubstColumns<4, false>(a, t0, j0, j1, cf, aq, Dvp, d, dbuf, 4 * cv, 4);
  for (; cv < full; ++cv) SubstColumns<1, false>(a, t0, j0, j1, cf, aq, Dvp, d, dbuf, 4 * cv, 4);
  if (Dv % 4 != 0) SubstColumns<1, true>(a, t0, j0, j1, cf, aq, Dvp, d, dbuf, 4 * cv, Dv % 4);
}

}  // namespace

const DeltaRuleKernels kDeltaRuleKernels = {4, Dots, Product, Subst, Fold};

}  // namespace llamay::kernels::neon
#endif  // __aarch64__
