// AVX2 recurrent kernels. Each lane performs exactly the f32 operations of reference/recurrent_ref.cc for
// one element, so the results match the scalar reference bit for bit:
//   - the convolution runs across 8 channels per register, all tokens of a chunk on a few channel blocks
//     in turn, the window of the last K inputs held in registers; SiLU is ops_avx2's over each row after;
//   - the SSM scan keeps the state row of one (head, p) in lanes n % 8 and sums y in that lane order, then
//     Reduce8: RefDotF32's order; all tokens of a chunk run on one row while it sits in L1;
//   - the delta rule runs across value columns j (8 per register, blocks of 32 columns), each column's
//     sums over i sequential as in the reference; all tokens run on one column block while its Dk x 32
//     slice of the state sits in L1, one pass over it per token (token t's update and output with token
//     t+1's decay and key sum).
// Partial registers (channels or columns not a multiple of 8) use masked loads and stores: lanes never mix.
#if defined(__x86_64__)
#include "kernels/recurrent_avx2.h"

#include <algorithm>
#include <cmath>

#include "kernels/avx2_util.h"
#include "kernels/ops_avx2.h"
#include "kernels/reference/reference.h"

namespace llamay::kernels::avx2 {
namespace {

int64_t Stride(int64_t given, int64_t packed) { return given != 0 ? given : packed; }

// All ones in the first n lanes (0 <= n <= 8).
LLAMAY_AVX2_INLINE __m256i FirstLanes(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Register u of a block of kNv: only the last one may be partial.
template <int kNv, bool kMasked>
LLAMAY_AVX2_INLINE __m256 ColLoad(const float* p, int u, __m256i mask) {
  return kMasked && u == kNv - 1 ? _mm256_maskload_ps(p, mask) : _mm256_loadu_ps(p);
}
template <int kNv, bool kMasked>
LLAMAY_AVX2_INLINE void ColStore(float* p, int u, __m256i mask, __m256 v) {
  if (kMasked && u == kNv - 1) {
    _mm256_maskstore_ps(p, mask, v);
  } else {
    _mm256_storeu_ps(p, v);
  }
}

// ---- Causal convolution ----

// Taps of channels [c, c + 8) (lanes beyond `lanes` zero) transposed: out[k] lane l = weight[c + l][k].
template <int kK>
LLAMAY_AVX2_INLINE void TransposeTaps(const float* weight, int64_t c, int lanes, int K, float (*out)[8]) {
  if (kK == 4 && lanes == 8) {
    // Eight rows of four taps are four registers of two rows each: an 8x4 transpose by unpacking.
    const float* w = weight + c * 4;
    const __m256 v0 = _mm256_loadu_ps(w), v1 = _mm256_loadu_ps(w + 8), v2 = _mm256_loadu_ps(w + 16),
                 v3 = _mm256_loadu_ps(w + 24);
    const __m256 a0 = _mm256_unpacklo_ps(v0, v1), a1 = _mm256_unpackhi_ps(v0, v1);
    const __m256 a2 = _mm256_unpacklo_ps(v2, v3), a3 = _mm256_unpackhi_ps(v2, v3);
    // Each result holds channels in the order 0 4 2 6 1 5 3 7; the permutation is its own inverse.
    const __m256i order = _mm256_setr_epi32(0, 4, 2, 6, 1, 5, 3, 7);
    _mm256_store_ps(out[0], _mm256_permutevar8x32_ps(_mm256_unpacklo_ps(a0, a2), order));
    _mm256_store_ps(out[1], _mm256_permutevar8x32_ps(_mm256_unpackhi_ps(a0, a2), order));
    _mm256_store_ps(out[2], _mm256_permutevar8x32_ps(_mm256_unpacklo_ps(a1, a3), order));
    _mm256_store_ps(out[3], _mm256_permutevar8x32_ps(_mm256_unpackhi_ps(a1, a3), order));
    return;
  }
  for (int k = 0; k < K; ++k)
    for (int l = 0; l < 8; ++l) out[k][l] = l < lanes ? weight[(c + l) * K + k] : 0.0f;
}

// Channels [c, c + 8 * kBlocks) for every token of a (the last register partial, its lanes in mask, when
// kMasked). kK: the kernel width when known at compile time (the window then stays in registers), 0 for
// a run-time width.
template <int kK, int kBlocks, bool kMasked>
LLAMAY_AVX2_INLINE void ConvBlocks(const CausalConv1dArgs& a, int64_t c, int last_lanes) {
  const int K = kK > 0 ? kK : a.kernel;
  constexpr int kMax = kK > 0 ? kK : kMaxConvKernel;
  const int64_t C = a.channels, xs = Stride(a.x_stride, C), ys = Stride(a.y_stride, C);
  const __m256i mask = FirstLanes(last_lanes);
  alignas(32) float taps[kBlocks][kMax][8];
  for (int b = 0; b < kBlocks; ++b)
    TransposeTaps<kK>(a.weight, c + 8 * b, b == kBlocks - 1 ? last_lanes : 8, K, taps[b]);
  __m256 win[kBlocks][kMax];
  for (int b = 0; b < kBlocks; ++b)
    for (int k = 0; k + 1 < K; ++k)
      win[b][k] = ColLoad<kBlocks, kMasked>(a.conv_state + k * C + c + 8 * b, b, mask);
  for (int64_t t = 0; t < a.n_tokens; ++t) {
    for (int b = 0; b < kBlocks; ++b) {
      win[b][K - 1] = ColLoad<kBlocks, kMasked>(a.x + t * xs + c + 8 * b, b, mask);
      __m256 sum = _mm256_setzero_ps();
      for (int k = 0; k < K; ++k)
        sum = _mm256_add_ps(sum, _mm256_mul_ps(_mm256_load_ps(taps[b][k]), win[b][k]));
      if (a.bias != nullptr) sum = _mm256_add_ps(sum, ColLoad<kBlocks, kMasked>(a.bias + c + 8 * b, b, mask));
      ColStore<kBlocks, kMasked>(a.y + t * ys + c + 8 * b, b, mask, sum);
      for (int k = 0; k + 1 < K; ++k) win[b][k] = win[b][k + 1];
    }
  }
  for (int b = 0; b < kBlocks; ++b)
    for (int k = 0; k + 1 < K; ++k)
      ColStore<kBlocks, kMasked>(a.conv_state + k * C + c + 8 * b, b, mask, win[b][k]);
}

template <int kK>
LLAMAY_AVX2 void ConvAll(const CausalConv1dArgs& a) {
  constexpr int kWide = kK > 0 && kK <= 4 ? 3 : 1;  // window registers: kWide * K
  int64_t c = 0;
  for (; c + 8 * kWide <= a.channels; c += 8 * kWide) ConvBlocks<kK, kWide, false>(a, c, 8);
  for (; c + 8 <= a.channels; c += 8) ConvBlocks<kK, 1, false>(a, c, 8);
  if (c < a.channels) ConvBlocks<kK, 1, true>(a, c, static_cast<int>(a.channels - c));
}

// Tokens per pass of the channel blocks.
constexpr int64_t kConvChunk = 32;

// ---- SSM scan ----

// Tokens whose dt and dA are computed together before the rows of a head run over them.
constexpr int64_t kScanChunk = 32;

// One token on kRows state rows s[r] [N] (consecutive p of one head): s = s * dA + B * x_dt[r], y[r] =
// RefDotF32(s, C, N). The rows' sums are independent chains: several rows at once keep the adder busy
// (one row alone waits on its single accumulator).
template <int kRows>
LLAMAY_AVX2_INLINE void ScanRows(float* const* s, const float* B, const float* Cv, int N, float dA,
                                 const float* x_dt, float* y) {
  const __m256 dA8 = _mm256_set1_ps(dA);
  __m256 xdt8[kRows], acc[kRows];
  for (int r = 0; r < kRows; ++r) {
    xdt8[r] = _mm256_set1_ps(x_dt[r]);
    acc[r] = _mm256_setzero_ps();
  }
  int n = 0;
  for (; n + 8 <= N; n += 8) {
    const __m256 b = _mm256_loadu_ps(B + n), c = _mm256_loadu_ps(Cv + n);
    for (int r = 0; r < kRows; ++r) {
      __m256 sv = _mm256_loadu_ps(s[r] + n);
      sv = _mm256_add_ps(_mm256_mul_ps(sv, dA8), _mm256_mul_ps(b, xdt8[r]));
      _mm256_storeu_ps(s[r] + n, sv);
      acc[r] = _mm256_add_ps(acc[r], _mm256_mul_ps(sv, c));
    }
  }
  for (int r = 0; r < kRows; ++r) {
    if (n == N) {
      y[r] = Reduce8(acc[r]);
      continue;
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, acc[r]);
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
LLAMAY_AVX2_INLINE void ScanTokens(const SsmScanArgs& a, int h, int64_t g, int p, int64_t t0, int64_t tn,
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

// Columns [j0, j0 + 8 * kNv) of one value head (the last register partial when kMasked: its lanes in
// mask) for every token. Each token's rank-one update (and output sum) shares its pass over the state with
// the next token's decay (and key sum): one load and one store per element and token; each element still
// sees the reference's operations in the reference's order.
template <int kNv, bool kMasked>
LLAMAY_AVX2_INLINE void DeltaColumns(const GatedDeltaRuleArgs& a, float* S, int64_t j0, __m256i mask) {
  const int Dk = a.k_dim, Dv = a.v_dim;
  const int64_t T = a.n_tokens, qs = Stride(a.q_stride, Dk), ks = Stride(a.k_stride, Dk),
                vs = Stride(a.v_stride, Dv), os = Stride(a.out_stride, Dv), gs = Stride(a.g_stride, 1),
                bs = Stride(a.beta_stride, 1);
  const __m256 scale = _mm256_set1_ps(1.0f / std::sqrt(static_cast<float>(Dk)));
  if (T == 0) return;
  // Token 0: decay, and kv[j] = sum_i S[i][j] * k[i].
  __m256 kv[kNv];
  {
    const __m256 eg = _mm256_set1_ps(RefExp(a.g[0]));
    for (int u = 0; u < kNv; ++u) kv[u] = _mm256_setzero_ps();
    for (int i = 0; i < Dk; ++i) {
      float* row = S + int64_t{i} * Dv + j0;
      const __m256 ki = _mm256_set1_ps(a.k[i]);
      for (int u = 0; u < kNv; ++u) {
        const __m256 s = _mm256_mul_ps(ColLoad<kNv, kMasked>(row + 8 * u, u, mask), eg);
        ColStore<kNv, kMasked>(row + 8 * u, u, mask, s);
        kv[u] = _mm256_add_ps(kv[u], _mm256_mul_ps(s, ki));
      }
    }
  }
  for (int64_t t = 0; t < T; ++t) {
    const float* q = a.q + t * qs;
    const float* k = a.k + t * ks;
    const __m256 beta = _mm256_set1_ps(a.beta[t * bs]);
    __m256 delta[kNv], out[kNv];
    for (int u = 0; u < kNv; ++u) {
      delta[u] = _mm256_mul_ps(
          _mm256_sub_ps(ColLoad<kNv, kMasked>(a.v + t * vs + j0 + 8 * u, u, mask), kv[u]), beta);
      out[u] = _mm256_setzero_ps();
    }
    if (t + 1 < T) {
      // Update and output sum of token t, then decay and key sum of token t + 1.
      const float* kn = a.k + (t + 1) * ks;
      const __m256 eg = _mm256_set1_ps(RefExp(a.g[(t + 1) * gs]));
      for (int u = 0; u < kNv; ++u) kv[u] = _mm256_setzero_ps();
      for (int i = 0; i < Dk; ++i) {
        float* row = S + int64_t{i} * Dv + j0;
        const __m256 ki = _mm256_set1_ps(k[i]), qi = _mm256_set1_ps(q[i]), kni = _mm256_set1_ps(kn[i]);
        for (int u = 0; u < kNv; ++u) {
          __m256 s = _mm256_add_ps(ColLoad<kNv, kMasked>(row + 8 * u, u, mask), _mm256_mul_ps(ki, delta[u]));
          out[u] = _mm256_add_ps(out[u], _mm256_mul_ps(s, qi));
          s = _mm256_mul_ps(s, eg);
          ColStore<kNv, kMasked>(row + 8 * u, u, mask, s);
          kv[u] = _mm256_add_ps(kv[u], _mm256_mul_ps(s, kni));
        }
      }
    } else {
      for (int i = 0; i < Dk; ++i) {
        float* row = S + int64_t{i} * Dv + j0;
        const __m256 ki = _mm256_set1_ps(k[i]), qi = _mm256_set1_ps(q[i]);
        for (int u = 0; u < kNv; ++u) {
          const __m256 s =
              _mm256_add_ps(ColLoad<kNv, kMasked>(row + 8 * u, u, mask), _mm256_mul_ps(ki, delta[u]));
          ColStore<kNv, kMasked>(row + 8 * u, u, mask, s);
          out[u] = _mm256_add_ps(out[u], _mm256_mul_ps(s, qi));
        }
      }
    }
    for (int u = 0; u < kNv; ++u)
      ColStore<kNv, kMasked>(a.out + t * os + j0 + 8 * u, u, mask, _mm256_mul_ps(out[u], scale));
  }
}

// One value head (a has n_v_heads == n_k_heads == 1 and the arrays offset to that head).
LLAMAY_AVX2 void DeltaHeadAll(const GatedDeltaRuleArgs& a) {
  constexpr int kBlock = 32;  // columns per block: four registers
  const int Dv = a.v_dim;
  const __m256i all = _mm256_set1_epi32(-1);
  int64_t j = 0;
  for (; j + kBlock <= Dv; j += kBlock) DeltaColumns<4, false>(a, a.state, j, all);
  const int64_t rest = Dv - j;
  if (rest == 0) return;
  const int64_t nv = (rest + 7) / 8;
  const bool partial = rest % 8 != 0;
  const __m256i mask = FirstLanes(rest - 8 * (nv - 1));
  switch (nv * 2 + (partial ? 1 : 0)) {
    case 2:
      return DeltaColumns<1, false>(a, a.state, j, all);
    case 3:
      return DeltaColumns<1, true>(a, a.state, j, mask);
    case 4:
      return DeltaColumns<2, false>(a, a.state, j, all);
    case 5:
      return DeltaColumns<2, true>(a, a.state, j, mask);
    case 6:
      return DeltaColumns<3, false>(a, a.state, j, all);
    case 7:
      return DeltaColumns<3, true>(a, a.state, j, mask);
    case 9:
      return DeltaColumns<4, true>(a, a.state, j, mask);
    default:
      return;
  }
}

}  // namespace

LLAMAY_AVX2 void CausalConv1d(const CausalConv1dArgs& a) {
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

LLAMAY_AVX2 void SsmScan(const SsmScanArgs& a) {
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

LLAMAY_AVX2 void GatedDeltaRuleHead(const GatedDeltaRuleArgs& a) { DeltaHeadAll(a); }

}  // namespace llamay::kernels::avx2
#endif  // __x86_64__
