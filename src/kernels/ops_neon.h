// Internal to kernels/: NEON versions of the ops of ops.h (ops_neon.cc), the same bits as the scalar
// references (reference/ops_ref.cc). Only for aarch64 code running at Isa::kNeon.
#ifndef LLAMAY_KERNELS_OPS_NEON_H_
#define LLAMAY_KERNELS_OPS_NEON_H_

#include <cstdint>

namespace llamay::kernels::neon {

void RmsNorm(const float* x, const float* w, int64_t n, float eps, float* y);
void Silu(const float* x, int64_t n, float* y);
void Gelu(const float* x, int64_t n, float* y);
void SwiGlu(const float* gate, const float* up, int64_t n, float* y);
// REQUIRES: n >= 1 (also the attention's softmax step).
void Softmax(const float* x, int64_t n, float* y);

}  // namespace llamay::kernels::neon

#endif  // LLAMAY_KERNELS_OPS_NEON_H_
