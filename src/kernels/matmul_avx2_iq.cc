// AVX2 tile kernel for IQ4_XS against Q8_K activations (IQ4_NL and MXFP4, the 32-block lookup-table types,
// are in matmul_avx2_q.cc). Per sub-block of 32 and row, the nibbles are unpacked in element order (low
// nibbles, then high: elements 0..15, 16..31) and replaced by their grid values with one vpshufb (the grid in
// both 128-bit lanes); against the activation's 32 bytes, vpmaddubsw of |w| with a carrying w's sign gives
// sixteen exact int16 pair sums (|pair| <= 2 * 127 * 127 < 2^15), and one vpmaddwd against the sub-block's
// signed scale ls - 32 (an int16 in every word) gives (ls - 32) x pairs in int32, accumulated over the
// super-block (|sum| < 2^28). So everything up to the per-super-block f32 step of vec_dot.h is exact; that
// step, acc + float(sumi) * (d * d_a), is the reference's (reference/dot_ref.cc, DotIQ4_XS).
// Tiling (avx2_util.h RunTile): one row x up to four tokens, two rows for a single token (decode).
// The AVX-512 level runs it for one token (decode); with several tokens it has its own (matmul_avx512_k.cc).
#if defined(__x86_64__)
#include <cstddef>

#include "kernels/avx2_util.h"
#include "kernels/matmul_kernels.h"
#include "kernels/quant_blocks.h"

namespace llamay::kernels {
namespace {

using avx2::F16;
using avx2::HsumI32;
using avx2::Load256;


struct IQ4XSKernel {
  static constexpr int kRows = 1, kTokens = 4, kRowsDecode = 2;

  template <int R, int T>
  LLAMAY_AVX2 static void Run(const uint8_t* w, size_t ws, const uint8_t* act, size_t as, int64_t n_in,
                              float* y, size_t ys) {
    const int64_t nb = n_in / kQkK;
    const __m256i grid =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4NlValues)));
    float acc[R][T] = {};
    for (int64_t b = 0; b < nb; ++b) {
      const BlockIQ4_XS* blk[R];
      for (int r = 0; r < R; ++r) {
        blk[r] = reinterpret_cast<const BlockIQ4_XS*>(w + r * ws) + b;
        avx2::PrefetchBlock<sizeof(BlockIQ4_XS)>(blk[r]);
      }
      const BlockQ8_K* ab[T];
      for (int t = 0; t < T; ++t) ab[t] = reinterpret_cast<const BlockQ8_K*>(act + t * as) + b;
      __m256i isum[R][T];
      for (int r = 0; r < R; ++r)
        for (int t = 0; t < T; ++t) isum[r][t] = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int s = 0; s < 8; ++s) {
        __m256i wv[R], wabs[R], sc[R];
        for (int r = 0; r < R; ++r) {
          wv[r] = _mm256_shuffle_epi8(grid, avx2::UnpackNibbles16(blk[r]->qs + 16 * s));
          wabs[r] = _mm256_abs_epi8(wv[r]);
          sc[r] = _mm256_set1_epi16(static_cast<int16_t>(ScaleIQ4_XS(*blk[r], s) - 32));
        }
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const __m256i a = Load256(ab[t]->qs + 32 * s);
          for (int r = 0; r < R; ++r) {
            const __m256i p16 = _mm256_maddubs_epi16(wabs[r], _mm256_sign_epi8(a, wv[r]));
            isum[r][t] = _mm256_add_epi32(isum[r][t], _mm256_madd_epi16(p16, sc[r]));
          }
        }
      }
      for (int r = 0; r < R; ++r) {
        const float dw = F16(blk[r]->d);
        for (int t = 0; t < T; ++t)
          acc[r][t] = acc[r][t] + static_cast<float>(HsumI32(isum[r][t])) * (dw * ab[t]->d);
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) y[t * ys + r] = acc[r][t];
  }
};

}  // namespace

LLAMAY_AVX2 void TileAvx2IQ4_XS(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                                int64_t tokens, int64_t n_in, float* y, size_t ys) {
  avx2::RunTile<IQ4XSKernel>(w, ws, rows, act, as, tokens, n_in, y, ys);
}

}  // namespace llamay::kernels
#endif  // __x86_64__
