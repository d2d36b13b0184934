// Internal to src/model: the small elementwise steps of Qwen3.5's mixers that kernels/ops.h does not have
// (sigmoid, softplus, the per-head L2 norm), in ggml's formulas.
//
// Invariant: each output element is a fixed sequence of f32 operations on its inputs (sums of squares in
// double, in index order), and exp/log are the kernels' fixed sequences (RefExp, RefSoftplus of
// kernels/reference), not libm's, so the bits depend neither on the C library nor on the CPU, nor on how a
// batch is split. They differ from ggml (expf, logf) by a few ulp.
// Thread-safety: pure functions over caller-owned memory.
#ifndef LLAMAY_MODEL_GATING_H_
#define LLAMAY_MODEL_GATING_H_

#include <cstdint>

namespace llamay::model::internal {

// y[i] = 1 / (1 + exp(-x[i])) (ggml_sigmoid). y may alias x.
void Sigmoid(const float* x, int64_t n, float* y);

// log(1 + exp(x)), or x above 20 (ggml_softplus).
float Softplus(float x);

// x [n_heads][dim]: each head scaled in place by 1 / max(sqrt(sum of squares), eps) (ggml_l2_norm; the sum
// of the f32 squares accumulated in double, in index order).
void L2NormHeads(float* x, int64_t n_heads, int64_t dim, float eps);

}  // namespace llamay::model::internal

#endif  // LLAMAY_MODEL_GATING_H_
