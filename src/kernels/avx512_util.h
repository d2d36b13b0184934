// What the AVX-512 kernel files share: the target attributes of their functions and a few loads and
// shuffles. Internal to src/kernels; include it only from x86-64 code (inside `#if defined(__x86_64__)`).
//
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wuninitialized (and
// -Wmaybe-uninitialized) report once inlined: the including file turns both off, for the rest of it.
#ifndef LLAMAY_KERNELS_AVX512_UTIL_H_
#define LLAMAY_KERNELS_AVX512_UTIL_H_

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#define LLAMAY_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define LLAMAY_AVX512_INLINE \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c"), always_inline)) inline

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace llamay::kernels::avx512 {

LLAMAY_AVX512_INLINE int32_t Load32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Four 16-byte loads, one per 128-bit lane (p0 in lane 0).
LLAMAY_AVX512_INLINE __m512i Load4x128(const void* p0, const void* p1, const void* p2, const void* p3) {
  const __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(static_cast<const __m128i*>(p0)));
  const __m512i v1 = _mm512_inserti32x4(v, _mm_loadu_si128(static_cast<const __m128i*>(p1)), 1);
  const __m512i v2 = _mm512_inserti32x4(v1, _mm_loadu_si128(static_cast<const __m128i*>(p2)), 2);
  return _mm512_inserti32x4(v2, _mm_loadu_si128(static_cast<const __m128i*>(p3)), 3);
}

// Per 128-bit lane, the 4x4 dword transpose of x[0..3]: y[j] = [x0.j, x1.j, x2.j, x3.j].
LLAMAY_AVX512_INLINE void Transpose4x4(const __m512i* x, __m512i* y) {
  const __m512i t0 = _mm512_unpacklo_epi32(x[0], x[1]), t1 = _mm512_unpackhi_epi32(x[0], x[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(x[2], x[3]), t3 = _mm512_unpackhi_epi32(x[2], x[3]);
  y[0] = _mm512_unpacklo_epi64(t0, t2);
  y[1] = _mm512_unpackhi_epi64(t0, t2);
  y[2] = _mm512_unpacklo_epi64(t1, t3);
  y[3] = _mm512_unpackhi_epi64(t1, t3);
}

}  // namespace llamay::kernels::avx512

#endif  // LLAMAY_KERNELS_AVX512_UTIL_H_
