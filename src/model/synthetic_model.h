// Synthetic GGUF models with deterministic weights, built by llamay's own code: the built-in demo model,
// and models of a chosen shape and weight type for benchmarks. The architectures:
//   - llama (the default): the peer shape of ../shared/ref/README.md (vocab 32000, dim 1024, 8 layers,
//     16 heads / 8 KV heads, ffn 2816), or any shape;
//   - granitehybrid (Granite 4.0-H's layer mix): layer l is GQA attention when l % attention_every ==
//     attention_every - 1 and a Mamba-2 mixer otherwise (attention.head_count_kv is an array with 0 for the
//     Mamba-2 layers); a SwiGLU FFN in every layer (with granite_experts: n_expert experts of n_ff_expert,
//     n_expert_used per token, and an ungated shared expert of n_ff_shared where it is not 0); no Granite
//     scalings (all absent), rope on;
//   - qwen3moe (Qwen3-30B-A3B's layer): attention with per-head q/k norms (head_dim may differ from
//     n_embd / n_head), rope NEOX base 1e6, and a mixture of n_expert experts of n_ff_expert, n_expert_used
//     per token, in every layer; the router (ffn_gate_inp) is f32 as in the published files, the experts
//     3-D tensors [n_embd][n_ff_expert][n_expert] (down: [n_ff_expert][n_embd][n_expert]) in `type`;
//   - qwen2moe (Qwen1.5-MoE's layer): qwen3moe's, but attention with q/k/v biases and no q/k norms, and a
//     shared expert of n_ff_shared (ffn_{gate,up,down}_shexp in `type`) gated by ffn_gate_inp_shexp (f32);
//   - olmoe (OLMoE-1B-7B's layer): qwen3moe's, but the q/k norms over the whole rows ([q_dim], [kv_dim]),
//     rope base 10000 and the experts' width in feed_forward_length;
//   - gpt-oss (gpt-oss-20b's layer): attention with q/k/v/o biases and per-head sinks, a sliding window of
//     `window` on the even layers, NEOX rope base 150000 with YaRN (factor 32 over 4096 positions); a
//     mixture of experts in every layer with router and expert biases (f32), no shared expert; the FFN's
//     norm is post_attention_norm;
//   - qwen35 (Qwen3.5's dense hybrid): layer l is gated attention when l % attention_every ==
//     attention_every - 1 (full_attention_interval, llama.cpp's (l + 1) % interval == 0) and a gated delta
//     net otherwise. Attention: attn_q packs q and the output gate per head ([n_head][2][head_dim] rows),
//     per-head q/k norms, partial NEOX rope over n_rot dims (rope.dimension_sections written for llama.cpp),
//     base 1e7. Delta net (the ssm.* keys as llama.cpp maps them: ssm_n_head value heads and ssm_n_group key
//     heads, all of ssm_d_state, so ssm_d_inner = ssm_n_head * ssm_d_state as llama.cpp requires;
//     ssm_d_conv): attn_qkv [q | k | v conv channels][n_embd], attn_gate [d_inner][n_embd], ssm_beta and
//     ssm_alpha [value heads][n_embd], conv kernel [C][d_conv] (no bias), dt bias [Hv], ssm_a [Hv] (=
//     -exp(A_log)) in [-16, -1], one gated-norm weight [head size], ssm_out. A SwiGLU FFN in every layer
//     after post_attention_norm; rms epsilon 1e-6 as the published files.
//
// Weights are uniform with variance 1/fan_in from an integer PRNG (no libm), so the bytes are identical on
// every machine. Matrices use `type` (quantised by kernels::QuantizeRow, round-to-nearest); norms and the
// recurrent mixers' vectors (Mamba-2: conv kernel [C][d_conv], conv bias [C], dt bias [H], A [H] in
// [-16, -1], D [H], group norm [G][d_inner/G]; the delta net's above) are f32. The llama path writes exactly
// the bytes it always wrote (the demo model's weight digest is in golden snapshots).
// Thread-safety: pure functions.
#ifndef LLAMAY_MODEL_SYNTHETIC_MODEL_H_
#define LLAMAY_MODEL_SYNTHETIC_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/tensor_type.h"

namespace llamay::gguf {
class File;
}  // namespace llamay::gguf

namespace llamay::model {

enum class SyntheticArch : uint8_t {
  kLlama,
  kGraniteHybrid,
  kQwen3Moe,
  kQwen2Moe,
  kGptOss,
  kOlmoe,
  kQwen35,
  kQwen35Moe
};

struct SyntheticSpec {
  SyntheticArch arch = SyntheticArch::kLlama;
  std::string name = "llamay-synthetic";
  uint32_t n_vocab = 32000;  // at least 3 + the byte tokens
  uint32_t n_embd = 1024;
  uint32_t n_layer = 8;
  uint32_t n_head = 16;
  uint32_t n_head_kv = 8;
  uint32_t n_ff = 2816;
  TensorType type = TensorType::kQ8_0;
  // Byte tokens for newline and printable ASCII only (the demo model), instead of all 256 bytes.
  bool ascii_bytes_only = false;
  uint64_t seed = 0x11A3A7;
  // granitehybrid, qwen35 and qwen35moe: which layers are attention (see the header comment), and the
  // recurrent geometry (ssm.* keys): d_inner = ssm_n_head * head size, ssm_n_group divides ssm_n_head.
  // Mamba-2: heads, groups and state size; the delta net: value heads, key heads and the key head size.
  uint32_t attention_every = 4;
  uint32_t ssm_d_inner = 2048;
  uint32_t ssm_d_state = 128;
  uint32_t ssm_n_head = 32;
  uint32_t ssm_n_group = 1;
  uint32_t ssm_d_conv = 4;
  // The MoE shapes and qwen35: head_dim (0: n_embd / n_head); the MoE shapes: the experts (qwen2moe,
  // qwen35moe and granitehybrid with experts: the shared one's width too).
  uint32_t head_dim = 0;
  // qwen35 and qwen35moe only: rotated dims per head (0: head_dim / 4, Qwen3.5's partial_rotary_factor 0.25).
  uint32_t n_rot = 0;
  uint32_t n_expert = 8;
  uint32_t n_expert_used = 2;
  uint32_t n_ff_expert = 256;
  uint32_t n_ff_shared = 0;
  // granitehybrid only: the FFNs are mixtures of the experts above (Granite 4.0-H Tiny and Small).
  bool granite_experts = false;
  // gpt-oss only: the sliding window of its even layers.
  uint32_t window = 128;
  // The tokenizer: null, the byte vocabulary (3 control tokens, the byte tokens, then filler words that
  // match no text, so English costs about 7 tokens a word); else this GGUF's tokenizer.ggml.* keys are
  // copied (vocabulary, scores or merges, types, special ids, pre-tokenizer), and n_vocab must be its size.
  // Not owned; read only during BuildSyntheticModel.
  const gguf::File* tokenizer = nullptr;
};

// The peer model's shape (see the header comment) in `type`.
SyntheticSpec PeerShape(TensorType type);

// The hybrid benchmark shape (about 290M parameters, Granite 4.0-H's mix at a small width): granitehybrid,
// vocab 32000, dim 1024, 16 layers of which 3, 7, 11 and 15 are attention (16 heads / 4 KV heads of 64),
// the other 12 Mamba-2 (d_inner 2048, 32 heads of 64, d_state 128, 1 group, d_conv 4), ffn 2816, in
// `type`. Its recurrent state is 12 x 1.03 MiB per sequence.
SyntheticSpec HybridShape(TensorType type);

// Qwen3-30B-A3B's layer shape (dim 2048, 32 / 4 heads of 128, 128 experts of 768, 8 used) with vocab 32000
// and `n_layer` layers (about 1.5B parameters for 8), in `type`: the MoE benchmark shape.
SyntheticSpec Qwen3MoeShape(TensorType type, uint32_t n_layer = 8);

// Granite 4.0-H Tiny's mixture of experts (64 experts of 512, 6 used, a shared expert of 1024) on
// HybridShape's layers, in `type`.
SyntheticSpec HybridMoeShape(TensorType type);

// Qwen1.5-MoE-A2.7B's layer shape (dim 2048, 16 heads of 128, 60 experts of 1408, 4 used, a shared expert of
// 5632) with vocab 32000 and `n_layer` layers, in `type`.
SyntheticSpec Qwen2MoeShape(TensorType type, uint32_t n_layer = 8);

// OLMoE-1B-7B's layer shape (dim 2048, 16 heads of 128, 64 experts of 1024, 8 used) with vocab 32000 and
// `n_layer` layers, in `type`.
SyntheticSpec OlmoeShape(TensorType type, uint32_t n_layer = 8);

// gpt-oss-20b's layer shape (dim 2880, 64 / 8 heads of 64, 32 experts of 2880, 4 used, window 128) with
// vocab 32000 and `n_layer` layers, in `type`.
SyntheticSpec GptOssShape(TensorType type, uint32_t n_layer = 6);

// The Qwen3.5 benchmark shape: qwen35, vocab 32000, dim 1024, `n_layer` layers of which every 4th is gated
// attention and the others gated delta nets, in `type`. The layer is Qwen3.5-0.8B's, whose width is already
// 1024 (its config as we read it: hidden 1024, full_attention_interval 4, partial_rotary_factor 0.25, rope
// theta 1e7, rms eps 1e-6), so nothing is scaled: attention 8 / 2 KV heads of 256 with 64 rotated dims (the
// q projection 2 x 2048 rows with the output gate); delta net 16 key heads and 16 value heads of 128
// (d_inner 2048, conv channels 6144, conv kernel 4); ffn 3584. The larger Qwen3.5 models keep the head sizes
// (256 attention, 128 delta net) and add heads. About 400M parameters for 16 layers; its recurrent state is
// 12 x 1.32 MiB per sequence (the conv window, the folded 16 x 128 x 128 state and the pending chunk).
SyntheticSpec Qwen35Shape(TensorType type, uint32_t n_layer = 16);

// Qwen3.5-35B-A3B's layer shape as we read its config: qwen35moe, vocab 32000, dim 2048, `n_layer` layers of
// which every 4th is gated attention (16 / 2 KV heads of 256, 64 rotated dims) and the others gated delta
// nets (16 key heads and 32 value heads of 128: d_inner 4096), each with 256 experts of 512, 8 used, and a
// sigmoid-gated shared expert of 512, in `type`. About 0.8B parameters a layer, nearly all in the experts.
SyntheticSpec Qwen35MoeShape(TensorType type, uint32_t n_layer = 4);

Result<std::vector<uint8_t>> BuildSyntheticModel(const SyntheticSpec& spec);

}  // namespace llamay::model

#endif  // LLAMAY_MODEL_SYNTHETIC_MODEL_H_
