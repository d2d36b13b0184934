// Number formats shared by the KV cache and the kernels: IEEE half (f16), bfloat16 and the Q8_0 block.
//
// Conversions are exact and portable (round to nearest even, as the F16C instruction and ggml do), so a
// value converts to the same bits on every machine. Q8_0 matches GGUF's block: 32 int8 values and one f16
// scale d, x ~= d * q, d = max|x| / 127.
// Thread-safety: pure functions.
#ifndef LLAMAY_BASE_NUMERIC_H_
#define LLAMAY_BASE_NUMERIC_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace llamay {

float F16ToF32(uint16_t h);
uint16_t F32ToF16(float f);

inline float Bf16ToF32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
uint16_t F32ToBf16(float f);

inline constexpr int kQ8_0BlockSize = 32;
struct BlockQ8_0 {
  uint16_t d;                 // f16 scale
  int8_t qs[kQ8_0BlockSize];  // quants
};
static_assert(sizeof(BlockQ8_0) == 34, "Q8_0 block must be 34 bytes, as in GGUF");

// REQUIRES: n % 32 == 0. d = F32ToF16(max|x| / 127), q = lround(x * (1 / that unrounded d)) (0 for NaN).
// Uses AVX2 when the CPU has it, with the same bits as the portable code (exposed for tests).
void QuantizeRowQ8_0(const float* x, BlockQ8_0* y, size_t n);
void QuantizeRowQ8_0Portable(const float* x, BlockQ8_0* y, size_t n);
void DequantizeRowQ8_0(const BlockQ8_0* x, float* y, size_t n);

// Row conversions; use the F16C instructions when the CPU has them (same results as the portable code,
// which is exposed for tests).
void ConvertF32ToF16(const float* x, uint16_t* y, size_t n);
void ConvertF16ToF32(const uint16_t* x, float* y, size_t n);
void ConvertF32ToF16Portable(const float* x, uint16_t* y, size_t n);
void ConvertF16ToF32Portable(const uint16_t* x, float* y, size_t n);

}  // namespace llamay

#endif  // LLAMAY_BASE_NUMERIC_H_
