// Kernels of the recurrent layers of hybrid models besides their scans: the causal depthwise convolution in
// front of a Mamba-2 or gated-delta-net mixer, the grouped gated RMS norm after them, and GeGLU. The scans
// themselves are chunked and live in ssm_scan.h (Mamba-2) and delta_rule.h (the gated delta rule).
//
// Invariants (DESIGN.md section 3):
//   - One call processes a run of n_tokens tokens of ONE sequence, in token order, updating that
//     sequence's state in place. Each token's arithmetic is fixed (the formulas below, f32, each written
//     operation rounded once: the library builds with -ffp-contract=off), so running tokens [0, T) in one
//     call gives bit-identical outputs and final state to running [0, k) then [k, T): a state checkpoint
//     taken between calls is exact.
//   - The AVX2 and NEON paths give the same bits as the scalar references (reference/recurrent_ref.cc,
//     the source of truth). They vectorise across an independent dimension (channels) or keep the fixed
//     lane order of ops.h, and call exp only through RefExp (never libm's expf, which differs between
//     libraries and from any vector version).
//
// Relation to llama.cpp (checked against ggml/src/ggml-cpu/ops.cpp and src/models/{mamba-base,
// delta-net-base,qwen35}.cpp of ggml-org/llama.cpp): the formulas are ggml's; the results differ from
// ggml only by rounding, where noted per kernel.
//
// Thread-safety: pure functions over caller-owned memory; a state must not be updated by two calls at once.
#ifndef LLAMAY_KERNELS_RECURRENT_H_
#define LLAMAY_KERNELS_RECURRENT_H_

#include <cstdint>

#include "kernels/cpu.h"

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
void RefGeGlu(const float* gate, const float* up, int64_t n, float* y);
void RefGroupRmsNormGated(const float* x, const float* z, const float* w, int64_t n_tokens,
                          const GroupNormParams& p, float* y);

}  // namespace llamay::kernels

#endif  // LLAMAY_KERNELS_RECURRENT_H_
