#include "base/numeric.h"

#include "base/cpu.h"

#include <cmath>

#if defined(__x86_64__)
#include <immintrin.h>

#include "base/avx2_quant.h"
#define LLAMAY_NUMERIC_X86 1
#endif

namespace llamay {
namespace {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

float F16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  if (exp == 0x1F) {
    if (mant == 0) return FromBits(sign | 0x7F800000u);  // inf
    return FromBits(sign | 0x7FC00000u | (mant << 13));  // nan, quieted as the F16C instruction does
  }
  if (exp != 0) return FromBits(sign | ((exp + 112) << 23) | (mant << 13));
  if (mant == 0) return FromBits(sign);
  // Subnormal: value = mant * 2^-24, exact in f32.
  float v = static_cast<float>(mant) * 0x1p-24f;
  return sign ? -v : v;
}

uint16_t F32ToF16(float f) {
  const uint32_t u = Bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return sign | 0x7E00u | static_cast<uint16_t>((abs >> 13) & 0x3FFu);  // nan
  if (abs >= 0x477FF000u) return sign | 0x7C00u;  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {
    // Result is subnormal or zero: value / 2^-24 rounded to nearest even.
    float v = FromBits(abs) * 0x1p24f;  // exact scaling
    float r = std::nearbyint(v);        // default rounding mode: nearest even
    return sign | static_cast<uint16_t>(r);
  }
  // Normal: rebias exponent, round mantissa 23 -> 10 bits to nearest even.
  uint32_t e = (abs >> 23) - 112;
  uint32_t m = abs & 0x7FFFFFu;
  uint32_t h = (e << 10) | (m >> 13);
  uint32_t rest = m & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // carry may bump the exponent: correct
  return sign | static_cast<uint16_t>(h);
}

uint16_t F32ToBf16(float f) {
  uint32_t u = Bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet nan
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

void QuantizeRowQ8_0Portable(const float* x, BlockQ8_0* y, size_t n) {
  const size_t nb = n / kQ8_0BlockSize;
  for (size_t b = 0; b < nb; ++b) {
    const float* xb = x + b * kQ8_0BlockSize;
    float amax = 0.0f;
    for (int j = 0; j < kQ8_0BlockSize; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = F32ToF16(d);
    for (int j = 0; j < kQ8_0BlockSize; ++j) {
      y[b].qs[j] = static_cast<int8_t>(std::lround(xb[j] * id));
    }
  }
}

void DequantizeRowQ8_0(const BlockQ8_0* x, float* y, size_t n) {
  const size_t nb = n / kQ8_0BlockSize;
  for (size_t b = 0; b < nb; ++b) {
    const float d = F16ToF32(x[b].d);
    for (int j = 0; j < kQ8_0BlockSize; ++j) y[b * kQ8_0BlockSize + j] = d * x[b].qs[j];
  }
}

void ConvertF32ToF16Portable(const float* x, uint16_t* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = F32ToF16(x[i]);
}
void ConvertF16ToF32Portable(const uint16_t* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = F16ToF32(x[i]);
}

#ifdef LLAMAY_NUMERIC_X86
namespace {

bool HaveF16c() {
  return GetCpuFeatures().f16c;
}

// The F16C instructions round to nearest even, exactly as F32ToF16 does (base_test checks every half).
__attribute__((target("avx,f16c"))) void ConvertF32ToF16F16c(const float* x, uint16_t* y, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), h);
  }
  for (; i < n; ++i) y[i] = F32ToF16(x[i]);
}

__attribute__((target("avx,f16c"))) void ConvertF16ToF32F16c(const uint16_t* x, float* y, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  for (; i < n; ++i) y[i] = F16ToF32(x[i]);
}

bool HaveAvx2() {
  const CpuFeatures& f = GetCpuFeatures();
  return f.avx2 && f.f16c;
}

// QuantizeRowQ8_0Portable with eight lanes, bit for bit:
//  - amax: max is exact and order-free; vmaxps(|x|, acc) returns acc when |x| is NaN, as fmax ignores it.
//  - d and id are the same scalar operations.
//  - lround (half away from zero) as trunc(|v|) + (|v| - trunc(|v|) >= 0.5), exact for |v| < 2^23, with
//    v's sign put back; NaN converts to 0x80000000 as lround's LONG_MIN does, and both keep the low byte.
__attribute__((target("avx2,f16c"))) void QuantizeRowQ8_0Avx2(const float* x, BlockQ8_0* y, size_t n) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256 sign_mask = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(0x80000000u)));
  const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
  const size_t nb = n / kQ8_0BlockSize;
  for (size_t b = 0; b < nb; ++b) {
    const float* xb = x + b * kQ8_0BlockSize;
    __m256 v[4];
    __m256 m = _mm256_setzero_ps();
    for (int k = 0; k < 4; ++k) {
      v[k] = _mm256_loadu_ps(xb + 8 * k);
      m = _mm256_max_ps(_mm256_and_ps(v[k], abs_mask), m);
    }
    const float amax = avx2_quant::MaxLane(m);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = static_cast<uint16_t>(_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT));
    const __m256 idv = _mm256_set1_ps(id);
    __m256i q[4];
    for (int k = 0; k < 4; ++k) {
      const __m256 p = _mm256_mul_ps(v[k], idv);
      const __m256 a = _mm256_and_ps(p, abs_mask);
      const __m256 t = _mm256_round_ps(a, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
      const __m256 up = _mm256_and_ps(_mm256_cmp_ps(_mm256_sub_ps(a, t), half, _CMP_GE_OQ), one);
      const __m256 r = _mm256_or_ps(_mm256_add_ps(t, up), _mm256_and_ps(p, sign_mask));
      q[k] = _mm256_cvttps_epi32(r);
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[b].qs), avx2_quant::LowBytes32(q));
  }
}

}  // namespace
#endif

void QuantizeRowQ8_0(const float* x, BlockQ8_0* y, size_t n) {
#ifdef LLAMAY_NUMERIC_X86
  if (HaveAvx2()) return QuantizeRowQ8_0Avx2(x, y, n);
#endif
  QuantizeRowQ8_0Portable(x, y, n);
}

void ConvertF32ToF16(const float* x, uint16_t* y, size_t n) {
#ifdef LLAMAY_NUMERIC_X86
  if (HaveF16c()) return ConvertF32ToF16F16c(x, y, n);
#endif
  ConvertF32ToF16Portable(x, y, n);
}

void ConvertF16ToF32(const uint16_t* x, float* y, size_t n) {
#ifdef LLAMAY_NUMERIC_X86
  if (HaveF16c()) return ConvertF16ToF32F16c(x, y, n);
#endif
  ConvertF16ToF32Portable(x, y, n);
}

}  // namespace llamay
