// MatMul: exact agreement with the reference dot per element, and the determinism contract: bit-identical
// results for any thread count, and for a token alone or inside any batch.
#include "kernels/matmul.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "kernels/dequant.h"
#include "kernels/matmul_kernels.h"
#include "kernels/test_util.h"
#include "kernels/thread_pool.h"
#include "kernels/vec_dot.h"

namespace llamay::kernels {
namespace {

using test_util::Bits;
using test_util::RandomFloats;
using test_util::SameBits;

const TensorType kAllTypes[] = {
    TensorType::kF32,  TensorType::kF16,    TensorType::kBF16,  TensorType::kQ8_0,
    TensorType::kQ4_0, TensorType::kQ4_1,   TensorType::kQ5_0,  TensorType::kQ5_1,
    TensorType::kQ4_K, TensorType::kQ5_K,   TensorType::kQ6_K,  TensorType::kQ3_K,
    TensorType::kQ2_K, TensorType::kIQ4_NL, TensorType::kMXFP4, TensorType::kIQ4_XS};

// The K-quants (super-blocks of 256), which the tests give rows of 256 multiples.
bool IsK(TensorType t) { return TypeBlockSize(t) == 256; }

struct Problem {
  TensorType type;
  int64_t n_out, n_in, n_tokens;
  std::vector<uint8_t> w;
  std::vector<float> x;
  WeightMatrix matrix() const { return {type, w.data(), n_out, n_in, 0}; }
};

Problem MakeProblem(std::mt19937& rng, TensorType t, int64_t n_out, int64_t n_tokens) {
  Problem p{t, n_out, IsK(t) ? 512 : 160, n_tokens, {}, {}};
  p.w = test_util::RandomRawWeights(rng, t, n_out, p.n_in);
  p.x = RandomFloats(rng, n_tokens * p.n_in);
  return p;
}

std::vector<float> RunMatMul(const Problem& p, ThreadPool* pool, Isa isa, int64_t first_token,
                             int64_t n_tokens) {
  std::vector<float> y(n_tokens * p.n_out);
  PreparedActivations scratch;
  MatMul(pool, p.matrix(), p.x.data() + first_token * p.n_in, n_tokens, y.data(), &scratch, isa);
  return y;
}

using test_util::SupportedIsas;

TEST(MatMul, EveryElementIsTheReferenceDot) {
  std::mt19937 rng(10);
  for (TensorType t : kAllTypes) {
    const Problem p = MakeProblem(rng, t, 37, 9);
    const ActFormat f = ActivationFormat(t);
    const size_t as = ActivationRowBytes(f, p.n_in), ws = TypeRowBytes(t, p.n_in);
    std::vector<uint8_t> act(as * p.n_tokens);
    for (int64_t k = 0; k < p.n_tokens; ++k)
      QuantizeActivationRow(f, p.x.data() + k * p.n_in, p.n_in, act.data() + k * as);
    for (Isa isa : SupportedIsas()) {
      const auto y = RunMatMul(p, nullptr, isa, 0, p.n_tokens);
      int64_t mismatches = 0;
      for (int64_t k = 0; k < p.n_tokens; ++k)
        for (int64_t r = 0; r < p.n_out; ++r)
          mismatches += Bits(y[k * p.n_out + r]) !=
                        Bits(VecDot(t, p.w.data() + r * ws, act.data() + k * as, p.n_in, Isa::kScalar));
      EXPECT_EQ(mismatches, 0) << TensorTypeName(t) << " " << IsaName(isa);
    }
  }
}

TEST(MatMul, ThreadCountDoesNotChangeBits) {
  std::mt19937 rng(11);
  std::vector<std::unique_ptr<ThreadPool>> pools;
  for (int n : {1, 2, 3, 5}) pools.push_back(std::make_unique<ThreadPool>(n));
  for (TensorType t : kAllTypes) {
    for (int64_t n_tokens : {1, 70}) {  // decode split and prefill split (70 crosses a 64-token tile)
      const Problem p = MakeProblem(rng, t, 133, n_tokens);
      for (Isa isa : SupportedIsas()) {
        const auto base = RunMatMul(p, nullptr, isa, 0, n_tokens);
        for (auto& pool : pools)
          EXPECT_TRUE(SameBits(base, RunMatMul(p, pool.get(), isa, 0, n_tokens)))
              << TensorTypeName(t) << " " << IsaName(isa) << " threads=" << pool->num_threads()
              << " tokens=" << n_tokens;
      }
    }
  }
}

TEST(MatMul, TokenAloneEqualsTokenInAnyBatch) {
  std::mt19937 rng(12);
  ThreadPool pool(3);
  for (TensorType t : kAllTypes) {
    const Problem p = MakeProblem(rng, t, 45, 70);
    for (Isa isa : SupportedIsas()) {
      const auto batch = RunMatMul(p, &pool, isa, 0, p.n_tokens);
      const auto sub =
          RunMatMul(p, &pool, isa, 5, 7);  // tokens 5..11 with other neighbours and tile positions
      for (int64_t k = 0; k < p.n_tokens; ++k) {
        const auto alone = RunMatMul(p, &pool, isa, k, 1);
        ASSERT_EQ(std::memcmp(alone.data(), batch.data() + k * p.n_out, p.n_out * sizeof(float)), 0)
            << TensorTypeName(t) << " " << IsaName(isa) << " token " << k;
        if (k >= 5 && k < 12) {
          ASSERT_EQ(std::memcmp(sub.data() + (k - 5) * p.n_out, batch.data() + k * p.n_out,
                                p.n_out * sizeof(float)),
                    0)
              << TensorTypeName(t) << " " << IsaName(isa) << " token " << k << " in a sub-batch";
        }
      }
    }
  }
}

// The one-token (decode) paths pad and tile rows their own way: every row count of a tile from 1 to 19 and
// several row lengths (including odd block counts and a large one), each element against the scalar dot,
// with a row stride wider than the row.
TEST(MatMul, OneTokenPathsMatchTheReferenceOnOddShapes) {
  std::mt19937 rng(15);
  for (TensorType t : kAllTypes) {
    const std::vector<int64_t> lengths =
        IsK(t) ? std::vector<int64_t>{256, 768, 2816 / 256 * 256} : std::vector<int64_t>{32, 96, 160, 2816};
    for (int64_t n_in : lengths) {
      const int64_t max_rows = 19;
      const size_t rb = TypeRowBytes(t, n_in), ws = rb + 40;
      const auto packed = test_util::RandomRawWeights(rng, t, max_rows, n_in);
      std::vector<uint8_t> w(ws * max_rows, 0xFF);
      for (int64_t r = 0; r < max_rows; ++r) std::memcpy(w.data() + r * ws, packed.data() + r * rb, rb);
      const ActFormat f = ActivationFormat(t);
      std::vector<uint8_t> act(ActivationRowBytes(f, n_in));
      const auto x = RandomFloats(rng, n_in);
      QuantizeActivationRow(f, x.data(), n_in, act.data());
      for (Isa isa : SupportedIsas()) {
        for (int64_t rows = 1; rows <= max_rows; ++rows) {
          std::vector<float> y(rows + 8, -1.0f);  // 8 canaries: a tile pads to at most 8 rows
          GetTileFn(t, isa, n_in)(w.data(), ws, rows, act.data(), 0, 1, n_in, y.data(), 1);
          int64_t mismatches = 0;
          for (int64_t r = 0; r < rows; ++r)
            mismatches +=
                Bits(y[r]) != Bits(VecDot(t, packed.data() + r * rb, act.data(), n_in, Isa::kScalar));
          EXPECT_EQ(mismatches, 0) << TensorTypeName(t) << " " << IsaName(isa) << " n_in=" << n_in
                                   << " rows=" << rows;
          for (int64_t i = rows; i < rows + 8; ++i)
            EXPECT_EQ(y[i], -1.0f) << "wrote past the tile: " << TensorTypeName(t) << " " << IsaName(isa)
                                   << " rows=" << rows;
        }
      }
    }
  }
}

// The float types take any row length (stories260K's FFN is 172 wide): lengths that are not a multiple of 8,
// 1 to 20 tokens, 1 to 11 rows, rows 40 bytes apart beyond their end (filled with 0xFF, a NaN if read), every
// element the scalar dot's bits on every level; some weights are -0, and rows 3 and 4 are all -0 and all +0.
TEST(MatMul, FloatTypesTakeAnyRowLength) {
  std::mt19937 rng(29);
  for (TensorType t : {TensorType::kF32, TensorType::kF16, TensorType::kBF16}) {
    for (int64_t n_in : {1, 5, 13, 172, 8 * 33 + 7}) {
      const int64_t max_rows = 11, max_tokens = 20;
      const size_t rb = TypeRowBytes(t, n_in), ws = rb + 40;
      auto packed = test_util::RandomRawWeights(rng, t, max_rows, n_in);
      const size_t zero = t == TensorType::kF32 ? 0x80000000u : 0x8000u;  // -0 in the type
      for (int64_t i = 0; i < n_in; ++i) {
        for (int64_t r : {3, 4}) {
          if (t == TensorType::kF32) {
            const uint32_t v = r == 3 ? static_cast<uint32_t>(zero) : 0u;
            std::memcpy(packed.data() + r * rb + i * 4, &v, 4);
          } else {
            const uint16_t v = r == 3 ? static_cast<uint16_t>(zero) : 0;
            std::memcpy(packed.data() + r * rb + i * 2, &v, 2);
          }
        }
      }
      std::vector<uint8_t> w(ws * max_rows, 0xFF);
      for (int64_t r = 0; r < max_rows; ++r) std::memcpy(w.data() + r * ws, packed.data() + r * rb, rb);
      const ActFormat f = ActivationFormat(t);
      const size_t as = ActivationRowBytes(f, n_in) + 24;
      std::vector<uint8_t> act(as * max_tokens, 0xFF);
      for (int64_t k = 0; k < max_tokens; ++k) {
        const auto x = RandomFloats(rng, n_in);
        QuantizeActivationRow(f, x.data(), n_in, act.data() + k * as);
      }
      for (Isa isa : SupportedIsas()) {
        for (int64_t tokens : {1, 2, 5, 20}) {
          for (int64_t rows : {1, 4, 11}) {
            std::vector<float> y(static_cast<size_t>(tokens * rows), -1.0f);
            GetTileFn(t, isa, n_in)(w.data(), ws, rows, act.data(), as, tokens, n_in, y.data(), rows);
            int64_t mismatches = 0;
            for (int64_t k = 0; k < tokens; ++k)
              for (int64_t r = 0; r < rows; ++r)
                mismatches += Bits(y[k * rows + r]) != Bits(VecDot(t, packed.data() + r * rb,
                                                                   act.data() + k * as, n_in, Isa::kScalar));
            EXPECT_EQ(mismatches, 0) << TensorTypeName(t) << " " << IsaName(isa) << " n_in=" << n_in
                                     << " tokens=" << tokens << " rows=" << rows;
          }
        }
      }
    }
  }
}

// Random weights and prepared activations stored with row strides wider than their rows (40 and 24 spare
// bytes, filled with 0xFF and 0xEE), as a caller with padded rows passes them; `packed` holds the weight
// rows without padding, for the reference.
struct StridedProblem {
  std::vector<uint8_t> packed, w, act;
  size_t rb, ws, as;  // weight row bytes, weight stride, activation stride
};
StridedProblem MakeStrided(std::mt19937& rng, TensorType t, int64_t n_in, int64_t rows, int64_t tokens) {
  StridedProblem p;
  p.rb = TypeRowBytes(t, n_in);
  p.ws = p.rb + 40;
  p.packed = test_util::RandomRawWeights(rng, t, rows, n_in);
  p.w.assign(p.ws * rows, 0xFF);
  for (int64_t r = 0; r < rows; ++r) std::memcpy(p.w.data() + r * p.ws, p.packed.data() + r * p.rb, p.rb);
  const ActFormat f = ActivationFormat(t);
  p.as = ActivationRowBytes(f, n_in) + 24;
  p.act.assign(p.as * tokens, 0xEE);
  const auto x = RandomFloats(rng, tokens * n_in);
  for (int64_t k = 0; k < tokens; ++k)
    QuantizeActivationRow(f, x.data() + k * n_in, n_in, p.act.data() + k * p.as);
  return p;
}

// The scalar dot of each (token, row) pair of the first `tokens` and `rows` of a strided problem, as bits:
// [token][row].
std::vector<uint32_t> ReferenceBits(const StridedProblem& p, TensorType t, int64_t n_in, int64_t rows,
                                    int64_t tokens) {
  std::vector<uint32_t> bits(tokens * rows);
  for (int64_t k = 0; k < tokens; ++k)
    for (int64_t r = 0; r < rows; ++r)
      bits[k * rows + r] =
          Bits(VecDot(t, p.packed.data() + r * p.rb, p.act.data() + k * p.as, n_in, Isa::kScalar));
  return bits;
}

// The several-token paths of the K-quants tile rows in groups of 8 and tokens in register tiles: every row
// count from 1 to 19 with every token count from 2 to 17 and several row lengths, each element against the
// scalar dot, with row and activation strides wider than the rows; nothing is written outside the tile.
TEST(MatMul, SeveralTokenPathsMatchTheReferenceOnOddShapes) {
  std::mt19937 rng(16);
  for (TensorType t : {TensorType::kQ4_K, TensorType::kQ5_K, TensorType::kQ6_K, TensorType::kQ3_K,
                       TensorType::kQ2_K, TensorType::kIQ4_XS}) {
    for (int64_t n_in : {256, 768, 2816}) {
      const int64_t max_rows = 19, max_tokens = 17, ys = 32;
      const StridedProblem p = MakeStrided(rng, t, n_in, max_rows, max_tokens);
      const auto& [packed, w, act, rb, ws, as] = p;
      const std::vector<uint32_t> want = ReferenceBits(p, t, n_in, max_rows, max_tokens);
      for (Isa isa : SupportedIsas()) {
        const TileFn tile = GetTileFn(t, isa, n_in);
        for (int64_t rows = 1; rows <= max_rows; ++rows) {
          for (int64_t tokens = 2; tokens <= max_tokens; ++tokens) {
            std::vector<float> y((tokens + 1) * ys, -1.0f);
            tile(w.data(), ws, rows, act.data(), as, tokens, n_in, y.data(), ys);
            int64_t mismatches = 0, outside = 0;
            for (int64_t k = 0; k <= tokens; ++k)
              for (int64_t r = 0; r < ys; ++r) {
                if (k < tokens && r < rows) {
                  mismatches += Bits(y[k * ys + r]) != want[k * max_rows + r];
                } else {
                  outside += y[k * ys + r] != -1.0f;
                }
              }
            EXPECT_EQ(mismatches, 0) << TensorTypeName(t) << " " << IsaName(isa) << " n_in=" << n_in
                                     << " rows=" << rows << " tokens=" << tokens;
            EXPECT_EQ(outside, 0) << "wrote outside the tile: " << TensorTypeName(t) << " " << IsaName(isa)
                                  << " n_in=" << n_in << " rows=" << rows << " tokens=" << tokens;
          }
        }
      }
    }
  }
}

#if defined(__x86_64__)
// The super-block types with an AVX-512 kernel (matmul_avx512_k.cc; Q6_K's for one token only) get it at the
// AVX-512 level, not the AVX2 one (so that the tests of every level below run it wherever the CPU has
// AVX-512).
TEST(MatMul, SuperBlockTypesHaveTheirOwnAvx512Kernels) {
  const std::pair<TensorType, TileFn> own[] = {
      {TensorType::kQ4_K, TileAvx512Q4_K}, {TensorType::kQ5_K, TileAvx512Q5_K},
      {TensorType::kQ6_K, TileAvx512Q6_K}, {TensorType::kQ3_K, TileAvx512Q3_K},
      {TensorType::kQ2_K, TileAvx512Q2_K}, {TensorType::kIQ4_XS, TileAvx512IQ4_XS}};
  for (const auto& [t, fn] : own) {
    for (int64_t n_in : {256, 2816}) {
      EXPECT_EQ(GetTileFn(t, Isa::kAvx512, n_in), fn) << TensorTypeName(t) << " n_in=" << n_in;
      EXPECT_NE(GetTileFn(t, Isa::kAvx2, n_in), fn) << TensorTypeName(t) << " n_in=" << n_in;
    }
  }
}
#endif

// The packed super-block kernels (16 rows in lanes, token tiles of up to 8 split as evenly as possible)
// past one row group and one token tile: row counts around and across multiples of 16, every token count
// from 1 to 17 and larger ones (several tiles, uneven splits), several super-blocks; each element against
// the scalar dot, with strides wider than the rows and canaries after each token's outputs.
TEST(MatMul, SuperBlockTilesMatchTheReferenceAcrossRowGroupsAndTokenTiles) {
  std::mt19937 rng(18);
  for (TensorType t : {TensorType::kQ4_K, TensorType::kQ5_K, TensorType::kQ6_K, TensorType::kQ3_K,
                       TensorType::kQ2_K, TensorType::kIQ4_XS}) {
    for (int64_t n_in : {768, 2816}) {
      const int64_t max_rows = 53, max_tokens = 41;
      const StridedProblem p = MakeStrided(rng, t, n_in, max_rows, max_tokens);
      const auto& [packed, w, act, rb, ws, as] = p;
      const std::vector<uint32_t> want = ReferenceBits(p, t, n_in, max_rows, max_tokens);
      std::vector<int64_t> token_counts;
      for (int64_t n = 1; n <= 17; ++n) token_counts.push_back(n);
      for (int64_t n : {23, 25, 33, 41}) token_counts.push_back(n);
      for (Isa isa : SupportedIsas()) {
        if (isa == Isa::kScalar) continue;  // the reference itself
        const TileFn tile = GetTileFn(t, isa, n_in);
        for (int64_t rows : {15, 16, 17, 31, 33, 53}) {
          const size_t ys = rows + 3;  // 3 canaries after each token's rows
          for (int64_t tokens : token_counts) {
            std::vector<float> y(ys * tokens, -1.0f);
            tile(w.data(), ws, rows, act.data(), as, tokens, n_in, y.data(), ys);
            int64_t mismatches = 0, outside = 0;
            for (int64_t k = 0; k < tokens; ++k) {
              for (int64_t r = 0; r < rows; ++r) mismatches += Bits(y[k * ys + r]) != want[k * max_rows + r];
              for (size_t r = rows; r < ys; ++r) outside += y[k * ys + r] != -1.0f;
            }
            EXPECT_EQ(mismatches, 0) << TensorTypeName(t) << " " << IsaName(isa) << " n_in=" << n_in
                                     << " rows=" << rows << " tokens=" << tokens;
            EXPECT_EQ(outside, 0) << "wrote outside the tile: " << TensorTypeName(t) << " " << IsaName(isa)
                                  << " n_in=" << n_in << " rows=" << rows << " tokens=" << tokens;
          }
        }
      }
    }
  }
}

// The same for the other types (the 32-block kernels tile rows in groups of 16 and tokens in tiles of 8):
// every token count from 1 to 17 against row counts below, at and beyond 16, with row, activation and output
// strides wider than the tile; each element against the scalar dot, nothing written outside the tile.
TEST(MatMul, TilePathsMatchTheReferenceForEveryTokenCount) {
  std::mt19937 rng(17);
  for (TensorType t : kAllTypes) {
    if (IsK(t)) continue;  // see above
    const int64_t n_in = 96, max_rows = 37, max_tokens = 17;
    const StridedProblem p = MakeStrided(rng, t, n_in, max_rows, max_tokens);
    const auto& [packed, w, act, rb, ws, as] = p;
    for (Isa isa : SupportedIsas()) {
      for (int64_t rows : {1, 5, 15, 16, 19, 37}) {
        const size_t ys = rows + 3;  // 3 canaries after each token's rows
        for (int64_t tokens = 1; tokens <= max_tokens; ++tokens) {
          std::vector<float> y(ys * tokens, -1.0f);
          GetTileFn(t, isa, n_in)(w.data(), ws, rows, act.data(), as, tokens, n_in, y.data(), ys);
          int64_t mismatches = 0, outside = 0;
          for (int64_t k = 0; k < tokens; ++k) {
            for (int64_t r = 0; r < rows; ++r)
              mismatches += Bits(y[k * ys + r]) !=
                            Bits(VecDot(t, packed.data() + r * rb, act.data() + k * as, n_in, Isa::kScalar));
            for (size_t r = rows; r < ys; ++r) outside += y[k * ys + r] != -1.0f;
          }
          EXPECT_EQ(mismatches, 0) << TensorTypeName(t) << " " << IsaName(isa) << " rows=" << rows
                                   << " tokens=" << tokens;
          EXPECT_EQ(outside, 0) << "wrote outside the tile: " << TensorTypeName(t) << " " << IsaName(isa)
                                << " rows=" << rows << " tokens=" << tokens;
        }
      }
    }
  }
}

TEST(MatMul, PreparedActivationsServeSeveralMatrices) {
  std::mt19937 rng(13);
  const Problem a = MakeProblem(rng, TensorType::kQ4_0, 20, 3);
  Problem b = MakeProblem(rng, TensorType::kQ8_0, 12, 3);
  b.x = a.x;
  PreparedActivations act;
  act.Prepare(nullptr, ActFormat::kQ8_0, a.x.data(), 3, a.n_in);
  std::vector<float> ya(3 * 20), yb(3 * 12);
  MatMul(nullptr, a.matrix(), act, ya.data());
  MatMul(nullptr, b.matrix(), act, yb.data());
  EXPECT_TRUE(SameBits(ya, RunMatMul(a, nullptr, DetectIsa(), 0, 3)));
  EXPECT_TRUE(SameBits(yb, RunMatMul(b, nullptr, DetectIsa(), 0, 3)));
}

// A row stride larger than the row (a matrix inside a bigger buffer) reads the right rows.
TEST(MatMul, RowStride) {
  std::mt19937 rng(14);
  const Problem p = MakeProblem(rng, TensorType::kQ8_0, 8, 2);
  const size_t rb = TypeRowBytes(p.type, p.n_in), stride = rb + 34;
  std::vector<uint8_t> wide(stride * p.n_out, 0xFF);
  for (int64_t r = 0; r < p.n_out; ++r) std::memcpy(wide.data() + r * stride, p.w.data() + r * rb, rb);
  std::vector<float> y(2 * 8);
  PreparedActivations act;
  MatMul(nullptr, {p.type, wide.data(), p.n_out, p.n_in, stride}, p.x.data(), 2, y.data(), &act);
  EXPECT_TRUE(SameBits(y, RunMatMul(p, nullptr, DetectIsa(), 0, 2)));
}

// Experts: rows gathered from a prepared batch, multiplied by several matrices in one batched call over
// row ranges, give each row exactly what the whole batch gives it, for any thread count.
TEST(MatMul, GatheredRowsInABatchOfProductsGiveEachRowItsBits) {
  std::mt19937 rng(15);
  for (TensorType t : kAllTypes) {
    SCOPED_TRACE(TensorTypeName(t));
    const int64_t T = 23;
    std::vector<Problem> experts;
    for (int64_t n_out : {40, 17, 64}) experts.push_back(MakeProblem(rng, t, n_out, T));
    for (Problem& e : experts) e.x = experts[0].x;  // one input, as a layer's experts share it
    const std::vector<int32_t> rows = {3, 0, 22, 7, 7, 11, 5, 19, 1, 2, 20};  // a token may repeat
    const int64_t cut[] = {0, 4, 4, 11};  // expert e takes rows [cut[e], cut[e + 1]); expert 1 takes none
    PreparedActivations all, grouped;
    all.Prepare(nullptr, ActivationFormat(t), experts[0].x.data(), T, experts[0].n_in);
    grouped.Gather(all, rows);
    ASSERT_EQ(grouped.n_tokens(), static_cast<int64_t>(rows.size()));
    for (int threads : {1, 3}) {
      ThreadPool pool(threads);
      std::vector<std::vector<float>> y(3);
      std::vector<Product> products;
      for (size_t e = 0; e < 3; ++e) {
        y[e].assign(static_cast<size_t>((cut[e + 1] - cut[e]) * experts[e].n_out), -1.0f);
        products.push_back({experts[e].matrix(), &grouped, y[e].data(), cut[e], cut[e + 1] - cut[e]});
      }
      MatMulBatch(&pool, products);
      for (size_t e = 0; e < 3; ++e) {
        const std::vector<float> full = RunMatMul(experts[e], nullptr, DetectIsa(), 0, T);
        for (int64_t i = cut[e]; i < cut[e + 1]; ++i) {
          const float* want = &full[static_cast<size_t>(rows[static_cast<size_t>(i)] * experts[e].n_out)];
          const float* got = &y[e][static_cast<size_t>((i - cut[e]) * experts[e].n_out)];
          EXPECT_EQ(std::memcmp(want, got, static_cast<size_t>(experts[e].n_out) * 4), 0)
              << "expert " << e << ", row " << i << ", " << threads << " threads";
        }
      }
    }
  }
}

}  // namespace
}  // namespace llamay::kernels
