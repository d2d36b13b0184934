// Quantised dot products: against the exact dot of the dequantised rows (a tight float-rounding bound),
// against the unquantised activations (the activation quantisation bound), and AVX2 vs scalar bits.
#include "kernels/vec_dot.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/numeric.h"
#include "kernels/dequant.h"
#include "kernels/matmul_kernels.h"
#include "kernels/quant_blocks.h"
#include "kernels/test_util.h"

namespace llamay::kernels {
namespace {

using test_util::RandomFloats;

const TensorType kAllTypes[] = {
    TensorType::kF32,  TensorType::kF16,    TensorType::kBF16,  TensorType::kQ8_0,
    TensorType::kQ4_0, TensorType::kQ4_1,   TensorType::kQ5_0,  TensorType::kQ5_1,
    TensorType::kQ4_K, TensorType::kQ5_K,   TensorType::kQ6_K,  TensorType::kQ3_K,
    TensorType::kQ2_K, TensorType::kIQ4_NL, TensorType::kMXFP4, TensorType::kIQ4_XS};

bool IsK(TensorType t) { return TypeBlockSize(t) == kQkK; }
bool HasMin(TensorType t) {
  return t == TensorType::kQ4_1 || t == TensorType::kQ5_1 || t == TensorType::kQ4_K ||
         t == TensorType::kQ5_K || t == TensorType::kQ2_K;
}

// The values a prepared activation row stands for.
std::vector<float> DequantAct(ActFormat f, const void* act, int64_t n) {
  std::vector<float> y(n);
  for (int64_t i = 0; i < n; ++i) {
    switch (f) {
      case ActFormat::kQ8_0: {
        const auto& b = static_cast<const BlockQ8_0*>(act)[i / 32];
        y[i] = F16ToF32(b.d) * b.qs[i % 32];
        break;
      }
      case ActFormat::kQ8_1: {
        const auto& b = static_cast<const BlockQ8_1*>(act)[i / 32];
        y[i] = F16ToF32(b.d) * b.qs[i % 32];
        break;
      }
      case ActFormat::kQ8_K: {
        const auto& b = static_cast<const BlockQ8_K*>(act)[i / 256];
        y[i] = b.d * b.qs[i % 256];
        break;
      }
      default:
        y[i] = static_cast<const float*>(act)[i];
        break;
    }
  }
  return y;
}

// Largest error the activation format allows for element i of x (derivation beside each case).
std::vector<float> ActErrorBound(ActFormat f, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> e(n);
  const int64_t bs = f == ActFormat::kQ8_K ? 256 : 32;
  for (int64_t b = 0; b < n / bs; ++b) {
    float amax = 0;
    for (int64_t j = 0; j < bs; ++j) amax = std::max(amax, std::fabs(x[b * bs + j]));
    for (int64_t j = 0; j < bs; ++j) {
      const float xi = x[b * bs + j];
      switch (f) {
        // q = round(x / d) with d = amax/127 stored as f16: half a step, plus |d16 - d| * |q| <= d*2^-11*127.
        case ActFormat::kQ8_0:
        case ActFormat::kQ8_1:
          e[b * bs + j] = amax / 127 * (0.5f + 127 * 0x1p-11f);
          break;
        // d = amax/127 kept in f32: half a step, plus f32 rounding of the scale (tiny).
        case ActFormat::kQ8_K:
          e[b * bs + j] = amax / 127 * 0.5001f;
          break;
        case ActFormat::kF16Rounded:
          e[b * bs + j] = std::fabs(xi) * 0x1p-11f;
          break;
        case ActFormat::kBf16Rounded:
          e[b * bs + j] = std::fabs(xi) * 0x1p-8f;
          break;
        case ActFormat::kF32:
          e[b * bs + j] = 0;
          break;
      }
    }
  }
  return e;
}

// Sum over blocks of |m_w| * |s_a| * 2^-11: s_a is d * sum(q) rounded to f16 (Q8_1 only).
double Q8_1SumRounding(TensorType t, const uint8_t* w, const void* act, int64_t n) {
  if (t != TensorType::kQ4_1 && t != TensorType::kQ5_1) return 0;
  double total = 0;
  const size_t bs = GetTensorTypeInfo(static_cast<uint32_t>(t))->type_size;
  for (int64_t b = 0; b < n / 32; ++b) {
    uint16_t m;
    std::memcpy(&m, w + b * bs + 2, 2);
    total += std::fabs(F16ToF32(m)) * std::fabs(F16ToF32(static_cast<const BlockQ8_1*>(act)[b].s)) * 0x1p-11;
  }
  return total;
}

TEST(VecDot, MatchesDequantizedDotWithinRounding) {
  std::mt19937 rng(2);
  for (TensorType t : kAllTypes) {
    for (int64_t n : {256, 1024, 2816 + 256}) {
      SCOPED_TRACE(std::string(TensorTypeName(t)) + " n=" + std::to_string(n));
      const auto xw = RandomFloats(rng, n), x = RandomFloats(rng, n, 3.0f);
      std::vector<uint8_t> w(TypeRowBytes(t, n));
      QuantizeRow(t, xw.data(), w.data(), n);
      const ActFormat f = ActivationFormat(t);
      std::vector<uint8_t> act(ActivationRowBytes(f, n));
      QuantizeActivationRow(f, x.data(), n, act.data());

      std::vector<float> wd(n);
      DequantizeRow(t, w.data(), wd.data(), n);
      const auto xq = DequantAct(f, act.data(), n);
      const auto ebound = ActErrorBound(f, x);
      double exact_q = 0, exact = 0, mass = 0, act_err = 0, wmax = 0, sum_xq = 0;
      for (int64_t i = 0; i < n; ++i) wmax = std::max(wmax, std::fabs(static_cast<double>(wd[i])));
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_LE(std::fabs(xq[i] - x[i]), ebound[i] * 1.0001f + 1e-30f) << "activation element " << i;
        exact_q += static_cast<double>(wd[i]) * xq[i];
        exact += static_cast<double>(wd[i]) * x[i];
        mass += std::fabs(static_cast<double>(wd[i]) * xq[i]);
        sum_xq += std::fabs(xq[i]);
        act_err += std::fabs(wd[i]) * ebound[i];
      }
      // With a min, the integer part d*q and the min part are summed separately and can cancel: each is at
      // most |w| + |min| <= 2 * max|w| per element.
      if (HasMin(t)) mass += 3 * wmax * sum_xq;
      // Every element passes through at most n/8 + 8 roundings of relative size 2^-24 (products, lane sums,
      // the final reduction); doubled for safety.
      const double gamma = (static_cast<double>(n) / 8 + 8) * 0x1p-23;
      const float got = VecDot(t, w.data(), act.data(), n, Isa::kScalar);
      EXPECT_LE(std::fabs(got - exact_q), gamma * mass + Q8_1SumRounding(t, w.data(), act.data(), n));
      // Against the unquantised activations: the activation quantisation bound on top.
      EXPECT_LE(std::fabs(got - exact), gamma * mass + act_err + Q8_1SumRounding(t, w.data(), act.data(), n));
    }
  }
}

// Every SIMD level against the scalar kernel, bit for bit, over register-tile edges: 1..10 tokens (single
// tokens, pairs and a lone last token) and row counts around every kernel's register tile.
TEST(VecDot, SimdMatchesScalarBits) {
  if (test_util::SupportedIsas().size() < 2) GTEST_SKIP() << "no SIMD level on this CPU";
  std::mt19937 rng(3);
  for (TensorType t : kAllTypes) {
    const std::vector<int64_t> sizes =
        IsK(t) ? std::vector<int64_t>{256, 768} : std::vector<int64_t>{32, 96, 1024};
    for (int64_t n : sizes) {
      for (auto [rows, tokens] :
           {std::pair<int64_t, int64_t>{7, 6}, {9, 1}, {1, 1}, {3, 9}, {13, 10}, {8, 2}}) {
        SCOPED_TRACE(std::string(TensorTypeName(t)) + " n=" + std::to_string(n) +
                     " rows=" + std::to_string(rows) + " tokens=" + std::to_string(tokens));
        const auto w = test_util::RandomRawWeights(rng, t, rows, n);
        const ActFormat f = ActivationFormat(t);
        const size_t as = ActivationRowBytes(f, n), ws = TypeRowBytes(t, n);
        std::vector<uint8_t> act(as * tokens);
        for (int64_t k = 0; k < tokens; ++k) {
          auto x = RandomFloats(rng, n, k == 0 ? 1e-3f : 10.0f);
          QuantizeActivationRow(f, x.data(), n, act.data() + k * as);
        }
        std::vector<float> ys(rows * tokens);
        GetTileFn(t, Isa::kScalar, n)(w.data(), ws, rows, act.data(), as, tokens, n, ys.data(), rows);
        for (Isa isa : test_util::SupportedIsas()) {
          if (isa == Isa::kScalar) continue;
          std::vector<float> yv(rows * tokens, -1.0f);
          GetTileFn(t, isa, n)(w.data(), ws, rows, act.data(), as, tokens, n, yv.data(), rows);
          int64_t first_diff = -1;  // every type reports, not only the first that differs
          for (int64_t i = rows * tokens - 1; i >= 0; --i)
            if (test_util::Bits(ys[i]) != test_util::Bits(yv[i])) first_diff = i;
          EXPECT_EQ(first_diff, -1) << IsaName(isa) << ": scalar " << ys[std::max<int64_t>(first_diff, 0)]
                                    << " vs " << yv[std::max<int64_t>(first_diff, 0)];
          for (int64_t r = 0; r < rows; ++r)
            EXPECT_EQ(test_util::Bits(VecDot(t, w.data() + r * ws, act.data(), n, isa)),
                      test_util::Bits(ys[r]))
                << IsaName(isa);
        }
      }
    }
  }
}

// Extreme Q8_0 blocks: weights of -128 (which no quantiser writes, but a file may hold) and +-127 against
// activations of +-127, where a saturating or sign-flipping kernel would go wrong.
TEST(VecDot, Q8_0ExtremesMatchOnEveryLevel) {
  const int64_t n = 64, rows = 5, tokens = 3;
  std::vector<BlockQ8_0> w(rows * 2), a(tokens * 2);
  for (size_t i = 0; i < w.size(); ++i) {
    w[i].d = F32ToF16(0.5f + static_cast<float>(i));
    for (int j = 0; j < 32; ++j)
      w[i].qs[j] = static_cast<int8_t>((i + j) % 3 == 0 ? -128 : (j % 2 ? 127 : -127));
  }
  for (size_t i = 0; i < a.size(); ++i) {
    a[i].d = F32ToF16(0.25f * static_cast<float>(i + 1));
    for (int j = 0; j < 32; ++j) a[i].qs[j] = static_cast<int8_t>((i + j) % 2 ? 127 : -127);
  }
  const auto* wp = reinterpret_cast<const uint8_t*>(w.data());
  const auto* ap = reinterpret_cast<const uint8_t*>(a.data());
  const size_t ws = 2 * sizeof(BlockQ8_0), as = ws;
  std::vector<float> ys(rows * tokens);
  GetTileFn(TensorType::kQ8_0, Isa::kScalar, n)(wp, ws, rows, ap, as, tokens, n, ys.data(), rows);
  // The scalar kernel against plain integer arithmetic: lane sums of 4 are exact, so check one value.
  int64_t lane = 0;
  for (int j = 0; j < 4; ++j) lane += static_cast<int64_t>(w[0].qs[j]) * a[0].qs[j];
  EXPECT_NE(lane, 0);
  for (Isa isa : test_util::SupportedIsas()) {
    std::vector<float> yv(rows * tokens);
    GetTileFn(TensorType::kQ8_0, isa, n)(wp, ws, rows, ap, as, tokens, n, yv.data(), rows);
    EXPECT_TRUE(test_util::SameBits(ys, yv)) << IsaName(isa);
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t r = 0; r < rows; ++r)
        EXPECT_EQ(test_util::Bits(VecDot(TensorType::kQ8_0, wp + r * ws, ap + t * as, n, isa)),
                  test_util::Bits(ys[t * rows + r]))
            << IsaName(isa) << " row " << r << " token " << t;
  }
}

// MXFP4 blocks with extreme exponents (the subnormal scales of e = 0 and 1, where d_w * d_a is no longer
// exact) against activation blocks from subnormal f16 scales up: every level and tile path (one token, a
// register tile, more tokens than a tile) gives the scalar kernel's bits, and those are finite and nonzero.
TEST(VecDot, MXFP4ExtremeScalesMatchOnEveryLevel) {
  std::mt19937 rng(5);
  const int64_t n = 256, rows = 19, max_tokens = 11;
  const uint8_t exps[] = {0, 1, 2, 3, 10, 25, 100, 127, 128, 160, 200, 225};
  std::vector<BlockMXFP4> w(rows * n / 32);
  for (size_t i = 0; i < w.size(); ++i) {
    w[i].e = exps[i % std::size(exps)];
    for (uint8_t& q : w[i].qs) q = static_cast<uint8_t>(rng());
  }
  const size_t ws = sizeof(BlockMXFP4) * n / 32, as = ActivationRowBytes(ActFormat::kQ8_0, n);
  std::vector<uint8_t> act(as * max_tokens);
  const float scales[] = {1e-7f, 1e-3f, 1.0f, 30.0f};
  for (int64_t t = 0; t < max_tokens; ++t) {
    auto x = RandomFloats(rng, n);
    for (int64_t i = 0; i < n; ++i) x[i] *= scales[(t + i / 32) % 4];
    QuantizeActivationRow(ActFormat::kQ8_0, x.data(), n, act.data() + t * as);
  }
  const auto* wp = reinterpret_cast<const uint8_t*>(w.data());
  for (int64_t tokens : {int64_t{1}, int64_t{3}, max_tokens}) {
    std::vector<float> ys(rows * tokens);
    GetTileFn(TensorType::kMXFP4, Isa::kScalar, n)(wp, ws, rows, act.data(), as, tokens, n, ys.data(), rows);
    for (float v : ys) EXPECT_TRUE(std::isfinite(v) && v != 0.0f) << v;
    for (Isa isa : test_util::SupportedIsas()) {
      std::vector<float> yv(rows * tokens);
      GetTileFn(TensorType::kMXFP4, isa, n)(wp, ws, rows, act.data(), as, tokens, n, yv.data(), rows);
      EXPECT_TRUE(test_util::SameBits(ys, yv)) << IsaName(isa) << " tokens " << tokens;
    }
  }
}

// Weights `w` (rows of type t) against activations at their extremes (token k: all +1, all -1, or
// alternating, by k % 3, quantised to +-127 or -128): the scalar kernel is the exact dot to f32 rounding,
// and every level, with several tokens and with one, gives its bits.
void ExpectExtremesMatchOnEveryLevel(TensorType t, int64_t n, int64_t rows, int64_t tokens,
                                     const std::vector<uint8_t>& w) {
  const size_t ws = TypeRowBytes(t, n), as = ActivationRowBytes(ActivationFormat(t), n);
  std::vector<uint8_t> act(as * tokens);
  std::vector<std::vector<float>> xs;
  for (int64_t k = 0; k < tokens; ++k) {
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) x[i] = k % 3 == 0 ? 1.0f : k % 3 == 1 ? -1.0f : (i % 2 ? 1.0f : -1.0f);
    QuantizeActivationRow(ActivationFormat(t), x.data(), n, act.data() + k * as);
    xs.push_back(DequantAct(ActivationFormat(t), act.data() + k * as, n));
  }
  std::vector<float> ys(rows * tokens);
  GetTileFn(t, Isa::kScalar, n)(w.data(), ws, rows, act.data(), as, tokens, n, ys.data(), rows);
  for (int64_t k = 0; k < tokens; ++k) {
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> wd(n);
      DequantizeRow(t, w.data() + r * ws, wd.data(), n);
      double exact = 0;
      for (int64_t i = 0; i < n; ++i) exact += static_cast<double>(wd[i]) * xs[k][i];
      EXPECT_NEAR(ys[k * rows + r], exact, std::fabs(exact) * 1e-6) << "row " << r << " token " << k;
    }
  }
  for (Isa isa : test_util::SupportedIsas()) {
    std::vector<float> yv(rows * tokens);
    GetTileFn(t, isa, n)(w.data(), ws, rows, act.data(), as, tokens, n, yv.data(), rows);
    EXPECT_TRUE(test_util::SameBits(ys, yv)) << IsaName(isa);
    // One token at a time: the decode kernels.
    for (int64_t k = 0; k < tokens; ++k) {
      std::vector<float> y1(rows);
      GetTileFn(t, isa, n)(w.data(), ws, rows, act.data() + k * as, as, 1, n, y1.data(), 1);
      EXPECT_TRUE(
          test_util::SameBits(y1, std::vector<float>(ys.begin() + k * rows, ys.begin() + (k + 1) * rows)))
          << IsaName(isa) << " one token, token " << k;
    }
  }
}

// IQ4_NL and IQ4_XS at the grid's extremes (-127 and 113, IQ4_XS's scales -32 and 31), where a kernel whose
// int16 pair sums saturated would go wrong (IQ4_NL's AVX-512 decode sums grid values offset to 1..241).
TEST(VecDot, LookupTypesAtTheirExtremesMatchOnEveryLevel) {
  const int64_t n = 256, rows = 9, tokens = 3;
  for (TensorType t : {TensorType::kIQ4_NL, TensorType::kIQ4_XS}) {
    SCOPED_TRACE(std::string(TensorTypeName(t)));
    const size_t ws = TypeRowBytes(t, n);
    std::vector<uint8_t> w(ws * rows);
    for (int64_t r = 0; r < rows; ++r) {
      uint8_t* row = w.data() + r * ws;
      const uint8_t q = r % 2 ? 0xF0 : 0x00;  // nibbles 0 (-127) and 15 (113), or 0 alone
      if (t == TensorType::kIQ4_NL) {
        auto* b = reinterpret_cast<BlockIQ4_NL*>(row);
        for (int64_t i = 0; i < n / 32; ++i) b[i].d = F32ToF16(0.5f), std::memset(b[i].qs, q, 16);
      } else {
        auto* b = reinterpret_cast<BlockIQ4_XS*>(row);
        b->d = F32ToF16(0.5f);
        b->scales_h = r % 3 ? 0xFFFF : 0x0000;  // ls = 63 or 0 with the low nibbles below
        std::memset(b->scales_l, r % 3 ? 0xFF : 0x00, 4);
        std::memset(b->qs, q, 128);
      }
    }
    ExpectExtremesMatchOnEveryLevel(t, n, rows, tokens, w);
  }
}

// Q6_K at its extremes (values -32 and 31, scales -128 and 127), through the several-token kernels, whose
// AVX2 int16 pair sums reach 2 x 2 x 63 x 128 = 32256 before they widen, and the one-token ones.
TEST(VecDot, Q6_KExtremesMatchOnEveryLevel) {
  const TensorType t = TensorType::kQ6_K;
  const int64_t n = 512, rows = 11, tokens = 6;
  const size_t ws = TypeRowBytes(t, n);
  std::vector<uint8_t> w(ws * rows);
  for (int64_t r = 0; r < rows; ++r) {
    auto* b = reinterpret_cast<BlockQ6_K*>(w.data() + r * ws);
    for (int64_t i = 0; i < n / kQkK; ++i) {
      b[i].d = F32ToF16(r % 2 ? 0.5f : -0.25f);
      std::memset(b[i].ql, (r + i) % 3 ? 0xFF : 0x00, sizeof(b[i].ql));  // with qh: q = 63 (31) or 0 (-32)
      std::memset(b[i].qh, (r + i) % 3 ? 0xFF : 0x00, sizeof(b[i].qh));
      for (int s = 0; s < 16; ++s) b[i].scales[s] = static_cast<int8_t>((s + r) % 2 ? 127 : -128);
    }
  }
  ExpectExtremesMatchOnEveryLevel(t, n, rows, tokens, w);
}

// Float types with n_in not a multiple of 8 take the scalar kernel on every ISA: same bits.
TEST(VecDot, FloatTailFallsBackToSameResult) {
  std::mt19937 rng(4);
  const int64_t n = 1001;
  const auto w = RandomFloats(rng, n), x = RandomFloats(rng, n);
  EXPECT_EQ(test_util::Bits(VecDot(TensorType::kF32, w.data(), x.data(), n, Isa::kScalar)),
            test_util::Bits(VecDot(TensorType::kF32, w.data(), x.data(), n, DetectIsa())));
}

// A hand-computed Q8_0 dot: one block, integer sum 16 * 2 * 3 + 16 * 2 * -1 = 64, scales 0.5 * 0.25.
TEST(VecDot, KnownValueQ8_0) {
  BlockQ8_0 w{F32ToF16(0.5f), {}}, a{F32ToF16(0.25f), {}};
  for (int j = 0; j < 32; ++j) w.qs[j] = 2, a.qs[j] = static_cast<int8_t>(j % 2 ? 3 : -1);
  for (Isa isa : {Isa::kScalar, DetectIsa()}) EXPECT_EQ(VecDot(TensorType::kQ8_0, &w, &a, 32, isa), 8.0f);
}

// Hand-computed Q3_K and Q2_K dots, on every level, against activations of 1 (d_a = 0.5, bsums of 16).
// Q3_K: every q = -4 (no high bits, low bits 0) with scales sc - 32 = 1, d = 1: 256 * -4 * 0.5 = -512.
// Q2_K: every q = 3, scale 1 and min 2, d = 1, dmin = 0.25: x = 3 - 0.5, 256 * 2.5 * 0.5 = 320 (from
// sumi = 768 and smin = 512, the min term from the bsums).
TEST(VecDot, KnownValuesQ3_KAndQ2_K) {
  BlockQ8_K a{};
  a.d = 0.5f;
  for (auto& q : a.qs) q = 1;
  for (auto& s : a.bsums) s = 16;
  BlockQ3_K w3{};
  w3.d = F32ToF16(1.0f);
  // Scale 33 = 0b100001: low nibble 1 for all 16 sub-blocks, high bits 2 in every 2-bit field.
  for (int i = 0; i < 8; ++i) w3.scales[i] = 0x11;
  for (int i = 8; i < 12; ++i) w3.scales[i] = 0xAA;
  BlockQ2_K w2{};
  w2.d = F32ToF16(1.0f);
  w2.dmin = F32ToF16(0.25f);
  for (auto& s : w2.scales) s = 0x21;
  for (auto& q : w2.qs) q = 0xFF;
  for (Isa isa : test_util::SupportedIsas()) {
    EXPECT_EQ(VecDot(TensorType::kQ3_K, &w3, &a, 256, isa), -512.0f) << IsaName(isa);
    EXPECT_EQ(VecDot(TensorType::kQ2_K, &w2, &a, 256, isa), 320.0f) << IsaName(isa);
  }
}

}  // namespace
}  // namespace llamay::kernels
