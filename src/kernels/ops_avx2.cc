// AVX2 ops: each vector step performs, per lane, exactly the f32 operations of reference/ops_ref.cc, and
// reductions keep the lane i%8 order, so results match the scalar reference bit for bit.
#if defined(__x86_64__)
#include "kernels/ops_avx2.h"

#include <cstring>

#include "base/avx2_quant.h"
#include "kernels/avx2_util.h"
#include "kernels/reference/reference.h"

namespace llamay::kernels::avx2 {
namespace {

// RefExp on eight lanes.
LLAMAY_AVX2_INLINE __m256 Exp(__m256 x) {
  const __m256 lo = _mm256_set1_ps(kExpLo);
  x = _mm256_max_ps(x, lo);
  x = _mm256_min_ps(x, _mm256_set1_ps(kExpHi));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kExpLog2e)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_sub_ps(x, _mm256_mul_ps(n, _mm256_set1_ps(kExpC1)));
  r = _mm256_sub_ps(r, _mm256_mul_ps(n, _mm256_set1_ps(kExpC2)));
  const __m256 z = _mm256_mul_ps(r, r);
  __m256 p = _mm256_set1_ps(kExpP[0]);
  for (int i = 1; i < 6; ++i) p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kExpP[i]));
  p = _mm256_add_ps(_mm256_mul_ps(p, z), r);
  p = _mm256_add_ps(p, _mm256_set1_ps(1.0f));
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  const __m256 result = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
  return _mm256_andnot_ps(_mm256_cmp_ps(x, lo, _CMP_LE_OQ), result);
}

LLAMAY_AVX2_INLINE __m256 SiluV(__m256 x) {
  const __m256 e = Exp(_mm256_xor_ps(x, _mm256_set1_ps(-0.0f)));  // -x, as the scalar negation
  return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

}  // namespace

LLAMAY_AVX2 void RmsNorm(const float* x, const float* w, int64_t n, float eps, float* y) {
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();  // lanes 0..3 and 4..7
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256d a = _mm256_cvtps_pd(_mm_loadu_ps(x + i)), b = _mm256_cvtps_pd(_mm_loadu_ps(x + i + 4));
    lo = _mm256_add_pd(lo, _mm256_mul_pd(a, a));
    hi = _mm256_add_pd(hi, _mm256_mul_pd(b, b));
  }
  alignas(32) double acc[8];
  _mm256_store_pd(acc, lo);
  _mm256_store_pd(acc + 4, hi);
  for (; i < n; ++i) acc[i % 8] = acc[i % 8] + static_cast<double>(x[i]) * static_cast<double>(x[i]);
  RmsNormFinish(x, w, n, eps, acc, y);  // f32 multiplies: the compiler's vector code rounds the same
}

LLAMAY_AVX2 void Silu(const float* x, int64_t n, float* y) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, SiluV(_mm256_loadu_ps(x + i)));
  for (; i < n; ++i) y[i] = RefSilu(x[i]);
}

LLAMAY_AVX2 void SwiGlu(const float* gate, const float* up, int64_t n, float* y) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_mul_ps(SiluV(_mm256_loadu_ps(gate + i)), _mm256_loadu_ps(up + i)));
  for (; i < n; ++i) y[i] = RefSilu(gate[i]) * up[i];
}

LLAMAY_AVX2 void Gelu(const float* x, int64_t n, float* y) {
  const __m256 one = _mm256_set1_ps(1.0f), two = _mm256_set1_ps(2.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    // u = ((s * x) * (1 + ((a * x) * x))), as the scalar expression associates.
    const __m256 inner = _mm256_add_ps(one, _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.044715f), v), v));
    const __m256 u = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.79788456080286535588f), v), inner);
    const __m256 t = _mm256_sub_ps(one, _mm256_div_ps(two, _mm256_add_ps(Exp(_mm256_mul_ps(two, u)), one)));
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), v), _mm256_add_ps(one, t)));
  }
  for (; i < n; ++i) y[i] = RefGelu(x[i]);
}

LLAMAY_AVX2 void Softmax(const float* x, int64_t n, float* y) {
  // The maximum is exact in any order. max_ps(a, b) is a > b ? a : b, the reference's `x[i] > m ? x[i] : m`
  // with a = x[i], also for NaN: a NaN x[i] is skipped, a NaN x[0] stays the maximum.
  __m256 mv = _mm256_set1_ps(x[0]);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) mv = _mm256_max_ps(_mm256_loadu_ps(x + i), mv);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, mv);
  float m = lanes[0];
  for (int k = 1; k < 8; ++k) m = lanes[k] > m ? lanes[k] : m;
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;

  const __m256 m8 = _mm256_set1_ps(m);
  __m256 acc = _mm256_setzero_ps();
  for (i = 0; i + 8 <= n; i += 8) {
    const __m256 e = Exp(_mm256_sub_ps(_mm256_loadu_ps(x + i), m8));
    _mm256_storeu_ps(y + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  alignas(32) float sums[8];
  _mm256_store_ps(sums, acc);
  for (; i < n; ++i) {
    const float e = RefExp(x[i] - m);
    y[i] = e;
    sums[i % 8] = sums[i % 8] + e;
  }
  const float inv = 1.0f / kernels::Reduce8(sums);
  const __m256 inv8 = _mm256_set1_ps(inv);
  for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), inv8));
  for (; i < n; ++i) y[i] = y[i] * inv;
}

// The reference's steps on eight lanes:
//  - the signed absolute maximum: the largest |x| (vmaxps(|x|, acc) keeps acc where |x| is NaN, as the
//    reference's `>` skips NaN), then the first element of that magnitude, with its sign;
//  - iscale and d are the same scalar operations;
//  - nearbyint then the int conversion is vcvtps2dq (round to nearest even; NaN and overflow give
//    0x80000000, as the scalar conversion does on x86), min(127, q), and the low byte kept;
//  - bsums: exact integer sums of the stored bytes.
LLAMAY_AVX2 void QuantizeRowQ8_K(const float* x, BlockQ8_K* y, int64_t n) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256i max_q = _mm256_set1_epi32(127), ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
  for (int64_t b = 0; b < n / kQkK; ++b) {
    const float* xb = x + b * kQkK;
    __m256 m = _mm256_setzero_ps();
    for (int k = 0; k < kQkK / 8; ++k)
      m = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(xb + 8 * k), abs_mask), m);
    const float amax = avx2_quant::MaxLane(m);
    if (amax == 0.0f) {
      std::memset(&y[b], 0, sizeof(BlockQ8_K));
      continue;
    }
    const __m256 am = _mm256_set1_ps(amax);
    int first = 0;
    for (int k = 0; k < kQkK / 8; ++k) {
      const int hit = _mm256_movemask_ps(
          _mm256_cmp_ps(_mm256_and_ps(_mm256_loadu_ps(xb + 8 * k), abs_mask), am, _CMP_EQ_OQ));
      if (hit != 0) {
        first = 8 * k + __builtin_ctz(static_cast<unsigned>(hit));
        break;
      }
    }
    // The largest magnitude maps to -127 (as the reference, after ggml).
    const float iscale = -127.0f / xb[first];
    const __m256 is = _mm256_set1_ps(iscale);
    __m256i sums[kQkK / 32];  // per 32 elements: four int32 partial sums of group 2c, then four of 2c + 1
    for (int c = 0; c < kQkK / 32; ++c) {
      __m256i q[4];
      for (int k = 0; k < 4; ++k) {
        const __m256i v = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + 32 * c + 8 * k), is));
        q[k] = _mm256_min_epi32(v, max_q);
      }
      const __m256i bytes = avx2_quant::LowBytes32(q);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[b].qs + 32 * c), bytes);
      sums[c] = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, bytes), ones16);
    }
    // Per 128-bit lane: [g0 g2 g4 g6 | g1 g3 g5 g7] from chunks 0-3, [g8 .. g14 | g9 .. g15] from 4-7.
    const __m256i h0 =
        _mm256_hadd_epi32(_mm256_hadd_epi32(sums[0], sums[1]), _mm256_hadd_epi32(sums[2], sums[3]));
    const __m256i h1 =
        _mm256_hadd_epi32(_mm256_hadd_epi32(sums[4], sums[5]), _mm256_hadd_epi32(sums[6], sums[7]));
    const __m128i h0l = _mm256_castsi256_si128(h0), h0h = _mm256_extracti128_si256(h0, 1);
    const __m128i h1l = _mm256_castsi256_si128(h1), h1h = _mm256_extracti128_si256(h1, 1);
    // |group sum| <= 16 x 128: int16 without saturation.
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y[b].bsums),
                     _mm_packs_epi32(_mm_unpacklo_epi32(h0l, h0h), _mm_unpackhi_epi32(h0l, h0h)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y[b].bsums + 8),
                     _mm_packs_epi32(_mm_unpacklo_epi32(h1l, h1h), _mm_unpackhi_epi32(h1l, h1h)));
    y[b].d = 1.0f / iscale;
  }
}

}  // namespace llamay::kernels::avx2
#endif  // __x86_64__
