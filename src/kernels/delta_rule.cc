// Dispatch of the chunked gated delta rule (delta_rule.h): argument checks, the split of value heads over
// threads, the shared pending keys and count, the choice between the AVX-512 or AVX2 (x86-64) or NEON
// (aarch64) kernels and the scalar reference (which gives the same bits), and the chunk driver those
// kernels share (delta_rule_simd.h says why it is one driver over a table).
#include "kernels/delta_rule.h"

#include <algorithm>
#include <vector>

#include "base/check.h"
#include "kernels/delta_rule_simd.h"
#include "kernels/reference/reference.h"

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

// The SIMD kernels of this level, or null for the scalar reference.
const DeltaRuleKernels* ChooseKernels([[maybe_unused]] Isa isa) {
#if defined(__x86_64__)
  if (UsesAvx512(isa)) return &avx512::kDeltaRuleKernels;
  if (UsesAvx2(isa)) return &avx2::kDeltaRuleKernels;
#elif defined(__aarch64__)
  if (UsesNeon(isa)) return &neon::kDeltaRuleKernels;
#endif
  return nullptr;
}

// One value head h of a call. a: n_k_heads == n_v_heads == 1, state = the head's S [Dk][Dv], q and k offset
// to key head h % Hk, v, g, beta and out offset to head h, every stride explicit (non-zero).
struct DeltaChunkHeadArgs {
  GatedDeltaRuleArgs a;
  int pending = 0;                // m, the pending count before the call (as read once by the dispatcher)
  const float* pend_k = nullptr;  // slot s's key at pend_k + s * pend_k_stride (read only: shared)
  int64_t pend_k_stride = 0;
  float* pend_delta = nullptr;  // slot s's delta at pend_delta + s * pend_delta_stride (this head's)
  int64_t pend_delta_stride = 0;
  float* pend_eg = nullptr;  // slot s's decay at pend_eg[s * pend_eg_stride] (this head's)
  int64_t pend_eg_stride = 0;
};

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

// Grow-only scratch of one thread: the chunk's deltas [L][Dvp], A and Q rows [2L][Dvp], W [Dk][L].
struct Scratch {
  std::vector<float> dbuf, aq, w;
};

// Runs value head h's tokens as delta_rule.h states with kernels k, folds every completed chunk into its S,
// and at the end writes the head's pending delta and eg slots of every slot the call's tokens occupied (the
// last token in each). It reads the pending keys and never writes them: they are shared by other heads.
void RunHead(const DeltaRuleKernels& k, const DeltaChunkHeadArgs& h) {
  constexpr int L = kRecurrentChunk;
  const GatedDeltaRuleArgs& a = h.a;
  const int Dk = a.k_dim, Dv = a.v_dim, m = h.pending;
  const int64_t T = a.n_tokens, Dvp = (Dv + k.pad - 1) / k.pad * k.pad;
  thread_local Scratch scratch;
  if (scratch.dbuf.size() < static_cast<size_t>(L * Dvp)) scratch.dbuf.resize(L * Dvp);
  if (scratch.aq.size() < static_cast<size_t>(2 * L * Dvp)) scratch.aq.resize(2 * L * Dvp);
  if (scratch.w.size() < static_cast<size_t>(int64_t{L} * Dk)) scratch.w.resize(int64_t{L} * Dk);
  float* dbuf = scratch.dbuf.data();
  float* aq = scratch.aq.data();
  float* w = scratch.w.data();

  // Slot s of the chunk: its key, its query, its delta (pending slots are read in place) and its decay.
  const float* kp[L];
  const float* qp[L];
  const float* dp[L];
  const float* x[2 * L];  // the product's vectors: k_j, q_j for the chunk's tokens of this call
  float eg[L];
  for (int s = 0; s < m; ++s) {
    kp[s] = h.pend_k + s * h.pend_k_stride;
    dp[s] = h.pend_delta + s * h.pend_delta_stride;
    eg[s] = h.pend_eg[s * h.pend_eg_stride];
  }
  DeltaChunkCoefs cf;
  float kk[L][L], kq[L][L], dec[L];
  int j0 = m;
  for (int64_t t0 = 0; t0 < T;) {
    const int j1 = static_cast<int>(std::min<int64_t>(L, j0 + (T - t0)));
    for (int j = j0; j < j1; ++j) {
      const int64_t t = t0 + (j - j0);
      kp[j] = a.k + t * a.k_stride;
      qp[j] = a.q + t * a.q_stride;
      dp[j] = dbuf + j * Dvp;
      eg[j] = RefExp(a.g[t * a.g_stride]);
      x[2 * (j - j0)] = kp[j];
      x[2 * (j - j0) + 1] = qp[j];
    }
    k.dots(kp, qp, j0, j1, Dk, kk, kq);
    for (int j = j0; j < j1; ++j) {
      dec[j] = 1.0f;
      for (int s = j - 1; s >= 0; --s) dec[s] = dec[s + 1] * eg[s + 1];
      cf.gamma[j] = dec[0] * eg[0];
      for (int s = 0; s < j; ++s) cf.ck[j][s] = dec[s] * kk[j][s];
      for (int s = 0; s <= j; ++s) cf.cq[j][s] = dec[s] * kq[j][s];
    }
    k.product(a.state, Dv, Dk, x, 2 * (j1 - j0), aq, Dvp);
    k.subst(a, t0, j0, j1, cf, aq, Dvp, dp, dbuf);
    if (j1 == L) {
      // dec holds Dec(L - 1, s) from the last token's coefficients.
      for (int i = 0; i < Dk; ++i)
        for (int s = 0; s < L; ++s) w[i * L + s] = dec[s] * kp[s][i];
      k.fold(a.state, Dv, Dk, w, dp, cf.gamma[L - 1]);
    }
    t0 += j1 - j0;
    j0 = j1 == L ? 0 : j1;
  }

  // This head's pending slots: every slot a token of the call occupied holds that slot's last token.
  const int64_t last_slot = (m + T - 1) % L;
  for (int s = 0; s < L; ++s) {
    if (T - 1 - (last_slot - s + L) % L < 0) continue;
    std::copy_n(dbuf + s * Dvp, Dv, h.pend_delta + s * h.pend_delta_stride);
    h.pend_eg[s * h.pend_eg_stride] = eg[s];
  }
}

}  // namespace

int64_t GatedDeltaStateFloats(int n_k_heads, int n_v_heads, int k_dim, int v_dim) {
  const int64_t Hk = n_k_heads, Hv = n_v_heads, Dk = k_dim, Dv = v_dim;
  return Hv * Dk * Dv + kChunkHeaderFloats + int64_t{kRecurrentChunk} * (Hk * Dk + Hv * Dv + Hv);
}

void GatedDeltaRule(const GatedDeltaRuleArgs& a, ThreadPool* pool, Isa isa) {
  CheckArgs(a);
  if (a.n_tokens == 0) return;
  const DeltaRuleKernels* kernels = ChooseKernels(isa);
  if (kernels == nullptr) return RefGatedDeltaRule(a);
  constexpr int L = kRecurrentChunk;
  const int Hk = a.n_k_heads, Hv = a.n_v_heads, Dk = a.k_dim;
  const int64_t T = a.n_tokens, ks = Stride(a.k_stride, int64_t{Hk} * Dk);
  float* header = a.state + int64_t{Hv} * Dk * a.v_dim;
  // Read once: every head runs with this m, and the header changes only after all of them have finished.
  const int m = ChunkPending(header);
  auto run_head = [&](int64_t h, int) { RunHead(*kernels, HeadArgs(a, static_cast<int>(h), m)); };
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
