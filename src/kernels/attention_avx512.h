// Internal to kernels/: AVX-512 steps of the paged attention (attention_avx512.cc), the same bits as the
// scalar and AVX2 steps of attention.cc and attention_avx2.cc. Only for x86-64 code running at
// Isa::kAvx512.
#ifndef LLAMAY_KERNELS_ATTENTION_AVX512_H_
#define LLAMAY_KERNELS_ATTENTION_AVX512_H_

#include <cstdint>

#include "base/tensor_type.h"

namespace llamay::kernels::avx512 {

// As avx2::DecodeKvSlice. REQUIRES: n % 8 == 0; for Q8_0 also start % 32 == 0 and n % 32 == 0.
void DecodeKvSlice(TensorType type, const uint8_t* row, int64_t start, int64_t n, float* out);
// The scores of two heads that read the same K rows: q: [2][hd] (consecutive heads), out[0..n) the first
// head's and out[out_stride..out_stride + n) the second's, each as avx2::AttnScores computes it.
// REQUIRES: hd % 8 == 0.
void AttnScores2(const float* q, const float* const* k_rows, int64_t n, int64_t hd, float scale, float* out,
                 int64_t out_stride);
// As avx2::AttnAccumulate. REQUIRES: hd % 8 == 0.
void AttnAccumulate(const float* w, const float* const* v_rows, int64_t n, int64_t hd, float* out);

}  // namespace llamay::kernels::avx512

#endif  // LLAMAY_KERNELS_ATTENTION_AVX512_H_
