#include "model/hparams.h"

#include <algorithm>
#include <cmath>

#include "kernels/delta_rule.h"
#include "kernels/ssm_scan.h"

namespace llamay::model {
namespace {

std::string Range(int64_t v, uint32_t lo, uint32_t hi) {
  return " = " + std::to_string(v) + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) +
         "]";
}

Result<uint32_t> GetU32(const gguf::File& f, const std::string& key, uint32_t lo, uint32_t hi) {
  LLAMAY_ASSIGN_OR_RETURN(int64_t v, f.GetInt(key));
  if (v < lo || v > hi) return InvalidArgumentError("model: " + key + Range(v, lo, hi));
  return static_cast<uint32_t>(v);
}

// A key that is either one integer for every layer or an array with one per layer: one per block of the
// file (the trunk's, then any multi-token-prediction blocks', whose entries are dropped) or one per trunk
// layer.
Result<std::vector<uint32_t>> GetPerLayer(const gguf::File& f, const std::string& key, const HParams& hp,
                                          uint32_t lo, uint32_t hi) {
  const uint32_t n_layer = hp.n_layer, n_blocks = hp.n_layer + hp.n_layer_nextn;
  LLAMAY_ASSIGN_OR_RETURN(gguf::ValueType type, f.TypeOf(key));
  if (type != gguf::ValueType::kArray) {
    LLAMAY_ASSIGN_OR_RETURN(uint32_t v, GetU32(f, key, lo, hi));
    return std::vector<uint32_t>(n_layer, v);
  }
  LLAMAY_ASSIGN_OR_RETURN(std::vector<int64_t> a, f.GetIntArray(key));
  if (a.size() != n_layer && a.size() != n_blocks)
    return InvalidArgumentError("model: " + key + " has " + std::to_string(a.size()) + " entries for " +
                                std::to_string(n_blocks) + " layers");
  a.resize(n_layer);
  std::vector<uint32_t> out;
  for (int64_t v : a) {
    if (v < lo || v > hi) return InvalidArgumentError("model: an entry of " + key + Range(v, lo, hi));
    out.push_back(static_cast<uint32_t>(v));
  }
  return out;
}

// Attention geometry and rope. The layers of kind kAttention are already marked in hp->mixers.
// head_count_kv per layer: the caller has decided which layers are attention; all must agree.
Status ReadAttention(const gguf::File& f, const std::string& a, const std::vector<uint32_t>& n_head_kv,
                     HParams* hp) {
  LLAMAY_ASSIGN_OR_RETURN(hp->n_head, GetU32(f, a + "attention.head_count", 1, 4096));
  hp->n_head_kv = 0;
  for (uint32_t l = 0; l < hp->n_layer; ++l) {
    if (hp->mixers[l] != MixerKind::kAttention) continue;
    if (hp->n_head_kv != 0 && n_head_kv[l] != hp->n_head_kv)
      return UnimplementedError("model: attention layers with different head_count_kv are not supported");
    hp->n_head_kv = n_head_kv[l];
  }
  if (hp->n_head_kv > hp->n_head)
    return InvalidArgumentError("model: head_count_kv " + std::to_string(hp->n_head_kv) +
                                " exceeds head_count " + std::to_string(hp->n_head));
  if (hp->n_head % hp->n_head_kv != 0)
    return InvalidArgumentError("model: head_count " + std::to_string(hp->n_head) +
                                " is not a multiple of head_count_kv " + std::to_string(hp->n_head_kv));
  hp->head_dim = hp->n_embd / hp->n_head;
  if (f.Has(a + "attention.key_length")) {
    LLAMAY_ASSIGN_OR_RETURN(hp->head_dim, GetU32(f, a + "attention.key_length", 1, 1 << 12));
  }
  if (f.Has(a + "attention.value_length")) {
    LLAMAY_ASSIGN_OR_RETURN(uint32_t v, GetU32(f, a + "attention.value_length", 1, 1 << 12));
    if (v != hp->head_dim) return UnimplementedError("model: value_length differs from key_length");
  }
  if (hp->head_dim % 2 != 0) return InvalidArgumentError("model: head dim must be even for rope");
  hp->n_rot = hp->head_dim;
  if (f.Has(a + "rope.dimension_count")) {
    LLAMAY_ASSIGN_OR_RETURN(hp->n_rot, GetU32(f, a + "rope.dimension_count", 2, hp->head_dim));
  }
  hp->rope_theta = static_cast<float>(f.GetFloatOr(a + "rope.freq_base", 10000.0));
  const std::string scaling = f.GetStringOr(a + "rope.scaling.type", "none");
  if (scaling == "linear" || scaling == "yarn") {
    const double factor = f.GetFloatOr(a + "rope.scaling.factor", 1.0);
    if (!(factor > 0)) return InvalidArgumentError("model: rope.scaling.factor must be positive");
    hp->rope_freq_scale = static_cast<float>(1.0 / factor);
  } else if (scaling != "none" && scaling != "") {
    return UnimplementedError("model: rope scaling type '" + scaling +
                              "' is not supported (none, linear, yarn)");
  }
  if (scaling == "yarn") {
    // llama.cpp's choices (llama_context): ext_factor 1, beta_fast 32 and beta_slow 1 (the file's yarn_*
    // keys are not read), and a magnitude that cancels the ln term rope applies, times the file's
    // rope.scaling.attn_factor.
    const float factor = 1.0f / hp->rope_freq_scale;
    const float mscale = factor <= 1.0f ? 1.0f : 0.1f * std::log(factor) + 1.0f;
    hp->rope_ext_factor = 1.0f;
    hp->rope_attn_factor = mscale * (1.0f / (1.0f + 0.1f * std::log(factor))) *
                           static_cast<float>(f.GetFloatOr(a + "rope.scaling.attn_factor", 1.0));
    hp->n_ctx_orig =
        static_cast<uint32_t>(f.GetIntOr(a + "rope.scaling.original_context_length", hp->n_ctx_train));
    if (hp->n_ctx_orig == 0)
      return InvalidArgumentError("model: rope.scaling.original_context_length must be positive");
  }
  return Status::Ok();
}

Status ReadSsm(const gguf::File& f, const std::string& a, HParams* hp) {
  SsmParams& s = hp->ssm;
  s.mixer = *std::find_if(hp->mixers.begin(), hp->mixers.end(),
                          [](MixerKind m) { return m != MixerKind::kAttention; });
  LLAMAY_ASSIGN_OR_RETURN(s.d_conv, GetU32(f, a + "ssm.conv_kernel", 1, 16));
  LLAMAY_ASSIGN_OR_RETURN(s.d_inner, GetU32(f, a + "ssm.inner_size", 1, 1 << 16));
  LLAMAY_ASSIGN_OR_RETURN(s.d_state, GetU32(f, a + "ssm.state_size", 1, 1 << 12));
  LLAMAY_ASSIGN_OR_RETURN(s.n_head, GetU32(f, a + "ssm.time_step_rank", 1, s.d_inner));
  LLAMAY_ASSIGN_OR_RETURN(s.n_group, GetU32(f, a + "ssm.group_count", 1, s.n_head));
  if (s.d_inner % s.n_head != 0)
    return InvalidArgumentError("model: ssm.inner_size " + std::to_string(s.d_inner) +
                                " is not a multiple of ssm.time_step_rank " + std::to_string(s.n_head));
  if (s.n_head % s.n_group != 0)
    return InvalidArgumentError("model: ssm.time_step_rank " + std::to_string(s.n_head) +
                                " is not a multiple of ssm.group_count " + std::to_string(s.n_group));
  if (s.state_bytes() > (uint64_t{1} << 30))
    return InvalidArgumentError("model: SSM state over 1 GiB per layer");
  return Status::Ok();
}

// Granite's multipliers: optional floats, 0 (absent) meaning "not applied".
void ReadGraniteScales(const gguf::File& f, const std::string& a, HParams* hp) {
  hp->embedding_scale = static_cast<float>(f.GetFloatOr(a + "embedding_scale", 0.0));
  hp->residual_scale = static_cast<float>(f.GetFloatOr(a + "residual_scale", 0.0));
  hp->attention_scale = static_cast<float>(f.GetFloatOr(a + "attention.scale", 0.0));
  hp->logit_scale = static_cast<float>(f.GetFloatOr(a + "logit_scale", 0.0));
  // Granite uses rope.scaling.finetuned as the switch for rope (default on).
  hp->use_rope = f.GetBoolOr(a + "rope.scaling.finetuned", true);
}

// Sliding windows (gemma3, gpt-oss). Layer l is sliding-window unless it is the last of each group of
// sliding_window_pattern layers (l % n < n - 1, llama.cpp's set_swa_pattern; n = default_pattern when the
// key is absent, 0 = every layer windowed), or per layer where the key is a bool array (true: windowed).
Status ReadWindows(const gguf::File& f, const std::string& a, uint32_t default_pattern, HParams* hp) {
  LLAMAY_ASSIGN_OR_RETURN(uint32_t window, GetU32(f, a + "attention.sliding_window", 1, 1u << 24));
  const std::string key = a + "attention.sliding_window_pattern";
  std::vector<int64_t> windowed(hp->n_layer);
  if (f.Has(key) && *f.TypeOf(key) == gguf::ValueType::kArray) {
    LLAMAY_ASSIGN_OR_RETURN(windowed, f.GetIntArray(key));
    if (windowed.size() != hp->n_layer)
      return InvalidArgumentError("model: " + key + " has " + std::to_string(windowed.size()) +
                                  " entries for " + std::to_string(hp->n_layer) + " layers");
  } else {
    uint32_t n = default_pattern;
    if (f.Has(key)) {
      LLAMAY_ASSIGN_OR_RETURN(n, GetU32(f, key, 0, 4096));
    }
    for (uint32_t l = 0; l < hp->n_layer; ++l) windowed[l] = n == 0 || l % n < n - 1;
  }
  for (uint32_t l = 0; l < hp->n_layer; ++l) hp->windows.push_back(windowed[l] != 0 ? window : 0);
  return Status::Ok();
}

// Gemma 3 (llama.cpp's LLM_ARCH_GEMMA3): windows in groups of 6 (ReadWindows). Windowed layers rope with
// rope.freq_base_swa (default 1e4), unscaled. Embeddings are scaled by sqrt(n_embd); q.k by
// 1/sqrt(head_dim), or 1/sqrt(n_embd / n_head) for the 62-layer (27B) model, as in llama.cpp and
// gemma_pytorch.
Status ReadGemma3(const gguf::File& f, const std::string& a, HParams* hp) {
  LLAMAY_RETURN_IF_ERROR(ReadWindows(f, a, 6, hp));
  hp->rope_theta_swa = static_cast<float>(f.GetFloatOr(a + "rope.freq_base_swa", 10000.0));
  hp->rope_freq_scale_swa = 1.0f;
  hp->embedding_scale = std::sqrt(static_cast<float>(hp->n_embd));
  hp->attention_scale =
      1.0f / std::sqrt(static_cast<float>(hp->n_layer == 62 ? hp->n_embd / hp->n_head : hp->head_dim));
  if (f.GetFloatOr(a + "final_logit_softcapping", 0.0) != 0.0 ||
      f.GetFloatOr(a + "attn_logit_softcapping", 0.0) != 0.0)
    return UnimplementedError("model: gemma3 logit soft-capping is not supported");
  return Status::Ok();
}

// Qwen3.5 (dense and MoE): the layers attention.recurrent_layers marks (1: a gated delta net), where the file
// has that key; otherwise layer l is full attention when (l + 1) % full_attention_interval == 0 (llama.cpp's
// rule and default of 4), a gated delta net otherwise.
Status ReadQwen35Layers(const gguf::File& f, const std::string& a, HParams* hp,
                        std::vector<uint32_t>* n_head_kv) {
  if (f.Has(a + "attention.recurrent_layers")) {
    LLAMAY_ASSIGN_OR_RETURN(std::vector<uint32_t> recurrent,
                            GetPerLayer(f, a + "attention.recurrent_layers", *hp, 0, 1));
    for (uint32_t r : recurrent) hp->mixers.push_back(r ? MixerKind::kGatedDeltaNet : MixerKind::kAttention);
  } else {
    uint32_t every = 4;
    if (f.Has(a + "full_attention_interval")) {
      LLAMAY_ASSIGN_OR_RETURN(every, GetU32(f, a + "full_attention_interval", 1, hp->n_layer));
    }
    for (uint32_t l = 0; l < hp->n_layer; ++l)
      hp->mixers.push_back((l + 1) % every == 0 ? MixerKind::kAttention : MixerKind::kGatedDeltaNet);
  }
  LLAMAY_ASSIGN_OR_RETURN(*n_head_kv, GetPerLayer(f, a + "attention.head_count_kv", *hp, 1, 4096));
  return Status::Ok();
}

// The mixture of experts of a kMoe layer (llama.cpp's keys and, per architecture, its fixed choices).
Status ReadMoe(const gguf::File& f, const std::string& a, HParams* hp) {
  MoeParams& m = hp->moe;
  LLAMAY_ASSIGN_OR_RETURN(m.n_expert, GetU32(f, a + "expert_count", 1, 4096));
  LLAMAY_ASSIGN_OR_RETURN(m.n_expert_used,
                          GetU32(f, a + "expert_used_count", 1, std::min(m.n_expert, kMaxExpertsUsed)));
  // Granite's and OLMoE's experts are feed_forward_length wide (llama.cpp reads that key for them); the
  // others declare their experts' width apart from a dense FFN's.
  const std::string width = hp->arch == Arch::kGraniteHybrid || hp->arch == Arch::kOlmoe
                                ? "feed_forward_length"
                                : "expert_feed_forward_length";
  LLAMAY_ASSIGN_OR_RETURN(m.n_ff_expert, GetU32(f, a + width, 1, 1 << 20));
  if (f.Has(a + "expert_shared_feed_forward_length")) {
    LLAMAY_ASSIGN_OR_RETURN(m.n_ff_shared, GetU32(f, a + "expert_shared_feed_forward_length", 0, 1 << 20));
  }
  if (f.Has(a + "leading_dense_block_count")) {
    LLAMAY_ASSIGN_OR_RETURN(m.n_dense_lead, GetU32(f, a + "leading_dense_block_count", 0, hp->n_layer));
  }
  m.weights_scale = static_cast<float>(f.GetFloatOr(a + "expert_weights_scale", 1.0));
  if (!(m.weights_scale > 0.0f))
    return InvalidArgumentError("model: " + a + "expert_weights_scale must be positive");
  // Each architecture's fixed choices (llama.cpp's): its gating, whether the top k are renormalised, and
  // whether it has a shared expert (always, gated by sigmoid(ffn_gate_inp_shexp x); where the file declares
  // one, ungated; or never).
  enum class Shared { kNever, kDeclared, kGated } shared = Shared::kNever;
  switch (hp->arch) {
    case Arch::kQwen3Moe:
      m.gating = MoeGating::kSoftmax;
      m.norm_topk = true;
      break;
    case Arch::kQwen2Moe:
      m.gating = MoeGating::kSoftmax;
      m.norm_topk = false;
      shared = Shared::kGated;
      break;
    case Arch::kQwen35Moe:  // Qwen3.5/3.6 MoE (llama.cpp's qwen35moe: Qwen3-Next's sparse block)
      m.gating = MoeGating::kSoftmax;
      m.norm_topk = true;
      shared = Shared::kGated;
      break;
    case Arch::kGraniteHybrid:  // Granite 4.0-H Tiny and Small
      m.gating = MoeGating::kSoftmax;
      m.norm_topk = true;
      shared = Shared::kDeclared;
      break;
    case Arch::kOlmoe:
      m.gating = MoeGating::kSoftmax;
      m.norm_topk = false;
      break;
    case Arch::kGptOss:
      m.gating = MoeGating::kSoftmaxTopK;
      m.norm_topk = false;
      m.act = FfnActivation::kSwiGluOai;
      m.biases = true;
      break;
    default:
      break;
  }
  m.shared_gated = shared == Shared::kGated;
  if (shared == Shared::kGated && m.n_ff_shared == 0)
    return InvalidArgumentError("model: " + a + "expert_shared_feed_forward_length is missing (" +
                                hp->arch_name + " has a shared expert)");
  if (shared == Shared::kNever && m.n_ff_shared != 0)
    return UnimplementedError("model: " + a + "expert_shared_feed_forward_length: " + hp->arch_name +
                              " has no shared expert");
  m.norm_topk = f.GetBoolOr(a + "expert_weights_norm", m.norm_topk);
  for (uint32_t l = 0; l < hp->n_layer; ++l)
    hp->ffns[l] = l < m.n_dense_lead ? FfnKind::kDense : FfnKind::kMoe;
  return Status::Ok();
}

}  // namespace

bool HParams::has_moe() const { return std::find(ffns.begin(), ffns.end(), FfnKind::kMoe) != ffns.end(); }

bool HParams::has_dense_ffn() const {
  return std::find(ffns.begin(), ffns.end(), FfnKind::kDense) != ffns.end();
}

bool HParams::has_recurrent() const {
  return std::any_of(mixers.begin(), mixers.end(), [](MixerKind m) { return m != MixerKind::kAttention; });
}

uint32_t HParams::n_attention_layers() const {
  return static_cast<uint32_t>(std::count(mixers.begin(), mixers.end(), MixerKind::kAttention));
}

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
  } else if (hp.arch_name == "qwen2moe") {
    hp.arch = Arch::kQwen2Moe;
    hp.rope_type = RopeType::kNeox;
    hp.qkv_bias = true;
  } else if (hp.arch_name == "qwen3moe") {
    hp.arch = Arch::kQwen3Moe;
    hp.rope_type = RopeType::kNeox;
    hp.qk_norm = true;
  } else if (hp.arch_name == "mamba2") {
    hp.arch = Arch::kMamba2;
  } else if (hp.arch_name == "granitehybrid") {
    hp.arch = Arch::kGraniteHybrid;
    hp.rope_type = RopeType::kNorm;
  } else if (hp.arch_name == "qwen35" || hp.arch_name == "qwen35moe") {
    // Multi-section rope (rope.dimension_sections) with every section at the text position: plain NEOX.
    hp.arch = hp.arch_name == "qwen35" ? Arch::kQwen35 : Arch::kQwen35Moe;
    hp.rope_type = RopeType::kNeox;
    hp.qk_norm = true;
    hp.attn_output_gate = true;
  } else if (hp.arch_name == "olmoe") {
    hp.arch = Arch::kOlmoe;
    hp.rope_type = RopeType::kNeox;
    hp.qk_norm = true;
    hp.qk_norm_full = true;
  } else if (hp.arch_name == "gpt-oss") {
    hp.arch = Arch::kGptOss;
    hp.rope_type = RopeType::kNeox;
    hp.qkv_bias = true;
    hp.attn_sinks = true;
  } else if (hp.arch_name == "gemma3") {
    hp.arch = Arch::kGemma3;
    hp.rope_type = RopeType::kNeox;
    hp.qk_norm = true;
    hp.post_norms = true;
    hp.ffn_act = FfnActivation::kGeGlu;
  } else {
    return UnimplementedError("model: architecture '" + hp.arch_name +
                              "' is not supported (supported: llama, qwen2, qwen2moe, qwen3, qwen3moe, "
                              "mamba2, granitehybrid, qwen35, qwen35moe, "
                              "gemma3, gpt-oss, olmoe)");
  }
  const std::string a = hp.arch_name + ".";
  LLAMAY_ASSIGN_OR_RETURN(hp.n_embd, GetU32(f, a + "embedding_length", 1, 1 << 16));
  LLAMAY_ASSIGN_OR_RETURN(hp.n_layer, GetU32(f, a + "block_count", 1, 4096));
  if (f.Has(a + "nextn_predict_layers")) {
    LLAMAY_ASSIGN_OR_RETURN(hp.n_layer_nextn, GetU32(f, a + "nextn_predict_layers", 0, hp.n_layer - 1));
    hp.n_layer -= hp.n_layer_nextn;
  }
  hp.n_ctx_train = static_cast<uint32_t>(f.GetIntOr(a + "context_length", 2048));
  hp.rms_eps = static_cast<float>(f.GetFloatOr(a + "attention.layer_norm_rms_epsilon", 1e-5));
  hp.ffns.assign(hp.n_layer, hp.arch == Arch::kMamba2 ? FfnKind::kNone : FfnKind::kDense);
  // Granite 4.0-H is a mixture of experts where the file declares experts (Tiny, Small), dense otherwise.
  const bool granite_moe = hp.arch == Arch::kGraniteHybrid && f.GetIntOr(a + "expert_count", 0) > 0;
  if (hp.arch == Arch::kQwen3Moe || hp.arch == Arch::kQwen2Moe || hp.arch == Arch::kQwen35Moe ||
      hp.arch == Arch::kGptOss || hp.arch == Arch::kOlmoe || granite_moe)
    LLAMAY_RETURN_IF_ERROR(ReadMoe(f, a, &hp));
  if (hp.has_dense_ffn()) {
    LLAMAY_ASSIGN_OR_RETURN(hp.n_ff, GetU32(f, a + "feed_forward_length", 1, 1 << 20));
  }
  // Which layers are attention: all of them (llama family), none (mamba2), or those with kv heads (granite).
  std::vector<uint32_t> n_head_kv;
  if (hp.arch == Arch::kMamba2) {
    hp.mixers.assign(hp.n_layer, MixerKind::kMamba2);
  } else if (hp.arch == Arch::kGraniteHybrid) {
    LLAMAY_ASSIGN_OR_RETURN(n_head_kv, GetPerLayer(f, a + "attention.head_count_kv", hp, 0, 4096));
    for (uint32_t kv : n_head_kv) hp.mixers.push_back(kv == 0 ? MixerKind::kMamba2 : MixerKind::kAttention);
  } else if (hp.arch == Arch::kQwen35 || hp.arch == Arch::kQwen35Moe) {
    LLAMAY_RETURN_IF_ERROR(ReadQwen35Layers(f, a, &hp, &n_head_kv));
  } else {
    hp.mixers.assign(hp.n_layer, MixerKind::kAttention);
    const std::string key =
        f.Has(a + "attention.head_count_kv") ? "attention.head_count_kv" : "attention.head_count";
    LLAMAY_ASSIGN_OR_RETURN(n_head_kv, GetPerLayer(f, a + key, hp, 1, 4096));
  }
  if (hp.n_attention_layers() > 0) LLAMAY_RETURN_IF_ERROR(ReadAttention(f, a, n_head_kv, &hp));
  if (hp.has_recurrent()) LLAMAY_RETURN_IF_ERROR(ReadSsm(f, a, &hp));
  if (hp.arch == Arch::kGraniteHybrid) ReadGraniteScales(f, a, &hp);
  if (hp.arch == Arch::kGemma3) LLAMAY_RETURN_IF_ERROR(ReadGemma3(f, a, &hp));
  if (hp.arch == Arch::kGptOss) {
    // Windows on the even layers; both kinds of layer rope alike (YaRN included) unless the file gives the
    // windowed ones their own base.
    LLAMAY_RETURN_IF_ERROR(ReadWindows(f, a, 2, &hp));
    hp.rope_theta_swa = static_cast<float>(f.GetFloatOr(a + "rope.freq_base_swa", hp.rope_theta));
    hp.rope_freq_scale_swa = hp.rope_freq_scale;
  }
  // Vocabulary size: the embedding's row count is authoritative.
  const gguf::TensorInfo* embd = f.FindTensor("token_embd.weight");
  if (embd == nullptr) return InvalidArgumentError("model: token_embd.weight is missing");
  if (embd->dims.size() != 2) return InvalidArgumentError("model: token_embd.weight is not 2-D");
  hp.n_vocab = static_cast<uint32_t>(embd->dims[1]);
  return hp;
}

uint64_t SsmParams::scan_state_floats() const {
  if (mixer == MixerKind::kGatedDeltaNet)
    return static_cast<uint64_t>(
        kernels::GatedDeltaStateFloats(static_cast<int>(n_group), static_cast<int>(n_head),
                                       static_cast<int>(d_state), static_cast<int>(head_dim())));
  return static_cast<uint64_t>(
      kernels::SsmScanStateFloats(static_cast<int>(n_head), static_cast<int>(head_dim()),
                                  static_cast<int>(d_state), static_cast<int>(n_group)));
}

uint64_t SsmParams::folded_floats() const {
  // Mamba-2: S [H][P][N]; the gated delta rule: S [Hv][Dk][Dv] (Hv = n_head, Dk = d_state, Dv = head_dim).
  return uint64_t{n_head} * head_dim() * d_state;
}

std::array<uint64_t, 3> SsmParams::pending_slot_floats() const {
  if (mixer == MixerKind::kGatedDeltaNet)  // k [Hk][Dk], delta [Hv][Dv], eg [Hv]
    return {uint64_t{n_group} * d_state, uint64_t{n_head} * head_dim(), n_head};
  return {uint64_t{n_head} * head_dim(), uint64_t{n_group} * d_state,
          n_head};  // xdt [H][P], B [G][N], dA [H]
}

kv::KvLayout MakeKvLayout(const HParams& hp, uint32_t page_tokens, kv::KvPrecision precision,
                          uint32_t checkpoint_tokens) {
  kv::KvLayout l;
  l.n_layers = hp.n_layer;
  l.n_kv_heads = hp.n_head_kv;
  l.head_dim = hp.head_dim;
  l.page_tokens = page_tokens;
  l.precision = precision;
  // All full attention: no specs, exactly the pure-attention layout.
  if (!hp.has_recurrent() && hp.windows.empty()) return l;
  for (uint32_t i = 0; i < hp.n_layer; ++i)
    l.layer_specs.push_back(hp.is_recurrent(i) ? kv::LayerSpec{kv::LayerKind::kRecurrent, 0}
                                               : kv::LayerSpec{kv::LayerKind::kAttention, hp.window(i)});
  if (!hp.has_recurrent()) return l;
  l.recurrent_layer_bytes = hp.ssm.state_bytes();
  l.recurrent_legacy_layer_bytes = hp.ssm.legacy_state_bytes();
  const uint32_t want = checkpoint_tokens ? checkpoint_tokens : kDefaultCheckpointTokens;
  l.checkpoint_tokens = page_tokens == 0 ? want : (want + page_tokens - 1) / page_tokens * page_tokens;
  return l;
}

}  // namespace llamay::model
