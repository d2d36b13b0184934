// Block layouts of the quantised tensor types the kernels read, byte-compatible with GGUF (ggml's blocks).
//
// A row of n elements of a block type is n / block_size consecutive blocks. Values are reconstructed as:
//   Q4_0  x = d * (q - 8),        q in [0,15]; element j<16 is the low nibble of qs[j], j>=16 the high
//                                 nibble of qs[j-16]
//   Q4_1  x = d * q + m,          same nibble order
//   Q5_0  x = d * (q - 16),       q in [0,31]: nibble as Q4_0 plus bit j of the little-endian u32 qh as bit 4
//   Q5_1  x = d * q + m,          same bits
//   Q8_0  x = d * q               (base/numeric.h)
//   Q4_K  256 elements in 8 sub-blocks of 32 with 6-bit scale sc and min mn (packed in scales[12], see
//         UnpackScaleMinK4): x = d*sc * q - dmin*mn; chunk c of 64 elements reads qs[32c..32c+31], low
//         nibbles first (sub-block 2c), then high nibbles (sub-block 2c+1)
//   Q5_K  as Q4_K plus a fifth bit: element l of sub-block s takes bit s of qh[l] (l in [0,32))
//   Q6_K  256 elements in 16 sub-blocks of 16 with int8 scales: x = d*sc * (q - 32), q in [0,63]; see
//         reference/dequant_ref.cc for the bit positions
//   Q3_K  256 elements in 16 sub-blocks of 16 with 6-bit scales sc (packed in scales[12], see
//         UnpackScalesQ3K): x = d*(sc - 32) * q, q = lo - (hi ? 0 : 4) in [-4, 3]; element 128h + 32k + l
//         (l < 32) takes lo from bits 2k..2k+1 of qs[32h + l] and hi from bit 4h + k of hmask[l]
//   Q2_K  256 elements in 16 sub-blocks of 16; scales[s] holds sub-block s's 4-bit scale (low nibble) and
//         min (high nibble): x = d*sc * q - dmin*mn, q in [0, 3] at the positions of Q3_K's lo
//   IQ4_NL x = d * kIq4NlValues[q], q in [0,15], nibble order of Q4_0 (a non-uniform 4-bit grid)
//   MXFP4  x = kMxfp4Values[q] * 2^(e-128): q an FP4 (E2M1) code whose value kMxfp4Values holds doubled (as
//          ggml does), e the block's E8M0 exponent, so the scale is half of E8M0's 2^(e-127) (E8M0Half
//          below); nibble order of Q4_0
//   IQ4_XS 256 elements in 8 sub-blocks of 32 with 6-bit scales ls (low 4 bits in scales_l[s/2], nibble
//          s%2; high 2 bits in bits 2s..2s+1 of scales_h): x = (d * (ls - 32)) * kIq4NlValues[q]; sub-block
//          s reads qs[16s..16s+15], low nibbles first (elements 0..15), then high nibbles (16..31)
//   Q8_K  activations only: float d, 256 int8 and the sums of each group of 16 (bsums)
//   Q8_1  activations only: Q8_0 plus s = d * sum(q) (f16)
// Thread-safety: plain data.
#ifndef LLAMAY_KERNELS_QUANT_BLOCKS_H_
#define LLAMAY_KERNELS_QUANT_BLOCKS_H_

#include <cstdint>

#include "base/numeric.h"

namespace llamay::kernels {

inline constexpr int kQk = 32;    // elements per block of the _0/_1 types
inline constexpr int kQkK = 256;  // elements per K-quant super-block

struct BlockQ4_0 {
  uint16_t d;           // f16 scale
  uint8_t qs[kQk / 2];  // nibbles
};
struct BlockQ4_1 {
  uint16_t d, m;  // f16 scale and min
  uint8_t qs[kQk / 2];
};
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];  // fifth bits, little-endian u32
  uint8_t qs[kQk / 2];
};
struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[kQk / 2];
};
struct BlockQ8_1 {
  uint16_t d;  // f16 scale
  uint16_t s;  // f16 of d * sum(qs)
  int8_t qs[kQk];
};
struct BlockQ4_K {
  uint16_t d, dmin;      // f16 super-block scales for the sub-block scales and mins
  uint8_t scales[12];    // 8 x (6-bit scale, 6-bit min)
  uint8_t qs[kQkK / 2];  // nibbles
};
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[kQkK / 8];  // fifth bits
  uint8_t qs[kQkK / 2];
};
struct BlockQ6_K {
  uint8_t ql[kQkK / 2];      // low 4 bits
  uint8_t qh[kQkK / 4];      // high 2 bits
  int8_t scales[kQkK / 16];  // 16 sub-block scales
  uint16_t d;                // f16 super-block scale
};
struct BlockQ3_K {
  uint8_t hmask[kQkK / 8];  // high bits: bit 4h + k of hmask[l] for element 128h + 32k + l
  uint8_t qs[kQkK / 4];     // low 2 bits, four elements 32 apart per byte
  uint8_t scales[12];       // 16 x 6-bit scales, offset by 32
  uint16_t d;               // f16 super-block scale
};
struct BlockQ2_K {
  uint8_t scales[kQkK / 16];  // sub-block s: scale in the low nibble, min in the high nibble
  uint8_t qs[kQkK / 4];       // 2-bit values, four elements 32 apart per byte (as BlockQ3_K::qs)
  uint16_t d, dmin;           // f16 super-block scales for the sub-block scales and mins
};
struct BlockQ8_K {
  float d;
  int8_t qs[kQkK];
  int16_t bsums[kQkK / 16];  // sum of qs in each group of 16
};

// The lookup-table types. IQ4_NL and IQ4_XS share one grid; MXFP4's is the E2M1 values times two.
inline constexpr int8_t kIq4NlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

struct BlockIQ4_NL {
  uint16_t d;           // f16 scale
  uint8_t qs[kQk / 2];  // nibbles: indices into kIq4NlValues
};
struct BlockMXFP4 {
  uint8_t e;            // E8M0 exponent (e = 255, NaN in the OCP spec, is not a valid block)
  uint8_t qs[kQk / 2];  // nibbles: indices into kMxfp4Values
};
struct BlockIQ4_XS {
  uint16_t d;                   // f16 super-block scale
  uint16_t scales_h;            // high 2 bits of the 8 sub-block scales
  uint8_t scales_l[kQkK / 64];  // low 4 bits of the sub-block scales, two per byte
  uint8_t qs[kQkK / 2];         // nibbles: indices into kIq4NlValues
};
static_assert(sizeof(BlockIQ4_NL) == 18 && sizeof(BlockMXFP4) == 17 && sizeof(BlockIQ4_XS) == 136);

// MXFP4's block scale 2^(e-128) as f32, built from its bits as ggml does (e < 2 gives a subnormal).
inline float E8M0Half(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}

// The 6-bit scale (0..63, stored with +32) of sub-block s (0..7) of an IQ4_XS super-block.
inline int ScaleIQ4_XS(const BlockIQ4_XS& b, int s) {
  return ((b.scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | (((b.scales_h >> (2 * s)) & 3) << 4);
}

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
              sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 &&
              sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockQ3_K) == 110 && sizeof(BlockQ2_K) == 84);

// Scale and min of sub-block j (0..7) of a Q4_K/Q5_K super-block: j < 4 keeps them in the low 6 bits of
// scales[j] and scales[j+4]; j >= 4 splits them into the nibbles of scales[j+4] and the top 2 bits of
// scales[j-4] (scale) and scales[j] (min).
inline void UnpackScaleMinK4(int j, const uint8_t* scales, uint8_t* sc, uint8_t* mn) {
  if (j < 4) {
    *sc = scales[j] & 63;
    *mn = scales[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4));
    *mn = static_cast<uint8_t>((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
  }
}

// UnpackScaleMinK4 for all eight sub-blocks at once, on 32-bit words (the vector kernels): byte j of *sc
// and *mn is sub-block j's scale and min. With a, b, c the words at scales[0], [4], [8]: j < 4 keeps the
// low 6 bits of a (scale) and b (min); j >= 4 takes the nibbles of c and, as bits 4-5, the top 2 bits of
// a (scale) and b (min).
inline void UnpackScalesMinsK4(const uint8_t* scales, uint64_t* sc, uint64_t* mn) {
  uint32_t a, b, c;
  __builtin_memcpy(&a, scales, 4);
  __builtin_memcpy(&b, scales + 4, 4);
  __builtin_memcpy(&c, scales + 8, 4);
  const uint32_t sc_hi = (c & 0x0F0F0F0Fu) | ((a >> 2) & 0x30303030u);
  const uint32_t mn_hi = ((c >> 4) & 0x0F0F0F0Fu) | ((b >> 2) & 0x30303030u);
  *sc = (a & 0x3F3F3F3Fu) | (static_cast<uint64_t>(sc_hi) << 32);
  *mn = (b & 0x3F3F3F3Fu) | (static_cast<uint64_t>(mn_hi) << 32);
}

// The sixteen 6-bit scales of a Q3_K super-block as 4 words (byte s of the result = scale of sub-block s,
// still offset by 32). With a, b, c the words at scales[0], [4], [8]: the low nibbles of sub-blocks 0-3 and
// 4-7 are the low nibbles of a and b, those of 8-11 and 12-15 their high nibbles; the top two bits of
// sub-block s are bits 2(s/4)..2(s/4)+1 of byte s%4 of c.
inline void UnpackScalesQ3K(const uint8_t* scales, uint32_t out[4]) {
  uint32_t a, b, c;
  __builtin_memcpy(&a, scales, 4);
  __builtin_memcpy(&b, scales + 4, 4);
  __builtin_memcpy(&c, scales + 8, 4);
  const uint32_t lo4 = 0x0F0F0F0Fu, lo2 = 0x03030303u;
  out[0] = (a & lo4) | ((c & lo2) << 4);
  out[1] = (b & lo4) | (((c >> 2) & lo2) << 4);
  out[2] = ((a >> 4) & lo4) | (((c >> 4) & lo2) << 4);
  out[3] = ((b >> 4) & lo4) | (((c >> 6) & lo2) << 4);
}

}  // namespace llamay::kernels

#endif  // LLAMAY_KERNELS_QUANT_BLOCKS_H_
