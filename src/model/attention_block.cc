// The attention mixer: see AttentionBlock in blocks.h.
#include <algorithm>
#include <cmath>
#include <utility>

#include "kernels/attention.h"
#include "model/blocks.h"
#include "model/gating.h"

namespace llamay::model::internal {
namespace {

TensorType KvType(kv::KvPrecision p) {
  switch (p) {
    case kv::KvPrecision::kF16:
      return TensorType::kF16;
    case kv::KvPrecision::kQ8_0:
      return TensorType::kQ8_0;
    default:
      return TensorType::kF32;
  }
}

}  // namespace

AttentionBlock::AttentionBlock(Step& step) : step_(step) {
  const HParams& hp = step.hp;
  const size_t T = static_cast<size_t>(step.n_tokens);
  rope_.n_rot = static_cast<int>(hp.n_rot);
  rope_.freq_base = hp.rope_theta;
  rope_.freq_scale = hp.rope_freq_scale;
  rope_.mode = hp.rope_type == RopeType::kNeox ? kernels::RopeMode::kNeox : kernels::RopeMode::kNorm;
  rope_.freq_factors = step.w.rope_freqs ? step.w.rope_freqs.f32() : nullptr;
  rope_.ext_factor = hp.rope_ext_factor;
  rope_.attn_factor = hp.rope_attn_factor;
  rope_.beta_fast = hp.yarn_beta_fast;
  rope_.beta_slow = hp.yarn_beta_slow;
  rope_.n_ctx_orig = hp.n_ctx_orig;
  if (hp.use_rope) {
    cs_.resize(T * hp.n_rot);
    for (size_t t = 0; t < T; ++t) kernels::RopeCache(step.positions[t], rope_, &cs_[t * hp.n_rot]);
  }
  if (hp.use_rope && !hp.windows.empty()) {  // sliding-window layers rope with their own base (gemma3)
    rope_swa_ = rope_;
    rope_swa_.freq_base = hp.rope_theta_swa;
    rope_swa_.freq_scale = hp.rope_freq_scale_swa;
    cs_swa_.resize(T * hp.n_rot);
    for (size_t t = 0; t < T; ++t) kernels::RopeCache(step.positions[t], rope_swa_, &cs_swa_[t * hp.n_rot]);
  }
  q_.resize(T * hp.q_dim());
  k_.resize(T * hp.kv_dim());
  v_.resize(k_.size());
  attn_.resize(q_.size());
  if (hp.attn_output_gate) {
    qg_.resize(2 * q_.size());
    gate_.resize(q_.size());
  }
}

Status AttentionBlock::Run(uint32_t layer, const float* xn, float* out) {
  const HParams& hp = step_.hp;
  const LayerWeights& L = step_.w.layers[layer];
  const kv::LayerSlot slot = step_.layer_slots[layer];
  const int64_t T = step_.n_tokens, E = hp.n_embd, Q = hp.q_dim(), KV = hp.kv_dim(), D = hp.head_dim;
  const uint32_t window = hp.window(layer);  // 0: full attention
  // 1. Projections, bias, per-head norms, rope; the new K/V rows go into the contexts' pages.
  step_.linear.NewInput();
  if (hp.attn_output_gate) {
    // attn_q rows are [q_h, gate_h] per head: split them into q and the output gate.
    step_.linear.Mul(L.wq, xn, E, qg_.data());
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < hp.n_head; ++h) {
        const float* src = &qg_[static_cast<size_t>((t * hp.n_head + h) * 2 * D)];
        std::copy(src, src + D, &q_[static_cast<size_t>(t * Q + h * D)]);
        std::copy(src + D, src + 2 * D, &gate_[static_cast<size_t>(t * Q + h * D)]);
      }
  } else {
    step_.linear.Mul(L.wq, xn, E, q_.data());
  }
  step_.linear.Mul(L.wk, xn, E, k_.data());
  step_.linear.Mul(L.wv, xn, E, v_.data());
  for (int64_t t = 0; t < T; ++t) {
    float* qt = &q_[t * Q];
    float* kt = &k_[t * KV];
    float* vt = &v_[t * KV];
    if (L.bq) {
      kernels::Add(qt, L.bq.f32(), Q, qt);
      kernels::Add(kt, L.bk.f32(), KV, kt);
      kernels::Add(vt, L.bv.f32(), KV, vt);
    }
    if (L.q_norm && hp.qk_norm_full) {
      kernels::RmsNorm(qt, L.q_norm.f32(), Q, hp.rms_eps, qt);
      kernels::RmsNorm(kt, L.k_norm.f32(), KV, hp.rms_eps, kt);
    } else if (L.q_norm) {
      for (int64_t h = 0; h < hp.n_head; ++h)
        kernels::RmsNorm(qt + h * D, L.q_norm.f32(), D, hp.rms_eps, qt + h * D);
      for (int64_t h = 0; h < hp.n_head_kv; ++h)
        kernels::RmsNorm(kt + h * D, L.k_norm.f32(), D, hp.rms_eps, kt + h * D);
    }
    if (hp.use_rope) {
      const kernels::RopeParams& rope = window > 0 ? rope_swa_ : rope_;
      const float* cs = &(window > 0 ? cs_swa_ : cs_)[t * hp.n_rot];
      kernels::ApplyRope(qt, static_cast<int>(hp.n_head), static_cast<int>(D), rope, cs);
      kernels::ApplyRope(kt, static_cast<int>(hp.n_head_kv), static_cast<int>(D), rope, cs);
    }
    const size_t pos = static_cast<size_t>(step_.positions[static_cast<size_t>(t)]);
    kv::Context* ctx = step_.batch[step_.token_seq[static_cast<size_t>(t)]].context;
    LLAMAY_RETURN_IF_ERROR(ctx->WriteRow(pos, layer, kv::KvKind::kKey, std::span<const float>(kt, KV)));
    LLAMAY_RETURN_IF_ERROR(ctx->WriteRow(pos, layer, kv::KvKind::kValue, std::span<const float>(vt, KV)));
  }
  // 2. Attention reads K/V back from the pages (as stored, in the cache's precision), so a token computes
  //    the same values whether its neighbours in the batch were written in this step or an earlier one.
  //    One call per page geometry and KV precision (which a call shares), so that forked sequences read
  //    the pages they share once.
  kernels::AttentionParams ap;
  ap.n_head = static_cast<int>(hp.n_head);
  ap.n_kv_heads = static_cast<int>(hp.n_head_kv);
  ap.head_dim = static_cast<int>(D);
  ap.window = window;  // a windowed layer's group may have released the pages behind its window
  ap.sinks = L.sinks ? L.sinks.f32() : nullptr;
  ap.scale = hp.attention_scale != 0.0f ? hp.attention_scale : 1.0f / std::sqrt(static_cast<float>(D));
  const size_t n_seqs = step_.batch.size();
  std::vector<std::vector<const uint8_t*>> pages(n_seqs);
  std::vector<kernels::AttentionSeq> seqs;
  std::vector<std::pair<kernels::KvPageGeometry, TensorType>> kinds;
  for (size_t s = 0; s < n_seqs; ++s) {
    const int64_t n = step_.seq_tokens(s), t0 = step_.seq_begin[s];
    if (n == 0) continue;
    const kv::Context* ctx = step_.batch[s].context;
    pages[s] = ctx->PageData(slot.group);
    const kv::KvLayout& layout = ctx->layout();
    kinds.push_back(
        {kernels::LayerMajorGeometry(layout.page_tokens, layout.row_bytes(), static_cast<int>(slot.index)),
         KvType(layout.precision)});
    seqs.push_back(
        {&q_[t0 * Q], &step_.positions[static_cast<size_t>(t0)], n, pages[s].data(), &attn_[t0 * Q]});
  }
  std::vector<bool> done(seqs.size(), false);
  for (size_t s = 0; s < seqs.size(); ++s) {
    if (done[s]) continue;
    std::vector<kernels::AttentionSeq> same;
    for (size_t o = s; o < seqs.size(); ++o)
      if (!done[o] && kinds[o] == kinds[s]) {
        same.push_back(seqs[o]);
        done[o] = true;
      }
    ap.kv_type = kinds[s].second;
    kernels::AttentionPagedMulti(same, kinds[s].first, ap, step_.pool);
  }
  // 3. Output gate (qwen35): attn *= sigmoid(gate); output projection.
  if (hp.attn_output_gate) {
    Sigmoid(gate_.data(), T * Q, gate_.data());
    kernels::Mul(attn_.data(), gate_.data(), T * Q, attn_.data());
  }
  step_.linear.NewInput();
  step_.linear.Mul(L.wo, attn_.data(), Q, out);
  if (L.bo)
    for (int64_t t = 0; t < T; ++t) kernels::Add(&out[t * E], L.bo.f32(), E, &out[t * E]);
  return Status::Ok();
}

}  // namespace llamay::model::internal
