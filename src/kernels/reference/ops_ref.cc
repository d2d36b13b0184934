// Scalar reference versions of the ops with an AVX2 twin (ops_avx2.cc repeats these operations exactly).
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/reference/reference.h"

namespace llamay::kernels {
namespace {

// Range reduction and polynomial of the classic Cephes expf: exp(x) = 2^n * exp(r), |r| <= ln2/2, with
// ln2 split in two (C1 has few bits, so n*C1 is exact).
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kC1 = 0.693359375f;
constexpr float kC2 = -2.12194440e-4f;
constexpr float kP[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                         4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

float Pow2(int k) {  // 2^k for k in [-126, 127]
  const uint32_t bits = static_cast<uint32_t>(k + 127) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace

float RefExp(float x) {
  x = x > -104.0f ? x : -104.0f;  // the order and NaN behaviour of _mm256_max_ps(x, c)
  x = x < 89.0f ? x : 89.0f;      // exp(89) overflows to inf below
  const float n = std::nearbyint(x * kLog2e);
  float r = x - n * kC1;
  r = r - n * kC2;
  const float z = r * r;
  float p = kP[0];
  for (int i = 1; i < 6; ++i) p = p * r + kP[i];
  p = p * z + r;
  p = p + 1.0f;
  // 2^n in two factors so that each stays a normal number for n in [-150, 129].
  const int ni = static_cast<int>(n);
  const int n1 = ni >> 1;
  const float result = (p * Pow2(n1)) * Pow2(ni - n1);
  return x <= -104.0f ? 0.0f : result;
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
