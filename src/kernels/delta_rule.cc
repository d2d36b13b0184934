// Dispatch of the chunked gated delta rule (delta_rule.h): argument checks, the split of value heads over
// threads, the shared pending keys and count, and the choice between the AVX-512 or AVX2 (x86-64) or NEON
// (aarch64) per-head kernels and the scalar reference (which gives the same bits).
#include "kernels/delta_rule.h"

#include <algorithm>

#include "base/check.h"
#include "kernels/delta_rule_simd.h"

namespace llamay::kernels {
namespace {

int64_t Stride(int64_t given, int64_t packed) { return given != 0 ? given : packed; }

void CheckArgs(const GatedDeltaRuleArgs& a) {
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

[[maybe_unused]] bool UseSimd(Isa isa) {
#if defined(__x86_64__)
  return UsesAvx2(isa);
#elif defined(__aarch64__)
  return UsesNeon(isa);
#else
  (void)isa;
  return false;
#endif
}

// Value head h of the call, pending count m: the arrays offset to the head, strides made explicit.
DeltaChunkHeadArgs HeadArgs(const GatedDeltaRuleArgs& a, int h, int m) {
  constexpr int L = kRecurrentChunk;
  const int Hk = a.n_k_heads, Hv = a.n_v_heads, Dk = a.k_dim, Dv = a.v_dim, hk = h % Hk;
  float* header = a.state + int64_t{Hv} * Dk * Dv;
  float* pend_k = header + kChunkHeaderFloats;
  float* pend_delta = pend_k + int64_t{L} * Hk * Dk;
  float* pend_eg = pend_delta + int64_t{L} * Hv * Dv;
  DeltaChunkHeadArgs r;
  GatedDeltaRuleArgs& s = r.a;
  s = a;
  s.n_k_heads = 1;
  s.n_v_heads = 1;
  s.state = a.state + int64_t{h} * Dk * Dv;
  s.q = a.q + int64_t{hk} * Dk;
  s.q_stride = Stride(a.q_stride, int64_t{Hk} * Dk);
  s.k = a.k + int64_t{hk} * Dk;
  s.k_stride = Stride(a.k_stride, int64_t{Hk} * Dk);
  s.v = a.v + int64_t{h} * Dv;
  s.v_stride = Stride(a.v_stride, int64_t{Hv} * Dv);
  s.g = a.g + h;
  s.g_stride = Stride(a.g_stride, Hv);
  s.beta = a.beta + h;
  s.beta_stride = Stride(a.beta_stride, Hv);
  s.out = a.out + int64_t{h} * Dv;
  s.out_stride = Stride(a.out_stride, int64_t{Hv} * Dv);
  r.pending = m;
  r.pend_k = pend_k + int64_t{hk} * Dk;
  r.pend_k_stride = int64_t{Hk} * Dk;
  r.pend_delta = pend_delta + int64_t{h} * Dv;
  r.pend_delta_stride = int64_t{Hv} * Dv;
  r.pend_eg = pend_eg + h;
  r.pend_eg_stride = Hv;
  return r;
}

[[maybe_unused]] void RunHead(const DeltaChunkHeadArgs& h, [[maybe_unused]] Isa isa) {
#if defined(__x86_64__)
  if (UsesAvx512(isa)) return avx512::GatedDeltaChunkHead(h);
  avx2::GatedDeltaChunkHead(h);
#elif defined(__aarch64__)
  neon::GatedDeltaChunkHead(h);
#endif
}

}  // namespace

int64_t GatedDeltaStateFloats(int n_k_heads, int n_v_heads, int k_dim, int v_dim) {
  const int64_t Hk = n_k_heads, Hv = n_v_heads, Dk = k_dim, Dv = v_dim;
  return Hv * Dk * Dv + kChunkHeaderFloats + int64_t{kRecurrentChunk} * (Hk * Dk + Hv * Dv + Hv);
}

void GatedDeltaRule(const GatedDeltaRuleArgs& a, ThreadPool* pool, Isa isa) {
  CheckArgs(a);
  if (a.n_tokens == 0) return;
  if (!UseSimd(isa)) return RefGatedDeltaRule(a);
  constexpr int L = kRecurrentChunk;
  const int Hk = a.n_k_heads, Hv = a.n_v_heads, Dk = a.k_dim;
  const int64_t T = a.n_tokens, ks = Stride(a.k_stride, int64_t{Hk} * Dk);
  float* header = a.state + int64_t{Hv} * Dk * a.v_dim;
  // Read once: every head runs with this m, and the header changes only after all of them have finished.
  const int m = ChunkPending(header);
  auto run_head = [&](int64_t h, int) { RunHead(HeadArgs(a, static_cast<int>(h), m), isa); };
  if (pool == nullptr || pool->num_threads() == 1 || Hv == 1) {
    for (int64_t h = 0; h < Hv; ++h) run_head(h, 0);
  } else {
    pool->ParallelFor(Hv, run_head);
  }
  // The pending keys, shared by the value heads of a key head, now that no head reads them: slot s gets
  // the last token of the call that occupied it (token t sits in slot (m + t) % L), if any did.
  float* pend_k = header + kChunkHeaderFloats;
  const int64_t last_slot = (m + T - 1) % L;
  for (int s = 0; s < L; ++s) {
    const int64_t t = T - 1 - (last_slot - s + L) % L;
    if (t < 0) continue;
    std::copy_n(a.k + t * ks, int64_t{Hk} * Dk, pend_k + int64_t{s} * Hk * Dk);
  }
  SetChunkPending(header, static_cast<int>((m + T) % L));
}

}  // namespace llamay::kernels
