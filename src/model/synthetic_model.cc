#include "model/synthetic_model.h"

#include <algorithm>
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
    return Slabs(name, 0, rows, cols, gain, spec_.type);
  }
  // `slabs` such matrices as one 3-D tensor [cols][rows][slabs] (experts), or (slabs 0) one 2-D matrix.
  Status Slabs(const std::string& name, uint32_t slabs, uint32_t rows, uint32_t cols, float gain,
               TensorType type) {
    const float half = gain * std::sqrt(3.0f / static_cast<float>(cols));
    std::vector<float> row(cols);
    const size_t row_bytes = kernels::TypeRowBytes(type, cols);
    const uint32_t n_rows = rows * std::max(slabs, 1u);
    std::vector<uint8_t> data(row_bytes * n_rows);
    for (uint32_t r = 0; r < n_rows; ++r) {
      for (auto& v : row) v = rng_.Symmetric() * half;
      kernels::QuantizeRow(type, row.data(), data.data() + r * row_bytes, cols);
    }
    if (slabs == 0) return w_.AddTensor(name, {cols, rows}, type, data);
    return w_.AddTensor(name, {cols, rows, slabs}, type, data);
  }
  Status Norm(const std::string& name, uint32_t n) { return Vector(name, {n}, 1.0f, 0.1f); }
  // An f32 tensor of `dims` (GGUF order, innermost first), uniform in [center - half, center + half).
  Status Vector(const std::string& name, std::vector<int64_t> dims, float center, float half) {
    size_t n = 1;
    for (int64_t d : dims) n *= static_cast<size_t>(d);
    std::vector<float> v(n);
    for (auto& x : v) x = center + half * rng_.Symmetric();
    std::vector<uint8_t> b(n * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return w_.AddTensor(name, std::move(dims), TensorType::kF32, b);
  }
  gguf::Writer& writer() { return w_; }

 private:
  const SyntheticSpec& spec_;
  Rng rng_;
  gguf::Writer w_;
};

// Copies `from`'s tokenizer.ggml.* keys (its chat template is not copied: the synthetic models keep their
// own). Every value type the tokenizer reads is copied; another is an error naming the key.
Status CopyTokenizer(const gguf::File& from, gguf::Writer& w) {
  using gguf::ValueType;
  for (std::string_view key : from.Keys()) {
    if (!key.starts_with("tokenizer.ggml.")) continue;
    std::string k(key);
    auto type = from.TypeOf(key);
    if (!type.ok()) return type.status();
    auto unsupported = [&] {
      std::string msg = "synthetic model: cannot copy the tokenizer key ";
      msg.append(k).append(" (").append(gguf::ValueTypeName(*type)).append(")");
      return InvalidArgumentError(msg);
    };
    switch (*type) {
      case ValueType::kString: {
        auto v = from.GetString(key);
        if (!v.ok()) return v.status();
        w.SetString(k, *v);
        break;
      }
      case ValueType::kBool: {
        auto v = from.GetBool(key);
        if (!v.ok()) return v.status();
        w.SetBool(k, *v);
        break;
      }
      case ValueType::kUint8:
      case ValueType::kUint16:
      case ValueType::kUint32:
      case ValueType::kInt8:
      case ValueType::kInt16:
      case ValueType::kInt32: {
        auto v = from.GetInt(key);
        if (!v.ok()) return v.status();
        if (*v < 0) {
          w.SetInt32(k, static_cast<int32_t>(*v));
        } else {
          w.SetUint32(k, static_cast<uint32_t>(*v));
        }
        break;
      }
      case ValueType::kArray: {
        auto elem = from.ArrayElementType(key);
        if (!elem.ok()) return elem.status();
        if (*elem == ValueType::kString) {
          auto v = from.GetStringArray(key);
          if (!v.ok()) return v.status();
          w.SetStringArray(k, std::vector<std::string>(v->begin(), v->end()));
        } else if (*elem == ValueType::kFloat32) {
          auto v = from.GetFloatArray(key);
          if (!v.ok()) return v.status();
          w.SetFloat32Array(k, std::move(*v));
        } else if (*elem == ValueType::kInt32 || *elem == ValueType::kUint32 || *elem == ValueType::kInt8 ||
                   *elem == ValueType::kUint8 || *elem == ValueType::kInt16 || *elem == ValueType::kUint16) {
          auto v = from.GetIntArray(key);
          if (!v.ok()) return v.status();
          w.SetInt32Array(k, std::vector<int32_t>(v->begin(), v->end()));
        } else {
          return unsupported();
        }
        break;
      }
      default:
        return unsupported();
    }
  }
  return Status::Ok();
}

// Writes the tokenizer keys: a copy of spec.tokenizer's, or the byte vocabulary (SyntheticSpec::tokenizer).
Status AddVocabulary(gguf::Writer& w, const SyntheticSpec& spec) {
  const std::string chatml =
      "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
      "'<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
      "{% endif %}";
  if (spec.tokenizer != nullptr) {
    LLAMAY_RETURN_IF_ERROR(CopyTokenizer(*spec.tokenizer, w));
    w.SetString("tokenizer.chat_template", chatml);
    return Status::Ok();
  }
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
  w.SetString("tokenizer.chat_template", chatml);
  return Status::Ok();
}

bool IsQwen35(const SyntheticSpec& spec) {
  return spec.arch == SyntheticArch::kQwen35 || spec.arch == SyntheticArch::kQwen35Moe;
}

bool IsHybrid(const SyntheticSpec& spec) {
  return spec.arch == SyntheticArch::kGraniteHybrid || IsQwen35(spec);
}

bool IsAttention(const SyntheticSpec& spec, uint32_t layer) {
  return !IsHybrid(spec) || layer % spec.attention_every == spec.attention_every - 1;
}

uint32_t HeadDim(const SyntheticSpec& spec) {
  return spec.head_dim != 0 ? spec.head_dim : spec.n_embd / spec.n_head;
}

// Rotated dims per head: qwen35 ropes a quarter of each head unless told otherwise, the others all of it.
uint32_t RotDims(const SyntheticSpec& spec) {
  if (!IsQwen35(spec)) return HeadDim(spec);
  return spec.n_rot != 0 ? spec.n_rot : HeadDim(spec) / 4;
}

Status CheckSpec(const SyntheticSpec& spec) {
  if (spec.tokenizer != nullptr) {
    auto n = spec.tokenizer->ArrayLength("tokenizer.ggml.tokens");
    if (!n.ok())
      return InvalidArgumentError("synthetic model: the tokenizer file has no tokenizer.ggml.tokens");
    if (*n != spec.n_vocab)
      return InvalidArgumentError("synthetic model: the tokenizer has " + std::to_string(*n) +
                                  " tokens, the shape's vocabulary " + std::to_string(spec.n_vocab));
  } else {
    const uint32_t min_vocab = spec.ascii_bytes_only ? 3 + 96 : 3 + 256;
    if (spec.n_vocab < min_vocab)
      return InvalidArgumentError("synthetic model: vocab below " + std::to_string(min_vocab));
  }
  if (spec.n_head == 0 || spec.n_embd % spec.n_head != 0 || spec.n_head_kv == 0 ||
      spec.n_head % spec.n_head_kv != 0)
    return InvalidArgumentError("synthetic model: heads must divide the embedding and each other");
  if (!kernels::CanDequantize(spec.type) || spec.n_embd % kernels::TypeBlockSize(spec.type) != 0 ||
      spec.n_ff % kernels::TypeBlockSize(spec.type) != 0)
    return InvalidArgumentError("synthetic model: type " + std::string(TensorTypeName(spec.type)) +
                                " does not fit the shape");
  if (spec.arch == SyntheticArch::kLlama) return Status::Ok();
  if (spec.arch == SyntheticArch::kGptOss && spec.window == 0)
    return InvalidArgumentError("synthetic model: gpt-oss needs a sliding window");
  if (spec.arch == SyntheticArch::kQwen3Moe || spec.arch == SyntheticArch::kQwen2Moe ||
      spec.arch == SyntheticArch::kGptOss || spec.arch == SyntheticArch::kOlmoe) {
    if ((spec.n_ff_shared != 0) != (spec.arch == SyntheticArch::kQwen2Moe) ||
        spec.n_ff_shared % kernels::TypeBlockSize(spec.type) != 0)
      return InvalidArgumentError(
          "synthetic model: qwen2moe needs a shared expert (a multiple of the type's block), "
          "qwen3moe has none");
    if (spec.n_expert == 0 || spec.n_expert_used == 0 || spec.n_expert_used > spec.n_expert)
      return InvalidArgumentError("synthetic model: 1 <= n_expert_used <= n_expert");
    if (spec.n_ff_expert % kernels::TypeBlockSize(spec.type) != 0 || HeadDim(spec) % 2 != 0 ||
        (spec.n_head * HeadDim(spec)) % kernels::TypeBlockSize(spec.type) != 0)
      return InvalidArgumentError("synthetic model: type " + std::string(TensorTypeName(spec.type)) +
                                  " does not fit the expert or head shape");
    return Status::Ok();
  }
  if (IsQwen35(spec)) {
    const uint32_t head_dim = HeadDim(spec), rot = RotDims(spec);
    if (spec.granite_experts) return InvalidArgumentError("synthetic model: qwen35 has no granite experts");
    if (spec.arch == SyntheticArch::kQwen35Moe &&
        (spec.n_expert == 0 || spec.n_expert_used == 0 || spec.n_expert_used > spec.n_expert ||
         spec.n_ff_shared == 0 || spec.n_ff_expert % kernels::TypeBlockSize(spec.type) != 0 ||
         spec.n_ff_shared % kernels::TypeBlockSize(spec.type) != 0))
      return InvalidArgumentError(
          "synthetic model: qwen35moe needs 1 <= n_expert_used <= n_expert and a shared expert, widths that "
          "fit "
          "the type");
    if (head_dim % 2 != 0 || rot == 0 || rot % 2 != 0 || rot > head_dim)
      return InvalidArgumentError(
          "synthetic model: qwen35 needs an even head_dim and an even number of rotated "
          "dims, at most head_dim");
    if ((spec.n_head * head_dim) % kernels::TypeBlockSize(spec.type) != 0)
      return InvalidArgumentError("synthetic model: type " + std::string(TensorTypeName(spec.type)) +
                                  " does not fit the head shape");
    // llama.cpp takes the value head size from ssm.state_size (the key head size), as every Qwen3.5 has it.
    if (spec.ssm_n_head == 0 || spec.ssm_d_inner != spec.ssm_n_head * spec.ssm_d_state)
      return InvalidArgumentError(
          "synthetic model: qwen35 needs ssm_d_inner = ssm_n_head * ssm_d_state (value "
          "heads as wide as key heads)");
    // The loader reads full_attention_interval in [1, n_layer].
    if (spec.attention_every > spec.n_layer)
      return InvalidArgumentError("synthetic model: qwen35's attention_every exceeds its layers");
  }
  if (spec.granite_experts &&
      (spec.n_expert == 0 || spec.n_expert_used == 0 || spec.n_expert_used > spec.n_expert ||
       spec.n_ff_expert % kernels::TypeBlockSize(spec.type) != 0 ||
       spec.n_ff_shared % kernels::TypeBlockSize(spec.type) != 0))
    return InvalidArgumentError(
        "synthetic model: 1 <= n_expert_used <= n_expert, and the experts' widths must fit the type");
  if (spec.attention_every == 0)
    return InvalidArgumentError("synthetic model: attention_every must be positive");
  if (spec.ssm_n_head == 0 || spec.ssm_d_inner % spec.ssm_n_head != 0 || spec.ssm_n_group == 0 ||
      spec.ssm_n_head % spec.ssm_n_group != 0 || spec.ssm_d_state == 0 || spec.ssm_d_conv < 2)
    return InvalidArgumentError(
        "synthetic model: the ssm heads must divide d_inner and the groups the heads");
  if (spec.ssm_d_inner % kernels::TypeBlockSize(spec.type) != 0)
    return InvalidArgumentError("synthetic model: type " + std::string(TensorTypeName(spec.type)) +
                                " does not fit ssm d_inner " + std::to_string(spec.ssm_d_inner));
  return Status::Ok();
}

// A Mamba-2 mixer's tensors (shapes as weights.cc binds them: [rows][cols]). Values follow Mamba-2's
// initialisation in spirit, without libm: A = -exp(A_log) drawn directly in [-16, -1], dt bias around
// softplus^-1(0.03), D near 1.
Status AddMamba2(Builder& b, const std::string& p, const SyntheticSpec& spec) {
  const uint32_t E = spec.n_embd, DI = spec.ssm_d_inner, H = spec.ssm_n_head, G = spec.ssm_n_group;
  const uint32_t C = DI + 2 * G * spec.ssm_d_state;                      // conv channels: x, B, C
  LLAMAY_RETURN_IF_ERROR(b.Matrix(p + "ssm_in.weight", DI + C + H, E));  // z | xBC | dt
  const float conv_half = std::sqrt(3.0f / static_cast<float>(spec.ssm_d_conv));
  LLAMAY_RETURN_IF_ERROR(b.Vector(p + "ssm_conv1d.weight", {spec.ssm_d_conv, C}, 0.0f, conv_half));  // [C][K]
  LLAMAY_RETURN_IF_ERROR(b.Vector(p + "ssm_conv1d.bias", {C}, 0.0f, 0.1f));
  LLAMAY_RETURN_IF_ERROR(b.Vector(p + "ssm_dt.bias", {H}, -3.5f, 1.0f));
  LLAMAY_RETURN_IF_ERROR(b.Vector(p + "ssm_a", {1, H}, -8.5f, 7.5f));
  LLAMAY_RETURN_IF_ERROR(b.Vector(p + "ssm_d", {1, H}, 1.0f, 0.1f));
  LLAMAY_RETURN_IF_ERROR(b.Vector(p + "ssm_norm.weight", {DI / G, G}, 1.0f, 0.1f));  // [G][DI/G]
  return b.Matrix(p + "ssm_out.weight", E, DI);
}

// A gated delta net's tensors (Qwen3.5's linear attention; shapes as weights.cc binds them, in the order of
// the published files). Hv value heads of Dv = d_inner / Hv, Hk key heads of Dk = ssm_d_state. The decay
// parameters follow Mamba-2's as above (the delta net's A_log and dt bias are initialised alike); the conv
// has no bias.
Status AddDeltaNet(Builder& b, const std::string& p, const SyntheticSpec& spec) {
  const uint32_t E = spec.n_embd, DI = spec.ssm_d_inner, HV = spec.ssm_n_head;
  const uint32_t C = DI + 2 * spec.ssm_n_group * spec.ssm_d_state;  // conv channels: q, k, v
  LLAMAY_RETURN_IF_ERROR(b.Matrix(p + "attn_qkv.weight", C, E));
  LLAMAY_RETURN_IF_ERROR(b.Matrix(p + "attn_gate.weight", DI, E));  // z, the output gate
  const float conv_half = std::sqrt(3.0f / static_cast<float>(spec.ssm_d_conv));
  LLAMAY_RETURN_IF_ERROR(b.Vector(p + "ssm_conv1d.weight", {spec.ssm_d_conv, C}, 0.0f, conv_half));  // [C][K]
  LLAMAY_RETURN_IF_ERROR(b.Vector(p + "ssm_dt.bias", {HV}, -3.5f, 1.0f));
  LLAMAY_RETURN_IF_ERROR(b.Vector(p + "ssm_a", {HV}, -8.5f, 7.5f));
  LLAMAY_RETURN_IF_ERROR(b.Matrix(p + "ssm_beta.weight", HV, E));
  LLAMAY_RETURN_IF_ERROR(b.Matrix(p + "ssm_alpha.weight", HV, E));
  LLAMAY_RETURN_IF_ERROR(b.Norm(p + "ssm_norm.weight", DI / HV));  // one weight shared by the value heads
  return b.Matrix(p + "ssm_out.weight", E, DI);
}

// qwen35's keys beyond the common ones: the layer pattern, rope's sections and the delta net's geometry.
void AddQwen35Keys(gguf::Writer& w, const std::string& a, const SyntheticSpec& spec) {
  w.SetUint32(a + "full_attention_interval", spec.attention_every);
  // llama.cpp's multi-section rope (text position in every section) wants the sections of the rotated pairs:
  // Qwen3.5's [11, 11, 10, 0] for 64 dims; split as evenly, the first sections taking the remainder.
  const int32_t pairs = static_cast<int32_t>(RotDims(spec) / 2);
  std::vector<int32_t> sections = {pairs / 3, pairs / 3, pairs / 3, 0};
  for (int32_t i = 0; i < pairs % 3; ++i) ++sections[static_cast<size_t>(i)];
  w.SetInt32Array(a + "rope.dimension_sections", sections);
}

}  // namespace

SyntheticSpec PeerShape(TensorType type) {
  SyntheticSpec s;
  s.name = "llamay-peer-160m";
  s.type = type;
  return s;
}

SyntheticSpec HybridShape(TensorType type) {
  SyntheticSpec s;
  s.arch = SyntheticArch::kGraniteHybrid;
  s.name = "llamay-hybrid-290m";
  s.n_layer = 16;
  s.n_head = 16;
  s.n_head_kv = 4;
  s.type = type;
  return s;
}

SyntheticSpec HybridMoeShape(TensorType type) {
  SyntheticSpec s = HybridShape(type);
  s.name = "llamay-hybrid-moe";
  s.granite_experts = true;
  s.n_expert = 64;
  s.n_expert_used = 6;
  s.n_ff_expert = 512;
  s.n_ff_shared = 1024;
  return s;
}

SyntheticSpec Qwen3MoeShape(TensorType type, uint32_t n_layer) {
  SyntheticSpec s;
  s.arch = SyntheticArch::kQwen3Moe;
  s.name = "llamay-qwen3moe-a3b-shape";
  s.n_embd = 2048;
  s.n_layer = n_layer;
  s.n_head = 32;
  s.n_head_kv = 4;
  s.head_dim = 128;
  s.n_ff = 6144;
  s.n_expert = 128;
  s.n_expert_used = 8;
  s.n_ff_expert = 768;
  s.type = type;
  return s;
}

SyntheticSpec OlmoeShape(TensorType type, uint32_t n_layer) {
  SyntheticSpec s = Qwen3MoeShape(type, n_layer);
  s.arch = SyntheticArch::kOlmoe;
  s.name = "llamay-olmoe-1b-7b-shape";
  s.n_head = 16;
  s.n_head_kv = 16;
  s.head_dim = 128;
  s.n_expert = 64;
  s.n_expert_used = 8;
  s.n_ff_expert = 1024;
  return s;
}

SyntheticSpec GptOssShape(TensorType type, uint32_t n_layer) {
  SyntheticSpec s;
  s.arch = SyntheticArch::kGptOss;
  s.name = "llamay-gpt-oss-20b-shape";
  s.n_embd = 2880;
  s.n_layer = n_layer;
  s.n_head = 64;
  s.n_head_kv = 8;
  s.head_dim = 64;
  s.n_ff = 2880;
  s.n_expert = 32;
  s.n_expert_used = 4;
  s.n_ff_expert = 2880;
  s.window = 128;
  s.type = type;
  return s;
}

SyntheticSpec Qwen35Shape(TensorType type, uint32_t n_layer) {
  SyntheticSpec s;
  s.arch = SyntheticArch::kQwen35;
  s.name = "llamay-qwen35-0.8b-shape";
  s.n_layer = n_layer;
  s.n_head = 8;
  s.n_head_kv = 2;
  s.head_dim = 256;  // n_rot 0: 64 rotated
  s.n_ff = 3584;
  s.attention_every = 4;
  s.ssm_d_inner = 16 * 128;
  s.ssm_d_state = 128;
  s.ssm_n_head = 16;
  s.ssm_n_group = 16;
  s.ssm_d_conv = 4;
  s.type = type;
  return s;
}

SyntheticSpec Qwen35MoeShape(TensorType type, uint32_t n_layer) {
  SyntheticSpec s = Qwen35Shape(type, n_layer);
  s.arch = SyntheticArch::kQwen35Moe;
  s.name = "llamay-qwen35moe-a3b-shape";
  s.n_embd = 2048;
  s.n_head = 16;
  s.n_head_kv = 2;
  s.head_dim = 256;
  s.n_ff = 0;
  s.ssm_d_inner = 32 * 128;
  s.ssm_n_head = 32;
  s.ssm_n_group = 16;
  s.n_expert = 256;
  s.n_expert_used = 8;
  s.n_ff_expert = 512;
  s.n_ff_shared = 512;
  return s;
}

SyntheticSpec Qwen2MoeShape(TensorType type, uint32_t n_layer) {
  SyntheticSpec s = Qwen3MoeShape(type, n_layer);
  s.arch = SyntheticArch::kQwen2Moe;
  s.name = "llamay-qwen2moe-a2.7b-shape";
  s.n_head = 16;
  s.n_head_kv = 16;
  s.head_dim = 128;
  s.n_expert = 60;
  s.n_expert_used = 4;
  s.n_ff_expert = 1408;
  s.n_ff_shared = 5632;
  return s;
}

Result<std::vector<uint8_t>> BuildSyntheticModel(const SyntheticSpec& spec) {
  LLAMAY_RETURN_IF_ERROR(CheckSpec(spec));
  const bool hybrid = spec.arch == SyntheticArch::kGraniteHybrid, qwen35 = IsQwen35(spec);
  const bool qwen2moe = spec.arch == SyntheticArch::kQwen2Moe,
             qwen35moe = spec.arch == SyntheticArch::kQwen35Moe;
  const bool granite_moe = hybrid && spec.granite_experts;
  const bool gpt_oss = spec.arch == SyntheticArch::kGptOss, olmoe = spec.arch == SyntheticArch::kOlmoe;
  const bool moe =
      spec.arch == SyntheticArch::kQwen3Moe || qwen2moe || qwen35moe || granite_moe || gpt_oss || olmoe;
  const std::string arch = hybrid      ? "granitehybrid"
                           : qwen35moe ? "qwen35moe"
                           : qwen35    ? "qwen35"
                           : qwen2moe  ? "qwen2moe"
                           : gpt_oss   ? "gpt-oss"
                           : olmoe     ? "olmoe"
                           : moe       ? "qwen3moe"
                                       : "llama";
  const std::string a = arch + ".";
  const uint32_t head_dim = HeadDim(spec);
  Builder b(spec);
  gguf::Writer& w = b.writer();
  w.SetString("general.architecture", arch);
  w.SetString("general.name", spec.name);
  w.SetUint32(a + "context_length", hybrid ? 32768 : gpt_oss ? 131072 : qwen35 ? 262144 : 4096);
  w.SetUint32(a + "embedding_length", spec.n_embd);
  w.SetUint32(a + "block_count", spec.n_layer);
  // qwen35moe has no dense FFN and declares none.
  if (const uint32_t ff = granite_moe || olmoe ? spec.n_ff_expert : spec.n_ff; ff != 0)
    w.SetUint32(a + "feed_forward_length", ff);
  w.SetUint32(a + "attention.head_count", spec.n_head);
  if (hybrid) {  // per layer, 0 marking a Mamba-2 layer
    std::vector<int32_t> kv(spec.n_layer);
    for (uint32_t i = 0; i < spec.n_layer; ++i)
      kv[i] = IsAttention(spec, i) ? static_cast<int32_t>(spec.n_head_kv) : 0;
    w.SetInt32Array(a + "attention.head_count_kv", kv);
  } else {
    w.SetUint32(a + "attention.head_count_kv", spec.n_head_kv);
  }
  w.SetUint32(a + "rope.dimension_count", RotDims(spec));
  w.SetFloat32(a + "rope.freq_base", gpt_oss                    ? 150000.0f
                                     : qwen35                   ? 1e7f
                                     : moe && !hybrid && !olmoe ? 1e6f
                                                                : 10000.0f);
  if (gpt_oss) {
    w.SetString(a + "rope.scaling.type", "yarn");
    w.SetFloat32(a + "rope.scaling.factor", 32.0f);
    w.SetUint32(a + "rope.scaling.original_context_length", 4096);
    w.SetUint32(a + "attention.sliding_window", spec.window);
  }
  if ((moe && !hybrid) || qwen35) {
    w.SetUint32(a + "attention.key_length", head_dim);
    w.SetUint32(a + "attention.value_length", head_dim);
  }
  if (moe) {
    w.SetUint32(a + "expert_count", spec.n_expert);
    w.SetUint32(a + "expert_used_count", spec.n_expert_used);
    if (!granite_moe && !olmoe) w.SetUint32(a + "expert_feed_forward_length", spec.n_ff_expert);
    if (spec.n_ff_shared != 0) w.SetUint32(a + "expert_shared_feed_forward_length", spec.n_ff_shared);
  }
  w.SetFloat32(a + "attention.layer_norm_rms_epsilon", qwen35 ? 1e-6f : 1e-5f);
  if (qwen35) AddQwen35Keys(w, a, spec);
  if (hybrid || qwen35) {
    w.SetUint32(a + "ssm.conv_kernel", spec.ssm_d_conv);
    w.SetUint32(a + "ssm.inner_size", spec.ssm_d_inner);
    w.SetUint32(a + "ssm.state_size", spec.ssm_d_state);
    w.SetUint32(a + "ssm.time_step_rank", spec.ssm_n_head);
    w.SetUint32(a + "ssm.group_count", spec.ssm_n_group);
  }
  LLAMAY_RETURN_IF_ERROR(AddVocabulary(w, spec));
  LLAMAY_RETURN_IF_ERROR(b.Matrix("token_embd.weight", spec.n_vocab, spec.n_embd,
                                  std::sqrt(static_cast<float>(spec.n_embd)) * 0.5f));
  LLAMAY_RETURN_IF_ERROR(b.Norm("output_norm.weight", spec.n_embd));
  LLAMAY_RETURN_IF_ERROR(b.Matrix("output.weight", spec.n_vocab, spec.n_embd, 3.0f));
  for (uint32_t i = 0; i < spec.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LLAMAY_RETURN_IF_ERROR(b.Norm(p + "attn_norm.weight", spec.n_embd));
    if (IsAttention(spec, i)) {
      // qwen35: [q_h, gate_h] per head.
      LLAMAY_RETURN_IF_ERROR(
          b.Matrix(p + "attn_q.weight", (qwen35 ? 2 : 1) * spec.n_head * head_dim, spec.n_embd));
      LLAMAY_RETURN_IF_ERROR(b.Matrix(p + "attn_k.weight", spec.n_head_kv * head_dim, spec.n_embd));
      LLAMAY_RETURN_IF_ERROR(b.Matrix(p + "attn_v.weight", spec.n_head_kv * head_dim, spec.n_embd));
      LLAMAY_RETURN_IF_ERROR(b.Matrix(p + "attn_output.weight", spec.n_embd, spec.n_head * head_dim));
      if (qwen2moe || gpt_oss) {
        LLAMAY_RETURN_IF_ERROR(b.Vector(p + "attn_q.bias", {spec.n_head * head_dim}, 0.0f, 0.1f));
        LLAMAY_RETURN_IF_ERROR(b.Vector(p + "attn_k.bias", {spec.n_head_kv * head_dim}, 0.0f, 0.1f));
        LLAMAY_RETURN_IF_ERROR(b.Vector(p + "attn_v.bias", {spec.n_head_kv * head_dim}, 0.0f, 0.1f));
        if (gpt_oss) {
          LLAMAY_RETURN_IF_ERROR(b.Vector(p + "attn_output.bias", {spec.n_embd}, 0.0f, 0.1f));
          // Sinks around the scores' scale, so that they take a real share of the softmax.
          LLAMAY_RETURN_IF_ERROR(b.Vector(p + "attn_sinks.weight", {spec.n_head}, 0.0f, 2.0f));
        }
      } else if ((moe && !hybrid) || qwen35) {
        LLAMAY_RETURN_IF_ERROR(b.Norm(p + "attn_q_norm.weight", olmoe ? spec.n_head * head_dim : head_dim));
        LLAMAY_RETURN_IF_ERROR(
            b.Norm(p + "attn_k_norm.weight", olmoe ? spec.n_head_kv * head_dim : head_dim));
      }
    } else {
      LLAMAY_RETURN_IF_ERROR(qwen35 ? AddDeltaNet(b, p, spec) : AddMamba2(b, p, spec));
    }
    LLAMAY_RETURN_IF_ERROR(
        b.Norm(p + (gpt_oss || qwen35 ? "post_attention_norm.weight" : "ffn_norm.weight"), spec.n_embd));
    if (moe) {
      // The router's gain spreads its logits (std ~2) so that the choice of experts is clear-cut.
      LLAMAY_RETURN_IF_ERROR(
          b.Slabs(p + "ffn_gate_inp.weight", 0, spec.n_expert, spec.n_embd, 2.0f, TensorType::kF32));
      const uint32_t X = spec.n_expert, F = spec.n_ff_expert, E = spec.n_embd;
      LLAMAY_RETURN_IF_ERROR(b.Slabs(p + "ffn_gate_exps.weight", X, F, E, 1.0f, spec.type));
      LLAMAY_RETURN_IF_ERROR(b.Slabs(p + "ffn_up_exps.weight", X, F, E, 1.0f, spec.type));
      LLAMAY_RETURN_IF_ERROR(b.Slabs(p + "ffn_down_exps.weight", X, E, F, 1.0f, spec.type));
      if (gpt_oss) {
        LLAMAY_RETURN_IF_ERROR(b.Vector(p + "ffn_gate_inp.bias", {X}, 0.0f, 0.5f));
        LLAMAY_RETURN_IF_ERROR(b.Vector(p + "ffn_gate_exps.bias", {F, X}, 0.0f, 0.5f));
        LLAMAY_RETURN_IF_ERROR(b.Vector(p + "ffn_up_exps.bias", {F, X}, 0.0f, 0.5f));
        LLAMAY_RETURN_IF_ERROR(b.Vector(p + "ffn_down_exps.bias", {E, X}, 0.0f, 0.1f));
      }
      if (spec.n_ff_shared != 0) {
        const uint32_t S = spec.n_ff_shared;
        // [n_embd], one row of variance 1/n_embd, as the published files have it (1-D); Granite's is ungated.
        if (qwen2moe || qwen35moe)
          LLAMAY_RETURN_IF_ERROR(
              b.Vector(p + "ffn_gate_inp_shexp.weight", {E}, 0.0f, std::sqrt(3.0f / static_cast<float>(E))));
        LLAMAY_RETURN_IF_ERROR(b.Matrix(p + "ffn_gate_shexp.weight", S, E));
        LLAMAY_RETURN_IF_ERROR(b.Matrix(p + "ffn_up_shexp.weight", S, E));
        LLAMAY_RETURN_IF_ERROR(b.Matrix(p + "ffn_down_shexp.weight", E, S));
      }
      continue;
    }
    LLAMAY_RETURN_IF_ERROR(b.Matrix(p + "ffn_gate.weight", spec.n_ff, spec.n_embd));
    LLAMAY_RETURN_IF_ERROR(b.Matrix(p + "ffn_up.weight", spec.n_ff, spec.n_embd));
    LLAMAY_RETURN_IF_ERROR(b.Matrix(p + "ffn_down.weight", spec.n_embd, spec.n_ff));
  }
  return w.Finish();
}

}  // namespace llamay::model
