#include "model/synthetic_model.h"

#include <cmath>
#include <cstdio>
#include <cstring>

#include "gguf/gguf.h"
#include "kernels/dequant.h"

namespace llamay::model {
namespace {

class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t Next() {  // splitmix64
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1): 24 random bits, exact in f32.
  float Symmetric() { return static_cast<float>(static_cast<int32_t>(Next() >> 40) - (1 << 23)) * 0x1p-23f; }

 private:
  uint64_t s_;
};

class Builder {
 public:
  Builder(const SyntheticSpec& spec) : spec_(spec), rng_(spec.seed) {}

  // A [rows][cols] matrix, uniform with variance gain^2 / cols, stored as spec.type.
  Status Matrix(const std::string& name, uint32_t rows, uint32_t cols, float gain = 1.0f) {
    const float half = gain * std::sqrt(3.0f / static_cast<float>(cols));
    std::vector<float> row(cols);
    const size_t row_bytes = kernels::TypeRowBytes(spec_.type, cols);
    std::vector<uint8_t> data(row_bytes * rows);
    for (uint32_t r = 0; r < rows; ++r) {
      for (auto& v : row) v = rng_.Symmetric() * half;
      kernels::QuantizeRow(spec_.type, row.data(), data.data() + r * row_bytes, cols);
    }
    return w_.AddTensor(name, {cols, rows}, spec_.type, data);
  }
  Status Norm(const std::string& name, uint32_t n) {
    std::vector<float> v(n);
    for (auto& x : v) x = 1.0f + 0.1f * rng_.Symmetric();
    std::vector<uint8_t> b(n * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return w_.AddTensor(name, {n}, TensorType::kF32, b);
  }
  gguf::Writer& writer() { return w_; }

 private:
  const SyntheticSpec& spec_;
  Rng rng_;
  gguf::Writer w_;
};

void AddVocabulary(gguf::Writer& w, const SyntheticSpec& spec) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};  // unknown, control, control
  for (int b = 0; b < 256; ++b) {
    if (spec.ascii_bytes_only && b != '\n' && (b < 0x20 || b > 0x7E)) continue;
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    tokens.push_back(name);
    types.push_back(6);  // byte
  }
  for (uint32_t i = 0; tokens.size() < spec.n_vocab; ++i) {  // filler words
    tokens.push_back("\xE2\x96\x81w" + std::to_string(i));
    types.push_back(1);
  }
  std::vector<float> scores(tokens.size(), 0.0f);
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = -static_cast<float>(i);
  w.SetString("tokenizer.ggml.model", "llama");
  w.SetStringArray("tokenizer.ggml.tokens", tokens);
  w.SetFloat32Array("tokenizer.ggml.scores", scores);
  w.SetInt32Array("tokenizer.ggml.token_type", types);
  w.SetUint32("tokenizer.ggml.unknown_token_id", 0);
  w.SetUint32("tokenizer.ggml.bos_token_id", 1);
  w.SetUint32("tokenizer.ggml.eos_token_id", 2);
  w.SetBool("tokenizer.ggml.add_bos_token", true);
  w.SetBool("tokenizer.ggml.add_eos_token", false);
  w.SetString("tokenizer.chat_template",
              "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
              "'<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
              "{% endif %}");
}

}  // namespace

SyntheticSpec PeerShape(TensorType type) {
  SyntheticSpec s;
  s.name = "llamay-peer-160m";
  s.type = type;
  return s;
}

Result<std::vector<uint8_t>> BuildSyntheticModel(const SyntheticSpec& spec) {
  const uint32_t min_vocab = spec.ascii_bytes_only ? 3 + 96 : 3 + 256;
  if (spec.n_vocab < min_vocab) return InvalidArgumentError("synthetic model: vocab below " + std::to_string(min_vocab));
  if (spec.n_head == 0 || spec.n_embd % spec.n_head != 0 || spec.n_head_kv == 0 || spec.n_head % spec.n_head_kv != 0)
    return InvalidArgumentError("synthetic model: heads must divide the embedding and each other");
  if (!kernels::CanDequantize(spec.type) || spec.n_embd % kernels::TypeBlockSize(spec.type) != 0 ||
      spec.n_ff % kernels::TypeBlockSize(spec.type) != 0)
    return InvalidArgumentError("synthetic model: type " + std::string(TensorTypeName(spec.type)) +
                                " does not fit the shape");
  const uint32_t head_dim = spec.n_embd / spec.n_head;
  Builder b(spec);
  gguf::Writer& w = b.writer();
  w.SetString("general.architecture", "llama");
  w.SetString("general.name", spec.name);
  w.SetUint32("llama.context_length", 4096);
  w.SetUint32("llama.embedding_length", spec.n_embd);
  w.SetUint32("llama.block_count", spec.n_layer);
  w.SetUint32("llama.feed_forward_length", spec.n_ff);
  w.SetUint32("llama.attention.head_count", spec.n_head);
  w.SetUint32("llama.attention.head_count_kv", spec.n_head_kv);
  w.SetUint32("llama.rope.dimension_count", head_dim);
  w.SetFloat32("llama.rope.freq_base", 10000.0f);
  w.SetFloat32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  AddVocabulary(w, spec);
  LLAMAY_RETURN_IF_ERROR(b.Matrix("token_embd.weight", spec.n_vocab, spec.n_embd, std::sqrt(static_cast<float>(spec.n_embd)) * 0.5f));
  LLAMAY_RETURN_IF_ERROR(b.Norm("output_norm.weight", spec.n_embd));
  LLAMAY_RETURN_IF_ERROR(b.Matrix("output.weight", spec.n_vocab, spec.n_embd, 3.0f));
  for (uint32_t i = 0; i < spec.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LLAMAY_RETURN_IF_ERROR(b.Norm(p + "attn_norm.weight", spec.n_embd));
    LLAMAY_RETURN_IF_ERROR(b.Matrix(p + "attn_q.weight", spec.n_head * head_dim, spec.n_embd));
    LLAMAY_RETURN_IF_ERROR(b.Matrix(p + "attn_k.weight", spec.n_head_kv * head_dim, spec.n_embd));
    LLAMAY_RETURN_IF_ERROR(b.Matrix(p + "attn_v.weight", spec.n_head_kv * head_dim, spec.n_embd));
    LLAMAY_RETURN_IF_ERROR(b.Matrix(p + "attn_output.weight", spec.n_embd, spec.n_head * head_dim));
    LLAMAY_RETURN_IF_ERROR(b.Norm(p + "ffn_norm.weight", spec.n_embd));
    LLAMAY_RETURN_IF_ERROR(b.Matrix(p + "ffn_gate.weight", spec.n_ff, spec.n_embd));
    LLAMAY_RETURN_IF_ERROR(b.Matrix(p + "ffn_up.weight", spec.n_ff, spec.n_embd));
    LLAMAY_RETURN_IF_ERROR(b.Matrix(p + "ffn_down.weight", spec.n_embd, spec.n_ff));
  }
  return w.Finish();
}

}  // namespace llamay::model
