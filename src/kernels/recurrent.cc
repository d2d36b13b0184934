// Dispatch of the recurrent kernels: argument checks, the split of heads over threads, and the choice
// between the AVX2 (x86-64) or NEON (aarch64) paths and the scalar references (which give the same bits).
#include "kernels/recurrent.h"

#include <algorithm>

#include "base/check.h"
#include "kernels/ops.h"
#include "kernels/recurrent_avx2.h"
#include "kernels/recurrent_neon.h"

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

void CheckScan(const SsmScanArgs& a) {
  LLAMAY_CHECK(a.n_tokens >= 0 && a.n_heads > 0 && a.head_dim > 0 && a.d_state > 0) << "bad ssm shape";
  LLAMAY_CHECK(a.n_groups > 0 && a.n_heads % a.n_groups == 0)
      << "ssm heads " << a.n_heads << " not a multiple of groups " << a.n_groups;
  const int64_t hp = int64_t{a.n_heads} * a.head_dim;
  LLAMAY_CHECK(Stride(a.x_stride, hp) >= hp && Stride(a.y_stride, hp) >= hp &&
               Stride(a.dt_stride, a.n_heads) >= a.n_heads &&
               Stride(a.bc_stride, int64_t{a.n_groups} * a.d_state) >= int64_t{a.n_groups} * a.d_state)
      << "ssm row stride shorter than a row";
  LLAMAY_CHECK(a.n_tokens == 0 || (a.state != nullptr && a.x != nullptr && a.dt != nullptr &&
                                   a.a != nullptr && a.b != nullptr && a.c != nullptr && a.y != nullptr))
      << "ssm scan lacks an array";
}

void CheckDelta(const GatedDeltaRuleArgs& a) {
  LLAMAY_CHECK(a.n_tokens >= 0 && a.n_k_heads > 0 && a.n_v_heads > 0 && a.k_dim > 0 && a.v_dim > 0)
      << "bad delta-rule shape";
  LLAMAY_CHECK(a.n_v_heads % a.n_k_heads == 0)
      << "value heads " << a.n_v_heads << " not a multiple of key heads " << a.n_k_heads;
  const int64_t qk = int64_t{a.n_k_heads} * a.k_dim, vv = int64_t{a.n_v_heads} * a.v_dim;
  LLAMAY_CHECK(Stride(a.q_stride, qk) >= qk && Stride(a.k_stride, qk) >= qk && Stride(a.v_stride, vv) >= vv &&
               Stride(a.out_stride, vv) >= vv && Stride(a.g_stride, a.n_v_heads) >= a.n_v_heads &&
               Stride(a.beta_stride, a.n_v_heads) >= a.n_v_heads)
      << "delta-rule row stride shorter than a row";
  LLAMAY_CHECK(a.n_tokens == 0 || (a.state != nullptr && a.q != nullptr && a.k != nullptr && a.v != nullptr &&
                                   a.g != nullptr && a.beta != nullptr && a.out != nullptr))
      << "delta rule lacks an array";
}

// The same call restricted to head h: every per-head array offset to that head, strides kept.
SsmScanArgs ScanHead(const SsmScanArgs& a, int h) {
  const int P = a.head_dim, N = a.d_state;
  const int64_t g = h / (a.n_heads / a.n_groups);
  SsmScanArgs s = a;
  s.n_heads = 1;
  s.n_groups = 1;
  s.state = a.state + int64_t{h} * P * N;
  s.x = a.x + int64_t{h} * P;
  s.x_stride = Stride(a.x_stride, int64_t{a.n_heads} * P);
  s.dt = a.dt + h;
  s.dt_stride = Stride(a.dt_stride, a.n_heads);
  s.dt_bias = a.dt_bias != nullptr ? a.dt_bias + h : nullptr;
  s.a = a.a + h;
  s.b = a.b + g * N;
  s.c = a.c + g * N;
  s.bc_stride = Stride(a.bc_stride, int64_t{a.n_groups} * N);
  s.d = a.d != nullptr ? a.d + h : nullptr;
  s.y = a.y + int64_t{h} * P;
  s.y_stride = Stride(a.y_stride, int64_t{a.n_heads} * P);
  return s;
}

GatedDeltaRuleArgs DeltaHead(const GatedDeltaRuleArgs& a, int h) {
  const int Dk = a.k_dim, Dv = a.v_dim, hk = h % a.n_k_heads;
  GatedDeltaRuleArgs s = a;
  s.n_k_heads = 1;
  s.n_v_heads = 1;
  s.state = a.state + int64_t{h} * Dk * Dv;
  s.q = a.q + int64_t{hk} * Dk;
  s.q_stride = Stride(a.q_stride, int64_t{a.n_k_heads} * Dk);
  s.k = a.k + int64_t{hk} * Dk;
  s.k_stride = Stride(a.k_stride, int64_t{a.n_k_heads} * Dk);
  s.v = a.v + int64_t{h} * Dv;
  s.v_stride = Stride(a.v_stride, int64_t{a.n_v_heads} * Dv);
  s.g = a.g + h;
  s.g_stride = Stride(a.g_stride, a.n_v_heads);
  s.beta = a.beta + h;
  s.beta_stride = Stride(a.beta_stride, a.n_v_heads);
  s.out = a.out + int64_t{h} * Dv;
  s.out_stride = Stride(a.out_stride, int64_t{a.n_v_heads} * Dv);
  return s;
}

void RunScan(const SsmScanArgs& a, [[maybe_unused]] Isa isa) {
#if defined(__x86_64__)
  if (UseAvx2(isa)) return avx2::SsmScan(a);
#elif defined(__aarch64__)
  if (UsesNeon(isa)) return neon::SsmScan(a);
#endif
  RefSsmScan(a);
}

// One value head of a call (DeltaHead): the SIMD kernels take one head at a time.
void RunDeltaHead(const GatedDeltaRuleArgs& a, [[maybe_unused]] Isa isa) {
#if defined(__x86_64__)
  if (UseAvx2(isa)) return avx2::GatedDeltaRuleHead(a);
#elif defined(__aarch64__)
  if (UsesNeon(isa)) return neon::GatedDeltaRuleHead(a);
#endif
  RefGatedDeltaRule(a);
}

}  // namespace

void CausalConv1d(const CausalConv1dArgs& a, [[maybe_unused]] Isa isa) {
  CheckConv(a);
  if (a.n_tokens == 0 || a.channels == 0) return;
#if defined(__x86_64__)
  if (UseAvx2(isa)) return avx2::CausalConv1d(a);
#elif defined(__aarch64__)
  if (UsesNeon(isa)) return neon::CausalConv1d(a);
#endif
  RefCausalConv1d(a);
}

void SsmScan(const SsmScanArgs& a, ThreadPool* pool, Isa isa) {
  CheckScan(a);
  if (a.n_tokens == 0) return;
  if (pool == nullptr || pool->num_threads() == 1 || a.n_heads == 1) return RunScan(a, isa);
  pool->ParallelFor(a.n_heads, [&](int64_t h, int) { RunScan(ScanHead(a, static_cast<int>(h)), isa); });
}

void GatedDeltaRule(const GatedDeltaRuleArgs& a, ThreadPool* pool, Isa isa) {
  CheckDelta(a);
  if (a.n_tokens == 0) return;
  auto run_head = [&](int64_t h, int) { RunDeltaHead(DeltaHead(a, static_cast<int>(h)), isa); };
  if (pool == nullptr || pool->num_threads() == 1 || a.n_v_heads == 1) {
    for (int64_t h = 0; h < a.n_v_heads; ++h) run_head(h, 0);
    return;
  }
  pool->ParallelFor(a.n_v_heads, run_head);
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
