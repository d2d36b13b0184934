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

void RefSsmScan(const SsmScanArgs& a) {
  const int H = a.n_heads, P = a.head_dim, N = a.d_state, heads_per_group = a.n_heads / a.n_groups;
  const int64_t xs = Stride(a.x_stride, int64_t{H} * P), dts = Stride(a.dt_stride, H),
                bcs = Stride(a.bc_stride, int64_t{a.n_groups} * N), ys = Stride(a.y_stride, int64_t{H} * P);
  for (int64_t t = 0; t < a.n_tokens; ++t) {
    for (int h = 0; h < H; ++h) {
      float dt = a.dt[t * dts + h];
      if (a.dt_bias != nullptr) dt = dt + a.dt_bias[h];
      dt = RefSoftplus(dt);
      const float dA = RefExp(dt * a.a[h]);
      const int64_t g = h / heads_per_group;
      const float* B = a.b + t * bcs + g * N;
      const float* Cv = a.c + t * bcs + g * N;
      for (int p = 0; p < P; ++p) {
        const float xv = a.x[t * xs + int64_t{h} * P + p];
        const float x_dt = xv * dt;
        float* s = a.state + (int64_t{h} * P + p) * N;
        for (int n = 0; n < N; ++n) s[n] = (s[n] * dA) + (B[n] * x_dt);
        float y = RefDotF32(s, Cv, N);
        if (a.d != nullptr) y = y + xv * a.d[h];
        a.y[t * ys + int64_t{h} * P + p] = y;
      }
    }
  }
}

void RefGatedDeltaRule(const GatedDeltaRuleArgs& a) {
  const int Hk = a.n_k_heads, Hv = a.n_v_heads, Dk = a.k_dim, Dv = a.v_dim;
  const int64_t qs = Stride(a.q_stride, int64_t{Hk} * Dk), ks = Stride(a.k_stride, int64_t{Hk} * Dk),
                vs = Stride(a.v_stride, int64_t{Hv} * Dv), os = Stride(a.out_stride, int64_t{Hv} * Dv),
                gs = Stride(a.g_stride, Hv), bs = Stride(a.beta_stride, Hv);
  const float scale = 1.0f / std::sqrt(static_cast<float>(Dk));
  std::vector<float> kv(Dv), delta(Dv);
  for (int64_t t = 0; t < a.n_tokens; ++t) {
    for (int h = 0; h < Hv; ++h) {
      float* S = a.state + int64_t{h} * Dk * Dv;  // S[i][j] = S[i * Dv + j]
      const float* q = a.q + t * qs + int64_t{h % Hk} * Dk;
      const float* k = a.k + t * ks + int64_t{h % Hk} * Dk;
      const float* v = a.v + t * vs + int64_t{h} * Dv;
      const float eg = RefExp(a.g[t * gs + h]);
      const float beta = a.beta[t * bs + h];
      for (int64_t e = 0; e < int64_t{Dk} * Dv; ++e) S[e] = S[e] * eg;
      for (int j = 0; j < Dv; ++j) {
        float sum = 0.0f;
        for (int i = 0; i < Dk; ++i) sum = sum + S[int64_t{i} * Dv + j] * k[i];
        kv[j] = sum;
      }
      for (int j = 0; j < Dv; ++j) delta[j] = (v[j] - kv[j]) * beta;
      for (int i = 0; i < Dk; ++i)
        for (int j = 0; j < Dv; ++j) S[int64_t{i} * Dv + j] = S[int64_t{i} * Dv + j] + k[i] * delta[j];
      float* o = a.out + t * os + int64_t{h} * Dv;
      for (int j = 0; j < Dv; ++j) {
        float sum = 0.0f;
        for (int i = 0; i < Dk; ++i) sum = sum + S[int64_t{i} * Dv + j] * q[i];
        o[j] = sum * scale;
      }
    }
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
