// One-token (matrix-vector) Q4_0 kernels for AVX2 and AVX-512 VNNI: the decode path, bit-identical to the
// scalar reference (vec_dot.h's canonical order) and so to the batched tile kernels.
//
// The batched kernels unpack each 16-byte block of nibbles into 32 bytes in element order. Here nothing is
// reordered: the nibble bytes of several rows are loaded side by side, one row per 128-bit lane, and the
// (shared) activation is arranged to match instead:
//   low nibbles  & 0x0F      = elements 0..15 of the row, against activation bytes 0..15 in every lane
//   high nibbles >> 4 & 0x0F = elements 16..31,           against activation bytes 16..31
// A 4-byte group of a lane is then exactly one lane sum of vec_dot.h: the "low" register holds lane sums
// 0..3 of each row, the "high" register lane sums 4..7. Each is accumulated as the reference does
// (convert, times d_w * d_a, add; blocks in order) and the two are reduced with Reduce8's pairing at the
// end: s_k = l_k + l_(k+4), then (s_0 + s_2) + (s_1 + s_3).
//
// The offset of q - 8 is taken out exactly: per activation block the group sums times 8 are computed once
// (AVX2: int16 pair sums, subtracted before vpmaddwd; AVX-512: -8 x group sums as the vpdpbusd start).
// The f16 scales of 8 rows are gathered with scalar loads into one vector and converted together.
#if defined(__x86_64__)
#include <cstring>
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

uint16_t ScaleBits(const uint8_t* row, int64_t b) {
  uint16_t d;
  std::memcpy(&d, row + b * sizeof(BlockQ4_0), 2);
  return d;
}
const uint8_t* Nibbles(const uint8_t* row, int64_t b) { return row + b * sizeof(BlockQ4_0) + 2; }

// The f16 scales of block b of 8 rows, converted, as one vector (row i in lane i).
LLAMAY_AVX2_INLINE __m256 Scales8(const uint8_t* const* w, int64_t b) {
  uint64_t lo = 0, hi = 0;
  for (int i = 0; i < 4; ++i) lo |= static_cast<uint64_t>(ScaleBits(w[i], b)) << (16 * i);
  for (int i = 0; i < 4; ++i) hi |= static_cast<uint64_t>(ScaleBits(w[4 + i], b)) << (16 * i);
  return _mm256_cvtph_ps(_mm_set_epi64x(static_cast<int64_t>(hi), static_cast<int64_t>(lo)));
}

// ---- AVX2: two rows per register (one per 128-bit lane), four registers: 8 rows per tile.

struct alignas(32) Avx2ActBlock {
  __m256i off_lo, off_hi;  // int16 pair sums of 8 * a, bytes 0..15 (resp. 16..31) in both lanes
  float da;
};

LLAMAY_AVX2 void PrepareAvx2(const uint8_t* act, int64_t nb, Avx2ActBlock* out) {
  const __m256i eight = _mm256_set1_epi8(8);
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ8_0& a = reinterpret_cast<const BlockQ8_0*>(act)[b];
    out[b].off_lo = _mm256_maddubs_epi16(eight, _mm256_broadcastsi128_si256(
                                                    _mm_loadu_si128(reinterpret_cast<const __m128i*>(a.qs))));
    out[b].off_hi = _mm256_maddubs_epi16(
        eight, _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a.qs + 16))));
    out[b].da = avx2::F16(a.d);
  }
}

// Rows w[0..7] (a padded row repeats its neighbour; y[i] null drops it).
LLAMAY_AVX2 void RunAvx2Rows8(const uint8_t* const* w, const uint8_t* ahead, const Avx2ActBlock* pa,
                              int64_t nb, const uint8_t* act, float* const* y) {
  const __m256i low4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  __m256 acc_lo[4], acc_hi[4];
  __m256i idx[4];
  for (int g = 0; g < 4; ++g) {
    acc_lo[g] = acc_hi[g] = _mm256_setzero_ps();
    idx[g] = _mm256_setr_epi32(2 * g, 2 * g, 2 * g, 2 * g, 2 * g + 1, 2 * g + 1, 2 * g + 1, 2 * g + 1);
  }
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ8_0& ab = reinterpret_cast<const BlockQ8_0*>(act)[b];
    const __m256i a_lo = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ab.qs)));
    const __m256i a_hi =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ab.qs + 16)));
    const __m256 dd = _mm256_mul_ps(Scales8(w, b), _mm256_set1_ps(pa[b].da));
    PrefetchShare(ahead, b);
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      const uint8_t* n0 = Nibbles(w[2 * g], b);
      const uint8_t* n1 = Nibbles(w[2 * g + 1], b);
      const __m256i x = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(n1),
                                            reinterpret_cast<const __m128i*>(n0));
      const __m256i lo = _mm256_and_si256(x, low4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), low4);
      const __m256i s_lo =
          _mm256_madd_epi16(_mm256_sub_epi16(_mm256_maddubs_epi16(lo, a_lo), pa[b].off_lo), ones);
      const __m256i s_hi =
          _mm256_madd_epi16(_mm256_sub_epi16(_mm256_maddubs_epi16(hi, a_hi), pa[b].off_hi), ones);
      const __m256 d = _mm256_permutevar8x32_ps(dd, idx[g]);
      acc_lo[g] = _mm256_add_ps(acc_lo[g], _mm256_mul_ps(_mm256_cvtepi32_ps(s_lo), d));
      acc_hi[g] = _mm256_add_ps(acc_hi[g], _mm256_mul_ps(_mm256_cvtepi32_ps(s_hi), d));
    }
  }
  for (int g = 0; g < 4; ++g) {
    const __m256 s = _mm256_add_ps(acc_lo[g], acc_hi[g]);                        // s_k = l_k + l_k+4
    const __m256 t = _mm256_add_ps(s, _mm256_shuffle_ps(s, s, _MM_SHUFFLE(1, 0, 3, 2)));  // s0+s2, s1+s3
    const __m256 u = _mm256_add_ps(t, _mm256_shuffle_ps(t, t, _MM_SHUFFLE(2, 3, 0, 1)));  // t0 + t1
    alignas(32) float out[8];
    _mm256_store_ps(out, u);
    if (y[2 * g] != nullptr) *y[2 * g] = out[0];
    if (y[2 * g + 1] != nullptr) *y[2 * g + 1] = out[4];
  }
}

// ---- AVX-512: four rows per register, two registers: 8 rows per tile.

struct alignas(64) Avx512ActBlock {
  __m512i start_lo, start_hi;  // -8 x group sums of bytes 0..15 (resp. 16..31), in all four lanes
  float da;
};

LLAMAY_AVX512 void PrepareAvx512(const uint8_t* act, int64_t nb, Avx512ActBlock* out) {
  const __m512i eight = _mm512_set1_epi8(8);
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ8_0& a = reinterpret_cast<const BlockQ8_0*>(act)[b];
    const __m512i lo = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a.qs)));
    const __m512i hi = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a.qs + 16)));
    out[b].start_lo = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), eight, lo));
    out[b].start_hi = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), eight, hi));
    out[b].da = avx2::F16(a.d);
  }
}

LLAMAY_AVX512_INLINE __m512i Load4Rows(const uint8_t* n0, const uint8_t* n1, const uint8_t* n2,
                                       const uint8_t* n3) {
  const __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(n0)));
  const __m512i v1 = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(n1)), 1);
  const __m512i v2 = _mm512_inserti32x4(v1, _mm_loadu_si128(reinterpret_cast<const __m128i*>(n2)), 2);
  return _mm512_inserti32x4(v2, _mm_loadu_si128(reinterpret_cast<const __m128i*>(n3)), 3);
}

LLAMAY_AVX512 void RunAvx512Rows8(const uint8_t* const* w, const uint8_t* ahead, const Avx512ActBlock* pa,
                                  int64_t nb, const uint8_t* act, float* const* y) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i rep0 = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  const __m512i rep1 = _mm512_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7);
  __m512 acc_lo[2], acc_hi[2];
  for (int g = 0; g < 2; ++g) acc_lo[g] = acc_hi[g] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ8_0& ab = reinterpret_cast<const BlockQ8_0*>(act)[b];
    const __m512i a_lo = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ab.qs)));
    const __m512i a_hi = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ab.qs + 16)));
    const __m512 dd8 = _mm512_castps256_ps512(_mm256_mul_ps(Scales8(w, b), _mm256_set1_ps(pa[b].da)));
    PrefetchShare(ahead, b);
#pragma GCC unroll 2
    for (int g = 0; g < 2; ++g) {
      const uint8_t* n[4];
      for (int i = 0; i < 4; ++i) {
        n[i] = Nibbles(w[4 * g + i], b);
      }
      const __m512i x = Load4Rows(n[0], n[1], n[2], n[3]);
      const __m512i lo = _mm512_and_si512(x, low4);
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(x, 4), low4);
      const __m512i s_lo = _mm512_dpbusd_epi32(pa[b].start_lo, lo, a_lo);
      const __m512i s_hi = _mm512_dpbusd_epi32(pa[b].start_hi, hi, a_hi);
      const __m512 d = _mm512_permutexvar_ps(g == 0 ? rep0 : rep1, dd8);
      acc_lo[g] = _mm512_add_ps(acc_lo[g], _mm512_mul_ps(_mm512_cvtepi32_ps(s_lo), d));
      acc_hi[g] = _mm512_add_ps(acc_hi[g], _mm512_mul_ps(_mm512_cvtepi32_ps(s_hi), d));
    }
  }
  for (int g = 0; g < 2; ++g) {
    const __m512 s = _mm512_add_ps(acc_lo[g], acc_hi[g]);
    const __m512 t = _mm512_add_ps(s, _mm512_shuffle_ps(s, s, _MM_SHUFFLE(1, 0, 3, 2)));
    const __m512 u = _mm512_add_ps(t, _mm512_shuffle_ps(t, t, _MM_SHUFFLE(2, 3, 0, 1)));
    alignas(64) float out[16];
    _mm512_store_ps(out, u);
    for (int i = 0; i < 4; ++i)
      if (y[4 * g + i] != nullptr) *y[4 * g + i] = out[4 * i];
  }
}

// Tiles of 8 rows; a short last tile repeats its last row (results dropped).
template <typename ActBlock, typename Run>
void AllRows(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, int64_t nb, const ActBlock* pa,
             float* y, Run run) {
  for (int64_t r = 0; r < rows; r += 8) {
    const uint8_t* wr[8];
    float* yr[8];
    for (int64_t i = 0; i < 8; ++i) {
      const bool pad = r + i >= rows;
      wr[i] = w + (pad ? rows - 1 : r + i) * ws;
      yr[i] = pad ? nullptr : y + r + i;
    }
    run(wr, w + (r + 8) * ws, pa, nb, act, yr);
  }
}

}  // namespace

void DecodeAvx2Q4_0(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, int64_t n_in, float* y) {
  const int64_t nb = n_in / kQk;
  thread_local std::vector<Avx2ActBlock> scratch;
  if (scratch.size() < static_cast<size_t>(nb)) scratch.resize(static_cast<size_t>(nb));
  PrepareAvx2(act, nb, scratch.data());
  AllRows(w, ws, rows, act, nb, scratch.data(), y, RunAvx2Rows8);
}

void DecodeAvx512Q4_0(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, int64_t n_in, float* y) {
  const int64_t nb = n_in / kQk;
  thread_local std::vector<Avx512ActBlock> scratch;
  if (scratch.size() < static_cast<size_t>(nb)) scratch.resize(static_cast<size_t>(nb));
  PrepareAvx512(act, nb, scratch.data());
  AllRows(w, ws, rows, act, nb, scratch.data(), y, RunAvx512Rows8);
}

}  // namespace llamay::kernels
#endif  // __x86_64__
