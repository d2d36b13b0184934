// The Mamba-2 selective scan as a chunked, parallel scan (the chunk scheme of recurrent_chunk.h).
//
// The recurrence (ggml_ssm_scan with one A per head): H heads of P elements, state size N, G groups; head h
// reads group g = h / (H / G) of B and C. Per token t and head h:
//   dt_h = softplus(dt[t][h] + dt_bias[h]);  dA_t = exp(dt_h * A[h]);  xdt_t[p] = x[t][h][p] * dt_h
//   S_t[p][n] = dA_t * S_{t-1}[p][n] + xdt_t[p] * B_t[n];   y[t][h][p] = sum_n S_t[p][n] * C_t[n] +
//   x[t][h][p] * D[h]
// Unrolled over a chunk from the folded state S (tokens j = 0..L-1 of the chunk):
//   S_j = Gamma_j * S + sum_{s<=j} Dec(j,s) * xdt_s (x) B_s,   Gamma_j = prod_{r<=j} dA_r,  Dec(j,s) =
//   prod_{s<r<=j} dA_r y_j[p] = Gamma_j * (S[p] . C_j) + sum_{s<=j} Dec(j,s) * (B_s . C_j) * xdt_s[p]   (+ x
//   * D)
// so a chunk's outputs are matrix products against one fixed S (P x N by N x L), and the fold is one more
// (P x L by L x N).
//
// THE OPERATIONS (the contract; the SIMD versions repeat them bit for bit; fma is the fused multiply-add,
// rounded once; every other written operation is f32 and rounded once). Per head h and token t, at index j
// of its chunk (j = the pending count before it):
//   v      = dt[t][h], then v = v + dt_bias[h] when dt_bias is given
//   dth    = RefSoftplus(v)
//   dA_j   = RefExp(dth * A[h])
//   xdt_j[p] = x[t][h][p] * dth                                   for every p
//   Dec(j, j) = 1;  Dec(j, s) = Dec(j, s + 1) * dA_{s+1} for s = j-1 down to 0;  Gamma_j = Dec(j, 0) * dA_0
//   coef(s) = Dec(j, s) * FmaDot8(B_s, C_t, N)                     for s = 0..j (B_j is B[t][g])
//   for every p:
//     inter = FmaDot8(S[h][p], C_t, N)
//     intra = 0; for s = 0..j ascending: intra = fma(coef(s), xdt_s[p], intra)
//     y     = fma(Gamma_j, inter, intra); when D is given: y = fma(x[t][h][p], D[h], y)
//   when j == L - 1 (the chunk's last token), fold, for every p and n:
//     acc = Gamma_j * S[h][p][n]; for s = 0..L-1 ascending: acc = fma(Dec(j, s) * xdt_s[p], B_s[n], acc)
//     S[h][p][n] = acc
// FmaDot8(a, b, n): eight lanes from 0; for i = 0..n-1 ascending, lane i % 8 = fma(a[i], b[i], lane);
// then Reduce8 (reference.h).
//
// The state of one layer (floats; SsmScanStateFloats): S [H][P][N] (the folded state, an earlier version's
// whole state), the header (kChunkHeaderFloats; [0] = the pending count m), then the pending tokens' inputs
// xdt [L][H][P], B [L][G][N], dA [L][H] (slots [0, m) valid). After a call of T tokens the pending count is
// (m + T) % L and its slots hold the last tokens since the last fold.
//
// Relation to llama.cpp: ggml_ssm_scan updates the state token by token with expf/logf and its own sums;
// here the same mathematics in another order, with RefExp/RefLog: outputs agree to rounding (relative
// differences of a few ulp times sqrt(N) per term).
//
// Threads: heads are independent; the pool splits them without changing a bit.
// Thread-safety: a state must not be used by two calls at once.
#ifndef LLAMAY_KERNELS_SSM_SCAN_H_
#define LLAMAY_KERNELS_SSM_SCAN_H_

#include <cstdint>

#include "kernels/cpu.h"
#include "kernels/recurrent_chunk.h"
#include "kernels/thread_pool.h"

namespace llamay::kernels {

// Floats in one layer's state (see above): H*P*N + kChunkHeaderFloats + L*(H*P + G*N + H).
int64_t SsmScanStateFloats(int n_heads, int head_dim, int d_state, int n_groups);

// One call: T tokens of ONE sequence, in order, on its state.
struct SsmScanArgs {
  int64_t n_tokens = 0;            // T >= 0
  int n_heads = 0;                 // H
  int head_dim = 0;                // P
  int d_state = 0;                 // N
  int n_groups = 1;                // G, divides H
  float* state = nullptr;          // SsmScanStateFloats floats (above); read and updated
  const float* x = nullptr;        // [T][x_stride]: token t's [H][P] at x + t * x_stride
  int64_t x_stride = 0;            // 0 means H*P
  const float* dt = nullptr;       // [T][dt_stride]: raw (before bias and softplus), [H] per token
  int64_t dt_stride = 0;           // 0 means H
  const float* dt_bias = nullptr;  // [H] or null (no bias)
  const float* a = nullptr;        // [H], GGUF ssm_a (already -exp(A_log))
  const float* b = nullptr;        // [T][bc_stride]: token t's [G][N] at b + t * bc_stride
  const float* c = nullptr;        // [T][bc_stride]: as b
  int64_t bc_stride = 0;           // 0 means G*N
  const float* d = nullptr;        // [H] skip term, or null (the caller applies it)
  float* y = nullptr;              // [T][y_stride]: token t's [H][P]; must not overlap the inputs or state
  int64_t y_stride = 0;            // 0 means H*P
};

void SsmScan(const SsmScanArgs& a, ThreadPool* pool = nullptr, Isa isa = DetectIsa());

// The scalar source of truth: the operations above, token by token, written as plainly as possible.
void RefSsmScan(const SsmScanArgs& a);

}  // namespace llamay::kernels

#endif  // LLAMAY_KERNELS_SSM_SCAN_H_
