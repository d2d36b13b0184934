// Helpers shared by the kernels tests: random data, raw random blocks, bit comparison.
#ifndef LLAMAY_KERNELS_TEST_UTIL_H_
#define LLAMAY_KERNELS_TEST_UTIL_H_

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "base/numeric.h"
#include "base/tensor_type.h"
#include "kernels/cpu.h"
#include "kernels/dequant.h"
#include "kernels/quant_blocks.h"

namespace llamay::kernels::test_util {

// Every ISA level this CPU can run (ignoring LLAMAY_ISA), scalar first: on x86-64 AVX2 and AVX-512 where the
// CPU has them, on aarch64 NEON.
inline std::vector<Isa> SupportedIsas() {
  std::vector<Isa> v = {Isa::kScalar};
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kNeon})
    if (IsaCovers(SupportedIsa(), isa)) v.push_back(isa);
  return v;
}

inline std::vector<float> RandomFloats(std::mt19937& rng, size_t n, float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

inline std::vector<float> UniformFloats(std::mt19937& rng, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

inline bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Bit pattern of a float, for readable EXPECT_EQ failures.
inline uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// A weight matrix of `rows` rows of `type`, filled with uniformly random bytes (every bit pattern of the
// quants and packed scales occurs) except the f16 scale fields, which get random finite values of a sane
// size. For F32/F16/BF16 the values are random normals.
inline std::vector<uint8_t> RandomRawWeights(std::mt19937& rng, TensorType type, int64_t rows, int64_t n) {
  const size_t row_bytes = TypeRowBytes(type, n);
  std::vector<uint8_t> w(row_bytes * rows);
  if (type == TensorType::kF32 || type == TensorType::kF16 || type == TensorType::kBF16) {
    for (int64_t r = 0; r < rows; ++r) {
      auto v = RandomFloats(rng, n);
      QuantizeRow(type, v.data(), w.data() + r * row_bytes, n);
    }
    return w;
  }
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> scale(-0.02f, 0.02f);
  auto set_f16 = [&](uint8_t* p) {
    const uint16_t h = F32ToF16(scale(rng));
    std::memcpy(p, &h, 2);
  };
  const size_t bs = GetTensorTypeInfo(static_cast<uint32_t>(type))->type_size;
  for (size_t off = 0; off < w.size(); off += bs) {
    uint8_t* blk = w.data() + off;
    switch (type) {
      case TensorType::kQ4_1:
      case TensorType::kQ5_1:
      case TensorType::kQ4_K:
      case TensorType::kQ5_K:
        set_f16(blk);
        set_f16(blk + 2);
        break;
      case TensorType::kQ6_K:
        set_f16(blk + offsetof(BlockQ6_K, d));
        break;
      case TensorType::kQ3_K:
        set_f16(blk + offsetof(BlockQ3_K, d));
        break;
      case TensorType::kQ2_K:
        set_f16(blk + offsetof(BlockQ2_K, d));
        set_f16(blk + offsetof(BlockQ2_K, dmin));
        break;
      case TensorType::kMXFP4:  // an exponent byte: scales 2^-10 .. 2^2 (vec_dot_test has the extremes)
        blk[0] = static_cast<uint8_t>(118 + rng() % 13);
        break;
      default:
        set_f16(blk);
        break;
    }
  }
  return w;
}

}  // namespace llamay::kernels::test_util

#endif  // LLAMAY_KERNELS_TEST_UTIL_H_
