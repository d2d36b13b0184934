// Internal to kernels/: NEON steps of the paged attention (attention_neon.cc), the same bits as the scalar
// steps of attention.cc. Only for aarch64 code running at Isa::kNeon. The softmax step is neon::Softmax of
// ops_neon.h.
#ifndef LLAMAY_KERNELS_ATTENTION_NEON_H_
#define LLAMAY_KERNELS_ATTENTION_NEON_H_

#include <cstdint>

#include "base/tensor_type.h"

namespace llamay::kernels::neon {

// out[0..n) = elements [start, start + n) of a KV row (f32, f16 or Q8_0), decoded exactly.
// REQUIRES: n % 8 == 0; for Q8_0 also start % 32 == 0 and n % 32 == 0.
void DecodeKvSlice(TensorType type, const uint8_t* row, int64_t start, int64_t n, float* out);
// out[r] = RefDotF32(q, k_rows[r], hd) * scale for r < n (eight lane sums, then Reduce8). REQUIRES: hd % 8 == 0.
void AttnScores(const float* q, const float* const* k_rows, int64_t n, int64_t hd, float scale, float* out);
// For r in order: out[d] = out[d] + w[r] * v_rows[r][d] (multiply, then add). REQUIRES: hd % 8 == 0.
void AttnAccumulate(const float* w, const float* const* v_rows, int64_t n, int64_t hd, float* out);

}  // namespace llamay::kernels::neon

#endif  // LLAMAY_KERNELS_ATTENTION_NEON_H_
