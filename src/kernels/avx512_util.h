// What the AVX-512 kernel files share: the target attributes of their functions and a few loads and
// shuffles. Internal to src/kernels; include it only from x86-64 code (inside `#if defined(__x86_64__)`).
//
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wuninitialized (and
// -Wmaybe-uninitialized) report once inlined: the including file turns both off, for the rest of it.
#ifndef LLAMAY_KERNELS_AVX512_UTIL_H_
#define LLAMAY_KERNELS_AVX512_UTIL_H_

#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // GCC's own warning; clang does not know it (the fuzz preset builds with clang)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

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

// ---- Eight-lane f32 dots two to a register (the chunked scans' FmaDot8 order, reference.h's Reduce8) ----

// All ones in the first n lanes (0 <= n <= 16).
LLAMAY_AVX512_INLINE __mmask16 FirstLanes16(int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }

// [a | b], and 8 floats in both halves (AVX-512 F only: the *32x8 forms need DQ).
LLAMAY_AVX512_INLINE __m512 Join(__m256 a, __m256 b) {
  return _mm512_castpd_ps(
      _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(a)), _mm256_castps_pd(b), 1));
}
LLAMAY_AVX512_INLINE __m512 Both(__m256 a) {
  return _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(a)));
}

// Reduce8 of each 256-bit half of eight registers: lane 2 i + h of the result (lane 8 h + i with
// halves_first) is bit for bit Reduce8 of half h of a[i]. The same additions as Reduce8, operands in the same
// order: per dot s_k = l_k + l_k+4 (low 128 bits + high 128 bits of the half), then (s0 + s2) + (s1 + s3).
LLAMAY_AVX512_INLINE __m512 Reduce8x16(const __m512* a, bool halves_first = false) {
  // s[k]'s 128-bit lanes hold s0..s3 of: a[k] low half, a[k] high half, a[k+4] low half, a[k+4] high half.
  __m512 s[4];
  for (int k = 0; k < 4; ++k)
    s[k] = _mm512_add_ps(_mm512_shuffle_f32x4(a[k], a[k + 4], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(a[k], a[k + 4], _MM_SHUFFLE(3, 1, 3, 1)));
  // Per 128-bit lane: [s0+s2 of row k, of row k+1, s1+s3 of row k, of row k+1], as avx2::Reduce8x8.
  const __m512 t01 = _mm512_add_ps(_mm512_unpacklo_ps(s[0], s[1]), _mm512_unpackhi_ps(s[0], s[1]));
  const __m512 t23 = _mm512_add_ps(_mm512_unpacklo_ps(s[2], s[3]), _mm512_unpackhi_ps(s[2], s[3]));
  const __m512 r = _mm512_add_ps(_mm512_shuffle_ps(t01, t23, _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm512_shuffle_ps(t01, t23, _MM_SHUFFLE(3, 2, 3, 2)));
  // Lane 4 slot + k of r is the dot of slot (above) of a[k]: reorder to lane 2 i + h, or with halves_first
  // to lane 8 h + i (the low halves of a[0..7], then their high halves).
  const __m512i order = halves_first
                            ? _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15)
                            : _mm512_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15);
  return _mm512_permutexvar_ps(order, r);
}

}  // namespace llamay::kernels::avx512

#endif  // LLAMAY_KERNELS_AVX512_UTIL_H_
