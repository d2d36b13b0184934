// AVX-512 steps of the paged attention (same bits as the scalar steps of attention.cc and the AVX2 ones of
// attention_avx2.cc).
//
// Every lane keeps the operations of its AVX2 (or scalar) counterpart, in the same order:
//   - decode and accumulate work element by element, so 16 lanes instead of 8 change nothing;
//   - a score is eight lane sums reduced by Reduce8 (vec_dot.h). A 512-bit register holds two 256-bit
//     slots, the eight lane sums of two heads of a kv group against the same K row (the row's eight values
//     broadcast to both slots), each slot accumulated and reduced (avx2::Reduce8x8) exactly as
//     avx2::AttnScores does its one register: half the multiplies and adds per (head, row) pair.
#if defined(__x86_64__)
#include "kernels/attention_avx512.h"

#include "base/numeric.h"
#include "kernels/avx2_util.h"
#include "kernels/avx512_util.h"

namespace llamay::kernels::avx512 {
namespace {

// A 256-bit load in both halves, and the high half, with AVX-512 F instructions only (the *32x8 forms need
// DQ); Join (avx512_util.h) builds [a | b].
LLAMAY_AVX512_INLINE __m512 Broadcast256(const float* p) {
  return _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(_mm256_loadu_ps(p))));
}
LLAMAY_AVX512_INLINE __m256 High256(__m512 v) {
  return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

// out[d..d+16V) += sum over r in order of w[r] * v_rows[r][d..d+16V), the partial sums kept in registers.
template <int V>
LLAMAY_AVX512_INLINE void AccumulateChunk(const float* w, const float* const* v_rows, int64_t n, int64_t d,
                                          float* out) {
  __m512 acc[V];
  for (int k = 0; k < V; ++k) acc[k] = _mm512_loadu_ps(out + d + 16 * k);
  for (int64_t r = 0; r < n; ++r) {
    const __m512 wr = _mm512_set1_ps(w[r]);
    const float* row = v_rows[r] + d;
    for (int k = 0; k < V; ++k)
      acc[k] = _mm512_add_ps(acc[k], _mm512_mul_ps(wr, _mm512_loadu_ps(row + 16 * k)));
  }
  for (int k = 0; k < V; ++k) _mm512_storeu_ps(out + d + 16 * k, acc[k]);
}

}  // namespace

LLAMAY_AVX512 void DecodeKvSlice(TensorType type, const uint8_t* row, int64_t start, int64_t n, float* out) {
  int64_t i = 0;
  switch (type) {
    case TensorType::kF32: {
      const float* x = reinterpret_cast<const float*>(row) + start;
      for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, _mm512_loadu_ps(x + i));
      if (i < n) _mm256_storeu_ps(out + i, _mm256_loadu_ps(x + i));
      return;
    }
    case TensorType::kF16: {
      const uint16_t* x = reinterpret_cast<const uint16_t*>(row) + start;
      for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(out + i,
                         _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i))));
      if (i < n)
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
      return;
    }
    case TensorType::kQ8_0: {
      const BlockQ8_0* blocks = reinterpret_cast<const BlockQ8_0*>(row) + start / kQ8_0BlockSize;
      for (int64_t b = 0; b < n / kQ8_0BlockSize; ++b) {
        // d (an f16 value) times an int8 is exact in f32.
        const __m512 d = _mm512_set1_ps(avx2::F16(blocks[b].d));
        for (int k = 0; k < 2; ++k) {
          const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks[b].qs + 16 * k));
          _mm512_storeu_ps(out + 32 * b + 16 * k,
                           _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q))));
        }
      }
      return;
    }
    default:
      return;
  }
}

LLAMAY_AVX512 void AttnScores2(const float* q, const float* const* k_rows, int64_t n, int64_t hd, float scale,
                               float* out, int64_t out_stride) {
  const __m256 sc = _mm256_set1_ps(scale);
  for (int64_t r = 0; r < n; r += 8) {
    // Eight rows at a time for independent add chains; a short last group repeats its last row and drops
    // the extra lanes, as avx2::AttnScores does.
    const int64_t m = n - r < 8 ? n - r : 8;
    const float* rows[8];
    for (int64_t i = 0; i < 8; ++i) rows[i] = k_rows[r + (i < m ? i : m - 1)];
    __m512 acc[8];
    for (int i = 0; i < 8; ++i) acc[i] = _mm512_setzero_ps();
    for (int64_t d = 0; d < hd; d += 8) {
      // Slot 0: the first head's q[d..d+8), slot 1 the second's; both meet the same eight K values.
      const __m512 qv = Join(_mm256_loadu_ps(q + d), _mm256_loadu_ps(q + hd + d));
      for (int i = 0; i < 8; ++i)
        acc[i] = _mm512_add_ps(acc[i], _mm512_mul_ps(qv, Broadcast256(rows[i] + d)));
    }
    __m256 lo[8], hi[8];
    for (int i = 0; i < 8; ++i) {
      lo[i] = _mm512_castps512_ps256(acc[i]);
      hi[i] = High256(acc[i]);
    }
    alignas(32) float lanes[2][8];
    _mm256_store_ps(lanes[0], _mm256_mul_ps(avx2::Reduce8x8(lo), sc));
    _mm256_store_ps(lanes[1], _mm256_mul_ps(avx2::Reduce8x8(hi), sc));
    for (int64_t i = 0; i < m; ++i) {
      out[r + i] = lanes[0][i];
      out[out_stride + r + i] = lanes[1][i];
    }
  }
}

LLAMAY_AVX512 void AttnAccumulate(const float* w, const float* const* v_rows, int64_t n, int64_t hd,
                                  float* out) {
  int64_t d = 0;
  for (; d + 128 <= hd; d += 128) AccumulateChunk<8>(w, v_rows, n, d, out);
  for (; d + 64 <= hd; d += 64) AccumulateChunk<4>(w, v_rows, n, d, out);
  for (; d + 16 <= hd; d += 16) AccumulateChunk<1>(w, v_rows, n, d, out);
  if (d < hd) {  // the last 8 elements
    __m256 acc = _mm256_loadu_ps(out + d);
    for (int64_t r = 0; r < n; ++r)
      acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_set1_ps(w[r]), _mm256_loadu_ps(v_rows[r] + d)));
    _mm256_storeu_ps(out + d, acc);
  }
}

}  // namespace llamay::kernels::avx512
#endif  // __x86_64__
