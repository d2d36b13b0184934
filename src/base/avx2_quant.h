// Internal: AVX2 steps shared by the activation quantisers (base/numeric.cc's Q8_0, kernels/ops_avx2.cc's
// Q8_K). Each is exact, so a quantiser that uses them keeps its reference's bits.
#ifndef LLAMAY_BASE_AVX2_QUANT_H_
#define LLAMAY_BASE_AVX2_QUANT_H_

#if defined(__x86_64__)
#include <immintrin.h>

namespace llamay::avx2_quant {

#define LLAMAY_AVX2_QUANT_INLINE __attribute__((target("avx2"), always_inline)) inline

// The largest of the eight lanes of m. REQUIRES: no lane is NaN (a maximum of |x| built as
// vmaxps(|x|, acc) has none).
LLAMAY_AVX2_QUANT_INLINE float MaxLane(__m256 m) {
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
  return _mm_cvtss_f32(m4);
}

// The low byte of each int32 lane of v[0..3] (elements 0-7, 8-15, 16-23, 24-31), as 32 bytes in element
// order.
LLAMAY_AVX2_QUANT_INLINE __m256i LowBytes32(const __m256i* v) {
  // Per 128-bit half, the low bytes of its four lanes into dword 0: elements 8k..8k+3 and 8k+4..8k+7.
  const __m256i low_bytes = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,  //
                                             0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  __m256i q[4];
  for (int k = 0; k < 4; ++k) q[k] = _mm256_shuffle_epi8(v[k], low_bytes);
  const __m256i lo = _mm256_unpacklo_epi32(q[0], q[1]);  // dwords: q0a q1a ... | q0b q1b ...
  const __m256i hi = _mm256_unpacklo_epi32(q[2], q[3]);
  const __m256i both = _mm256_unpacklo_epi64(lo, hi);  // q0a q1a q2a q3a | q0b q1b q2b q3b
  // Element order: q0a q0b q1a q1b q2a q2b q3a q3b = dwords 0,4,1,5,2,6,3,7 of `both`.
  return _mm256_permutevar8x32_epi32(both, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

#undef LLAMAY_AVX2_QUANT_INLINE

}  // namespace llamay::avx2_quant

#endif  // defined(__x86_64__)
#endif  // LLAMAY_BASE_AVX2_QUANT_H_
