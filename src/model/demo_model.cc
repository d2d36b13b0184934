#include "model/demo_model.h"

#include <cmath>
#include <cstdio>
#include <cstring>

#include "base/file.h"
#include "base/numeric.h"
#include "gguf/gguf.h"

namespace llamay::model {
namespace {

constexpr uint32_t kVocab = 3 + 96, kEmbd = 256, kLayers = 4, kHeads = 8, kHeadsKv = 4, kFf = 768;
constexpr uint32_t kHeadDim = kEmbd / kHeads;

class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  // splitmix64
  uint64_t Next() {
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

// Uniform with variance 1/fan_in (half-width sqrt(3/fan_in)), times `gain`.
std::vector<float> Matrix(Rng& rng, uint32_t rows, uint32_t cols, float gain = 1.0f) {
  const float half = gain * std::sqrt(3.0f / static_cast<float>(cols));
  std::vector<float> m(size_t{rows} * cols);
  for (auto& v : m) v = rng.Symmetric() * half;
  return m;
}

std::vector<uint8_t> Q8(const std::vector<float>& m) {
  std::vector<uint8_t> out(m.size() / kQ8_0BlockSize * sizeof(BlockQ8_0));
  QuantizeRowQ8_0(m.data(), reinterpret_cast<BlockQ8_0*>(out.data()), m.size());
  return out;
}

std::vector<uint8_t> F32Bytes(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * 4);
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

std::vector<float> Norm(Rng& rng, uint32_t n) {
  std::vector<float> v(n);
  for (auto& x : v) x = 1.0f + 0.1f * rng.Symmetric();
  return v;
}

void AddMatrix(gguf::Writer& w, const std::string& name, Rng& rng, uint32_t rows, uint32_t cols, float gain = 1.0f) {
  Status s = w.AddTensor(name, {cols, rows}, TensorType::kQ8_0, Q8(Matrix(rng, rows, cols, gain)));
  LLAMAY_CHECK(s.ok()) << s.ToString();
}

void AddVector(gguf::Writer& w, const std::string& name, const std::vector<float>& v) {
  Status s = w.AddTensor(name, {static_cast<int64_t>(v.size())}, TensorType::kF32, F32Bytes(v));
  LLAMAY_CHECK(s.ok()) << s.ToString();
}

}  // namespace

std::vector<uint8_t> BuildDemoModel() {
  gguf::Writer w;
  w.SetString("general.architecture", "llama");
  w.SetString("general.name", kDemoModelName);
  w.SetUint32("llama.context_length", 4096);
  w.SetUint32("llama.embedding_length", kEmbd);
  w.SetUint32("llama.block_count", kLayers);
  w.SetUint32("llama.feed_forward_length", kFf);
  w.SetUint32("llama.attention.head_count", kHeads);
  w.SetUint32("llama.attention.head_count_kv", kHeadsKv);
  w.SetUint32("llama.rope.dimension_count", kHeadDim);
  w.SetFloat32("llama.rope.freq_base", 10000.0f);
  w.SetFloat32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.SetUint32("general.file_type", 7);  // mostly Q8_0

  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<float> scores = {0.0f, 0.0f, 0.0f};
  std::vector<int32_t> types = {2, 3, 3};  // unknown, control, control
  // Byte tokens for newline and printable ASCII only, so whatever the model emits is readable text;
  // other input bytes encode as <unk>.
  for (int b = 0; b < 128; ++b) {
    if (b != '\n' && (b < 0x20 || b > 0x7E)) continue;
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    tokens.push_back(name);
    scores.push_back(0.0f);
    types.push_back(6);  // byte
  }
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

  Rng rng(0x11A3A7);
  AddMatrix(w, "token_embd.weight", rng, kVocab, kEmbd, std::sqrt(static_cast<float>(kEmbd)) * 0.5f);
  AddVector(w, "output_norm.weight", Norm(rng, kEmbd));
  AddMatrix(w, "output.weight", rng, kVocab, kEmbd, 3.0f);
  for (uint32_t i = 0; i < kLayers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    AddVector(w, p + "attn_norm.weight", Norm(rng, kEmbd));
    AddMatrix(w, p + "attn_q.weight", rng, kHeads * kHeadDim, kEmbd);
    AddMatrix(w, p + "attn_k.weight", rng, kHeadsKv * kHeadDim, kEmbd);
    AddMatrix(w, p + "attn_v.weight", rng, kHeadsKv * kHeadDim, kEmbd);
    AddMatrix(w, p + "attn_output.weight", rng, kEmbd, kHeads * kHeadDim);
    AddVector(w, p + "ffn_norm.weight", Norm(rng, kEmbd));
    AddMatrix(w, p + "ffn_gate.weight", rng, kFf, kEmbd);
    AddMatrix(w, p + "ffn_up.weight", rng, kFf, kEmbd);
    AddMatrix(w, p + "ffn_down.weight", rng, kEmbd, kFf);
  }
  return w.Finish();
}

Status WriteDemoModel(const std::string& path) {
  const std::vector<uint8_t> bytes = BuildDemoModel();
  return WriteFileAtomic(path, bytes);
}

}  // namespace llamay::model
