// AVX-512 VNNI tile kernels for the weight types with Q8_0 activations (Q8_0, Q4_0, Q5_0), bit-identical to
// the AVX2 and scalar kernels (vec_dot.h's canonical order).
//
// The exact int32 lane sums of vec_dot.h (lane l = elements 4l..4l+3 of a block) come from one vpdpbusd,
// which multiplies unsigned by signed bytes. Every one of these weight types is an unsigned byte u minus an
// offset: Q8_0's signed w is (w + 128) - 128 (an xor), Q4_0's nibble q - 8, Q5_0's five bits q - 16. The
// excess offset * sum(a) is subtracted by starting the accumulation at -offset * (lane sum of a), computed
// once per activation block and shared by every row: sum(u * a) - offset * sum(a) = sum((u - offset) * a),
// exactly (no saturation anywhere: |lane sum| < 2^17).
//
// A 512-bit register holds two 256-bit "slots", each the eight f32 lanes of one (row, token) pair:
//   - several tokens: the two slots are two tokens (activations side by side, the weight block broadcast);
//   - one token (decode): the two slots are two rows (weights side by side, the activation broadcast).
// Each slot is accumulated exactly as the AVX2 kernel accumulates its one register (convert, times
// d_w * d_a, then add), and reduced at the end with the same Reduce8, so the bits do not change; the
// kernel only does half the instructions per (row, token) pair, and the VNNI dot replaces three.
#if defined(__x86_64__)
#include <vector>

#include "kernels/avx2_util.h"
#include "kernels/avx512_util.h"
#include "kernels/matmul_kernels.h"
#include "kernels/quant_blocks.h"


namespace llamay::kernels {
namespace {

LLAMAY_AVX512_INLINE __m512i Broadcast256(const void* p) {
  return _mm512_broadcast_i64x4(_mm256_loadu_si256(static_cast<const __m256i*>(p)));
}

LLAMAY_AVX512_INLINE __m512i Pair256(const void* lo, const void* hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(static_cast<const __m256i*>(lo))),
                            _mm256_loadu_si256(static_cast<const __m256i*>(hi)), 1);
}

// [f32(lo) x 8 | f32(hi) x 8] from two f16 scales.
LLAMAY_AVX512_INLINE __m512 ScalePair(uint16_t lo, uint16_t hi) {
  const __m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16(static_cast<short>(lo))),
                                            _mm_set1_epi16(static_cast<short>(hi)), 1);
  return _mm512_cvtph_ps(h);
}

// -kOffset * (lane sums of the signed bytes a), the start of every dot with this activation block.
template <int kOffset>
LLAMAY_AVX512_INLINE __m512i NegBias(__m512i a) {
  return _mm512_sub_epi32(
      _mm512_setzero_si512(),
      _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(static_cast<char>(kOffset)), a));
}

// Weights as unsigned bytes u = w + kOffset: Broadcast puts one block's 32 in both halves of a register,
// Pair two blocks (of two rows) side by side.
struct Q8_0Weights {
  using Block = BlockQ8_0;
  static constexpr int kOffset = 128;
  LLAMAY_AVX512_INLINE static __m512i Broadcast(const Block& b) {
    return _mm512_xor_si512(Broadcast256(b.qs), _mm512_set1_epi8(-128));
  }
  LLAMAY_AVX512_INLINE static __m512i Pair(const Block& lo, const Block& hi) {
    return _mm512_xor_si512(Pair256(lo.qs, hi.qs), _mm512_set1_epi8(-128));
  }
};

template <typename B, int kOff, bool kFive>
struct NibbleWeights {
  using Block = B;
  static constexpr int kOffset = kOff;
  LLAMAY_AVX512_INLINE static __m256i Bytes(const Block& b) {
    if constexpr (kFive) {
      return _mm256_or_si256(avx2::UnpackNibbles16(b.qs), avx2::FifthBits(b.qh));
    } else {
      return avx2::UnpackNibbles16(b.qs);
    }
  }
  LLAMAY_AVX512_INLINE static __m512i Broadcast(const Block& b) { return _mm512_broadcast_i64x4(Bytes(b)); }
  LLAMAY_AVX512_INLINE static __m512i Pair(const Block& lo, const Block& hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(Bytes(lo)), Bytes(hi), 1);
  }
};

using Q4_0Weights = NibbleWeights<BlockQ4_0, 8, false>;
using Q5_0Weights = NibbleWeights<BlockQ5_0, 16, true>;

LLAMAY_AVX512_INLINE float ReduceLow(__m512 v) { return avx2::Reduce8(_mm512_castps512_ps256(v)); }
LLAMAY_AVX512_INLINE float ReduceHigh(__m512 v) {
  return avx2::Reduce8(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

template <typename Block = BlockQ8_0>
const Block* Blocks(const uint8_t* row) {
  return reinterpret_cast<const Block*>(row);
}

// How far ahead of the block being read a weight row is prefetched. Decode streams the weights from
// memory, and the hardware prefetcher alone keeps too few of the row streams in flight (kernels_bench
// BM_DecodeStream: 256 bytes ahead gave ~10% over none for 1 and for 8 tokens; 1024 was worse than none).
constexpr int kPrefetchBytes = 256;

// One activation block of a token pair, prepared once per chunk of tokens and shared by every row: the
// two tokens' bytes side by side, the dot's starting value (NegBias) and the two scales.
struct alignas(64) PairBlock {
  __m512i a;
  __m512i start;
  __m512 da;
};

// Prepares pairs p < n_pairs of a chunk: a[2p] and a[2p + 1] are the rows of pair p (the same row twice
// when the pair has one token). out: [n_pairs][nb].
template <int kOffset>
LLAMAY_AVX512 void PreparePairs(const uint8_t* const* a, int n_pairs, int64_t nb, PairBlock* out) {
  for (int p = 0; p < n_pairs; ++p) {
    for (int64_t b = 0; b < nb; ++b) {
      const BlockQ8_0& lo = Blocks(a[2 * p])[b];
      const BlockQ8_0& hi = Blocks(a[2 * p + 1])[b];
      PairBlock& o = out[p * nb + b];
      o.a = Pair256(lo.qs, hi.qs);
      o.start = NegBias<kOffset>(o.a);
      o.da = ScalePair(lo.d, hi.d);
    }
  }
}

// R rows x P token pairs over prepared pairs pb ([P][nb]); y_hi[p] is null for a pair of one token.
template <class W, int R, int P>
LLAMAY_AVX512 void RunTokenPairs(const uint8_t* w, size_t ws, const PairBlock* pb, int64_t nb,
                                 float* const* y_lo, float* const* y_hi) {
  __m512 acc[R][P];
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const typename W::Block& wb = Blocks<typename W::Block>(w + r * ws)[b];
      _mm_prefetch(reinterpret_cast<const char*>(&wb) + kPrefetchBytes, _MM_HINT_T0);
      const __m512i wu = W::Broadcast(wb);
      const __m512 dw = _mm512_set1_ps(avx2::F16(wb.d));
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
        const PairBlock& x = pb[p * nb + b];
        const __m512i s = _mm512_dpbusd_epi32(x.start, wu, x.a);
        const __m512 dd = _mm512_mul_ps(dw, x.da);
        acc[r][p] = _mm512_add_ps(acc[r][p], _mm512_mul_ps(_mm512_cvtepi32_ps(s), dd));
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int p = 0; p < P; ++p) {
      y_lo[p][r] = ReduceLow(acc[r][p]);
      if (y_hi[p] != nullptr) y_hi[p][r] = ReduceHigh(acc[r][p]);
    }
  }
}

// One token, RP row pairs: w[2i], w[2i + 1] share a register (the same row twice when the last pair has
// one row; y[2i + 1] is then null).
template <class W, int RP>
LLAMAY_AVX512 void RunRowPairs(const uint8_t* const* w, const uint8_t* a, int64_t nb, float* const* y) {
  using Block = typename W::Block;
  __m512 acc[RP];
  for (int i = 0; i < RP; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ8_0& ab = Blocks(a)[b];
    const __m512i av = Broadcast256(ab.qs);
    const __m512i start = NegBias<W::kOffset>(av);
    const __m512 da = _mm512_set1_ps(avx2::F16(ab.d));
#pragma GCC unroll 8
    for (int i = 0; i < RP; ++i) {
      const Block& lo = Blocks<Block>(w[2 * i])[b];
      const Block& hi = Blocks<Block>(w[2 * i + 1])[b];
      _mm_prefetch(reinterpret_cast<const char*>(&lo) + kPrefetchBytes, _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(&hi) + kPrefetchBytes, _MM_HINT_T0);
      const __m512i wu = W::Pair(lo, hi);
      const __m512 dw = ScalePair(lo.d, hi.d);
      const __m512i s = _mm512_dpbusd_epi32(start, wu, av);
      acc[i] = _mm512_add_ps(acc[i], _mm512_mul_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, da)));
    }
  }
  for (int i = 0; i < RP; ++i) {
    *y[2 * i] = ReduceLow(acc[i]);
    if (y[2 * i + 1] != nullptr) *y[2 * i + 1] = ReduceHigh(acc[i]);
  }
}

constexpr int kRows = 4;      // rows per register tile with several tokens
constexpr int kPairs = 4;     // token pairs per register tile (8 tokens: a decode step of 8 streams)
constexpr int kRowPairs = 4;  // row pairs per register tile for one token

template <class W, int P>
LLAMAY_AVX512 void AllRows(const uint8_t* w, size_t ws, int64_t rows, const PairBlock* pb, int64_t nb,
                           float* const* lo, float* const* hi) {
  float* lr[P];
  float* hr[P];
  for (int64_t r = 0; r < rows;) {
    for (int p = 0; p < P; ++p) lr[p] = lo[p] + r, hr[p] = hi[p] != nullptr ? hi[p] + r : nullptr;
    if (r + kRows <= rows) {
      RunTokenPairs<W, kRows, P>(w + r * ws, ws, pb, nb, lr, hr);
      r += kRows;
    } else {
      RunTokenPairs<W, 1, P>(w + r * ws, ws, pb, nb, lr, hr);
      r += 1;
    }
  }
}

// Several tokens: chunks of up to 2 * kPairs tokens, each prepared once and swept over all rows.
template <class W>
LLAMAY_AVX512 void TokensChunked(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                                 int64_t tokens, int64_t nb, float* y, size_t ys) {
  thread_local std::vector<PairBlock> scratch;
  if (scratch.size() < static_cast<size_t>(kPairs * nb)) scratch.resize(static_cast<size_t>(kPairs * nb));
  for (int64_t t0 = 0; t0 < tokens; t0 += 2 * kPairs) {
    const int64_t n = tokens - t0 < 2 * kPairs ? tokens - t0 : 2 * kPairs;
    const int pairs = static_cast<int>((n + 1) / 2);
    const uint8_t* ar[2 * kPairs];
    float* lo[kPairs];
    float* hi[kPairs];
    for (int p = 0; p < pairs; ++p) {
      const int64_t t = t0 + 2 * p;
      const bool single = t + 1 >= tokens;
      ar[2 * p] = act + t * as;
      ar[2 * p + 1] = act + (single ? t : t + 1) * as;
      lo[p] = y + t * ys;
      hi[p] = single ? nullptr : y + (t + 1) * ys;
    }
    PreparePairs<W::kOffset>(ar, pairs, nb, scratch.data());
    switch (pairs) {
      case 4:
        AllRows<W, 4>(w, ws, rows, scratch.data(), nb, lo, hi);
        break;
      case 3:
        AllRows<W, 3>(w, ws, rows, scratch.data(), nb, lo, hi);
        break;
      case 2:
        AllRows<W, 2>(w, ws, rows, scratch.data(), nb, lo, hi);
        break;
      default:
        AllRows<W, 1>(w, ws, rows, scratch.data(), nb, lo, hi);
    }
  }
}

// One token: register tiles of kRowPairs row pairs.
template <class W>
LLAMAY_AVX512 void OneToken(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, int64_t nb,
                            float* y) {
  for (int64_t r = 0; r < rows; r += 2 * kRowPairs) {
    const int64_t n = rows - r < 2 * kRowPairs ? rows - r : 2 * kRowPairs;
    const uint8_t* wr[2 * kRowPairs];
    float* yr[2 * kRowPairs];
    for (int64_t i = 0; i < (n + 1) / 2 * 2; ++i) {
      const bool pad = r + i >= rows;  // the odd row's partner: itself again, result dropped
      wr[i] = w + (pad ? r + i - 1 : r + i) * ws;
      yr[i] = pad ? nullptr : y + r + i;
    }
    switch ((n + 1) / 2) {
      case 4:
        RunRowPairs<W, 4>(wr, act, nb, yr);
        break;
      case 3:
        RunRowPairs<W, 3>(wr, act, nb, yr);
        break;
      case 2:
        RunRowPairs<W, 2>(wr, act, nb, yr);
        break;
      default:
        RunRowPairs<W, 1>(wr, act, nb, yr);
    }
  }
}

template <class W>
LLAMAY_AVX512 void Tile(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as, int64_t tokens,
                        int64_t n_in, float* y, size_t ys) {
  const int64_t nb = n_in / kQk;
  if (tokens == 1) {
    OneToken<W>(w, ws, rows, act, nb, y);
  } else {
    TokensChunked<W>(w, ws, rows, act, as, tokens, nb, y, ys);
  }
}

}  // namespace

LLAMAY_AVX512 void TileAvx512Q8_0(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                                  int64_t tokens, int64_t n_in, float* y, size_t ys) {
  Tile<Q8_0Weights>(w, ws, rows, act, as, tokens, n_in, y, ys);
}
LLAMAY_AVX512 void TileAvx512Q4_0(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                                  int64_t tokens, int64_t n_in, float* y, size_t ys) {
  if (tokens == 1) return DecodeAvx512Q4_0(w, ws, rows, act, n_in, y);  // matmul_decode_q4.cc
  Tile<Q4_0Weights>(w, ws, rows, act, as, tokens, n_in, y, ys);
}
LLAMAY_AVX512 void TileAvx512Q5_0(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                                  int64_t tokens, int64_t n_in, float* y, size_t ys) {
  Tile<Q5_0Weights>(w, ws, rows, act, as, tokens, n_in, y, ys);
}

}  // namespace llamay::kernels
#endif  // __x86_64__
