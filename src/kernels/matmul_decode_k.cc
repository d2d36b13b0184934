// One-token (matrix-vector) kernels for AVX-512 VNNI of the most common K-quants, Q4_K, Q5_K and Q6_K (the
// types of the Q4_K_M and Q5_K_M files): the decode path, bit-identical to the scalar reference (vec_dot.h's
// canonical order: per super-block the exact integers sumi = sum over sub-blocks of scale * (sum of q * a)
// [and, Q4_K and Q5_K, smin = sum of min * (sum of a)], then acc = acc + (float(sumi) * (d_w * d_a) [-
// float(smin) * (dmin_w * d_a)]), super-blocks in order).
//
// The AVX2 kernels (matmul_avx2_k.cc) widen every 32 products with vpmaddubsw, meet the scales with
// vpmaddwd per sub-block, two rows at a time, and reduce each row's sums on their own: about 0.6
// instructions per weight byte for Q4_K, which on two threads leaves decode short of the memory bandwidth.
// Here, per row and super-block:
//   - the quants are loaded 64 bytes at a time and unpacked without reordering to unsigned bytes u. Q4_K: the
//     low nibbles of bytes 0..31 are sub-block 0, of bytes 32..63 sub-block 2, the high nibbles sub-blocks 1
//     and 3, and so on; its activation's 256 bytes are rearranged once per call to match (a 256-bit half per
//     sub-block). Q5_K: the same, with each byte's fifth bit shifted in from qh. Q6_K: u = the low 4 bits |
//     the 2 high bits << 4 (0..63) comes out in element order, the value is u - 32;
//   - vpdpbusd gives int32 lanes of 4 products each, at most 4 * 63 * 128 = 32256 in magnitude, so a lane
//     read as the int16 pair (sum, sign) against the pair (scale, 0) in vpdpwssd adds sum * scale exactly:
//     the sub-block scales are spread to their lanes with vpermd;
//   - Q4_K's and Q5_K's smin is one vpmaddwd of the mins against the activation's sub-block sums; Q6_K's
//   offset,
//     32 * sum of scale * (sum of a), comes from the activation's bsums the same way and starts its sums.
// Four rows make a tile: their sums are reduced together (transpose and add), and the f32 step runs for
// the four rows at once in the reference's order (mul, [mul, sub,] add; no FMA). Rows are contiguous in a
// weight matrix, so while a tile reads block b it prefetches the same share of the tile two ahead.
#if defined(__x86_64__)
#include <cstddef>
#include <vector>

#include "kernels/avx512_util.h"
#include "kernels/matmul_kernels.h"
#include "kernels/quant_blocks.h"

namespace llamay::kernels {
namespace {

constexpr int kTileRows = 4;
constexpr int kAheadRows = 2 * kTileRows;  // the prefetch runs this many rows ahead

// Lane s of the result = a[0].s + a[1].s + ... in four lanes: [sum of a0, sum of a1, sum of a2, sum of a3].
LLAMAY_AVX512_INLINE __m128i Hsum4x16(const __m512i* a) {
  const __m512i ab = _mm512_add_epi32(_mm512_unpacklo_epi32(a[0], a[1]), _mm512_unpackhi_epi32(a[0], a[1]));
  const __m512i cd = _mm512_add_epi32(_mm512_unpacklo_epi32(a[2], a[3]), _mm512_unpackhi_epi32(a[2], a[3]));
  // Per 128-bit lane: [a, b, c, d] partial sums.
  const __m512i abcd = _mm512_add_epi32(_mm512_unpacklo_epi64(ab, cd), _mm512_unpackhi_epi64(ab, cd));
  const __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(abcd), _mm512_extracti64x4_epi64(abcd, 1));
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

// The f16 field at byte `offset` of super-block b of four rows, converted: row i in lane i.
template <typename Block>
LLAMAY_AVX512_INLINE __m128 Gather4F16(const uint8_t* const* w, int64_t b, size_t offset) {
  uint64_t v = 0;
  for (int i = 0; i < kTileRows; ++i) {
    uint16_t h;
    __builtin_memcpy(&h, w[i] + b * static_cast<int64_t>(sizeof(Block)) + offset, 2);
    v |= static_cast<uint64_t>(h) << (16 * i);
  }
  return _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<int64_t>(v)));
}

// vpermd indices: lane j of the result takes lane first + j / 2^shift (shift 2: the same lane over each
// 128-bit lane).
LLAMAY_AVX512_INLINE __m512i Spread(int first, int shift) {
  const __m512i j = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  return _mm512_add_epi32(_mm512_set1_epi32(first), _mm512_srli_epi32(j, static_cast<unsigned>(shift)));
}

// Q4_K and Q5_K (kFive: a fifth bit per value in qh, bit s of qh[l] for element l of sub-block s). The
// activation of one super-block: the bytes of sub-blocks (0, 2), (1, 3), (4, 6) and (5, 7) in four
// registers, a sub-block per 256-bit half; the sub-blocks' byte sums as int16 (at most 32 * 128 in
// magnitude).
template <typename B, bool kFive>
struct K45Decode {
  using Block = B;
  static constexpr bool kHasMin = true;
  struct alignas(64) Act {
    __m512i q[4];
    __m128i sums;
    float d;
  };
  LLAMAY_AVX512_INLINE static void Prepare(const BlockQ8_K& a, Act* out) {
    constexpr int kFirst[4][2] = {{0, 2}, {1, 3}, {4, 6}, {5, 7}};  // the sub-blocks of each register
    for (int k = 0; k < 4; ++k) {
      const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs + 32 * kFirst[k][0]));
      const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs + 32 * kFirst[k][1]));
      out->q[k] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    }
    // bsums are sums of 16: sub-block s is bsums[2s] + bsums[2s + 1] (pairs added with vpmaddwd by ones).
    const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums));
    const __m256i s32 = _mm256_madd_epi16(bsums, _mm256_set1_epi16(1));  // 8 int32
    out->sums = _mm_packs_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
    out->d = a.d;
  }
  // The row's sumi as 16 lanes to add up, and its smin as 4.
  LLAMAY_AVX512_INLINE static void Row(const Block& blk, const Act& a, __m512i* sumi, __m128i* smin) {
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    uint64_t sc8, mn8;
    UnpackScalesMinsK4(blk.scales, &sc8, &mn8);
    const __m512i sc = _mm512_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(sc8)));
    const __m512i x0 = _mm512_loadu_si512(blk.qs), x1 = _mm512_loadu_si512(blk.qs + 64);
    __m512i q[4] = {_mm512_and_si512(x0, low4), _mm512_and_si512(_mm512_srli_epi16(x0, 4), low4),
                    _mm512_and_si512(x1, low4), _mm512_and_si512(_mm512_srli_epi16(x1, 4), low4)};
    // Register k holds sub-blocks kFirst[k] (lanes 0..7) and kFirst[k] + 2 (lanes 8..15): the scale of
    // sub-block kFirst[k] + 2 * (j / 8) in lane j.
    constexpr int kFirst[4] = {0, 1, 4, 5};
    const __m512i two = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2);
    if constexpr (kFive) {
      // Byte l of each 256-bit half holds qh[l]; the word shift by s (s < 8) brings bit s of every byte to
      // the bottom of that byte (the bits shifted in from the byte above land at 8 - s and up).
      const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh)));
      const __m512i one = _mm512_set1_epi8(1);
      const __m512i half = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
      for (int k = 0; k < 4; ++k) {
        const __m512i bit = _mm512_and_si512(
            _mm512_srlv_epi16(qh, _mm512_add_epi16(half, _mm512_set1_epi16(kFirst[k]))), one);
        q[k] = _mm512_or_si512(q[k], _mm512_slli_epi16(bit, 4));
      }
    }
    __m512i s = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m512i idx = _mm512_add_epi32(_mm512_set1_epi32(kFirst[k]), two);
      const __m512i part = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[k], a.q[k]);
      s = _mm512_dpwssd_epi32(s, part, _mm512_permutexvar_epi32(idx, sc));
    }
    *sumi = s;
    *smin = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(mn8))), a.sums);
  }
};

using Q4KDecode = K45Decode<BlockQ4_K, false>;
using Q5KDecode = K45Decode<BlockQ5_K, true>;

// Q6_K. The activation of one super-block: its bytes in element order (values 64k.. in register k) and its
// 16 bsums, the sums of its sub-blocks of 16.
struct Q6KDecode {
  using Block = BlockQ6_K;
  static constexpr bool kHasMin = false;
  struct alignas(64) Act {
    __m512i q[4];
    __m256i bsums;
    float d;
  };
  LLAMAY_AVX512_INLINE static void Prepare(const BlockQ8_K& a, Act* out) {
    for (int k = 0; k < 4; ++k) out->q[k] = _mm512_loadu_si512(a.qs + 64 * k);
    out->bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums));
    out->d = a.d;
  }
  LLAMAY_AVX512_INLINE static void Row(const Block& blk, const Act& a, __m512i* sumi, __m128i*) {
    const __m512i low4 = _mm512_set1_epi8(0x0F), low2 = _mm512_set1_epi8(0x03);
    // Half h (elements 128h..): ql bytes 64h..64h+63 hold elements 128h + 0..63 (low nibbles) and
    // 128h + 64..127 (high nibbles); qh byte 32h + l holds the high 2 bits of elements 128h + l, + 32, + 64
    // and + 96 in bits 0-1, 2-3, 4-5 and 6-7. With the 32 qh bytes in both 256-bit halves, the word shifts
    // 0 | 2 (elements 0..63) and 4 | 6 (64..127) bring each element's two bits to the bottom of its byte.
    const __m512i shift_lo = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    const __m512i shift_hi = _mm512_add_epi16(shift_lo, _mm512_set1_epi16(4));
    // The scales (int8) as the int16 pairs (scale, 0) in int32 lanes, the pairs vpdpwssd takes.
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales)));
    const __m512i sc = _mm512_cvtepu16_epi32(sc16);
    // The offset: sum(q * a) = sum(u * a) - 32 * sum(a) per sub-block, so sumi starts from
    // -32 * sum of scale * bsum (8 int32 lanes of pairs, at most 2 * 128 * 2048 each).
    __m512i s = _mm512_castsi256_si512(
        _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(sc16, a.bsums), 5)));
    s = _mm512_inserti64x4(s, _mm256_setzero_si256(), 1);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m512i l = _mm512_loadu_si512(blk.ql + 64 * h);
      const __m512i qh =
          _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh + 32 * h)));
      const __m512i u_lo =
          _mm512_or_si512(_mm512_and_si512(l, low4),
                          _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, shift_lo), low2), 4));
      const __m512i u_hi =
          _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), low4),
                          _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, shift_hi), low2), 4));
      // Lane j covers elements 4j..4j+3 of its 64: sub-block 8h + j / 4 (u_lo), 8h + 4 + j / 4 (u_hi).
      s = _mm512_dpwssd_epi32(s, _mm512_dpbusd_epi32(_mm512_setzero_si512(), u_lo, a.q[2 * h]),
                              _mm512_permutexvar_epi32(Spread(8 * h, 2), sc));
      s = _mm512_dpwssd_epi32(s, _mm512_dpbusd_epi32(_mm512_setzero_si512(), u_hi, a.q[2 * h + 1]),
                              _mm512_permutexvar_epi32(Spread(8 * h + 4, 2), sc));
    }
    *sumi = s;
  }
};

// Rows w[0..3] (a padded row repeats its neighbour; y[i] null drops it).
template <class Ty>
LLAMAY_AVX512 void RunRows4(const uint8_t* const* w, const uint8_t* ahead, const typename Ty::Act* pa,
                            int64_t nb, float* const* y) {
  using Block = typename Ty::Block;
  __m128 acc = _mm_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const typename Ty::Act& a = pa[b];
    const char* next =
        reinterpret_cast<const char*>(ahead) + b * kTileRows * static_cast<int64_t>(sizeof(Block));
    for (size_t off = 0; off < kTileRows * sizeof(Block); off += 64) _mm_prefetch(next + off, _MM_HINT_T0);
    __m512i sumi[kTileRows];
    __m128i smin[kTileRows];
#pragma GCC unroll 4
    for (int r = 0; r < kTileRows; ++r)
      Ty::Row(reinterpret_cast<const Block*>(w[r])[b], a, &sumi[r], &smin[r]);
    const __m128 da = _mm_set1_ps(a.d);
    const __m128 dd = _mm_mul_ps(Gather4F16<Block>(w, b, offsetof(Block, d)), da);
    const __m128 fsum = _mm_cvtepi32_ps(Hsum4x16(sumi));
    if constexpr (Ty::kHasMin) {
      const __m128i imin = _mm_hadd_epi32(_mm_hadd_epi32(smin[0], smin[1]), _mm_hadd_epi32(smin[2], smin[3]));
      const __m128 dm = _mm_mul_ps(Gather4F16<Block>(w, b, offsetof(Block, dmin)), da);
      acc = _mm_add_ps(acc, _mm_sub_ps(_mm_mul_ps(fsum, dd), _mm_mul_ps(_mm_cvtepi32_ps(imin), dm)));
    } else {
      acc = _mm_add_ps(acc, _mm_mul_ps(fsum, dd));
    }
  }
  alignas(16) float out[kTileRows];
  _mm_store_ps(out, acc);
  for (int i = 0; i < kTileRows; ++i)
    if (y[i] != nullptr) *y[i] = out[i];
}

template <class Ty>
LLAMAY_AVX512 void Decode(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, int64_t n_in,
                          float* y) {
  const int64_t nb = n_in / kQkK;
  thread_local std::vector<typename Ty::Act> scratch;
  if (scratch.size() < static_cast<size_t>(nb)) scratch.resize(static_cast<size_t>(nb));
  for (int64_t b = 0; b < nb; ++b) Ty::Prepare(reinterpret_cast<const BlockQ8_K*>(act)[b], &scratch[b]);
  for (int64_t r = 0; r < rows; r += kTileRows) {
    const uint8_t* wr[kTileRows];
    float* yr[kTileRows];
    for (int64_t i = 0; i < kTileRows; ++i) {
      const bool pad = r + i >= rows;
      wr[i] = w + (pad ? rows - 1 : r + i) * ws;
      yr[i] = pad ? nullptr : y + r + i;
    }
    RunRows4<Ty>(wr, w + (r + kAheadRows) * ws, scratch.data(), nb, yr);
  }
}

}  // namespace

void DecodeAvx512Q4_K(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, int64_t n_in, float* y) {
  Decode<Q4KDecode>(w, ws, rows, act, n_in, y);
}
void DecodeAvx512Q5_K(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, int64_t n_in, float* y) {
  Decode<Q5KDecode>(w, ws, rows, act, n_in, y);
}
void DecodeAvx512Q6_K(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, int64_t n_in, float* y) {
  Decode<Q6KDecode>(w, ws, rows, act, n_in, y);
}

}  // namespace llamay::kernels
#endif  // __x86_64__
