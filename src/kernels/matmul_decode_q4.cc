// One-token (matrix-vector) Q4_0 kernels for AVX2 and AVX-512 VNNI: the decode path, bit-identical to the
// scalar reference (vec_dot.h's canonical order: per block one exact int32 sum, then
// acc = acc + float(isum) * (d_w * d_a), blocks in order) and so to the batched tile kernels.
//
// The batched kernels unpack each 16-byte block of nibbles into 32 bytes in element order. Here nothing is
// reordered: the nibble bytes of several rows are loaded side by side, one row per 128-bit lane, and the
// (shared) activation is arranged to match instead:
//   low nibbles  & 0x0F      = elements 0..15 of the row, against activation bytes 0..15 in every lane
//   high nibbles >> 4 & 0x0F = elements 16..31,           against activation bytes 16..31
// Both products go into the same int32 lanes (AVX2: vpmaddubsw, the two int16 results added, vpmaddwd;
// AVX-512: two chained vpdpbusd), so a row's 128-bit lane holds four partial sums of its block. Only the
// block sum is needed: the partial sums are reduced within each lane and the 8 rows' sums of a tile are
// gathered into one __m256i (AVX2: a vphaddd tree, rows in lane order 0 2 4 6 1 3 5 7, the scales gathered
// in the same order; AVX-512: unpack-and-add over the two registers, then one vpermd to rows 0..7). One
// cvt, one multiply by the 8 rows' d_w * d_a and one add per block then serve the whole tile.
//
// The offset of q - 8 is taken out exactly: per activation block 8 * sum(a) is computed once and
// subtracted from the 8 rows' sums (sum(q * a) - 8 * sum(a) = sum((q - 8) * a); every value here stays far
// below 2^24, so the sums, and their conversion to float, are exact). The f16 scales of 8 rows are gathered
// with scalar loads into one vector and converted together.
#if defined(__x86_64__)
#include <cstddef>
#include <vector>

#include "kernels/avx2_util.h"
#include "kernels/avx512_util.h"
#include "kernels/matmul_kernels.h"
#include "kernels/quant_blocks.h"

namespace llamay::kernels {
namespace {

// Decode streams the weights from memory. The 8 rows of a tile are usually contiguous, and so is the next
// tile: while block b of this tile is read, the same share of the next tile (8 blocks' worth, from
// `ahead`) is prefetched, so the stream runs one tile ahead of the reads whatever the row length
// (kernels_bench BM_DecodeStream, Q4_0, one thread: 44 ms per 512 MiB against 73-80 ms with 256 bytes ahead
// in each row, and 75 ms with none).
LLAMAY_AVX2_INLINE void PrefetchShare(const uint8_t* ahead, int64_t b) {
  const char* p = reinterpret_cast<const char*>(ahead) + b * 8 * sizeof(BlockQ4_0);
  _mm_prefetch(p, _MM_HINT_T0);
  _mm_prefetch(p + 64, _MM_HINT_T0);
  _mm_prefetch(p + 128, _MM_HINT_T0);
}

const uint8_t* Nibbles(const uint8_t* row, int64_t b) { return row + b * sizeof(BlockQ4_0) + 2; }

// The f16 scales of block b of 8 rows, converted, as one vector (row i in lane i).
LLAMAY_AVX2_INLINE __m256 Scales8(const uint8_t* const* w, int64_t b) {
  return avx2::Gather8F16<sizeof(BlockQ4_0)>(w, b, offsetof(BlockQ4_0, d));
}

// The activation of block b as the kernels need it beyond its bytes: 8 * the sum of its 32 bytes (taken
// from the row sums at the end: sum((q - 8) * a) = sum(q * a) - 8 * sum(a)) and its scale.
struct ActBlock {
  int32_t off;
  float da;
};

LLAMAY_AVX2 void PrepareActs(const uint8_t* act, int64_t nb, ActBlock* out) {
  const __m256i eight = _mm256_set1_epi8(8), ones = _mm256_set1_epi16(1);
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ8_0& a = reinterpret_cast<const BlockQ8_0*>(act)[b];
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs));
    out[b].off = avx2::HsumI32(_mm256_madd_epi16(_mm256_maddubs_epi16(eight, q), ones));
    out[b].da = avx2::F16(a.d);
  }
}

// ---- AVX2: two rows per register (one per 128-bit lane), four registers: 8 rows per tile.

// Rows w[0..7] (a padded row repeats its neighbour; y[i] null drops it).
LLAMAY_AVX2 void RunAvx2Rows8(const uint8_t* const* w, const uint8_t* ahead, const ActBlock* pa, int64_t nb,
                              const uint8_t* act, float* const* y) {
  const __m256i low4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
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
    PrefetchShare(ahead, b);
    __m256i s[4];
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      const uint8_t* n0 = Nibbles(w[2 * g], b);
      const uint8_t* n1 = Nibbles(w[2 * g + 1], b);
      const __m256i x =
          _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(n1), reinterpret_cast<const __m128i*>(n0));
      const __m256i lo = _mm256_and_si256(x, low4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), low4);
      // int16: four products of q in [0, 15] and a, |sum| <= 4 * 15 * 128 (no saturation).
      const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo, a_lo), _mm256_maddubs_epi16(hi, a_hi));
      s[g] = _mm256_madd_epi16(p, ones);  // per 128-bit lane: four int32 partial sums of one row
    }
    // Per 128-bit lane: [row sum of s0, s1, s2, s3], i.e. rows 0, 2, 4, 6 | 1, 3, 5, 7.
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
    const __m256i isum = _mm256_sub_epi32(h, _mm256_set1_epi32(pa[b].off));
    const __m256 dd = _mm256_mul_ps(Scales8(wl, b), _mm256_set1_ps(pa[b].da));
    acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(isum), dd));
  }
  alignas(32) float out[8];
  _mm256_store_ps(out, acc);
  for (int j = 0; j < 8; ++j)
    if (y[kLane[j]] != nullptr) *y[kLane[j]] = out[j];
}

// ---- AVX-512: four rows per register (one per 128-bit lane), two registers: 8 rows per tile.

LLAMAY_AVX512_INLINE __m512i Load4Rows(const uint8_t* n0, const uint8_t* n1, const uint8_t* n2,
                                       const uint8_t* n3) {
  const __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(n0)));
  const __m512i v1 = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(n1)), 1);
  const __m512i v2 = _mm512_inserti32x4(v1, _mm_loadu_si128(reinterpret_cast<const __m128i*>(n2)), 2);
  return _mm512_inserti32x4(v2, _mm_loadu_si128(reinterpret_cast<const __m128i*>(n3)), 3);
}

LLAMAY_AVX512 void RunAvx512Rows8(const uint8_t* const* w, const uint8_t* ahead, const ActBlock* pa,
                                  int64_t nb, const uint8_t* act, float* const* y) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  // Dwords 0 and 1 of 128-bit lane L hold rows L and 4 + L after the reduction: rows 0..7 in order.
  const __m512i gather = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ8_0& ab = reinterpret_cast<const BlockQ8_0*>(act)[b];
    const __m512i a_lo = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ab.qs)));
    const __m512i a_hi =
        _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ab.qs + 16)));
    PrefetchShare(ahead, b);
    __m512i s[2];
#pragma GCC unroll 2
    for (int g = 0; g < 2; ++g) {
      const __m512i x = Load4Rows(Nibbles(w[4 * g], b), Nibbles(w[4 * g + 1], b), Nibbles(w[4 * g + 2], b),
                                  Nibbles(w[4 * g + 3], b));
      const __m512i lo = _mm512_and_si512(x, low4);
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(x, 4), low4);
      // Per 128-bit lane (one row): four int32 partial sums of q * a, q in [0, 15].
      s[g] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, a_lo), hi, a_hi);
    }
    // Per 128-bit lane: [s0.0 + s0.2, s1.0 + s1.2, s0.1 + s0.3, s1.1 + s1.3], then dwords 0 and 1 complete.
    const __m512i u = _mm512_add_epi32(_mm512_unpacklo_epi32(s[0], s[1]), _mm512_unpackhi_epi32(s[0], s[1]));
    const __m512i v = _mm512_add_epi32(u, _mm512_shuffle_epi32(u, _MM_PERM_BADC));
    const __m256i isum = _mm256_sub_epi32(_mm512_castsi512_si256(_mm512_permutexvar_epi32(gather, v)),
                                          _mm256_set1_epi32(pa[b].off));
    const __m256 dd = _mm256_mul_ps(Scales8(w, b), _mm256_set1_ps(pa[b].da));
    acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(isum), dd));
  }
  alignas(32) float out[8];
  _mm256_store_ps(out, acc);
  for (int i = 0; i < 8; ++i)
    if (y[i] != nullptr) *y[i] = out[i];
}

// Tiles of 8 rows; a short last tile repeats its last row (results dropped).
template <typename ActBlock, typename Run>
void AllRows(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, int64_t nb, const ActBlock* pa,
             float* y, Run run) {
  for (int64_t r = 0; r < rows; r += 8) {
    const avx2::Rows8 g = avx2::RowGroup8(w, ws, rows, r, y);
    const uint8_t* const* wr = g.w;
    float* const* yr = g.y;
    run(wr, w + (r + 8) * ws, pa, nb, act, yr);
  }
}

}  // namespace

void DecodeAvx2Q4_0(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, int64_t n_in, float* y) {
  const int64_t nb = n_in / kQk;
  thread_local std::vector<ActBlock> scratch;
  if (scratch.size() < static_cast<size_t>(nb)) scratch.resize(static_cast<size_t>(nb));
  PrepareActs(act, nb, scratch.data());
  AllRows(w, ws, rows, act, nb, scratch.data(), y, RunAvx2Rows8);
}

void DecodeAvx512Q4_0(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, int64_t n_in, float* y) {
  const int64_t nb = n_in / kQk;
  thread_local std::vector<ActBlock> scratch;
  if (scratch.size() < static_cast<size_t>(nb)) scratch.resize(static_cast<size_t>(nb));
  PrepareActs(act, nb, scratch.data());
  AllRows(w, ws, rows, act, nb, scratch.data(), y, RunAvx512Rows8);
}

}  // namespace llamay::kernels
#endif  // __x86_64__
