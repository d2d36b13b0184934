// NEON tile kernels for the float weight types (F32, F16, BF16) against f32 activations (rounded to the
// weight's precision for F16/BF16). Layout: the eight lane sums of vec_dot.h's float order (lane i%8 +=
// w_i * a_i) are two registers per (row, token) pair, lanes 0..3 and 4..7, and neon::Reduce8 sums the lanes
// as the reference does. Tiling (neon_util.h): four rows x up to two tokens (16 accumulator registers, 8 of
// weights, 4 of activations). REQUIRES: n_in % 8 == 0 (GetTileFn falls back to scalar otherwise).
#if defined(__aarch64__)
#include <cstddef>

#include "kernels/matmul_kernels.h"
#include "kernels/neon_util.h"

namespace llamay::kernels {
namespace {

// Elements k..k+7 of a weight row as f32 (lanes 0..3, 4..7), and how a product is added.
struct F32Traits {
  LLAMAY_NEON_INLINE static float32x4x2_t Load(const uint8_t* row, int64_t k) {
    const float* p = reinterpret_cast<const float*>(row) + k;
    return {{vld1q_f32(p), vld1q_f32(p + 4)}};
  }
  // The product of two f32 values is rounded: multiply, then add (never the fused vfmaq/vmlaq forms).
  LLAMAY_NEON_INLINE static float32x4_t Madd(float32x4_t w, float32x4_t a, float32x4_t acc) {
    return vaddq_f32(acc, vmulq_f32(w, a));
  }
};

struct F16Traits {
  LLAMAY_NEON_INLINE static float32x4x2_t Load(const uint8_t* row, int64_t k) {
    const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(reinterpret_cast<const uint16_t*>(row) + k));
    return {{vcvt_f32_f16(vget_low_f16(h)), vcvt_high_f32_f16(h)}};
  }
  // Both factors have 11-bit significands and f16 range: the product is exact, so a fused multiply-add
  // rounds exactly as multiply-then-add does.
  LLAMAY_NEON_INLINE static float32x4_t Madd(float32x4_t w, float32x4_t a, float32x4_t acc) {
    return vfmaq_f32(acc, w, a);
  }
};

struct Bf16Traits {
  LLAMAY_NEON_INLINE static float32x4x2_t Load(const uint8_t* row, int64_t k) {
    const uint16x8_t h = vld1q_u16(reinterpret_cast<const uint16_t*>(row) + k);
    return {{vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16)), vreinterpretq_f32_u32(vshll_high_n_u16(h, 16))}};
  }
  // bf16 products are exact in significand but can leave the f32 range: multiply, then add.
  LLAMAY_NEON_INLINE static float32x4_t Madd(float32x4_t w, float32x4_t a, float32x4_t acc) {
    return vaddq_f32(acc, vmulq_f32(w, a));
  }
};

template <class Tr>
struct FloatKernel {
  static constexpr int kTokens = 2;

  // Four rows x T tokens.
  template <int T>
  static void Run(const uint8_t* const* w, const uint8_t* act, size_t as, int64_t n_in, float* const* y,
                  size_t ys) {
    constexpr int R = neon::kRows;
    const float* at[T];
    for (int t = 0; t < T; ++t) at[t] = reinterpret_cast<const float*>(act + t * as);
    float32x4_t lo[R][T], hi[R][T];  // lanes 0..3 and 4..7 of each pair's eight lane sums
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) lo[r][t] = hi[r][t] = vdupq_n_f32(0.0f);
    for (int64_t k = 0; k < n_in; k += 8) {
      float32x4x2_t wv[R];
      for (int r = 0; r < R; ++r) wv[r] = Tr::Load(w[r], k);
      for (int t = 0; t < T; ++t) {
        const float32x4_t a_lo = vld1q_f32(at[t] + k), a_hi = vld1q_f32(at[t] + k + 4);
        for (int r = 0; r < R; ++r) {
          lo[r][t] = Tr::Madd(wv[r].val[0], a_lo, lo[r][t]);
          hi[r][t] = Tr::Madd(wv[r].val[1], a_hi, hi[r][t]);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      if (y[r] != nullptr)
        for (int t = 0; t < T; ++t) y[r][t * ys] = neon::Reduce8(lo[r][t], hi[r][t]);
  }
};

}  // namespace

void TileNeonF32(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as, int64_t tokens,
                 int64_t n_in, float* y, size_t ys) {
  neon::RunTile<FloatKernel<F32Traits>>(w, ws, rows, act, as, tokens, n_in, y, ys);
}
void TileNeonF16(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as, int64_t tokens,
                 int64_t n_in, float* y, size_t ys) {
  neon::RunTile<FloatKernel<F16Traits>>(w, ws, rows, act, as, tokens, n_in, y, ys);
}
void TileNeonBf16(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as, int64_t tokens,
                  int64_t n_in, float* y, size_t ys) {
  neon::RunTile<FloatKernel<Bf16Traits>>(w, ws, rows, act, as, tokens, n_in, y, ys);
}

}  // namespace llamay::kernels
#endif  // __aarch64__
