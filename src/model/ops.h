// The numeric operations the forward pass needs, over plain f32 buffers and model Tensors.
//
// This is the seam between model/ and kernels/: the forward pass calls only these. Each output element
// is reduced in a fixed order that depends on nothing but its inputs (not on how many tokens are in the
// batch, nor on threads), which is what makes logits bit-identical across batch composition (DESIGN.md
// section 3).
// Thread-safety: stateless functions.
#ifndef LLAMAY_MODEL_OPS_H_
#define LLAMAY_MODEL_OPS_H_

#include <cstdint>
#include <span>

#include "kv/layout.h"
#include "model/weights.h"

namespace llamay::model::ops {

// y[t][r] = sum_c W[r][c] * x[t][c]   for t < n_tokens, r < W.rows.   x: [n_tokens][W.cols]
void MatMul(const Tensor& w, const float* x, int64_t n_tokens, float* y);
// Row `row` of an embedding-like matrix, dequantised to f32: out[W.cols].
void GetRow(const Tensor& w, int64_t row, float* out);
// out[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i]
void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out);
// Rotates `n_heads` heads of `head_dim` in place at position `pos` (NORM: adjacent pairs, NEOX: halves).
// freq_factors (optional, n_rot/2): divisors of each frequency.
void Rope(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos, float theta_base,
          float freq_scale, bool neox, const float* freq_factors);
// out[i] = silu(gate[i]) * up[i]
void SwiGlu(const float* gate, const float* up, int64_t n, float* out);

// Causal attention of one query position over the first n_pos positions of a paged context.
//   q: [n_head][head_dim];  out: [n_head][head_dim];  pages: data pointers of the context's pages.
// Head h reads KV head h / (n_head / n_kv_head). scale multiplies the scores.
void AttendPaged(const float* q, const kv::KvLayout& layout, const uint8_t* const* pages, uint32_t layer,
                 int64_t n_pos, int64_t n_head, float scale, float* out);

}  // namespace llamay::model::ops

#endif  // LLAMAY_MODEL_OPS_H_
