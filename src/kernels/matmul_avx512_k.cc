// AVX-512 tile kernels for the K-quants (Q4_K, Q5_K, Q6_K) against Q8_K activations: the AVX2 kernels of
// matmul_avx2_k.cc with 512-bit registers, so one vpmaddubsw/vpmaddwd pair covers 64 elements (two
// sub-block halves side by side) instead of 32. Everything up to the per-super-block f32 step of vec_dot.h
// is exact integer arithmetic, whose order does not matter, and the f32 step is the same scalar code, so
// the results are bit-identical to the AVX2 and scalar kernels.
#if defined(__x86_64__)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wuninitialized reports once inlined.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "kernels/avx2_util.h"
#include "kernels/matmul_kernels.h"
#include "kernels/quant_blocks.h"

#define LLAMAY_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define LLAMAY_AVX512_INLINE \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c"), always_inline)) inline

namespace llamay::kernels {
namespace {

using avx2::F16;
using avx2::HsumI32;
using avx2::Load256;

// Two 256-bit halves in one register.
LLAMAY_AVX512_INLINE __m512i Join(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

LLAMAY_AVX512_INLINE __m512i Load512(const void* p) { return _mm512_loadu_si512(p); }

// Q4_K (kFive = false) and Q5_K (kFive = true). Chunk c of 64 elements holds sub-block 2c in the low
// nibbles of qs[32c..32c+31] and sub-block 2c+1 in their high nibbles: one register [low | high] against
// the 64 activations of the chunk, with the two sub-block scales in its two halves.
template <typename Block, bool kFive, int kR, int kT>
struct K45Kernel {
  static constexpr int kRows = kR, kTokens = kT, kRowsDecode = 2;

  template <int R, int T>
  LLAMAY_AVX512 static void Run(const uint8_t* w, size_t ws, const uint8_t* act, size_t as, int64_t n_in,
                                float* y, size_t ys) {
    const int64_t nb = n_in / kQkK;
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    float acc[R][T] = {};
    for (int64_t b = 0; b < nb; ++b) {
      const Block* blk[R];
      uint8_t sc[R][8], mn[R][8];
      __m256i mins16[R];  // each sub-block min twice: lines up with the 16 bsums of groups of 16
      for (int r = 0; r < R; ++r) {
        blk[r] = reinterpret_cast<const Block*>(w + r * ws) + b;
        for (int s = 0; s < 8; ++s) UnpackScaleMinK4(s, blk[r]->scales, &sc[r][s], &mn[r][s]);
        const __m128i m8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn[r]));
        mins16[r] = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
      }
      __m512i isum[R][T];
      for (int r = 0; r < R; ++r)
        for (int t = 0; t < T; ++t) isum[r][t] = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        __m512i q[R], s[R];
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const __m256i v = Load256(blk[r]->qs + 32 * c);
          __m256i lo = _mm256_and_si256(v, low4);
          __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
          if constexpr (kFive) {
            const __m256i qh = Load256(blk[r]->qh);
            const __m256i one = _mm256_set1_epi8(1);
            lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), one), 4));
            hi = _mm256_or_si256(hi,
                                 _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), one), 4));
          }
          q[r] = Join(lo, hi);
          s[r] = Join(_mm256_set1_epi16(sc[r][2 * c]), _mm256_set1_epi16(sc[r][2 * c + 1]));
        }
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const BlockQ8_K* ab = reinterpret_cast<const BlockQ8_K*>(act + t * as) + b;
          const __m512i a = Load512(ab->qs + 64 * c);
#pragma GCC unroll 4
          for (int r = 0; r < R; ++r)
            isum[r][t] = _mm512_add_epi32(isum[r][t], _mm512_madd_epi16(_mm512_maddubs_epi16(q[r], a), s[r]));
        }
      }
      for (int t = 0; t < T; ++t) {
        const BlockQ8_K* ab = reinterpret_cast<const BlockQ8_K*>(act + t * as) + b;
        const __m256i bsums = Load256(ab->bsums);
        for (int r = 0; r < R; ++r) {
          const int32_t sumi = _mm512_reduce_add_epi32(isum[r][t]);
          const int32_t smin = HsumI32(_mm256_madd_epi16(bsums, mins16[r]));
          const float dd = F16(blk[r]->d) * ab->d, dm = F16(blk[r]->dmin) * ab->d;
          acc[r][t] = acc[r][t] + (static_cast<float>(sumi) * dd - static_cast<float>(smin) * dm);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) y[t * ys + r] = acc[r][t];
  }
};

// Q6_K: per half h (128 elements), the four 32-element quarters of matmul_avx2_k.cc joined in pairs.
struct Q6KKernel {
  static constexpr int kRows = 1, kTokens = 4, kRowsDecode = 2;

  template <int R, int T>
  LLAMAY_AVX512 static void Run(const uint8_t* w, size_t ws, const uint8_t* act, size_t as, int64_t n_in,
                                float* y, size_t ys) {
    const int64_t nb = n_in / kQkK;
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    float acc[R][T] = {};
    for (int64_t b = 0; b < nb; ++b) {
      const BlockQ6_K* blk[R];
      __m256i scales16[R];
      __m512i isum[R][T];
      for (int r = 0; r < R; ++r) {
        blk[r] = reinterpret_cast<const BlockQ6_K*>(w + r * ws) + b;
        scales16[r] = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[r]->scales)));
        for (int t = 0; t < T; ++t) isum[r][t] = _mm512_setzero_si512();
      }
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {  // 128 elements: ql[64h..64h+63], qh[32h..32h+31]
        __m512i q[R][2], sv[R][2];
        for (int r = 0; r < R; ++r) {
          const __m256i ql0 = Load256(blk[r]->ql + 64 * h), ql1 = Load256(blk[r]->ql + 64 * h + 32);
          const __m256i qh = Load256(blk[r]->qh + 32 * h);
          const __m256i q0 = _mm256_or_si256(_mm256_and_si256(ql0, low4),
                                             _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(0x03)), 4));
          const __m256i q1 = _mm256_or_si256(_mm256_and_si256(ql1, low4),
                                             _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(0x0C)), 2));
          const __m256i q2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                                             _mm256_and_si256(qh, _mm256_set1_epi8(0x30)));
          const __m256i q3 = _mm256_or_si256(
              _mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
              _mm256_srli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(static_cast<char>(0xC0))), 2));
          q[r][0] = Join(q0, q1);
          q[r][1] = Join(q2, q3);
          // Quarter k spans sub-blocks 8h+2k and 8h+2k+1: a scale per 128-bit lane.
          const int8_t* s = blk[r]->scales + 8 * h;
          for (int j = 0; j < 2; ++j)
            sv[r][j] = _mm512_inserti64x4(
                _mm512_castsi256_si512(_mm256_setr_m128i(_mm_set1_epi16(s[4 * j]), _mm_set1_epi16(s[4 * j + 1]))),
                _mm256_setr_m128i(_mm_set1_epi16(s[4 * j + 2]), _mm_set1_epi16(s[4 * j + 3])), 1);
        }
        for (int t = 0; t < T; ++t) {
          const BlockQ8_K* ab = reinterpret_cast<const BlockQ8_K*>(act + t * as) + b;
#pragma GCC unroll 2
          for (int j = 0; j < 2; ++j) {
            const __m512i a = Load512(ab->qs + 128 * h + 64 * j);
            for (int r = 0; r < R; ++r)
              isum[r][t] =
                  _mm512_add_epi32(isum[r][t], _mm512_madd_epi16(_mm512_maddubs_epi16(q[r][j], a), sv[r][j]));
          }
        }
      }
      for (int t = 0; t < T; ++t) {
        const BlockQ8_K* ab = reinterpret_cast<const BlockQ8_K*>(act + t * as) + b;
        const __m256i bsums = Load256(ab->bsums);
        for (int r = 0; r < R; ++r) {
          // q is stored with +32: subtract 32 * sum over sub-blocks of scale * (sum of activations).
          const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(bsums, scales16[r]), 5);
          const int32_t sumi = _mm512_reduce_add_epi32(isum[r][t]) - HsumI32(off);
          acc[r][t] = acc[r][t] + static_cast<float>(sumi) * (F16(blk[r]->d) * ab->d);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) y[t * ys + r] = acc[r][t];
  }
};

}  // namespace

LLAMAY_AVX512 void TileAvx512Q4_K(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                                  int64_t tokens, int64_t n_in, float* y, size_t ys) {
  avx2::RunTile<K45Kernel<BlockQ4_K, false, 1, 4>>(w, ws, rows, act, as, tokens, n_in, y, ys);
}
LLAMAY_AVX512 void TileAvx512Q5_K(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                                  int64_t tokens, int64_t n_in, float* y, size_t ys) {
  avx2::RunTile<K45Kernel<BlockQ5_K, true, 1, 4>>(w, ws, rows, act, as, tokens, n_in, y, ys);
}
LLAMAY_AVX512 void TileAvx512Q6_K(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                                  int64_t tokens, int64_t n_in, float* y, size_t ys) {
  avx2::RunTile<Q6KKernel>(w, ws, rows, act, as, tokens, n_in, y, ys);
}

}  // namespace llamay::kernels
#endif  // __x86_64__
