// NEON recurrent kernels (recurrent_neon.h), the structure of recurrent_avx2.cc at four lanes. Each lane
// performs exactly the f32 operations of reference/recurrent_ref.cc for one element (multiply, then add:
// never fused), so the results match the scalar reference bit for bit:
//   - the convolution runs across 4 channels per register, all tokens of a chunk on a few channel blocks
//     in turn, the window of the last K inputs held in registers; SiLU is ops_neon's over each row after;
//   - the SSM scan keeps the state row of one (head, p) in lanes n % 8 as two registers (lanes 0..3 and
//     4..7) and sums y in that lane order, then neon::Reduce8: RefDotF32's order; all tokens of a chunk
//     run on a few rows while they sit in L1; dt and dA are RefSoftplus and RefExp, as scalars;
//   - the delta rule runs across value columns j (4 per register, blocks of 16 columns), each column's
//     sums over i sequential as in the reference; all tokens run on one column block while its Dk x 16
//     slice of the state sits in L1, one pass over it per token (token t's update and output with token
//     t+1's decay and key sum). The decay factor is RefExp, as a scalar.
// Partial registers (channels or columns not a multiple of 4) go through a small buffer: the lanes past
// the end are zero, never stored, and lanes never mix.
#if defined(__aarch64__)
#include "kernels/recurrent_neon.h"

#include <arm_neon.h>

#include <algorithm>
#include <cmath>

#include "kernels/neon_util.h"
#include "kernels/ops_neon.h"
#include "kernels/reference/reference.h"

namespace llamay::kernels::neon {
namespace {

int64_t Stride(int64_t given, int64_t packed) { return given != 0 ? given : packed; }

// The first `lanes` floats at p (1 <= lanes <= 4), the other lanes zero.
LLAMAY_NEON_INLINE float32x4_t LoadPartial(const float* p, int lanes) {
  float buf[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int l = 0; l < lanes; ++l) buf[l] = p[l];
  return vld1q_f32(buf);
}
// Stores the first `lanes` lanes of v at p.
LLAMAY_NEON_INLINE void StorePartial(float* p, int lanes, float32x4_t v) {
  float buf[4];
  vst1q_f32(buf, v);
  for (int l = 0; l < lanes; ++l) p[l] = buf[l];
}

// Register u of a block of kNv: only the last one may be partial (its lanes in `lanes`).
template <int kNv, bool kMasked>
LLAMAY_NEON_INLINE float32x4_t ColLoad(const float* p, int u, int lanes) {
  return kMasked && u == kNv - 1 ? LoadPartial(p, lanes) : vld1q_f32(p);
}
template <int kNv, bool kMasked>
LLAMAY_NEON_INLINE void ColStore(float* p, int u, int lanes, float32x4_t v) {
  if (kMasked && u == kNv - 1) {
    StorePartial(p, lanes, v);
  } else {
    vst1q_f32(p, v);
  }
}

// ---- Causal convolution ----

// Taps of channels [c, c + 4) (lanes beyond `lanes` zero) transposed: out[k] lane l = weight[c + l][k].
template <int kK>
LLAMAY_NEON_INLINE void TransposeTaps(const float* weight, int64_t c, int lanes, int K, float32x4_t* out) {
  if (kK == 4 && lanes == 4) {
    // Four rows of four taps: vld4q deinterleaves them, register k taking element k of each row.
    const float32x4x4_t t = vld4q_f32(weight + c * 4);
    out[0] = t.val[0];
    out[1] = t.val[1];
    out[2] = t.val[2];
    out[3] = t.val[3];
    return;
  }
  for (int k = 0; k < K; ++k) {
    float col[4];
    for (int l = 0; l < 4; ++l) col[l] = l < lanes ? weight[(c + l) * K + k] : 0.0f;
    out[k] = vld1q_f32(col);
  }
}

// Channels [c, c + 4 * kBlocks) for every token of a (the last register partial, its lanes in last_lanes,
// when kMasked). kK: the kernel width when known at compile time (the window then stays in registers), 0
// for a run-time width.
template <int kK, int kBlocks, bool kMasked>
LLAMAY_NEON_INLINE void ConvBlocks(const CausalConv1dArgs& a, int64_t c, int last_lanes) {
  const int K = kK > 0 ? kK : a.kernel;
  constexpr int kMax = kK > 0 ? kK : kMaxConvKernel;
  const int64_t C = a.channels, xs = Stride(a.x_stride, C), ys = Stride(a.y_stride, C);
  float32x4_t taps[kBlocks][kMax];
  for (int b = 0; b < kBlocks; ++b)
    TransposeTaps<kK>(a.weight, c + 4 * b, b == kBlocks - 1 ? last_lanes : 4, K, taps[b]);
  float32x4_t win[kBlocks][kMax];
  for (int b = 0; b < kBlocks; ++b)
    for (int k = 0; k + 1 < K; ++k)
      win[b][k] = ColLoad<kBlocks, kMasked>(a.conv_state + k * C + c + 4 * b, b, last_lanes);
  for (int64_t t = 0; t < a.n_tokens; ++t) {
    for (int b = 0; b < kBlocks; ++b) {
      // Read before y[t] is written: y may be x.
      win[b][K - 1] = ColLoad<kBlocks, kMasked>(a.x + t * xs + c + 4 * b, b, last_lanes);
      float32x4_t sum = vdupq_n_f32(0.0f);
      for (int k = 0; k < K; ++k) sum = vaddq_f32(sum, vmulq_f32(taps[b][k], win[b][k]));
      if (a.bias != nullptr)
        sum = vaddq_f32(sum, ColLoad<kBlocks, kMasked>(a.bias + c + 4 * b, b, last_lanes));
      ColStore<kBlocks, kMasked>(a.y + t * ys + c + 4 * b, b, last_lanes, sum);
      for (int k = 0; k + 1 < K; ++k) win[b][k] = win[b][k + 1];
    }
  }
  for (int b = 0; b < kBlocks; ++b)
    for (int k = 0; k + 1 < K; ++k)
      ColStore<kBlocks, kMasked>(a.conv_state + k * C + c + 4 * b, b, last_lanes, win[b][k]);
}

template <int kK>
void ConvAll(const CausalConv1dArgs& a) {
  constexpr int kWide = kK > 0 && kK <= 4 ? 3 : 1;  // registers of taps and of the window: kWide * K each
  int64_t c = 0;
  for (; c + 4 * kWide <= a.channels; c += 4 * kWide) ConvBlocks<kK, kWide, false>(a, c, 4);
  for (; c + 4 <= a.channels; c += 4) ConvBlocks<kK, 1, false>(a, c, 4);
  if (c < a.channels) ConvBlocks<kK, 1, true>(a, c, static_cast<int>(a.channels - c));
}

// Tokens per pass of the channel blocks.
constexpr int64_t kConvChunk = 32;

// ---- SSM scan ----

// Tokens whose dt and dA are computed together before the rows of a head run over them.
constexpr int64_t kScanChunk = 32;

// One token on kRows state rows s[r] [N] (consecutive p of one head): s = s * dA + B * x_dt[r], y[r] =
// RefDotF32(s, C, N), its lanes 0..3 in lo[r] and 4..7 in hi[r]. The rows' sums are independent chains:
// several rows at once keep the adders busy.
template <int kRows>
LLAMAY_NEON_INLINE void ScanRows(float* const* s, const float* B, const float* Cv, int N, float dA,
                                 const float* x_dt, float* y) {
  const float32x4_t dA4 = vdupq_n_f32(dA);
  float32x4_t xdt4[kRows], lo[kRows], hi[kRows];
  for (int r = 0; r < kRows; ++r) {
    xdt4[r] = vdupq_n_f32(x_dt[r]);
    lo[r] = vdupq_n_f32(0.0f);
    hi[r] = vdupq_n_f32(0.0f);
  }
  int n = 0;
  for (; n + 8 <= N; n += 8) {
    const float32x4_t b0 = vld1q_f32(B + n), b1 = vld1q_f32(B + n + 4);
    const float32x4_t c0 = vld1q_f32(Cv + n), c1 = vld1q_f32(Cv + n + 4);
    for (int r = 0; r < kRows; ++r) {
      float32x4_t s0 = vld1q_f32(s[r] + n), s1 = vld1q_f32(s[r] + n + 4);
      s0 = vaddq_f32(vmulq_f32(s0, dA4), vmulq_f32(b0, xdt4[r]));
      s1 = vaddq_f32(vmulq_f32(s1, dA4), vmulq_f32(b1, xdt4[r]));
      vst1q_f32(s[r] + n, s0);
      vst1q_f32(s[r] + n + 4, s1);
      lo[r] = vaddq_f32(lo[r], vmulq_f32(s0, c0));
      hi[r] = vaddq_f32(hi[r], vmulq_f32(s1, c1));
    }
  }
  if (n + 4 <= N) {  // n % 8 == 0 here: lanes 0..3
    const float32x4_t b0 = vld1q_f32(B + n), c0 = vld1q_f32(Cv + n);
    for (int r = 0; r < kRows; ++r) {
      float32x4_t s0 = vld1q_f32(s[r] + n);
      s0 = vaddq_f32(vmulq_f32(s0, dA4), vmulq_f32(b0, xdt4[r]));
      vst1q_f32(s[r] + n, s0);
      lo[r] = vaddq_f32(lo[r], vmulq_f32(s0, c0));
    }
    n += 4;
  }
  for (int r = 0; r < kRows; ++r) {
    if (n == N) {
      y[r] = Reduce8(lo[r], hi[r]);
      continue;
    }
    float lanes[8];
    vst1q_f32(lanes, lo[r]);
    vst1q_f32(lanes + 4, hi[r]);
    for (int m = n; m < N; ++m) {
      const float sn = (s[r][m] * dA) + (B[m] * x_dt[r]);
      s[r][m] = sn;
      lanes[m % 8] = lanes[m % 8] + sn * Cv[m];
    }
    y[r] = kernels::Reduce8(lanes);
  }
}

// Rows [p, p + kRows) of head h (a group g) for the tokens [t0, t0 + tn) whose dt and dA are given.
template <int kRows>
LLAMAY_NEON_INLINE void ScanTokens(const SsmScanArgs& a, int h, int64_t g, int p, int64_t t0, int64_t tn,
                                   const float* dt, const float* dA) {
  const int H = a.n_heads, P = a.head_dim, N = a.d_state;
  const int64_t xs = Stride(a.x_stride, int64_t{H} * P), bcs = Stride(a.bc_stride, int64_t{a.n_groups} * N),
                ys = Stride(a.y_stride, int64_t{H} * P);
  float* rows[kRows];
  for (int r = 0; r < kRows; ++r) rows[r] = a.state + (int64_t{h} * P + p + r) * N;
  for (int64_t u = 0; u < tn; ++u) {
    const int64_t t = t0 + u;
    const float* xv = a.x + t * xs + int64_t{h} * P + p;
    float x_dt[kRows], y[kRows];
    for (int r = 0; r < kRows; ++r) x_dt[r] = xv[r] * dt[u];
    ScanRows<kRows>(rows, a.b + t * bcs + g * N, a.c + t * bcs + g * N, N, dA[u], x_dt, y);
    float* yo = a.y + t * ys + int64_t{h} * P + p;
    for (int r = 0; r < kRows; ++r) yo[r] = a.d != nullptr ? y[r] + xv[r] * a.d[h] : y[r];
  }
}

// ---- Gated delta rule ----

// Columns [j0, j0 + 4 * kNv) of one value head (the last register partial when kMasked: its lanes in
// `lanes`) for every token. Each token's rank-one update (and output sum) shares its pass over the state
// with the next token's decay (and key sum): one load and one store per element and token; each element
// still sees the reference's operations in the reference's order.
template <int kNv, bool kMasked>
LLAMAY_NEON_INLINE void DeltaColumns(const GatedDeltaRuleArgs& a, float* S, int64_t j0, int lanes) {
  const int Dk = a.k_dim, Dv = a.v_dim;
  const int64_t T = a.n_tokens, qs = Stride(a.q_stride, Dk), ks = Stride(a.k_stride, Dk),
                vs = Stride(a.v_stride, Dv), os = Stride(a.out_stride, Dv), gs = Stride(a.g_stride, 1),
                bs = Stride(a.beta_stride, 1);
  const float32x4_t scale = vdupq_n_f32(1.0f / std::sqrt(static_cast<float>(Dk)));
  if (T == 0) return;
  // Token 0: decay, and kv[j] = sum_i S[i][j] * k[i].
  float32x4_t kv[kNv];
  {
    const float32x4_t eg = vdupq_n_f32(RefExp(a.g[0]));
    for (int u = 0; u < kNv; ++u) kv[u] = vdupq_n_f32(0.0f);
    for (int i = 0; i < Dk; ++i) {
      float* row = S + int64_t{i} * Dv + j0;
      const float32x4_t ki = vdupq_n_f32(a.k[i]);
      for (int u = 0; u < kNv; ++u) {
        const float32x4_t s = vmulq_f32(ColLoad<kNv, kMasked>(row + 4 * u, u, lanes), eg);
        ColStore<kNv, kMasked>(row + 4 * u, u, lanes, s);
        kv[u] = vaddq_f32(kv[u], vmulq_f32(s, ki));
      }
    }
  }
  for (int64_t t = 0; t < T; ++t) {
    const float* q = a.q + t * qs;
    const float* k = a.k + t * ks;
    const float32x4_t beta = vdupq_n_f32(a.beta[t * bs]);
    float32x4_t delta[kNv], out[kNv];
    for (int u = 0; u < kNv; ++u) {
      const float32x4_t v = ColLoad<kNv, kMasked>(a.v + t * vs + j0 + 4 * u, u, lanes);
      delta[u] = vmulq_f32(vsubq_f32(v, kv[u]), beta);
      out[u] = vdupq_n_f32(0.0f);
    }
    if (t + 1 < T) {
      // Update and output sum of token t, then decay and key sum of token t + 1.
      const float* kn = a.k + (t + 1) * ks;
      const float32x4_t eg = vdupq_n_f32(RefExp(a.g[(t + 1) * gs]));
      for (int u = 0; u < kNv; ++u) kv[u] = vdupq_n_f32(0.0f);
      for (int i = 0; i < Dk; ++i) {
        float* row = S + int64_t{i} * Dv + j0;
        const float32x4_t ki = vdupq_n_f32(k[i]), qi = vdupq_n_f32(q[i]), kni = vdupq_n_f32(kn[i]);
        for (int u = 0; u < kNv; ++u) {
          float32x4_t s = vaddq_f32(ColLoad<kNv, kMasked>(row + 4 * u, u, lanes), vmulq_f32(ki, delta[u]));
          out[u] = vaddq_f32(out[u], vmulq_f32(s, qi));
          s = vmulq_f32(s, eg);
          ColStore<kNv, kMasked>(row + 4 * u, u, lanes, s);
          kv[u] = vaddq_f32(kv[u], vmulq_f32(s, kni));
        }
      }
    } else {
      for (int i = 0; i < Dk; ++i) {
        float* row = S + int64_t{i} * Dv + j0;
        const float32x4_t ki = vdupq_n_f32(k[i]), qi = vdupq_n_f32(q[i]);
        for (int u = 0; u < kNv; ++u) {
          const float32x4_t s =
              vaddq_f32(ColLoad<kNv, kMasked>(row + 4 * u, u, lanes), vmulq_f32(ki, delta[u]));
          ColStore<kNv, kMasked>(row + 4 * u, u, lanes, s);
          out[u] = vaddq_f32(out[u], vmulq_f32(s, qi));
        }
      }
    }
    for (int u = 0; u < kNv; ++u)
      ColStore<kNv, kMasked>(a.out + t * os + j0 + 4 * u, u, lanes, vmulq_f32(out[u], scale));
  }
}

// One value head (a has n_v_heads == n_k_heads == 1 and the arrays offset to that head).
void DeltaHeadAll(const GatedDeltaRuleArgs& a) {
  constexpr int kBlock = 16;  // columns per block: four registers
  const int Dv = a.v_dim;
  int64_t j = 0;
  for (; j + kBlock <= Dv; j += kBlock) DeltaColumns<4, false>(a, a.state, j, 4);
  const int64_t rest = Dv - j;
  if (rest == 0) return;
  const int64_t nv = (rest + 3) / 4;
  const bool partial = rest % 4 != 0;
  const int lanes = static_cast<int>(rest - 4 * (nv - 1));
  switch (nv * 2 + (partial ? 1 : 0)) {
    case 2:
      return DeltaColumns<1, false>(a, a.state, j, 4);
    case 3:
      return DeltaColumns<1, true>(a, a.state, j, lanes);
    case 4:
      return DeltaColumns<2, false>(a, a.state, j, 4);
    case 5:
      return DeltaColumns<2, true>(a, a.state, j, lanes);
    case 6:
      return DeltaColumns<3, false>(a, a.state, j, 4);
    case 7:
      return DeltaColumns<3, true>(a, a.state, j, lanes);
    case 9:
      return DeltaColumns<4, true>(a, a.state, j, lanes);
    default:
      return;
  }
}

}  // namespace

void CausalConv1d(const CausalConv1dArgs& a) {
  const int64_t C = a.channels, xs = Stride(a.x_stride, C), ys = Stride(a.y_stride, C);
  // Chunks of tokens, one after the other, the state carrying the window between them (a split that
  // changes no bit): a chunk's rows stay in cache while the channel blocks walk down them.
  for (int64_t t0 = 0; t0 < a.n_tokens; t0 += kConvChunk) {
    CausalConv1dArgs s = a;
    s.n_tokens = std::min(kConvChunk, a.n_tokens - t0);
    s.x = a.x + t0 * xs;
    s.x_stride = xs;
    s.y = a.y + t0 * ys;
    s.y_stride = ys;
    switch (a.kernel) {
      case 4:
        ConvAll<4>(s);
        break;
      case 3:
        ConvAll<3>(s);
        break;
      case 2:
        ConvAll<2>(s);
        break;
      default:
        ConvAll<0>(s);
        break;
    }
    if (a.silu)
      for (int64_t t = 0; t < s.n_tokens; ++t) Silu(s.y + t * ys, C, s.y + t * ys);
  }
}

void SsmScan(const SsmScanArgs& a) {
  const int H = a.n_heads, P = a.head_dim, heads_per_group = a.n_heads / a.n_groups;
  const int64_t dts = Stride(a.dt_stride, H);
  float dt[kScanChunk], dA[kScanChunk];
  for (int h = 0; h < H; ++h) {
    const int64_t g = h / heads_per_group;
    for (int64_t t0 = 0; t0 < a.n_tokens; t0 += kScanChunk) {
      const int64_t tn = std::min(kScanChunk, a.n_tokens - t0);
      for (int64_t u = 0; u < tn; ++u) {
        float v = a.dt[(t0 + u) * dts + h];
        if (a.dt_bias != nullptr) v = v + a.dt_bias[h];
        dt[u] = RefSoftplus(v);
        dA[u] = RefExp(dt[u] * a.a[h]);
      }
      int p = 0;
      for (; p + 4 <= P; p += 4) ScanTokens<4>(a, h, g, p, t0, tn, dt, dA);
      for (; p < P; ++p) ScanTokens<1>(a, h, g, p, t0, tn, dt, dA);
    }
  }
}

void GatedDeltaRuleHead(const GatedDeltaRuleArgs& a) { DeltaHeadAll(a); }

}  // namespace llamay::kernels::neon
#endif  // __aarch64__
