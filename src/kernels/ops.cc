#include "kernels/ops.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "kernels/dequant.h"
#include "kernels/ops_avx2.h"
#include "kernels/ops_neon.h"
#include "kernels/reference/reference.h"

namespace llamay::kernels {
namespace {

[[maybe_unused]] bool UseAvx2(Isa isa) {
#if defined(__x86_64__)
  return UsesAvx2(isa);
#else
  (void)isa;
  return false;
#endif
}

}  // namespace

void RmsNorm(const float* x, const float* w, int64_t n, float eps, float* y, [[maybe_unused]] Isa isa) {
#if defined(__x86_64__)
  if (UseAvx2(isa)) return avx2::RmsNorm(x, w, n, eps, y);
#elif defined(__aarch64__)
  if (UsesNeon(isa)) return neon::RmsNorm(x, w, n, eps, y);
#endif
  RefRmsNorm(x, w, n, eps, y);
}

void Mul(const float* a, const float* b, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
}
void Add(const float* a, const float* b, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}
void Scale(const float* x, float s, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * s;
}

void Silu(const float* x, int64_t n, float* y, [[maybe_unused]] Isa isa) {
#if defined(__x86_64__)
  if (UseAvx2(isa)) return avx2::Silu(x, n, y);
#elif defined(__aarch64__)
  if (UsesNeon(isa)) return neon::Silu(x, n, y);
#endif
  for (int64_t i = 0; i < n; ++i) y[i] = RefSilu(x[i]);
}

void Gelu(const float* x, int64_t n, float* y, [[maybe_unused]] Isa isa) {
#if defined(__x86_64__)
  if (UseAvx2(isa)) return avx2::Gelu(x, n, y);
#elif defined(__aarch64__)
  if (UsesNeon(isa)) return neon::Gelu(x, n, y);
#endif
  for (int64_t i = 0; i < n; ++i) y[i] = RefGelu(x[i]);
}

void SwiGlu(const float* gate, const float* up, int64_t n, float* y, [[maybe_unused]] Isa isa) {
#if defined(__x86_64__)
  if (UseAvx2(isa)) return avx2::SwiGlu(gate, up, n, y);
#elif defined(__aarch64__)
  if (UsesNeon(isa)) return neon::SwiGlu(gate, up, n, y);
#endif
  for (int64_t i = 0; i < n; ++i) y[i] = RefSilu(gate[i]) * up[i];
}

void Softmax(const float* x, int64_t n, float* y, [[maybe_unused]] Isa isa) {
  LLAMAY_CHECK(n >= 1) << "softmax of an empty row";
#if defined(__x86_64__)
  if (UseAvx2(isa)) return avx2::Softmax(x, n, y);
#elif defined(__aarch64__)
  if (UsesNeon(isa)) return neon::Softmax(x, n, y);
#endif
  RefSoftmax(x, n, y);
}

void RopeCache(int64_t pos, const RopeParams& p, float* cs) {
  LLAMAY_CHECK(p.n_rot > 0 && p.n_rot % 2 == 0) << "rope n_rot must be even and positive, got " << p.n_rot;
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_rot));
  float theta = static_cast<float>(pos);
  if (p.ext_factor == 0.0f && p.attn_factor == 1.0f) {
    for (int i = 0; i < p.n_rot / 2; ++i) {
      const float ff = p.freq_factors != nullptr ? p.freq_factors[i] : 1.0f;
      const float t = p.freq_scale * (theta / ff);
      cs[2 * i] = std::cos(t);
      cs[2 * i + 1] = std::sin(t);
      theta *= theta_scale;
    }
    return;
  }
  // YaRN. The dims whose wavelength turns beta times over n_ctx_orig positions: floor of the fast one's,
  // ceil of the slow one's, clamped to [0, n_rot - 1].
  const float n_dims = static_cast<float>(p.n_rot), log_base = std::log(p.freq_base);
  auto corr_dim = [&](float rotations) {
    return n_dims * std::log(static_cast<float>(p.n_ctx_orig) / (rotations * 2.0f * static_cast<float>(M_PI))) /
           (2.0f * log_base);
  };
  const float c0 = std::max(0.0f, std::floor(corr_dim(p.beta_fast)));
  const float c1 = std::min(n_dims - 1.0f, std::ceil(corr_dim(p.beta_slow)));
  float mscale = p.attn_factor;
  if (p.ext_factor != 0.0f) mscale *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
  for (int i = 0; i < p.n_rot / 2; ++i) {
    const float ff = p.freq_factors != nullptr ? p.freq_factors[i] : 1.0f;
    const float extrap = theta / ff;
    const float interp = p.freq_scale * extrap;
    float t = interp;
    if (p.ext_factor != 0.0f) {
      const float y = (static_cast<float>(i) - c0) / std::max(0.001f, c1 - c0);
      const float mix = (1.0f - std::min(1.0f, std::max(0.0f, y))) * p.ext_factor;
      t = interp * (1.0f - mix) + extrap * mix;
    }
    cs[2 * i] = std::cos(t) * mscale;
    cs[2 * i + 1] = std::sin(t) * mscale;
    theta *= theta_scale;
  }
}

void ApplyRope(float* x, int n_heads, int head_dim, const RopeParams& p, const float* cs) {
  LLAMAY_CHECK(p.n_rot <= head_dim) << "rope n_rot " << p.n_rot << " > head_dim " << head_dim;
  const int half = p.n_rot / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      // NORM pairs adjacent dims; NEOX pairs dim i with dim i + n_rot/2.
      float* a = p.mode == RopeMode::kNorm ? v + 2 * i : v + i;
      float* b = p.mode == RopeMode::kNorm ? v + 2 * i + 1 : v + i + half;
      const float c = cs[2 * i], s = cs[2 * i + 1];
      const float x0 = *a, x1 = *b;
      *a = x0 * c - x1 * s;
      *b = x0 * s + x1 * c;
    }
  }
}

void Rope(float* x, int n_heads, int head_dim, int64_t pos, const RopeParams& p) {
  float cs[1024];
  LLAMAY_CHECK(p.n_rot <= 1024) << "rope n_rot " << p.n_rot << " too large";
  RopeCache(pos, p, cs);
  ApplyRope(x, n_heads, head_dim, p, cs);
}

void EmbeddingRow(TensorType type, const void* table, int64_t n_embd, int64_t row, float* out) {
  const size_t row_bytes = TypeRowBytes(type, n_embd);
  DequantizeRow(type, static_cast<const uint8_t*>(table) + static_cast<size_t>(row) * row_bytes, out, n_embd);
}

int64_t Argmax(const float* x, int64_t n) {
  LLAMAY_CHECK(n >= 1) << "argmax of an empty row";
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[best] || (std::isnan(x[best]) && !std::isnan(x[i]))) best = i;
  return best;
}

}  // namespace llamay::kernels
