// The model's tensors, bound by name from a GGUF file and checked against the hyperparameters.
//
// Every matrix is [rows][cols] with cols contiguous (GGUF dims[0] == cols): a linear layer y = W x has
// W of [n_out][n_in]. Data points into the mapped GGUF file, which must outlive the Weights.
// Thread-safety: immutable after binding.
#ifndef LLAMAY_MODEL_WEIGHTS_H_
#define LLAMAY_MODEL_WEIGHTS_H_

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "base/tensor_type.h"
#include "gguf/gguf.h"
#include "model/hparams.h"

namespace llamay::model {

struct Tensor {
  TensorType type = TensorType::kF32;
  const uint8_t* data = nullptr;  // nullptr: absent (optional tensors)
  int64_t cols = 0;               // dims[0]
  int64_t rows = 0;               // product of dims[1..]; for experts, dims[1] (the rows of one slab)
  // Experts (3-D tensors, GGUF dims [cols][rows][slabs]): `slabs` matrices of [rows][cols], slab_bytes
  // apart, each a view into the mapped file (nothing is copied at load, so the page cache holds the
  // experts that are used). 0 for an ordinary tensor. A view of part of each slab (gate or up of a fused
  // ffn_gate_up_exps) has fewer rows than slab_bytes holds.
  int64_t slabs = 0;
  size_t slab_bytes = 0;
  explicit operator bool() const { return data != nullptr; }
  const float* f32() const { return reinterpret_cast<const float*>(data); }
  // Expert e's matrix. REQUIRES: 0 <= e < slabs.
  Tensor Slab(int64_t e) const {
    Tensor t = *this;
    t.data = data + static_cast<size_t>(e) * slab_bytes;
    t.slabs = 0;
    t.slab_bytes = 0;
    return t;
  }
};

// One layer: the norm in front of its mixer, the mixer's tensors (attention or Mamba-2: the other kind's
// are absent), and the FFN's (dense or experts, per HParams::ffns; none for FfnKind::kNone).
struct LayerWeights {
  Tensor attn_norm;  // [n_embd] f32: the norm in front of the mixer, whatever its kind
  // Attention mixer.
  Tensor wq, wk, wv, wo;  // [q_dim][n_embd], [kv_dim][n_embd] x2, [n_embd][q_dim]
                          // (attn_output_gate: wq is [n_head][q_h, gate_h][head_dim][n_embd])
  Tensor bq, bk, bv;      // qwen2: [q_dim], [kv_dim] x2, f32
  Tensor bo;              // optional [n_embd] f32 (GGUF attn_output.bias; gpt-oss)
  Tensor sinks;           // gpt-oss: [n_head] f32 (GGUF attn_sinks), HParams::attn_sinks
  Tensor q_norm, k_norm;  // qwen3: [head_dim] f32 (olmoe, qk_norm_full: [q_dim], [kv_dim])
  // Mamba-2 mixer (SsmParams: H heads, C = conv_channels, K = d_conv).
  Tensor ssm_in;        // [in_proj_dim][n_embd]: rows z [d_inner], xBC [C], dt [H]
  Tensor ssm_conv1d;    // [C][K] f32 (GGUF ne0 = K)
  Tensor ssm_conv1d_b;  // [C] f32
  Tensor ssm_dt_b;      // [H] f32
  Tensor ssm_a;         // [H] f32: -exp(A_log) (GGUF [H][1])
  Tensor ssm_d;         // [H] f32 (GGUF [H][1])
  Tensor ssm_norm;      // [d_inner] f32 (GGUF [n_group][d_inner / n_group])
  Tensor ssm_out;       // [n_embd][d_inner]
  // Gated delta net (Qwen3.5; SsmParams read as Hv = n_head, Dv = head_dim(), Hk = n_group, Dk = d_state).
  // Also uses ssm_conv1d [C][K] (no bias), ssm_dt_b [Hv], ssm_a [Hv], ssm_norm [Dv] (one weight shared by
  // every value head) and ssm_out from above.
  Tensor ssm_qkv;              // [C][n_embd] (GGUF attn_qkv): rows q [Hk*Dk], k [Hk*Dk], v [Hv*Dv]
  Tensor ssm_z;                // [d_inner][n_embd] (GGUF attn_gate): the output gate z
  Tensor ssm_beta, ssm_alpha;  // [Hv][n_embd] each
  // SwiGLU FFN (dense), or the mixture of experts (MoeParams; F = n_ff_expert, X = n_expert).
  Tensor ffn_norm;              // [n_embd] f32, for either (qwen35, gpt-oss: GGUF post_attention_norm)
  Tensor w_gate, w_up, w_down;  // dense: [n_ff][n_embd] x2, [n_embd][n_ff]
  Tensor router;                // [X][n_embd] (GGUF ffn_gate_inp)
  // X slabs of [F][n_embd] x2, [n_embd][F] (GGUF ffn_*_exps; gate and up may be views of ffn_gate_up_exps)
  Tensor gate_exps, up_exps, down_exps;
  // MoeParams::biases (gpt-oss), f32: router [X], and per expert gate and up [X][F], down [X][n_embd].
  Tensor router_b, gate_exps_b, up_exps_b, down_exps_b;
  // The shared expert (MoeParams::n_ff_shared = S), a SwiGLU FFN every token runs, and its gate.
  Tensor gate_shexp, up_shexp, down_shexp;  // [S][n_embd] x2, [n_embd][S] (GGUF ffn_*_shexp)
  Tensor gate_inp_shexp;                    // [1][n_embd] (GGUF ffn_gate_inp_shexp), when shared_gated
  // HParams::post_norms (gemma3): RMS norms of the mixer's and the FFN's outputs, before their residual
  // adds (GGUF post_attention_norm, post_ffw_norm); absent otherwise.
  Tensor attn_post_norm, ffn_post_norm;  // [n_embd] f32
};

struct Weights {
  Tensor tok_embd;     // [n_vocab][n_embd]
  Tensor output_norm;  // [n_embd] f32
  Tensor output;       // [n_vocab][n_embd]; == tok_embd when the model ties them
  Tensor rope_freqs;   // optional [n_rot/2] f32: per-frequency divisors (llama 3 rope scaling)
  std::vector<LayerWeights> layers;
};

// Types a matrix may have: those the kernels multiply and dequantise.
bool IsSupportedMatrixType(TensorType t);

Result<Weights> BindWeights(const gguf::File& file, const HParams& hp);

}  // namespace llamay::model

#endif  // LLAMAY_MODEL_WEIGHTS_H_
