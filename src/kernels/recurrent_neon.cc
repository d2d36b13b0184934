// NEON kernels of the causal convolution (recurrent.h): the table neon::kCausalConvKernels, which the driver
// in recurrent.cc calls per chunk of tokens; the structure of recurrent_avx2.cc at four lanes. Each lane
// performs exactly the f32 operations of reference/recurrent_ref.cc for one channel (multiply, then add:
// never fused), so the results match the scalar reference bit for bit: 4 channels per register, all tokens
// of a chunk on a few channel blocks in turn, the window of the last K inputs held in registers; SiLU is
// ops_neon's over each row after. Partial registers (channels not a multiple of 4) go through a small
// buffer: the lanes past the end are zero, never stored, and lanes never mix.
#if defined(__aarch64__)
#include <arm_neon.h>

#include <cstdint>

#include "kernels/neon_util.h"
#include "kernels/ops_neon.h"
#include "kernels/recurrent_simd.h"

namespace llamay::kernels::neon {
namespace {

int64_t Stride(int64_t given, int64_t packed) { return given != 0 ? given : packed; }

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

}  // namespace

const CausalConvKernels kCausalConvKernels = {ConvAll<2>, ConvAll<3>, ConvAll<4>, ConvAll<0>, Silu};

}  // namespace llamay::kernels::neon
#endif  // __aarch64__
