// Model hyperparameters read from GGUF metadata, and the KvLayout they imply.
//
// Supported architectures:
//   - llama (Llama 2/3, Mistral, TinyLlama, SmolLM: rope NORM), qwen2 (qkv bias, rope NEOX), qwen3 (per-head
//     q/k RMS norm, rope NEOX): every layer is attention + SwiGLU FFN;
//   - qwen3moe (Qwen3-30B-A3B, Qwen3-Coder-30B-A3B): qwen3's attention, a mixture of experts in every layer
//     (softmax gating, top k renormalised, no shared expert);
//   - olmoe (OLMoE-1B-7B): attention with RMS norms over the whole q and k rows (HParams::qk_norm_full),
//     rope NEOX, a mixture of experts in every layer (softmax gating, top k not renormalised, experts
//     feed_forward_length wide, no shared expert);
//   - qwen2moe (Qwen1.5-MoE, Qwen2-57B-A14B): qwen2's attention, a mixture of experts in every layer
//     (softmax gating, top k not renormalised) and a shared expert gated by sigmoid(ffn_gate_inp_shexp x);
//   - mamba2: every layer is a Mamba-2 mixer, no FFN;
//   - granitehybrid (Granite 4.0-H): per layer a Mamba-2 mixer or GQA attention (head_count_kv is an array
//     with 0 marking a Mamba-2 layer), SwiGLU FFN in every layer (a mixture of experts where expert_count is
//     declared, as in Tiny and Small: softmax, top k renormalised, experts feed_forward_length wide, an
//     ungated shared expert where expert_shared_feed_forward_length is), and Granite's optional scalings;
//   - qwen35 (Qwen3.5-style hybrid): every full_attention_interval-th layer gated attention (q and an output
//     gate packed per head in attn_q, q/k norm, partial NEOX rope), the others gated-delta-net linear
//     attention; SwiGLU FFN (its norm is GGUF post_attention_norm) in every layer;
//   - gemma3: attention in every layer, sliding-window (attention.sliding_window) in all but every
//     sliding_window_pattern-th layer, with their own rope base (rope.freq_base_swa); per-head q/k norm,
//     RMS norms after the mixer and after the FFN (HParams::post_norms), GeGLU FFN, embeddings scaled by
//     sqrt(n_embd);
//   - gpt-oss (gpt-oss-20b, -120b; llama.cpp's LLM_ARCH_OPENAI_MOE): attention with q/k/v/o biases and a
//     learned sink logit per head (attn_sinks), a sliding window (attention.sliding_window, 128) on the
//     even layers (sliding_window_pattern, default 2), NEOX rope with YaRN scaling on every layer; a mixture
//     of experts in every layer (router bias; softmax over the top k router logits; experts with biases and
//     the clamped SwiGLU, MoeParams::act); the FFN's norm is GGUF post_attention_norm.
// An unknown architecture is an Unimplemented error naming it.
//
// A layer is a mixer (attention, Mamba-2 or gated delta net) and an optional FFN, dense or a mixture of
// experts (HParams::mixers, HParams::ffns, MoeParams); mixers and FFNs combine freely, and the forward pass
// is built from that description (model.cc).
// Thread-safety: value types.
#ifndef LLAMAY_MODEL_HPARAMS_H_
#define LLAMAY_MODEL_HPARAMS_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "gguf/gguf.h"
#include "kv/layout.h"

namespace llamay::model {

enum class Arch {
  kLlama,
  kQwen2,
  kQwen2Moe,
  kQwen3,
  kQwen3Moe,
  kMamba2,
  kGraniteHybrid,
  kQwen35,
  kQwen35Moe,
  kGemma3,
  kGptOss,
  kOlmoe
};
// NORM rotates adjacent pairs (x[2i], x[2i+1]); NEOX rotates halves (x[i], x[i + n_rot/2]).
enum class RopeType { kNorm, kNeox };
// The FFN's gated activation: silu(gate) * up (SwiGLU), gelu_tanh(gate) * up (GeGLU, gemma), or gpt-oss's
// clamped SwiGLU: with g = min(gate, 7) and u = clamp(up, -7, 7), g * sigmoid(1.702 g) * (u + 1)
// (moe_block.cc; llama.cpp's swiglu_oai with its fixed alpha and limit).
enum class FfnActivation : uint8_t { kSwiGlu, kGeGlu, kSwiGluOai };
inline constexpr float kSwiGluOaiAlpha = 1.702f;
inline constexpr float kSwiGluOaiLimit = 7.0f;
// What follows a layer's mixer: nothing (mamba2), a dense gated FFN, or a mixture of experts.
enum class FfnKind : uint8_t { kNone, kDense, kMoe };
// How the router's logits become expert weights (llama.cpp's expert gating functions):
//   kSoftmax: softmax over all experts, then the top k of those probabilities (qwen2moe, qwen3moe, olmoe);
//   kSigmoid: sigmoid of each logit, then the top k (deepseek3-style routers);
//   kSoftmaxTopK: the top k logits, then a softmax over only those (gpt-oss).
enum class MoeGating : uint8_t { kSoftmax, kSigmoid, kSoftmaxTopK };
// What mixes information across positions in a layer.
// kGatedDeltaNet: Qwen3.5's linear attention (delta_net_block.cc).
enum class MixerKind : uint8_t { kAttention, kMamba2, kGatedDeltaNet };

// Mamba-2 geometry ({arch}.ssm.* keys). H heads of P = d_inner / H elements, state size N, G groups.
// The gated delta net reads the same keys (llama.cpp's mapping): H = Hv value heads of P = Dv elements,
// N = Dk (the key head dim), G = Hk key heads; its conv channels are q [Hk*Dk] | k [Hk*Dk] | v [Hv*Dv] and
// its folded state [Hv][Dk][Dv] has d_inner * d_state floats, as Mamba-2's [H][P][N].
struct SsmParams {
  MixerKind mixer = MixerKind::kMamba2;  // the recurrent mixer keeping this state (a model has one kind)
  uint32_t d_conv = 0;                   // K: causal conv kernel (ssm.conv_kernel)
  uint32_t d_inner = 0;                  // H * P (ssm.inner_size)
  uint32_t d_state = 0;                  // N (ssm.state_size)
  uint32_t n_head = 0;                   // H (ssm.time_step_rank)
  uint32_t n_group = 0;                  // G (ssm.group_count), divides H
  uint32_t head_dim() const { return n_head ? d_inner / n_head : 0; }
  // Channels of the convolution: x, B and C.
  uint32_t conv_channels() const { return d_inner + 2 * n_group * d_state; }
  // Rows of ssm_in: z [d_inner], xBC [conv_channels], dt [n_head].
  uint32_t in_proj_dim() const { return d_inner + conv_channels() + n_head; }
  // One layer's recurrent state for one sequence, in floats: the conv window [K-1][conv_channels], then the
  // chunked scan's state (kernels/ssm_scan.h or kernels/delta_rule.h: the folded state, a header, the
  // pending tokens' inputs).
  uint64_t conv_state_floats() const { return uint64_t{d_conv - 1} * conv_channels(); }
  uint64_t scan_state_floats() const;
  // The chunked scan's state in parts: the folded state's floats, then (after kChunkHeaderFloats) three
  // arrays of kRecurrentChunk slots, each slot of these many floats (the pending tokens' inputs).
  uint64_t folded_floats() const;
  std::array<uint64_t, 3> pending_slot_floats() const;
  uint64_t state_bytes() const { return 4 * (conv_state_floats() + scan_state_floats()); }
  // The state of the per-token scans before them: the conv window, then the folded state alone. Its
  // snapshots still load, zero-extended (kv::KvLayout::recurrent_legacy_layer_bytes): nothing pending.
  uint64_t legacy_state_bytes() const { return 4 * (conv_state_floats() + uint64_t{d_inner} * d_state); }
};

// A mixture-of-experts FFN ({arch}.expert_* keys). Per token: router logits l = ffn_gate_inp x (+ bias);
// gating gives probabilities p; the k experts with the largest p (+ the selection bias, if any) are chosen,
// ties to the lower index; their weights w are p of the chosen (renormalised to sum 1 when norm_topk,
// times weights_scale when it is not 1); each chosen expert computes down(act(gate x) * up x) from its own
// slab; out = the sum of w_j * expert_j(x) over the chosen, in slot order (largest p first), then + the
// shared expert (times sigmoid(ffn_gate_inp_shexp x) when gated).
inline constexpr uint32_t kMaxExpertsUsed = 64;  // the largest k accepted

struct MoeParams {
  uint32_t n_expert = 0;       // expert_count
  uint32_t n_expert_used = 0;  // k: expert_used_count
  uint32_t n_ff_expert = 0;    // each expert's FFN width: expert_feed_forward_length
  MoeGating gating = MoeGating::kSoftmax;
  bool norm_topk = false;      // renormalise the chosen weights to sum 1
  float weights_scale = 1.0f;  // expert_weights_scale
  uint32_t n_ff_shared = 0;    // the shared expert's width (expert_shared_feed_forward_length); 0: none
  bool shared_gated = false;   // the shared expert's output is scaled by sigmoid(ffn_gate_inp_shexp x)
  uint32_t n_dense_lead = 0;   // leading_dense_block_count: the first layers have a dense FFN instead
  FfnActivation act = FfnActivation::kSwiGlu;  // the experts' activation
  bool biases = false;  // gpt-oss: a router bias and per-expert gate, up and down biases (ffn_*.bias)
};

struct HParams {
  Arch arch = Arch::kLlama;
  std::string arch_name;
  uint32_t n_vocab = 0;
  uint32_t n_embd = 0;
  uint32_t n_layer = 0;  // the layers a token runs through: block_count less nextn_predict_layers
  // Multi-token-prediction blocks appended after the trunk (nextn_predict_layers: Qwen3.5's converted files
  // carry one). They are a draft head, not part of the model's forward pass: never bound nor run.
  uint32_t n_layer_nextn = 0;
  // Attention geometry, shared by every attention layer (0 for a model without attention layers).
  uint32_t n_head = 0;
  uint32_t n_head_kv = 0;
  uint32_t head_dim = 0;  // key/value length per head
  uint32_t n_ff = 0;      // the dense FFN's width; 0 when no layer has a dense FFN
  uint32_t n_ctx_train = 0;
  uint32_t n_rot = 0;  // rotated dims per head (== head_dim unless partial)
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;
  float rope_freq_scale = 1.0f;  // linear scaling: positions multiplied by this
  // YaRN (rope.scaling.type yarn): kernels::RopeParams's fields, as llama.cpp derives them from the file.
  float rope_ext_factor = 0.0f;   // 1 with YaRN, 0 without
  float rope_attn_factor = 1.0f;  // the cos/sin magnitude before YaRN's own ln term
  float yarn_beta_fast = 32.0f;
  float yarn_beta_slow = 1.0f;
  uint32_t n_ctx_orig = 0;  // rope.scaling.original_context_length (default context_length)
  RopeType rope_type = RopeType::kNorm;
  bool use_rope = true;  // granite: {arch}.rope.scaling.finetuned switches rope off when false
  bool qkv_bias = false;
  bool qk_norm = false;
  bool qk_norm_full = false;  // olmoe: q_norm [q_dim] and k_norm [kv_dim] over the whole rows, not per head
  bool attn_output_gate = false;  // qwen35: attn_q rows [q_h, gate_h] per head; output *= sigmoid(gate)
  bool attn_sinks = false;        // gpt-oss: a sink logit per head (attn_sinks) and an output bias

  std::vector<MixerKind> mixers;  // [n_layer]
  std::vector<FfnKind> ffns;      // [n_layer]: what follows each mixer
  MoeParams moe;                  // when any layer's FFN is kMoe
  SsmParams ssm;                  // when any mixer is recurrent (kMamba2 or kGatedDeltaNet)
  FfnActivation ffn_act = FfnActivation::kSwiGlu;
  bool post_norms = false;  // gemma3: mixer and FFN outputs RMS-normed (post_attention_norm, post_ffw_norm)
                            // before their residual adds

  // Sliding-window attention (gemma3, gpt-oss). windows: [n_layer] the attention window of each layer in
  // positions (0: full), or empty when every layer is full. A windowed layer ropes with the _swa base and
  // scale.
  std::vector<uint32_t> windows;
  float rope_theta_swa = 10000.0f;
  float rope_freq_scale_swa = 1.0f;

  // Granite scalings; 0 means absent (llama.cpp's convention).
  float embedding_scale = 0.0f;  // embeddings *= s
  float residual_scale = 0.0f;   // mixer and FFN outputs *= s before their residual add
  float attention_scale = 0.0f;  // kq scale; 0: 1/sqrt(head_dim)
  float logit_scale = 0.0f;      // logits *= 1/s

  uint32_t q_dim() const { return n_head * head_dim; }
  uint32_t kv_dim() const { return n_head_kv * head_dim; }
  bool is_recurrent(uint32_t layer) const { return mixers[layer] != MixerKind::kAttention; }
  uint32_t window(uint32_t layer) const { return windows.empty() ? 0 : windows[layer]; }
  bool has_ffn(uint32_t layer) const { return ffns[layer] != FfnKind::kNone; }
  bool has_moe() const;
  bool has_dense_ffn() const;
  bool has_recurrent() const;
  uint32_t n_attention_layers() const;
};

Result<HParams> ReadHParams(const gguf::File& file);

// Recurrent checkpoints fall on multiples of this many positions unless a caller asks otherwise.
inline constexpr uint32_t kDefaultCheckpointTokens = 256;

// checkpoint_tokens: the spacing of recurrent checkpoints (0: kDefaultCheckpointTokens), rounded up to a
// multiple of page_tokens; ignored (0) for a model without recurrent layers. A windowed attention layer
// gets LayerSpec{kAttention, window}, so kv/ puts it in a windowed group whose pages can be released.
kv::KvLayout MakeKvLayout(const HParams& hp, uint32_t page_tokens, kv::KvPrecision precision,
                          uint32_t checkpoint_tokens = 0);

}  // namespace llamay::model

#endif  // LLAMAY_MODEL_HPARAMS_H_
