// Row conversions between f32 and the stored tensor types: dequantisation (what the embedding lookup and
// the tests use) and simple quantisers (for tests, tools and demo models).
//
// Supported types: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL,
// IQ4_XS, MXFP4 (layouts in quant_blocks.h). A row of n elements REQUIRES n % block_size == 0 and occupies
// TypeRowBytes(t, n) bytes.
// Dequantisation is exact scalar code (reference/dequant_ref.cc): each element is computed by the same few
// f32 operations as ggml, so it matches llama.cpp bit for bit.
// The quantisers round to nearest with max-based scales (the lookup-table types: to the nearest grid value);
// they do not search for the lowest error as llama.cpp's quantize tool does, so files they write are valid
// but not of llama.cpp's quality.
// Thread-safety: pure functions.
#ifndef LLAMAY_KERNELS_DEQUANT_H_
#define LLAMAY_KERNELS_DEQUANT_H_

#include <cstddef>
#include <cstdint>

#include "base/tensor_type.h"

namespace llamay::kernels {

bool CanDequantize(TensorType t);
bool CanQuantize(TensorType t);  // same set

// Bytes of a row of n elements. REQUIRES: t known, n % block_size(t) == 0.
size_t TypeRowBytes(TensorType t, int64_t n);
int64_t TypeBlockSize(TensorType t);

// src: TypeRowBytes(t, n) bytes; dst: [n]. REQUIRES: CanDequantize(t).
void DequantizeRow(TensorType t, const void* src, float* dst, int64_t n);
// src: [n]; dst: TypeRowBytes(t, n) bytes. REQUIRES: CanQuantize(t).
void QuantizeRow(TensorType t, const float* src, void* dst, int64_t n);

}  // namespace llamay::kernels

#endif  // LLAMAY_KERNELS_DEQUANT_H_
