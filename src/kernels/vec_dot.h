// Row dot products between a weight row and an activation row, computed the way llama.cpp's CPU backend
// computes them: the activation is first converted to the weight type's "vec_dot type" (ggml's term), then
// multiplied block by block.
//
//   weight type            activation format      per-block arithmetic
//   F32                    f32                    f32 products
//   F16 / BF16             f32 rounded to f16/bf16 products of two f16 (bf16) values, summed in f32
//   Q8_0, Q4_0, Q5_0       Q8_0 blocks            exact int32 sums, times d_w * d_a
//   Q4_1, Q5_1             Q8_1 blocks            exact int32 sums, times d_w * d_a; plus m_w * s_a
//   Q4_K, Q5_K, Q6_K       Q8_K super-blocks      exact int32 sums with the integer sub-block scales
//   Q3_K, Q2_K             Q8_K super-blocks      the same (16 sub-blocks of 16); Q2_K's min term from
//                                                 the activation's bsums
//   IQ4_NL, MXFP4          Q8_0 blocks            exact int32 sums of the weights' grid values (the 16-entry
//                                                 tables of quant_blocks.h), times d_w * d_a
//   IQ4_XS                 Q8_K super-blocks      exact int32 sums of IQ4_NL grid values with the signed
//                                                 integer sub-block scales ls - 32
//
// Canonical order (the invariant every implementation keeps, so that the AVX2 and scalar paths agree bit
// for bit, and a result never depends on how rows and tokens were tiled or on the thread count):
//   - float types: eight lane sums, lane i%8 += w_i * a_i (multiply rounded, then add), then Reduce8
//     ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)). For F16 and BF16 each product of two rounded values is
//     exact in f32, so a fused multiply-add gives the same bits.
//   - 32-blocks: per block one exact int32 sum of its 32 products, then acc = acc + float(isum) * (d_w * d_a)
//     (multiply rounded, then add), one accumulator from 0.0f, blocks in order; the _1 types add a separate
//     in-order sum of m_w * s_a at the end. How a kernel forms the integer sum is free (it is exact), so
//     SIMD kernels put (row, token) pairs in lanes and pay the float work once per block for a whole vector
//     of them (DESIGN.md section 3's "integer sums per block, one f32 scale per block").
//   - K-quants: per super-block, acc += float(sumi) * (d_w * d_a) [- float(smin) * (dmin_w * d_a)], in order.
//     The types with a min (Q4_K, Q5_K, Q2_K) add the bracket acc + (float(sumi) * dd - float(smin) * dm),
//     with smin = sum of mn_s * (the activation's sum over sub-block s, from bsums), as ggml's generic code
//     does for Q2_K; Q3_K and Q6_K have no min (sumi = sum of (sc_s [- 32]) * sub-block sum). ggml's generic
//     Q3_K code keeps eight lane sums instead, its SIMD code one sum per super-block as here.
//   - The lookup-table 32-blocks are 32-blocks: IQ4_NL's d_w is its f16 d (so d_w * d_a is exact, as for
//     Q4_0); MXFP4's is E8M0Half(e) = 2^(e-128) (ggml's GGML_E8M0_TO_FP32_HALF: its grid holds the E2M1
//     values doubled), and d_w * d_a = 2^(e-128) * f16 is exact unless it falls below f32's normal range
//     (a tiny e), where it rounds once, the same way on every path. Both are ggml's generic order too
//     (sumf += (d_a * d_w) * float(sumi1 + sumi2)).
//   - IQ4_XS is a K-quant without a min, as Q6_K: sumi = sum over its 8 sub-blocks of (ls_s - 32) x (sub-block
//     sum), then acc + float(sumi) * (d_w * d_a). ggml's generic code instead adds (d_w * d_a * (ls_s - 32))
//     x float(sub-block sum) per sub-block (its SIMD code one integer sum per super-block, as here).
// No step uses a fused multiply-add where rounding could differ (the library builds with -ffp-contract=off).
//
// Shapes: a weight row and an activation row both have n_in elements; REQUIRES n_in % 32 == 0 for the
// 32-block types and % 256 == 0 for the K-quants.
// Thread-safety: pure functions.
#ifndef LLAMAY_KERNELS_VEC_DOT_H_
#define LLAMAY_KERNELS_VEC_DOT_H_

#include <cstddef>
#include <cstdint>

#include "base/tensor_type.h"
#include "kernels/cpu.h"

namespace llamay::kernels {

enum class ActFormat { kF32, kF16Rounded, kBf16Rounded, kQ8_0, kQ8_1, kQ8_K };

// True for the weight types the dot products and the matmul support.
bool MatMulSupports(TensorType weight_type);
// REQUIRES: MatMulSupports(weight_type).
ActFormat ActivationFormat(TensorType weight_type);
// Bytes of one prepared activation row of n_in elements.
size_t ActivationRowBytes(ActFormat format, int64_t n_in);
// x: [n_in] f32; act: ActivationRowBytes(format, n_in) bytes.
void QuantizeActivationRow(ActFormat format, const float* x, int64_t n_in, void* act);

// Dot of one weight row (TypeRowBytes(weight_type, n_in) bytes) with one activation row prepared in
// ActivationFormat(weight_type).
float VecDot(TensorType weight_type, const void* w_row, const void* act_row, int64_t n_in,
             Isa isa = DetectIsa());

}  // namespace llamay::kernels

#endif  // LLAMAY_KERNELS_VEC_DOT_H_
