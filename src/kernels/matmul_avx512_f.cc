// AVX-512 tile kernels for the float weight types (F32, F16, BF16) with several tokens, bit-identical to
// the scalar reference (vec_dot.h's canonical order for float types: eight lane sums per (row, token),
// lane i%8 accumulating w_i * a_i in order of i from 0.0f, then Reduce8 ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7))).
//
// A zmm register holds two (row, token) pairs as two 8-lane slots: rows 2p and 2p+1 against one token.
// The weight register of a row pair has row 2p's elements k..k+7 in the low 256 bits and row 2p+1's in the
// high 256 bits; the token's activations k..k+7 are broadcast to both halves (a load-port broadcast, no
// shuffle). So lane j of the low slot accumulates exactly what lane j of the AVX2 kernel's register for
// (row 2p, token) does, with the same operation (fused for F16, whose products of two f16 values are exact
// in f32; multiply then add for F32 and BF16), in the same order of k; likewise the high slot for row 2p+1.
// At the end each 256-bit slot is reduced with avx2::Reduce8, as the AVX2 kernel reduces its register.
// No lane ever mixes elements of different k-steps, rows or tokens, so the bits are the reference's.
//
// Register tile: 3 row pairs x 8 tokens (24 zmm accumulators, 3 weight registers and one activation
// register, within the 32): per k-step 24 FMAs against 3 weight registers and 8 broadcast loads. An odd
// last row is paired with itself (its high slot is computed and discarded); smaller instantiations take
// the row and token edges.
//
// Converting and pairing the weights (two loads, an insert and vcvtph2ps per pair) takes the FMA ports'
// time. With more than one token tile (tokens > 8) each group of 6 rows is therefore converted once into
// a buffer of pair registers (Pack: the same exact conversion, stored), and every token tile then runs on
// plain aligned loads (TilePacked: rows outer, token tiles inner). With at most 8 tokens (Direct) the
// weights are converted as they are read. Either way each slot sees the same values in the same order.
//
// With one token (decode, memory-bound) the AVX2 kernels do the work. REQUIRES: n_in % 8 == 0.
#if defined(__x86_64__)
#include <vector>

#include "kernels/avx2_util.h"
#include "kernels/avx512_util.h"
#include "kernels/matmul_kernels.h"

namespace llamay::kernels {
namespace {

// Two rows' elements k..k+7 as f32: row lo in the low 256 bits, row hi in the high 256 bits.
struct F32Pair {
  LLAMAY_AVX512_INLINE static __m512 Load(const uint8_t* lo, const uint8_t* hi, int64_t k) {
    const __m256 l = _mm256_loadu_ps(reinterpret_cast<const float*>(lo) + k);
    const __m256 h = _mm256_loadu_ps(reinterpret_cast<const float*>(hi) + k);
    return _mm512_castpd_ps(
        _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(l)), _mm256_castps_pd(h), 1));
  }
  // The product of two f32 values is rounded: multiply, then add (no fusing).
  LLAMAY_AVX512_INLINE static __m512 Madd(__m512 w, __m512 a, __m512 acc) {
    return _mm512_add_ps(acc, _mm512_mul_ps(w, a));
  }
};

struct F16Pair {
  LLAMAY_AVX512_INLINE static __m512 Load(const uint8_t* lo, const uint8_t* hi, int64_t k) {
    const __m128i l = _mm_loadu_si128(reinterpret_cast<const __m128i*>(lo + 2 * k));
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(hi + 2 * k));
    return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(l), h, 1));
  }
  // Both factors have 11-bit significands and f16 range: the product is exact, so a fused multiply-add
  // rounds exactly as multiply-then-add does.
  LLAMAY_AVX512_INLINE static __m512 Madd(__m512 w, __m512 a, __m512 acc) {
    return _mm512_fmadd_ps(w, a, acc);
  }
};

struct Bf16Pair {
  LLAMAY_AVX512_INLINE static __m512 Load(const uint8_t* lo, const uint8_t* hi, int64_t k) {
    const __m128i l = _mm_loadu_si128(reinterpret_cast<const __m128i*>(lo + 2 * k));
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(hi + 2 * k));
    const __m512i v = _mm512_cvtepu16_epi32(_mm256_inserti128_si256(_mm256_castsi128_si256(l), h, 1));
    return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
  }
  // bf16 products are exact in significand but can leave the f32 range: multiply, then add.
  LLAMAY_AVX512_INLINE static __m512 Madd(__m512 w, __m512 a, __m512 acc) {
    return _mm512_add_ps(acc, _mm512_mul_ps(w, a));
  }
};
// The high 256 bits of v.
LLAMAY_AVX512_INLINE __m256 High256(__m512 v) {
  return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

// Eight floats at p in both halves (a broadcast load: no shuffle port).
LLAMAY_AVX512_INLINE __m512 Broadcast256(const float* p) {
  return _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_loadu_pd(reinterpret_cast<const double*>(p))));
}

// 16 packed floats: one row pair's k-step.
struct alignas(64) Block {
  float v[16];
};

template <class Tr, int kPairs, int kTokens>
struct PairKernel {
  // P row pairs (rows[2p], rows[2p + 1]) x T tokens; stores row 2p + s only where 2p + s < n_rows.
  // Packed: rows[0] is P pair blocks of 2 * n_in floats (Pack's layout) instead of 2P row pointers.
  template <int P, int T, bool Packed = false>
  LLAMAY_AVX512 static void Run(const uint8_t* const* rows, int n_rows, const uint8_t* act, size_t as,
                                int64_t n_in, float* y, size_t ys) {
    __m512 acc[P][T];
    for (int p = 0; p < P; ++p)
      for (int t = 0; t < T; ++t) acc[p][t] = _mm512_setzero_ps();
    const uint8_t* rp[2 * P];
    for (int i = 0; i < 2 * P; ++i) rp[i] = rows[i];
    for (int64_t k = 0; k < n_in; k += 8) {
      __m512 wv[P];
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
        if constexpr (Packed) {
          wv[p] = _mm512_load_ps(reinterpret_cast<const float*>(rp[0]) + (2 * p * n_in + 2 * k));
        } else {
          wv[p] = Tr::Load(rp[2 * p], rp[2 * p + 1], k);
        }
      }
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        const __m512 a = Broadcast256(reinterpret_cast<const float*>(act + t * as) + k);
#pragma GCC unroll 4
        for (int p = 0; p < P; ++p) acc[p][t] = Tr::Madd(wv[p], a, acc[p][t]);
      }
    }
    for (int p = 0; p < P; ++p)
      for (int t = 0; t < T; ++t) {
        y[t * ys + 2 * p] = avx2::Reduce8(_mm512_castps512_ps256(acc[p][t]));
        if (2 * p + 1 < n_rows) y[t * ys + 2 * p + 1] = avx2::Reduce8(High256(acc[p][t]));
      }
  }

  // Converts rows[0..2P) into P pair blocks: block p, k-step j = Tr::Load(rows[2p], rows[2p + 1], 8j), an
  // exact conversion, so the packed kernel multiplies the same values.
  LLAMAY_AVX512_INLINE static void Pack(const uint8_t* const* rows, int pairs, int64_t n_in, Block* out) {
    for (int p = 0; p < pairs; ++p)
      for (int64_t k = 0; k < n_in; k += 8) {
        _mm512_store_ps((out++)->v, Tr::Load(rows[2 * p], rows[2 * p + 1], k));
      }
  }

  // Several token tiles: rows outer, each register tile's rows packed once and reused by every token tile.
  LLAMAY_AVX512_INLINE static void TilePacked(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act,
                                              size_t as, int64_t tokens, int64_t n_in, float* y, size_t ys) {
    static thread_local std::vector<Block> buf;
    constexpr int R = 2 * kPairs;
    if (buf.size() < static_cast<size_t>(kPairs * n_in / 8)) buf.resize(kPairs * n_in / 8);
    const uint8_t* rp[R];
    const uint8_t* pk[R] = {reinterpret_cast<const uint8_t*>(buf.data())};  // Run reads pk[0] only
    int64_t r = 0;
    for (; r + R <= rows; r += R) {
      for (int i = 0; i < R; ++i) rp[i] = w + (r + i) * ws;
      Pack(rp, kPairs, n_in, buf.data());
      int64_t t = 0;
      for (; t + kTokens <= tokens; t += kTokens)
        Run<kPairs, kTokens, true>(pk, R, act + t * as, as, n_in, y + t * ys + r, ys);
      if (t < tokens) TailPacked<kTokens - 1>(tokens - t, pk, act + t * as, as, n_in, y + t * ys + r, ys);
    }
    if (r < rows) Direct(w + r * ws, ws, rows - r, act, as, tokens, n_in, y + r, ys);
  }

  template <int T>
  LLAMAY_AVX512_INLINE static void TailPacked(int64_t t, const uint8_t* const* pk, const uint8_t* act,
                                              size_t as, int64_t n_in, float* y, size_t ys) {
    if constexpr (T >= 1) {
      if (t == T) return Run<kPairs, T, true>(pk, 2 * kPairs, act, as, n_in, y, ys);
      TailPacked<T - 1>(t, pk, act, as, n_in, y, ys);
    }
  }

  template <int T>
  LLAMAY_AVX512_INLINE static void RunRows(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act,
                                           size_t as, int64_t n_in, float* y, size_t ys) {
    constexpr int R = 2 * kPairs;
    const uint8_t* rp[R];
    int64_t r = 0;
    for (; r + R <= rows; r += R) {
      for (int i = 0; i < R; ++i) rp[i] = w + (r + i) * ws;
      Run<kPairs, T>(rp, R, act, as, n_in, y + r, ys);
    }
    for (; r < rows; r += 2) {
      const int n = rows - r >= 2 ? 2 : 1;
      rp[0] = w + r * ws;
      rp[1] = w + (r + n - 1) * ws;
      Run<1, T>(rp, n, act, as, n_in, y + r, ys);
    }
  }

  template <int T>
  LLAMAY_AVX512_INLINE static void Tail(int64_t t, const uint8_t* w, size_t ws, int64_t rows,
                                        const uint8_t* act, size_t as, int64_t n_in, float* y, size_t ys) {
    if constexpr (T >= 1) {
      if (t == T) return RunRows<T>(w, ws, rows, act, as, n_in, y, ys);
      Tail<T - 1>(t, w, ws, rows, act, as, n_in, y, ys);
    }
  }

  LLAMAY_AVX512_INLINE static void Tile(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act,
                                        size_t as, int64_t tokens, int64_t n_in, float* y, size_t ys) {
    if (tokens > kTokens && rows >= 2 * kPairs) {
      TilePacked(w, ws, rows, act, as, tokens, n_in, y, ys);
    } else {
      Direct(w, ws, rows, act, as, tokens, n_in, y, ys);
    }
  }

  // One token tile (or few rows): token tiles outer, the weights converted as they are read.
  LLAMAY_AVX512_INLINE static void Direct(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act,
                                          size_t as, int64_t tokens, int64_t n_in, float* y, size_t ys) {
    int64_t t = 0;
    for (; t + kTokens <= tokens; t += kTokens) {
      RunRows<kTokens>(w, ws, rows, act + t * as, as, n_in, y + t * ys, ys);
    }
    if (t < tokens) Tail<kTokens - 1>(tokens - t, w, ws, rows, act + t * as, as, n_in, y + t * ys, ys);
  }
};

constexpr int kPairs = 3, kTokens = 8;

}  // namespace

LLAMAY_AVX512 void TileAvx512F32(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                                 int64_t tokens, int64_t n_in, float* y, size_t ys) {
  if (tokens == 1) return TileAvx2F32(w, ws, rows, act, as, tokens, n_in, y, ys);
  PairKernel<F32Pair, kPairs, kTokens>::Tile(w, ws, rows, act, as, tokens, n_in, y, ys);
}
LLAMAY_AVX512 void TileAvx512F16(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                                 int64_t tokens, int64_t n_in, float* y, size_t ys) {
  if (tokens == 1) return TileAvx2F16(w, ws, rows, act, as, tokens, n_in, y, ys);
  PairKernel<F16Pair, kPairs, kTokens>::Tile(w, ws, rows, act, as, tokens, n_in, y, ys);
}
LLAMAY_AVX512 void TileAvx512Bf16(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                                  int64_t tokens, int64_t n_in, float* y, size_t ys) {
  if (tokens == 1) return TileAvx2Bf16(w, ws, rows, act, as, tokens, n_in, y, ys);
  PairKernel<Bf16Pair, kPairs, kTokens>::Tile(w, ws, rows, act, as, tokens, n_in, y, ys);
}

}  // namespace llamay::kernels
#endif  // __x86_64__
