// AVX2 tile kernels for the float weight types (F32, F16, BF16) against f32 activations (rounded to the
// weight's precision for F16/BF16). Lane i%8 of one f32 register per (row, token) pair accumulates
// w_i * a_i, as in vec_dot.h. Any n_in: the last n_in % 8 elements are copied into zeroed registers' worth
// of memory and go to lanes 0..n_in%8-1 as in the reference; the other lanes add 0 * 0 = +0, which leaves
// every lane sum's bits as they are (a sum that starts at +0 never becomes -0), as the reference leaves them.
#if defined(__x86_64__)
#include <cstring>

#include "kernels/avx2_util.h"
#include "kernels/matmul_kernels.h"

namespace llamay::kernels {
namespace {

struct F32Traits {
  static constexpr int kBytes = 4;
  LLAMAY_AVX2_INLINE static __m256 Load(const uint8_t* row, int64_t k) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + k);
  }
  // The product of two f32 values is rounded: multiply, then add (no fusing).
  LLAMAY_AVX2_INLINE static __m256 Madd(__m256 w, __m256 a, __m256 acc) {
    return _mm256_add_ps(acc, _mm256_mul_ps(w, a));
  }
};

struct F16Traits {
  static constexpr int kBytes = 2;
  LLAMAY_AVX2_INLINE static __m256 Load(const uint8_t* row, int64_t k) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * k)));
  }
  // Both factors have 11-bit significands and f16 range: the product is exact, so a fused multiply-add
  // rounds exactly as multiply-then-add does.
  LLAMAY_AVX2_INLINE static __m256 Madd(__m256 w, __m256 a, __m256 acc) { return _mm256_fmadd_ps(w, a, acc); }
};

struct Bf16Traits {
  static constexpr int kBytes = 2;
  LLAMAY_AVX2_INLINE static __m256 Load(const uint8_t* row, int64_t k) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * k)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  }
  // bf16 products are exact in significand but can leave the f32 range: multiply, then add.
  LLAMAY_AVX2_INLINE static __m256 Madd(__m256 w, __m256 a, __m256 acc) {
    return _mm256_add_ps(acc, _mm256_mul_ps(w, a));
  }
};

template <class Tr, int kR, int kT>
struct FloatKernel {
  static constexpr int kRows = kR, kTokens = kT, kRowsDecode = 4;

  template <int R, int T>
  LLAMAY_AVX2 static void Run(const uint8_t* w, size_t ws, const uint8_t* act, size_t as, int64_t n_in,
                              float* y, size_t ys) {
    __m256 acc[R][T];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    const int64_t whole = n_in - n_in % 8;
    for (int64_t k = 0; k < whole; k += 8) {
      if constexpr (T == 1) {
        // Decode streams the weights: prefetch the next register tile's share (its rows follow these).
        const char* next = reinterpret_cast<const char*>(w + R * ws) + k * R * Tr::kBytes;
        for (int off = 0; off < 8 * R * Tr::kBytes; off += 64) _mm_prefetch(next + off, _MM_HINT_T0);
      }
      __m256 wv[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) wv[r] = Tr::Load(w + r * ws, k);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const __m256 a = _mm256_loadu_ps(reinterpret_cast<const float*>(act + t * as) + k);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) acc[r][t] = Tr::Madd(wv[r], a, acc[r][t]);
      }
    }
    if (const int64_t tail = n_in - whole; tail != 0) {
      alignas(32) uint8_t wt[8 * Tr::kBytes] = {};
      alignas(32) float at[8] = {};
      __m256 wv[R];
      for (int r = 0; r < R; ++r) {
        std::memcpy(wt, w + r * ws + whole * Tr::kBytes, static_cast<size_t>(tail * Tr::kBytes));
        wv[r] = Tr::Load(wt, 0);
      }
      for (int t = 0; t < T; ++t) {
        std::memcpy(at, reinterpret_cast<const float*>(act + t * as) + whole, static_cast<size_t>(tail) * 4);
        const __m256 a = _mm256_load_ps(at);
        for (int r = 0; r < R; ++r) acc[r][t] = Tr::Madd(wv[r], a, acc[r][t]);
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) y[t * ys + r] = avx2::Reduce8(acc[r][t]);
  }
};

}  // namespace

LLAMAY_AVX2 void TileAvx2F32(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                             int64_t tokens, int64_t n_in, float* y, size_t ys) {
  avx2::RunTile<FloatKernel<F32Traits, 3, 4>>(w, ws, rows, act, as, tokens, n_in, y, ys);
}
LLAMAY_AVX2 void TileAvx2F16(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                             int64_t tokens, int64_t n_in, float* y, size_t ys) {
  avx2::RunTile<FloatKernel<F16Traits, 3, 4>>(w, ws, rows, act, as, tokens, n_in, y, ys);
}
LLAMAY_AVX2 void TileAvx2Bf16(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                              int64_t tokens, int64_t n_in, float* y, size_t ys) {
  avx2::RunTile<FloatKernel<Bf16Traits, 3, 4>>(w, ws, rows, act, as, tokens, n_in, y, ys);
}

}  // namespace llamay::kernels
#endif  // __x86_64__
