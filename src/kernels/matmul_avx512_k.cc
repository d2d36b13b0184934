// AVX-512 (BW + VNNI) tile kernels for the super-block types against Q8_K activations with several tokens:
// Q4_K, Q5_K, Q6_K, Q3_K, Q2_K and IQ4_XS. The design of TilePackedK45 in matmul_avx2_k.cc with 16 rows in
// the 16 int32 lanes of a zmm instead of 8 in a ymm. One token (decode) of Q4_K, Q5_K and Q6_K has a kernel
// of its own (matmul_decode_k.cc); the others stay on the AVX2 kernels (TileAvx2Q3_K and the rest): they
// stream the weights, prefetching ahead, and have nothing to amortise a transposition over. Measured for
// Q3_K, Q2_K and IQ4_XS on Sapphire Rapids, one thread: with the weights in cache the packed kernel would be
// faster for one token too (Q3_K 1.4-1.9x, IQ4_XS 1.2-1.7x, Q2_K the same), but a decode reads them from
// memory, and there (kernels_bench BM_DecodeStream, 512 MiB) the AVX2 kernels are 1.1x (Q3_K) to 1.6x (Q2_K,
// IQ4_XS) faster; with 8 tokens the packed kernels are 2.1-2.7x faster there.
//
// How they reach the reference's bits (reference/dot_ref.cc, vec_dot.h's canonical order): everything
// before the per-super-block f32 step is exact integer arithmetic, so any order gives the same sumi and
// smin. Per 16-row group and super-block, the weights are unpacked and transposed once per tile into a
// per-thread buffer (Pack), so that register i holds elements 4i..4i+3 of row r in lane r as unsigned bytes
// (i < 64: the whole super-block). Per token, vpdpbusd against 4-byte activation broadcasts (from memory)
// forms exact int32 sums, which meet the sub-block scales (int32 per lane) in one of three ways (Scale):
//   - kPair16, Q4_K and Q3_K: a run of four vpdpbusd (16 elements: at most 16 x 15 x 128 = 30720 in
//     magnitude, so it fits int16), then one vpdpwssd into sumi against the scale as the int16 pair (sc, 0):
//     the low word of the run's sum times sc, plus its high word times 0;
//   - kMul32, Q5_K and IQ4_XS: a run of eight vpdpbusd (a sub-block of 32, whose sum can pass int16), then
//     vpmulld by the scale and vpaddd into sumi; Q6_K the same with runs of four (sub-blocks of 16);
//   - kNone, Q2_K: the scale (4 bits, unsigned) is multiplied into the weights when they are packed (sc x q
//     <= 15 x 3 fits a byte), so the 64 vpdpbusd add straight into sumi.
// The types with signed values store them offset to unsigned bytes (Q3_K q + 4, Q6_K q + 32, IQ4_XS its grid
// value + 128): their runs start from -offset x the sub-block's activation sum (from bsums, once per tile:
// TokenTable), so that each run ends at the exact sum of the signed values times the activations (Q3_K:
// |.| <= 8192).
// Measured on Sapphire Rapids for Q4_K/Q5_K against the AVX2 route of vpmaddubsw summed in int16, then
// vpmaddwd/vpdpwssd against the scales: the vpdpbusd + vpmulld form was 5-10% faster at 512 tokens (the same
// at 8), and Q4_K's vpdpwssd form another 0-10%. Starting the runs from the offset terms, rather than
// subtracting them at the end with vpdpwssd of the scales against the bsums, made IQ4_XS 8-10% faster.
// smin (Q4_K, Q5_K, Q2_K) is four or eight vpdpwssd of the rows' mins, as int16 pairs, against the token's
// pairs of activation sums. Then the f32 step of the reference for 16 rows at once, in its order:
// dd = d_w * d_a [dm = dmin_w * d_a], acc = acc + (float(sumi) * dd - float(smin) * dm) or
// acc = acc + float(sumi) * dd: mul, [mul, sub,] add, no FMA (the library builds with -ffp-contract=off, and
// every operation here is a separate intrinsic).
//
// Row edge: rows come in groups of 16; the last group's missing rows read the last row again (clamped row
// pointers, no copy) and their lanes are left out by a masked store.
#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "kernels/avx512_util.h"
#include "kernels/matmul_kernels.h"
#include "kernels/quant_blocks.h"

namespace llamay::kernels {
namespace {

constexpr int kGroup = 16;  // rows per register: one per lane
// Tokens per register tile (10 spills: 1.5x slower at 512 tokens).
constexpr int kPackedTokens = 8;

// p[r] + off: 16 bytes of row r (r < 16) -> out[k]: dword k of rows 0..15 (row r in lane r). The 128-bit
// lane L of x[i] holds row 4L + i, so the per-lane transpose leaves row 4L + i in dword 4L + i.
LLAMAY_AVX512_INLINE void LoadTransposed16(const uint8_t* const* p, size_t off, __m512i* out) {
  __m512i x[4];
  for (int i = 0; i < 4; ++i)
    x[i] = avx512::Load4x128(p[i] + off, p[4 + i] + off, p[8 + i] + off, p[12 + i] + off);
  avx512::Transpose4x4(x, out);
}

// A 128-bit byte-shuffle mask in every lane, from its four dwords.
LLAMAY_AVX512_INLINE __m512i Mask4(uint32_t d0, uint32_t d1, uint32_t d2, uint32_t d3) {
  return _mm512_set4_epi32(static_cast<int>(d3), static_cast<int>(d2), static_cast<int>(d1),
                           static_cast<int>(d0));
}
// Dword m of each lane: bytes b0 + 4m, b1 + 4m, b2 + 4m, b3 + 4m (0x80: zero).
LLAMAY_AVX512_INLINE __m512i DwordMask(int b0, int b1, int b2, int b3) {
  uint32_t d[4];
  for (int m = 0; m < 4; ++m) {
    auto at = [&](int b) { return static_cast<uint32_t>(b < 0 ? 0x80 : b + 4 * m); };
    d[m] = at(b0) | (at(b1) << 8) | (at(b2) << 16) | (at(b3) << 24);
  }
  return Mask4(d[0], d[1], d[2], d[3]);
}

// The f16 in the low word of each lane, converted.
LLAMAY_AVX512_INLINE __m512 LowHalfF16(__m512i v) { return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v)); }

// How a run's exact sum meets its sub-block scale (see the top of the file).
enum class Scale { kNone, kPair16, kMul32 };

// One super-block of 16 rows, packed: kScales scale registers and kPairs int16-pair registers.
template <int kScales, int kPairs>
struct alignas(64) Packed16 {
  __m512i q[64];                           // register i: elements 4i..4i+3 of row r in lane r (unsigned)
  __m512i sc[kScales];                     // lane r: the run's sub-block scale as int32 (the pair (sc, 0))
  __m512i pairs[kPairs > 0 ? kPairs : 1];  // register k: lane r = the mins (mn_2k, mn_2k+1) as int16
  __m512 d, dmin;                          // lane r: row r's f16 d and dmin, converted
};

// Each kernel K below: Block; Packed; Pack(w, b, out) packs super-block b of the 16 rows w[0..15]; kScale;
// kRun (registers per run of vpdpbusd) and kPerScale (registers per scale register); kTokenInts int32 per
// token and super-block, TokenInts(a, out) computes them once per tile (TokenTable); kStarts: they are the
// starting values of the runs (the offset terms); kPairs: 4 (from TokenInts) or 8 (two adjacent bsums each)
// int16 pairs of activation sums against the mins; kHasMin.

// Q4_K (kFive = false) and Q5_K (kFive = true): 8 sub-blocks of 32 with 6-bit scales and mins.
template <typename B, bool kFive>
struct K45 {
  using Block = B;
  using Packed = Packed16<8, 4>;
  static constexpr Scale kScale = kFive ? Scale::kMul32 : Scale::kPair16;
  static constexpr int kRun = kFive ? 8 : 4, kPerScale = 8, kTokenInts = 4, kPairs = 4;
  static constexpr bool kHasMin = true, kStarts = false;
  // The sums of sub-blocks 2k, 2k+1 as an int16 pair (|.| <= 4096).
  static void TokenInts(const BlockQ8_K& a, int32_t* out) {
    for (int k = 0; k < 4; ++k) {
      const int32_t lo = a.bsums[4 * k] + a.bsums[4 * k + 1], hi = a.bsums[4 * k + 2] + a.bsums[4 * k + 3];
      out[k] = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint16_t>(lo)) |
                                    (static_cast<uint32_t>(static_cast<uint16_t>(hi)) << 16));
    }
  }

  LLAMAY_AVX512_INLINE static void Pack(const uint8_t* const* w, int64_t b, Packed* out) {
    const uint8_t* blk[kGroup];
    for (int r = 0; r < kGroup; ++r) blk[r] = w[r] + b * sizeof(Block);
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    __m512i qh[8];
    if constexpr (kFive) {
      LoadTransposed16(blk, offsetof(Block, qh), qh);
      LoadTransposed16(blk, offsetof(Block, qh) + 16, qh + 4);
    }
    for (int c = 0; c < 4; ++c) {  // qs bytes 32c..32c+31: sub-blocks 2c (low nibbles) and 2c + 1 (high)
      __m512i raw[8];
      LoadTransposed16(blk, offsetof(Block, qs) + 32 * c, raw);
      LoadTransposed16(blk, offsetof(Block, qs) + 32 * c + 16, raw + 4);
      for (int j = 0; j < 8; ++j) {
        __m512i lo = _mm512_and_si512(raw[j], low4),
                hi = _mm512_and_si512(_mm512_srli_epi16(raw[j], 4), low4);
        if constexpr (kFive) {
          // Bit s of each qh byte to bit 4 (shifts of at most 4 keep bit 4 within its byte).
          const __m512i bit4 = _mm512_set1_epi8(0x10);
          const int s = 2 * c;
          lo = _mm512_or_si512(
              lo, _mm512_and_si512(s <= 4 ? _mm512_slli_epi16(qh[j], 4 - s) : _mm512_srli_epi16(qh[j], s - 4),
                                   bit4));
          hi = _mm512_or_si512(
              hi, _mm512_and_si512(
                      s + 1 <= 4 ? _mm512_slli_epi16(qh[j], 3 - s) : _mm512_srli_epi16(qh[j], s - 3), bit4));
        }
        out->q[8 * (2 * c) + j] = lo;
        out->q[8 * (2 * c + 1) + j] = hi;
      }
    }
    // Bytes 0..15 of each block: (d, dmin), then the scale words a, b, c of UnpackScalesMinsK4.
    __m512i f[4];
    LoadTransposed16(blk, 0, f);
    const __m512i m6 = _mm512_set1_epi8(0x3F), m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    const __m512i sc_lo = _mm512_and_si512(f[1], m6), mn_lo = _mm512_and_si512(f[2], m6);
    const __m512i sc_hi =
        _mm512_or_si512(_mm512_and_si512(f[3], m4), _mm512_and_si512(_mm512_srli_epi32(f[1], 2), m30));
    const __m512i mn_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(f[3], 4), m4),
                                          _mm512_and_si512(_mm512_srli_epi32(f[2], 2), m30));
    for (int s = 0; s < 8; ++s) {
      const int i = s & 3;
      out->sc[s] = _mm512_shuffle_epi8(s < 4 ? sc_lo : sc_hi, DwordMask(i, -1, -1, -1));
    }
    for (int k = 0; k < 4; ++k) {  // (mn_2k, mn_2k+1)
      const int i = 2 * (k & 1);
      out->pairs[k] = _mm512_shuffle_epi8(k < 2 ? mn_lo : mn_hi, DwordMask(i, -1, i + 1, -1));
    }
    // f[0] lane r = d | dmin << 16.
    out->d = LowHalfF16(f[0]);
    out->dmin = LowHalfF16(_mm512_srli_epi32(f[0], 16));
  }
};

// The 2-bit values of Q2_K and Q3_K: bits 2k..2k+1 of qs[32h + l] are element 128h + 32k + l, so the 16
// bytes qs[16c..16c+15] (transposed: raw[j], bytes 4j..4j+3) hold elements 4j..4j+3 of sub-block
// s = 8h + 2k + c % 2 (h = c / 2), which go to out[4s + j]. With hm (Q3_K: hm[4i + j], hmask bytes
// 16i + 4j.. transposed), bit 4h + k of hmask[l] becomes bit 2 (q + 4); with sw (Q2_K), the values of
// sub-block s are multiplied by the int16 words of sw[s].
LLAMAY_AVX512_INLINE void UnpackTwoBits(const uint8_t* const* blk, size_t qs, const __m512i* hm,
                                        const __m512i* sw, __m512i* out) {
  const __m512i three = _mm512_set1_epi8(3), four = _mm512_set1_epi8(4);
  for (int c = 0; c < 4; ++c) {
    __m512i raw[4];
    LoadTransposed16(blk, qs + 16 * c, raw);
    for (int k = 0; k < 4; ++k) {
      const int s = 8 * (c / 2) + 2 * k + c % 2, n = 4 * (c / 2) + k;
      for (int j = 0; j < 4; ++j) {
        __m512i v = _mm512_and_si512(_mm512_srli_epi16(raw[j], 2 * k), three);
        if (hm != nullptr) {  // 16-bit shifts of at most 5 keep bit 2 of each byte within its byte
          const __m512i h = hm[4 * (c % 2) + j];
          v = _mm512_or_si512(
              v, _mm512_and_si512(n >= 2 ? _mm512_srli_epi16(h, n - 2) : _mm512_slli_epi16(h, 2 - n), four));
        }
        if (sw != nullptr) v = _mm512_mullo_epi16(v, sw[s]);
        out[4 * s + j] = v;
      }
    }
  }
}

// Q2_K: 16 sub-blocks of 16 with 4-bit scales and mins; q in [0, 3] at bits 2k..2k+1 of qs[32h + l] for
// element 128h + 32k + l. The scales are multiplied into the packed bytes (sc x q <= 45), so sumi is the
// plain sum of the 64 vpdpbusd; the pairs are the mins (mn_2k, mn_2k+1) against (bsums[2k], bsums[2k+1]).
struct Q2K {
  using Block = BlockQ2_K;
  using Packed = Packed16<1, 8>;
  static constexpr Scale kScale = Scale::kNone;
  static constexpr int kRun = 64, kPerScale = 64, kTokenInts = 0, kPairs = 8;
  static constexpr bool kHasMin = true, kStarts = false;
  static void TokenInts(const BlockQ8_K&, int32_t*) {}

  LLAMAY_AVX512_INLINE static void Pack(const uint8_t* const* w, int64_t b, Packed* out) {
    const uint8_t* blk[kGroup];
    for (int r = 0; r < kGroup; ++r) blk[r] = w[r] + b * sizeof(Block);
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    __m512i f[4];  // f[m] byte i: scales[4m + i] (scale in the low nibble, min in the high one)
    LoadTransposed16(blk, offsetof(Block, scales), f);
    // sc_s of row r in both words of lane r: one vpmullw scales both bytes of each word (q_lo x sc <= 45
    // does not carry into the high byte).
    __m512i sw[16];
    for (int s = 0; s < 16; ++s)
      sw[s] = _mm512_shuffle_epi8(_mm512_and_si512(f[s / 4], low4), DwordMask(s % 4, -1, s % 4, -1));
    UnpackTwoBits(blk, offsetof(Block, qs), nullptr, sw, out->q);
    for (int k = 0; k < 8; ++k) {  // (mn_2k, mn_2k+1)
      const int i = 2 * (k & 1);
      const __m512i mn = _mm512_and_si512(_mm512_srli_epi16(f[k / 2], 4), low4);
      out->pairs[k] = _mm512_shuffle_epi8(mn, DwordMask(i, -1, i + 1, -1));
    }
    // Bytes 68..83 (the block's last 16): dword 3 is d | dmin << 16.
    __m512i e[4];
    LoadTransposed16(blk, sizeof(Block) - 16, e);
    out->d = LowHalfF16(e[3]);
    out->dmin = LowHalfF16(_mm512_srli_epi32(e[3], 16));
  }
};

// Q3_K: as Q2_K with a third bit (hmask) and 6-bit signed scales sc - 32, no min. The packed bytes are
// q + 4 in [0, 7] (lo | hbit << 2); the run of sub-block s starts from -4 x bsums[s], so that it ends at the
// exact sum of q x a (|.| <= 16 x 4 x 128 = 8192, which fits int16 for vpdpwssd).
struct Q3K {
  using Block = BlockQ3_K;
  using Packed = Packed16<16, 0>;
  static constexpr Scale kScale = Scale::kPair16;
  static constexpr int kRun = 4, kPerScale = 4, kTokenInts = 16, kPairs = 0;
  static constexpr bool kHasMin = false, kStarts = true;
  static void TokenInts(const BlockQ8_K& a, int32_t* out) {
    for (int s = 0; s < 16; ++s) out[s] = -4 * a.bsums[s];
  }

  LLAMAY_AVX512_INLINE static void Pack(const uint8_t* const* w, int64_t b, Packed* out) {
    const uint8_t* blk[kGroup];
    for (int r = 0; r < kGroup; ++r) blk[r] = w[r] + b * sizeof(Block);
    __m512i hm[8];  // hm[4i + j]: hmask bytes 16i + 4j..16i + 4j + 3
    LoadTransposed16(blk, offsetof(Block, hmask), hm);
    LoadTransposed16(blk, offsetof(Block, hmask) + 16, hm + 4);
    UnpackTwoBits(blk, offsetof(Block, qs), hm, nullptr, out->q);
    // Bytes 94..109 (the block's last 16): qs[62..63], scales[0..11], d. The scale words a, b, c of
    // UnpackScalesQ3K start at byte 96: two bytes into dword 0.
    __m512i f[4];
    LoadTransposed16(blk, sizeof(Block) - 16, f);
    const __m512i a = _mm512_or_si512(_mm512_srli_epi32(f[0], 16), _mm512_slli_epi32(f[1], 16));
    const __m512i bw = _mm512_or_si512(_mm512_srli_epi32(f[1], 16), _mm512_slli_epi32(f[2], 16));
    const __m512i cw = _mm512_or_si512(_mm512_srli_epi32(f[2], 16), _mm512_slli_epi32(f[3], 16));
    const __m512i lo4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    __m512i g[4];  // g[m] byte i: the scale of sub-block 4m + i (offset by 32)
    g[0] = _mm512_or_si512(_mm512_and_si512(a, lo4), _mm512_and_si512(_mm512_slli_epi32(cw, 4), m30));
    g[1] = _mm512_or_si512(_mm512_and_si512(bw, lo4), _mm512_and_si512(_mm512_slli_epi32(cw, 2), m30));
    g[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(a, 4), lo4), _mm512_and_si512(cw, m30));
    g[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(bw, 4), lo4),
                           _mm512_and_si512(_mm512_srli_epi32(cw, 2), m30));
    // (sc - 32, 0) as int16: 32 subtracted from the low word only.
    for (int s = 0; s < 16; ++s)
      out->sc[s] = _mm512_sub_epi16(_mm512_shuffle_epi8(g[s / 4], DwordMask(s % 4, -1, -1, -1)),
                                    _mm512_set1_epi32(32));
    out->d = LowHalfF16(_mm512_srli_epi32(f[3], 16));
  }
};

// IQ4_XS: 8 sub-blocks of 32 with 6-bit signed scales ls - 32, no min. The packed bytes are the grid values
// plus 128 (one vpshufb of the nibbles against the offset grid); the run of sub-block s starts from
// -128 x (bsums[2s] + bsums[2s + 1]), so that it ends at the exact sum of value x a.
struct IQ4XS {
  using Block = BlockIQ4_XS;
  using Packed = Packed16<8, 0>;
  static constexpr Scale kScale = Scale::kMul32;
  static constexpr int kRun = 8, kPerScale = 8, kTokenInts = 8, kPairs = 0;
  static constexpr bool kHasMin = false, kStarts = true;
  static void TokenInts(const BlockQ8_K& a, int32_t* out) {
    for (int s = 0; s < 8; ++s) out[s] = -128 * (a.bsums[2 * s] + a.bsums[2 * s + 1]);
  }

  LLAMAY_AVX512_INLINE static void Pack(const uint8_t* const* w, int64_t b, Packed* out) {
    const uint8_t* blk[kGroup];
    for (int r = 0; r < kGroup; ++r) blk[r] = w[r] + b * sizeof(Block);
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    const __m512i grid = _mm512_xor_si512(
        _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4NlValues))),
        _mm512_set1_epi8(-128));
    for (int s = 0; s < 8; ++s) {  // qs[16s..16s+15]: elements 0..15 (low nibbles), 16..31 (high)
      __m512i raw[4];
      LoadTransposed16(blk, offsetof(Block, qs) + 16 * s, raw);
      for (int j = 0; j < 4; ++j) {
        out->q[8 * s + j] = _mm512_shuffle_epi8(grid, _mm512_and_si512(raw[j], low4));
        out->q[8 * s + 4 + j] =
            _mm512_shuffle_epi8(grid, _mm512_and_si512(_mm512_srli_epi16(raw[j], 4), low4));
      }
    }
    // f[0] lane r = d | scales_h << 16, f[1] = scales_l: ls_s = nibble s of scales_l | bits 2s..2s+1 of
    // scales_h << 4 (ScaleIQ4_XS).
    __m512i f[4];
    LoadTransposed16(blk, 0, f);
    const __m512i sh = _mm512_srli_epi32(f[0], 16);
    for (int s = 0; s < 8; ++s) {
      const __m512i ls = _mm512_or_si512(
          _mm512_and_si512(_mm512_srli_epi32(f[1], 4 * s), _mm512_set1_epi32(0xF)),
          _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(sh, 2 * s), _mm512_set1_epi32(3)), 4));
      out->sc[s] = _mm512_sub_epi32(ls, _mm512_set1_epi32(32));
    }
    out->d = LowHalfF16(f[0]);
  }
};

// Q6_K: 16 sub-blocks of 16 with int8 scales, no min; element 128h + 32k + l is the nibble k / 2 of
// ql[64h + 32(k % 2) + l] with bits 2k..2k+1 of qh[32h + l] above it. The packed bytes are q + 32 in
// [0, 63]; the run of sub-block s starts from -32 x bsums[s], so that it ends at the exact sum of q x a
// (|.| <= 16 x 32 x 128 = 65536, past int16: the scale is applied with vpmulld).
struct Q6K {
  using Block = BlockQ6_K;
  using Packed = Packed16<16, 0>;
  static constexpr Scale kScale = Scale::kMul32;
  static constexpr int kRun = 4, kPerScale = 4, kTokenInts = 16, kPairs = 0;
  static constexpr bool kHasMin = false, kStarts = true;
  static void TokenInts(const BlockQ8_K& a, int32_t* out) {
    for (int s = 0; s < 16; ++s) out[s] = -32 * a.bsums[s];
  }

  LLAMAY_AVX512_INLINE static void Pack(const uint8_t* const* w, int64_t b, Packed* out) {
    const uint8_t* blk[kGroup];
    for (int r = 0; r < kGroup; ++r) blk[r] = w[r] + b * sizeof(Block);
    const __m512i low4 = _mm512_set1_epi8(0x0F), three = _mm512_set1_epi8(3);
    for (int h = 0; h < 2; ++h) {
      __m512i ql[16], qh[8];  // dword i: bytes 4i..4i+3 of this half's ql (64 bytes) and qh (32 bytes)
      for (int c = 0; c < 4; ++c) LoadTransposed16(blk, offsetof(Block, ql) + 64 * h + 16 * c, ql + 4 * c);
      for (int c = 0; c < 2; ++c) LoadTransposed16(blk, offsetof(Block, qh) + 32 * h + 16 * c, qh + 4 * c);
      for (int k = 0; k < 4; ++k) {
        for (int m = 0; m < 8; ++m) {  // elements 128h + 32k + 4m..4m+3: register 32h + 8k + m
          const __m512i lo = _mm512_and_si512(_mm512_srli_epi32(ql[8 * (k % 2) + m], 4 * (k / 2)), low4);
          const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(qh[m], 2 * k), three);
          out->q[32 * h + 8 * k + m] = _mm512_or_si512(lo, _mm512_slli_epi32(hi, 4));
        }
      }
    }
    __m512i f[4];  // f[m] byte i: scales[4m + i]
    LoadTransposed16(blk, offsetof(Block, scales), f);
    for (int sb = 0; sb < 16; ++sb)
      out->sc[sb] = _mm512_srai_epi32(_mm512_slli_epi32(f[sb / 4], 24 - 8 * (sb % 4)), 24);
    // Bytes 194..209 (the block's last 16): d is the high word of dword 3.
    __m512i e[4];
    LoadTransposed16(blk, sizeof(Block) - 16, e);
    out->d = LowHalfF16(_mm512_srli_epi32(e[3], 16));
  }
};

// 16 packed rows x T tokens. ti[(t * nb + b) * K::kTokenInts + i]: TokenInts of token t, super-block b.
// y + t * ys: row r of token t in lane r, lanes in m only.
template <class K, int T>
LLAMAY_AVX512 void RunPacked(const typename K::Packed* pk, const uint8_t* act, size_t as, const int32_t* ti,
                             int64_t nb, float* y, size_t ys, __mmask16 m, const uint8_t* ahead) {
  using Block = typename K::Block;
  constexpr int kRun = K::kRun;
  const BlockQ8_K* ab[T];
  for (int t = 0; t < T; ++t) ab[t] = reinterpret_cast<const BlockQ8_K*>(act + t * as);
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const typename K::Packed& p = pk[b];
    if (ahead != nullptr) {
      // The next 16 rows, which the next packing reads (the weights may come from memory): rows are usually
      // contiguous, so a share of 16 blocks per block.
      const char* next =
          reinterpret_cast<const char*>(ahead) + b * kGroup * static_cast<int64_t>(sizeof(Block));
      for (int off = 0; off < kGroup * static_cast<int>(sizeof(Block)); off += 64)
        _mm_prefetch(next + off, _MM_HINT_T0);
    }
    const int8_t* a[T];
    const int32_t* tb[T];  // the token's TokenInts for this super-block
    for (int t = 0; t < T; ++t) {
      a[t] = ab[t][b].qs;
      tb[t] = ti + (t * nb + b) * K::kTokenInts;
    }
    __m512i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
#pragma GCC unroll 16
    for (int j0 = 0; j0 < 64; j0 += kRun) {
      if constexpr (K::kScale == Scale::kNone) {
#pragma GCC unroll 64
        for (int j = j0; j < j0 + kRun; ++j) {
          const __m512i q = p.q[j];
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) {
            isum[t] = _mm512_dpbusd_epi32(isum[t], q, _mm512_set1_epi32(avx512::Load32(a[t] + 4 * j)));
            __asm__("" : "+v"(isum[t]));
          }
        }
      } else {
        __m512i s32[T];
#pragma GCC unroll 8
        for (int j = j0; j < j0 + kRun; ++j) {
          const __m512i q = p.q[j];
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) {
            const __m512i start = K::kStarts ? _mm512_set1_epi32(tb[t][j0 / kRun]) : _mm512_setzero_si512();
            s32[t] = _mm512_dpbusd_epi32(j == j0 ? start : s32[t], q,
                                         _mm512_set1_epi32(avx512::Load32(a[t] + 4 * j)));
            __asm__("" : "+v"(s32[t]));
          }
        }
        const __m512i sc = p.sc[j0 / K::kPerScale];
        for (int t = 0; t < T; ++t) {
          if constexpr (K::kScale == Scale::kMul32) {
            isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(s32[t], sc));
          } else {
            isum[t] = _mm512_dpwssd_epi32(isum[t], s32[t], sc);
          }
          __asm__("" : "+v"(isum[t]));
        }
      }
    }
    const __m512 d = p.d;
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m512 da = _mm512_set1_ps(ab[t][b].d);
      const __m512 dd = _mm512_mul_ps(d, da);
      if constexpr (K::kHasMin) {
        // smin: the mins against the token's pairs of activation sums (TokenInts, or two adjacent bsums).
        __m512i smin = _mm512_setzero_si512();
        for (int k = 0; k < K::kPairs; ++k) {
          const __m512i v =
              _mm512_set1_epi32(K::kPairs == 4 ? tb[t][k] : avx512::Load32(ab[t][b].bsums + 2 * k));
          smin = k == 0 ? _mm512_madd_epi16(p.pairs[0], v) : _mm512_dpwssd_epi32(smin, p.pairs[k], v);
        }
        const __m512 dm = _mm512_mul_ps(p.dmin, da);
        acc[t] = _mm512_add_ps(acc[t], _mm512_sub_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(isum[t]), dd),
                                                     _mm512_mul_ps(_mm512_cvtepi32_ps(smin), dm)));
      } else {
        acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(_mm512_cvtepi32_ps(isum[t]), dd));
      }
    }
  }
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + t * ys, m, acc[t]);
}

// RunPacked<K, n> for 1 <= n <= T.
template <class K, int T>
LLAMAY_AVX512_INLINE void RunPackedUpTo(int n, const typename K::Packed* pk, const uint8_t* act, size_t as,
                                        const int32_t* ti, int64_t nb, float* y, size_t ys, __mmask16 m,
                                        const uint8_t* ahead) {
  if constexpr (T > 1) {
    if (n < T) return RunPackedUpTo<K, T - 1>(n, pk, act, as, ti, nb, y, ys, m, ahead);
  }
  RunPacked<K, T>(pk, act, as, ti, nb, y, ys, m, ahead);
}

// K::TokenInts of every token and super-block of a tile: out[(t * nb + b) * K::kTokenInts + i].
template <class K>
void TokenTable(const uint8_t* act, size_t as, int64_t tokens, int64_t nb, std::vector<int32_t>* out) {
  out->resize(static_cast<size_t>(tokens * nb * K::kTokenInts));
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t b = 0; b < nb; ++b)
      K::TokenInts(reinterpret_cast<const BlockQ8_K*>(act + t * as)[b],
                   out->data() + (t * nb + b) * K::kTokenInts);
}

template <class K>
LLAMAY_AVX512 void TilePacked16(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                                int64_t tokens, int64_t n_in, float* y, size_t ys) {
  static_assert(64 % K::kRun == 0 && K::kPerScale % K::kRun == 0,
                "runs tile the super-block, scales whole runs");
  static_assert(K::kHasMin == (K::kPairs > 0) && !(K::kHasMin && K::kStarts),
                "a min, or runs offset by starts");
  static_assert(!K::kStarts || K::kTokenInts == 64 / K::kRun, "one start per run");
  if (rows <= 0 || tokens <= 0) return;
  const int64_t nb = n_in / kQkK;
  thread_local std::vector<typename K::Packed> packed;
  thread_local std::vector<int32_t> token_ints;
  if (packed.size() < static_cast<size_t>(nb)) packed.resize(static_cast<size_t>(nb));
  TokenTable<K>(act, as, tokens, nb, &token_ints);
  for (int64_t r = 0; r < rows; r += kGroup) {
    const uint8_t* wr[kGroup];
    for (int64_t i = 0; i < kGroup; ++i) wr[i] = w + std::min(r + i, rows - 1) * ws;
    const int64_t valid = std::min<int64_t>(kGroup, rows - r);
    const __mmask16 m = static_cast<__mmask16>((1u << valid) - 1);
    for (int64_t b = 0; b < nb; ++b) K::Pack(wr, b, &packed[static_cast<size_t>(b)]);
    const uint8_t* pf = r + kGroup < rows ? w + (r + kGroup) * ws : nullptr;  // prefetched by the first tile
    for (int64_t t = 0; t < tokens;) {
      if (t > 0) pf = nullptr;
      // Token tiles of at most kPackedTokens, as even as possible.
      const int64_t rest = tokens - t, groups = (rest + kPackedTokens - 1) / kPackedTokens;
      const int n = static_cast<int>((rest + groups - 1) / groups);
      const int32_t* ti = token_ints.data() + t * nb * K::kTokenInts;
      RunPackedUpTo<K, kPackedTokens>(n, packed.data(), act + t * as, as, ti, nb, y + t * ys + r, ys, m, pf);
      t += n;
    }
  }
}

}  // namespace

LLAMAY_AVX512 void TileAvx512Q4_K(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                                  int64_t tokens, int64_t n_in, float* y, size_t ys) {
  if (tokens == 1) return DecodeAvx512Q4_K(w, ws, rows, act, n_in, y);  // matmul_decode_k.cc
  TilePacked16<K45<BlockQ4_K, false>>(w, ws, rows, act, as, tokens, n_in, y, ys);
}
LLAMAY_AVX512 void TileAvx512Q6_K(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                                  int64_t tokens, int64_t n_in, float* y, size_t ys) {
  if (tokens == 1) return DecodeAvx512Q6_K(w, ws, rows, act, n_in, y);  // matmul_decode_k.cc
  TilePacked16<Q6K>(w, ws, rows, act, as, tokens, n_in, y, ys);
}
LLAMAY_AVX512 void TileAvx512Q5_K(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                                  int64_t tokens, int64_t n_in, float* y, size_t ys) {
  if (tokens == 1) return DecodeAvx512Q5_K(w, ws, rows, act, n_in, y);  // matmul_decode_k.cc
  TilePacked16<K45<BlockQ5_K, true>>(w, ws, rows, act, as, tokens, n_in, y, ys);
}
LLAMAY_AVX512 void TileAvx512Q3_K(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                                  int64_t tokens, int64_t n_in, float* y, size_t ys) {
  if (tokens == 1) return TileAvx2Q3_K(w, ws, rows, act, as, tokens, n_in, y, ys);
  TilePacked16<Q3K>(w, ws, rows, act, as, tokens, n_in, y, ys);
}
LLAMAY_AVX512 void TileAvx512Q2_K(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                                  int64_t tokens, int64_t n_in, float* y, size_t ys) {
  if (tokens == 1) return TileAvx2Q2_K(w, ws, rows, act, as, tokens, n_in, y, ys);
  TilePacked16<Q2K>(w, ws, rows, act, as, tokens, n_in, y, ys);
}
LLAMAY_AVX512 void TileAvx512IQ4_XS(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                                    int64_t tokens, int64_t n_in, float* y, size_t ys) {
  if (tokens == 1) return TileAvx2IQ4_XS(w, ws, rows, act, as, tokens, n_in, y, ys);
  TilePacked16<IQ4XS>(w, ws, rows, act, as, tokens, n_in, y, ys);
}

}  // namespace llamay::kernels
#endif  // __x86_64__
