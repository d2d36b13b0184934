// AVX-512 (BW + VNNI) tile kernels for Q4_K and Q5_K against Q8_K activations with several tokens: the
// design of TilePackedK45 in matmul_avx2_k.cc with 16 rows in the 16 int32 lanes of a zmm instead of 8 in a
// ymm. One token (decode) stays on the AVX2 kernel (TileAvx2Q4_K / TileAvx2Q5_K): it streams the weights
// and has nothing to amortise a transposition over.
//
// How it reaches the reference's bits (DotQ4_5K in reference/dot_ref.cc, vec_dot.h's canonical order):
// everything before the per-super-block f32 step is exact integer arithmetic, so any order gives the same
// sumi and smin. Per 16-row group and super-block, the weights are unpacked (Q5_K: with the fifth bit) and
// transposed once per tile into a per-thread buffer (PackK45), so that register j of sub-block s holds
// elements 4j..4j+3 of sub-block s of row r in lane r (as unsigned bytes, 0..15 or 0..31). Per token and
// sub-block, vpdpbusd against 4-byte activation broadcasts (from memory) forms exact int32 partial sums
// from zero, and the sub-block scale sc_s (at most 63, int32 per lane) multiplies exact sums:
//   - Q4_K: two runs of four vpdpbusd (16 elements each, at most 16 x 15 x 128 = 30720 in magnitude, so
//     each fits int16), each followed by one vpdpwssd into sumi against sc_s read as the int16 pair
//     (sc_s, 0): the low word of the run's sum times sc_s, plus its high word times 0;
//   - Q5_K: one run of eight vpdpbusd (the whole sub-block, at most 32 x 31 x 128), then vpmulld by sc_s
//     and vpaddd into sumi (16 of its elements can reach 63488, past int16).
// Measured on Sapphire Rapids against the AVX2 route of vpmaddubsw summed in int16, then vpmaddwd/vpdpwssd
// against the scales: the vpdpbusd + vpmulld form was 5-10% faster at 512 tokens (the same at 8), and
// Q4_K's vpdpwssd form another 0-10%.
// smin is four vpdpwssd of the rows' mins (pairs mn_2k, mn_2k+1 as int16) against the token's bsum pairs.
// Then the f32 step of the reference for 16 rows at once, in its order: dd = d_w * d_a, dm = dmin_w * d_a,
// acc = acc + (float(sumi) * dd - float(smin) * dm), mul, mul, sub, add, no FMA (the library builds with
// -ffp-contract=off, and every operation here is a separate intrinsic).
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

struct alignas(64) PackedK45 {
  __m512i q[8][8];  // sub-block s, register j: elements 4j..4j+3 of sub-block s of row r in lane r
  __m512i sc[8];    // sub-block s: lane r = sc_s of row r as int32, i.e. the int16 pair (sc_s, 0)
  __m512i mn[4];    // register k: lane r = (mn_2k, mn_2k+1) of row r as int16
  __m512 d, dmin;   // lane r: row r's f16 d and dmin, converted
};

template <typename Block, bool kFive>
LLAMAY_AVX512_INLINE void PackK45(const uint8_t* const* w, int64_t b, PackedK45* out) {
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
      __m512i lo = _mm512_and_si512(raw[j], low4), hi = _mm512_and_si512(_mm512_srli_epi16(raw[j], 4), low4);
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
      out->q[2 * c][j] = lo;
      out->q[2 * c + 1][j] = hi;
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
  for (int k = 0; k < 4; ++k) {
    const int i = 2 * (k & 1);
    out->mn[k] = _mm512_shuffle_epi8(k < 2 ? mn_lo : mn_hi, DwordMask(i, -1, i + 1, -1));
  }
  // f[0] lane r = d | dmin << 16.
  out->d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(f[0]));
  out->dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(f[0], 16)));
}

// 16 packed rows x T tokens. bs[t * nb * 4 + 4 * b + k]: token t's bsum sums of sub-blocks 2k, 2k+1 of
// super-block b, as an int16 pair. y + t * ys: row r of token t in lane r, lanes in m only.
template <typename Block, bool kFive, int T>
LLAMAY_AVX512 void RunPackedK45(const PackedK45* pk, const uint8_t* act, size_t as, const int32_t* bs,
                                int64_t nb, float* y, size_t ys, __mmask16 m, const uint8_t* ahead) {
  const BlockQ8_K* ab[T];
  for (int t = 0; t < T; ++t) ab[t] = reinterpret_cast<const BlockQ8_K*>(act + t * as);
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const PackedK45& p = pk[b];
    if (ahead != nullptr) {
      // The next 16 rows, which the next packing reads (the weights may come from memory): rows are usually
      // contiguous, so a share of 16 blocks per block.
      const char* next =
          reinterpret_cast<const char*>(ahead) + b * kGroup * static_cast<int64_t>(sizeof(Block));
      for (int off = 0; off < kGroup * static_cast<int>(sizeof(Block)); off += 64)
        _mm_prefetch(next + off, _MM_HINT_T0);
    }
    __m512i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) {
      const int8_t* as_s[T];
      for (int t = 0; t < T; ++t) as_s[t] = ab[t][b].qs + 32 * s;
      // Q4_K: the sum of 16 elements fits int16 (16 x 15 x 128 = 30720), so vpdpwssd against the scale
      // as the int16 pair (sc_s, 0) multiplies it exactly; Q5_K's (16 x 31 x 128) does not: vpmulld of
      // the whole sub-block sum.
      constexpr int kRunV = kFive ? 8 : 4;
#pragma GCC unroll 2
      for (int j0 = 0; j0 < 8; j0 += kRunV) {
        __m512i s32[T];
#pragma GCC unroll 8
        for (int j = j0; j < j0 + kRunV; ++j) {
          const __m512i q = p.q[s][j];
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) {
            s32[t] = _mm512_dpbusd_epi32(j == j0 ? _mm512_setzero_si512() : s32[t], q,
                                         _mm512_set1_epi32(avx512::Load32(as_s[t] + 4 * j)));
            __asm__("" : "+v"(s32[t]));
          }
        }
        for (int t = 0; t < T; ++t) {
          if constexpr (kRunV == 8) {
            isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(s32[t], p.sc[s]));
          } else {
            isum[t] = _mm512_dpwssd_epi32(isum[t], s32[t], p.sc[s]);
          }
          __asm__("" : "+v"(isum[t]));
        }
      }
    }
    const __m512 d = p.d, dmin = p.dmin;
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const int32_t* bt = bs + t * nb * 4 + 4 * b;
      __m512i smin = _mm512_madd_epi16(p.mn[0], _mm512_set1_epi32(bt[0]));
      for (int k = 1; k < 4; ++k) smin = _mm512_dpwssd_epi32(smin, p.mn[k], _mm512_set1_epi32(bt[k]));
      const __m512 da = _mm512_set1_ps(ab[t][b].d);
      const __m512 dd = _mm512_mul_ps(d, da), dm = _mm512_mul_ps(dmin, da);
      acc[t] = _mm512_add_ps(acc[t], _mm512_sub_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(isum[t]), dd),
                                                   _mm512_mul_ps(_mm512_cvtepi32_ps(smin), dm)));
    }
  }
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + t * ys, m, acc[t]);
}

// RunPackedK45<Block, kFive, n> for 1 <= n <= T.
template <typename Block, bool kFive, int T>
LLAMAY_AVX512_INLINE void RunPackedUpTo(int n, const PackedK45* pk, const uint8_t* act, size_t as,
                                        const int32_t* bs, int64_t nb, float* y, size_t ys, __mmask16 m,
                                        const uint8_t* ahead) {
  if constexpr (T > 1) {
    if (n < T) return RunPackedUpTo<Block, kFive, T - 1>(n, pk, act, as, bs, nb, y, ys, m, ahead);
  }
  RunPackedK45<Block, kFive, T>(pk, act, as, bs, nb, y, ys, m, ahead);
}

template <typename Block, bool kFive>
LLAMAY_AVX512 void TilePackedK45x16(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                                    int64_t tokens, int64_t n_in, float* y, size_t ys) {
  if (rows <= 0 || tokens <= 0) return;
  const int64_t nb = n_in / kQkK;
  thread_local std::vector<PackedK45> packed;
  thread_local std::vector<int32_t> bsum_pairs;
  if (packed.size() < static_cast<size_t>(nb)) packed.resize(static_cast<size_t>(nb));
  bsum_pairs.resize(static_cast<size_t>(tokens * nb * 4));
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t b = 0; b < nb; ++b) {
      const int16_t* q = reinterpret_cast<const BlockQ8_K*>(act + t * as)[b].bsums;
      for (int k = 0; k < 4; ++k) {
        const int32_t lo = q[4 * k] + q[4 * k + 1], hi = q[4 * k + 2] + q[4 * k + 3];  // |.| <= 4096
        bsum_pairs[static_cast<size_t>(t * nb * 4 + 4 * b + k)] =
            static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint16_t>(lo)) |
                                 (static_cast<uint32_t>(static_cast<uint16_t>(hi)) << 16));
      }
    }
  }
  for (int64_t r = 0; r < rows; r += kGroup) {
    const uint8_t* wr[kGroup];
    for (int64_t i = 0; i < kGroup; ++i) wr[i] = w + std::min(r + i, rows - 1) * ws;
    const int64_t valid = std::min<int64_t>(kGroup, rows - r);
    const __mmask16 m = static_cast<__mmask16>((1u << valid) - 1);
    for (int64_t b = 0; b < nb; ++b) PackK45<Block, kFive>(wr, b, &packed[static_cast<size_t>(b)]);
    const uint8_t* pf = r + kGroup < rows ? w + (r + kGroup) * ws : nullptr;  // prefetched by the first tile
    for (int64_t t = 0; t < tokens;) {
      if (t > 0) pf = nullptr;
      // Token tiles of at most kPackedTokens, as even as possible.
      const int64_t rest = tokens - t, groups = (rest + kPackedTokens - 1) / kPackedTokens;
      const int n = static_cast<int>((rest + groups - 1) / groups);
      RunPackedUpTo<Block, kFive, kPackedTokens>(
          n, packed.data(), act + t * as, as, bsum_pairs.data() + t * nb * 4, nb, y + t * ys + r, ys, m, pf);
      t += n;
    }
  }
}

}  // namespace

LLAMAY_AVX512 void TileAvx512Q4_K(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                                  int64_t tokens, int64_t n_in, float* y, size_t ys) {
  if (tokens == 1) return TileAvx2Q4_K(w, ws, rows, act, as, tokens, n_in, y, ys);
  TilePackedK45x16<BlockQ4_K, false>(w, ws, rows, act, as, tokens, n_in, y, ys);
}
LLAMAY_AVX512 void TileAvx512Q5_K(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                                  int64_t tokens, int64_t n_in, float* y, size_t ys) {
  if (tokens == 1) return TileAvx2Q5_K(w, ws, rows, act, as, tokens, n_in, y, ys);
  TilePackedK45x16<BlockQ5_K, true>(w, ws, rows, act, as, tokens, n_in, y, ys);
}

}  // namespace llamay::kernels
#endif  // __x86_64__
