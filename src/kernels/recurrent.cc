// Dispatch of the recurrent kernels: argument checks, the choice between the AVX2 (x86-64) or NEON (aarch64)
// paths and the scalar references (which give the same bits), and the convolution's driver that those paths
// share (recurrent_simd.h).
#include "kernels/recurrent.h"

#include <algorithm>

#include "base/check.h"
#include "kernels/ops.h"
#include "kernels/recurrent_simd.h"

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

int64_t Stride(int64_t given, int64_t packed) { return given != 0 ? given : packed; }

void CheckConv(const CausalConv1dArgs& a) {
  LLAMAY_CHECK(a.n_tokens >= 0 && a.channels >= 0) << "bad conv shape";
  LLAMAY_CHECK(a.kernel >= 1 && a.kernel <= kMaxConvKernel) << "conv kernel width " << a.kernel;
  LLAMAY_CHECK(Stride(a.x_stride, a.channels) >= a.channels && Stride(a.y_stride, a.channels) >= a.channels)
      << "conv row stride shorter than a row";
  LLAMAY_CHECK(
      a.n_tokens == 0 || a.channels == 0 ||
      (a.x != nullptr && a.weight != nullptr && a.y != nullptr && (a.kernel == 1 || a.conv_state != nullptr)))
      << "conv lacks an array";
}

// Tokens per pass of the channel blocks.
constexpr int64_t kConvChunk = 32;

// The convolution with an ISA's kernels k. Chunks of tokens, one after the other, the state carrying the
// window between them (a split that changes no bit): a chunk's rows stay in cache while the channel blocks
// walk down them.
[[maybe_unused]] void ConvChunks(const CausalConvKernels& k, const CausalConv1dArgs& a) {
  const int64_t C = a.channels, xs = Stride(a.x_stride, C), ys = Stride(a.y_stride, C);
  void (*conv)(const CausalConv1dArgs&) = k.conv_any;
  if (a.kernel == 4) conv = k.conv4;
  if (a.kernel == 3) conv = k.conv3;
  if (a.kernel == 2) conv = k.conv2;
  for (int64_t t0 = 0; t0 < a.n_tokens; t0 += kConvChunk) {
    CausalConv1dArgs s = a;
    s.n_tokens = std::min(kConvChunk, a.n_tokens - t0);
    s.x = a.x + t0 * xs;
    s.x_stride = xs;
    s.y = a.y + t0 * ys;
    s.y_stride = ys;
    conv(s);
    if (a.silu)
      for (int64_t t = 0; t < s.n_tokens; ++t) k.silu(s.y + t * ys, C, s.y + t * ys);
  }
}

}  // namespace

void CausalConv1d(const CausalConv1dArgs& a, [[maybe_unused]] Isa isa) {
  CheckConv(a);
  if (a.n_tokens == 0 || a.channels == 0) return;
#if defined(__x86_64__)
  if (UseAvx2(isa)) return ConvChunks(avx2::kCausalConvKernels, a);
#elif defined(__aarch64__)
  if (UsesNeon(isa)) return ConvChunks(neon::kCausalConvKernels, a);
#endif
  RefCausalConv1d(a);
}

void GeGlu(const float* gate, const float* up, int64_t n, float* y, Isa isa) {
  // Gelu into a buffer, then the product: y may alias gate or up.
  constexpr int64_t kChunk = 256;
  float g[kChunk];
  for (int64_t i = 0; i < n; i += kChunk) {
    const int64_t m = std::min(kChunk, n - i);
    Gelu(gate + i, m, g, isa);
    Mul(g, up + i, m, y + i);
  }
}

void GroupRmsNormGated(const float* x, const float* z, const float* w, int64_t n_tokens,
                       const GroupNormParams& p, float* y, Isa isa) {
  const int64_t D = p.group_size;
  LLAMAY_CHECK(n_tokens >= 0 && p.n_groups > 0 && D > 0) << "bad grouped norm shape";
  LLAMAY_CHECK(p.weight_len == D || p.weight_len == p.n_groups * D)
      << "norm weight of " << p.weight_len << " elements for groups of " << D << " x " << p.n_groups;
  for (int64_t r = 0; r < n_tokens * p.n_groups; ++r) {
    const float* wr = p.weight_len == D ? w : w + (r % p.n_groups) * D;
    const float* xr = x + r * D;
    const float* zr = z + r * D;
    float* yr = y + r * D;
    if (p.order == GateOrder::kGateThenNorm) {
      SwiGlu(zr, xr, D, yr, isa);  // silu(z) * x; elementwise, so yr may be xr
      RmsNorm(yr, wr, D, p.eps, yr, isa);
    } else {
      RmsNorm(xr, wr, D, p.eps, yr, isa);
      SwiGlu(zr, yr, D, yr, isa);
    }
  }
}

}  // namespace llamay::kernels
