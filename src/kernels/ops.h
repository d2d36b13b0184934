// Elementwise and row kernels of the forward pass: RMS norm, mul/add, SiLU, GELU (tanh approximation),
// SwiGLU, softmax, rotary position embedding (NORM and NEOX orderings), embedding lookup, argmax.
//
// All work on f32 rows of n elements: x [n] -> y [n]; y may alias x. Functions with an Isa argument have
// AVX2 and NEON versions that give the same bits as the scalar one: their reductions use the fixed lane
// orders of vec_dot.h and exp() is one fixed sequence of f32 operations (RefExp, about 2 ulp), not libm's
// expf.
// Thread-safety: pure functions.
#ifndef LLAMAY_KERNELS_OPS_H_
#define LLAMAY_KERNELS_OPS_H_

#include <cstdint>

#include "base/tensor_type.h"
#include "kernels/cpu.h"

namespace llamay::kernels {

// y = x / sqrt(mean(x^2) + eps) * w; w may be null (no weight). The sum of squares is accumulated in
// double (lane i%8), as ggml accumulates it in double; the scale and the products are f32.
void RmsNorm(const float* x, const float* w, int64_t n, float eps, float* y, Isa isa = DetectIsa());

void Mul(const float* a, const float* b, int64_t n, float* y);  // y = a * b
void Add(const float* a, const float* b, int64_t n, float* y);  // y = a + b
void Scale(const float* x, float s, int64_t n, float* y);       // y = x * s

void Silu(const float* x, int64_t n, float* y, Isa isa = DetectIsa());  // x / (1 + e^-x)
void Gelu(const float* x, int64_t n, float* y, Isa isa = DetectIsa());  // tanh approximation
void SwiGlu(const float* gate, const float* up, int64_t n, float* y, Isa isa = DetectIsa());  // silu(gate)*up

// y = exp(x - max x) / sum. REQUIRES: n >= 1 and at least one x finite.
void Softmax(const float* x, int64_t n, float* y, Isa isa = DetectIsa());

enum class RopeMode {
  kNorm,  // rotates adjacent pairs (x[2i], x[2i+1]) (llama)
  kNeox,  // rotates halves (x[i], x[i + n_rot/2]) (NeoX, Qwen, Gemma, ...)
};

struct RopeParams {
  int n_rot = 0;  // rotated dims (<= head_dim, even); dims beyond it pass through
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;  // linear position scaling: theta *= freq_scale
  RopeMode mode = RopeMode::kNorm;
  const float* freq_factors = nullptr;  // optional [n_rot/2]: theta_i /= freq_factors[i] (Llama 3 scaling)
  // YaRN (ext_factor != 0; llama.cpp sets 1 for rope.scaling.type yarn): dims below the correction range
  // [c0, c1] keep their unscaled angle, dims above it take the freq_scale'd one, a linear ramp between;
  // cos and sin are multiplied by attn_factor * (1 + 0.1 ln(1 / freq_scale)). The range comes from
  // n_ctx_orig (the context the model was trained at), beta_fast and beta_slow (rotations), as ggml's
  // ggml_rope_yarn_corr_dims computes it. With ext_factor 0 and attn_factor 1 nothing changes.
  float ext_factor = 0.0f;
  float attn_factor = 1.0f;
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
  int64_t n_ctx_orig = 0;
};

// The cos/sin pairs of one position, computed as ggml does (theta_i = pos * base^(-2i/n_rot) by repeated
// f32 multiplication, then cosf/sinf, and YaRN's ramp and magnitude when ext_factor != 0): cs [n_rot/2][2].
// Compute once per position, apply to every head.
void RopeCache(int64_t pos, const RopeParams& p, float* cs);
// x: [n_heads][head_dim], rotated in place with the table from RopeCache.
void ApplyRope(float* x, int n_heads, int head_dim, const RopeParams& p, const float* cs);
// RopeCache + ApplyRope for one position.
void Rope(float* x, int n_heads, int head_dim, int64_t pos, const RopeParams& p);

// out [n_embd] = row `row` of table [n_rows][n_embd] of `type` (any type of dequant.h).
void EmbeddingRow(TensorType type, const void* table, int64_t n_embd, int64_t row, float* out);

// Index of the largest value (the first on ties; NaN never wins unless all are NaN). REQUIRES: n >= 1.
int64_t Argmax(const float* x, int64_t n);

}  // namespace llamay::kernels

#endif  // LLAMAY_KERNELS_OPS_H_
