// Internal to kernels/: NEON helpers and the tiling driver shared by the NEON tile kernels
// (matmul_neon_*.cc). Included only by aarch64 sources; uses the baseline Advanced SIMD set only (no
// dot-product extension).
//
// Tiling: RunTile walks the weight rows in groups of four (row r of a group in float lane r: the 32-block and
// K-quant kernels fold each row's exact int32 partial sums into lane r, so the f32 step of vec_dot.h runs for
// four rows at once) and the tokens in register tiles of up to Kernel::kTokens. A short last row group
// repeats its last row; those results are dropped.
#ifndef LLAMAY_KERNELS_NEON_UTIL_H_
#define LLAMAY_KERNELS_NEON_UTIL_H_

#if defined(__aarch64__)
#include <arm_neon.h>

#include <cstddef>
#include <cstdint>

#include "kernels/reference/reference.h"

#define LLAMAY_NEON_INLINE __attribute__((always_inline)) inline

namespace llamay::kernels::neon {

// Rows per row group (float lanes of a register).
inline constexpr int kRows = 4;

LLAMAY_NEON_INLINE float F16(uint16_t h) {
  return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

// The f16 field at byte `offset` of block b (blocks of kBlockBytes) of the four rows, converted: row r in
// lane r. (The conversion is exact, as F16ToF32 is.)
template <size_t kBlockBytes>
LLAMAY_NEON_INLINE float32x4_t Gather4F16(const uint8_t* const* w, int64_t b, size_t offset) {
  uint16_t h[kRows];
  for (int r = 0; r < kRows; ++r)
    __builtin_memcpy(&h[r], w[r] + b * static_cast<int64_t>(kBlockBytes) + offset, 2);
  return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
}

// Lane r of the result is the sum of the four lanes of m[r] (exact, so the pairing is free).
LLAMAY_NEON_INLINE int32x4_t HsumRows4(const int32x4_t* m) {
  return vpaddq_s32(vpaddq_s32(m[0], m[1]), vpaddq_s32(m[2], m[3]));
}

// Reduce8 of reference.h on the lanes 0..3 (lo) and 4..7 (hi) of one sum: s_k = l_k + l_k+4, then
// (s0 + s2) + (s1 + s3).
LLAMAY_NEON_INLINE float Reduce8(float32x4_t lo, float32x4_t hi) {
  const float32x4_t s = vaddq_f32(lo, hi);
  const float32x2_t p = vadd_f32(vget_low_f32(s), vget_high_f32(s));  // (s0 + s2, s1 + s3)
  return vget_lane_f32(p, 0) + vget_lane_f32(p, 1);
}

// RefExp of reference/ops_ref.cc on four lanes: the same f32 operations in the same order (multiply, then
// add: never fused), so each lane has RefExp's bits. The clamps are compare-and-select, as RefExp's
// conditional expressions (vmaxq/vminq would let a NaN through; RefExp maps it to -104, hence 0).
LLAMAY_NEON_INLINE float32x4_t Exp(float32x4_t x) {
  const float32x4_t lo = vdupq_n_f32(kExpLo), hi = vdupq_n_f32(kExpHi);
  x = vbslq_f32(vcgtq_f32(x, lo), x, lo);  // x > lo ? x : lo
  x = vbslq_f32(vcltq_f32(x, hi), x, hi);  // x < hi ? x : hi
  // nearbyint in the default rounding mode: to nearest, ties to even.
  const float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(kExpLog2e)));
  float32x4_t r = vsubq_f32(x, vmulq_f32(n, vdupq_n_f32(kExpC1)));
  r = vsubq_f32(r, vmulq_f32(n, vdupq_n_f32(kExpC2)));
  const float32x4_t z = vmulq_f32(r, r);
  float32x4_t p = vdupq_n_f32(kExpP[0]);
  for (int i = 1; i < 6; ++i) p = vaddq_f32(vmulq_f32(p, r), vdupq_n_f32(kExpP[i]));
  p = vaddq_f32(vmulq_f32(p, z), r);
  p = vaddq_f32(p, vdupq_n_f32(1.0f));
  // 2^n as two normal factors 2^n1 * 2^n2, n1 = n >> 1 (arithmetic), n2 = n - n1; n is integral, so the
  // conversion is exact.
  const int32x4_t ni = vcvtq_s32_f32(n);
  const int32x4_t n1 = vshrq_n_s32(ni, 1), n2 = vsubq_s32(ni, n1);
  const int32x4_t bias = vdupq_n_s32(127);
  const float32x4_t s1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n1, bias), 23));
  const float32x4_t s2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n2, bias), 23));
  const float32x4_t result = vmulq_f32(vmulq_f32(p, s1), s2);
  return vbslq_f32(vcleq_f32(x, lo), vdupq_n_f32(0.0f), result);  // x <= lo ? 0 : result
}

// Product i (0..3) of the int8 pairs of two registers of 16 (i even: bytes 0..7 of w[i/2], a[i/2]; odd: bytes
// 8..15), as int16: exact, |w * a| <= 128 * 128.
template <int i>
LLAMAY_NEON_INLINE int16x8_t MulHalf(const int8x16_t* w, const int8x16_t* a) {
  if constexpr (i % 2 == 0) return vmull_s8(vget_low_s8(w[i / 2]), vget_low_s8(a[i / 2]));
  return vmull_high_s8(w[i / 2], a[i / 2]);
}
template <int i>
LLAMAY_NEON_INLINE int16x8_t MulAddHalf(int16x8_t acc, const int8x16_t* w, const int8x16_t* a) {
  if constexpr (i % 2 == 0) return vmlal_s8(acc, vget_low_s8(w[i / 2]), vget_low_s8(a[i / 2]));
  return vmlal_high_s8(acc, w[i / 2], a[i / 2]);
}

// Exact int32 partial sums (four lanes; their total is the dot) of the 16 * kVecs int8 pairs w[v], a[v].
// kRun consecutive int16 products are added in int16 before they are widened with vpadalq_s16: the caller
// guarantees kRun * max|w * a| < 2^15 (kRun = 1 holds for any int8 values).
template <int kVecs, int kRun, int i = 0>
LLAMAY_NEON_INLINE int32x4_t DotI8(const int8x16_t* w, const int8x16_t* a, int32x4_t sum = vdupq_n_s32(0)) {
  static_assert((2 * kVecs) % kRun == 0);
  if constexpr (i == 2 * kVecs) {
    return sum;
  } else {
    int16x8_t p = MulHalf<i>(w, a);
    if constexpr (kRun > 1) p = MulAddHalf<i + 1>(p, w, a);
    if constexpr (kRun > 2) p = MulAddHalf<i + 2>(p, w, a);
    if constexpr (kRun > 3) p = MulAddHalf<i + 3>(p, w, a);
    static_assert(kRun <= 4);
    return DotI8<kVecs, kRun, i + kRun>(w, a, vpadalq_s16(sum, p));
  }
}

// Byte j = 0x10 where bit j of qh[0] (j < 8) or bit j - 8 of qh[1] (j >= 8) is set, else 0.
LLAMAY_NEON_INLINE uint8x16_t FifthBits16(const uint8_t* qh) {
  static constexpr uint8_t kBit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  const uint8x16_t bytes = vcombine_u8(vdup_n_u8(qh[0]), vdup_n_u8(qh[1]));
  return vandq_u8(vtstq_u8(bytes, vld1q_u8(kBit)), vdupq_n_u8(0x10));
}

// Writes lane r of v to y[r][offset] for the rows that exist (y[r] null: a padding row, dropped).
LLAMAY_NEON_INLINE void StoreRows4(float32x4_t v, float* const* y, size_t offset) {
  float out[kRows];
  vst1q_f32(out, v);
  for (int r = 0; r < kRows; ++r)
    if (y[r] != nullptr) y[r][offset] = out[r];
}

// The four rows of a row group starting at row r of a rows x [ws bytes] matrix: w[i] is row r + i, or the
// last row again where r + i is past it (y[i], the output of row i, is then null: the result is dropped).
struct Rows4 {
  const uint8_t* w[kRows];
  float* y[kRows];
};
inline Rows4 RowGroup4(const uint8_t* w, size_t ws, int64_t rows, int64_t r, float* y) {
  Rows4 g;
  for (int64_t i = 0; i < kRows; ++i) {
    const bool pad = r + i >= rows;
    g.w[i] = w + (pad ? rows - 1 : r + i) * ws;
    g.y[i] = pad ? nullptr : y + r + i;
  }
  return g;
}

// Kernel::Run<n>(w, act, act_stride, n_in, y, y_stride) for 1 <= n <= T: n tokens against the four rows w[r]
// (outputs y[r][t * y_stride], skipped where y[r] is null).
template <class Kernel, int T>
LLAMAY_NEON_INLINE void RunUpTo(int n, const uint8_t* const* w, const uint8_t* act, size_t as, int64_t n_in,
                                float* const* y, size_t ys) {
  if constexpr (T > 1) {
    if (n < T) return RunUpTo<Kernel, T - 1>(n, w, act, as, n_in, y, ys);
  }
  Kernel::template Run<T>(w, act, as, n_in, y, ys);
}

// A rows x tokens tile (the TileFn contract of matmul_kernels.h) in row groups of four and token tiles of at
// most Kernel::kTokens, as even as possible (6 tokens at 4 per tile: 3 + 3 rather than 4 + 2).
template <class Kernel>
void RunTile(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as, int64_t tokens,
             int64_t n_in, float* y, size_t ys) {
  for (int64_t r = 0; r < rows; r += kRows) {
    const Rows4 g = RowGroup4(w, ws, rows, r, y);
    for (int64_t t = 0; t < tokens;) {
      const int64_t rest = tokens - t, tiles = (rest + Kernel::kTokens - 1) / Kernel::kTokens;
      const int n = static_cast<int>((rest + tiles - 1) / tiles);
      float* yt[kRows];
      for (int i = 0; i < kRows; ++i) yt[i] = g.y[i] != nullptr ? g.y[i] + t * ys : nullptr;
      RunUpTo<Kernel, Kernel::kTokens>(n, g.w, act + t * as, as, n_in, yt, ys);
      t += n;
    }
  }
}

// ---- Partial registers: the first `lanes` of 4 lanes ----

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

// Register u of a block of kN registers of columns: only the last one may be partial (its lanes in `lanes`).
template <int kN, bool kMasked>
LLAMAY_NEON_INLINE float32x4_t ColLoad(const float* p, int u, int lanes) {
  return kMasked && u == kN - 1 ? LoadPartial(p, lanes) : vld1q_f32(p);
}
template <int kN, bool kMasked>
LLAMAY_NEON_INLINE void ColStore(float* p, int u, int lanes, float32x4_t v) {
  if (kMasked && u == kN - 1) {
    StorePartial(p, lanes, v);
  } else {
    vst1q_f32(p, v);
  }
}

}  // namespace llamay::kernels::neon

#endif  // __aarch64__
#endif  // LLAMAY_KERNELS_NEON_UTIL_H_
