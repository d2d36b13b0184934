// Kernels of the recurrent layers of hybrid models: the causal depthwise convolution in front of a Mamba-2
// or gated-delta-net mixer, the Mamba-2 selective state update (ggml_ssm_scan), the gated delta rule of
// Qwen3-Next / Qwen3.5, the grouped gated RMS norm after them, and GeGLU.
//
// Invariants (DESIGN.md section 3):
//   - One call processes a run of n_tokens tokens of ONE sequence, in token order, updating that
//     sequence's state in place. Each token's arithmetic is fixed (the formulas below, f32, each written
//     operation rounded once: the library builds with -ffp-contract=off), so running tokens [0, T) in one
//     call gives bit-identical outputs and final state to running [0, k) then [k, T): a state checkpoint
//     taken between calls is exact.
//   - The AVX2 paths give the same bits as the scalar references (reference/recurrent_ref.cc, the source
//     of truth). They vectorise across an independent dimension (channels, value columns) or keep the
//     fixed lane order of vec_dot.h, and call exp only through RefExp (never libm's expf, which differs
//     between libraries and from any vector version).
//   - Heads are independent: the ThreadPool argument (may be null) splits heads over threads without
//     changing a bit.
//
// Relation to llama.cpp (checked against ggml/src/ggml-cpu/ops.cpp and src/models/{mamba-base,
// delta-net-base,qwen35}.cpp of ggml-org/llama.cpp): the formulas are ggml's; the results differ from
// ggml only by rounding, where noted per kernel (ggml uses expf/logf and its own SIMD summation orders).
//
// Thread-safety: pure functions over caller-owned memory; a state must not be updated by two calls at once.
#ifndef LLAMAY_KERNELS_RECURRENT_H_
#define LLAMAY_KERNELS_RECURRENT_H_

#include <cstdint>

#include "kernels/cpu.h"
#include "kernels/thread_pool.h"

namespace llamay::kernels {

// ---- Causal depthwise convolution (ggml_ssm_conv + bias + SiLU) -------------------------------------------
// For channel c and token t, with window[0..K) = the K most recent inputs of channel c ending at x[t]
// (window[K-1] = x[t][c], window[K-2] the one before, ... reaching back into conv_state):
//   y[t][c] = silu( (sum over k = 0..K-1, in k order, of weight[c][k] * window[k]) + bias[c] )
// The sum starts from 0.0f; the bias and the SiLU are skipped when bias is null / silu is false. So the
// LAST tap weight[c][K-1] multiplies the newest input, as in ggml_ssm_conv (its weight is the GGUF
// ssm_conv1d.weight, ne0 = K, and tap i0 multiplies column t + i0 of concat(conv_state, x)). The sum is
// ggml's order exactly (unless ggml's compiler contracts it to FMA); the SiLU is x / (1 + RefExp(-x))
// (ggml: expf), within a few ulp of ggml's. Mamba-2 passes the conv1d bias; Qwen3.5 has none.
// After the call conv_state holds the last K-1 inputs of the extended sequence (state then x), oldest first.
struct CausalConv1dArgs {
  int64_t n_tokens = 0;           // T >= 0
  int64_t channels = 0;           // C
  int kernel = 4;                 // K, d_conv: 1 <= K <= kMaxConvKernel
  const float* x = nullptr;       // [T][x_stride], channels [0, C) used
  int64_t x_stride = 0;           // floats between tokens of x; 0 means C
  const float* weight = nullptr;  // [C][K]
  const float* bias = nullptr;    // [C] or null
  bool silu = true;
  float* conv_state = nullptr;  // [K-1][C], oldest first; read and updated
  float* y = nullptr;           // [T][y_stride]; may be x itself (same stride), not otherwise overlapping
  int64_t y_stride = 0;         // 0 means C
};
inline constexpr int kMaxConvKernel = 16;
void CausalConv1d(const CausalConv1dArgs& a, Isa isa = DetectIsa());

// ---- Mamba-2 selective state update (ggml_ssm_scan with one A per head) ------------------------------
// H heads of P elements, state size N, G groups; head h reads group g = h / (H / G) of B and C. Per token
// t and head h (ggml's order, see ggml_compute_forward_ssm_scan_f32):
//   dt_h  = softplus(dt[t][h] + dt_bias[h])         softplus(v) = v > 20 ? v : RefLog(1 + RefExp(v))
//   dA    = RefExp(dt_h * A[h])
//   for each p:  x_dt = x[t][h][p] * dt_h
//                state[h][p][n] = (state[h][p][n] * dA) + (B[t][g][n] * x_dt)       for every n
//                y[t][h][p] = sum over n of state[h][p][n] * C[t][g][n]   (the new state; lane order below)
//                           (+ x[t][h][p] * D[h] when D is given: y = y + x*D, ggml's add(y, mul(x, D)))
// The y sum keeps vec_dot.h's canonical f32 order (RefDotF32): lane n % 8 accumulates, then Reduce8.
// Differences from ggml: expf/logf there vs RefExp/RefLog here (about 2 ulp each, in dt_h and dA), and
// the y summation order (ggml sums in lanes of its own SIMD width with FMA, or sequentially on plain
// builds): relative differences of a few ulp times sqrt(N) in y. ggml applies dt_bias with a separate
// add before the op (here the same f32 add inside it) and D with add/mul after it (here the same two
// operations inside it, when D is non-null). The state layout [H][P][N] is ggml's.
struct SsmScanArgs {
  int64_t n_tokens = 0;            // T >= 0
  int n_heads = 0;                 // H
  int head_dim = 0;                // P
  int d_state = 0;                 // N
  int n_groups = 1;                // G, divides H
  float* state = nullptr;          // [H][P][N]; read and updated
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

// ---- Gated delta rule (Qwen3-Next / Qwen3.5 linear attention) -------------------------------------------
// Hv value heads, Hk key heads (Hk divides Hv); value head h reads key head h % Hk (llama.cpp's pairing:
// its fused op indexes iv1 % neq1 and its unfused graph uses ggml_repeat, which tiles; the GGUF converter,
// _LinearAttentionVReorderBase._reorder_v_heads, reorders Hugging Face's grouped value heads to match). The
// caller has L2-normalised q and k and applied sigmoid to beta. Per token t and value head h, with S =
// state[h] ([Dk][Dv], S[i][j]) and scale = 1/sqrt(Dk):
//   eg = RefExp(g[t][h])
//   S[i][j] = S[i][j] * eg                                                   for all i, j
//   kv[j]    = sum over i = 0..Dk-1, in i order, of S[i][j] * k[i]           (from 0.0f)
//   delta[j] = (v[j] - kv[j]) * beta[t][h]
//   S[i][j] = S[i][j] + k[i] * delta[j]                                      for all i, j
//   out[t][h][j] = (sum over i, in i order, of S[i][j] * q[i]) * scale     (from 0.0f)
// This is the recurrence of ggml_compute_forward_gated_delta_net_one_chunk (the fused op llama.cpp uses;
// it, too, scales the output rather than q; the unfused graph path scales q first, equal up to rounding).
// Differences from ggml: expf there vs RefExp here, and its sums use ggml_vec_dot_f32 (SIMD lanes with FMA,
// or double on plain builds) where these are sequential f32 sums: relative differences of a few ulp
// times sqrt(Dk) per token. Layout: the state here is [Hv][Dk][Dv] (value index contiguous, so the AVX2
// path vectorises across j and keeps each column's sequential order); ggml stores the transpose,
// s[h][j][i] (key index contiguous): transpose each head's matrix to exchange states with llama.cpp.
struct GatedDeltaRuleArgs {
  int64_t n_tokens = 0;      // T >= 0
  int n_k_heads = 0;         // Hk
  int n_v_heads = 0;         // Hv, a multiple of Hk
  int k_dim = 0;             // Dk
  int v_dim = 0;             // Dv
  float* state = nullptr;    // [Hv][Dk][Dv]; read and updated
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

// ---- GeGLU ---------------------------------------------------------------------------------------------
// y[i] = gelu_tanh(gate[i]) * up[i]: bit for bit Gelu (ops.h) followed by Mul. y may alias gate or up.
void GeGlu(const float* gate, const float* up, int64_t n, float* y, Isa isa = DetectIsa());

// ---- Grouped gated RMS norm ----------------------------------------------------------------------------
// x, z, y: [T][H][D]: T tokens of H groups of D elements, each group normalised on its own with RmsNorm of
// ops.h (sum of squares in double, lane i%8; scale = 1/sqrt(mean + eps); (v * scale) * w).
//   kNormThenGate (Qwen3-Next / Qwen3.5 build_norm_gated): y = ((x * scale(x)) * w) * silu(z)
//   kGateThenNorm (Mamba-2: ggml_swiglu_split(z, y), then build_norm over groups of d_inner / n_group):
//                 u = silu(z) * x;  y = (u * scale(u)) * w
// w has D elements (one weight shared by every group: Qwen3.5's ssm_norm [head_v_dim]) or H*D (one per
// element: Mamba-2's ssm_norm [d_inner], group h using w[h*D, (h+1)*D)). silu is SwiGlu of ops.h.
enum class GateOrder { kNormThenGate, kGateThenNorm };
struct GroupNormParams {
  int64_t n_groups = 1;    // H
  int64_t group_size = 0;  // D
  int64_t weight_len = 0;  // D or H*D (the length of w)
  float eps = 1e-6f;
  GateOrder order = GateOrder::kNormThenGate;
};
// y may alias x, not z.
void GroupRmsNormGated(const float* x, const float* z, const float* w, int64_t n_tokens,
                       const GroupNormParams& p, float* y, Isa isa = DetectIsa());

// ---- Scalar sources of truth (reference/recurrent_ref.cc): the formulas above, token by token, head by
// head, written as plainly as possible. Same arguments and requirements as the dispatched entries.
void RefCausalConv1d(const CausalConv1dArgs& a);
void RefSsmScan(const SsmScanArgs& a);
void RefGatedDeltaRule(const GatedDeltaRuleArgs& a);
void RefGeGlu(const float* gate, const float* up, int64_t n, float* y);
void RefGroupRmsNormGated(const float* x, const float* z, const float* w, int64_t n_tokens,
                          const GroupNormParams& p, float* y);

}  // namespace llamay::kernels

#endif  // LLAMAY_KERNELS_RECURRENT_H_
