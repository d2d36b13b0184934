// NEON version of the chunked gated delta rule (delta_rule.h), the structure of delta_rule_avx2.cc at four
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
#include <vector>

#include "kernels/delta_rule_simd.h"
#include "kernels/neon_util.h"
#include "kernels/recurrent_chunk.h"
#include "kernels/reference/reference.h"

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
LLAMAY_NEON_INLINE void Product(const float* S, int Dv, int Dk, const float* const* x, int n, float* out,
                                int64_t out_stride) {
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

LLAMAY_NEON_INLINE void Fold(float* S, int Dv, int Dk, const float* w, const float* const* d, float gamma) {
  const float32x4_t g = vdupq_n_f32(gamma);
  const int full = Dv / 4;
  int cv = 0;
  for (; cv + 4 <= full; cv += 4) FoldColumns<4, false>(S + 4 * cv, Dv, Dk, w, d, 4 * cv, g, 4);
  for (; cv < full; ++cv) FoldColumns<1, false>(S + 4 * cv, Dv, Dk, w, d, 4 * cv, g, 4);
  if (Dv % 4 != 0) FoldColumns<1, true>(S + 4 * cv, Dv, Dk, w, d, 4 * cv, g, Dv % 4);
}

// ---- Deltas and outputs of tokens [j0, j1) of a chunk, across columns [c0, c0 + 4 kNc) ----
struct ChunkCoefs {
  float gamma[L];
  float ck[L][L];  // Dec(j, s) * kk(s), s < j
  float cq[L][L];  // Dec(j, s) * kq(s), s <= j
};

template <int kNc, bool kMasked>
LLAMAY_NEON_INLINE void SubstColumns(const GatedDeltaRuleArgs& a, int64_t t0, int j0, int j1,
                                     const ChunkCoefs& cf, const float* aq, int64_t Dvp,
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

// Grow-only scratch of one thread: the chunk's deltas [L][Dvp], A and Q rows [2L][Dvp], W [Dk][L].
struct Scratch {
  std::vector<float> dbuf, aq, w;
};

}  // namespace

void GatedDeltaChunkHead(const DeltaChunkHeadArgs& h) {
  const GatedDeltaRuleArgs& a = h.a;
  const int Dk = a.k_dim, Dv = a.v_dim, m = h.pending;
  const int64_t T = a.n_tokens, Dvp = (Dv + 3) / 4 * 4;
  thread_local Scratch scratch;
  if (scratch.dbuf.size() < static_cast<size_t>(L * Dvp)) scratch.dbuf.resize(L * Dvp);
  if (scratch.aq.size() < static_cast<size_t>(2 * L * Dvp)) scratch.aq.resize(2 * L * Dvp);
  if (scratch.w.size() < static_cast<size_t>(int64_t{L} * Dk)) scratch.w.resize(int64_t{L} * Dk);
  float* dbuf = scratch.dbuf.data();
  float* aq = scratch.aq.data();
  float* w = scratch.w.data();

  // Slot s of the chunk: its key, its delta (pending slots are read in place) and its decay.
  const float* kp[L];
  const float* dp[L];
  const float* x[2 * L];  // the product's vectors: k_j, q_j for the chunk's tokens of this call
  float eg[L];
  for (int s = 0; s < m; ++s) {
    kp[s] = h.pend_k + s * h.pend_k_stride;
    dp[s] = h.pend_delta + s * h.pend_delta_stride;
    eg[s] = h.pend_eg[s * h.pend_eg_stride];
  }
  ChunkCoefs cf;
  float dec[L];
  int j0 = m;
  for (int64_t t0 = 0; t0 < T;) {
    const int j1 = static_cast<int>(std::min<int64_t>(L, j0 + (T - t0)));
    for (int j = j0; j < j1; ++j) {
      const int64_t t = t0 + (j - j0);
      kp[j] = a.k + t * a.k_stride;
      dp[j] = dbuf + j * Dvp;
      eg[j] = RefExp(a.g[t * a.g_stride]);
      x[2 * (j - j0)] = kp[j];
      x[2 * (j - j0) + 1] = a.q + t * a.q_stride;
    }
    for (int j = j0; j < j1; ++j) {
      dec[j] = 1.0f;
      for (int s = j - 1; s >= 0; --s) dec[s] = dec[s + 1] * eg[s + 1];
      cf.gamma[j] = dec[0] * eg[0];
      // kk(s) for s < j and kq(s) for s <= j, four keys k_s at a time (k_j again past s = j: unused).
      float kk[L + 3], kq[L + 3];
      for (int s = 0; s <= j; s += 4) {
        const float* ks[4];
        for (int r = 0; r < 4; ++r) ks[r] = kp[std::min(s + r, j)];
        FmaDots4x2(ks, kp[j], x[2 * (j - j0) + 1], Dk, kk + s, kq + s);
      }
      for (int s = 0; s < j; ++s) cf.ck[j][s] = dec[s] * kk[s];
      for (int s = 0; s <= j; ++s) cf.cq[j][s] = dec[s] * kq[s];
    }
    Product(a.state, Dv, Dk, x, 2 * (j1 - j0), aq, Dvp);
    {
      const int full = Dv / 4;
      int cv = 0;
      for (; cv + 4 <= full; cv += 4) SubstColumns<4, false>(a, t0, j0, j1, cf, aq, Dvp, dp, dbuf, 4 * cv, 4);
      for (; cv < full; ++cv) SubstColumns<1, false>(a, t0, j0, j1, cf, aq, Dvp, dp, dbuf, 4 * cv, 4);
      if (Dv % 4 != 0) SubstColumns<1, true>(a, t0, j0, j1, cf, aq, Dvp, dp, dbuf, 4 * cv, Dv % 4);
    }
    if (j1 == L) {
      // dec holds Dec(L - 1, s) from the last token's coefficients.
      for (int i = 0; i < Dk; ++i)
        for (int s = 0; s < L; ++s) w[i * L + s] = dec[s] * kp[s][i];
      Fold(a.state, Dv, Dk, w, dp, cf.gamma[L - 1]);
    }
    t0 += j1 - j0;
    j0 = j1 == L ? 0 : j1;
  }

  // This head's pending slots: every slot a token of the call occupied holds that slot's last token.
  const int64_t last_slot = (m + T - 1) % L;
  for (int s = 0; s < L; ++s) {
    if (T - 1 - (last_slot - s + L) % L < 0) continue;
    std::copy_n(dbuf + s * Dvp, Dv, h.pend_delta + s * h.pend_delta_stride);
    h.pend_eg[s * h.pend_eg_stride] = eg[s];
  }
}

}  // namespace llamay::kernels::neon
#endif  // __aarch64__
