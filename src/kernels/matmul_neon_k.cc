// NEON tile kernels for the K-quants (Q4_K, Q5_K, Q6_K, Q3_K, Q2_K; IQ4_XS too, its values looked up in
// its grid: IQ4XSTraits) against Q8_K activations. Layout: per
// super-block each of the tile's four rows is unpacked once into 256 int8 weights in element order
// (Q4_K/Q5_K: q in [0, 31]; Q6_K: q - 32 and Q3_K: q in [-4, 3], so that they need no offset term; Q2_K: q in
// [0, 3]) with its sub-block scales as int32 (and, Q4_K/Q5_K/Q2_K, its eight or sixteen mins as int16), on
// the stack where the tile's tokens read it from L1. Tiling (neon_util.h): four rows x up to four tokens. Per
// sub-block and (row, token) DotI8 gives four exact int32 partial sums of q * a, which are multiplied by the
// sub-block scale and accumulated in int32 (exact: |sumi| <= 2^27), so everything up to the per-super-block
// f32 step of vec_dot.h is exact integer arithmetic. HsumRows4 then puts the four rows' sumi (and smin = sum
// of mn_s * (bsums[2s] + bsums[2s+1]); Q2_K: of mn_s * bsums[s]) in the lanes of one register, and the f32
// step runs for four rows at once in the reference's order:
// acc + (float(sumi) * (d * d_a) - float(smin) * (dmin * d_a)) (Q6_K, Q3_K: acc + float(sumi) * (d*d_a)).
#if defined(__aarch64__)
#include <cstddef>
#include <type_traits>

#include "kernels/matmul_kernels.h"
#include "kernels/neon_util.h"
#include "kernels/quant_blocks.h"

namespace llamay::kernels {
namespace {

// One row's super-block, unpacked.
struct Unpacked {
  alignas(16) int8_t q[kQkK];  // the weights in element order
  int32_t sc[16];              // sub-block scales (8 used by Q4_K/Q5_K)
  int16x8_t mn;                // Q4_K/Q5_K: sub-block mins; Q2_K: mins of sub-blocks 0..7
  int16x8_t mn_hi;             // Q2_K: mins of sub-blocks 8..15
};

// Q4_K (kFive = false) and Q5_K (kFive = true): 8 sub-blocks of 32 (two registers). q <= 31 and |a| <= 128,
// so four products add up in int16 (4 * 31 * 128 = 15872).
template <typename B, bool kFive>
struct K45Traits {
  using Block = B;
  static constexpr bool kHasMin = true;
  static constexpr int kSubBlocks = 8, kVecs = 2, kRun = 4;

  LLAMAY_NEON_INLINE static void Unpack(const Block& b, Unpacked* u) {
    uint64_t sc8, mn8;
    UnpackScalesMinsK4(b.scales, &sc8, &mn8);
    for (int s = 0; s < 8; ++s) u->sc[s] = static_cast<int32_t>((sc8 >> (8 * s)) & 0xFF);
    u->mn = vreinterpretq_s16_u16(vmovl_u8(vcreate_u8(mn8)));
    // Chunk c of 64 elements reads qs[32c..32c+31]: low nibbles are sub-block 2c, high nibbles 2c+1; Q5_K
    // adds bit s of qh[l] as bit 4 of element l of sub-block s.
    for (int c = 0; c < 4; ++c) {
      for (int h = 0; h < 2; ++h) {  // elements 16h..16h+15 of both sub-blocks
        const uint8x16_t v = vld1q_u8(b.qs + 32 * c + 16 * h);
        uint8x16_t lo = vandq_u8(v, vdupq_n_u8(0x0F)), hi = vshrq_n_u8(v, 4);
        if constexpr (kFive) {
          const uint8x16_t qh = vld1q_u8(b.qh + 16 * h), bit4 = vdupq_n_u8(0x10);
          // A negative count shifts right: bit s moves to bit 4.
          lo = vorrq_u8(lo, vandq_u8(vshlq_u8(qh, vdupq_n_s8(static_cast<int8_t>(4 - 2 * c))), bit4));
          hi = vorrq_u8(hi, vandq_u8(vshlq_u8(qh, vdupq_n_s8(static_cast<int8_t>(3 - 2 * c))), bit4));
        }
        vst1q_s8(u->q + 64 * c + 16 * h, vreinterpretq_s8_u8(lo));
        vst1q_s8(u->q + 64 * c + 32 + 16 * h, vreinterpretq_s8_u8(hi));
      }
    }
  }
};

// Q6_K: 16 sub-blocks of 16 (one register), int8 scales. |q - 32| <= 32 and |a| <= 128, so the two products
// of a lane add up in int16 (2 * 32 * 128 = 8192).
struct Q6KTraits {
  using Block = BlockQ6_K;
  static constexpr bool kHasMin = false;
  static constexpr int kSubBlocks = 16, kVecs = 1, kRun = 2;

  LLAMAY_NEON_INLINE static void Unpack(const Block& b, Unpacked* u) {
    for (int s = 0; s < 16; ++s) u->sc[s] = b.scales[s];
    const uint8x16_t low4 = vdupq_n_u8(0x0F);
    const int8x16_t off = vdupq_n_s8(32);
    // Half h (128 elements) reads ql[64h..64h+63] and qh[32h..32h+31]; element 128h + l + 32k (l < 32) takes
    // a nibble of ql[l] (k = 0, 2: low, high) or ql[l + 32] (k = 1, 3) and bits 2k, 2k+1 of qh[l] as bits
    // 4-5.
    for (int h = 0; h < 2; ++h) {
      for (int i = 0; i < 2; ++i) {  // l = 16i..16i+15
        const uint8_t* ql = b.ql + 64 * h + 16 * i;
        const uint8x16_t ql0 = vld1q_u8(ql), ql1 = vld1q_u8(ql + 32), qh = vld1q_u8(b.qh + 32 * h + 16 * i);
        const uint8x16_t q[4] = {vorrq_u8(vandq_u8(ql0, low4), vshlq_n_u8(vandq_u8(qh, vdupq_n_u8(0x03)), 4)),
                                 vorrq_u8(vandq_u8(ql1, low4), vshlq_n_u8(vandq_u8(qh, vdupq_n_u8(0x0C)), 2)),
                                 vorrq_u8(vshrq_n_u8(ql0, 4), vandq_u8(qh, vdupq_n_u8(0x30))),
                                 vorrq_u8(vshrq_n_u8(ql1, 4), vshrq_n_u8(vandq_u8(qh, vdupq_n_u8(0xC0)), 2))};
        for (int k = 0; k < 4; ++k)
          vst1q_s8(u->q + 128 * h + 32 * k + 16 * i, vsubq_s8(vreinterpretq_s8_u8(q[k]), off));
      }
    }
  }
};

// Q3_K and Q2_K: 16 sub-blocks of 16 (one register) of 2-bit values. Element 128h + 32k + l (l < 32) takes
// bits 2k..2k+1 of qs[32h + l]; Q3_K subtracts 4 where bit 4h + k of hmask[l] is clear (q in [-4, 3], so it
// needs no offset term) and has signed 6-bit scales sc - 32; Q2_K (q in [0, 3]) has 4-bit scales and mins.
// |q * a| <= 4 * 128, so the two products of a lane add up in int16.
template <bool kQ3>
struct K23Traits {
  using Block = std::conditional_t<kQ3, BlockQ3_K, BlockQ2_K>;
  static constexpr bool kHasMin = !kQ3;
  static constexpr int kSubBlocks = 16, kVecs = 1, kRun = 2;

  LLAMAY_NEON_INLINE static void Unpack(const Block& b, Unpacked* u) {
    if constexpr (kQ3) {
      uint32_t words[4];
      UnpackScalesQ3K(b.scales, words);
      uint8_t sc[16];
      __builtin_memcpy(sc, words, 16);
      for (int s = 0; s < 16; ++s) u->sc[s] = sc[s] - 32;
    } else {
      const uint8x16_t v = vld1q_u8(b.scales), mn = vshrq_n_u8(v, 4);
      for (int s = 0; s < 16; ++s) u->sc[s] = b.scales[s] & 0xF;
      u->mn = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mn)));
      u->mn_hi = vreinterpretq_s16_u16(vmovl_high_u8(mn));
    }
    const uint8x16_t three = vdupq_n_u8(3);
    for (int h = 0; h < 2; ++h) {
      for (int i = 0; i < 2; ++i) {  // l = 16i..16i+15
        const uint8x16_t v = vld1q_u8(b.qs + 32 * h + 16 * i);
        for (int k = 0; k < 4; ++k) {
          // A negative count shifts right.
          const uint8x16_t lo = vandq_u8(vshlq_u8(v, vdupq_n_s8(static_cast<int8_t>(-2 * k))), three);
          int8x16_t q = vreinterpretq_s8_u8(lo);
          if constexpr (kQ3) {
            const uint8x16_t set =
                vtstq_u8(vld1q_u8(b.hmask + 16 * i), vdupq_n_u8(static_cast<uint8_t>(1u << (4 * h + k))));
            q = vsubq_s8(q, vreinterpretq_s8_u8(vbicq_u8(vdupq_n_u8(4), set)));  // - 4 where the bit is clear
          }
          vst1q_s8(u->q + 128 * h + 32 * k + 16 * i, q);
        }
      }
    }
  }
};

// IQ4_XS: 8 sub-blocks of 32 (two registers) whose values are looked up in the IQ4_NL grid (vqtbl1q_s8),
// with signed 6-bit scales ls - 32. Grid values reach 127 in magnitude, so two products add up in int16
// (2 * 127 * 128 = 32512).
struct IQ4XSTraits {
  using Block = BlockIQ4_XS;
  static constexpr bool kHasMin = false;
  static constexpr int kSubBlocks = 8, kVecs = 2, kRun = 2;

  LLAMAY_NEON_INLINE static void Unpack(const Block& b, Unpacked* u) {
    const int8x16_t grid = vld1q_s8(kIq4NlValues);
    for (int s = 0; s < 8; ++s) {
      u->sc[s] = ScaleIQ4_XS(b, s) - 32;
      // Sub-block s reads qs[16s..16s+15]: low nibbles are elements 0..15, high nibbles 16..31.
      const uint8x16_t v = vld1q_u8(b.qs + 16 * s);
      vst1q_s8(u->q + 32 * s, vqtbl1q_s8(grid, vandq_u8(v, vdupq_n_u8(0x0F))));
      vst1q_s8(u->q + 32 * s + 16, vqtbl1q_s8(grid, vshrq_n_u8(v, 4)));
    }
  }
};

template <class Tr>
struct KQuantKernel {
  static constexpr int kTokens = 4;

  // Four rows (row r in lane r) x T tokens.
  template <int T>
  static void Run(const uint8_t* const* w, const uint8_t* act, size_t as, int64_t n_in, float* const* y,
                  size_t ys) {
    using Block = typename Tr::Block;
    constexpr int R = neon::kRows, kSubLen = 16 * Tr::kVecs;
    const int64_t nb = n_in / kQkK;
    float32x4_t acc[T];
    for (int t = 0; t < T; ++t) acc[t] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; ++b) {
      Unpacked u[R];
      for (int r = 0; r < R; ++r) Tr::Unpack(reinterpret_cast<const Block*>(w[r])[b], &u[r]);
      const BlockQ8_K* ab[T];
      for (int t = 0; t < T; ++t) ab[t] = reinterpret_cast<const BlockQ8_K*>(act + t * as) + b;
      // isum[t][r]: four int32 partials of row r's sumi against token t.
      int32x4_t isum[T][R];
      for (int t = 0; t < T; ++t)
        for (int r = 0; r < R; ++r) isum[t][r] = vdupq_n_s32(0);
      for (int s = 0; s < Tr::kSubBlocks; ++s) {
        int8x16_t wq[R][Tr::kVecs];
        for (int r = 0; r < R; ++r)
          for (int v = 0; v < Tr::kVecs; ++v) wq[r][v] = vld1q_s8(u[r].q + kSubLen * s + 16 * v);
        for (int t = 0; t < T; ++t) {
          int8x16_t a[Tr::kVecs];
          for (int v = 0; v < Tr::kVecs; ++v) a[v] = vld1q_s8(ab[t]->qs + kSubLen * s + 16 * v);
          for (int r = 0; r < R; ++r)
            isum[t][r] = vmlaq_n_s32(isum[t][r], neon::DotI8<Tr::kVecs, Tr::kRun>(wq[r], a), u[r].sc[s]);
        }
      }
      const float32x4_t dw = neon::Gather4F16<sizeof(Block)>(w, b, offsetof(Block, d));
      for (int t = 0; t < T; ++t) {
        const float32x4_t da = vdupq_n_f32(ab[t]->d);
        const float32x4_t sumi = vcvtq_f32_s32(neon::HsumRows4(isum[t]));
        const float32x4_t dd = vmulq_f32(dw, da);
        if constexpr (Tr::kHasMin) {
          int32x4_t m[R];
          if constexpr (Tr::kSubBlocks == 16) {
            // Q2_K: sub-block s is group s of the bsums.
            const int16x8_t b0 = vld1q_s16(ab[t]->bsums), b1 = vld1q_s16(ab[t]->bsums + 8);
            for (int r = 0; r < R; ++r) {
              int32x4_t v = vmlal_high_s16(vmull_s16(vget_low_s16(u[r].mn), vget_low_s16(b0)), u[r].mn, b0);
              v = vmlal_s16(v, vget_low_s16(u[r].mn_hi), vget_low_s16(b1));
              m[r] = vmlal_high_s16(v, u[r].mn_hi, b1);
            }
          } else {
            // The eight sums of pairs of groups of 16 (|.| <= 32 * 128), one per sub-block, against the mins.
            const int16x8_t pairs = vpaddq_s16(vld1q_s16(ab[t]->bsums), vld1q_s16(ab[t]->bsums + 8));
            for (int r = 0; r < R; ++r)
              m[r] = vmlal_high_s16(vmull_s16(vget_low_s16(u[r].mn), vget_low_s16(pairs)), u[r].mn, pairs);
          }
          const float32x4_t smin = vcvtq_f32_s32(neon::HsumRows4(m));
          const float32x4_t dm = vmulq_f32(neon::Gather4F16<sizeof(Block)>(w, b, offsetof(Block, dmin)), da);
          acc[t] = vaddq_f32(acc[t], vsubq_f32(vmulq_f32(sumi, dd), vmulq_f32(smin, dm)));
        } else {
          acc[t] = vaddq_f32(acc[t], vmulq_f32(sumi, dd));
        }
      }
    }
    for (int t = 0; t < T; ++t) neon::StoreRows4(acc[t], y, t * ys);
  }
};

}  // namespace

void TileNeonQ4_K(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as, int64_t tokens,
                  int64_t n_in, float* y, size_t ys) {
  neon::RunTile<KQuantKernel<K45Traits<BlockQ4_K, false>>>(w, ws, rows, act, as, tokens, n_in, y, ys);
}
void TileNeonQ5_K(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as, int64_t tokens,
                  int64_t n_in, float* y, size_t ys) {
  neon::RunTile<KQuantKernel<K45Traits<BlockQ5_K, true>>>(w, ws, rows, act, as, tokens, n_in, y, ys);
}
void TileNeonQ6_K(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as, int64_t tokens,
                  int64_t n_in, float* y, size_t ys) {
  neon::RunTile<KQuantKernel<Q6KTraits>>(w, ws, rows, act, as, tokens, n_in, y, ys);
}
void TileNeonQ3_K(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as, int64_t tokens,
                  int64_t n_in, float* y, size_t ys) {
  neon::RunTile<KQuantKernel<K23Traits<true>>>(w, ws, rows, act, as, tokens, n_in, y, ys);
}
void TileNeonQ2_K(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as, int64_t tokens,
                  int64_t n_in, float* y, size_t ys) {
  neon::RunTile<KQuantKernel<K23Traits<false>>>(w, ws, rows, act, as, tokens, n_in, y, ys);
}
void TileNeonIQ4_XS(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as, int64_t tokens,
                    int64_t n_in, float* y, size_t ys) {
  neon::RunTile<KQuantKernel<IQ4XSTraits>>(w, ws, rows, act, as, tokens, n_in, y, ys);
}

}  // namespace llamay::kernels
#endif  // __aarch64__
