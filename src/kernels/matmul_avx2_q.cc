// AVX2 tile kernels for the 32-element block types (Q8_0, Q4_0, Q5_0 with Q8_0 activations; Q4_1, Q5_1
// with Q8_1 activations). Per block and (row, token) pair: one vpmaddubsw/vpmaddwd pair gives the eight
// exact int32 lane sums of vec_dot.h (lane l = elements 4l..4l+3), converted and scaled into eight f32
// accumulators exactly as reference/dot_ref.cc does.
#if defined(__x86_64__)
#include "kernels/avx2_util.h"
#include "kernels/matmul_kernels.h"
#include "kernels/quant_blocks.h"

namespace llamay::kernels {
namespace {

using avx2::F16;
using avx2::Load256;

// Signed weights (Q8_0): |w| * (a with w's sign), so that w = -128 still multiplies correctly.
struct Q8_0Traits {
  using Block = BlockQ8_0;
  using ActBlock = BlockQ8_0;
  static constexpr bool kHasMin = false;
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

template <class Tr, int kR, int kT>
struct BlockKernel {
  static constexpr int kRows = kR, kTokens = kT, kRowsDecode = 4;

  template <int R, int T>
  LLAMAY_AVX2 static void Run(const uint8_t* w, size_t ws, const uint8_t* act, size_t as, int64_t n_in,
                              float* y, size_t ys) {
    using Block = typename Tr::Block;
    using ActBlock = typename Tr::ActBlock;
    const int64_t nb = n_in / kQk;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[R][T];
    float macc[R][T];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps(), macc[r][t] = 0.0f;
    for (int64_t b = 0; b < nb; ++b) {
      typename Tr::W wv[R];
      __m256 dw[R];
      float mw[R];
      if constexpr (T == 1) {
        // Decode streams the weights: prefetch the next register tile's share (its rows follow these).
        const char* next = reinterpret_cast<const char*>(w + R * ws) + b * R * sizeof(Block);
        for (int off = 0; off < R * static_cast<int>(sizeof(Block)); off += 64) _mm_prefetch(next + off, _MM_HINT_T0);
      }
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const Block& blk = reinterpret_cast<const Block*>(w + r * ws)[b];
        wv[r] = Tr::LoadW(blk);
        dw[r] = _mm256_set1_ps(F16(blk.d));
        if constexpr (Tr::kHasMin) mw[r] = F16(blk.m);
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const ActBlock& ab = reinterpret_cast<const ActBlock*>(act + t * as)[b];
        const typename Tr::A av = Tr::LoadA(ab);
        const __m256 da = _mm256_set1_ps(F16(ab.d));
        float sa = 0.0f;
        if constexpr (Tr::kHasMin) sa = F16(ab.s);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const __m256i p = _mm256_madd_epi16(Tr::Dot16(wv[r], av), ones);
          const __m256 dd = _mm256_mul_ps(dw[r], da);
          acc[r][t] = _mm256_add_ps(acc[r][t], _mm256_mul_ps(_mm256_cvtepi32_ps(p), dd));
          if constexpr (Tr::kHasMin) macc[r][t] = macc[r][t] + mw[r] * sa;
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int t = 0; t < T; ++t) {
        float v = avx2::Reduce8(acc[r][t]);
        if constexpr (Tr::kHasMin) v = v + macc[r][t];
        y[t * ys + r] = v;
      }
    }
  }
};

using Q4_0Traits = OffsetTraits<BlockQ4_0, 8, false>;
using Q5_0Traits = OffsetTraits<BlockQ5_0, 16, true>;
using Q4_1Traits = MinTraits<BlockQ4_1, false>;
using Q5_1Traits = MinTraits<BlockQ5_1, true>;

}  // namespace

#define LLAMAY_DEFINE_TILE(name, traits, rows, tokens)                                               \
  LLAMAY_AVX2 void name(const uint8_t* w, size_t ws, int64_t n_rows, const uint8_t* act, size_t as,  \
                        int64_t n_tokens, int64_t n_in, float* y, size_t ys) {                       \
    avx2::RunTile<BlockKernel<traits, rows, tokens>>(w, ws, n_rows, act, as, n_tokens, n_in, y, ys); \
  }

LLAMAY_DEFINE_TILE(TileAvx2Q8_0, Q8_0Traits, 2, 4)
LLAMAY_DEFINE_TILE(TileAvx2Q5_0, Q5_0Traits, 2, 4)
LLAMAY_DEFINE_TILE(TileAvx2Q4_1, Q4_1Traits, 2, 4)
LLAMAY_DEFINE_TILE(TileAvx2Q5_1, Q5_1Traits, 2, 4)

#undef LLAMAY_DEFINE_TILE

// Q4_0: one token goes to the decode kernel (matmul_decode_q4.cc), which reads the nibbles unreordered.
LLAMAY_AVX2 void TileAvx2Q4_0(const uint8_t* w, size_t ws, int64_t n_rows, const uint8_t* act, size_t as,
                              int64_t n_tokens, int64_t n_in, float* y, size_t ys) {
  if (n_tokens == 1) return DecodeAvx2Q4_0(w, ws, n_rows, act, n_in, y);
  avx2::RunTile<BlockKernel<Q4_0Traits, 2, 4>>(w, ws, n_rows, act, as, n_tokens, n_in, y, ys);
}

}  // namespace llamay::kernels
#endif  // __x86_64__
