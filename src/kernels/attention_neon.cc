// NEON steps of the paged attention (attention_neon.h): the scalar steps' operations, four lanes at a time.
//   - Decoding and accumulating work element by element, so vectors change nothing.
//   - A score keeps RefDotF32's eight lane sums as two registers (lanes 0-3 and 4-7), multiply then add,
//     reduced by neon::Reduce8. Four K rows are scored together for independent add chains.
#if defined(__aarch64__)
#include "kernels/attention_neon.h"

#include <arm_neon.h>

#include "kernels/neon_util.h"
#include "kernels/quant_blocks.h"

namespace llamay::kernels::neon {
namespace {

// out[d..d+4V) += sum over r in order of w[r] * v_rows[r][d..d+4V), the partial sums kept in registers.
template <int V>
LLAMAY_NEON_INLINE void AccumulateChunk(const float* w, const float* const* v_rows, int64_t n, int64_t d,
                                        float* out) {
  float32x4_t acc[V];
  for (int k = 0; k < V; ++k) acc[k] = vld1q_f32(out + d + 4 * k);
  for (int64_t r = 0; r < n; ++r) {
    const float32x4_t wr = vdupq_n_f32(w[r]);
    const float* row = v_rows[r] + d;
    for (int k = 0; k < V; ++k) acc[k] = vaddq_f32(acc[k], vmulq_f32(wr, vld1q_f32(row + 4 * k)));
  }
  for (int k = 0; k < V; ++k) vst1q_f32(out + d + 4 * k, acc[k]);
}

}  // namespace

void DecodeKvSlice(TensorType type, const uint8_t* row, int64_t start, int64_t n, float* out) {
  switch (type) {
    case TensorType::kF32: {
      const float* x = reinterpret_cast<const float*>(row) + start;
      for (int64_t i = 0; i < n; i += 4) vst1q_f32(out + i, vld1q_f32(x + i));
      return;
    }
    case TensorType::kF16: {
      const uint16_t* x = reinterpret_cast<const uint16_t*>(row) + start;
      for (int64_t i = 0; i < n; i += 4) vst1q_f32(out + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(x + i))));
      return;
    }
    case TensorType::kQ8_0: {
      const BlockQ8_0* blocks = reinterpret_cast<const BlockQ8_0*>(row) + start / kQ8_0BlockSize;
      for (int64_t b = 0; b < n / kQ8_0BlockSize; ++b) {
        // d (an f16 value) times an int8 is exact in f32.
        const float32x4_t d = vdupq_n_f32(F16(blocks[b].d));
        for (int k = 0; k < 2; ++k) {
          const int8x16_t q = vld1q_s8(blocks[b].qs + 16 * k);
          const int16x8_t lo = vmovl_s8(vget_low_s8(q)), hi = vmovl_high_s8(q);
          const int32x4_t parts[4] = {vmovl_s16(vget_low_s16(lo)), vmovl_high_s16(lo), vmovl_s16(vget_low_s16(hi)),
                                      vmovl_high_s16(hi)};
          for (int j = 0; j < 4; ++j)
            vst1q_f32(out + 32 * b + 16 * k + 4 * j, vmulq_f32(d, vcvtq_f32_s32(parts[j])));
        }
      }
      return;
    }
    default:
      return;
  }
}

void AttnScores(const float* q, const float* const* k_rows, int64_t n, int64_t hd, float scale, float* out) {
  constexpr int kTile = 4;
  for (int64_t r = 0; r < n; r += kTile) {
    // A short last group repeats its last row and drops the extra results.
    const int64_t m = n - r < kTile ? n - r : kTile;
    const float* rows[kTile];
    for (int64_t i = 0; i < kTile; ++i) rows[i] = k_rows[r + (i < m ? i : m - 1)];
    float32x4_t lo[kTile], hi[kTile];
    for (int i = 0; i < kTile; ++i) lo[i] = hi[i] = vdupq_n_f32(0.0f);
    for (int64_t d = 0; d < hd; d += 8) {
      const float32x4_t q_lo = vld1q_f32(q + d), q_hi = vld1q_f32(q + d + 4);
      for (int i = 0; i < kTile; ++i) {
        lo[i] = vaddq_f32(lo[i], vmulq_f32(q_lo, vld1q_f32(rows[i] + d)));
        hi[i] = vaddq_f32(hi[i], vmulq_f32(q_hi, vld1q_f32(rows[i] + d + 4)));
      }
    }
    for (int64_t i = 0; i < m; ++i) out[r + i] = Reduce8(lo[i], hi[i]) * scale;
  }
}

void AttnAccumulate(const float* w, const float* const* v_rows, int64_t n, int64_t hd, float* out) {
  int64_t d = 0;
  for (; d + 64 <= hd; d += 64) AccumulateChunk<16>(w, v_rows, n, d, out);
  for (; d + 16 <= hd; d += 16) AccumulateChunk<4>(w, v_rows, n, d, out);
  for (; d < hd; d += 8) AccumulateChunk<2>(w, v_rows, n, d, out);
}

}  // namespace llamay::kernels::neon
#endif  // __aarch64__
