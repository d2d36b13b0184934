// AVX2 kernels of the causal convolution (recurrent.h): the table avx2::kCausalConvKernels, which the driver
// in recurrent.cc calls per chunk of tokens. Each lane performs exactly the f32 operations of
// reference/recurrent_ref.cc for one channel, so the results match the scalar reference bit for bit: 8
// channels per register, all tokens of a chunk on a few channel blocks in turn, the window of the last K
// inputs held in registers; SiLU is ops_avx2's over each row after. Partial registers (channels not a
// multiple of 8) use masked loads and stores: lanes never mix.
#if defined(__x86_64__)
#include <cstdint>

#include "kernels/avx2_util.h"
#include "kernels/ops_avx2.h"
#include "kernels/recurrent_simd.h"

namespace llamay::kernels::avx2 {
namespace {

int64_t Stride(int64_t given, int64_t packed) { return given != 0 ? given : packed; }

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

}  // namespace

const CausalConvKernels kCausalConvKernels = {ConvAll<2>, ConvAll<3>, ConvAll<4>, ConvAll<0>, Silu};

}  // namespace llamay::kernels::avx2
#endif  // __x86_64__
