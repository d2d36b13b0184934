#include "model/weights.h"

#include <string>
#include <vector>

#include "kernels/dequant.h"
#include "kernels/vec_dot.h"

namespace llamay::model {
namespace {

std::string Shape(int64_t rows, int64_t cols) {
  std::string s = "[";
  s += std::to_string(rows);
  s += "][";
  s += std::to_string(cols);
  s += "]";
  return s;
}

std::string Dims(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

class Binder {
 public:
  Binder(const gguf::File& f) : f_(f) {}

  // Expert slabs: a 3-D tensor of GGUF dims [cols][rows][slabs], bound as `slabs` matrices of
  // [rows][cols] (Tensor::Slab).
  bool Has(const std::string& name) const { return f_.FindTensor(name) != nullptr; }

  Result<Tensor> GetExperts(const std::string& name, int64_t slabs, int64_t rows, int64_t cols) {
    const gguf::TensorInfo* t = f_.FindTensor(name);
    if (t == nullptr) return InvalidArgumentError("model: tensor '" + name + "' is missing");
    if (t->dims.size() != 3 || t->dims[0] != cols || t->dims[1] != rows || t->dims[2] != slabs)
      return InvalidArgumentError("model: tensor '" + name + "' has dims " + Dims(t->dims) + ", expected [" +
                                  std::to_string(cols) + ", " + std::to_string(rows) + ", " +
                                  std::to_string(slabs) + "]");
    if (!IsSupportedMatrixType(t->type))
      return UnimplementedError("model: tensor '" + name + "' has type " +
                                std::string(TensorTypeName(t->type)) + ", which is not supported");
    Tensor out;
    out.type = t->type;
    out.data = t->data;
    out.cols = cols;
    out.rows = rows;
    out.slabs = slabs;
    out.slab_bytes = static_cast<size_t>(rows) * kernels::TypeRowBytes(t->type, cols);
    return out;
  }

  // A tensor of `cols` x `rows` (rows 1 for vectors). Optional tensors may be absent.
  Result<Tensor> Get(const std::string& name, int64_t rows, int64_t cols, bool matrix,
                     bool optional = false) {
    const gguf::TensorInfo* t = f_.FindTensor(name);
    if (t == nullptr) {
      if (optional) return Tensor{};
      return InvalidArgumentError("model: tensor '" + name + "' is missing");
    }
    Tensor out;
    out.type = t->type;
    out.data = t->data;
    out.cols = t->dims.empty() ? 1 : t->dims[0];
    out.rows = t->rows();
    if (out.cols != cols || out.rows != rows)
      return InvalidArgumentError("model: tensor '" + name + "' has shape " + Shape(out.rows, out.cols) +
                                  ", expected " + Shape(rows, cols));
    if (matrix ? !IsSupportedMatrixType(out.type) : out.type != TensorType::kF32)
      return UnimplementedError("model: tensor '" + name + "' has type " +
                                std::string(TensorTypeName(out.type)) + ", which is not supported" +
                                (matrix ? "" : " (norms and biases must be f32)"));
    return out;
  }

 private:
  const gguf::File& f_;
};

}  // namespace

bool IsSupportedMatrixType(TensorType t) {
  // What the kernels can multiply (and dequantise, for embedding rows).
  return kernels::MatMulSupports(t) && kernels::CanDequantize(t);
}

namespace {

Status BindAttention(Binder& b, const std::string& p, const HParams& hp, LayerWeights* l) {
  const int64_t E = hp.n_embd, Q = hp.q_dim(), KV = hp.kv_dim();
  LLAMAY_ASSIGN_OR_RETURN(l->wq, b.Get(p + "attn_q.weight", hp.attn_output_gate ? 2 * Q : Q, E, true));
  LLAMAY_ASSIGN_OR_RETURN(l->wk, b.Get(p + "attn_k.weight", KV, E, true));
  LLAMAY_ASSIGN_OR_RETURN(l->wv, b.Get(p + "attn_v.weight", KV, E, true));
  LLAMAY_ASSIGN_OR_RETURN(l->wo, b.Get(p + "attn_output.weight", E, Q, true));
  // Biases: required for qwen2, allowed (and used) wherever present.
  LLAMAY_ASSIGN_OR_RETURN(l->bq, b.Get(p + "attn_q.bias", 1, Q, false, !hp.qkv_bias));
  LLAMAY_ASSIGN_OR_RETURN(l->bk, b.Get(p + "attn_k.bias", 1, KV, false, !hp.qkv_bias));
  LLAMAY_ASSIGN_OR_RETURN(l->bv, b.Get(p + "attn_v.bias", 1, KV, false, !hp.qkv_bias));
  LLAMAY_ASSIGN_OR_RETURN(l->bo, b.Get(p + "attn_output.bias", 1, E, false, !hp.attn_sinks));
  if (hp.attn_sinks) {
    LLAMAY_ASSIGN_OR_RETURN(l->sinks, b.Get(p + "attn_sinks.weight", 1, hp.n_head, false));
  }
  if (static_cast<bool>(l->bq) != static_cast<bool>(l->bk) ||
      static_cast<bool>(l->bq) != static_cast<bool>(l->bv))
    return UnimplementedError("model: " + p + "attn_{q,k,v}.bias must be all present or all absent");
  LLAMAY_ASSIGN_OR_RETURN(
      l->q_norm, b.Get(p + "attn_q_norm.weight", 1, hp.qk_norm_full ? Q : hp.head_dim, false, !hp.qk_norm));
  LLAMAY_ASSIGN_OR_RETURN(
      l->k_norm, b.Get(p + "attn_k_norm.weight", 1, hp.qk_norm_full ? KV : hp.head_dim, false, !hp.qk_norm));
  if (static_cast<bool>(l->q_norm) != static_cast<bool>(l->k_norm))
    return UnimplementedError("model: " + p + "attn_{q,k}_norm must be both present or both absent");
  return Status::Ok();
}

Status BindMamba2(Binder& b, const std::string& p, const HParams& hp, LayerWeights* l) {
  const SsmParams& s = hp.ssm;
  const int64_t E = hp.n_embd, C = s.conv_channels(), H = s.n_head, G = s.n_group;
  LLAMAY_ASSIGN_OR_RETURN(l->ssm_in, b.Get(p + "ssm_in.weight", s.in_proj_dim(), E, true));
  LLAMAY_ASSIGN_OR_RETURN(l->ssm_conv1d, b.Get(p + "ssm_conv1d.weight", C, s.d_conv, false));
  LLAMAY_ASSIGN_OR_RETURN(l->ssm_conv1d_b, b.Get(p + "ssm_conv1d.bias", 1, C, false));
  LLAMAY_ASSIGN_OR_RETURN(l->ssm_dt_b, b.Get(p + "ssm_dt.bias", 1, H, false));
  LLAMAY_ASSIGN_OR_RETURN(l->ssm_a, b.Get(p + "ssm_a", H, 1, false));
  LLAMAY_ASSIGN_OR_RETURN(l->ssm_d, b.Get(p + "ssm_d", H, 1, false));
  LLAMAY_ASSIGN_OR_RETURN(l->ssm_norm, b.Get(p + "ssm_norm.weight", G, s.d_inner / G, false));
  LLAMAY_ASSIGN_OR_RETURN(l->ssm_out, b.Get(p + "ssm_out.weight", E, s.d_inner, true));
  return Status::Ok();
}

Status BindDeltaNet(Binder& b, const std::string& p, const HParams& hp, LayerWeights* l) {
  const SsmParams& s = hp.ssm;
  const int64_t E = hp.n_embd, C = s.conv_channels(), H = s.n_head;
  LLAMAY_ASSIGN_OR_RETURN(l->ssm_qkv, b.Get(p + "attn_qkv.weight", C, E, true));
  LLAMAY_ASSIGN_OR_RETURN(l->ssm_z, b.Get(p + "attn_gate.weight", s.d_inner, E, true));
  LLAMAY_ASSIGN_OR_RETURN(l->ssm_beta, b.Get(p + "ssm_beta.weight", H, E, true));
  LLAMAY_ASSIGN_OR_RETURN(l->ssm_alpha, b.Get(p + "ssm_alpha.weight", H, E, true));
  LLAMAY_ASSIGN_OR_RETURN(l->ssm_conv1d, b.Get(p + "ssm_conv1d.weight", C, s.d_conv, false));
  LLAMAY_ASSIGN_OR_RETURN(l->ssm_dt_b, b.Get(p + "ssm_dt.bias", 1, H, false));
  LLAMAY_ASSIGN_OR_RETURN(l->ssm_a, b.Get(p + "ssm_a", 1, H, false));
  LLAMAY_ASSIGN_OR_RETURN(l->ssm_norm, b.Get(p + "ssm_norm.weight", 1, s.head_dim(), false));
  LLAMAY_ASSIGN_OR_RETURN(l->ssm_out, b.Get(p + "ssm_out.weight", E, s.d_inner, true));
  return Status::Ok();
}

// Qwen3.5 and gpt-oss name the norm in front of their FFN post_attention_norm (llama.cpp: attn_post_norm).
std::string FfnNormName(const HParams& hp) {
  return hp.arch == Arch::kQwen35 || hp.arch == Arch::kQwen35Moe || hp.arch == Arch::kGptOss
             ? "post_attention_norm.weight"
             : "ffn_norm.weight";
}

Status BindFfn(Binder& b, const std::string& p, const HParams& hp, LayerWeights* l) {
  const int64_t E = hp.n_embd, F = hp.n_ff;
  LLAMAY_ASSIGN_OR_RETURN(l->ffn_norm, b.Get(p + FfnNormName(hp), 1, E, false));
  LLAMAY_ASSIGN_OR_RETURN(l->w_gate, b.Get(p + "ffn_gate.weight", F, E, true));
  LLAMAY_ASSIGN_OR_RETURN(l->w_up, b.Get(p + "ffn_up.weight", F, E, true));
  LLAMAY_ASSIGN_OR_RETURN(l->w_down, b.Get(p + "ffn_down.weight", E, F, true));
  return Status::Ok();
}

Status BindMoe(Binder& b, const std::string& p, const HParams& hp, LayerWeights* l) {
  const int64_t E = hp.n_embd, F = hp.moe.n_ff_expert, X = hp.moe.n_expert;
  LLAMAY_ASSIGN_OR_RETURN(l->ffn_norm, b.Get(p + FfnNormName(hp), 1, E, false));
  LLAMAY_ASSIGN_OR_RETURN(l->router, b.Get(p + "ffn_gate_inp.weight", X, E, true));
  if (b.Has(p + "ffn_gate_up_exps.weight")) {
    // The fused form (llama.cpp's --fuse-gate-up-exps, Granite's MoE-SWA files): each expert's slab is its
    // gate rows, then its up rows. Gate and up are views of it: the same slab stride, up F rows further.
    LLAMAY_ASSIGN_OR_RETURN(Tensor fused, b.GetExperts(p + "ffn_gate_up_exps.weight", X, 2 * F, E));
    l->gate_exps = fused;
    l->gate_exps.rows = F;
    l->up_exps = l->gate_exps;
    l->up_exps.data += static_cast<size_t>(F) * kernels::TypeRowBytes(fused.type, E);
  } else {
    LLAMAY_ASSIGN_OR_RETURN(l->gate_exps, b.GetExperts(p + "ffn_gate_exps.weight", X, F, E));
    LLAMAY_ASSIGN_OR_RETURN(l->up_exps, b.GetExperts(p + "ffn_up_exps.weight", X, F, E));
  }
  LLAMAY_ASSIGN_OR_RETURN(l->down_exps, b.GetExperts(p + "ffn_down_exps.weight", X, E, F));
  if (hp.moe.biases) {
    LLAMAY_ASSIGN_OR_RETURN(l->router_b, b.Get(p + "ffn_gate_inp.bias", 1, X, false));
    LLAMAY_ASSIGN_OR_RETURN(l->gate_exps_b, b.Get(p + "ffn_gate_exps.bias", X, F, false));
    LLAMAY_ASSIGN_OR_RETURN(l->up_exps_b, b.Get(p + "ffn_up_exps.bias", X, F, false));
    LLAMAY_ASSIGN_OR_RETURN(l->down_exps_b, b.Get(p + "ffn_down_exps.bias", X, E, false));
  }
  if (const int64_t S = hp.moe.n_ff_shared; S > 0) {
    LLAMAY_ASSIGN_OR_RETURN(l->gate_shexp, b.Get(p + "ffn_gate_shexp.weight", S, E, true));
    LLAMAY_ASSIGN_OR_RETURN(l->up_shexp, b.Get(p + "ffn_up_shexp.weight", S, E, true));
    LLAMAY_ASSIGN_OR_RETURN(l->down_shexp, b.Get(p + "ffn_down_shexp.weight", E, S, true));
    if (hp.moe.shared_gated) {
      LLAMAY_ASSIGN_OR_RETURN(l->gate_inp_shexp, b.Get(p + "ffn_gate_inp_shexp.weight", 1, E, true));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<Weights> BindWeights(const gguf::File& f, const HParams& hp) {
  Binder b(f);
  Weights w;
  const int64_t E = hp.n_embd, V = hp.n_vocab;
  LLAMAY_ASSIGN_OR_RETURN(w.tok_embd, b.Get("token_embd.weight", V, E, true));
  LLAMAY_ASSIGN_OR_RETURN(w.output_norm, b.Get("output_norm.weight", 1, E, false));
  LLAMAY_ASSIGN_OR_RETURN(w.output, b.Get("output.weight", V, E, true, /*optional=*/true));
  if (!w.output) w.output = w.tok_embd;  // tied embeddings
  if (hp.n_attention_layers() > 0) {
    LLAMAY_ASSIGN_OR_RETURN(w.rope_freqs, b.Get("rope_freqs.weight", 1, hp.n_rot / 2, false, true));
  }
  w.layers.resize(hp.n_layer);
  for (uint32_t i = 0; i < hp.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LayerWeights& l = w.layers[i];
    LLAMAY_ASSIGN_OR_RETURN(l.attn_norm, b.Get(p + "attn_norm.weight", 1, E, false));
    switch (hp.mixers[i]) {
      case MixerKind::kAttention:
        LLAMAY_RETURN_IF_ERROR(BindAttention(b, p, hp, &l));
        break;
      case MixerKind::kMamba2:
        LLAMAY_RETURN_IF_ERROR(BindMamba2(b, p, hp, &l));
        break;
      case MixerKind::kGatedDeltaNet:
        LLAMAY_RETURN_IF_ERROR(BindDeltaNet(b, p, hp, &l));
        break;
    }
    switch (hp.ffns[i]) {
      case FfnKind::kNone:
        break;
      case FfnKind::kDense:
        LLAMAY_RETURN_IF_ERROR(BindFfn(b, p, hp, &l));
        break;
      case FfnKind::kMoe:
        LLAMAY_RETURN_IF_ERROR(BindMoe(b, p, hp, &l));
        break;
    }
    if (hp.post_norms) {
      LLAMAY_ASSIGN_OR_RETURN(l.attn_post_norm, b.Get(p + "post_attention_norm.weight", 1, E, false));
      LLAMAY_ASSIGN_OR_RETURN(l.ffn_post_norm, b.Get(p + "post_ffw_norm.weight", 1, E, false));
    }
  }
  return w;
}

}  // namespace llamay::model
