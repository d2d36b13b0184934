// AVX2 helpers of the paged attention (same bits as the scalar helpers in attention.cc).
#if defined(__x86_64__)
#include "base/numeric.h"
#include "kernels/avx2_util.h"
#include "kernels/ops_avx2.h"

namespace llamay::kernels::avx2 {

LLAMAY_AVX2 void DecodeKvSlice(TensorType type, const uint8_t* row, int64_t start, int64_t n, float* out) {
  switch (type) {
    case TensorType::kF32:
      for (int64_t i = 0; i < n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_loadu_ps(reinterpret_cast<const float*>(row) + start + i));
      return;
    case TensorType::kF16:
      for (int64_t i = 0; i < n; i += 8) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * (start + i)));
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
      }
      return;
    case TensorType::kQ8_0: {
      const BlockQ8_0* blocks = reinterpret_cast<const BlockQ8_0*>(row) + start / kQ8_0BlockSize;
      for (int64_t b = 0; b < n / kQ8_0BlockSize; ++b) {
        // d (an f16 value) times an int8 is exact in f32.
        const __m256 d = _mm256_set1_ps(F16(blocks[b].d));
        for (int k = 0; k < 4; ++k) {
          const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blocks[b].qs + 8 * k));
          _mm256_storeu_ps(out + 32 * b + 8 * k,
                           _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q))));
        }
      }
      return;
    }
    default:
      return;
  }
}

LLAMAY_AVX2 float DotF32(const float* x, const float* y, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8)
    acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  return Reduce8(acc);
}

LLAMAY_AVX2 void Axpy(float a, const float* x, int64_t n, float* y) {
  const __m256 av = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_mul_ps(av, _mm256_loadu_ps(x + i))));
  for (; i < n; ++i) y[i] = y[i] + a * x[i];
}

namespace {

// out[d..d+8V) += sum over r in order of w[r] * v_rows[r][d..d+8V), the partial sums kept in registers.
template <int V>
LLAMAY_AVX2_INLINE void AccumulateChunk(const float* w, const float* const* v_rows, int64_t n, int64_t d,
                                        float* out) {
  __m256 acc[V];
  for (int k = 0; k < V; ++k) acc[k] = _mm256_loadu_ps(out + d + 8 * k);
  for (int64_t r = 0; r < n; ++r) {
    const __m256 wr = _mm256_set1_ps(w[r]);
    const float* row = v_rows[r] + d;
    for (int k = 0; k < V; ++k)
      acc[k] = _mm256_add_ps(acc[k], _mm256_mul_ps(wr, _mm256_loadu_ps(row + 8 * k)));
  }
  for (int k = 0; k < V; ++k) _mm256_storeu_ps(out + d + 8 * k, acc[k]);
}

}  // namespace

LLAMAY_AVX2 void AttnScores(const float* q, const float* const* k_rows, int64_t n, int64_t hd, float scale,
                            float* out) {
  const __m256 sc = _mm256_set1_ps(scale);
  for (int64_t r = 0; r < n; r += 8) {
    // Eight independent dot chains hide the add latency that bounds a single DotF32. A short last group
    // repeats its last row; the extra lanes are dropped.
    const int64_t m = n - r < 8 ? n - r : 8;
    const float* rows[8];
    for (int64_t i = 0; i < 8; ++i) rows[i] = k_rows[r + (i < m ? i : m - 1)];
    __m256 acc[8];
    for (int i = 0; i < 8; ++i) acc[i] = _mm256_setzero_ps();
    for (int64_t d = 0; d < hd; d += 8) {
      const __m256 qv = _mm256_loadu_ps(q + d);
      for (int i = 0; i < 8; ++i)
        acc[i] = _mm256_add_ps(acc[i], _mm256_mul_ps(qv, _mm256_loadu_ps(rows[i] + d)));
    }
    const __m256 s = _mm256_mul_ps(Reduce8x8(acc), sc);
    if (m == 8) {
      _mm256_storeu_ps(out + r, s);
    } else {
      alignas(32) float lanes[8];
      _mm256_store_ps(lanes, s);
      for (int64_t i = 0; i < m; ++i) out[r + i] = lanes[i];
    }
  }
}

LLAMAY_AVX2 void AttnAccumulate(const float* w, const float* const* v_rows, int64_t n, int64_t hd,
                                float* out) {
  // Eight (or four) independent accumulators per pass; every element still sums its rows in order.
  int64_t d = 0;
  for (; d + 64 <= hd; d += 64) AccumulateChunk<8>(w, v_rows, n, d, out);
  for (; d + 32 <= hd; d += 32) AccumulateChunk<4>(w, v_rows, n, d, out);
  for (; d < hd; d += 8) AccumulateChunk<1>(w, v_rows, n, d, out);
}

}  // namespace llamay::kernels::avx2
#endif  // __x86_64__
