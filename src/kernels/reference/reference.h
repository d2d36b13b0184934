// Internal: the scalar reference kernels (the source of truth) and helpers shared by the fast paths.
// Everything here is compiled with -ffp-contract=off so that each written f32 operation rounds once, as
// the AVX2 code's explicit mul/add intrinsics do.
#ifndef LLAMAY_KERNELS_REFERENCE_REFERENCE_H_
#define LLAMAY_KERNELS_REFERENCE_REFERENCE_H_

#include <cstddef>
#include <cstdint>

#include "base/tensor_type.h"
#include "kernels/quant_blocks.h"

namespace llamay::kernels {

// Activation quantisers (ggml's rules: Q8_1 rounds half away from zero; Q8_K maps the largest magnitude
// to -127 and rounds to nearest even). REQUIRES: n a multiple of the block size.
void QuantizeRowQ8_1(const float* x, BlockQ8_1* y, int64_t n);
void QuantizeRowQ8_K(const float* x, BlockQ8_K* y, int64_t n);

// The fixed reduction of eight lane sums: ((a0+a4) + (a2+a6)) + ((a1+a5) + (a3+a7)). It is what an AVX2
// register reduces to by halving (128+128, then 64+64, then 32+32).
inline float Reduce8(const float* a) {
  const float s0 = a[0] + a[4], s1 = a[1] + a[5], s2 = a[2] + a[6], s3 = a[3] + a[7];
  return (s0 + s2) + (s1 + s3);
}
inline double Reduce8(const double* a) {
  const double s0 = a[0] + a[4], s1 = a[1] + a[5], s2 = a[2] + a[6], s3 = a[3] + a[7];
  return (s0 + s2) + (s1 + s3);
}

// Dot of one weight row of type `wtype` with one prepared activation row (see vec_dot.h), in the canonical
// order. REQUIRES: MatMulSupports(wtype).
float RefDot(TensorType wtype, const void* w, const void* act, int64_t n);

// f32 dot in the canonical float order: lane i%8 accumulates x[i]*y[i] (mul, then add), then Reduce8.
float RefDotF32(const float* x, const float* y, int64_t n);

// exp(x) to about 2 ulp, as a fixed sequence of f32 operations that the AVX2 and NEON versions repeat exactly
// (libm's expf differs between libraries and from any vector version). Inputs below -104 give 0.
float RefExp(float x);
// Its constants, which the vector versions share: the range reduction and polynomial of the classic Cephes
// expf, exp(x) = 2^n * exp(r), |r| <= ln2/2, with ln2 split in two (kExpC1 has few bits, so n * kExpC1 is
// exact); x is first clamped to [kExpLo, kExpHi].
inline constexpr float kExpLo = -104.0f;
inline constexpr float kExpHi = 89.0f;  // exp(89) overflows to inf in the final products
inline constexpr float kExpLog2e = 1.44269504088896341f;
inline constexpr float kExpC1 = 0.693359375f;
inline constexpr float kExpC2 = -2.12194440e-4f;
inline constexpr float kExpP[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                   4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

// Element functions shared by the reference ops and the AVX2 tails.
float RefSilu(float x);  // x / (1 + exp(-x))
float RefGelu(float x);  // 0.5*x*(1 + tanh(sqrt(2/pi)*x*(1 + 0.044715*x*x))), tanh(u) = 1 - 2/(exp(2u) + 1)

// log(x) to about 2 ulp for positive normal x, as a fixed sequence of f32 operations (the Cephes logf;
// libm's logf differs between libraries). Used by the recurrent kernels' softplus.
float RefLog(float x);
// softplus as ggml computes it (ggml_compute_softplus_f32): x > 20 ? x : log(1 + exp(x)), with RefLog and
// RefExp.
float RefSoftplus(float x);

// Row ops of ops.h in their reference form.
void RefRmsNorm(const float* x, const float* w, int64_t n, float eps, float* y);
void RefSoftmax(const float* x, int64_t n, float* y);
// The tail of RMS norm once the eight lane sums of squares are known: scale and multiply.
void RmsNormFinish(const float* x, const float* w, int64_t n, float eps, const double* lane_sums, float* y);

}  // namespace llamay::kernels

#endif  // LLAMAY_KERNELS_REFERENCE_REFERENCE_H_
