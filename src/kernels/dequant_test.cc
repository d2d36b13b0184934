// Dequantisation against hand-built blocks with known values, and quantise -> dequantise round trips.
#include "kernels/dequant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/numeric.h"
#include "kernels/quant_blocks.h"
#include "kernels/test_util.h"

namespace llamay::kernels {
namespace {

std::vector<float> Dequant(TensorType t, const void* src, int64_t n) {
  std::vector<float> y(n);
  DequantizeRow(t, src, y.data(), n);
  return y;
}

// Writes 4-bit value q of element j (0..31) of a 32-block: low nibble of qs[j] for j < 16, else high
// nibble of qs[j-16].
void PutNibble(uint8_t* qs, int j, int q) {
  qs[j % 16] |= static_cast<uint8_t>((q & 0xF) << (j < 16 ? 0 : 4));
}

TEST(Dequant, RowBytes) {
  EXPECT_EQ(TypeRowBytes(TensorType::kF32, 64), 256u);
  EXPECT_EQ(TypeRowBytes(TensorType::kQ4_0, 64), 36u);
  EXPECT_EQ(TypeRowBytes(TensorType::kQ4_K, 512), 288u);
  EXPECT_EQ(TypeRowBytes(TensorType::kQ6_K, 256), 210u);
  EXPECT_EQ(TypeRowBytes(TensorType::kQ3_K, 512), 220u);
  EXPECT_EQ(TypeRowBytes(TensorType::kQ2_K, 256), 84u);
}

TEST(Dequant, FloatTypes) {
  const uint16_t h[4] = {0x3C00, 0xC100, 0x7BFF, 0x0001};  // 1, -2.5, 65504, 2^-24
  EXPECT_EQ(Dequant(TensorType::kF16, h, 4), (std::vector<float>{1.0f, -2.5f, 65504.0f, 0x1p-24f}));
  const uint16_t b[2] = {0x3F80, 0xC020};  // 1, -2.5
  EXPECT_EQ(Dequant(TensorType::kBF16, b, 2), (std::vector<float>{1.0f, -2.5f}));
  const float f[2] = {3.5f, -0.0f};
  EXPECT_EQ(test_util::Bits(Dequant(TensorType::kF32, f, 2)[1]), 0x80000000u);
}

TEST(Dequant, Q8_0) {
  BlockQ8_0 blk{F32ToF16(0.125f), {}};
  for (int j = 0; j < 32; ++j) blk.qs[j] = static_cast<int8_t>(8 * j - 127);
  const auto y = Dequant(TensorType::kQ8_0, &blk, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 0.125f * (8 * j - 127)) << j;
}

TEST(Dequant, Q4_0AndQ4_1) {
  BlockQ4_0 b0{F32ToF16(-1.5f), {}};
  BlockQ4_1 b1{F32ToF16(0.75f), F32ToF16(1.25f), {}};
  auto q = [](int j) { return (5 * j + 2) % 16; };
  for (int j = 0; j < 32; ++j) PutNibble(b0.qs, j, q(j)), PutNibble(b1.qs, j, q(j));
  const auto y0 = Dequant(TensorType::kQ4_0, &b0, 32);
  const auto y1 = Dequant(TensorType::kQ4_1, &b1, 32);
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(y0[j], -1.5f * (q(j) - 8)) << j;
    EXPECT_EQ(y1[j], 0.75f * q(j) + 1.25f) << j;
  }
}

TEST(Dequant, Q5_0AndQ5_1) {
  BlockQ5_0 b0{F32ToF16(0.5f), {}, {}};
  BlockQ5_1 b1{F32ToF16(0.25f), F32ToF16(-2.0f), {}, {}};
  auto q = [](int j) { return (3 * j + 1) % 32; };
  uint32_t qh = 0;
  for (int j = 0; j < 32; ++j) {
    PutNibble(b0.qs, j, q(j));
    PutNibble(b1.qs, j, q(j));
    qh |= static_cast<uint32_t>(q(j) >> 4) << j;
  }
  for (int i = 0; i < 4; ++i) b0.qh[i] = b1.qh[i] = static_cast<uint8_t>(qh >> (8 * i));
  const auto y0 = Dequant(TensorType::kQ5_0, &b0, 32);
  const auto y1 = Dequant(TensorType::kQ5_1, &b1, 32);
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(y0[j], 0.5f * (q(j) - 16)) << j;
    EXPECT_EQ(y1[j], 0.25f * q(j) - 2.0f) << j;
  }
}

// Packs 6-bit scales and mins of the 8 sub-blocks as the Q4_K/Q5_K layout specifies.
void PackScalesK4(const int* sc, const int* mn, uint8_t* scales) {
  std::memset(scales, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      scales[j] |= static_cast<uint8_t>(sc[j]);
      scales[j + 4] |= static_cast<uint8_t>(mn[j]);
    } else {
      scales[j + 4] |= static_cast<uint8_t>((sc[j] & 0xF) | ((mn[j] & 0xF) << 4));
      scales[j - 4] |= static_cast<uint8_t>((sc[j] >> 4) << 6);
      scales[j] |= static_cast<uint8_t>((mn[j] >> 4) << 6);
    }
  }
}

TEST(Dequant, Q4_KAndQ5_K) {
  const int sc[8] = {1, 2, 3, 63, 17, 33, 48, 5};
  const int mn[8] = {0, 4, 63, 1, 20, 31, 16, 2};
  BlockQ4_K b4{};
  BlockQ5_K b5{};
  b4.d = b5.d = F32ToF16(1.0f);
  b4.dmin = b5.dmin = F32ToF16(0.5f);
  PackScalesK4(sc, mn, b4.scales);
  PackScalesK4(sc, mn, b5.scales);
  auto q4 = [](int e) { return (7 * e + 3) % 16; };
  auto q5 = [](int e) { return (11 * e + 5) % 32; };
  for (int e = 0; e < 256; ++e) {
    const int s = e / 32, l = e % 32;
    // Chunk s/2 holds sub-block s in its low (even s) or high (odd s) nibbles.
    b4.qs[32 * (s / 2) + l] |= static_cast<uint8_t>(q4(e) << (4 * (s % 2)));
    b5.qs[32 * (s / 2) + l] |= static_cast<uint8_t>((q5(e) & 0xF) << (4 * (s % 2)));
    b5.qh[l] |= static_cast<uint8_t>((q5(e) >> 4) << s);
  }
  const auto y4 = Dequant(TensorType::kQ4_K, &b4, 256);
  const auto y5 = Dequant(TensorType::kQ5_K, &b5, 256);
  for (int e = 0; e < 256; ++e) {
    const int s = e / 32;
    EXPECT_EQ(y4[e], static_cast<float>(sc[s] * q4(e)) - 0.5f * mn[s]) << e;
    EXPECT_EQ(y5[e], static_cast<float>(sc[s] * q5(e)) - 0.5f * mn[s]) << e;
  }
}

TEST(Dequant, Q6_K) {
  BlockQ6_K b{};
  b.d = F32ToF16(0.25f);
  for (int s = 0; s < 16; ++s) b.scales[s] = static_cast<int8_t>(9 * s - 70);
  auto q = [](int e) { return (13 * e + 7) % 64; };
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, i = e % 128, k = i / 32, l = i % 32;
    // k = 0, 1: low nibbles of ql[l], ql[l+32]; k = 2, 3: their high nibbles; qh[l] bits 2k..2k+1.
    b.ql[64 * h + l + 32 * (k % 2)] |= static_cast<uint8_t>((q(e) & 0xF) << (4 * (k / 2)));
    b.qh[32 * h + l] |= static_cast<uint8_t>((q(e) >> 4) << (2 * k));
  }
  const auto y = Dequant(TensorType::kQ6_K, &b, 256);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], 0.25f * (9 * (e / 16) - 70) * (q(e) - 32)) << e;
}

// Element e = 128h + 32k + l (l < 32) of a Q3_K/Q2_K super-block keeps its 2 low bits at bits 2k..2k+1 of
// qs[32h + l]; Q3_K's third bit is bit 4h + k of hmask[l].
void Put2BitK(uint8_t* qs, int e, int q) {
  const int h = e / 128, k = (e % 128) / 32, l = e % 32;
  qs[32 * h + l] |= static_cast<uint8_t>((q & 3) << (2 * k));
}

TEST(Dequant, Q3_K) {
  BlockQ3_K b{};
  b.d = F32ToF16(0.25f);
  // 6-bit scales, offset by 32 (0 and 63 are -32 and 31).
  const int scales[16] = {0, 63, 32, 31, 1, 17, 48, 5, 40, 12, 60, 33, 7, 26, 50, 19};
  auto sc = [&](int s) { return scales[s]; };
  for (int s = 0; s < 16; ++s) {
    // Low nibble: scales[s % 8], low (s < 8) or high half; top two bits: scales[8 + s % 4], bits 2(s/4).
    b.scales[s % 8] |= static_cast<uint8_t>((sc(s) & 0xF) << (4 * (s / 8)));
    b.scales[8 + s % 4] |= static_cast<uint8_t>((sc(s) >> 4) << (2 * (s / 4)));
  }
  auto q = [](int e) { return (5 * e + 3) % 8; };  // stored value; the weight is q - 4
  for (int e = 0; e < 256; ++e) {
    Put2BitK(b.qs, e, q(e));
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    b.hmask[l] |= static_cast<uint8_t>((q(e) >> 2) << (4 * h + k));
  }
  const auto y = Dequant(TensorType::kQ3_K, &b, 256);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], 0.25f * (sc(e / 16) - 32) * (q(e) - 4)) << e;
}

TEST(Dequant, Q2_K) {
  BlockQ2_K b{};
  b.d = F32ToF16(0.5f);
  b.dmin = F32ToF16(0.125f);
  auto sc = [](int s) { return (7 * s + 1) % 16; };
  auto mn = [](int s) { return (3 * s + 2) % 16; };
  for (int s = 0; s < 16; ++s) b.scales[s] = static_cast<uint8_t>(sc(s) | (mn(s) << 4));
  auto q = [](int e) { return (3 * e + 1 + e / 64) % 4; };
  for (int e = 0; e < 256; ++e) Put2BitK(b.qs, e, q(e));
  const auto y = Dequant(TensorType::kQ2_K, &b, 256);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], 0.5f * sc(e / 16) * q(e) - 0.125f * mn(e / 16)) << e;
}

// ggml's IQ4_NL grid (kvalues_iq4nl), written out here so that a wrong table in quant_blocks.h fails.
constexpr int kIq4Grid[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

TEST(Dequant, IQ4_NL) {
  EXPECT_EQ(TypeRowBytes(TensorType::kIQ4_NL, 64), 36u);
  BlockIQ4_NL b{F32ToF16(-0.375f), {}};
  auto q = [](int j) { return (5 * j + 2) % 16; };
  for (int j = 0; j < 32; ++j) PutNibble(b.qs, j, q(j));
  const auto y = Dequant(TensorType::kIQ4_NL, &b, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], -0.375f * kIq4Grid[q(j)]) << j;
}

// MXFP4's scale is 2^(e-128) (the E8M0 exponent halved, ggml's convention for its doubled grid), including
// the two subnormal scales of e = 0 and 1.
TEST(Dequant, MXFP4) {
  EXPECT_EQ(TypeRowBytes(TensorType::kMXFP4, 64), 34u);
  EXPECT_EQ(test_util::Bits(E8M0Half(0)), 0x00200000u);  // 2^-128
  EXPECT_EQ(test_util::Bits(E8M0Half(1)), 0x00400000u);  // 2^-127
  EXPECT_EQ(E8M0Half(2), 0x1p-126f);
  EXPECT_EQ(E8M0Half(128), 1.0f);
  EXPECT_EQ(E8M0Half(254), 0x1p126f);
  // E2M1 values doubled: 0, 0.5, 1, 1.5, 2, 3, 4, 6 times 2, then the same negated.
  constexpr int kFp4x2[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  for (uint8_t e : {uint8_t{126}, uint8_t{1}, uint8_t{140}}) {
    BlockMXFP4 b{e, {}};
    auto q = [](int j) { return (7 * j + 3) % 16; };
    for (int j = 0; j < 32; ++j) PutNibble(b.qs, j, q(j));
    const auto y = Dequant(TensorType::kMXFP4, &b, 32);
    for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], std::ldexp(static_cast<float>(kFp4x2[q(j)]), e - 128)) << j;
  }
}

// IQ4_XS: sub-block s has the 6-bit scale ls (low nibble in scales_l[s / 2], top two bits at bits 2s of
// scales_h) and reads qs[16s..16s+15], low nibbles first; x = (d * (ls - 32)) * grid value.
TEST(Dequant, IQ4_XS) {
  EXPECT_EQ(TypeRowBytes(TensorType::kIQ4_XS, 512), 272u);
  BlockIQ4_XS b{};
  b.d = F32ToF16(0.125f);
  const int ls[8] = {0, 63, 32, 31, 1, 17, 48, 5};
  for (int s = 0; s < 8; ++s) {
    b.scales_l[s / 2] |= static_cast<uint8_t>((ls[s] & 0xF) << (4 * (s % 2)));
    b.scales_h |= static_cast<uint16_t>((ls[s] >> 4) << (2 * s));
  }
  auto q = [](int e) { return (11 * e + 5) % 16; };
  for (int e = 0; e < 256; ++e) {
    const int s = e / 32, l = e % 32;
    b.qs[16 * s + l % 16] |= static_cast<uint8_t>(q(e) << (l < 16 ? 0 : 4));
  }
  const auto y = Dequant(TensorType::kIQ4_XS, &b, 256);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], 0.125f * (ls[e / 32] - 32) * kIq4Grid[q(e)]) << e;
}

// Quantisers of the lookup-table types: each element within half the widest gap of its block's grid (plus
// the f16 rounding of the scale), or, beyond the grid's end, within the distance to it.
TEST(Dequant, LookupTypesRoundTripWithinStep) {
  std::mt19937 rng(4);
  const int64_t n = 1024;
  const auto x = test_util::RandomFloats(rng, n);
  {
    std::vector<BlockIQ4_NL> q(n / 32);
    QuantizeRow(TensorType::kIQ4_NL, x.data(), q.data(), n);
    const auto y = Dequant(TensorType::kIQ4_NL, q.data(), n);
    for (int64_t b = 0; b < n / 32; ++b) {
      float amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[32 * b + j]));
      // |d| = amax / 127 rounded to f16: the widest gap is 24 steps (89..113), and the element opposite
      // the largest (if there is one) maps to 127, 14 steps past the grid's end 113; the f16 rounding of d
      // moves a value by at most 127 * |d| * 2^-11 = amax * 2^-11 more.
      const float d = std::fabs(F16ToF32(q[b].d));
      EXPECT_LE(std::fabs(d - amax / 127), amax / 127 * 0x1p-11f);
      for (int j = 0; j < 32; ++j)
        ASSERT_LE(std::fabs(y[32 * b + j] - x[32 * b + j]), 14 * d + amax * 0x1p-11f + 1e-7f)
            << "IQ4_NL element " << 32 * b + j;
    }
  }
  {
    std::vector<BlockMXFP4> q(n / 32);
    QuantizeRow(TensorType::kMXFP4, x.data(), q.data(), n);
    const auto y = Dequant(TensorType::kMXFP4, q.data(), n);
    for (int64_t b = 0; b < n / 32; ++b) {
      float amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[32 * b + j]));
      // The smallest exponent whose end value 12 * d reaches amax; the widest gap is 4 steps (8..12).
      const float d = E8M0Half(q[b].e);
      EXPECT_GE(12 * d, amax);
      EXPECT_LT(6 * d, amax);
      for (int j = 0; j < 32; ++j)
        ASSERT_LE(std::fabs(y[32 * b + j] - x[32 * b + j]), 2 * d) << "MXFP4 element " << 32 * b + j;
    }
  }
  {
    // IQ4_XS: two levels of scales, as the K-quants: the relative RMS error (0.080 here, as IQ4_NL's).
    std::vector<BlockIQ4_XS> q(n / 256);
    QuantizeRow(TensorType::kIQ4_XS, x.data(), q.data(), n);
    const auto y = Dequant(TensorType::kIQ4_XS, q.data(), n);
    double err = 0, ref = 0;
    for (int64_t i = 0; i < n; ++i) err += (y[i] - x[i]) * (y[i] - x[i]), ref += x[i] * x[i];
    EXPECT_LT(std::sqrt(err / ref), 0.09);
  }
}

// Quantise then dequantise: each element within its block's quantisation step (see each bound).
TEST(Dequant, RoundTripWithinStep) {
  std::mt19937 rng(1);
  const int64_t n = 1024;
  const auto x = test_util::RandomFloats(rng, n);
  for (TensorType t :
       {TensorType::kQ8_0, TensorType::kQ4_0, TensorType::kQ5_0, TensorType::kQ4_1, TensorType::kQ5_1}) {
    std::vector<uint8_t> q(TypeRowBytes(t, n));
    QuantizeRow(t, x.data(), q.data(), n);
    const auto y = Dequant(t, q.data(), n);
    for (int64_t b = 0; b < n / 32; ++b) {
      float amax = 0, mn = x[32 * b], mx = x[32 * b];
      for (int j = 0; j < 32; ++j) {
        amax = std::max(amax, std::fabs(x[32 * b + j]));
        mn = std::min(mn, x[32 * b + j]);
        mx = std::max(mx, x[32 * b + j]);
      }
      // Step d: half a step of rounding, plus the f16 rounding of d (2^-11 relative) times the largest q,
      // plus, for the symmetric 4/5-bit types, one full step where the positive extreme clamps.
      float bound;
      switch (t) {
        case TensorType::kQ8_0:
          bound = amax / 127 * (0.5f + 127 * 0x1p-11f);
          break;
        case TensorType::kQ4_0:
          bound = amax / 8 * (1.0f + 8 * 0x1p-11f);
          break;
        case TensorType::kQ5_0:
          bound = amax / 16 * (1.0f + 16 * 0x1p-11f);
          break;
        case TensorType::kQ4_1:
          bound = (mx - mn) / 15 * (0.5f + 15 * 0x1p-11f) + std::fabs(mn) * 0x1p-11f;
          break;
        default:
          bound = (mx - mn) / 31 * (0.5f + 31 * 0x1p-11f) + std::fabs(mn) * 0x1p-11f;
          break;
      }
      for (int j = 0; j < 32; ++j)
        ASSERT_LE(std::fabs(y[32 * b + j] - x[32 * b + j]), bound * 1.0001f + 1e-7f)
            << TensorTypeName(t) << " element " << 32 * b + j;
    }
  }
  // K-quants: two levels of scales; check the relative RMS error of each width.
  for (auto [t, limit] :
       {std::pair{TensorType::kQ4_K, 0.12}, {TensorType::kQ5_K, 0.06}, {TensorType::kQ6_K, 0.03},
        {TensorType::kQ3_K, 0.2}, {TensorType::kQ2_K, 0.4}}) {
    std::vector<uint8_t> q(TypeRowBytes(t, n));
    QuantizeRow(t, x.data(), q.data(), n);
    const auto y = Dequant(t, q.data(), n);
    double err = 0, ref = 0;
    for (int64_t i = 0; i < n; ++i) err += (y[i] - x[i]) * (y[i] - x[i]), ref += x[i] * x[i];
    EXPECT_LT(std::sqrt(err / ref), limit) << TensorTypeName(t);
  }
}

TEST(Dequant, FloatRoundTrip) {
  const float x[3] = {1.0f / 3, -1e-3f, 100.0f};
  for (TensorType t : {TensorType::kF16, TensorType::kBF16, TensorType::kF32}) {
    uint16_t buf[6];
    QuantizeRow(t, x, buf, 3);
    const auto y = Dequant(t, buf, 3);
    const float rel = t == TensorType::kF16 ? 0x1p-11f : t == TensorType::kBF16 ? 0x1p-8f : 0.0f;
    for (int i = 0; i < 3; ++i) EXPECT_LE(std::fabs(y[i] - x[i]), rel * std::fabs(x[i])) << TensorTypeName(t);
  }
}

}  // namespace
}  // namespace llamay::kernels
