// Scalar reference versions of the ops with AVX2 and NEON twins (ops_avx2.cc and ops_neon.cc repeat these
// operations exactly).
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/reference/reference.h"

namespace llamay::kernels {
namespace {

float Pow2(int k) {  // 2^k for k in [-126, 127]
  const uint32_t bits = static_cast<uint32_t>(k + 127) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace

float RefExp(float x) {
  x = x > kExpLo ? x : kExpLo;  // the order and NaN behaviour of _mm256_max_ps(x, c)
  x = x < kExpHi ? x : kExpHi;
  const float n = std::nearbyint(x * kExpLog2e);
  float r = x - n * kExpC1;
  r = r - n * kExpC2;
  const float z = r * r;
  float p = kExpP[0];
  for (int i = 1; i < 6; ++i) p = p * r + kExpP[i];
  p = p * z + r;
  p = p + 1.0f;
  // 2^n in two factors so that each stays a normal number for n in [-150, 129].
  const int ni = static_cast<int>(n);
  const int n1 = ni >> 1;
  const float result = (p * Pow2(n1)) * Pow2(ni - n1);
  return x <= kExpLo ? 0.0f : result;
}

float RefSilu(float x) { return x / (1.0f + RefExp(-x)); }

float RefGelu(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286535588f;
  constexpr float kCoefA = 0.044715f;
  const float u = kSqrt2OverPi * x * (1.0f + kCoefA * x * x);
  const float t = 1.0f - 2.0f / (RefExp(2.0f * u) + 1.0f);
  return 0.5f * x * (1.0f + t);
}

void RmsNormFinish(const float* x, const float* w, int64_t n, float eps, const double* lane_sums, float* y) {
  const float mean = static_cast<float>(Reduce8(lane_sums) / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  if (w == nullptr) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * scale) * w[i];
  }
}

void RefRmsNorm(const float* x, const float* w, int64_t n, float eps, float* y) {
  double acc[8] = {};
  // Products of two floats are exact in double; only the additions round.
  for (int64_t i = 0; i < n; ++i)
    acc[i % 8] = acc[i % 8] + static_cast<double>(x[i]) * static_cast<double>(x[i]);
  RmsNormFinish(x, w, n, eps, acc, y);
}

void RefSoftmax(const float* x, int64_t n, float* y) {
  float m = x[0];
  for (int64_t i = 1; i < n; ++i) m = x[i] > m ? x[i] : m;
  float acc[8] = {};
  for (int64_t i = 0; i < n; ++i) {
    const float e = RefExp(x[i] - m);
    y[i] = e;
    acc[i % 8] = acc[i % 8] + e;
  }
  const float inv = 1.0f / Reduce8(acc);
  for (int64_t i = 0; i < n; ++i) y[i] = y[i] * inv;
}

}  // namespace llamay::kernels
