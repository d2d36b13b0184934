// AVX-512 VNNI tile kernels for the weight types with Q8_0 activations (Q8_0, Q4_0, Q5_0, and the
// lookup-table types IQ4_NL and MXFP4), bit-identical to the scalar reference (vec_dot.h's canonical order:
// per block one exact int32 sum of its 32 products, then acc = acc + float(isum) * (d_w * d_a), one f32
// accumulator per (row, token) from 0.0f, blocks in order).
//
// The integer sums come from vpdpbusd, which adds four products of unsigned by signed bytes to each int32
// lane. Every one of these weight types is an unsigned byte u minus an offset: Q8_0's signed w is
// (w + 128) - 128 (an xor), Q4_0's nibble q - 8, Q5_0's five bits q - 16, IQ4_NL's and MXFP4's grid value
// v as (v + 128) - 128 (the grid, offset, looked up with vpshufb). The excess offset * sum(a) is
// taken out with one integer per activation block, -offset * sum(a), computed once per token and block
// (PrepareActs) and shared by every row: sum(u * a) - offset * sum(a) = sum((u - offset) * a), exactly
// (no saturation anywhere: every partial sum stays below 2^21 in magnitude, and so float(isum) is exact).
// How the sum is formed does not matter (it is exact); what follows it is the reference's float work, done
// once per block for a whole register of 16 (row, token) pairs: convert, times d_w * d_a (the product of
// two f16 values, exact in f32; MXFP4's d_w is 2^(e-128), see vec_dot.h), add. No fused multiply-add (the
// library builds with -ffp-contract=off).
//
// Several tokens: 16 rows in the 16 lanes of a register. A block of 16 rows is transposed so that register
// k holds bytes 4k..4k+3 of every row (lane i = row i; Transpose), and vpdpbusd with the token's activation
// dword k broadcast from memory adds those four products to each row's lane: after k = 0..7, lane i holds
// row i's block sum for that token, with no reduction. A register tile is 16 rows x up to 8 tokens (one
// accumulator per token, the transposed block shared by the tokens). With more than 8 tokens the transposed
// blocks of a 16-row group go to a scratch buffer once and serve every tile of 8 tokens.
//
// One token (decode, Q8_0 and Q5_0; Q4_0, IQ4_NL and MXFP4 have matmul_decode_nibbles.cc): two rows per
// register (256 bits each), one vpdpbusd against the broadcast activation leaves eight group sums per row,
// and a transpose-and-add tree (Reduce16) turns eight such registers into one register of 16 rows' block
// sums; then the same float work. The rows are paired so that both paths leave row i in lane i.
//
// Rows come in groups of 16: a tile of at least 16 rows ends with a group moved back to overlap the one
// before it (those rows are computed twice, with the same bits); a tile of fewer rows is copied to a padded
// group first (repeating its last row) and stored under a mask.
#if defined(__x86_64__)
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "kernels/avx2_util.h"
#include "kernels/avx512_util.h"
#include "kernels/matmul_kernels.h"
#include "kernels/quant_blocks.h"

namespace llamay::kernels {
namespace {

constexpr int kGroup = 16;           // rows per register: one per lane
constexpr int kTokenTile = 8;        // tokens per register tile with several tokens
constexpr int kPrefetchBytes = 256;  // how far ahead each weight row is prefetched when it is streamed

LLAMAY_AVX512_INLINE __m512i Broadcast256(const void* p) {
  return _mm512_broadcast_i64x4(_mm256_loadu_si256(static_cast<const __m256i*>(p)));
}

LLAMAY_AVX512_INLINE __m512i Pair256(const void* lo, const void* hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(static_cast<const __m256i*>(lo))),
                            _mm256_loadu_si256(static_cast<const __m256i*>(hi)), 1);
}

// The f16 scales at p + i * s (i < 16; every block starts with its scale), converted: row i in lane i.
LLAMAY_AVX512_INLINE __m512 Scales16(const uint8_t* p, size_t s) {
  uint64_t q[4];
  for (int j = 0; j < 4; ++j) {
    q[j] = 0;
    for (int i = 0; i < 4; ++i) {
      uint16_t d;
      std::memcpy(&d, p + (4 * j + i) * s, 2);
      q[j] |= static_cast<uint64_t>(d) << (16 * i);
    }
  }
  return _mm512_cvtph_ps(_mm256_setr_epi64x(static_cast<int64_t>(q[0]), static_cast<int64_t>(q[1]),
                                            static_cast<int64_t>(q[2]), static_cast<int64_t>(q[3])));
}

// The weight scales d_w of the blocks at p + i * s (i < 16), row i in lane i: the f16 d every block type but
// MXFP4 starts with; MXFP4's 2^(e-128) from its exponent byte.
template <typename Block>
LLAMAY_AVX512_INLINE __m512 BlockScales16(const uint8_t* p, size_t s) {
  return Scales16(p, s);
}
template <>
LLAMAY_AVX512_INLINE __m512 BlockScales16<BlockMXFP4>(const uint8_t* p, size_t s) {
  alignas(64) float d[16];
  for (int i = 0; i < 16; ++i) d[i] = E8M0Half(p[i * s]);
  return _mm512_load_ps(d);
}

// The row pairing of both layouts: register i < 8 holds rows PairLo(i) and PairLo(i) + 4 (256 bits each),
// which is the order in which Transpose's last step and Reduce16 leave row r in lane r.
constexpr int PairLo(int i) { return i < 4 ? i : i + 4; }

// Weights as unsigned bytes u = w + kOffset, in element order. Transpose: the block at p + i * s of rows
// i < 16 to out[k] = elements 4k..4k+3 of row i in lane i. Pair: the blocks of two rows side by side.
struct Q8_0Weights {
  using Block = BlockQ8_0;
  static constexpr int kOffset = 128;
  static constexpr size_t kQs = offsetof(Block, qs);
  LLAMAY_AVX512_INLINE static void Transpose(const uint8_t* p, size_t s, __m512i* out) {
    __m512i z[8], a[4], c[4];
    for (int i = 0; i < 8; ++i) {
      const int r = PairLo(i);
      z[i] = Pair256(p + r * s + kQs, p + (r + 4) * s + kQs);
    }
    avx512::Transpose4x4(z,
                         a);  // a[j] lanes: rows 0..3 dword j | rows 0..3 dword j+4 | rows 4..7 j | 4..7 j+4
    avx512::Transpose4x4(z + 4, c);  // the same for rows 8..15
    const __m512i flip = _mm512_set1_epi8(-128);
    for (int j = 0; j < 4; ++j) {
      out[j] = _mm512_xor_si512(_mm512_shuffle_i32x4(a[j], c[j], _MM_SHUFFLE(2, 0, 2, 0)), flip);
      out[j + 4] = _mm512_xor_si512(_mm512_shuffle_i32x4(a[j], c[j], _MM_SHUFFLE(3, 1, 3, 1)), flip);
    }
  }
  LLAMAY_AVX512_INLINE static __m512i Pair(const uint8_t* lo, const uint8_t* hi) {
    return _mm512_xor_si512(Pair256(lo + kQs, hi + kQs), _mm512_set1_epi8(-128));
  }
};

// Q4_0 (kFive false) and Q5_0: the nibbles are not reordered. Register k < 4 takes the low nibbles of
// bytes 4k..4k+3 (elements 4k..4k+3), register k + 4 their high nibbles (elements 16 + 4k..): again
// elements 4k..4k+3 for every k. Q5_0 adds 16 where bit 4k + i of the row's qh is set.
template <typename B, int kOff, bool kFive>
struct NibbleWeights {
  using Block = B;
  static constexpr int kOffset = kOff;
  static constexpr size_t kQs = offsetof(Block, qs);
  LLAMAY_AVX512_INLINE static void Transpose(const uint8_t* p, size_t s, __m512i* out) {
    __m512i x[4], y[4];
    for (int i = 0; i < 4; ++i)  // lane L of x[i]: row 4L + i, so that y[k] lane L is rows 4L..4L+3
      x[i] = avx512::Load4x128(p + i * s + kQs, p + (4 + i) * s + kQs, p + (8 + i) * s + kQs,
                               p + (12 + i) * s + kQs);
    avx512::Transpose4x4(x, y);
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    for (int k = 0; k < 4; ++k) {
      out[k] = _mm512_and_si512(y[k], low4);
      out[k + 4] = _mm512_and_si512(_mm512_srli_epi16(y[k], 4), low4);
    }
    if constexpr (kFive) {
      // qh of row i in lane i (the first dword of 16 bytes loaded at the qh).
      const uint8_t* h = p + offsetof(Block, qh);
      for (int i = 0; i < 4; ++i)
        x[i] = avx512::Load4x128(h + i * s, h + (4 + i) * s, h + (8 + i) * s, h + (12 + i) * s);
      const __m512i qh =
          _mm512_unpacklo_epi64(_mm512_unpacklo_epi32(x[0], x[1]), _mm512_unpacklo_epi32(x[2], x[3]));
      const __m512i sixteen = _mm512_set1_epi8(0x10);
      const __m512i dword_base =
          _mm512_set4_epi32(0x0C0C0C0C, 0x08080808, 0x04040404, 0);  // 4d in dword d's bytes
      for (int c = 0; c < 4; ++c) {
        // Byte c of each lane's qh in all four bytes: bits 8c..8c+7, elements 4k.. for k = 2c and 2c + 1.
        const __m512i rep =
            _mm512_shuffle_epi8(qh, _mm512_add_epi8(dword_base, _mm512_set1_epi8(static_cast<char>(c))));
        for (int h = 0; h < 2; ++h) {
          const int k = 2 * c + h;
          const __mmask64 set =
              _mm512_test_epi8_mask(rep, _mm512_set1_epi32(h == 0 ? 0x08040201 : 0x80402010));
          out[k] = _mm512_mask_add_epi8(out[k], set, out[k], sixteen);
        }
      }
    }
  }
  LLAMAY_AVX512_INLINE static __m256i Bytes(const uint8_t* blk) {
    const auto& b = *reinterpret_cast<const Block*>(blk);
    if constexpr (kFive) {
      return _mm256_or_si256(avx2::UnpackNibbles16(b.qs), avx2::FifthBits(b.qh));
    } else {
      return avx2::UnpackNibbles16(b.qs);
    }
  }
  LLAMAY_AVX512_INLINE static __m512i Pair(const uint8_t* lo, const uint8_t* hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(Bytes(lo)), Bytes(hi), 1);
  }
};

using Q4_0Weights = NibbleWeights<BlockQ4_0, 8, false>;
using Q5_0Weights = NibbleWeights<BlockQ5_0, 16, true>;

// Lookup-table types (IQ4_NL, MXFP4): the nibbles as Q4_0's, each replaced by its grid value plus 128 (one
// vpshufb against the grid in every 128-bit lane), so that u - 128 is the signed value (|value| <= 127).
template <typename B, const int8_t* kGrid>
struct LutWeights {
  using Block = B;
  using Nibbles = NibbleWeights<B, 0, false>;
  static constexpr int kOffset = 128;
  LLAMAY_AVX512_INLINE static __m512i Grid() {
    return _mm512_xor_si512(_mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kGrid))),
                            _mm512_set1_epi8(-128));
  }
  LLAMAY_AVX512_INLINE static void Transpose(const uint8_t* p, size_t s, __m512i* out) {
    Nibbles::Transpose(p, s, out);
    const __m512i grid = Grid();
    for (int k = 0; k < 8; ++k) out[k] = _mm512_shuffle_epi8(grid, out[k]);
  }
  LLAMAY_AVX512_INLINE static __m512i Pair(const uint8_t* lo, const uint8_t* hi) {
    return _mm512_shuffle_epi8(Grid(), Nibbles::Pair(lo, hi));
  }
};

// Eight registers of two rows' eight group sums each (register i: rows PairLo(i), PairLo(i) + 4) to one
// register of the 16 rows' sums, row r in lane r.
LLAMAY_AVX512_INLINE __m512i Reduce16(const __m512i* s) {
  __m512i u[4], v[2];
  for (int j = 0; j < 4; ++j)  // per 128-bit lane: [s0 + s2, s'0 + s'2, s1 + s3, s'1 + s'3]
    u[j] = _mm512_add_epi32(_mm512_unpacklo_epi32(s[2 * j], s[2 * j + 1]),
                            _mm512_unpackhi_epi32(s[2 * j], s[2 * j + 1]));
  for (int j = 0; j < 2; ++j)  // per 128-bit lane: the lane's sum for each of four registers
    v[j] = _mm512_add_epi32(_mm512_unpacklo_epi64(u[2 * j], u[2 * j + 1]),
                            _mm512_unpackhi_epi64(u[2 * j], u[2 * j + 1]));
  return _mm512_add_epi32(_mm512_shuffle_i32x4(v[0], v[1], _MM_SHUFFLE(2, 0, 2, 0)),
                          _mm512_shuffle_i32x4(v[0], v[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

// The activations of a tile, prepared once and shared by every row: each block's bytes, the start of its
// integer sums (-kOffset * the sum of the bytes) and its scale. Stored by token tile, then block, then the
// tile's up to kTokenTile tokens side by side, so that a register tile reads them in one sequential sweep.
struct Acts {
  int8_t* qs;      // [32] per (block, token)
  int32_t* start;  // [1] per (block, token)
  float* da;
  int64_t nb;
  int64_t width;  // tokens per token tile: min(tokens, kTokenTile)
  int64_t Index(int64_t b, int64_t t) const { return ((t / kTokenTile) * nb + b) * width + t % kTokenTile; }
  static size_t Size(int64_t tokens, int64_t nb) {
    return static_cast<size_t>((tokens + kTokenTile - 1) / kTokenTile * kTokenTile * nb);
  }
};

template <int kOffset>
LLAMAY_AVX512 void PrepareActs(const uint8_t* act, size_t as, int64_t tokens, int64_t nb, const Acts& out) {
  const __m256i off = _mm256_set1_epi8(static_cast<char>(kOffset));
  int64_t t0 = 0;
  // 16 tokens at a time: token i in lane i (their byte sums reduced like 16 rows' dot products).
  for (; t0 + kGroup <= tokens; t0 += kGroup) {
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* p = act + t0 * as + b * sizeof(BlockQ8_0);
      const int64_t o = out.Index(b, t0), o8 = out.Index(b, t0 + 8);  // tokens t0.. and t0 + 8..
      __m256i q[kGroup];
      for (int i = 0; i < kGroup; ++i) {
        q[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i * as + offsetof(BlockQ8_0, qs)));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.qs + (i < 8 ? o + i : o8 + i - 8) * kQk), q[i]);
      }
      __m512i s[8];
      for (int i = 0; i < 8; ++i) {
        const __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(q[PairLo(i)]), q[PairLo(i) + 4], 1);
        s[i] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_broadcast_i64x4(off), v);
      }
      const __m512i start = _mm512_sub_epi32(_mm512_setzero_si512(), Reduce16(s));
      const __m512 da = Scales16(p, as);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.start + o), _mm512_castsi512_si256(start));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.start + o8), _mm512_extracti64x4_epi64(start, 1));
      _mm256_storeu_ps(out.da + o, _mm512_castps512_ps256(da));
      _mm256_storeu_ps(out.da + o8, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(da), 1)));
    }
  }
  for (int64_t t = t0; t < tokens; ++t) {
    const auto* a = reinterpret_cast<const BlockQ8_0*>(act + t * as);
    for (int64_t b = 0; b < nb; ++b) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].qs));
      const int64_t o = out.Index(b, t);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.qs + o * kQk), q);
      out.start[o] = -avx2::HsumI32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), off, q));
      out.da[o] = avx2::F16(a[b].d);
    }
  }
}

// The transposed weights of block b of a 16-row group, and the rows' scales.
struct alignas(64) GroupBlock {
  __m512i w[8];
  __m512 d;
};

// Where RowsByTokens gets its transposed blocks: from the rows themselves (transposed on the fly, and
// prefetched: with few tokens the weights stream from memory) or from a scratch buffer.
template <class W>
struct TransposedRows {
  const uint8_t* w;
  size_t ws;
  LLAMAY_AVX512_INLINE void operator()(int64_t b, GroupBlock* g) const {
    const uint8_t* p = w + b * sizeof(typename W::Block);
    for (int i = 0; i < kGroup; ++i)
      _mm_prefetch(reinterpret_cast<const char*>(p + i * ws) + kPrefetchBytes, _MM_HINT_T0);
    W::Transpose(p, ws, g->w);
    g->d = BlockScales16<typename W::Block>(p, ws);
  }
};

struct ScratchRows {
  const GroupBlock* g;
  LLAMAY_AVX512_INLINE void operator()(int64_t b, GroupBlock* out) const { *out = g[b]; }
};

// 16 rows (lanes) x T tokens: y[t * ys + i] for row i of the group and token t < T, lanes in m only.
// Tokens t0..t0 + T - 1 of the tile's prepared activations pa.
template <int T, class Src>
LLAMAY_AVX512_INLINE void RowsByTokens(Src src, const Acts& pa, int64_t t0, int64_t nb, float* y, size_t ys,
                                       __mmask16 m) {
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    GroupBlock g;
    src(b, &g);
    const int64_t o = pa.Index(b, t0);
    const int8_t* qs = pa.qs + o * kQk;
    // k outside, tokens inside: T independent vpdpbusd chains in flight.
    __m512i s[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) s[t] = _mm512_set1_epi32(pa.start[o + t]);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t)
        s[t] = _mm512_dpbusd_epi32(s[t], g.w[k], _mm512_set1_epi32(avx512::Load32(qs + t * kQk + 4 * k)));
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m512 dd = _mm512_mul_ps(g.d, _mm512_set1_ps(pa.da[o + t]));
      acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(_mm512_cvtepi32_ps(s[t]), dd));
    }
  }
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + t * ys, m, acc[t]);
}

template <class Src>
LLAMAY_AVX512 void RowsByTokensN(int n, Src src, const Acts& pa, int64_t t0, int64_t nb, float* y, size_t ys,
                                 __mmask16 m) {
  switch (n) {
    case 8:
      return RowsByTokens<8>(src, pa, t0, nb, y, ys, m);
    case 7:
      return RowsByTokens<7>(src, pa, t0, nb, y, ys, m);
    case 6:
      return RowsByTokens<6>(src, pa, t0, nb, y, ys, m);
    case 5:
      return RowsByTokens<5>(src, pa, t0, nb, y, ys, m);
    case 4:
      return RowsByTokens<4>(src, pa, t0, nb, y, ys, m);
    case 3:
      return RowsByTokens<3>(src, pa, t0, nb, y, ys, m);
    case 2:
      return RowsByTokens<2>(src, pa, t0, nb, y, ys, m);
    default:
      return RowsByTokens<1>(src, pa, t0, nb, y, ys, m);
  }
}

// One token, 16 rows at w + i * ws: y[i] for the lanes in m.
template <class W>
LLAMAY_AVX512 void OneTokenRows(const uint8_t* w, size_t ws, const Acts& pa, int64_t nb, float* y,
                                __mmask16 m) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p = w + b * sizeof(typename W::Block);
    for (int i = 0; i < kGroup; ++i)
      _mm_prefetch(reinterpret_cast<const char*>(p + i * ws) + kPrefetchBytes, _MM_HINT_T0);
    const __m512i av = Broadcast256(pa.qs + b * kQk);
    __m512i s[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      const int r = PairLo(i);
      s[i] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), W::Pair(p + r * ws, p + (r + 4) * ws), av);
    }
    const __m512i isum = _mm512_add_epi32(Reduce16(s), _mm512_set1_epi32(pa.start[b]));
    const __m512 dd = _mm512_mul_ps(BlockScales16<typename W::Block>(p, ws), _mm512_set1_ps(pa.da[b]));
    acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_cvtepi32_ps(isum), dd));
  }
  _mm512_mask_storeu_ps(y, m, acc);
}

template <class W>
LLAMAY_AVX512 void Tile(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                        int64_t tokens, int64_t n_in, float* y, size_t ys) {
  using Block = typename W::Block;
  if (rows <= 0 || tokens <= 0) return;
  const int64_t nb = n_in / kQk;
  thread_local std::vector<int8_t> act_qs;
  thread_local std::vector<int32_t> act_start;
  thread_local std::vector<float> act_da;
  const size_t n_act = Acts::Size(tokens, nb);
  if (act_start.size() < n_act) act_qs.resize(n_act * kQk), act_start.resize(n_act), act_da.resize(n_act);
  const Acts pa{act_qs.data(), act_start.data(), act_da.data(), nb, std::min<int64_t>(tokens, kTokenTile)};
  PrepareActs<W::kOffset>(act, as, tokens, nb, pa);
  // Fewer rows than a group: a padded copy, stored under a mask.
  __mmask16 mask = 0xFFFF;
  thread_local std::vector<uint8_t> padded;
  if (rows < kGroup) {
    const size_t rb = static_cast<size_t>(nb) * sizeof(Block);
    padded.resize(kGroup * rb);
    for (int64_t i = 0; i < kGroup; ++i)
      std::memcpy(padded.data() + i * rb, w + std::min(i, rows - 1) * ws, rb);
    w = padded.data();
    ws = rb;
    mask = static_cast<__mmask16>((1u << rows) - 1);
  }
  thread_local std::vector<GroupBlock> scratch;
  if (tokens > kTokenTile && scratch.size() < static_cast<size_t>(nb))
    scratch.resize(static_cast<size_t>(nb));
  for (int64_t r0 = 0; r0 < rows; r0 += kGroup) {
    const int64_t r = rows < kGroup ? 0 : std::min(r0, rows - kGroup);
    const uint8_t* wr = w + r * ws;
    if (tokens == 1) {
      OneTokenRows<W>(wr, ws, pa, nb, y + r, mask);
    } else if (tokens <= kTokenTile) {
      RowsByTokensN(static_cast<int>(tokens), TransposedRows<W>{wr, ws}, pa, 0, nb, y + r, ys, mask);
    } else {
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* p = wr + b * sizeof(Block);
        W::Transpose(p, ws, scratch[b].w);
        scratch[b].d = BlockScales16<Block>(p, ws);
      }
      for (int64_t t = 0; t < tokens; t += kTokenTile) {
        const int n = static_cast<int>(std::min<int64_t>(kTokenTile, tokens - t));
        RowsByTokensN(n, ScratchRows{scratch.data()}, pa, t, nb, y + t * ys + r, ys, mask);
      }
    }
  }
}

}  // namespace

LLAMAY_AVX512 void TileAvx512Q8_0(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                                  int64_t tokens, int64_t n_in, float* y, size_t ys) {
  if (tokens == 1) return DecodeAvx512Q8_0(w, ws, rows, act, n_in, y);  // matmul_decode_nibbles.cc
  Tile<Q8_0Weights>(w, ws, rows, act, as, tokens, n_in, y, ys);
}
LLAMAY_AVX512 void TileAvx512Q4_0(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                                  int64_t tokens, int64_t n_in, float* y, size_t ys) {
  if (tokens == 1) return DecodeAvx512Q4_0(w, ws, rows, act, n_in, y);  // matmul_decode_nibbles.cc
  Tile<Q4_0Weights>(w, ws, rows, act, as, tokens, n_in, y, ys);
}
LLAMAY_AVX512 void TileAvx512Q5_0(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                                  int64_t tokens, int64_t n_in, float* y, size_t ys) {
  Tile<Q5_0Weights>(w, ws, rows, act, as, tokens, n_in, y, ys);
}
LLAMAY_AVX512 void TileAvx512IQ4_NL(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                                    int64_t tokens, int64_t n_in, float* y, size_t ys) {
  if (tokens == 1) return DecodeAvx512IQ4_NL(w, ws, rows, act, n_in, y);
  Tile<LutWeights<BlockIQ4_NL, kIq4NlValues>>(w, ws, rows, act, as, tokens, n_in, y, ys);
}
LLAMAY_AVX512 void TileAvx512MXFP4(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                                   int64_t tokens, int64_t n_in, float* y, size_t ys) {
  if (tokens == 1) return DecodeAvx512MXFP4(w, ws, rows, act, n_in, y);
  Tile<LutWeights<BlockMXFP4, kMxfp4Values>>(w, ws, rows, act, as, tokens, n_in, y, ys);
}

}  // namespace llamay::kernels
#endif  // __x86_64__
