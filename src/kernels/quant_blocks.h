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
struct BlockQ8_K {
  float d;
  int8_t qs[kQkK];
  int16_t bsums[kQkK / 16];  // sum of qs in each group of 16
};

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
              sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 &&
              sizeof(BlockQ8_K) == 292);

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

}  // namespace llamay::kernels

#endif  // LLAMAY_KERNELS_QUANT_BLOCKS_H_
