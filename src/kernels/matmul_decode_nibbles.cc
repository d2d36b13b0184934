// One-token (matrix-vector) kernels for AVX2 and AVX-512 VNNI: the decode path of the weight types whose
// 32-element block is a scale and 16 bytes of nibbles in Q4_0's order (Q4_0, and the lookup-table types
// MXFP4 and IQ4_NL), and of Q8_0 at AVX-512 (its section below), bit-identical to the scalar reference
// (vec_dot.h's canonical order: per block one exact int32 sum, then acc = acc + float(isum) * (d_w * d_a),
// blocks in order) and so to the batched tile kernels.
//
// The batched kernels unpack each 16-byte block of nibbles into 32 bytes in element order. Here nothing is
// reordered: the nibble bytes of several rows are loaded side by side, one row per 128-bit lane, and the
// (shared) activation is arranged to match instead:
//   low nibbles  & 0x0F      = elements 0..15 of the row, against activation bytes 0..15 in every lane
//   high nibbles >> 4 & 0x0F = elements 16..31,           against activation bytes 16..31
// A nibble becomes an unsigned byte u = value + kOffset: Q4_0's nibble is u itself (kOffset 8); a lookup
// type's nibble indexes its grid shifted by kOffset, one vpshufb per 32 nibbles (MXFP4's doubled E2M1 values
// are at most 12 in magnitude, kOffset 12; IQ4_NL's reach -127, kOffset 128, AVX-512 only, below).
// Both products go into the same int32 lanes (AVX2: vpmaddubsw, the two int16 results added, vpmaddwd;
// AVX-512: two chained vpdpbusd), so a row's 128-bit lane holds four partial sums of its block. Only the
// block sum is needed: the partial sums are reduced within each lane and the 8 rows' sums of a tile are
// gathered into one __m256i (AVX2: a vphaddd tree, rows in lane order 0 2 4 6 1 3 5 7, the scales gathered
// in the same order; AVX-512: unpack-and-add over the two registers, then one vpermd to rows 0..7). One
// cvt, one multiply by the 8 rows' d_w * d_a and one add per block then serve the whole tile.
//
// The offset is taken out exactly: per activation block kOffset * sum(a) is computed once and subtracted
// from the 8 rows' sums (sum(u * a) - kOffset * sum(a) = sum(value * a); every value here stays far below
// 2^24, so the sums, and their conversion to float, are exact). AVX2's vpmaddubsw adds two u8 x s8 products
// into a saturating int16, and two of those are added before vpmaddwd: 4 * 127 * max(u) must stay below
// 2^15, which holds for Q4_0 (u <= 15) and MXFP4 (u <= 24) but not for IQ4_NL (u <= 241), whose AVX2 decode
// keeps the sign trick of matmul_avx2_q.cc. vpdpbusd widens to int32 first, so AVX-512 takes all three.
#if defined(__x86_64__)
#include <algorithm>
#include <array>
#include <cstddef>
#include <vector>

#include "kernels/avx2_util.h"
#include "kernels/avx512_util.h"
#include "kernels/matmul_kernels.h"
#include "kernels/quant_blocks.h"

namespace llamay::kernels {
namespace {

// The types: the block, the offset of u, and for a lookup type its grid of u (value + kOffset as a byte).
struct Q4_0Nibbles {
  using Block = BlockQ4_0;
  static constexpr int kOffset = 8, kMaxU = 15;
  static constexpr bool kLookup = false;
  static constexpr std::array<int8_t, 16> kGrid{};
};

template <typename B, const int8_t* kValues, int kOff>
struct LookupNibbles {
  using Block = B;
  static constexpr int kOffset = kOff;
  static constexpr bool kLookup = true;
  static constexpr std::array<int8_t, 16> kGrid = [] {
    std::array<int8_t, 16> g{};
    for (size_t i = 0; i < 16; ++i) g[i] = static_cast<int8_t>(static_cast<uint8_t>(kValues[i] + kOff));
    return g;
  }();
  static constexpr int kMaxU = [] {
    int m = 0;
    for (size_t i = 0; i < 16; ++i) m = std::max(m, kValues[i] + kOff);
    return m;
  }();
};

using Mxfp4Nibbles = LookupNibbles<BlockMXFP4, kMxfp4Values, 12>;
using Iq4NlNibbles = LookupNibbles<BlockIQ4_NL, kIq4NlValues, 128>;

// Decode streams the weights from memory. AVX2 reads spread row groups (avx2::SpreadRowGroup8: 8 forward
// streams the hardware prefetcher follows; on a Zen 2, BM_DecodeShape 4096 x 2048 at 2 threads, Q4_0
// 21.1-21.4 -> 24.1-25.1 GiB/s, MXFP4 20.8-21.3 -> 23.0-23.2). AVX-512 reads 8 neighbouring rows, and while
// block b of a tile is read the same share of the next tile is prefetched (avx2::PrefetchTileShare), so the
// stream runs one tile ahead of the reads whatever the row length (kernels_bench BM_DecodeStream, Q4_0, one
// thread: 44 ms per 512 MiB against 73-80 ms with 256 bytes ahead in each row, and 75 ms with none).

template <typename Block>
const uint8_t* Nibbles(const uint8_t* row, int64_t b) {
  return row + b * static_cast<int64_t>(sizeof(Block)) + offsetof(Block, qs);
}

// The activation of block b as the kernels need it beyond its bytes: kOffset * the sum of its 32 bytes
// (taken from the row sums at the end) and its scale.
struct ActBlock {
  int32_t off;
  float da;
};

LLAMAY_AVX2 void PrepareActs(const uint8_t* act, int64_t nb, int offset, ActBlock* out) {
  const __m256i one = _mm256_set1_epi8(1), ones = _mm256_set1_epi16(1);
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ8_0& a = reinterpret_cast<const BlockQ8_0*>(act)[b];
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs));
    out[b].off = offset * avx2::HsumI32(_mm256_madd_epi16(_mm256_maddubs_epi16(one, q), ones));
    out[b].da = avx2::F16(a.d);
  }
}

// ---- AVX2: two rows per register (one per 128-bit lane), four registers: 8 rows per tile.

// Rows w[0..7] (a padded row repeats its neighbour; y[i] null drops it).
template <class Ty>
LLAMAY_AVX2 void RunAvx2Rows8(const uint8_t* const* w, const uint8_t* /*ahead*/, const ActBlock* pa,
                              int64_t nb, const uint8_t* act, float* const* y) {
  using Block = typename Ty::Block;
  static_assert(4 * 127 * Ty::kMaxU < 32768, "two vpmaddubsw results added in int16 would saturate");
  const __m256i low4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  const __m256i grid =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(Ty::kGrid.data())));
  // After the hadd tree lane j holds row kLane[j]; the scales are gathered in the same order.
  constexpr int kLane[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  const uint8_t* wl[8];
  for (int j = 0; j < 8; ++j) wl[j] = w[kLane[j]];
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ8_0& ab = reinterpret_cast<const BlockQ8_0*>(act)[b];
    const __m256i a_lo =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ab.qs)));
    const __m256i a_hi =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ab.qs + 16)));
    __m256i s[4];
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      const uint8_t* n0 = Nibbles<Block>(w[2 * g], b);
      const uint8_t* n1 = Nibbles<Block>(w[2 * g + 1], b);
      const __m256i x =
          _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(n1), reinterpret_cast<const __m128i*>(n0));
      __m256i lo = _mm256_and_si256(x, low4);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), low4);
      if constexpr (Ty::kLookup) lo = _mm256_shuffle_epi8(grid, lo), hi = _mm256_shuffle_epi8(grid, hi);
      // int16: four products of u and a, |sum| <= 4 * 127 * kMaxU (no saturation).
      const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo, a_lo), _mm256_maddubs_epi16(hi, a_hi));
      s[g] = _mm256_madd_epi16(p, ones);  // per 128-bit lane: four int32 partial sums of one row
    }
    // Per 128-bit lane: [row sum of s0, s1, s2, s3], i.e. rows 0, 2, 4, 6 | 1, 3, 5, 7.
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
    const __m256i isum = _mm256_sub_epi32(h, _mm256_set1_epi32(pa[b].off));
    const __m256 dd = _mm256_mul_ps(avx2::BlockScales8<Block>(wl, b), _mm256_set1_ps(pa[b].da));
    acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(isum), dd));
  }
  alignas(32) float out[8];
  _mm256_store_ps(out, acc);
  for (int j = 0; j < 8; ++j)
    if (y[kLane[j]] != nullptr) *y[kLane[j]] = out[j];
}

// ---- AVX-512: four rows per register (one per 128-bit lane), two registers: 8 rows per tile.

// Per 128-bit lane of the result: dword 0 is the sum of that lane of a, dword 1 of b.
LLAMAY_AVX512_INLINE __m512i LaneSums2(__m512i a, __m512i b) {
  // Per 128-bit lane: [a.0 + a.2, b.0 + b.2, a.1 + a.3, b.1 + b.3], then dwords 0 and 1 complete.
  const __m512i u = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
  return _mm512_add_epi32(u, _mm512_shuffle_epi32(u, _MM_PERM_BADC));
}

// The reference's f32 step for block b of the 8 rows w[0..7] (row i in lane i): acc + float(isum - off) *
// (d_w * d_a).
template <typename Block>
LLAMAY_AVX2_INLINE __m256 AddBlock8(__m256 acc, __m256i isum, const uint8_t* const* w, int64_t b,
                                    const ActBlock& a) {
  const __m256 dd = _mm256_mul_ps(avx2::BlockScales8<Block>(w, b), _mm256_set1_ps(a.da));
  return _mm256_add_ps(
      acc, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(isum, _mm256_set1_epi32(a.off))), dd));
}

LLAMAY_AVX512_INLINE __m512i Load4Rows(const uint8_t* n0, const uint8_t* n1, const uint8_t* n2,
                                       const uint8_t* n3) {
  const __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(n0)));
  const __m512i v1 = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(n1)), 1);
  const __m512i v2 = _mm512_inserti32x4(v1, _mm_loadu_si128(reinterpret_cast<const __m128i*>(n2)), 2);
  return _mm512_inserti32x4(v2, _mm_loadu_si128(reinterpret_cast<const __m128i*>(n3)), 3);
}

template <class Ty>
LLAMAY_AVX512 void RunAvx512Rows8(const uint8_t* const* w, const uint8_t* ahead, const ActBlock* pa,
                                  int64_t nb, const uint8_t* act, float* const* y) {
  using Block = typename Ty::Block;
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i grid =
      _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(Ty::kGrid.data())));
  // Dwords 0 and 1 of 128-bit lane L hold rows L and 4 + L after the reduction: rows 0..7 in order.
  const __m512i gather = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ8_0& ab = reinterpret_cast<const BlockQ8_0*>(act)[b];
    const __m512i a_lo = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ab.qs)));
    const __m512i a_hi =
        _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ab.qs + 16)));
    avx2::PrefetchTileShare<sizeof(Block)>(ahead, b);
    __m512i s[2];
#pragma GCC unroll 2
    for (int g = 0; g < 2; ++g) {
      const __m512i x = Load4Rows(Nibbles<Block>(w[4 * g], b), Nibbles<Block>(w[4 * g + 1], b),
                                  Nibbles<Block>(w[4 * g + 2], b), Nibbles<Block>(w[4 * g + 3], b));
      __m512i lo = _mm512_and_si512(x, low4);
      __m512i hi = _mm512_and_si512(_mm512_srli_epi16(x, 4), low4);
      if constexpr (Ty::kLookup) lo = _mm512_shuffle_epi8(grid, lo), hi = _mm512_shuffle_epi8(grid, hi);
      // Per 128-bit lane (one row): four int32 partial sums of u * a.
      s[g] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, a_lo), hi, a_hi);
    }
    const __m512i v = LaneSums2(s[0], s[1]);
    acc = AddBlock8<Block>(acc, _mm512_castsi512_si256(_mm512_permutexvar_epi32(gather, v)), w, b, pa[b]);
  }
  avx2::StoreTile8<1>(&acc, y, 0);
}

// ---- Q8_0 at AVX-512: two rows per register (one per 256-bit half), four registers: 8 rows per tile.
// Q8_0's bytes are signed values already in element order: u = value + 128 (one xor) against the activation
// bytes, and 128 x sum(a) comes off as the nibble types' offset does (|sum(u * a)| <= 32 x 255 x 128). Like
// theirs, the tile streams its rows with the next tile prefetched, where the tile kernel of
// matmul_avx512_q.cc prefetches 16 rows each on its own (on an AMD EPYC, kernels_bench BM_DecodeStream,
// one thread: 25 GB/s there against 38 for AVX2's 8-row tile).
struct Q8_0Bytes {
  using Block = BlockQ8_0;
  static constexpr int kOffset = 128;
};

LLAMAY_AVX512 void RunAvx512Q8_0Rows8(const uint8_t* const* w, const uint8_t* ahead, const ActBlock* pa,
                                      int64_t nb, const uint8_t* act, float* const* y) {
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  // After the reduction below, row r's sum is dword pick[r] of (v[0], v[1]).
  const __m512i pick = _mm512_setr_epi32(0, 8, 1, 9, 16, 24, 17, 25, 0, 0, 0, 0, 0, 0, 0, 0);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ8_0& ab = reinterpret_cast<const BlockQ8_0*>(act)[b];
    const __m512i a = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.qs)));
    avx2::PrefetchTileShare<sizeof(BlockQ8_0)>(ahead, b);
    __m512i s[4];  // s[g]: row 2g in the low 256 bits, row 2g + 1 in the high; eight int32 partial sums each
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      const auto* q0 =
          reinterpret_cast<const __m256i*>(w[2 * g] + b * sizeof(BlockQ8_0) + offsetof(BlockQ8_0, qs));
      const auto* q1 =
          reinterpret_cast<const __m256i*>(w[2 * g + 1] + b * sizeof(BlockQ8_0) + offsetof(BlockQ8_0, qs));
      const __m512i x =
          _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(q0)), _mm256_loadu_si256(q1), 1);
      s[g] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_xor_si512(x, flip), a);
    }
    // Per pair (s[2p], s[2p+1]): LaneSums2, then adding the neighbouring lane completes the rows: lane 0
    // holds rows 4p and 4p + 2, lane 2 rows 4p + 1 and 4p + 3.
    __m512i v[2];
    for (int p = 0; p < 2; ++p) {
      const __m512i h = LaneSums2(s[2 * p], s[2 * p + 1]);
      v[p] = _mm512_add_epi32(h, _mm512_shuffle_i32x4(h, h, _MM_SHUFFLE(2, 3, 0, 1)));
    }
    acc = AddBlock8<BlockQ8_0>(acc, _mm512_castsi512_si256(_mm512_permutex2var_epi32(v[0], pick, v[1])), w, b,
                               pa[b]);
  }
  avx2::StoreTile8<1>(&acc, y, 0);
}

// Tiles of 8 rows; a short last tile repeats a row (results dropped). kSpread: spread row groups, which the
// hardware prefetcher follows (avx2::SpreadRowGroup8; AVX2); otherwise 8 neighbouring rows, the run
// prefetching the next tile's share of `ahead` (AVX-512, not measured spread: no such CPU at hand).
template <class Ty, bool kSpread, typename Run>
void Decode(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, int64_t n_in, float* y, Run run) {
  const int64_t nb = n_in / kQk;
  thread_local std::vector<ActBlock> scratch;
  if (scratch.size() < static_cast<size_t>(nb)) scratch.resize(static_cast<size_t>(nb));
  PrepareActs(act, nb, Ty::kOffset, scratch.data());
  avx2::ForEachDecodeGroup8(w, ws, rows, y, kSpread, [&](const avx2::Rows8& g, const uint8_t* ahead) {
    run(g.w, ahead, scratch.data(), nb, act, g.y);
  });
}

}  // namespace

void DecodeAvx2Q4_0(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, int64_t n_in, float* y) {
  Decode<Q4_0Nibbles, true>(w, ws, rows, act, n_in, y, RunAvx2Rows8<Q4_0Nibbles>);
}
void DecodeAvx2MXFP4(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, int64_t n_in, float* y) {
  Decode<Mxfp4Nibbles, true>(w, ws, rows, act, n_in, y, RunAvx2Rows8<Mxfp4Nibbles>);
}
void DecodeAvx512Q4_0(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, int64_t n_in, float* y) {
  Decode<Q4_0Nibbles, false>(w, ws, rows, act, n_in, y, RunAvx512Rows8<Q4_0Nibbles>);
}
void DecodeAvx512MXFP4(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, int64_t n_in,
                       float* y) {
  Decode<Mxfp4Nibbles, false>(w, ws, rows, act, n_in, y, RunAvx512Rows8<Mxfp4Nibbles>);
}
void DecodeAvx512Q8_0(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, int64_t n_in, float* y) {
  Decode<Q8_0Bytes, false>(w, ws, rows, act, n_in, y, RunAvx512Q8_0Rows8);
}
void DecodeAvx512IQ4_NL(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, int64_t n_in,
                        float* y) {
  Decode<Iq4NlNibbles, false>(w, ws, rows, act, n_in, y, RunAvx512Rows8<Iq4NlNibbles>);
}

}  // namespace llamay::kernels
#endif  // __x86_64__
