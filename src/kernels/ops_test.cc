// Row ops against double-precision formulas, and every SIMD level against the scalar reference bit for bit.
#include "kernels/ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "kernels/dequant.h"
#include "kernels/ops_avx2.h"
#include "kernels/quant_blocks.h"
#include "kernels/reference/reference.h"
#include "kernels/test_util.h"

namespace llamay::kernels {
namespace {

using test_util::RandomFloats;
using test_util::SameBits;

constexpr double kEps = 0x1p-24;  // f32 unit roundoff

using test_util::SupportedIsas;

TEST(Exp, AccurateOverTheNormalRange) {
  for (double x = -87.0; x <= 88.5; x += 0.0137) {
    const double ref = std::exp(static_cast<double>(static_cast<float>(x)));
    const float got = RefExp(static_cast<float>(x));
    ASSERT_LE(std::fabs(got - ref), 4 * kEps * ref) << "x=" << x;  // about 2 ulp
  }
  // Results below the normal range keep an absolute error of an ulp of the smallest subnormal.
  for (double x = -103.0; x < -87.0; x += 0.37) {
    const double ref = std::exp(static_cast<double>(static_cast<float>(x)));
    ASSERT_LE(std::fabs(RefExp(static_cast<float>(x)) - ref), 0x1p-149 + 4 * kEps * ref) << "x=" << x;
  }
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(RefExp(-inf), 0.0f);
  EXPECT_EQ(RefExp(-200.0f), 0.0f);
  EXPECT_EQ(RefExp(inf), inf);
  EXPECT_EQ(RefExp(89.0f), inf);
  EXPECT_EQ(RefExp(0.0f), 1.0f);
}

TEST(RmsNorm, MatchesDoubleFormula) {
  std::mt19937 rng(20);
  for (int64_t n : {1, 7, 8, 33, 4096}) {
    const auto x = RandomFloats(rng, n, 2.0f), w = RandomFloats(rng, n);
    const float eps = 1e-5f;
    double ss = 0;
    for (float v : x) ss += static_cast<double>(v) * v;
    const double scale = 1.0 / std::sqrt(ss / n + eps);
    for (Isa isa : SupportedIsas()) {
      std::vector<float> y(n), yn(n);
      RmsNorm(x.data(), w.data(), n, eps, y.data(), isa);
      RmsNorm(x.data(), nullptr, n, eps, yn.data(), isa);
      for (int64_t i = 0; i < n; ++i) {
        // mean rounded to f32, + eps, sqrt, division, and one or two products: six roundings at most.
        const double ref = x[i] * scale;
        ASSERT_LE(std::fabs(yn[i] - ref), 6 * kEps * std::fabs(ref)) << "n=" << n << " i=" << i;
        ASSERT_LE(std::fabs(y[i] - ref * w[i]), 7 * kEps * std::fabs(ref * w[i])) << "n=" << n << " i=" << i;
      }
    }
  }
}

TEST(Softmax, MatchesDoubleFormula) {
  std::mt19937 rng(21);
  for (int64_t n : {1, 5, 8, 100, 1001}) {
    auto x = RandomFloats(rng, n, 4.0f);
    if (n > 5) x[3] = -std::numeric_limits<float>::infinity();  // a masked logit
    double m = -INFINITY, sum = 0;
    for (float v : x) m = std::max<double>(m, v);
    for (float v : x) sum += std::exp(v - m);
    for (Isa isa : SupportedIsas()) {
      std::vector<float> y(n);
      Softmax(x.data(), n, y.data(), isa);
      for (int64_t i = 0; i < n; ++i) {
        // exp (<= 4 eps), the lane sums (n/8 + 3 additions), the reciprocal and the product.
        const double ref = std::exp(x[i] - m) / sum;
        ASSERT_LE(std::fabs(y[i] - ref), (4 + n / 8.0 + 3 + 2) * kEps * ref + 1e-45)
            << "n=" << n << " i=" << i;
      }
      if (n > 5) {
        EXPECT_EQ(y[3], 0.0f);
      }
    }
  }
}

TEST(Activations, MatchDoubleFormulas) {
  std::mt19937 rng(22);
  auto x = RandomFloats(rng, 1003, 5.0f);
  x[0] = 0.0f, x[1] = -0.0f, x[2] = 80.0f, x[3] = -80.0f, x[4] = 1e-20f;
  for (Isa isa : SupportedIsas()) {
    std::vector<float> s(x.size()), g(x.size());
    Silu(x.data(), x.size(), s.data(), isa);
    Gelu(x.data(), x.size(), g.data(), isa);
    for (size_t i = 0; i < x.size(); ++i) {
      const double v = x[i];
      const double silu = v / (1 + std::exp(-v));
      const double gelu = 0.5 * v * (1 + std::tanh(0.79788456080286535588 * v * (1 + 0.044715 * v * v)));
      // exp within 4 eps, then two or three roundings.
      ASSERT_LE(std::fabs(s[i] - silu), 8 * kEps * std::fabs(silu) + 1e-38) << "silu(" << v << ")";
      // tanh as 1 - 2/(e^2u + 1) loses relative accuracy near 0 but keeps an absolute error of a few eps,
      // scaled by 0.5*|x| in the result.
      ASSERT_LE(std::fabs(g[i] - gelu), 8 * kEps * (std::fabs(gelu) + std::fabs(v)) + 1e-38)
          << "gelu(" << v << ")";
    }
  }
}

// y[i] = v[(start + i) % v.size()] for i < n.
std::vector<float> Cycle(const std::vector<float>& v, int64_t n, int64_t start) {
  std::vector<float> y(n);
  for (int64_t i = 0; i < n; ++i) y[i] = v[(start + i) % v.size()];
  return y;
}

// Every SIMD level of this CPU (AVX2 and AVX-512 on x86-64, NEON on aarch64) against the scalar references,
// bit for bit. The lengths leave every tail of 4- and 8-lane vectors; besides random rows, rows cycling
// through edge values put each of them in every lane of the vector body and in the tails: the exp's clamps
// (-104 and 89, on both sides, as x, -x and 2u of GELU), where it overflows or gives subnormals, signed
// zeros, subnormal inputs, huge values and infinities; NaN for the activations (none of their operations
// sees two different NaNs, so the result does not depend on which one an instruction propagates). Softmax
// also gets masked (-inf) logits, a wide row whose exps underflow, and a NaN logit (first or not).
TEST(Ops, SimdMatchesScalarBits) {
  std::vector<Isa> simd;
  for (Isa isa : SupportedIsas())
    if (isa != Isa::kScalar) simd.push_back(isa);
  if (simd.empty()) GTEST_SKIP() << "no SIMD level on this CPU";
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> finite_edges = {200.0f, -200.0f, 100.0f,  -100.0f, 89.0f,   -89.0f, 88.7f,
                                           -88.7f, 44.5f,   -44.5f,  103.9f,  -103.9f, 104.0f, -104.0f,
                                           104.1f, -104.1f, 52.0f,   -52.0f,  10.0f,   -10.0f, 0.0f,
                                           -0.0f,  1e-39f,  -1e-39f, 1e30f,   -1e30f};
  std::vector<float> act_edges = finite_edges, softmax_edges = finite_edges;
  act_edges.insert(act_edges.end(), {inf, -inf, nan});  // 29 values: odd, so they visit every lane
  softmax_edges.push_back(-inf);                        // 27
  std::mt19937 rng(23);
  for (int64_t n : {1, 2, 3, 4, 5, 7, 8, 9, 11, 12, 13, 15, 16, 17, 64, 1000, 1003}) {
    auto x = RandomFloats(rng, n, 6.0f), up = RandomFloats(rng, n), w = RandomFloats(rng, n);
    if (n > 8) x[0] = 200.0f, x[1] = -200.0f, x[2] = -0.0f, x[3] = 1e-39f;
    const auto act = Cycle(act_edges, n, n), soft = Cycle(softmax_edges, n, n),
               norm = Cycle(finite_edges, n, n);
    auto masked = x;  // two of three logits masked, the last one kept
    for (int64_t i = 0; i + 1 < n; ++i)
      if (i % 3 != 1) masked[i] = -inf;
    const auto wide = RandomFloats(rng, n, 60.0f);
    auto with_nan = x, nan_first = x;  // a NaN logit is skipped by the maximum, unless it comes first
    with_nan[n / 2] = nan;
    nan_first[0] = nan;
    auto check = [&](const char* op, const char* row, auto fn) {
      std::vector<float> want(n);
      fn(Isa::kScalar, want.data());
      for (Isa isa : simd) {
        std::vector<float> got(n);
        fn(isa, got.data());
        if (SameBits(want, got)) continue;
        int64_t i = 0;
        while (test_util::Bits(want[i]) == test_util::Bits(got[i])) ++i;
        ADD_FAILURE() << op << " (" << row << " row, n=" << n << ") at " << IsaName(isa) << ": element " << i
                      << " is " << got[i] << " (0x" << std::hex << test_util::Bits(got[i]) << "), scalar "
                      << want[i] << " (0x" << test_util::Bits(want[i]) << ")" << std::dec;
      }
    };
    // (Plain names, not structured bindings, in the loops: clang 14 cannot capture those in a lambda.)
    using Rows = std::vector<std::pair<const char*, const std::vector<float>*>>;
    for (const auto& entry : Rows{{"random", &x}, {"edges", &act}}) {
      const char* row = entry.first;
      const float* v = entry.second->data();
      check("Silu", row, [&](Isa isa, float* y) { Silu(v, n, y, isa); });
      check("Gelu", row, [&](Isa isa, float* y) { Gelu(v, n, y, isa); });
      check("SwiGlu gate", row, [&](Isa isa, float* y) { SwiGlu(v, up.data(), n, y, isa); });
      check("SwiGlu up", row, [&](Isa isa, float* y) { SwiGlu(up.data(), v, n, y, isa); });
    }
    for (const auto& entry : Rows{{"random", &x},
                                  {"edges", &soft},
                                  {"masked", &masked},
                                  {"wide", &wide},
                                  {"NaN", &with_nan},
                                  {"NaN first", &nan_first}}) {
      const float* v = entry.second->data();
      check("Softmax", entry.first, [&](Isa isa, float* y) { Softmax(v, n, y, isa); });
    }
    for (const auto& entry : Rows{{"random", &x}, {"edges", &norm}}) {
      const char* row = entry.first;
      const float* v = entry.second->data();
      check("RmsNorm", row, [&](Isa isa, float* y) { RmsNorm(v, w.data(), n, 1e-6f, y, isa); });
      check("RmsNorm unweighted", row, [&](Isa isa, float* y) { RmsNorm(v, nullptr, n, 1e-6f, y, isa); });
    }
  }
}

#if defined(__x86_64__)
// The K-quants' activation quantiser at AVX2 against the reference, byte for byte (d, qs and bsums): random
// rows at several scales, and super-blocks that test the signed maximum (+m and -m both present, in either
// order, at the first and the last position), all zeros with signed zeros, one nonzero element, NaN (skipped
// by the maximum, 0 as a value), an infinite maximum, subnormals and elements that round to exactly .5.
TEST(Ops, QuantizeRowQ8_KAvx2MatchesTheReferenceBytes) {
  if (!UsesAvx2(DetectIsa())) GTEST_SKIP() << "no AVX2 on this CPU";
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::mt19937 rng(31);
  std::vector<std::vector<float>> rows;
  for (float scale : {1e-3f, 1.0f, 6.0f, 1e4f}) rows.push_back(RandomFloats(rng, 4 * kQkK, scale));
  auto block = [&](auto edit) {
    std::vector<float> b = RandomFloats(rng, kQkK, 1.0f);
    edit(b);
    rows.push_back(b);
  };
  block([](std::vector<float>& b) { b[3] = 7.0f, b[200] = -7.0f; });
  block([](std::vector<float>& b) { b[3] = -7.0f, b[200] = 7.0f; });
  block([](std::vector<float>& b) { b[0] = -9.0f, b[255] = 9.0f; });
  block([](std::vector<float>& b) { b[255] = -9.0f; });
  block([](std::vector<float>& b) {
    for (size_t i = 0; i < b.size(); ++i) b[i] = i % 2 ? -0.0f : 0.0f;
  });
  block([](std::vector<float>& b) {
    std::fill(b.begin(), b.end(), 0.0f);
    b[77] = -1e-3f;
  });
  block([&](std::vector<float>& b) { b[5] = nan, b[100] = nan; });
  block([&](std::vector<float>& b) { b[40] = inf; });
  block([&](std::vector<float>& b) {
    for (float& v : b) v *= 1e-39f;  // subnormal
  });
  block([](std::vector<float>& b) {  // with max -127: elements k + 0.5 before scaling land on halves
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(static_cast<int>(i % 64) - 32) - 0.5f;
    b[9] = -127.0f;
  });
  for (size_t k = 0; k < rows.size(); ++k) {
    const std::vector<float>& x = rows[k];
    const int64_t n = static_cast<int64_t>(x.size());
    std::vector<BlockQ8_K> want(static_cast<size_t>(n / kQkK)), got(want.size());
    std::memset(want.data(), 0x5A, want.size() * sizeof(BlockQ8_K));
    std::memset(got.data(), 0xA5, got.size() * sizeof(BlockQ8_K));
    QuantizeRowQ8_K(x.data(), want.data(), n);
    avx2::QuantizeRowQ8_K(x.data(), got.data(), n);
    for (size_t b = 0; b < want.size(); ++b) {
      EXPECT_EQ(test_util::Bits(got[b].d), test_util::Bits(want[b].d)) << "row " << k << " block " << b;
      EXPECT_EQ(0, std::memcmp(got[b].qs, want[b].qs, sizeof(want[b].qs))) << "row " << k << " block " << b;
      EXPECT_EQ(0, std::memcmp(got[b].bsums, want[b].bsums, sizeof(want[b].bsums)))
          << "row " << k << " block " << b;
    }
  }
}
#endif

TEST(Ops, SwiGluIsSiluTimesUp) {
  std::mt19937 rng(24);
  const auto g = RandomFloats(rng, 77), u = RandomFloats(rng, 77);
  std::vector<float> s(77), y(77);
  Silu(g.data(), 77, s.data(), Isa::kScalar);
  SwiGlu(g.data(), u.data(), 77, y.data(), Isa::kScalar);
  for (int i = 0; i < 77; ++i) EXPECT_EQ(y[i], s[i] * u[i]);
}

TEST(Ops, Elementwise) {
  const float a[3] = {1, 2, 3}, b[3] = {4, 5, -6};
  float y[3];
  Mul(a, b, 3, y);
  EXPECT_EQ(y[2], -18.0f);
  Add(a, b, 3, y);
  EXPECT_EQ(y[1], 7.0f);
  Scale(a, 0.5f, 3, y);
  EXPECT_EQ(y[0], 0.5f);
}

// Rotates x [n_heads][head_dim] in double precision: the formula of RopeParams.
std::vector<double> RopeDouble(const std::vector<float>& x, int n_heads, int head_dim, int64_t pos,
                               const RopeParams& p) {
  std::vector<double> y(x.begin(), x.end());
  const int half = p.n_rot / 2;
  for (int h = 0; h < n_heads; ++h) {
    for (int i = 0; i < half; ++i) {
      const double ff = p.freq_factors ? p.freq_factors[i] : 1.0;
      const double theta =
          p.freq_scale * pos * std::pow(static_cast<double>(p.freq_base), -2.0 * i / p.n_rot) / ff;
      const int a = h * head_dim + (p.mode == RopeMode::kNorm ? 2 * i : i);
      const int b = h * head_dim + (p.mode == RopeMode::kNorm ? 2 * i + 1 : i + half);
      y[a] = x[a] * std::cos(theta) - x[b] * std::sin(theta);
      y[b] = x[a] * std::sin(theta) + x[b] * std::cos(theta);
    }
  }
  return y;
}

TEST(Rope, MatchesDoubleFormulaBothModesPartialDims) {
  std::mt19937 rng(25);
  const int n_heads = 3, head_dim = 80, n_rot = 64;
  for (RopeMode mode : {RopeMode::kNorm, RopeMode::kNeox}) {
    for (int64_t pos : {0, 1, 7, 1000}) {
      const RopeParams p{n_rot, 10000.0f, 1.0f, mode, nullptr};
      const auto x = RandomFloats(rng, n_heads * head_dim);
      auto y = x;
      Rope(y.data(), n_heads, head_dim, pos, p);
      const auto ref = RopeDouble(x, n_heads, head_dim, pos, p);
      for (int h = 0; h < n_heads; ++h) {
        for (int d = 0; d < head_dim; ++d) {
          const int k = h * head_dim + d;
          if (d >= n_rot) {
            ASSERT_EQ(y[k], x[k]) << "pass-through dim " << d;
            continue;
          }
          // theta_i is built by i f32 multiplications (as ggml does): relative error up to (i + 2) eps, an
          // absolute angle error of theta * (i + 2) eps; cos/sin and the rotation add a few eps of |x|.
          const int i = mode == RopeMode::kNorm ? d / 2 : d % (n_rot / 2);
          const double theta = pos * std::pow(10000.0, -2.0 * i / n_rot);
          const double mag =
              std::fabs(x[h * head_dim + (mode == RopeMode::kNorm ? 2 * i : i)]) +
              std::fabs(x[h * head_dim + (mode == RopeMode::kNorm ? 2 * i + 1 : i + n_rot / 2)]);
          ASSERT_LE(std::fabs(y[k] - ref[k]), mag * (theta * (i + 2) * 2 * kEps + 8 * kEps))
              << "mode " << static_cast<int>(mode) << " pos " << pos << " dim " << d;
        }
      }
      if (pos == 0) {
        EXPECT_TRUE(SameBits(x, y));
      }  // cos 0 = 1, sin 0 = 0: exact identity
    }
  }
}

// NEOX pairs (i, i + n_rot/2) exactly as NORM pairs (2i, 2i + 1): the same rotation after a permutation.
TEST(Rope, NeoxIsNormOnPermutedDims) {
  std::mt19937 rng(26);
  const int head_dim = 16, n_rot = 12, half = n_rot / 2;
  const auto x = RandomFloats(rng, head_dim);
  std::vector<float> perm(x);
  for (int i = 0; i < half; ++i) perm[2 * i] = x[i], perm[2 * i + 1] = x[i + half];
  auto neox = x;
  Rope(neox.data(), 1, head_dim, 123, {n_rot, 500000.0f, 1.0f, RopeMode::kNeox, nullptr});
  Rope(perm.data(), 1, head_dim, 123, {n_rot, 500000.0f, 1.0f, RopeMode::kNorm, nullptr});
  for (int i = 0; i < half; ++i) {
    EXPECT_EQ(neox[i], perm[2 * i]);
    EXPECT_EQ(neox[i + half], perm[2 * i + 1]);
  }
}

// Doubling the position and halving freq_scale, or dividing by freq_factors of 2, give the same angles
// (scaling by powers of two is exact): the parameters are applied where documented.
TEST(Rope, FreqScaleAndFactors) {
  std::mt19937 rng(27);
  const auto x = RandomFloats(rng, 64);
  const std::vector<float> twos(16, 2.0f);
  auto a = x, b = x, c = x;
  Rope(a.data(), 2, 32, 5, {32, 10000.0f, 1.0f, RopeMode::kNorm, nullptr});
  Rope(b.data(), 2, 32, 10, {32, 10000.0f, 0.5f, RopeMode::kNorm, nullptr});
  Rope(c.data(), 2, 32, 10, {32, 10000.0f, 1.0f, RopeMode::kNorm, twos.data()});
  EXPECT_TRUE(SameBits(a, b));
  EXPECT_TRUE(SameBits(a, c));
  auto d = x;
  Rope(d.data(), 2, 32, 6, {32, 10000.0f, 1.0f, RopeMode::kNorm, nullptr});
  EXPECT_FALSE(SameBits(a, d));
}

TEST(Embedding, RowOfAnyType) {
  std::mt19937 rng(28);
  const int64_t n_embd = 256, rows = 5;
  for (TensorType t : {TensorType::kF32, TensorType::kF16, TensorType::kQ4_0, TensorType::kQ6_K}) {
    const auto table = test_util::RandomRawWeights(rng, t, rows, n_embd);
    std::vector<float> got(n_embd), want(n_embd);
    EmbeddingRow(t, table.data(), n_embd, 3, got.data());
    DequantizeRow(t, table.data() + 3 * TypeRowBytes(t, n_embd), want.data(), n_embd);
    EXPECT_TRUE(SameBits(got, want)) << TensorTypeName(t);
  }
}

TEST(Argmax, FirstOfTiesAndNan) {
  const float a[5] = {1, 3, 2, 3, -1};
  EXPECT_EQ(Argmax(a, 5), 1);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float b[3] = {nan, -5, -2};
  EXPECT_EQ(Argmax(b, 3), 2);
  EXPECT_EQ(Argmax(a, 1), 0);
}


// YaRN (gpt-oss: factor 32 over 4096 trained positions, base 150000, 64 rotated dims): each pair's cos/sin
// against the formula in double, with the correction range computed independently.
TEST(Rope, YarnRampsBetweenTheUnscaledAndTheScaledAngleAndScalesTheMagnitude) {
  RopeParams p;
  p.n_rot = 64;
  p.freq_base = 150000.0f;
  p.freq_scale = 1.0f / 32.0f;
  p.mode = RopeMode::kNeox;
  p.ext_factor = 1.0f;
  p.attn_factor = 0.9f;
  p.beta_fast = 32.0f;
  p.beta_slow = 1.0f;
  p.n_ctx_orig = 4096;
  auto corr = [&](double rot) { return 64.0 * std::log(4096.0 / (rot * 2 * M_PI)) / (2 * std::log(150000.0)); };
  const double c0 = std::max(0.0, std::floor(corr(32.0))), c1 = std::min(63.0, std::ceil(corr(1.0)));
  ASSERT_LT(c0, c1);
  ASSERT_GT(c0, 0.0);   // some dims keep their angle,
  ASSERT_LT(c1, 31.0);  // some take the scaled one
  const double mscale = 0.9 * (1.0 + 0.1 * std::log(32.0));
  for (int64_t pos : {0, 3, 100, 5000}) {
    std::vector<float> cs(64);
    RopeCache(pos, p, cs.data());
    for (int i = 0; i < 32; ++i) {
      const double extrap = pos * std::pow(150000.0, -2.0 * i / 64), interp = extrap / 32.0;
      const double ramp = 1.0 - std::min(1.0, std::max(0.0, (i - c0) / std::max(0.001, c1 - c0)));
      const double theta = interp * (1 - ramp) + extrap * ramp;
      const double tol = (theta * (i + 4) * 2 * kEps + 8 * kEps) * mscale;
      EXPECT_NEAR(cs[2 * i], std::cos(theta) * mscale, tol) << "pos " << pos << " pair " << i;
      EXPECT_NEAR(cs[2 * i + 1], std::sin(theta) * mscale, tol) << "pos " << pos << " pair " << i;
      if (i < c0) {
        EXPECT_EQ(ramp, 1.0);
      }
      if (i > c1) {
        EXPECT_EQ(ramp, 0.0);
      }
    }
  }
  // Off (ext_factor 0, attn_factor 1): the plain table, bit for bit.
  RopeParams plain = p;
  plain.ext_factor = 0.0f;
  plain.attn_factor = 1.0f;
  RopeParams linear{64, 150000.0f, 1.0f / 32.0f, RopeMode::kNeox, nullptr};
  std::vector<float> a(64), b(64);
  RopeCache(77, plain, a.data());
  RopeCache(77, linear, b.data());
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace llamay::kernels
