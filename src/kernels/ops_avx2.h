// Internal to kernels/: AVX2 versions of the ops of ops.h (same bits as reference/ops_ref.cc).
#ifndef LLAMAY_KERNELS_OPS_AVX2_H_
#define LLAMAY_KERNELS_OPS_AVX2_H_

#include <cstdint>

#include "base/tensor_type.h"
#include "kernels/quant_blocks.h"

namespace llamay::kernels::avx2 {

void RmsNorm(const float* x, const float* w, int64_t n, float eps, float* y);
void Silu(const float* x, int64_t n, float* y);
void Gelu(const float* x, int64_t n, float* y);
void SwiGlu(const float* gate, const float* up, int64_t n, float* y);
void Softmax(const float* x, int64_t n, float* y);
// reference.h's QuantizeRowQ8_K, bit for bit (the K-quants' activations). REQUIRES: n % 256 == 0.
void QuantizeRowQ8_K(const float* x, BlockQ8_K* y, int64_t n);

// Attention helpers. out [n] = elements [start, start + n) of a KV row of `type`, decoded exactly.
// REQUIRES: n % 8 == 0; for Q8_0 also start % 32 == 0 and n % 32 == 0.
void DecodeKvSlice(TensorType type, const uint8_t* row, int64_t start, int64_t n, float* out);
// One-row forms (the benchmark's copy of the kernel before query blocking measures against them).
float DotF32(const float* x, const float* y, int64_t n);  // RefDotF32's order. REQUIRES: n % 8 == 0
void Axpy(float a, const float* x, int64_t n, float* y);  // y += a * x (multiply, then add)
// out[r] = DotF32(q, k_rows[r], hd) * scale for r in [0, n): eight rows share each load of q.
// REQUIRES: hd % 8 == 0.
void AttnScores(const float* q, const float* const* k_rows, int64_t n, int64_t hd, float scale, float* out);
// For r = 0, 1, .., n - 1 in turn: out[d] = out[d] + w[r] * v_rows[r][d], out held in registers across r.
// REQUIRES: hd % 8 == 0.
void AttnAccumulate(const float* w, const float* const* v_rows, int64_t n, int64_t hd, float* out);

}  // namespace llamay::kernels::avx2

#endif  // LLAMAY_KERNELS_OPS_AVX2_H_
