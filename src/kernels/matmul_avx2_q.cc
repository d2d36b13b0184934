// AVX2 tile kernels for the 32-element block types (Q8_0, Q4_0, Q5_0 and the lookup-table types IQ4_NL,
// MXFP4 with Q8_0 activations; Q4_1, Q5_1 with Q8_1 activations). Per block and (row, token) pair one
// vpmaddubsw/vpmaddwd pair gives eight int32 partial sums; eight rows' partials are summed horizontally into
// one register of exact block sums (row r in lane r), which is converted, scaled by the eight rows'
// d_w * d_a and added to an accumulator of eight rows: vec_dot.h's canonical order, with the float work done
// once per block for eight pairs.
#if defined(__x86_64__)
#include <array>
#include <cstddef>
#include <vector>

#include "kernels/avx2_util.h"
#include "kernels/matmul_kernels.h"
#include "kernels/quant_blocks.h"

namespace llamay::kernels {
namespace {

using avx2::F16;
using avx2::Load256;
using avx2::Transpose8x8Epi32;

// Signed weights (Q8_0): |w| * (a with w's sign), so that w = -128 still multiplies correctly.
struct Q8_0Traits {
  using Block = BlockQ8_0;
  using ActBlock = BlockQ8_0;
  static constexpr bool kHasMin = false;
  static constexpr bool kSpreadDecode = true;  // Tile's one-token row groups (see Tile)
  struct W {
    __m256i abs, w;
  };
  struct A {
    __m256i a;
  };
  LLAMAY_AVX2_INLINE static W LoadW(const Block& b) {
    const __m256i w = Load256(b.qs);
    return {_mm256_abs_epi8(w), w};
  }
  LLAMAY_AVX2_INLINE static A LoadA(const ActBlock& b) { return {Load256(b.qs)}; }
  LLAMAY_AVX2_INLINE static __m256i Dot16(const W& w, const A& a) {
    return _mm256_maddubs_epi16(w.abs, _mm256_sign_epi8(a.a, w.w));
  }
};

// Unsigned weights q with an offset: sum((q - off) * a) = sum(q * a) - sum(off * a), the second computed
// once per activation block. Int16 pair sums stay far from saturation (|31*127*2| < 32767).
template <typename B, int kOffset, bool kFive>
struct OffsetTraits {
  using Block = B;
  using ActBlock = BlockQ8_0;
  static constexpr bool kHasMin = false;
  static constexpr bool kSpreadDecode = true;
  struct W {
    __m256i q;
  };
  struct A {
    __m256i a, off;
  };
  LLAMAY_AVX2_INLINE static W LoadW(const Block& b) {
    if constexpr (kFive) {
      return {_mm256_or_si256(avx2::UnpackNibbles16(b.qs), avx2::FifthBits(b.qh))};
    } else {
      return {avx2::UnpackNibbles16(b.qs)};
    }
  }
  LLAMAY_AVX2_INLINE static A LoadA(const ActBlock& b) {
    const __m256i a = Load256(b.qs);
    return {a, _mm256_maddubs_epi16(_mm256_set1_epi8(kOffset), a)};
  }
  LLAMAY_AVX2_INLINE static __m256i Dot16(const W& w, const A& a) {
    return _mm256_sub_epi16(_mm256_maddubs_epi16(w.q, a.a), a.off);
  }
};

// Unsigned weights with a min (Q4_1, Q5_1) against Q8_1 activations.
template <typename B, bool kFive>
struct MinTraits {
  using Block = B;
  using ActBlock = BlockQ8_1;
  static constexpr bool kHasMin = true;
  static constexpr bool kSpreadDecode = true;
  struct W {
    __m256i q;
  };
  struct A {
    __m256i a;
  };
  LLAMAY_AVX2_INLINE static W LoadW(const Block& b) {
    if constexpr (kFive) {
      return {_mm256_or_si256(avx2::UnpackNibbles16(b.qs), avx2::FifthBits(b.qh))};
    } else {
      return {avx2::UnpackNibbles16(b.qs)};
    }
  }
  LLAMAY_AVX2_INLINE static A LoadA(const ActBlock& b) { return {Load256(b.qs)}; }
  LLAMAY_AVX2_INLINE static __m256i Dot16(const W& w, const A& a) { return _mm256_maddubs_epi16(w.q, a.a); }
};

// Lookup-table weights (IQ4_NL, MXFP4): each nibble indexes a 16-entry int8 grid (one vpshufb; the grid
// is in both 128-bit lanes), and the values then take Q8_0's signed path. |value| <= 127, so no int16 pair
// sum saturates.
LLAMAY_AVX2_INLINE __m256i LoadGrid(const int8_t* grid) {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(grid)));
}
template <typename B, const int8_t* kGrid>
struct LutTraits : Q8_0Traits {
  using Block = B;
  // IQ4_NL's one-token kernel (MXFP4's is matmul_decode_nibbles.cc) waits on its lookups, not on memory:
  // spread row groups read 4-7% slower there (BM_DecodeShape, type 20), so it keeps neighbouring rows.
  static constexpr bool kSpreadDecode = false;
  LLAMAY_AVX2_INLINE static W LoadW(const Block& b) {
    const __m256i w = _mm256_shuffle_epi8(LoadGrid(kGrid), avx2::UnpackNibbles16(b.qs));
    return {_mm256_abs_epi8(w), w};
  }
};

// Lane r of the result is the sum of the eight int32 lanes of m[r] (exact, so the pairing is free).
LLAMAY_AVX2_INLINE __m256i HsumRows8(const __m256i* m) {
  // hadd within 128-bit halves: after two rounds, half 0 holds lanes 0..3 of rows 0..3 summed pairwise, half
  // 1 lanes 4..7 of the same rows; the two halves of g0 (rows 0..3) and g1 (rows 4..7) are then added.
  const __m256i g0 = _mm256_hadd_epi32(_mm256_hadd_epi32(m[0], m[1]), _mm256_hadd_epi32(m[2], m[3]));
  const __m256i g1 = _mm256_hadd_epi32(_mm256_hadd_epi32(m[4], m[5]), _mm256_hadd_epi32(m[6], m[7]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(g0, g1, 0x20), _mm256_permute2x128_si256(g0, g1, 0x31));
}

// 8 rows (one per lane) x T tokens. Per block and token: the eight rows' exact int32 block sums in one
// register (vpmaddubsw + vpmaddwd per row, then HsumRows8), then acc = acc + float(isum) * (d_w * d_a) for
// the eight rows at once, as reference/dot_ref.cc does for each.
template <class Tr, int T>
LLAMAY_AVX2 void RunRows8(const uint8_t* const* w, const uint8_t* ahead, const uint8_t* act, size_t as,
                          int64_t nb, float* const* y, size_t ys) {
  using Block = typename Tr::Block;
  using ActBlock = typename Tr::ActBlock;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[T], macc[T];
  for (int t = 0; t < T; ++t) acc[t] = macc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    // One token over neighbouring rows: prefetch the next tile's share (null `ahead`: spread rows, or a
    // remainder of several tokens, whose weights stay in cache: none).
    if constexpr (T == 1)
      if (ahead != nullptr) avx2::PrefetchTileShare<sizeof(Block)>(ahead, b);
    typename Tr::W wv[8];
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) wv[r] = Tr::LoadW(reinterpret_cast<const Block*>(w[r])[b]);
    const __m256 dw = avx2::BlockScales8<Block>(w, b);
    __m256 mw = _mm256_setzero_ps();
    if constexpr (Tr::kHasMin) mw = avx2::Gather8F16<sizeof(Block)>(w, b, offsetof(Block, m));
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const ActBlock& ab = reinterpret_cast<const ActBlock*>(act + t * as)[b];
      const typename Tr::A av = Tr::LoadA(ab);
      __m256i m[8];
#pragma GCC unroll 8
      for (int r = 0; r < 8; ++r) m[r] = _mm256_madd_epi16(Tr::Dot16(wv[r], av), ones);
      const __m256 isum = _mm256_cvtepi32_ps(HsumRows8(m));
      const __m256 dd = _mm256_mul_ps(dw, _mm256_set1_ps(F16(ab.d)));
      acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(isum, dd));
      if constexpr (Tr::kHasMin)
        macc[t] = _mm256_add_ps(macc[t], _mm256_mul_ps(mw, _mm256_set1_ps(F16(ab.s))));
    }
  }
  if constexpr (Tr::kHasMin)
    for (int t = 0; t < T; ++t) acc[t] = _mm256_add_ps(acc[t], macc[t]);
  avx2::StoreTile8<T>(acc, y, ys);
}

constexpr int kTokens = 4;  // tokens per register tile

// Tiles of 8 rows (a short last tile repeats a row; those results are dropped) x kTokens tokens. One token
// (decode) streams the weights: its tiles are spread row groups (avx2::SpreadRowGroup8), which the hardware
// prefetcher follows, unless Tr::kSpreadDecode says otherwise.
template <class Tr>
LLAMAY_AVX2 void Tile(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                      int64_t tokens, int64_t n_in, float* y, size_t ys) {
  const int64_t nb = n_in / kQk;
  if (tokens == 1) {
    avx2::ForEachDecodeGroup8(w, ws, rows, y, Tr::kSpreadDecode,
                              [&](const avx2::Rows8& g, const uint8_t* ahead) {
                                RunRows8<Tr, 1>(g.w, ahead, act, as, nb, g.y, ys);
                              });
    return;
  }
  for (int64_t r = 0; r < rows; r += 8) {
    const avx2::Rows8 g = avx2::RowGroup8(w, ws, rows, r, y);
    const uint8_t* const* wr = g.w;
    float* const* yr = g.y;
    int64_t t = 0;
    for (; t + kTokens <= tokens; t += kTokens) {
      float* yt[8];
      for (int i = 0; i < 8; ++i) yt[i] = yr[i] != nullptr ? yr[i] + t * ys : nullptr;
      RunRows8<Tr, kTokens>(wr, nullptr, act + t * as, as, nb, yt, ys);
    }
    for (; t < tokens; ++t) {
      float* yt[8];
      for (int i = 0; i < 8; ++i) yt[i] = yr[i] != nullptr ? yr[i] + t * ys : nullptr;
      RunRows8<Tr, 1>(wr, nullptr, act + t * as, as, nb, yt, ys);
    }
  }
}

using Q5_0Traits = OffsetTraits<BlockQ5_0, 16, true>;
using Q4_1Traits = MinTraits<BlockQ4_1, false>;
using Q5_1Traits = MinTraits<BlockQ5_1, true>;

// ---- Several tokens: eight rows' weights transposed once per tile ---------------------------------------
// For each block of 8 rows, register j holds weight elements 4j..4j+3 of row r in 32-bit lane r. Against a
// broadcast of activation bytes 4j..4j+3, one vpmaddubsw gives two int16 partial sums per row, and vpmaddwd
// the row's int32 sum of those four products; summing over j = 0..7 gives the eight rows' block sums with no
// horizontal sums at all. The transposition is paid once per 8 rows and tile of tokens (up to 64).
//   - nibble types (Q4_0 q, Q5_0 q, unsigned, offset 8 / 16): the j partials add up in int16 first, four at
//     a time for five bits (4 x 2 x 31 x 128 = 31744) and all eight for four bits (8 x 2 x 15 x 128 =
//     30720), so one or two vpmaddwd per (block, token); offset x sum(a), computed once per token and block,
//     is subtracted from the int32 sums.
//   - Q8_0 (signed): |w| against a with w's sign, as in Q8_0Traits; each vpmaddubsw result is widened on its
//     own (two int16 products can reach 2 x 128 x 127).

template <typename B, int kOff, bool kFive>
struct PackedNibbles {
  using Block = B;
  static constexpr int kOffset = kOff;
  struct alignas(32) Packed {
    __m256i k[8];
    __m256 d;
  };
  LLAMAY_AVX2_INLINE static void Pack(const uint8_t* const* w, int64_t b, Packed* out) {
    __m256i v[8];
    for (int r = 0; r < 8; ++r) {
      const Block& blk = reinterpret_cast<const Block*>(w[r])[b];
      v[r] = avx2::UnpackNibbles16(blk.qs);
      if constexpr (kFive) v[r] = _mm256_or_si256(v[r], avx2::FifthBits(blk.qh));
    }
    Transpose8x8Epi32(v);
    for (int j = 0; j < 8; ++j) out->k[j] = v[j];
    out->d = avx2::Gather8F16<sizeof(Block)>(w, b, offsetof(Block, d));
  }
  // The eight rows' sums of q * a (offset not yet taken out).
  LLAMAY_AVX2_INLINE static __m256i Sums(const Packed& p, const int8_t* a, __m256i ones) {
    constexpr int kRun = kFive ? 4 : 8;  // j partials that add up in int16
    __m256i sum = _mm256_setzero_si256();
    for (int j0 = 0; j0 < 8; j0 += kRun) {
      __m256i s16 = _mm256_maddubs_epi16(p.k[j0], avx2::Broadcast4Bytes(a + 4 * j0));
#pragma GCC unroll 7
      for (int j = j0 + 1; j < j0 + kRun; ++j)
        s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(p.k[j], avx2::Broadcast4Bytes(a + 4 * j)));
      sum = _mm256_add_epi32(sum, _mm256_madd_epi16(s16, ones));
    }
    return sum;
  }
};

struct PackedQ8_0 {
  using Block = BlockQ8_0;
  static constexpr int kOffset = 0;
  struct alignas(32) Packed {
    __m256i abs[8], w[8];
    __m256 d;
  };
  LLAMAY_AVX2_INLINE static void Pack(const uint8_t* const* w, int64_t b, Packed* out) {
    __m256i v[8];
    for (int r = 0; r < 8; ++r) v[r] = Load256(reinterpret_cast<const Block*>(w[r])[b].qs);
    Transpose8x8Epi32(v);
    for (int j = 0; j < 8; ++j) out->w[j] = v[j], out->abs[j] = _mm256_abs_epi8(v[j]);
    out->d = avx2::Gather8F16<sizeof(Block)>(w, b, offsetof(Block, d));
  }
  LLAMAY_AVX2_INLINE static __m256i Sums(const Packed& p, const int8_t* a, __m256i ones) {
    __m256i sum = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      const __m256i s16 =
          _mm256_maddubs_epi16(p.abs[j], _mm256_sign_epi8(avx2::Broadcast4Bytes(a + 4 * j), p.w[j]));
      sum = _mm256_add_epi32(sum, _mm256_madd_epi16(s16, ones));
    }
    return sum;
  }
};

// The lookup-table types: the grid values of the eight rows, transposed, then PackedQ8_0's sums.
template <typename B, const int8_t* kGrid>
struct PackedLut : PackedQ8_0 {
  using Block = B;
  LLAMAY_AVX2_INLINE static void Pack(const uint8_t* const* w, int64_t b, Packed* out) {
    const __m256i grid = LoadGrid(kGrid);
    __m256i v[8];
    for (int r = 0; r < 8; ++r)
      v[r] = _mm256_shuffle_epi8(grid, avx2::UnpackNibbles16(reinterpret_cast<const Block*>(w[r])[b].qs));
    Transpose8x8Epi32(v);
    for (int j = 0; j < 8; ++j) out->w[j] = v[j], out->abs[j] = _mm256_abs_epi8(v[j]);
    out->d = avx2::BlockScales8<Block>(w, b);
  }
};

// MXFP4, whose grid values (doubled) are at most 12 in magnitude: the value + 12, unsigned, packed as
// PackedNibbles packs Q5_0's five bits, so its sums are theirs (four vpmaddubsw added in int16 before one
// vpmaddwd: 4 x 2 x 24 x 127 = 24384) less 12 x sum(a). The sign trick of PackedLut costs a vpsignb and a
// vpmaddwd per vpmaddubsw; the block sums are the same exact integers, so the bits are too.
inline constexpr int kMxfp4Offset = 12;
inline constexpr std::array<int8_t, 16> kMxfp4Shifted = [] {
  std::array<int8_t, 16> g{};
  for (int i = 0; i < 16; ++i)
    g[static_cast<size_t>(i)] = static_cast<int8_t>(kMxfp4Values[i] + kMxfp4Offset);
  return g;
}();
struct PackedMxfp4 : PackedNibbles<BlockMXFP4, kMxfp4Offset, true> {
  LLAMAY_AVX2_INLINE static void Pack(const uint8_t* const* w, int64_t b, Packed* out) {
    const __m256i grid = LoadGrid(kMxfp4Shifted.data());
    __m256i v[8];
    for (int r = 0; r < 8; ++r)
      v[r] =
          _mm256_shuffle_epi8(grid, avx2::UnpackNibbles16(reinterpret_cast<const BlockMXFP4*>(w[r])[b].qs));
    Transpose8x8Epi32(v);
    for (int j = 0; j < 8; ++j) out->k[j] = v[j];
    out->d = avx2::BlockScales8<BlockMXFP4>(w, b);
  }
};

// 8 packed rows x T tokens; off[t * nb + b] = kOffset x the sum of token t's block b.
template <class P, int T>
LLAMAY_AVX2 void RunPacked(const typename P::Packed* pk, const uint8_t* act, size_t as, const int32_t* off,
                           int64_t nb, float* const* y, size_t ys, const uint8_t* ahead) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const typename P::Packed& p = pk[b];
    // The next 8 rows, which the next packing reads (an expert's slab comes from memory).
    if (ahead != nullptr) avx2::PrefetchTileShare<sizeof(typename P::Block)>(ahead, b);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const BlockQ8_0& ab = reinterpret_cast<const BlockQ8_0*>(act + t * as)[b];
      __m256i isum = P::Sums(p, ab.qs, ones);
      if constexpr (P::kOffset != 0) isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(off[t * nb + b]));
      const __m256 dd = _mm256_mul_ps(p.d, _mm256_set1_ps(F16(ab.d)));
      acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(_mm256_cvtepi32_ps(isum), dd));
    }
  }
  avx2::StoreTile8<T>(acc, y, ys);
}

template <class P>
LLAMAY_AVX2 void TilePacked(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                            int64_t tokens, int64_t n_in, float* y, size_t ys) {
  const int64_t nb = n_in / kQk;
  thread_local std::vector<typename P::Packed> packed;
  thread_local std::vector<int32_t> off;
  if (packed.size() < static_cast<size_t>(nb)) packed.resize(static_cast<size_t>(nb));
  if constexpr (P::kOffset != 0) {
    off.resize(static_cast<size_t>(tokens * nb));
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t b = 0; b < nb; ++b) {
        const int8_t* q = reinterpret_cast<const BlockQ8_0*>(act + t * as)[b].qs;
        int32_t sum = 0;
        for (int j = 0; j < kQk; ++j) sum += q[j];
        off[static_cast<size_t>(t * nb + b)] = P::kOffset * sum;
      }
    }
  }
  for (int64_t r = 0; r < rows; r += 8) {
    const avx2::Rows8 g = avx2::RowGroup8(w, ws, rows, r, y);
    const uint8_t* const* wr = g.w;
    float* const* yr = g.y;
    for (int64_t b = 0; b < nb; ++b) P::Pack(wr, b, &packed[static_cast<size_t>(b)]);
    // The next row group is prefetched during the first token tile.
    const uint8_t* pf = r + 8 < rows ? w + (r + 8) * ws : nullptr;
    for (int64_t t = 0; t < tokens;) {
      float* yt[8];
      for (int i = 0; i < 8; ++i) yt[i] = yr[i] != nullptr ? yr[i] + t * ys : nullptr;
      const uint8_t* at = act + t * as;
      const int32_t* ot = P::kOffset != 0 ? off.data() + t * nb : nullptr;
      if (t > 0) pf = nullptr;
      switch (tokens - t < kTokens ? tokens - t : kTokens) {
        case 4:
          RunPacked<P, 4>(packed.data(), at, as, ot, nb, yt, ys, pf);
          t += 4;
          break;
        case 3:
          RunPacked<P, 3>(packed.data(), at, as, ot, nb, yt, ys, pf);
          t += 3;
          break;
        case 2:
          RunPacked<P, 2>(packed.data(), at, as, ot, nb, yt, ys, pf);
          t += 2;
          break;
        default:
          RunPacked<P, 1>(packed.data(), at, as, ot, nb, yt, ys, pf);
          t += 1;
      }
    }
  }
}

using PackedQ4_0 = PackedNibbles<BlockQ4_0, 8, false>;
using PackedQ5_0 = PackedNibbles<BlockQ5_0, 16, true>;

// One token streams the weights: the row kernel with prefetching (no transposition to amortise).
template <class Tr, class P>
LLAMAY_AVX2 void TileQ8Act(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                           int64_t tokens, int64_t n_in, float* y, size_t ys) {
  if (tokens == 1) return Tile<Tr>(w, ws, rows, act, as, tokens, n_in, y, ys);
  TilePacked<P>(w, ws, rows, act, as, tokens, n_in, y, ys);
}

}  // namespace

#define LLAMAY_DEFINE_TILE(name, traits)                                                            \
  LLAMAY_AVX2 void name(const uint8_t* w, size_t ws, int64_t n_rows, const uint8_t* act, size_t as, \
                        int64_t n_tokens, int64_t n_in, float* y, size_t ys) {                      \
    Tile<traits>(w, ws, n_rows, act, as, n_tokens, n_in, y, ys);                                    \
  }

LLAMAY_DEFINE_TILE(TileAvx2Q4_1, Q4_1Traits)
LLAMAY_DEFINE_TILE(TileAvx2Q5_1, Q5_1Traits)

#undef LLAMAY_DEFINE_TILE

LLAMAY_AVX2 void TileAvx2Q8_0(const uint8_t* w, size_t ws, int64_t n_rows, const uint8_t* act, size_t as,
                              int64_t n_tokens, int64_t n_in, float* y, size_t ys) {
  TileQ8Act<Q8_0Traits, PackedQ8_0>(w, ws, n_rows, act, as, n_tokens, n_in, y, ys);
}
LLAMAY_AVX2 void TileAvx2Q5_0(const uint8_t* w, size_t ws, int64_t n_rows, const uint8_t* act, size_t as,
                              int64_t n_tokens, int64_t n_in, float* y, size_t ys) {
  TileQ8Act<Q5_0Traits, PackedQ5_0>(w, ws, n_rows, act, as, n_tokens, n_in, y, ys);
}

LLAMAY_AVX2 void TileAvx2IQ4_NL(const uint8_t* w, size_t ws, int64_t n_rows, const uint8_t* act, size_t as,
                                int64_t n_tokens, int64_t n_in, float* y, size_t ys) {
  TileQ8Act<LutTraits<BlockIQ4_NL, kIq4NlValues>, PackedLut<BlockIQ4_NL, kIq4NlValues>>(
      w, ws, n_rows, act, as, n_tokens, n_in, y, ys);
}

LLAMAY_AVX2 void TileAvx2MXFP4(const uint8_t* w, size_t ws, int64_t n_rows, const uint8_t* act, size_t as,
                               int64_t n_tokens, int64_t n_in, float* y, size_t ys) {
  if (n_tokens == 1) return DecodeAvx2MXFP4(w, ws, n_rows, act, n_in, y);  // matmul_decode_nibbles.cc
  TileQ8Act<LutTraits<BlockMXFP4, kMxfp4Values>, PackedMxfp4>(w, ws, n_rows, act, as, n_tokens, n_in, y, ys);
}

// Q4_0: one token goes to the decode kernel (matmul_decode_nibbles.cc), which reads the nibbles unreordered;
// several go to the packed kernel.
LLAMAY_AVX2 void TileAvx2Q4_0(const uint8_t* w, size_t ws, int64_t n_rows, const uint8_t* act, size_t as,
                              int64_t n_tokens, int64_t n_in, float* y, size_t ys) {
  if (n_tokens == 1) return DecodeAvx2Q4_0(w, ws, n_rows, act, n_in, y);
  TilePacked<PackedQ4_0>(w, ws, n_rows, act, as, n_tokens, n_in, y, ys);
}

}  // namespace llamay::kernels
#endif  // __x86_64__
