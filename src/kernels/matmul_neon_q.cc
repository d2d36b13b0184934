// NEON tile kernels for the 32-element block types (Q8_0, Q4_0, Q5_0 and the lookup-table types IQ4_NL, MXFP4
// with Q8_0 activations; Q4_1, Q5_1 with Q8_1 activations). Layout: a block's 32 weights are unpacked into
// two int8 registers (elements 0..15 and 16..31; the nibble types with their offset already taken out, the
// lookup-table types as their grid values, so every type is a signed int8 dot), matching the two registers
// of the activation block's qs. Tiling (neon_util.h): four rows x up to four tokens; per
// block the four rows' weights are unpacked once and kept in registers for the tile's tokens. Per block and
// (row, token) DotI8 gives four exact int32 partial sums; HsumRows4 folds the four rows' partials into one
// register of exact block sums (row r in lane r), which is converted, scaled by the rows' d_w * d_a and added
// to an accumulator of four rows: vec_dot.h's canonical order, acc = acc + float(isum) * (d_w * d_a), with
// the f32 work done once per block for four (row, token) pairs. The _1 types keep the separate in-order sum
// of m_w * s_a and add it at the end, as the reference does.
#if defined(__aarch64__)
#include <cstddef>
#include <type_traits>

#include "kernels/matmul_kernels.h"
#include "kernels/neon_util.h"
#include "kernels/quant_blocks.h"

namespace llamay::kernels {
namespace {

using neon::F16;

// A block's weights as signed int8: v[0] elements 0..15, v[1] elements 16..31.
struct Weights {
  int8x16_t v[2];
};

// Q8_0: the weights as they are. Products of two int8 values can reach 128 * 128, so each one is widened on
// its own (kRun = 1).
struct Q8_0Traits {
  using Block = BlockQ8_0;
  using ActBlock = BlockQ8_0;
  static constexpr bool kHasMin = false;
  static constexpr int kRun = 1;
  LLAMAY_NEON_INLINE static Weights Load(const Block& b) { return {{vld1q_s8(b.qs), vld1q_s8(b.qs + 16)}}; }
};

// Nibble types: q = nibble (| fifth bit << 4), minus kOffset for the _0 types (Q4_0: 8, Q5_0: 16; the _1
// types keep q and add their min separately). |w| <= 31 and |a| <= 128, so four products add up in int16
// (4 * 31 * 128 = 15872).
template <typename B, typename A, int kOffset, bool kFive>
struct NibbleTraits {
  using Block = B;
  using ActBlock = A;
  static constexpr bool kHasMin = std::is_same_v<A, BlockQ8_1>;
  static constexpr int kRun = 4;
  LLAMAY_NEON_INLINE static Weights Load(const Block& b) {
    const uint8x16_t qs = vld1q_u8(b.qs);
    uint8x16_t lo = vandq_u8(qs, vdupq_n_u8(0x0F)), hi = vshrq_n_u8(qs, 4);
    if constexpr (kFive) {
      lo = vorrq_u8(lo, neon::FifthBits16(b.qh));      // bits 0..15 of qh
      hi = vorrq_u8(hi, neon::FifthBits16(b.qh + 2));  // bits 16..31
    }
    const int8x16_t off = vdupq_n_s8(kOffset);
    return {{vsubq_s8(vreinterpretq_s8_u8(lo), off), vsubq_s8(vreinterpretq_s8_u8(hi), off)}};
  }
};

using Q4_0Traits = NibbleTraits<BlockQ4_0, BlockQ8_0, 8, false>;
using Q5_0Traits = NibbleTraits<BlockQ5_0, BlockQ8_0, 16, true>;
using Q4_1Traits = NibbleTraits<BlockQ4_1, BlockQ8_1, 0, false>;
using Q5_1Traits = NibbleTraits<BlockQ5_1, BlockQ8_1, 0, true>;

// Lookup-table types (IQ4_NL, MXFP4): each nibble indexes a 16-entry int8 grid (vqtbl1q_s8). kRun products
// add up in int16: IQ4_NL's values reach 127 in magnitude, so two (2 * 127 * 128 = 32512); MXFP4's 12, so
// four (4 * 12 * 128 = 6144).
template <typename B, const int8_t* kGrid, int kRunLength>
struct LutTraits {
  using Block = B;
  using ActBlock = BlockQ8_0;
  static constexpr bool kHasMin = false;
  static constexpr int kRun = kRunLength;
  LLAMAY_NEON_INLINE static Weights Load(const Block& b) {
    const int8x16_t grid = vld1q_s8(kGrid);
    const uint8x16_t qs = vld1q_u8(b.qs);
    return {{vqtbl1q_s8(grid, vandq_u8(qs, vdupq_n_u8(0x0F))), vqtbl1q_s8(grid, vshrq_n_u8(qs, 4))}};
  }
};

using IQ4_NLTraits = LutTraits<BlockIQ4_NL, kIq4NlValues, 2>;
using MXFP4Traits = LutTraits<BlockMXFP4, kMxfp4Values, 4>;

// The block scales d_w of block b of four rows, row r in lane r: the f16 d every block type but MXFP4 has;
// MXFP4's 2^(e-128) from its exponent byte.
template <typename Block>
LLAMAY_NEON_INLINE float32x4_t Scales4(const uint8_t* const* w, int64_t b) {
  return neon::Gather4F16<sizeof(Block)>(w, b, offsetof(Block, d));
}
template <>
LLAMAY_NEON_INLINE float32x4_t Scales4<BlockMXFP4>(const uint8_t* const* w, int64_t b) {
  float d[4];
  for (int i = 0; i < 4; ++i) d[i] = E8M0Half(w[i][b * static_cast<int64_t>(sizeof(BlockMXFP4))]);
  return vld1q_f32(d);
}

template <class Tr>
struct BlockKernel {
  static constexpr int kTokens = 4;

  // Four rows (row r in lane r) x T tokens.
  template <int T>
  static void Run(const uint8_t* const* w, const uint8_t* act, size_t as, int64_t n_in, float* const* y,
                  size_t ys) {
    using Block = typename Tr::Block;
    using ActBlock = typename Tr::ActBlock;
    constexpr int R = neon::kRows;
    const int64_t nb = n_in / kQk;
    float32x4_t acc[T], macc[T];
    for (int t = 0; t < T; ++t) acc[t] = macc[t] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; ++b) {
      Weights wv[R];
      for (int r = 0; r < R; ++r) wv[r] = Tr::Load(reinterpret_cast<const Block*>(w[r])[b]);
      const float32x4_t dw = Scales4<Block>(w, b);
      float32x4_t mw = vdupq_n_f32(0.0f);
      if constexpr (Tr::kHasMin) mw = neon::Gather4F16<sizeof(Block)>(w, b, offsetof(Block, m));
      for (int t = 0; t < T; ++t) {
        const ActBlock& ab = reinterpret_cast<const ActBlock*>(act + t * as)[b];
        const int8x16_t a[2] = {vld1q_s8(ab.qs), vld1q_s8(ab.qs + 16)};
        int32x4_t m[R];
        for (int r = 0; r < R; ++r) m[r] = neon::DotI8<2, Tr::kRun>(wv[r].v, a);
        const float32x4_t isum = vcvtq_f32_s32(neon::HsumRows4(m));
        const float32x4_t dd = vmulq_f32(dw, vdupq_n_f32(F16(ab.d)));
        acc[t] = vaddq_f32(acc[t], vmulq_f32(isum, dd));
        if constexpr (Tr::kHasMin) macc[t] = vaddq_f32(macc[t], vmulq_f32(mw, vdupq_n_f32(F16(ab.s))));
      }
    }
    for (int t = 0; t < T; ++t) {
      if constexpr (Tr::kHasMin) acc[t] = vaddq_f32(acc[t], macc[t]);
      neon::StoreRows4(acc[t], y, t * ys);
    }
  }
};

}  // namespace

#define LLAMAY_DEFINE_TILE(name, traits)                                                              \
  void name(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as, int64_t tokens, \
            int64_t n_in, float* y, size_t ys) {                                                      \
    neon::RunTile<BlockKernel<traits>>(w, ws, rows, act, as, tokens, n_in, y, ys);                    \
  }

LLAMAY_DEFINE_TILE(TileNeonQ8_0, Q8_0Traits)
LLAMAY_DEFINE_TILE(TileNeonQ4_0, Q4_0Traits)
LLAMAY_DEFINE_TILE(TileNeonQ5_0, Q5_0Traits)
LLAMAY_DEFINE_TILE(TileNeonQ4_1, Q4_1Traits)
LLAMAY_DEFINE_TILE(TileNeonQ5_1, Q5_1Traits)
LLAMAY_DEFINE_TILE(TileNeonIQ4_NL, IQ4_NLTraits)
LLAMAY_DEFINE_TILE(TileNeonMXFP4, MXFP4Traits)

#undef LLAMAY_DEFINE_TILE

}  // namespace llamay::kernels
#endif  // __aarch64__
