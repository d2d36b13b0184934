// One-token (matrix-vector) Q4_K kernel for AVX-512 VNNI: the decode path of the most common K-quant,
// bit-identical to the scalar reference (vec_dot.h's canonical order: per super-block the exact integers
// sumi = sum over sub-blocks of scale * (sum of q * a) and smin = sum of min * (sum of a), then
// acc = acc + (float(sumi) * (d_w * d_a) - float(smin) * (dmin_w * d_a)), super-blocks in order).
//
// The AVX2 kernel (matmul_avx2_k.cc) widens every 32 products with vpmaddubsw and meets the scales with
// vpmaddwd per sub-block, two rows at a time, and reduces each row's sums on its own: about 0.6 instructions
// per weight byte, which on two threads leaves decode short of the memory bandwidth. Here, per row and
// super-block (144 bytes):
//   - the 128 nibble bytes are two 64-byte loads, and unpacked without reordering: the low nibbles of bytes
//     0..31 are sub-block 0, of bytes 32..63 sub-block 2, the high nibbles sub-blocks 1 and 3, and so on;
//     the activation's 256 bytes are rearranged once per call to match (Acts);
//   - four vpdpbusd give each 256-bit half one sub-block's eight int32 partial sums (of 4 products each, at
//     most 4 * 15 * 128 = 7680 in magnitude), and four vpdpwssd meet them with the sub-block scales: a
//     partial sum fits int16, so its int32 lane read as the int16 pair (sum, sign) against the pair
//     (scale, 0) adds sum * scale exactly;
//   - the scales of the 8 sub-blocks are unpacked as the AVX2 kernel does (UnpackScalesMinsK4) and spread
//     to the halves with vpermd; smin is one vpmaddwd of the mins against the activation's sub-block sums.
// Four rows make a tile: their sums are reduced together (transpose and add), and the f32 step runs for
// the four rows at once in the reference's order (mul, mul, sub, add; no FMA). Rows are contiguous in a
// weight matrix, so while a tile reads block b it prefetches the same share of the tile two ahead.
#if defined(__x86_64__)
#include <cstddef>
#include <vector>

#include "kernels/avx2_util.h"
#include "kernels/avx512_util.h"
#include "kernels/matmul_kernels.h"
#include "kernels/quant_blocks.h"

namespace llamay::kernels {
namespace {

constexpr int kTileRows = 4;
constexpr int kAheadRows = 2 * kTileRows;  // the prefetch runs this many rows ahead

// The activation of one super-block as the kernel reads it: the bytes of sub-blocks (0, 2), (1, 3), (4, 6)
// and (5, 7) in four registers, each sub-block in a 256-bit half; the sub-blocks' byte sums as int16 (at
// most 32 * 128 in magnitude); its scale.
struct alignas(64) ActBlock {
  __m512i q[4];
  __m128i sums;
  float d;
};

LLAMAY_AVX512 void PrepareActs(const uint8_t* act, int64_t nb, ActBlock* out) {
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ8_K& a = reinterpret_cast<const BlockQ8_K*>(act)[b];
    constexpr int kFirst[4][2] = {{0, 2}, {1, 3}, {4, 6}, {5, 7}};  // the sub-blocks of each register
    for (int k = 0; k < 4; ++k) {
      const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs + 32 * kFirst[k][0]));
      const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs + 32 * kFirst[k][1]));
      out[b].q[k] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    }
    // bsums are sums of 16: sub-block s is bsums[2s] + bsums[2s + 1] (pairs added with vpmaddwd by ones).
    const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums));
    const __m256i s32 = _mm256_madd_epi16(bsums, _mm256_set1_epi16(1));  // 8 int32
    out[b].sums = _mm_packs_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
    out[b].d = a.d;
  }
}

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
LLAMAY_AVX512_INLINE __m128 Gather4F16(const uint8_t* const* w, int64_t b, size_t offset) {
  uint64_t v = 0;
  for (int i = 0; i < kTileRows; ++i) {
    uint16_t h;
    __builtin_memcpy(&h, w[i] + b * static_cast<int64_t>(sizeof(BlockQ4_K)) + offset, 2);
    v |= static_cast<uint64_t>(h) << (16 * i);
  }
  return _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<int64_t>(v)));
}

// Rows w[0..3] (a padded row repeats its neighbour; y[i] null drops it).
LLAMAY_AVX512 void RunRows4(const uint8_t* const* w, const uint8_t* ahead, const ActBlock* pa, int64_t nb,
                            float* const* y) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  // vpermd indices: the scale of sub-blocks (0, 2), (1, 3), (4, 6), (5, 7), each over a 256-bit half.
  const __m512i spread[4] = {_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2),
                             _mm512_setr_epi32(1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3),
                             _mm512_setr_epi32(4, 4, 4, 4, 4, 4, 4, 4, 6, 6, 6, 6, 6, 6, 6, 6),
                             _mm512_setr_epi32(5, 5, 5, 5, 5, 5, 5, 5, 7, 7, 7, 7, 7, 7, 7, 7)};
  __m128 acc = _mm_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const ActBlock& a = pa[b];
    const char* next =
        reinterpret_cast<const char*>(ahead) + b * kTileRows * static_cast<int64_t>(sizeof(BlockQ4_K));
    for (size_t off = 0; off < kTileRows * sizeof(BlockQ4_K); off += 64)
      _mm_prefetch(next + off, _MM_HINT_T0);
    __m512i sumi[kTileRows];
    __m128i smin[kTileRows];
#pragma GCC unroll 4
    for (int r = 0; r < kTileRows; ++r) {
      const auto& blk = reinterpret_cast<const BlockQ4_K*>(w[r])[b];
      uint64_t sc8, mn8;
      UnpackScalesMinsK4(blk.scales, &sc8, &mn8);
      const __m512i sc = _mm512_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(sc8)));
      const __m512i x0 = _mm512_loadu_si512(blk.qs), x1 = _mm512_loadu_si512(blk.qs + 64);
      const __m512i q[4] = {_mm512_and_si512(x0, low4), _mm512_and_si512(_mm512_srli_epi16(x0, 4), low4),
                            _mm512_and_si512(x1, low4), _mm512_and_si512(_mm512_srli_epi16(x1, 4), low4)};
      __m512i s = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const __m512i part = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[k], a.q[k]);
        s = _mm512_dpwssd_epi32(s, part, _mm512_permutexvar_epi32(spread[k], sc));
      }
      sumi[r] = s;
      smin[r] = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(mn8))), a.sums);
    }
    const __m128i isum = Hsum4x16(sumi);
    const __m128i imin = _mm_hadd_epi32(_mm_hadd_epi32(smin[0], smin[1]), _mm_hadd_epi32(smin[2], smin[3]));
    const __m128 da = _mm_set1_ps(a.d);
    const __m128 dd = _mm_mul_ps(Gather4F16(w, b, offsetof(BlockQ4_K, d)), da);
    const __m128 dm = _mm_mul_ps(Gather4F16(w, b, offsetof(BlockQ4_K, dmin)), da);
    acc = _mm_add_ps(
        acc, _mm_sub_ps(_mm_mul_ps(_mm_cvtepi32_ps(isum), dd), _mm_mul_ps(_mm_cvtepi32_ps(imin), dm)));
  }
  alignas(16) float out[kTileRows];
  _mm_store_ps(out, acc);
  for (int i = 0; i < kTileRows; ++i)
    if (y[i] != nullptr) *y[i] = out[i];
}

}  // namespace

void DecodeAvx512Q4_K(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, int64_t n_in, float* y) {
  const int64_t nb = n_in / kQkK;
  thread_local std::vector<ActBlock> scratch;
  if (scratch.size() < static_cast<size_t>(nb)) scratch.resize(static_cast<size_t>(nb));
  PrepareActs(act, nb, scratch.data());
  for (int64_t r = 0; r < rows; r += kTileRows) {
    const uint8_t* wr[kTileRows];
    float* yr[kTileRows];
    for (int64_t i = 0; i < kTileRows; ++i) {
      const bool pad = r + i >= rows;
      wr[i] = w + (pad ? rows - 1 : r + i) * ws;
      yr[i] = pad ? nullptr : y + r + i;
    }
    RunRows4(wr, w + (r + kAheadRows) * ws, scratch.data(), nb, yr);
  }
}

}  // namespace llamay::kernels
#endif  // __x86_64__
