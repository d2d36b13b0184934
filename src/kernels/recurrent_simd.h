// Internal to kernels/: the ISA-specific pieces of the causal convolution of recurrent.h, one table per SIMD
// path (recurrent_avx2.cc, recurrent_neon.cc), each giving the bits of reference/recurrent_ref.cc.
// recurrent.cc holds the driver they share: argument checks, the split of a call's tokens into chunks, the
// choice of the kernel width's function and the SiLU of each row. Why a table of functions rather than a
// driver template instantiated in each ISA file: delta_rule_simd.h.
//
// Thread-safety: the tables are constants; their functions work on caller-owned memory only.
#ifndef LLAMAY_KERNELS_RECURRENT_SIMD_H_
#define LLAMAY_KERNELS_RECURRENT_SIMD_H_

#include <cstdint>

#include "kernels/recurrent.h"

namespace llamay::kernels {

struct CausalConvKernels {
  // The convolution, bias included and SiLU not, of every token of a (its strides explicit), channel block
  // by channel block: for kernel widths 2, 3 and 4 (the window held in registers) and for any width.
  void (*conv2)(const CausalConv1dArgs& a);
  void (*conv3)(const CausalConv1dArgs& a);
  void (*conv4)(const CausalConv1dArgs& a);
  void (*conv_any)(const CausalConv1dArgs& a);
  // y[i] = silu(x[i]) for i < n, as ops.h's Silu (y may be x).
  void (*silu)(const float* x, int64_t n, float* y);
};

#if defined(__x86_64__)
namespace avx2 {
extern const CausalConvKernels kCausalConvKernels;
}  // namespace avx2
#endif
#if defined(__aarch64__)
namespace neon {
extern const CausalConvKernels kCausalConvKernels;
}  // namespace neon
#endif

}  // namespace llamay::kernels

#endif  // LLAMAY_KERNELS_RECURRENT_SIMD_H_
