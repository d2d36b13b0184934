// AVX-512 VNNI tile kernel for Q4_K weights against Q8_K activations with several tokens (prefill), bit-
// identical to the AVX2 and scalar kernels (vec_dot.h: exact int32 sums per super-block, then the f32 step).
//
// A 512-bit register holds two tokens side by side (256 bits each, as the AVX2 kernel's one register): the
// weight nibbles of a 64-element chunk are broadcast to both halves, the two tokens' activations sit side
// by side. vpmaddubsw gives the int16 pair sums, and one vpdpwssd multiplies them by the sub-block scale
// and adds them to the int32 accumulator (the AVX2 kernel needs vpmaddwd and vpaddd for that): half the
// instructions per (row, token) pair, and the accumulator never leaves the exact integers. Each half is
// reduced and scaled per super-block exactly as the AVX2 kernel does. One token (decode) stays on the AVX2
// kernel, which is bound by reading the weights.
#if defined(__x86_64__)
#include "kernels/avx2_util.h"
#include "kernels/avx512_util.h"
#include "kernels/matmul_kernels.h"
#include "kernels/quant_blocks.h"


namespace llamay::kernels {
namespace {

using avx2::F16;

LLAMAY_AVX512_INLINE __m512i WordBroadcastMask512(int j) {
  return _mm512_set1_epi16(static_cast<short>((2 * j) | ((2 * j + 1) << 8)));
}

LLAMAY_AVX512_INLINE __m512i Pair256(const void* lo, const void* hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(static_cast<const __m256i*>(lo))),
                            _mm256_loadu_si256(static_cast<const __m256i*>(hi)), 1);
}

// The int32 sums of each 256-bit half of four registers, v_rp holding tokens 2p (low half) and 2p + 1
// (high half) of row r, as one vector in the order kSumOrder: (r, t) = (0,0) (0,2) (1,0) (1,2) (0,1) (0,3)
// (1,1) (1,3).
LLAMAY_AVX512_INLINE __m256i Sums8(__m512i v00, __m512i v01, __m512i v10, __m512i v11) {
  // Per 128-bit lane: pair sums of v00/v01 interleaved, then of all four: [v00, v01, v10, v11] partials.
  const __m512i x0 = _mm512_add_epi32(_mm512_unpacklo_epi32(v00, v01), _mm512_unpackhi_epi32(v00, v01));
  const __m512i x1 = _mm512_add_epi32(_mm512_unpacklo_epi32(v10, v11), _mm512_unpackhi_epi32(v10, v11));
  const __m512i y = _mm512_add_epi32(_mm512_unpacklo_epi64(x0, x1), _mm512_unpackhi_epi64(x0, x1));
  // Lanes 0+1 are the low halves (even tokens), lanes 2+3 the high halves (odd tokens).
  const __m512i z = _mm512_add_epi32(y, _mm512_shuffle_i32x4(y, y, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm512_castsi512_si256(_mm512_shuffle_i32x4(z, z, _MM_SHUFFLE(2, 0, 2, 0)));  // lanes 0 and 2
}
constexpr int kSumRow[8] = {0, 0, 1, 1, 0, 0, 1, 1};
constexpr int kSumToken[8] = {0, 2, 0, 2, 1, 3, 1, 3};

struct Q4KAvx512Kernel {
  static constexpr int kRows = 2, kTokens = 4, kRowsDecode = 2;

  // T tokens as (T + 1) / 2 pairs; an odd last token is paired with itself and its copy dropped.
  template <int R, int T>
  LLAMAY_AVX512 static void Run(const uint8_t* w, size_t ws, const uint8_t* act, size_t as, int64_t n_in,
                                float* y, size_t ys) {
    constexpr int P = (T + 1) / 2;
    const int64_t nb = n_in / kQkK;
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    float acc[R][T] = {};
    __m256 acc8 = _mm256_setzero_ps();  // R == 2 && T == 4: the eight pairs in the order of Sums8
    const BlockQ8_K* ab[2 * P];
    for (int i = 0; i < 2 * P; ++i) ab[i] = reinterpret_cast<const BlockQ8_K*>(act + (i < T ? i : T - 1) * as);
    for (int64_t b = 0; b < nb; ++b) {
      const BlockQ4_K* blk[R];
      __m512i scales16[R];  // the 8 sub-block scales as int16, in every 128-bit lane
      __m256i mins16[R];    // each sub-block min twice: lines up with the 16 bsums of groups of 16
      for (int r = 0; r < R; ++r) {
        blk[r] = reinterpret_cast<const BlockQ4_K*>(w + r * ws) + b;
        uint64_t sc8, mn8;
        UnpackScalesMinsK4(blk[r]->scales, &sc8, &mn8);
        const __m128i m8 = _mm_cvtsi64_si128(static_cast<int64_t>(mn8));
        mins16[r] = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
        scales16[r] = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(sc8))));
      }
      __m512i isum[R][P];
      for (int r = 0; r < R; ++r)
        for (int p = 0; p < P; ++p) isum[r][p] = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {  // chunk of 64 elements: sub-blocks 2c (low nibbles), 2c+1 (high)
        __m512i lo[R], hi[R], slo[R], shi[R];
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const __m512i v = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[r]->qs + 32 * c)));
          lo[r] = _mm512_and_si512(v, low4);
          hi[r] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
          slo[r] = _mm512_shuffle_epi8(scales16[r], WordBroadcastMask512(2 * c));
          shi[r] = _mm512_shuffle_epi8(scales16[r], WordBroadcastMask512(2 * c + 1));
        }
#pragma GCC unroll 4
        for (int p = 0; p < P; ++p) {
          const __m512i a_lo = Pair256(ab[2 * p][b].qs + 64 * c, ab[2 * p + 1][b].qs + 64 * c);
          const __m512i a_hi = Pair256(ab[2 * p][b].qs + 64 * c + 32, ab[2 * p + 1][b].qs + 64 * c + 32);
#pragma GCC unroll 4
          for (int r = 0; r < R; ++r) {
            isum[r][p] = _mm512_dpwssd_epi32(isum[r][p], _mm512_maddubs_epi16(lo[r], a_lo), slo[r]);
            isum[r][p] = _mm512_dpwssd_epi32(isum[r][p], _mm512_maddubs_epi16(hi[r], a_hi), shi[r]);
          }
        }
      }
      if constexpr (R == 2 && T == 4) {
        // All eight (row, token) pairs at once, lane k = (kSumRow[k], kSumToken[k]): a transposing reduction
        // of the four accumulators, the same for the mins against the bsums (two tokens per register), and
        // the f32 step of vec_dot.h lane by lane (the same operations in the same order as one pair alone).
        __m512i mv[2][2];
        for (int p = 0; p < 2; ++p) {
          const __m512i bs = Pair256(ab[2 * p][b].bsums, ab[2 * p + 1][b].bsums);
          for (int r = 0; r < 2; ++r)
            mv[r][p] = _mm512_madd_epi16(bs, _mm512_inserti64x4(_mm512_castsi256_si512(mins16[r]), mins16[r], 1));
        }
        const __m256 sumi = _mm256_cvtepi32_ps(Sums8(isum[0][0], isum[0][1], isum[1][0], isum[1][1]));
        const __m256 smin = _mm256_cvtepi32_ps(Sums8(mv[0][0], mv[0][1], mv[1][0], mv[1][1]));
        const __m256 ad = _mm256_setr_ps(ab[0][b].d, ab[2][b].d, ab[0][b].d, ab[2][b].d, ab[1][b].d, ab[3][b].d,
                                         ab[1][b].d, ab[3][b].d);
        const __m256 wd = _mm256_cvtph_ps(_mm_setr_epi16(
            static_cast<short>(blk[0]->d), static_cast<short>(blk[0]->d), static_cast<short>(blk[1]->d),
            static_cast<short>(blk[1]->d), static_cast<short>(blk[0]->d), static_cast<short>(blk[0]->d),
            static_cast<short>(blk[1]->d), static_cast<short>(blk[1]->d)));
        const __m256 wm = _mm256_cvtph_ps(_mm_setr_epi16(
            static_cast<short>(blk[0]->dmin), static_cast<short>(blk[0]->dmin), static_cast<short>(blk[1]->dmin),
            static_cast<short>(blk[1]->dmin), static_cast<short>(blk[0]->dmin), static_cast<short>(blk[0]->dmin),
            static_cast<short>(blk[1]->dmin), static_cast<short>(blk[1]->dmin)));
        const __m256 dd = _mm256_mul_ps(wd, ad), dm = _mm256_mul_ps(wm, ad);
        acc8 = _mm256_add_ps(acc8, _mm256_sub_ps(_mm256_mul_ps(sumi, dd), _mm256_mul_ps(smin, dm)));
        continue;
      }
      for (int t = 0; t < T; ++t) {
        const BlockQ8_K& a = ab[t][b];
        const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums));
        for (int r = 0; r < R; ++r) {
          const __m512i v = isum[r][t / 2];
          const __m256i half = t % 2 == 0 ? _mm512_castsi512_si256(v) : _mm512_extracti64x4_epi64(v, 1);
          const __m256i h = _mm256_hadd_epi32(half, _mm256_madd_epi16(bsums, mins16[r]));
          __m128i s = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
          s = _mm_hadd_epi32(s, s);
          const int32_t sumi = _mm_cvtsi128_si32(s), smin = _mm_extract_epi32(s, 1);
          const float dd = F16(blk[r]->d) * a.d, dm = F16(blk[r]->dmin) * a.d;
          acc[r][t] = acc[r][t] + (static_cast<float>(sumi) * dd - static_cast<float>(smin) * dm);
        }
      }
    }
    if constexpr (R == 2 && T == 4) {
      alignas(32) float l[8];
      _mm256_store_ps(l, acc8);
      for (int k = 0; k < 8; ++k) acc[kSumRow[k]][kSumToken[k]] = l[k];
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) y[t * ys + r] = acc[r][t];
  }
};

}  // namespace

LLAMAY_AVX512 void TileAvx512Q4_K(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                                  int64_t tokens, int64_t n_in, float* y, size_t ys) {
  if (tokens == 1) return TileAvx2Q4_K(w, ws, rows, act, as, tokens, n_in, y, ys);
  avx2::RunTile<Q4KAvx512Kernel>(w, ws, rows, act, as, tokens, n_in, y, ys);
}

}  // namespace llamay::kernels
#endif  // __x86_64__
