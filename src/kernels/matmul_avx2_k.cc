// AVX2 tile kernels for the K-quants (Q4_K, Q5_K; Q6_K, Q3_K and Q2_K at the end) against Q8_K
// activations. K45Kernel (Q4_K and Q5_K with one token) and K16Kernel (Q6_K, Q3_K, Q2_K) keep an int32
// vector of scaled partial sums per (row, token) pair for the current super-block; the sub-block scales are
// applied with vpmaddwd, so everything up to the per-super-block f32 step of vec_dot.h is exact. Q4_K and
// Q5_K with several tokens put eight rows in the lanes of a register instead (TilePackedK45 below).
#if defined(__x86_64__)
#include <cstddef>
#include <cstring>
#include <vector>

#include "kernels/avx2_util.h"
#include "kernels/matmul_kernels.h"
#include "kernels/quant_blocks.h"

namespace llamay::kernels {
namespace {

using avx2::F16;
using avx2::HsumI32;
using avx2::Load256;

using avx2::PrefetchBlock;

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
    if constexpr (T == 1 && R == 2) {
      RunDecode2(w, ws, act, n_in, y);
      return;
    }
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
        scales16[r] =
            _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(sc8))));
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

  // One token, two rows: the products as above, and per super-block the two rows' sums, mins and f32 steps
  // done together, where a horizontal sum and a scalar f32 step per row cost about as much as a sub-block's
  // products. The mins are one vpmaddwd of both rows' mins against the activation's eight sub-block sums;
  // the f32 step runs in two lanes in the reference's order (mul, mul, mul, sub, add; no FMA). Two rows,
  // not four: four rows at once computed 17% faster in cache but streamed 10-20% slower (four streams) on a
  // Zen 2 (docs/benchmarks.md, session 19); with RunTile's rows apart (session 20) four read the same or up
  // to 8% slower at 2 threads and 3-5% faster at one.
  LLAMAY_AVX2 static void RunDecode2(const uint8_t* w, size_t ws, const uint8_t* act, int64_t n_in,
                                     float* y) {
    const int64_t nb = n_in / kQkK;
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    // Bytes of (d, dmin) f16 pairs in dwords -> the d values, then the dmin values.
    const __m128i split_d = _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
    __m128 acc = _mm_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const BlockQ8_K* ab = reinterpret_cast<const BlockQ8_K*>(act) + b;
      const Block* blk[2];
      __m256i sc16[2], isum[2];
      uint64_t mn8[2];
      uint32_t dpair[2];  // the block's first four bytes: d, dmin
      for (int r = 0; r < 2; ++r) {
        blk[r] = reinterpret_cast<const Block*>(w + r * ws) + b;
        PrefetchBlock<sizeof(Block)>(blk[r]);
        uint64_t sc8;
        UnpackScalesMinsK4(blk[r]->scales, &sc8, &mn8[r]);
        sc16[r] =
            _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(sc8))));
        std::memcpy(&dpair[r], blk[r], sizeof(uint32_t));
        isum[r] = _mm256_setzero_si256();
      }
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {  // chunk of 64 elements: sub-blocks 2c (low nibbles), 2c+1 (high)
        const __m256i a_lo = Load256(ab->qs + 64 * c), a_hi = Load256(ab->qs + 64 * c + 32);
        for (int r = 0; r < 2; ++r) {
          const __m256i v = Load256(blk[r]->qs + 32 * c);
          __m256i lo = _mm256_and_si256(v, low4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
          if constexpr (kFive) {
            const __m256i qh = Load256(blk[r]->qh);
            const __m256i one = _mm256_set1_epi8(1);
            lo = _mm256_or_si256(lo,
                                 _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), one), 4));
            hi = _mm256_or_si256(
                hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), one), 4));
          }
          const __m256i p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, a_lo),
                                                 _mm256_shuffle_epi8(sc16[r], WordBroadcastMask(2 * c)));
          const __m256i p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, a_hi),
                                                 _mm256_shuffle_epi8(sc16[r], WordBroadcastMask(2 * c + 1)));
          isum[r] = _mm256_add_epi32(isum[r], _mm256_add_epi32(p_lo, p_hi));
        }
      }
      // The activation's sub-block sums (bsums in pairs; |sum| <= 32 x 128 fits int16), in both lanes.
      const __m256i s32 = _mm256_madd_epi16(Load256(ab->bsums), _mm256_set1_epi16(1));
      const __m256i sub = _mm256_broadcastsi128_si256(
          _mm_packs_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1)));
      // smin: row 0's mins in the low lane, row 1's in the high one, four int32 partial sums each;
      // [r0 x4 | r1 x4] after two vphaddd, then [r0 r1 r0 r1].
      const __m256i m01 = _mm256_madd_epi16(
          _mm256_cvtepu8_epi16(_mm_set_epi64x(static_cast<int64_t>(mn8[1]), static_cast<int64_t>(mn8[0]))),
          sub);
      const __m256i g = _mm256_hadd_epi32(m01, m01);
      const __m256i g2 = _mm256_hadd_epi32(g, g);
      const __m128i smin = _mm_unpacklo_epi32(_mm256_castsi256_si128(g2), _mm256_extracti128_si256(g2, 1));
      // sumi: [r0 r1 r0 r1] partial sums per lane after two vphaddd, then the lanes added.
      const __m256i h = _mm256_hadd_epi32(isum[0], isum[1]);
      const __m256i h2 = _mm256_hadd_epi32(h, h);
      const __m128i sumi = _mm_add_epi32(_mm256_castsi256_si128(h2), _mm256_extracti128_si256(h2, 1));
      // [d_w x d_a | dmin_w x d_a] x [sumi | smin] (lanes 0 and 1 of each half), then acc + (lo - hi).
      const __m128i dpairs =
          _mm_cvtsi64_si128(static_cast<int64_t>(dpair[0] | (static_cast<uint64_t>(dpair[1]) << 32)));
      const __m256 dd =
          _mm256_mul_ps(_mm256_cvtph_ps(_mm_shuffle_epi8(dpairs, split_d)), _mm256_set1_ps(ab->d));
      const __m256 prod = _mm256_mul_ps(
          _mm256_cvtepi32_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(sumi), smin, 1)), dd);
      acc = _mm_add_ps(acc, _mm_sub_ps(_mm256_castps256_ps128(prod), _mm256_extractf128_ps(prod, 1)));
    }
    _mm_storel_pi(reinterpret_cast<__m64*>(y), acc);
  }
};

// ---- Q4_K / Q5_K with several tokens: eight rows' weights transposed once per tile -----------------------
// The idea of TilePacked in matmul_avx2_q.cc: per group of 8 rows (row r in 32-bit lane r) and super-block,
// the weights are unpacked and transposed once per tile, so that register j of sub-block s holds elements
// 4j..4j+3 of sub-block s of row r in lane r (Q5_K: with the fifth bit). Per token and sub-block, eight
// vpmaddubsw against a broadcast of activation bytes 32s+4j..32s+4j+3 add up in int16 (8 x 2 x 15 x 128 =
// 30720; Q5_K, values up to 31, four at a time: 31744), and one vpmaddwd against the rows' scale sc_s (an
// int16 pair per lane) gives sc_s x (sub-block sum) in int32 for the eight rows; smin is four vpmaddwd of the
// rows' mins (pairs mn_2k, mn_2k+1) against the token's bsum pairs. No horizontal sums: the f32 step of
// vec_dot.h then runs for eight rows at once, in the reference's order (mul, mul, sub, add; no FMA).
// One token (decode) stays on K45Kernel above: it streams the weights with prefetching and has nothing to
// amortise a transposition over.

// The 8x8 dword transposition of avx2_util.h's Transpose8x8Epi32 for rows in memory: its last stage
// (the 128-bit halves) done by the loads.
LLAMAY_AVX2_INLINE __m256i Load2x128(const uint8_t* lo, const uint8_t* hi) {
  return _mm256_inserti128_si256(
      _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(lo))),
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(hi)), 1);
}
// x[k]: dwords 0..3 of row k (low half), of row k + 4 (high half) -> out[i]: dword i of rows 0..7.
LLAMAY_AVX2_INLINE void Transpose4x4Halves(const __m256i* x, __m256i* out) {
  const __m256i t0 = _mm256_unpacklo_epi32(x[0], x[1]), t1 = _mm256_unpackhi_epi32(x[0], x[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(x[2], x[3]), t3 = _mm256_unpackhi_epi32(x[2], x[3]);
  out[0] = _mm256_unpacklo_epi64(t0, t2);
  out[1] = _mm256_unpackhi_epi64(t0, t2);
  out[2] = _mm256_unpacklo_epi64(t1, t3);
  out[3] = _mm256_unpackhi_epi64(t1, t3);
}
// p[r] + off: 32 bytes of row r -> out[j]: dword j of rows 0..7 (row r in lane r).
LLAMAY_AVX2_INLINE void LoadTransposed8(const uint8_t* const* p, size_t off, __m256i* out) {
  __m256i x[4];
  for (int k = 0; k < 4; ++k) x[k] = Load2x128(p[k] + off, p[k + 4] + off);
  Transpose4x4Halves(x, out);
  for (int k = 0; k < 4; ++k) x[k] = Load2x128(p[k] + off + 16, p[k + 4] + off + 16);
  Transpose4x4Halves(x, out + 4);
}

template <typename Block, bool kFive>
struct alignas(32) PackedK45 {
  __m256i q[8][8];  // sub-block s, register j: elements 4j..4j+3 of sub-block s of row r in lane r
  __m256i sc[8];    // sub-block s: lane r = sc_s of row r, twice, as int16
  __m256i mn[4];    // register k: lane r = (mn_2k, mn_2k+1) of row r as int16
  __m256 d, dmin;   // lane r: row r's f16 d and dmin, converted
};

template <typename Block, bool kFive>
LLAMAY_AVX2_INLINE void PackK45(const uint8_t* const* w, int64_t b, PackedK45<Block, kFive>* out) {
  const uint8_t* blk[8];
  for (int r = 0; r < 8; ++r) blk[r] = w[r] + b * sizeof(Block);
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  __m256i qh[8];
  if constexpr (kFive) LoadTransposed8(blk, offsetof(Block, qh), qh);
  for (int c = 0; c < 4; ++c) {
    __m256i raw[8];
    LoadTransposed8(blk, offsetof(Block, qs) + 32 * c, raw);
    for (int j = 0; j < 8; ++j) {
      __m256i lo = _mm256_and_si256(raw[j], low4), hi = _mm256_and_si256(_mm256_srli_epi16(raw[j], 4), low4);
      if constexpr (kFive) {
        // Bit s of each qh byte to bit 4 (shifts of at most 4 keep bit 4 within its byte).
        const __m256i bit4 = _mm256_set1_epi8(0x10);
        const int s = 2 * c;
        lo = _mm256_or_si256(
            lo, _mm256_and_si256(s <= 4 ? _mm256_slli_epi16(qh[j], 4 - s) : _mm256_srli_epi16(qh[j], s - 4),
                                 bit4));
        hi = _mm256_or_si256(
            hi, _mm256_and_si256(
                    s + 1 <= 4 ? _mm256_slli_epi16(qh[j], 3 - s) : _mm256_srli_epi16(qh[j], s - 3), bit4));
      }
      out->q[2 * c][j] = lo;
      out->q[2 * c + 1][j] = hi;
    }
  }
  // Bytes 0..15 of each block: (d, dmin), then the scale words a, b, c of UnpackScalesMinsK4.
  __m256i x[4], f[4];
  for (int k = 0; k < 4; ++k) x[k] = Load2x128(blk[k], blk[k + 4]);
  Transpose4x4Halves(x, f);
  const __m256i m6 = _mm256_set1_epi8(0x3F), m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
  const __m256i sc_lo = _mm256_and_si256(f[1], m6), mn_lo = _mm256_and_si256(f[2], m6);
  const __m256i sc_hi =
      _mm256_or_si256(_mm256_and_si256(f[3], m4), _mm256_and_si256(_mm256_srli_epi32(f[1], 2), m30));
  const __m256i mn_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(f[3], 4), m4),
                                        _mm256_and_si256(_mm256_srli_epi32(f[2], 2), m30));
  for (int s = 0; s < 8; ++s) {
    const char i = static_cast<char>(s & 3), z = static_cast<char>(0x80);
    const __m256i mask =
        _mm256_setr_epi8(i, z, i, z, i + 4, z, i + 4, z, i + 8, z, i + 8, z, i + 12, z, i + 12, z, i, z, i, z,
                         i + 4, z, i + 4, z, i + 8, z, i + 8, z, i + 12, z, i + 12, z);
    out->sc[s] = _mm256_shuffle_epi8(s < 4 ? sc_lo : sc_hi, mask);
  }
  for (int k = 0; k < 4; ++k) {
    const char i = static_cast<char>(2 * (k & 1)), i1 = static_cast<char>(i + 1), z = static_cast<char>(0x80);
    const __m256i mask =
        _mm256_setr_epi8(i, z, i1, z, i + 4, z, i1 + 4, z, i + 8, z, i1 + 8, z, i + 12, z, i1 + 12, z,  //
                         i, z, i1, z, i + 4, z, i1 + 4, z, i + 8, z, i1 + 8, z, i + 12, z, i1 + 12, z);
    out->mn[k] = _mm256_shuffle_epi8(k < 2 ? mn_lo : mn_hi, mask);
  }
  // f[0] lane r = d | dmin << 16: per half, the d words, then the dmin words; then d of rows 0..7 in the low
  // 128 bits, dmin in the high.
  const __m256i words =
      _mm256_shuffle_epi8(f[0], _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,  //
                                                 0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15));
  const __m256i dd = _mm256_permute4x64_epi64(words, _MM_SHUFFLE(3, 1, 2, 0));
  out->d = _mm256_cvtph_ps(_mm256_castsi256_si128(dd));
  out->dmin = _mm256_cvtph_ps(_mm256_extracti128_si256(dd, 1));
}

// 8 packed rows x T tokens. bs[t * nb * 4 + 4 * b + k]: token t's bsum sums of sub-blocks 2k, 2k+1 of
// super-block b, as an int16 pair.
template <typename Block, bool kFive, int T>
LLAMAY_AVX2 void RunPackedK45(const PackedK45<Block, kFive>* pk, const uint8_t* act, size_t as,
                              const int32_t* bs, int64_t nb, float* const* y, size_t ys,
                              const uint8_t* ahead) {
  const int8_t* a[T];
  const BlockQ8_K* ab[T];
  for (int t = 0; t < T; ++t) {
    ab[t] = reinterpret_cast<const BlockQ8_K*>(act + t * as);
    a[t] = ab[t]->qs;
  }
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const PackedK45<Block, kFive>& p = pk[b];
    // The next 8 rows, which the next packing reads (the weights may come from memory).
    if (ahead != nullptr) avx2::PrefetchTileShare<sizeof(Block)>(ahead, b);
    __m256i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) {
      const int8_t* as_s[T];
      for (int t = 0; t < T; ++t) as_s[t] = a[t] + b * static_cast<int64_t>(sizeof(BlockQ8_K)) + 32 * s;
      constexpr int kRun = kFive ? 4 : 8;  // registers whose pair sums add up in int16
#pragma GCC unroll 2
      for (int j0 = 0; j0 < 8; j0 += kRun) {
        __m256i s16[T];
#pragma GCC unroll 8
        for (int j = j0; j < j0 + kRun; ++j) {
          const __m256i q = p.q[s][j];
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) {
            const __m256i prod = _mm256_maddubs_epi16(q, avx2::Broadcast4Bytes(as_s[t] + 4 * j));
            s16[t] = j == j0 ? prod : _mm256_add_epi16(s16[t], prod);
            // Keeps the sums as T running chains: GCC would otherwise reassociate them into trees of
            // maddubs results and spill them.
            __asm__("" : "+x"(s16[t]));
          }
        }
        for (int t = 0; t < T; ++t) {
          isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(s16[t], p.sc[s]));
          __asm__("" : "+x"(isum[t]));
        }
      }
    }
    const __m256 d = p.d, dmin = p.dmin;
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const int32_t* bt = bs + t * nb * 4 + 4 * b;
      __m256i smin = _mm256_madd_epi16(p.mn[0], _mm256_set1_epi32(bt[0]));
      for (int k = 1; k < 4; ++k)
        smin = _mm256_add_epi32(smin, _mm256_madd_epi16(p.mn[k], _mm256_set1_epi32(bt[k])));
      const __m256 da = _mm256_set1_ps(ab[t][b].d);
      const __m256 dd = _mm256_mul_ps(d, da), dm = _mm256_mul_ps(dmin, da);
      acc[t] = _mm256_add_ps(acc[t], _mm256_sub_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(isum[t]), dd),
                                                   _mm256_mul_ps(_mm256_cvtepi32_ps(smin), dm)));
    }
  }
  avx2::StoreTile8<T>(acc, y, ys);
}

// Tokens per register tile of the packed kernel (3, 5 and 6 measured the same on 512-1024 x 1024-2816).
constexpr int kPackedTokens = 4;

// RunPackedK45<Block, kFive, n> for 1 <= n <= T.
template <typename Block, bool kFive, int T>
LLAMAY_AVX2_INLINE void RunPackedUpTo(int n, const PackedK45<Block, kFive>* pk, const uint8_t* act, size_t as,
                                      const int32_t* bs, int64_t nb, float* const* y, size_t ys,
                                      const uint8_t* ahead) {
  if constexpr (T > 1) {
    if (n < T) return RunPackedUpTo<Block, kFive, T - 1>(n, pk, act, as, bs, nb, y, ys, ahead);
  }
  RunPackedK45<Block, kFive, T>(pk, act, as, bs, nb, y, ys, ahead);
}

template <typename Block, bool kFive>
LLAMAY_AVX2 void TilePackedK45(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                               int64_t tokens, int64_t n_in, float* y, size_t ys) {
  using Packed = PackedK45<Block, kFive>;
  const int64_t nb = n_in / kQkK;
  thread_local std::vector<Packed> packed;
  thread_local std::vector<int32_t> bsum_pairs;
  if (packed.size() < static_cast<size_t>(nb)) packed.resize(static_cast<size_t>(nb));
  bsum_pairs.resize(static_cast<size_t>(tokens * nb * 4));
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t b = 0; b < nb; ++b) {
      const int16_t* q = reinterpret_cast<const BlockQ8_K*>(act + t * as)[b].bsums;
      for (int k = 0; k < 4; ++k) {
        const int32_t lo = q[4 * k] + q[4 * k + 1], hi = q[4 * k + 2] + q[4 * k + 3];  // |.| <= 4096
        bsum_pairs[static_cast<size_t>(t * nb * 4 + 4 * b + k)] =
            static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint16_t>(lo)) |
                                 (static_cast<uint32_t>(static_cast<uint16_t>(hi)) << 16));
      }
    }
  }
  for (int64_t r = 0; r < rows; r += 8) {
    const avx2::Rows8 g = avx2::RowGroup8(w, ws, rows, r, y);
    const uint8_t* const* wr = g.w;
    float* const* yr = g.y;
    for (int64_t b = 0; b < nb; ++b) PackK45<Block, kFive>(wr, b, &packed[static_cast<size_t>(b)]);
    const uint8_t* pf = r + 8 < rows ? w + (r + 8) * ws : nullptr;  // prefetched during the first token tile
    for (int64_t t = 0; t < tokens;) {
      float* yt[8];
      for (int i = 0; i < 8; ++i) yt[i] = yr[i] != nullptr ? yr[i] + t * ys : nullptr;
      const uint8_t* at = act + t * as;
      const int32_t* bt = bsum_pairs.data() + t * nb * 4;
      if (t > 0) pf = nullptr;
      // Token tiles of at most kPackedTokens, as even as possible (8 tokens: 4 + 4 rather than 6 + 2).
      const int64_t rest = tokens - t, groups = (rest + kPackedTokens - 1) / kPackedTokens;
      const int n = static_cast<int>((rest + groups - 1) / groups);
      RunPackedUpTo<Block, kFive, kPackedTokens>(n, packed.data(), at, as, bt, nb, yt, ys, pf);
      t += n;
    }
  }
}

// ---- Q6_K, Q3_K and Q2_K: 16 sub-blocks of 16 (Q6_K: 6-bit values; Q3_K: 2 bits and a third from hmask) ---
// Per half h of a super-block, register k holds elements 128h + 32k + l (l < 32): for Q3_K and Q2_K bits
// 2k..2k+1 of qs[32h + l] (one load per half), for Q6_K the nibbles of ql and two bits of qh, so that its low
// 128-bit lane is sub-block 8h + 2k and its high lane sub-block 8h + 2k + 1. The values are unsigned for
// vpmaddubsw: Q6_K stores q + 32 in [0, 63] (|pair| <= 2 * 63 * 128, exact in int16) and Q3_K q + 4 in
// [0, 7], and both subtract (32 or 4) * sum of sc_s * bsums[s] at the end (kOffsetShift). One vpmaddwd
// against the sub-block scales per register gives exact int32 partials of sumi; Q2_K's smin is one vpmaddwd
// of the 16 bsums against the 16 mins. The f32 step is vec_dot.h's, in the reference's order. With several
// tokens the AVX-512 level has its own Q3_K and Q2_K kernels (matmul_avx512_k.cc); Q6_K's is this one.
struct Q6KTraits {
  using Block = BlockQ6_K;
  static constexpr bool kHasMin = false;
  static constexpr int kOffsetShift = 5;  // q + 32
  // The 16 int8 scales as int16.
  LLAMAY_AVX2_INLINE static __m256i Scales(const Block& b, __m256i* /*mins*/) {
    return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
  }
  // q + 32 of the four registers of half h: ql[64h..64h+63] (low nibbles, then high) and qh[32h..32h+31]
  // (bits 2k..2k+1 as bits 4-5).
  LLAMAY_AVX2_INLINE static void Unpack(const Block& b, int h, __m256i* q) {
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    const __m256i ql0 = Load256(b.ql + 64 * h), ql1 = Load256(b.ql + 64 * h + 32),
                  qh = Load256(b.qh + 32 * h);
    q[0] = _mm256_or_si256(_mm256_and_si256(ql0, low4),
                           _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(0x03)), 4));
    q[1] = _mm256_or_si256(_mm256_and_si256(ql1, low4),
                           _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(0x0C)), 2));
    q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                           _mm256_and_si256(qh, _mm256_set1_epi8(0x30)));
    q[3] = _mm256_or_si256(
        _mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
        _mm256_srli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(static_cast<char>(0xC0))), 2));
  }
};

struct Q3KTraits {
  using Block = BlockQ3_K;
  static constexpr bool kHasMin = false;
  static constexpr int kOffsetShift = 2;  // q + 4
  // Sub-block s's signed scale (sc_s - 32) in int16 word s.
  LLAMAY_AVX2_INLINE static __m256i Scales(const Block& b, __m256i* /*mins*/) {
    uint32_t words[4];
    UnpackScalesQ3K(b.scales, words);
    const __m128i sc8 =
        _mm_sub_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(words)), _mm_set1_epi8(32));
    return _mm256_cvtepi8_epi16(sc8);
  }
  // q + 4 of the four registers of half h: the third bit (bit 4h + k of hmask[l]) moved to bit 2.
  LLAMAY_AVX2_INLINE static void Unpack(const Block& b, int h, __m256i* q) {
    const __m256i v = Load256(b.qs + 32 * h), hm = Load256(b.hmask);
    const __m256i three = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4);
    for (int k = 0; k < 4; ++k) {
      const int n = 4 * h + k;  // 16-bit shifts of at most 5 keep bit 2 of each byte within its byte
      const __m256i hi =
          _mm256_and_si256(n >= 2 ? _mm256_srli_epi16(hm, n - 2) : _mm256_slli_epi16(hm, 2 - n), four);
      q[k] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 2 * k), three), hi);
    }
  }
};

struct Q2KTraits {
  using Block = BlockQ2_K;
  static constexpr bool kHasMin = true;
  // The 16 scales (low nibbles) and, in *mins, the 16 mins (high nibbles), as int16.
  LLAMAY_AVX2_INLINE static __m256i Scales(const Block& b, __m256i* mins) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)), low4 = _mm_set1_epi8(0x0F);
    *mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(v, 4), low4));
    return _mm256_cvtepu8_epi16(_mm_and_si128(v, low4));
  }
  LLAMAY_AVX2_INLINE static void Unpack(const Block& b, int h, __m256i* q) {
    const __m256i v = Load256(b.qs + 32 * h), three = _mm256_set1_epi8(3);
    for (int k = 0; k < 4; ++k) q[k] = _mm256_and_si256(_mm256_srli_epi16(v, 2 * k), three);
  }
};

template <class Tr>
struct K16Kernel {
  static constexpr int kRows = 1, kTokens = 4, kRowsDecode = 2;

  template <int R, int T>
  LLAMAY_AVX2 static void Run(const uint8_t* w, size_t ws, const uint8_t* act, size_t as, int64_t n_in,
                              float* y, size_t ys) {
    using Block = typename Tr::Block;
    const int64_t nb = n_in / kQkK;
    float acc[R][T] = {};
    for (int64_t b = 0; b < nb; ++b) {
      const Block* blk[R];
      __m256i scales16[R], mins16[R];
      __m256i isum[R][T];
      for (int r = 0; r < R; ++r) {
        blk[r] = reinterpret_cast<const Block*>(w + r * ws) + b;
        PrefetchBlock<sizeof(Block)>(blk[r]);
        scales16[r] = Tr::Scales(*blk[r], &mins16[r]);
        for (int t = 0; t < T; ++t) isum[r][t] = _mm256_setzero_si256();
      }
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        __m256i q[R][4], sv[R][4];
        for (int r = 0; r < R; ++r) {
          Tr::Unpack(*blk[r], h, q[r]);
          // The scales of sub-blocks 8h..8h+7 in both lanes; register k takes words 2k (low lane) and 2k+1.
          // (Two calls: the selector must be a constant expression for clang.)
          const __m256i sh = h == 0 ? _mm256_permute2x128_si256(scales16[r], scales16[r], 0x00)
                                    : _mm256_permute2x128_si256(scales16[r], scales16[r], 0x11);
          for (int k = 0; k < 4; ++k) {
            const __m256i mask =
                _mm256_setr_m128i(_mm_set1_epi16(static_cast<short>((4 * k) | ((4 * k + 1) << 8))),
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
          if constexpr (Tr::kHasMin) {
            int32_t sumi, smin;
            HsumI32x2(isum[r][t], _mm256_madd_epi16(bsums, mins16[r]), &sumi, &smin);
            const float dd = F16(blk[r]->d) * ab->d, dm = F16(blk[r]->dmin) * ab->d;
            acc[r][t] = acc[r][t] + (static_cast<float>(sumi) * dd - static_cast<float>(smin) * dm);
          } else {
            // q is stored with +4 (+32): subtract 4 (32) * sum over sub-blocks of scale * (sum of
            // activations).
            const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(bsums, scales16[r]), Tr::kOffsetShift);
            const int32_t sumi = HsumI32(_mm256_sub_epi32(isum[r][t], off));
            acc[r][t] = acc[r][t] + static_cast<float>(sumi) * (F16(blk[r]->d) * ab->d);
          }
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) y[t * ys + r] = acc[r][t];
  }
};

// ---- Q6_K with several tokens: eight rows' weights transposed once per tile -----------------------------
// TilePackedK45's layout for Q6_K: per group of 8 rows and super-block, Q6KTraits::Unpack's registers (q +
// 32, 32 elements each: register c = 4h + k holds sub-blocks 2c and 2c + 1) are transposed so that register j
// of chunk c holds elements 4j..4j+3 of row r in lane r. Per token and sub-block (registers 0..3 or 4..7 of
// its chunk), two vpmaddubsw pair sums at a time add up in int16 (2 x 2 x 63 x 128 = 32256), and a vpmaddwd
// against the rows' scale (an int16 pair per lane) gives exact int32 partials. The +32 comes off once per
// super-block: 32 x sum over s of sc_s x bsums_s, eight vpmaddwd of the rows' scale pairs against the
// token's bsum pairs. The f32 step is the reference's (acc + float(sumi) x (d x d_a)), for eight rows at
// once.
struct alignas(32) PackedQ6K {
  __m256i q[8][8];   // chunk c, register j: elements 32c + 4j..4j+3 of row r in lane r, as q + 32
  __m256i sc[16];    // sub-block s: lane r = sc_s of row r, twice, as int16
  __m256i pairs[8];  // register k: lane r = (sc_2k, sc_2k+1) of row r as int16
  __m256 d;          // lane r: row r's d
};

LLAMAY_AVX2_INLINE void PackQ6K(const uint8_t* const* w, int64_t b, PackedQ6K* out) {
  const BlockQ6_K* blk[8];
  for (int r = 0; r < 8; ++r) blk[r] = reinterpret_cast<const BlockQ6_K*>(w[r]) + b;
  for (int h = 0; h < 2; ++h) {
    __m256i rows[8][4];
    for (int r = 0; r < 8; ++r) Q6KTraits::Unpack(*blk[r], h, rows[r]);
    for (int k = 0; k < 4; ++k) {
      __m256i v[8];
      for (int r = 0; r < 8; ++r) v[r] = rows[r][k];
      avx2::Transpose8x8Epi32(v);
      for (int j = 0; j < 8; ++j) out->q[4 * h + k][j] = v[j];
    }
  }
  // Row r's 16 scales as int16 are 8 dwords of pairs: transposed, register k holds pair k of every row.
  for (int r = 0; r < 8; ++r)
    out->pairs[r] = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[r]->scales)));
  avx2::Transpose8x8Epi32(out->pairs);
  for (int k = 0; k < 8; ++k) {  // words (0, 0, 2, 2) and (1, 1, 3, 3) of each 64 bits
    out->sc[2 * k] = _mm256_shufflehi_epi16(_mm256_shufflelo_epi16(out->pairs[k], 0xA0), 0xA0);
    out->sc[2 * k + 1] = _mm256_shufflehi_epi16(_mm256_shufflelo_epi16(out->pairs[k], 0xF5), 0xF5);
  }
  out->d = avx2::Gather8F16<sizeof(BlockQ6_K)>(w, b, offsetof(BlockQ6_K, d));
}

// 8 packed rows x T tokens.
template <int T>
LLAMAY_AVX2 void RunPackedQ6K(const PackedQ6K* pk, const uint8_t* act, size_t as, int64_t nb, float* const* y,
                              size_t ys, const uint8_t* ahead) {
  const BlockQ8_K* ab[T];
  for (int t = 0; t < T; ++t) ab[t] = reinterpret_cast<const BlockQ8_K*>(act + t * as);
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const PackedQ6K& p = pk[b];
    if (ahead != nullptr) avx2::PrefetchTileShare<sizeof(BlockQ6_K)>(ahead, b);  // the next 8 rows
    __m256i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
#pragma GCC unroll 4
      for (int j0 = 0; j0 < 8; j0 += 2) {  // registers j0, j0 + 1: half of sub-block 2c + j0 / 4
        __m256i s16[T];
#pragma GCC unroll 2
        for (int j = j0; j < j0 + 2; ++j) {
          const __m256i q = p.q[c][j];
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) {
            const __m256i prod = _mm256_maddubs_epi16(q, avx2::Broadcast4Bytes(ab[t][b].qs + 32 * c + 4 * j));
            s16[t] = j == j0 ? prod : _mm256_add_epi16(s16[t], prod);
          }
        }
        const __m256i sc = p.sc[2 * c + j0 / 4];
        for (int t = 0; t < T; ++t) {
          isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(s16[t], sc));
          __asm__("" : "+x"(isum[t]));  // T running chains, as in RunPackedK45
        }
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      int32_t bsum_pairs[8];
      std::memcpy(bsum_pairs, ab[t][b].bsums, sizeof(bsum_pairs));
      __m256i off = _mm256_madd_epi16(p.pairs[0], _mm256_set1_epi32(bsum_pairs[0]));
      for (int k = 1; k < 8; ++k)
        off = _mm256_add_epi32(off, _mm256_madd_epi16(p.pairs[k], _mm256_set1_epi32(bsum_pairs[k])));
      const __m256i sumi = _mm256_sub_epi32(isum[t], _mm256_slli_epi32(off, Q6KTraits::kOffsetShift));
      const __m256 dd = _mm256_mul_ps(p.d, _mm256_set1_ps(ab[t][b].d));
      acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(_mm256_cvtepi32_ps(sumi), dd));
    }
  }
  avx2::StoreTile8<T>(acc, y, ys);
}

template <int T>
LLAMAY_AVX2_INLINE void RunPackedQ6KUpTo(int n, const PackedQ6K* pk, const uint8_t* act, size_t as,
                                         int64_t nb, float* const* y, size_t ys, const uint8_t* ahead) {
  if constexpr (T > 1) {
    if (n < T) return RunPackedQ6KUpTo<T - 1>(n, pk, act, as, nb, y, ys, ahead);
  }
  RunPackedQ6K<T>(pk, act, as, nb, y, ys, ahead);
}

LLAMAY_AVX2 void TilePackedQ6K(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                               int64_t tokens, int64_t n_in, float* y, size_t ys) {
  const int64_t nb = n_in / kQkK;
  thread_local std::vector<PackedQ6K> packed;
  if (packed.size() < static_cast<size_t>(nb)) packed.resize(static_cast<size_t>(nb));
  for (int64_t r = 0; r < rows; r += 8) {
    const avx2::Rows8 g = avx2::RowGroup8(w, ws, rows, r, y);
    for (int64_t b = 0; b < nb; ++b) PackQ6K(g.w, b, &packed[static_cast<size_t>(b)]);
    const uint8_t* pf = r + 8 < rows ? w + (r + 8) * ws : nullptr;  // prefetched during the first token tile
    for (int64_t t = 0; t < tokens;) {
      float* yt[8];
      for (int i = 0; i < 8; ++i) yt[i] = g.y[i] != nullptr ? g.y[i] + t * ys : nullptr;
      if (t > 0) pf = nullptr;
      const int64_t rest = tokens - t, groups = (rest + kPackedTokens - 1) / kPackedTokens;
      const int n = static_cast<int>((rest + groups - 1) / groups);
      RunPackedQ6KUpTo<kPackedTokens>(n, packed.data(), act + t * as, as, nb, yt, ys, pf);
      t += n;
    }
  }
}

}  // namespace

LLAMAY_AVX2 void TileAvx2Q4_K(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                              int64_t tokens, int64_t n_in, float* y, size_t ys) {
  if (tokens == 1)
    return avx2::RunTile<K45Kernel<BlockQ4_K, false, 1, 4>>(w, ws, rows, act, as, tokens, n_in, y, ys);
  TilePackedK45<BlockQ4_K, false>(w, ws, rows, act, as, tokens, n_in, y, ys);
}
LLAMAY_AVX2 void TileAvx2Q5_K(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                              int64_t tokens, int64_t n_in, float* y, size_t ys) {
  if (tokens == 1)
    return avx2::RunTile<K45Kernel<BlockQ5_K, true, 1, 4>>(w, ws, rows, act, as, tokens, n_in, y, ys);
  TilePackedK45<BlockQ5_K, true>(w, ws, rows, act, as, tokens, n_in, y, ys);
}
LLAMAY_AVX2 void TileAvx2Q6_K(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                              int64_t tokens, int64_t n_in, float* y, size_t ys) {
  if (tokens == 1) return avx2::RunTile<K16Kernel<Q6KTraits>>(w, ws, rows, act, as, tokens, n_in, y, ys);
  TilePackedQ6K(w, ws, rows, act, as, tokens, n_in, y, ys);
}
LLAMAY_AVX2 void TileAvx2Q3_K(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                              int64_t tokens, int64_t n_in, float* y, size_t ys) {
  avx2::RunTile<K16Kernel<Q3KTraits>>(w, ws, rows, act, as, tokens, n_in, y, ys);
}
LLAMAY_AVX2 void TileAvx2Q2_K(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                              int64_t tokens, int64_t n_in, float* y, size_t ys) {
  avx2::RunTile<K16Kernel<Q2KTraits>>(w, ws, rows, act, as, tokens, n_in, y, ys);
}

}  // namespace llamay::kernels
#endif  // __x86_64__
