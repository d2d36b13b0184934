// Scalar reference of the chunked gated delta rule (delta_rule.h): token by token, head by head, the
// header's operations written out in their order. delta_rule_avx2.cc, _avx512.cc and _neon.cc repeat them.
//
// Each token writes its pending slot j (its key, and per value head its delta and decay) as it goes, so a
// slot always holds the last token that occupied it; the fast paths write the same slots (only at the end
// of a call), which keeps whole states bit-identical, stale slots included.
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/delta_rule.h"
#include "kernels/reference/reference.h"

namespace llamay::kernels {
namespace {

int64_t Stride(int64_t given, int64_t packed) { return given != 0 ? given : packed; }

// Eight lanes from 0; lane i % 8 accumulates a[i] * b[i] by fma in ascending i; then Reduce8.
float FmaDot8(const float* a, const float* b, int n) {
  float lanes[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  for (int i = 0; i < n; ++i) lanes[i % 8] = std::fma(a[i], b[i], lanes[i % 8]);
  return Reduce8(lanes);
}

}  // namespace

void RefGatedDeltaRule(const GatedDeltaRuleArgs& a) {
  constexpr int L = kRecurrentChunk;
  const int Hk = a.n_k_heads, Hv = a.n_v_heads, Dk = a.k_dim, Dv = a.v_dim;
  const int64_t qs = Stride(a.q_stride, int64_t{Hk} * Dk), ks = Stride(a.k_stride, int64_t{Hk} * Dk),
                vs = Stride(a.v_stride, int64_t{Hv} * Dv), os = Stride(a.out_stride, int64_t{Hv} * Dv),
                gs = Stride(a.g_stride, Hv), bs = Stride(a.beta_stride, Hv);
  float* header = a.state + int64_t{Hv} * Dk * Dv;
  float* pend_k = header + kChunkHeaderFloats;         // [L][Hk][Dk]
  float* pend_delta = pend_k + int64_t{L} * Hk * Dk;   // [L][Hv][Dv]
  float* pend_eg = pend_delta + int64_t{L} * Hv * Dv;  // [L][Hv]
  const float scale = 1.0f / std::sqrt(static_cast<float>(Dk));
  int j = ChunkPending(header);
  std::vector<float> dec(L), kk(L), kq(L);
  for (int64_t t = 0; t < a.n_tokens; ++t) {
    for (int h = 0; h < Hv; ++h) {
      const int hk = h % Hk;
      float* S = a.state + int64_t{h} * Dk * Dv;  // S[i][c] = S[i * Dv + c]
      const float* q = a.q + t * qs + int64_t{hk} * Dk;
      const float* kj = a.k + t * ks + int64_t{hk} * Dk;
      const float* v = a.v + t * vs + int64_t{h} * Dv;
      const float b = a.beta[t * bs + h];
      auto key = [&](int s) { return s == j ? kj : pend_k + (int64_t{s} * Hk + hk) * Dk; };
      auto delta = [&](int s) { return pend_delta + (int64_t{s} * Hv + h) * Dv; };
      auto eg = [&](int s) -> float& { return pend_eg[int64_t{s} * Hv + h]; };
      eg(j) = RefExp(a.g[t * gs + h]);
      dec[j] = 1.0f;
      for (int s = j - 1; s >= 0; --s) dec[s] = dec[s + 1] * eg(s + 1);
      const float gamma = dec[0] * eg(0);
      for (int s = 0; s < j; ++s) kk[s] = FmaDot8(key(s), kj, Dk);
      for (int s = 0; s <= j; ++s) kq[s] = FmaDot8(key(s), q, Dk);
      // delta_j is written into its slot column by column: column c of the output needs only column c of
      // the deltas.
      float* dj = delta(j);
      float* o = a.out + t * os + int64_t{h} * Dv;
      for (int c = 0; c < Dv; ++c) {
        float A = 0.0f, Q = 0.0f;
        for (int i = 0; i < Dk; ++i) A = std::fma(S[int64_t{i} * Dv + c], kj[i], A);
        for (int i = 0; i < Dk; ++i) Q = std::fma(S[int64_t{i} * Dv + c], q[i], Q);
        float kv = gamma * A;
        for (int s = 0; s < j; ++s) kv = std::fma(dec[s] * kk[s], delta(s)[c], kv);
        dj[c] = (v[c] - kv) * b;
        float acc = gamma * Q;
        for (int s = 0; s <= j; ++s) acc = std::fma(dec[s] * kq[s], delta(s)[c], acc);
        o[c] = acc * scale;
      }
      if (j == L - 1) {
        for (int i = 0; i < Dk; ++i) {
          for (int c = 0; c < Dv; ++c) {
            float acc = gamma * S[int64_t{i} * Dv + c];
            for (int s = 0; s < L; ++s) acc = std::fma(dec[s] * key(s)[i], delta(s)[c], acc);
            S[int64_t{i} * Dv + c] = acc;
          }
        }
      }
    }
    // The key slot is shared by the value heads of key head hk: written once all of them have run.
    for (int hk = 0; hk < Hk; ++hk)
      for (int i = 0; i < Dk; ++i)
        pend_k[(int64_t{j} * Hk + hk) * Dk + i] = a.k[t * ks + int64_t{hk} * Dk + i];
    j = (j + 1) % L;
    SetChunkPending(header, j);
  }
}

}  // namespace llamay::kernels
