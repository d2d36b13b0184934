#include "model/hparams.h"

namespace llamay::model {
namespace {

Result<uint32_t> GetU32(const gguf::File& f, const std::string& key, uint32_t lo, uint32_t hi) {
  LLAMAY_ASSIGN_OR_RETURN(int64_t v, f.GetInt(key));
  if (v < lo || v > hi)
    return InvalidArgumentError("model: " + key + " = " + std::to_string(v) + " is out of range [" +
                                std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return static_cast<uint32_t>(v);
}

}  // namespace

Result<HParams> ReadHParams(const gguf::File& f) {
  HParams hp;
  LLAMAY_ASSIGN_OR_RETURN(hp.arch_name, f.GetString("general.architecture"));
  if (hp.arch_name == "llama") {
    hp.arch = Arch::kLlama;
    hp.rope_type = RopeType::kNorm;
  } else if (hp.arch_name == "qwen2") {
    hp.arch = Arch::kQwen2;
    hp.rope_type = RopeType::kNeox;
    hp.qkv_bias = true;
  } else if (hp.arch_name == "qwen3") {
    hp.arch = Arch::kQwen3;
    hp.rope_type = RopeType::kNeox;
    hp.qk_norm = true;
  } else {
    return UnimplementedError("model: architecture '" + hp.arch_name +
                              "' is not supported (supported: llama, qwen2, qwen3)");
  }
  const std::string a = hp.arch_name + ".";
  LLAMAY_ASSIGN_OR_RETURN(hp.n_embd, GetU32(f, a + "embedding_length", 1, 1 << 16));
  LLAMAY_ASSIGN_OR_RETURN(hp.n_layer, GetU32(f, a + "block_count", 1, 4096));
  LLAMAY_ASSIGN_OR_RETURN(hp.n_ff, GetU32(f, a + "feed_forward_length", 1, 1 << 20));
  LLAMAY_ASSIGN_OR_RETURN(hp.n_head, GetU32(f, a + "attention.head_count", 1, 4096));
  hp.n_head_kv = hp.n_head;
  if (f.Has(a + "attention.head_count_kv")) {
    LLAMAY_ASSIGN_OR_RETURN(hp.n_head_kv, GetU32(f, a + "attention.head_count_kv", 1, hp.n_head));
  }
  if (hp.n_head % hp.n_head_kv != 0)
    return InvalidArgumentError("model: head_count " + std::to_string(hp.n_head) +
                                " is not a multiple of head_count_kv " + std::to_string(hp.n_head_kv));
  hp.head_dim = hp.n_embd / hp.n_head;
  if (f.Has(a + "attention.key_length")) {
    LLAMAY_ASSIGN_OR_RETURN(hp.head_dim, GetU32(f, a + "attention.key_length", 1, 1 << 12));
  }
  if (f.Has(a + "attention.value_length")) {
    LLAMAY_ASSIGN_OR_RETURN(uint32_t v, GetU32(f, a + "attention.value_length", 1, 1 << 12));
    if (v != hp.head_dim) return UnimplementedError("model: value_length differs from key_length");
  }
  if (hp.head_dim % 2 != 0) return InvalidArgumentError("model: head dim must be even for rope");
  hp.n_rot = hp.head_dim;
  if (f.Has(a + "rope.dimension_count")) {
    LLAMAY_ASSIGN_OR_RETURN(hp.n_rot, GetU32(f, a + "rope.dimension_count", 2, hp.head_dim));
  }
  hp.n_ctx_train = static_cast<uint32_t>(f.GetIntOr(a + "context_length", 2048));
  hp.rms_eps = static_cast<float>(f.GetFloatOr(a + "attention.layer_norm_rms_epsilon", 1e-5));
  hp.rope_theta = static_cast<float>(f.GetFloatOr(a + "rope.freq_base", 10000.0));
  const std::string scaling = f.GetStringOr(a + "rope.scaling.type", "none");
  if (scaling == "linear") {
    const double factor = f.GetFloatOr(a + "rope.scaling.factor", 1.0);
    if (!(factor > 0)) return InvalidArgumentError("model: rope.scaling.factor must be positive");
    hp.rope_freq_scale = static_cast<float>(1.0 / factor);
  } else if (scaling != "none" && scaling != "") {
    return UnimplementedError("model: rope scaling type '" + scaling + "' is not supported (none, linear)");
  }
  // Vocabulary size: the embedding's row count is authoritative.
  const gguf::TensorInfo* embd = f.FindTensor("token_embd.weight");
  if (embd == nullptr) return InvalidArgumentError("model: token_embd.weight is missing");
  if (embd->dims.size() != 2) return InvalidArgumentError("model: token_embd.weight is not 2-D");
  hp.n_vocab = static_cast<uint32_t>(embd->dims[1]);
  return hp;
}

kv::KvLayout MakeKvLayout(const HParams& hp, uint32_t page_tokens, kv::KvPrecision precision) {
  kv::KvLayout l;
  l.n_layers = hp.n_layer;
  l.n_kv_heads = hp.n_head_kv;
  l.head_dim = hp.head_dim;
  l.page_tokens = page_tokens;
  l.precision = precision;
  return l;
}

}  // namespace llamay::model
