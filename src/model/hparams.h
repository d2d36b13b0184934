// Model hyperparameters read from GGUF metadata, and the KvLayout they imply.
//
// Supported architectures: llama (Llama 2/3, Mistral, TinyLlama, SmolLM: rope NORM), qwen2 (qkv bias,
// rope NEOX), qwen3 (per-head q/k RMS norm, rope NEOX). An unknown architecture is an Unimplemented error
// naming it.
// Thread-safety: value types.
#ifndef LLAMAY_MODEL_HPARAMS_H_
#define LLAMAY_MODEL_HPARAMS_H_

#include <cstdint>
#include <string>

#include "base/status.h"
#include "gguf/gguf.h"
#include "kv/layout.h"

namespace llamay::model {

enum class Arch { kLlama, kQwen2, kQwen3 };
// NORM rotates adjacent pairs (x[2i], x[2i+1]); NEOX rotates halves (x[i], x[i + n_rot/2]).
enum class RopeType { kNorm, kNeox };

struct HParams {
  Arch arch = Arch::kLlama;
  std::string arch_name;
  uint32_t n_vocab = 0;
  uint32_t n_embd = 0;
  uint32_t n_layer = 0;
  uint32_t n_head = 0;
  uint32_t n_head_kv = 0;
  uint32_t head_dim = 0;  // key/value length per head
  uint32_t n_ff = 0;
  uint32_t n_ctx_train = 0;
  uint32_t n_rot = 0;  // rotated dims per head (== head_dim unless partial)
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;
  float rope_freq_scale = 1.0f;  // linear scaling: positions multiplied by this
  RopeType rope_type = RopeType::kNorm;
  bool qkv_bias = false;
  bool qk_norm = false;

  uint32_t q_dim() const { return n_head * head_dim; }
  uint32_t kv_dim() const { return n_head_kv * head_dim; }
};

Result<HParams> ReadHParams(const gguf::File& file);

kv::KvLayout MakeKvLayout(const HParams& hp, uint32_t page_tokens, kv::KvPrecision precision);

}  // namespace llamay::model

#endif  // LLAMAY_MODEL_HPARAMS_H_
