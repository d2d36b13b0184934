// AVX2 tile kernels for the K-quants (Q4_K, Q5_K, Q6_K) against Q8_K activations. Each (row, token) pair
// keeps an int32 vector of scaled partial sums for the current super-block; the sub-block scales are
// applied with vpmaddwd, so everything up to the per-super-block f32 step of vec_dot.h is exact.
#if defined(__x86_64__)
#include "kernels/avx2_util.h"
#include "kernels/matmul_kernels.h"
#include "kernels/quant_blocks.h"

namespace llamay::kernels {
namespace {

using avx2::F16;
using avx2::HsumI32;
using avx2::Load256;

// Prefetches the cache lines of a block kPrefetchAhead bytes past p. Decode streams the weights from memory
// and a tile reads its rows a block at a time, too slowly for the hardware prefetcher alone; rows are
// usually contiguous, so this reaches into the rows of the next tiles. kernels_bench BM_DecodeStream, one
// thread, 512 MiB: Q4_K 95 ms without, 73 ms at 512 bytes, 58 at 2048, 50-52 at 4096-8192; Q6_K 85, 68,
// 65, 46-48.
constexpr int kPrefetchAhead = 4096;
template <int kBlockBytes>
LLAMAY_AVX2_INLINE void PrefetchBlock(const void* p) {
  const char* c = static_cast<const char*>(p) + kPrefetchAhead;
  for (int off = 0; off < kBlockBytes; off += 64) _mm_prefetch(c + off, _MM_HINT_T0);
}

// vpshufb masks that broadcast int16 word j of a 128-bit lane to the whole lane (scale of sub-block j).
LLAMAY_AVX2_INLINE __m256i WordBroadcastMask(int j) {
  return _mm256_set1_epi16(static_cast<short>((2 * j) | ((2 * j + 1) << 8)));
}

// Both exact int32 sums of two vectors, as (sum of a, sum of b).
LLAMAY_AVX2_INLINE void HsumI32x2(__m256i a, __m256i b, int32_t* sa, int32_t* sb) {
  const __m256i h = _mm256_hadd_epi32(a, b);  // a01 a23 b01 b23 | a45 a67 b45 b67
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
  s = _mm_hadd_epi32(s, s);  // a, b, a, b
  *sa = _mm_cvtsi128_si32(s);
  *sb = _mm_extract_epi32(s, 1);
}

// Q4_K (kFive = false) and Q5_K (kFive = true).
template <typename Block, bool kFive, int kR, int kT>
struct K45Kernel {
  static constexpr int kRows = kR, kTokens = kT, kRowsDecode = 2;

  template <int R, int T>
  LLAMAY_AVX2 static void Run(const uint8_t* w, size_t ws, const uint8_t* act, size_t as, int64_t n_in,
                              float* y, size_t ys) {
    const int64_t nb = n_in / kQkK;
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    float acc[R][T] = {};
    for (int64_t b = 0; b < nb; ++b) {
      const Block* blk[R];
      __m256i scales16[R];  // the 8 sub-block scales as int16, in both lanes
      __m256i mins16[R];    // each sub-block min twice: lines up with the 16 bsums of groups of 16
      for (int r = 0; r < R; ++r) {
        blk[r] = reinterpret_cast<const Block*>(w + r * ws) + b;
        PrefetchBlock<sizeof(Block)>(blk[r]);
        uint64_t sc8, mn8;
        UnpackScalesMinsK4(blk[r]->scales, &sc8, &mn8);
        const __m128i m8 = _mm_cvtsi64_si128(static_cast<int64_t>(mn8));
        mins16[r] = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
        scales16[r] = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(sc8))));
      }
      __m256i isum[R][T];
      for (int r = 0; r < R; ++r)
        for (int t = 0; t < T; ++t) isum[r][t] = _mm256_setzero_si256();
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {  // chunk of 64 elements: sub-blocks 2c (low nibbles), 2c+1 (high)
        __m256i lo[R], hi[R], slo[R], shi[R];
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const __m256i v = Load256(blk[r]->qs + 32 * c);
          lo[r] = _mm256_and_si256(v, low4);
          hi[r] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
          if constexpr (kFive) {
            const __m256i qh = Load256(blk[r]->qh);
            const __m256i one = _mm256_set1_epi8(1);
            lo[r] = _mm256_or_si256(
                lo[r], _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), one), 4));
            hi[r] = _mm256_or_si256(
                hi[r], _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), one), 4));
          }
          slo[r] = _mm256_shuffle_epi8(scales16[r], WordBroadcastMask(2 * c));
          shi[r] = _mm256_shuffle_epi8(scales16[r], WordBroadcastMask(2 * c + 1));
        }
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const BlockQ8_K* ab = reinterpret_cast<const BlockQ8_K*>(act + t * as) + b;
          const __m256i a_lo = Load256(ab->qs + 64 * c), a_hi = Load256(ab->qs + 64 * c + 32);
#pragma GCC unroll 4
          for (int r = 0; r < R; ++r) {
            const __m256i p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo[r], a_lo), slo[r]);
            const __m256i p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi[r], a_hi), shi[r]);
            isum[r][t] = _mm256_add_epi32(isum[r][t], _mm256_add_epi32(p_lo, p_hi));
          }
        }
      }
      for (int t = 0; t < T; ++t) {
        const BlockQ8_K* ab = reinterpret_cast<const BlockQ8_K*>(act + t * as) + b;
        const __m256i bsums = Load256(ab->bsums);
        for (int r = 0; r < R; ++r) {
          int32_t sumi, smin;
          HsumI32x2(isum[r][t], _mm256_madd_epi16(bsums, mins16[r]), &sumi, &smin);
          const float dd = F16(blk[r]->d) * ab->d, dm = F16(blk[r]->dmin) * ab->d;
          acc[r][t] = acc[r][t] + (static_cast<float>(sumi) * dd - static_cast<float>(smin) * dm);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) y[t * ys + r] = acc[r][t];
  }
};

struct Q6KKernel {
  static constexpr int kRows = 1, kTokens = 4, kRowsDecode = 2;

  template <int R, int T>
  LLAMAY_AVX2 static void Run(const uint8_t* w, size_t ws, const uint8_t* act, size_t as, int64_t n_in,
                              float* y, size_t ys) {
    const int64_t nb = n_in / kQkK;
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    float acc[R][T] = {};
    for (int64_t b = 0; b < nb; ++b) {
      const BlockQ6_K* blk[R];
      __m256i scales16[R];
      __m256i isum[R][T];
      for (int r = 0; r < R; ++r) {
        blk[r] = reinterpret_cast<const BlockQ6_K*>(w + r * ws) + b;
        PrefetchBlock<sizeof(BlockQ6_K)>(blk[r]);
        scales16[r] = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[r]->scales)));
        for (int t = 0; t < T; ++t) isum[r][t] = _mm256_setzero_si256();
      }
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {  // 128 elements: ql[64h..64h+63], qh[32h..32h+31]
        __m256i q[R][4], sv[R][4];
        for (int r = 0; r < R; ++r) {
          const __m256i ql0 = Load256(blk[r]->ql + 64 * h), ql1 = Load256(blk[r]->ql + 64 * h + 32);
          const __m256i qh = Load256(blk[r]->qh + 32 * h);
          q[r][0] = _mm256_or_si256(_mm256_and_si256(ql0, low4),
                                    _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(0x03)), 4));
          q[r][1] = _mm256_or_si256(_mm256_and_si256(ql1, low4),
                                    _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(0x0C)), 2));
          q[r][2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                                    _mm256_and_si256(qh, _mm256_set1_epi8(0x30)));
          q[r][3] = _mm256_or_si256(
              _mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
              _mm256_srli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(static_cast<char>(0xC0))), 2));
          // Elements 32k..32k+31 span sub-blocks 8h+2k (low lane) and 8h+2k+1 (high lane).
          const __m256i sh = _mm256_broadcastsi128_si256(
              _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk[r]->scales + 8 * h))));
          for (int k = 0; k < 4; ++k) {
            const __m256i mask = _mm256_setr_m128i(_mm_set1_epi16(static_cast<short>((4 * k) | ((4 * k + 1) << 8))),
                                                   _mm_set1_epi16(static_cast<short>((4 * k + 2) | ((4 * k + 3) << 8))));
            sv[r][k] = _mm256_shuffle_epi8(sh, mask);
          }
        }
        for (int t = 0; t < T; ++t) {
          const BlockQ8_K* ab = reinterpret_cast<const BlockQ8_K*>(act + t * as) + b;
#pragma GCC unroll 4
          for (int k = 0; k < 4; ++k) {
            const __m256i a = Load256(ab->qs + 128 * h + 32 * k);
            for (int r = 0; r < R; ++r)
              isum[r][t] =
                  _mm256_add_epi32(isum[r][t], _mm256_madd_epi16(_mm256_maddubs_epi16(q[r][k], a), sv[r][k]));
          }
        }
      }
      for (int t = 0; t < T; ++t) {
        const BlockQ8_K* ab = reinterpret_cast<const BlockQ8_K*>(act + t * as) + b;
        const __m256i bsums = Load256(ab->bsums);
        for (int r = 0; r < R; ++r) {
          // q is stored with +32: subtract 32 * sum over sub-blocks of scale * (sum of activations).
          const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(bsums, scales16[r]), 5);
          const int32_t sumi = HsumI32(_mm256_sub_epi32(isum[r][t], off));
          acc[r][t] = acc[r][t] + static_cast<float>(sumi) * (F16(blk[r]->d) * ab->d);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) y[t * ys + r] = acc[r][t];
  }
};

}  // namespace

LLAMAY_AVX2 void TileAvx2Q4_K(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                              int64_t tokens, int64_t n_in, float* y, size_t ys) {
  avx2::RunTile<K45Kernel<BlockQ4_K, false, 1, 4>>(w, ws, rows, act, as, tokens, n_in, y, ys);
}
LLAMAY_AVX2 void TileAvx2Q5_K(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                              int64_t tokens, int64_t n_in, float* y, size_t ys) {
  avx2::RunTile<K45Kernel<BlockQ5_K, true, 1, 4>>(w, ws, rows, act, as, tokens, n_in, y, ys);
}
LLAMAY_AVX2 void TileAvx2Q6_K(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                              int64_t tokens, int64_t n_in, float* y, size_t ys) {
  avx2::RunTile<Q6KKernel>(w, ws, rows, act, as, tokens, n_in, y, ys);
}

}  // namespace llamay::kernels
#endif  // __x86_64__
