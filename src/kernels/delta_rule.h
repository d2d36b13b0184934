// The gated delta rule (Qwen3-Next / Qwen3.5 linear attention) as a chunked, parallel scan (the chunk
// scheme of recurrent_chunk.h).
//
// The recurrence: Hv value heads, Hk key heads (Hk divides Hv); value head h reads key head h % Hk
// (llama.cpp's pairing: its fused op indexes iv1 % neq1 and its unfused graph uses ggml_repeat, which tiles;
// the GGUF converter, _LinearAttentionVReorderBase._reorder_v_heads, reorders Hugging Face's grouped value
// heads to match). The caller has L2-normalised q and k and applied the sigmoid to beta. Per token t and
// value head h, with S = state[h] ([Dk][Dv], S[i][c]):
//   S = exp(g_t) * S;  kv = S^T k_t;  delta_t = (v_t - kv) * beta_t;  S = S + k_t (x) delta_t;
//   out_t = (S^T q_t) / sqrt(Dk)
// Unrolled over a chunk from the folded state S (tokens j = 0..L-1, eg_j = exp(g_j)):
//   kv_j    = Gamma_j * S^T k_j + sum_{s<j}  Dec(j,s) * (k_s . k_j) * delta_s
//   out_j   = (Gamma_j * S^T q_j + sum_{s<=j} Dec(j,s) * (k_s . q_j) * delta_s) / sqrt(Dk)
//   S_fold  = Gamma_{L-1} * S + sum_s Dec(L-1,s) * k_s (x) delta_s
// with Gamma_j = prod_{r<=j} eg_r, Dec(j,s) = prod_{s<r<=j} eg_r. S^T k_j and S^T q_j for a whole chunk are
// one matrix product (Dv x Dk by Dk x 2L); the deltas follow by forward substitution, L x L per head.
//
// THE OPERATIONS (the contract; the SIMD versions repeat them bit for bit; fma is the fused multiply-add,
// rounded once; every other written operation is f32 and rounded once). Per value head h (key head
// hk = h % Hk) and token t at index j of its chunk (j = the pending count before it):
//   eg_j   = RefExp(g[t][h]);  k_j = k[t][hk];  q = q[t][hk];  b = beta[t][h]
//   Dec(j, j) = 1;  Dec(j, s) = Dec(j, s + 1) * eg_{s+1} for s = j-1 down to 0;  Gamma_j = Dec(j, 0) * eg_0
//   kk(s) = FmaDot8(k_s, k_j, Dk) for s = 0..j-1;   kq(s) = FmaDot8(k_s, q, Dk) for s = 0..j
//   for every column c:
//     A = 0; for i = 0..Dk-1 ascending: A = fma(S[h][i][c], k_j[i], A)
//     Q = 0; for i = 0..Dk-1 ascending: Q = fma(S[h][i][c], q[i], Q)
//     kv = Gamma_j * A;  for s = 0..j-1 ascending: kv = fma(Dec(j, s) * kk(s), delta_s[c], kv)
//     delta_j[c] = (v[t][h][c] - kv) * b
//     o = Gamma_j * Q;   for s = 0..j ascending:   o = fma(Dec(j, s) * kq(s), delta_s[c], o)
//     out[t][h][c] = o * scale,  scale = 1.0f / std::sqrt(float(Dk))
//   when j == L - 1 (the chunk's last token), fold, for every i and c:
//     acc = Gamma_j * S[h][i][c]; for s = 0..L-1 ascending: acc = fma(Dec(j, s) * k_s[i], delta_s[c], acc)
//     S[h][i][c] = acc
// FmaDot8 as in ssm_scan.h: eight lanes, lane i % 8 accumulates by fma in ascending i, then Reduce8.
//
// The state of one layer (floats; GatedDeltaStateFloats): S [Hv][Dk][Dv] (the folded state, an earlier
// version's whole state; the transpose of ggml's per-head layout), the header (kChunkHeaderFloats; [0] = the
// pending count m), then the pending tokens' inputs k [L][Hk][Dk], delta [L][Hv][Dv], eg [L][Hv] (slots
// [0, m) valid). After a call of T tokens the pending count is (m + T) % L.
//
// Relation to llama.cpp: its fused op (ggml_compute_forward_gated_delta_net_one_chunk) runs the same
// recurrence token by token with expf and its own sums, and scales the output rather than q, as here; the
// same mathematics in another order: outputs agree to rounding. ggml stores each head's state transposed,
// s[h][c][i]: transpose each head's matrix to exchange states with llama.cpp.
//
// Threads: value heads are independent; the pool splits them without changing a bit.
// Thread-safety: a state must not be used by two calls at once.
#ifndef LLAMAY_KERNELS_DELTA_RULE_H_
#define LLAMAY_KERNELS_DELTA_RULE_H_

#include <cstdint>

#include "kernels/cpu.h"
#include "kernels/recurrent_chunk.h"
#include "kernels/thread_pool.h"

namespace llamay::kernels {

// Floats in one layer's state: Hv*Dk*Dv + kChunkHeaderFloats + L*(Hk*Dk + Hv*Dv + Hv).
int64_t GatedDeltaStateFloats(int n_k_heads, int n_v_heads, int k_dim, int v_dim);

// One call: T tokens of ONE sequence, in order, on its state.
struct GatedDeltaRuleArgs {
  int64_t n_tokens = 0;      // T >= 0
  int n_k_heads = 0;         // Hk
  int n_v_heads = 0;         // Hv, a multiple of Hk
  int k_dim = 0;             // Dk
  int v_dim = 0;             // Dv
  float* state = nullptr;    // GatedDeltaStateFloats floats (above); read and updated
  const float* q = nullptr;  // [T][q_stride]: token t's [Hk][Dk]
  int64_t q_stride = 0;      // 0 means Hk*Dk
  const float* k = nullptr;  // [T][k_stride]: token t's [Hk][Dk]
  int64_t k_stride = 0;      // 0 means Hk*Dk
  const float* v = nullptr;  // [T][v_stride]: token t's [Hv][Dv]
  int64_t v_stride = 0;      // 0 means Hv*Dv
  const float* g = nullptr;  // [T][g_stride]: token t's [Hv] log decays (the state is multiplied by exp(g))
  int64_t g_stride = 0;      // 0 means Hv
  const float* beta = nullptr;  // [T][beta_stride]: token t's [Hv], already through the sigmoid
  int64_t beta_stride = 0;      // 0 means Hv
  float* out = nullptr;         // [T][out_stride]: token t's [Hv][Dv]; must not overlap inputs or state
  int64_t out_stride = 0;       // 0 means Hv*Dv
};

void GatedDeltaRule(const GatedDeltaRuleArgs& a, ThreadPool* pool = nullptr, Isa isa = DetectIsa());

// The scalar source of truth: the operations above, token by token, written as plainly as possible.
void RefGatedDeltaRule(const GatedDeltaRuleArgs& a);

}  // namespace llamay::kernels

#endif  // LLAMAY_KERNELS_DELTA_RULE_H_
