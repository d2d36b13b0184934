// Internal to kernels/: AVX2 helpers and the tiling driver shared by the AVX2 kernels. Included only by
// x86-64 sources; every function carries the avx2/fma/f16c target, so the rest of the build stays generic.
#ifndef LLAMAY_KERNELS_AVX2_UTIL_H_
#define LLAMAY_KERNELS_AVX2_UTIL_H_

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/quant_blocks.h"

#define LLAMAY_AVX2 __attribute__((target("avx2,fma,f16c")))
#define LLAMAY_AVX2_INLINE __attribute__((target("avx2,fma,f16c"), always_inline)) inline

namespace llamay::kernels::avx2 {

// Reduce8 of reference.h on a register: halves 128+128, then 64+64, then 32+32.
LLAMAY_AVX2_INLINE float Reduce8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));  // s_k = a_k + a_k+4
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));                                         // (s0+s2, s1+s3)
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

// Reduce8 of eight registers at once: lane k of the result is bit for bit Reduce8(a[k]). Each step adds the
// same pairs, as the same operands in the same order, as Reduce8 does on one register:
// s = lo128 + hi128, then (s0 + s2, s1 + s3), then their sum.
LLAMAY_AVX2_INLINE __m256 Reduce8x8(const __m256* a) {
  // Rows k and k+4 share a register: low half from a[k], high half from a[k+4].
  __m256 s[4];
  for (int k = 0; k < 4; ++k)
    s[k] = _mm256_add_ps(_mm256_permute2f128_ps(a[k], a[k + 4], 0x20),
                         _mm256_permute2f128_ps(a[k], a[k + 4], 0x31));
  // Per 128-bit half: [s0+s2 of row k, of row k+1, s1+s3 of row k, of row k+1].
  const __m256 t01 = _mm256_add_ps(_mm256_unpacklo_ps(s[0], s[1]), _mm256_unpackhi_ps(s[0], s[1]));
  const __m256 t23 = _mm256_add_ps(_mm256_unpacklo_ps(s[2], s[3]), _mm256_unpackhi_ps(s[2], s[3]));
  return _mm256_add_ps(_mm256_shuffle_ps(t01, t23, _MM_SHUFFLE(1, 0, 1, 0)),
                       _mm256_shuffle_ps(t01, t23, _MM_SHUFFLE(3, 2, 3, 2)));
}

LLAMAY_AVX2_INLINE int32_t HsumI32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

LLAMAY_AVX2_INLINE float F16(uint16_t h) { return _cvtsh_ss(h); }

// Prefetches the cache lines of a block kPrefetchAhead bytes past p. Decode streams the weights from memory
// and a tile reads its rows a block at a time, too slowly for the hardware prefetcher alone; rows are
// usually contiguous, so this reaches into the rows of the next tiles. kernels_bench BM_DecodeStream, one
// thread, 512 MiB: Q4_K 95 ms without, 73 ms at 512 bytes, 58 at 2048, 50-52 at 4096-8192; Q6_K 85, 68,
// 65, 46-48. Used by the super-block kernels (matmul_avx2_k.cc, matmul_avx2_iq.cc).
inline constexpr int kPrefetchAhead = 4096;
template <int kBlockBytes>
LLAMAY_AVX2_INLINE void PrefetchBlock(const void* p) {
  const char* c = static_cast<const char*>(p) + kPrefetchAhead;
  for (int off = 0; off < kBlockBytes; off += 64) _mm_prefetch(c + off, _MM_HINT_T0);
}

// 16 bytes of nibble pairs -> 32 bytes: low nibbles (elements 0..15), then high nibbles (16..31).
LLAMAY_AVX2_INLINE __m256i UnpackNibbles16(const uint8_t* qs) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(v), _mm_srli_epi16(v, 4), 1);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// Byte j = 0x10 when bit j of the little-endian u32 at qh is set, else 0.
LLAMAY_AVX2_INLINE __m256i FifthBits(const uint8_t* qh) {
  int32_t bits;
  __builtin_memcpy(&bits, qh, 4);
  const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                        2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(bits), shuf);
  const __m256i mask = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, mask), mask);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// The f16 field at byte `offset` of block b (blocks of kBlockBytes) of 8 rows, converted: row i in lane i.
template <size_t kBlockBytes>
LLAMAY_AVX2_INLINE __m256 Gather8F16(const uint8_t* const* w, int64_t b, size_t offset) {
  uint64_t lo = 0, hi = 0;
  for (int i = 0; i < 8; ++i) {
    uint16_t h;
    __builtin_memcpy(&h, w[i] + b * static_cast<int64_t>(kBlockBytes) + offset, 2);
    (i < 4 ? lo : hi) |= static_cast<uint64_t>(h) << (16 * (i % 4));
  }
  return _mm256_cvtph_ps(_mm_set_epi64x(static_cast<int64_t>(hi), static_cast<int64_t>(lo)));
}

// The E8M0 exponent byte at `offset` of block b (blocks of kBlockBytes) of 8 rows as E8M0Half
// (quant_blocks.h) does: 2^(e-128), the f32 bits (e - 1) << 23, or 0x00200000 << e for the subnormal e < 2.
// Row i in lane i.
template <size_t kBlockBytes>
LLAMAY_AVX2_INLINE __m256 Gather8E8M0Half(const uint8_t* const* w, int64_t b, size_t offset) {
  uint64_t bytes = 0;
  for (int i = 0; i < 8; ++i)
    bytes |= static_cast<uint64_t>(w[i][b * static_cast<int64_t>(kBlockBytes) + offset]) << (8 * i);
  const __m256i e = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(bytes)));
  const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
  const __m256i subnormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
  const __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e);
  return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, subnormal, small));
}

// The weight scales d_w of block b of 8 rows, row i in lane i: the f16 d that every 32-element block type
// but MXFP4 starts with; MXFP4's 2^(e-128) from its exponent byte.
template <typename Block>
LLAMAY_AVX2_INLINE __m256 BlockScales8(const uint8_t* const* w, int64_t b) {
  if constexpr (std::is_same_v<Block, BlockMXFP4>) {
    return Gather8E8M0Half<sizeof(Block)>(w, b, offsetof(Block, e));
  } else {
    return Gather8F16<sizeof(Block)>(w, b, offsetof(Block, d));
  }
}

// Bytes p[0..3] in every 32-bit lane.
LLAMAY_AVX2_INLINE __m256i Broadcast4Bytes(const int8_t* p) {
  int32_t v;
  __builtin_memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

LLAMAY_AVX2_INLINE __m256i Load256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// The 8 rows of a register tile starting at row r of a rows x [ws bytes] matrix: w[i] is row r + i, or the
// last row again where r + i is past it (y[i], the output of row i, is then null: the result is dropped).
struct Rows8 {
  const uint8_t* w[8];
  float* y[8];
};
inline Rows8 RowGroup8(const uint8_t* w, size_t ws, int64_t rows, int64_t r, float* y) {
  Rows8 g;
  for (int64_t i = 0; i < 8; ++i) {
    const bool pad = r + i >= rows;
    g.w[i] = w + (pad ? rows - 1 : r + i) * ws;
    g.y[i] = pad ? nullptr : y + r + i;
  }
  return g;
}

// Decode's groups of 8 rows: group g of a task's `rows` takes rows g, g + G, ..., g + 7G (G = ceil(rows /
// 8), SpreadGroups), so the 8 rows read side by side are 8 forward streams in regions of their own, which
// the hardware prefetcher follows with no help; 8 neighbouring rows interleave their reads inside each page
// and need the software prefetch of PrefetchTileShare. On a Zen 2, kernels_bench BM_DecodeShape, streamed,
// AVX2 Q8_0 4096 x 2048: 19.2-21.5 -> 28.7-31.7 GiB/s at 2 threads, 10.9-11.6 -> 16.6-17.2 at one
// (docs/benchmarks.md, session 20). A padded row (past `rows`) repeats the group's previous row, which is
// read anyway; its y is null.
inline int64_t SpreadGroups(int64_t rows) { return (rows + 7) / 8; }
inline Rows8 SpreadRowGroup8(const uint8_t* w, size_t ws, int64_t rows, int64_t g, float* y) {
  const int64_t n_groups = SpreadGroups(rows);
  Rows8 out;
  int64_t last = g;
  for (int64_t i = 0; i < 8; ++i) {
    const int64_t r = g + i * n_groups;
    const bool pad = r >= rows;
    if (!pad) last = r;
    out.w[i] = w + last * ws;
    out.y[i] = pad ? nullptr : y + r;
  }
  return out;
}

// Streaming a tile of 8 rows from memory: the rows of the next tile (`ahead`) usually follow these, so while
// block b of this tile is read, the same share of the next one (8 blocks' worth) is prefetched, one
// sequential stream whatever the row length (matmul_decode_nibbles.cc has the measurements).
template <size_t kBlockBytes>
LLAMAY_AVX2_INLINE void PrefetchTileShare(const uint8_t* ahead, int64_t b) {
  const char* p = reinterpret_cast<const char*>(ahead) + b * 8 * static_cast<int64_t>(kBlockBytes);
  for (size_t off = 0; off < 8 * kBlockBytes; off += 64) _mm_prefetch(p + off, _MM_HINT_T0);
}

// The 8-row groups of a one-token product over `rows` rows: fn(group, ahead) for each. Spread groups
// (SpreadRowGroup8) get a null `ahead`; neighbouring groups (RowGroup8) get the next group's rows, whose
// share the run prefetches (PrefetchTileShare). No target attribute: it holds no intrinsics, and callers
// outside AVX2 functions (matmul_decode_nibbles.cc's Decode) inline it too.
template <typename Fn>
inline void ForEachDecodeGroup8(const uint8_t* w, size_t ws, int64_t rows, float* y, bool spread, Fn&& fn) {
  if (spread) {
    for (int64_t g = 0; g < SpreadGroups(rows); ++g) fn(SpreadRowGroup8(w, ws, rows, g, y), nullptr);
  } else {
    for (int64_t r = 0; r < rows; r += 8) fn(RowGroup8(w, ws, rows, r, y), w + (r + 8) * ws);
  }
}

// A tile's results: lane r of acc[t] to y[r][t * ys] (a null y[r] is a padded row, dropped).
template <int T>
LLAMAY_AVX2_INLINE void StoreTile8(const __m256* acc, float* const* y, size_t ys) {
  for (int t = 0; t < T; ++t) {
    alignas(32) float out[8];
    _mm256_store_ps(out, acc[t]);
    for (int r = 0; r < 8; ++r)
      if (y[r] != nullptr) y[r][t * ys] = out[r];
  }
}

// Runs Kernel::Run<R, T>(w, w_stride, act, act_stride, n_in, y, y_stride) over a rows x tokens tile in
// register tiles of Kernel::kRows x Kernel::kTokens, with smaller instantiations for the edges.
template <class Kernel, int R>
LLAMAY_AVX2_INLINE void RunTokens(const uint8_t* w, size_t ws, const uint8_t* act, size_t as, int64_t tokens,
                                  int64_t n_in, float* y, size_t ys) {
  constexpr int T = Kernel::kTokens;
  int64_t t = 0;
  for (; t + T <= tokens; t += T) Kernel::template Run<R, T>(w, ws, act + t * as, as, n_in, y + t * ys, ys);
  const uint8_t* a = act + t * as;
  float* yt = y + t * ys;
  switch (tokens - t) {
    case 0:
      break;
    case 1:
      Kernel::template Run<R, 1>(w, ws, a, as, n_in, yt, ys);
      break;
    case 2:
      if constexpr (T > 2) Kernel::template Run<R, 2>(w, ws, a, as, n_in, yt, ys);
      break;
    case 3:
      if constexpr (T > 3) Kernel::template Run<R, 3>(w, ws, a, as, n_in, yt, ys);
      break;
    default:
      for (int64_t i = t; i < tokens; ++i)
        Kernel::template Run<R, 1>(w, ws, act + i * as, as, n_in, y + i * ys, ys);
  }
}

// Kernel::kRowsDecode rows per register tile when there is a single token (decode: more independent
// accumulators per weight stream), Kernel::kRows otherwise.
//
// Decode's register tile takes rows rows/RD apart (row i, i + rows/RD, ...), not RD neighbours. Neighbouring
// rows interleave their reads (inside each 4 KiB page when a row is shorter than one: +1152 bytes, -1008,
// +1152, ... for two rows of 2048 Q4_K weights), which the hardware prefetcher of a Zen 2 follows poorly;
// rows apart are forward streams in regions of their own. kernels_bench BM_DecodeShape, 2 threads, streamed
// (docs/benchmarks.md, session 20): Q4_K 4096 x 2048 16.4-17.4 -> 24.6-25.0 GiB/s, Q6_K 32000 x 2048
// 18.3-18.5 -> 26.2-26.9, F16 4096 x 2048 24.9-25.1 -> 29.0-29.2 (one thread 13.1-13.3 -> 17.1). The
// K-quants' own PrefetchBlock still pays (20-21 GiB/s without it), where the 8-row groups of
// SpreadRowGroup8 need none. Each row's arithmetic is unchanged, so are its bits.
template <class Kernel>
LLAMAY_AVX2_INLINE void RunTile(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                                int64_t tokens, int64_t n_in, float* y, size_t ys) {
  int64_t r = 0;
  if (tokens == 1) {
    constexpr int RD = Kernel::kRowsDecode;
    const int64_t part = rows / RD;
    for (int64_t i = 0; i < part; ++i) {
      float out[RD];
      Kernel::template Run<RD, 1>(w + i * ws, part * ws, act, as, n_in, out, ys);
      for (int k = 0; k < RD; ++k) y[i + k * part] = out[k];
    }
    r = RD * part;
  }
  constexpr int R = Kernel::kRows;
  for (; r + R <= rows; r += R) RunTokens<Kernel, R>(w + r * ws, ws, act, as, tokens, n_in, y + r, ys);
  for (; r < rows; ++r) RunTokens<Kernel, 1>(w + r * ws, ws, act, as, tokens, n_in, y + r, ys);
}

// v[r] = the 8 dwords of row r -> v[j] = dword j of rows 0..7.
LLAMAY_AVX2_INLINE void Transpose8x8Epi32(__m256i* v) {
  __m256i t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_epi32(v[2 * i], v[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
  }
  for (int h = 0; h < 2; ++h) {  // rows 0..3, then 4..7
    const __m256i* th = t + 4 * h;
    u[4 * h + 0] = _mm256_unpacklo_epi64(th[0], th[2]);
    u[4 * h + 1] = _mm256_unpackhi_epi64(th[0], th[2]);
    u[4 * h + 2] = _mm256_unpacklo_epi64(th[1], th[3]);
    u[4 * h + 3] = _mm256_unpackhi_epi64(th[1], th[3]);
  }
  for (int j = 0; j < 4; ++j) {
    v[j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x20);
    v[j + 4] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x31);
  }
}

// ---- Partial registers: the first n of 8 lanes ----

// All ones in the first n lanes (0 <= n <= 8), a mask for _mm256_maskload_ps / _mm256_maskstore_ps.
LLAMAY_AVX2_INLINE __m256i FirstLanes(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Register u of a block of kN registers of columns: only the last one may be partial (its lanes in mask).
template <int kN, bool kMasked>
LLAMAY_AVX2_INLINE __m256 ColLoad(const float* p, int u, __m256i mask) {
  return kMasked && u == kN - 1 ? _mm256_maskload_ps(p, mask) : _mm256_loadu_ps(p);
}
template <int kN, bool kMasked>
LLAMAY_AVX2_INLINE void ColStore(float* p, int u, __m256i mask, __m256 v) {
  if (kMasked && u == kN - 1) {
    _mm256_maskstore_ps(p, mask, v);
  } else {
    _mm256_storeu_ps(p, v);
  }
}

}  // namespace llamay::kernels::avx2

#endif  // __x86_64__
#endif  // LLAMAY_KERNELS_AVX2_UTIL_H_
