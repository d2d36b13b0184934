#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>

#include "base/cpu.h"
#include "base/crc32c.h"
#include "base/digest.h"
#include "base/file.h"
#include "base/numeric.h"
#include "base/status.h"

namespace llamay {
namespace {

TEST(Crc32c, CheckValue) {
  const char* s = "123456789";
  EXPECT_EQ(Crc32c(s, 9), 0xE3069283u);
  EXPECT_EQ(Crc32cExtendPortable(0, s, 9), 0xE3069283u);
  EXPECT_EQ(Crc32c("", 0), 0u);
}

TEST(Crc32c, DispatchedMatchesPortableAndExtends) {
  std::mt19937 rng(7);
  std::vector<uint8_t> buf(200003);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  // Small sizes, and sizes around the three-lane blocks (3 x 8192 and 3 x 1360 bytes) of the SSE4.2 path.
  for (size_t n : {0u, 1u, 7u, 8u, 9u, 63u, 64u, 1000u, 4079u, 4080u, 4081u, 4096u, 4099u, 8160u, 8161u, 24575u,
                   24576u, 24577u, 28656u, 28657u, 49152u, 200003u}) {
    EXPECT_EQ(Crc32c(buf.data(), n), Crc32cExtendPortable(0, buf.data(), n)) << n;
    for (size_t split : {size_t{0}, n / 3, n}) {
      uint32_t c = Crc32cExtend(0, buf.data(), split);
      c = Crc32cExtend(c, buf.data() + split, n - split);
      EXPECT_EQ(c, Crc32c(buf.data(), n));
    }
  }
}

TEST(Numeric, F16RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = F16ToF32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(F16ToF32(F32ToF16(f))));
      continue;
    }
    EXPECT_EQ(F32ToF16(f), h) << std::hex << h;
  }
}

TEST(Numeric, VectorConversionsMatchPortableBitForBit) {
  // Every half, and floats around every half's neighbourhood (ties, overflow, subnormals, nan).
  std::vector<uint16_t> halves(0x10000);
  for (uint32_t h = 0; h < 0x10000; ++h) halves[h] = static_cast<uint16_t>(h);
  std::vector<float> a(halves.size()), b(halves.size());
  ConvertF16ToF32(halves.data(), a.data(), halves.size());
  ConvertF16ToF32Portable(halves.data(), b.data(), halves.size());
  ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4));
  std::mt19937 rng(5);
  std::vector<float> xs;
  for (float f : a) {
    if (std::isnan(f)) continue;
    uint32_t u;
    std::memcpy(&u, &f, 4);
    for (int d : {-4097, -4096, -1, 0, 1, 4095, 4096, 4097}) {
      uint32_t v = u + static_cast<uint32_t>(d);
      float g;
      std::memcpy(&g, &v, 4);
      if (!std::isnan(g)) xs.push_back(g);
    }
  }
  for (int i = 0; i < 100000; ++i) {
    uint32_t v = static_cast<uint32_t>(rng());
    float g;
    std::memcpy(&g, &v, 4);
    if (!std::isnan(g)) xs.push_back(g);
  }
  std::vector<uint16_t> ha(xs.size()), hb(xs.size());
  ConvertF32ToF16(xs.data(), ha.data(), xs.size());
  ConvertF32ToF16Portable(xs.data(), hb.data(), xs.size());
  for (size_t i = 0; i < xs.size(); ++i) ASSERT_EQ(ha[i], hb[i]) << xs[i];
}

TEST(Numeric, F16RoundsToNearestEven) {
  EXPECT_EQ(F16ToF32(F32ToF16(1.0f)), 1.0f);
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1.0).
  EXPECT_EQ(F16ToF32(F32ToF16(1.0f + 0x1p-11f)), 1.0f);
  // 1 + 3*2^-11 is halfway between 1+2^-10 and 1+2^-9: ties to even (1 + 2^-9).
  EXPECT_EQ(F16ToF32(F32ToF16(1.0f + 3 * 0x1p-11f)), 1.0f + 0x1p-9f);
  EXPECT_EQ(F32ToF16(65504.0f), 0x7BFF);
  EXPECT_EQ(F32ToF16(65520.0f), 0x7C00);  // overflows to inf
  EXPECT_EQ(F32ToF16(-1e10f), 0xFC00);
  EXPECT_EQ(F32ToF16(0x1p-24f), 0x0001);  // smallest subnormal
  EXPECT_EQ(F32ToF16(0x1p-26f), 0x0000);  // below half of it
}

TEST(Numeric, Bf16) {
  EXPECT_EQ(Bf16ToF32(F32ToBf16(1.5f)), 1.5f);
  EXPECT_EQ(F32ToBf16(1.0f + 0x1p-8f), F32ToBf16(1.0f));  // tie to even
  EXPECT_TRUE(std::isnan(Bf16ToF32(F32ToBf16(NAN))));
}

TEST(Numeric, Q8_0QuantizesWithinHalfAStep) {
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> x(128), y(128);
  for (auto& v : x) v = dist(rng);
  std::vector<BlockQ8_0> q(4);
  QuantizeRowQ8_0(x.data(), q.data(), x.size());
  DequantizeRowQ8_0(q.data(), y.data(), y.size());
  for (int b = 0; b < 4; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    const float d = F16ToF32(q[b].d);
    EXPECT_NEAR(d, amax / 127.0f, amax / 127.0f * 1e-3f);
    // Half a quantisation step, plus the f16 rounding of the scale (relative 2^-11) times |q| <= 127:
    // quants are computed with the unrounded scale, as GGUF's reference quantiser does.
    const float bound = d * (0.5f + 127.0f * 0x1p-11f) + 1e-6f;
    for (int j = 0; j < 32; ++j) EXPECT_LE(std::fabs(x[b * 32 + j] - y[b * 32 + j]), bound);
  }
  // All zeros: scale 0, quants 0.
  std::vector<float> z(32, 0.0f);
  QuantizeRowQ8_0(z.data(), q.data(), 32);
  EXPECT_EQ(q[0].d, 0);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(q[0].qs[j], 0);
}

// The dispatched quantiser (AVX2 where the CPU has it) against the portable one, bit for bit: random
// blocks at many scales, ties at .5 (lround rounds away from zero), values just below .5, subnormal
// scales (1/d far from 127/amax), zeros, infinities and NaN.
TEST(Numeric, Q8_0DispatchedMatchesPortableBitForBit) {
  std::mt19937 rng(5);
  std::vector<float> x;
  for (float scale : {1e-40f, 1e-37f, 1e-3f, 1.0f, 3.0f, 1e4f, 3e38f}) {
    std::uniform_real_distribution<float> dist(-scale, scale);
    for (int i = 0; i < 32 * 64; ++i) x.push_back(dist(rng));
  }
  std::vector<float> ties(32);  // amax 127 gives d = 1 and id = 1: x * id is x itself
  for (int j = 0; j < 32; ++j) ties[j] = (j % 2 ? -1.0f : 1.0f) * (static_cast<float>(j) + 0.5f);
  ties[0] = 127.0f;
  ties[1] = 0.49999997f;
  ties[2] = -0.49999997f;
  ties[3] = -0.0f;
  x.insert(x.end(), ties.begin(), ties.end());
  std::vector<float> odd(32 * 4, 0.0f);
  odd[5] = INFINITY;
  odd[32 + 7] = NAN;
  odd[64 + 1] = -INFINITY, odd[64 + 2] = 1.0f;
  odd[96 + 3] = NAN, odd[96 + 4] = 2.5f, odd[96 + 5] = -1.25f;
  x.insert(x.end(), odd.begin(), odd.end());
  const size_t nb = x.size() / 32;
  std::vector<BlockQ8_0> a(nb), b(nb);
  QuantizeRowQ8_0(x.data(), a.data(), x.size());
  QuantizeRowQ8_0Portable(x.data(), b.data(), x.size());
  for (size_t i = 0; i < nb; ++i) {
    EXPECT_EQ(a[i].d, b[i].d) << "block " << i;
    EXPECT_EQ(std::memcmp(a[i].qs, b[i].qs, 32), 0) << "block " << i;
  }
  EXPECT_EQ(b[nb - 5].qs[1], 0);   // 0.49999997 rounds down
  EXPECT_EQ(b[nb - 5].qs[4], 5);   // 4.5 rounds away from zero
  EXPECT_EQ(b[nb - 5].qs[5], -6);  // -5.5 too
}

TEST(Status, ResultAndMacros) {
  auto f = [](int x) -> Result<int> {
    if (x < 0) return InvalidArgumentError("negative");
    return x * 2;
  };
  auto g = [&](int x) -> Result<int> {
    LLAMAY_ASSIGN_OR_RETURN(int y, f(x));
    return y + 1;
  };
  EXPECT_EQ(*g(3), 7);
  Result<int> bad = g(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().ToString(), "INVALID_ARGUMENT: negative");
  EXPECT_EQ(Status(StatusCode::kDataLoss, "x", 5).WithContext("file a").message(), "file a: x");
  EXPECT_EQ(Status(StatusCode::kDataLoss, "x", 5).WithContext("file a").detail(), 5);
}

TEST(StatusDeathTest, ValueOfErrorAborts) {
  Result<int> r = NotFoundError("nope");
  EXPECT_DEATH((void)r.value(), "nope");
}

TEST(Digest, Sha256KnownValue) {
  EXPECT_EQ(DigestHex(Sha256Of("abc", 3)),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Hex, DigestsRoundTripAndBadTextIsRefused) {
  const Digest d = Sha256Of("abc", 3);
  EXPECT_EQ(DigestFromHex(DigestHex(d)), d);
  std::string upper = DigestHex(d);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(DigestFromHex(upper), d);
  EXPECT_FALSE(DigestFromHex(DigestHex(d).substr(1)).has_value());
  std::string bad = DigestHex(d);
  bad[10] = 'g';
  EXPECT_FALSE(DigestFromHex(bad).has_value());
  const uint8_t bytes[] = {0x00, 0x0f, 0xa5, 0xff};
  EXPECT_EQ(HexOf(bytes), "000fa5ff");
  EXPECT_EQ(HexOf({}), "");
}

TEST(File, AtomicWriteReplacesAndLeavesNoTemporary) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("llamay_file_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string path = (dir / "a.bin").string();
  std::vector<uint8_t> one = {1, 2, 3}, two = {9, 8, 7, 6};
  ASSERT_TRUE(WriteFileAtomic(path, one).ok());
  ASSERT_TRUE(WriteFileAtomic(path, two).ok());
  auto got = ReadFile(path);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, two);
  // A writer that fails publishes nothing and leaves the old content.
  Status s = WriteFileAtomic(path, [](ByteSink& sink) -> Status {
    uint8_t b = 0;
    LLAMAY_RETURN_IF_ERROR(sink.Append(&b, 1));
    return DataLossError("stop");
  });
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_EQ(*ReadFile(path), two);
  size_t files = 0;
  for (auto& e : fs::directory_iterator(dir)) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1u);
  EXPECT_EQ(ReadFile((dir / "missing").string()).status().code(), StatusCode::kNotFound);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace llamay

namespace llamay {
namespace {

TEST(Cpu, FeaturesAreConsistent) {
  const CpuFeatures& f = GetCpuFeatures();
  // Every AVX-family feature needs AVX itself (and the OS's YMM support).
  if (f.avx2 || f.fma || f.f16c) {
    EXPECT_TRUE(f.avx);
  }
#if defined(__x86_64__)
  EXPECT_TRUE(f.sse42);  // every x86-64 machine this project targets has it
#endif
  EXPECT_EQ(&GetCpuFeatures(), &f);
}

}  // namespace
}  // namespace llamay
