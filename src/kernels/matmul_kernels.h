// Internal to kernels/: the tile kernels behind MatMul and VecDot.
//
// A tile kernel computes y[t * y_stride + r] = dot(weight row r, activation row t) for r < rows and
// t < tokens, each element in the canonical order of vec_dot.h. How a kernel groups rows and tokens into
// register tiles is its own business: the per-element order never changes, which is what makes MatMul
// independent of tiling, batch composition and thread count.
#ifndef LLAMAY_KERNELS_MATMUL_KERNELS_H_
#define LLAMAY_KERNELS_MATMUL_KERNELS_H_

#include <cstddef>
#include <cstdint>

#include "base/tensor_type.h"
#include "kernels/cpu.h"

namespace llamay::kernels {

// w: rows x [w_stride bytes]; act: tokens x [act_stride bytes]; y: tokens x [y_stride floats].
using TileFn = void (*)(const uint8_t* w, size_t w_stride, int64_t rows, const uint8_t* act,
                        size_t act_stride, int64_t tokens, int64_t n_in, float* y, size_t y_stride);

// The kernel for a weight type on an instruction set; falls back to the AVX2 kernel where a type has no
// AVX-512 kernel, and to the scalar kernel where it has no AVX2 (or NEON) kernel or n_in does not fit it.
// REQUIRES: MatMulSupports(type).
TileFn GetTileFn(TensorType type, Isa isa, int64_t n_in);

#if defined(__x86_64__)
void TileAvx2F32(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*, size_t);
void TileAvx2F16(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*, size_t);
void TileAvx2Bf16(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*, size_t);
void TileAvx2Q8_0(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*, size_t);
void TileAvx2Q4_0(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*, size_t);
void TileAvx2Q5_0(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*, size_t);
void TileAvx2Q4_1(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*, size_t);
void TileAvx2Q5_1(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*, size_t);
void TileAvx2Q4_K(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*, size_t);
void TileAvx2Q5_K(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*, size_t);
void TileAvx2Q6_K(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*, size_t);
void TileAvx2Q3_K(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*, size_t);
void TileAvx2Q2_K(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*, size_t);
void TileAvx512Q8_0(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*,
                    size_t);
void TileAvx512Q4_0(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*,
                    size_t);
void TileAvx512Q5_0(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*,
                    size_t);
void TileAvx512Q4_K(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*,
                    size_t);
void TileAvx512Q5_K(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*,
                    size_t);
// Q6_K: one token on matmul_decode_k.cc's kernel, several on its packed kernel (matmul_avx512_k.cc).
void TileAvx512Q6_K(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*,
                    size_t);
void TileAvx512Q3_K(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*,
                    size_t);
void TileAvx512Q2_K(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*,
                    size_t);
void TileAvx512F32(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*, size_t);
void TileAvx512F16(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*, size_t);
void TileAvx512Bf16(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*,
                    size_t);
// The lookup-table types (matmul_avx2_q.cc, matmul_avx512_q.cc).
void TileAvx2IQ4_NL(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*,
                    size_t);
void TileAvx512IQ4_NL(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*,
                      size_t);
void TileAvx2MXFP4(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*, size_t);
void TileAvx512MXFP4(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*,
                     size_t);
// IQ4_XS (matmul_avx2_iq.cc; the AVX-512 one, with the K-quants, in matmul_avx512_k.cc).
void TileAvx2IQ4_XS(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*,
                    size_t);
void TileAvx512IQ4_XS(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*,
                      size_t);

// One-token (decode) kernels behind the tile kernels of the same type when tokens == 1: y[r] for r < rows
// (same bits as the tile kernels; matmul_decode_*.cc says how they read the weights).
// w: rows x [w_stride bytes]; act: one prepared activation row; y: [rows].
// matmul_decode_nibbles.cc: the types of 16 nibble bytes per 32-element block (IQ4_NL's AVX2 decode is its
// tile kernel's), and Q8_0 at AVX-512.
void DecodeAvx2Q4_0(const uint8_t* w, size_t w_stride, int64_t rows, const uint8_t* act, int64_t n_in,
                    float* y);
void DecodeAvx2MXFP4(const uint8_t* w, size_t w_stride, int64_t rows, const uint8_t* act, int64_t n_in,
                     float* y);
void DecodeAvx512Q4_0(const uint8_t* w, size_t w_stride, int64_t rows, const uint8_t* act, int64_t n_in,
                      float* y);
void DecodeAvx512MXFP4(const uint8_t* w, size_t w_stride, int64_t rows, const uint8_t* act, int64_t n_in,
                       float* y);
void DecodeAvx512IQ4_NL(const uint8_t* w, size_t w_stride, int64_t rows, const uint8_t* act, int64_t n_in,
                        float* y);
void DecodeAvx512Q8_0(const uint8_t* w, size_t w_stride, int64_t rows, const uint8_t* act, int64_t n_in,
                      float* y);
// matmul_decode_k.cc: Q4_K, Q5_K and Q6_K against Q8_K activations.
void DecodeAvx512Q4_K(const uint8_t* w, size_t w_stride, int64_t rows, const uint8_t* act, int64_t n_in,
                      float* y);
void DecodeAvx512Q5_K(const uint8_t* w, size_t w_stride, int64_t rows, const uint8_t* act, int64_t n_in,
                      float* y);
void DecodeAvx512Q6_K(const uint8_t* w, size_t w_stride, int64_t rows, const uint8_t* act, int64_t n_in,
                      float* y);
#endif

#if defined(__aarch64__)
// NEON (kNeon) tile kernels: matmul_neon_q.cc (32-block types), matmul_neon_k.cc (K-quants), matmul_neon_f.cc
// (F32, F16, BF16; REQUIRES n_in % 8 == 0).
void TileNeonF32(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*, size_t);
void TileNeonF16(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*, size_t);
void TileNeonBf16(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*, size_t);
void TileNeonQ8_0(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*, size_t);
void TileNeonQ4_0(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*, size_t);
void TileNeonQ5_0(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*, size_t);
void TileNeonQ4_1(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*, size_t);
void TileNeonQ5_1(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*, size_t);
void TileNeonQ4_K(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*, size_t);
void TileNeonQ5_K(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*, size_t);
void TileNeonQ6_K(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*, size_t);
void TileNeonQ3_K(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*, size_t);
void TileNeonQ2_K(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*, size_t);
// The lookup-table types (matmul_neon_q.cc).
void TileNeonIQ4_NL(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*,
                    size_t);
void TileNeonMXFP4(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*, size_t);
// IQ4_XS (matmul_neon_k.cc, with the K-quants).
void TileNeonIQ4_XS(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*,
                    size_t);
#endif

}  // namespace llamay::kernels

#endif  // LLAMAY_KERNELS_MATMUL_KERNELS_H_
