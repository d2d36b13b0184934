// Scalar reference versions of the recurrent kernels (recurrent.h): token by token, head by head, each
// formula written out as the header states it. recurrent_avx2.cc repeats these operations exactly.
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/recurrent.h"
#include "kernels/reference/reference.h"

namespace llamay::kernels {
namespace {

int64_t Stride(int64_t given, int64_t packed) { return given != 0 ? given : packed; }

// Cephes logf: log(x) = log(m) + e*ln2 with m in [sqrt(1/2), sqrt(2)), log(1 + f) by a polynomial in f,
// ln2 split in two (kLn2Hi has few bits, so e * kLn2Hi is exact).
constexpr float kSqrtHalf = 0.707106781186547524f;
constexpr float kLn2Hi = 0.693359375f;
constexpr float kLn2Lo = -2.12194440e-4f;
constexpr float kLogP[9] = {7.0376836292e-2f,  -1.1514610310e-1f, 1.1676998740e-1f,
                            -1.2420140846e-1f, 1.4249322787e-1f,  -1.6668057665e-1f,
                            2.0000714765e-1f,  -2.4999993993e-1f, 3.3333331174e-1f};

}  // namespace

float RefLog(float x) {
  int e = 0;
  float f = std::frexp(x, &e);  // x = f * 2^e, f in [0.5, 1): exact
  if (f < kSqrtHalf) {
    e -= 1;
    f = (f + f) - 1.0f;
  } else {
    f = f - 1.0f;
  }
  const float z = f * f;
  float p = kLogP[0];
  for (int i = 1; i < 9; ++i) p = p * f + kLogP[i];
  float y = (p * f) * z;
  const float fe = static_cast<float>(e);
  y = y + kLn2Lo * fe;
  y = y + -0.5f * z;
  float r = f + y;
  r = r + kLn2Hi * fe;
  return r;
}

float RefSoftplus(float x) { return x > 20.0f ? x : RefLog(1.0f + RefExp(x)); }

void RefCausalConv1d(const CausalConv1dArgs& a) {
  const int64_t C = a.channels, xs = Stride(a.x_stride, C), ys = Stride(a.y_stride, C);
  const int K = a.kernel;
  float window[kMaxConvKernel];
  for (int64_t c = 0; c < C; ++c) {
    for (int k = 0; k + 1 < K; ++k) window[k] = a.conv_state[k * C + c];
    const float* w = a.weight + c * K;
    for (int64_t t = 0; t < a.n_tokens; ++t) {
      window[K - 1] = a.x[t * xs + c];  // read before y[t][c] is written: y may be x
      float sum = 0.0f;
      for (int k = 0; k < K; ++k) sum = sum + w[k] * window[k];
      if (a.bias != nullptr) sum = sum + a.bias[c];
      if (a.silu) sum = RefSilu(sum);
      a.y[t * ys + c] = sum;
      for (int k = 0; k + 1 < K; ++k) window[k] = window[k + 1];
    }
    for (int k = 0; k + 1 < K; ++k) a.conv_state[k * C + c] = window[k];
  }
}

void RefGeGlu(const float* gate, const float* up, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = RefGelu(gate[i]) * up[i];
}

void RefGroupRmsNormGated(const float* x, const float* z, const float* w, int64_t n_tokens,
                          const GroupNormParams& p, float* y) {
  const int64_t D = p.group_size, rows = n_tokens * p.n_groups;
  std::vector<float> u(D);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * D;
    const float* zr = z + r * D;
    const float* wr = p.weight_len == D ? w : w + (r % p.n_groups) * D;
    float* yr = y + r * D;
    if (p.order == GateOrder::kGateThenNorm) {
      for (int64_t i = 0; i < D; ++i) u[i] = RefSilu(zr[i]) * xr[i];
      RefRmsNorm(u.data(), wr, D, p.eps, yr);
    } else {
      RefRmsNorm(xr, wr, D, p.eps, u.data());
      for (int64_t i = 0; i < D; ++i) yr[i] = RefSilu(zr[i]) * u[i];
    }
  }
}

}  // namespace llamay::kernels
