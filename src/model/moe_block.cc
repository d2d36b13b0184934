// The mixture-of-experts FFN: see MoeBlock in blocks.h and MoeParams in hparams.h.
#include <algorithm>
#include <cmath>

#include "model/blocks.h"
#include "model/gating.h"

namespace llamay::model::internal {
namespace {

// gpt-oss's clamped SwiGLU (FfnActivation::kSwiGluOai), element by element as llama.cpp computes it.
void SwiGluOai(const float* gate, const float* up, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = std::min(gate[i], kSwiGluOaiLimit);
    const float u = std::clamp(up[i], -kSwiGluOaiLimit, kSwiGluOaiLimit);
    y[i] = g / (1.0f + std::exp(kSwiGluOaiAlpha * -g)) * (u + 1.0f);
  }
}

}  // namespace

MoeBlock::MoeBlock(Step& step) : step_(step) {
  const MoeParams& m = step.hp.moe;
  const size_t T = static_cast<size_t>(step.n_tokens), X = m.n_expert, k = m.n_expert_used;
  logits_.resize(T * X);
  probs_.resize(T * X);
  chosen_.resize(T * k);
  weights_.resize(T * k);
  slot_row_.resize(T * k);
  rows_.resize(T * k);
  expert_begin_.resize(X + 1);
  gate_.resize(T * k * m.n_ff_expert);
  up_.resize(gate_.size());
  act_.resize(gate_.size());
  down_.resize(T * k * step.hp.n_embd);
  if (m.n_ff_shared > 0) {
    shared_.emplace(step, m.n_ff_shared);
    shared_out_.resize(T * step.hp.n_embd);
    if (m.shared_gated) shared_gate_.resize(T);
  }
}

void MoeBlock::Route(const float* logits, float* probs, int32_t* chosen, float* weights) const {
  const MoeParams& m = step_.hp.moe;
  const int64_t X = m.n_expert, k = m.n_expert_used;
  switch (m.gating) {
    case MoeGating::kSoftmax:
      kernels::Softmax(logits, X, probs);
      break;
    case MoeGating::kSigmoid:
      Sigmoid(logits, X, probs);
      break;
    case MoeGating::kSoftmaxTopK:
      std::copy(logits, logits + X, probs);  // ranked by logit; the softmax runs over the chosen below
      break;
  }
  // The k largest, largest first; equal values go to the lower index (a strict > over ascending indices).
  for (int64_t j = 0; j < k; ++j) {
    int32_t best = -1;
    for (int64_t e = 0; e < X; ++e) {
      if (std::find(chosen, chosen + j, static_cast<int32_t>(e)) != chosen + j) continue;
      if (best < 0 || probs[e] > probs[best]) best = static_cast<int32_t>(e);
    }
    chosen[j] = best;
    weights[j] = probs[best];
  }
  if (m.gating == MoeGating::kSoftmaxTopK) {
    float top[kMaxExpertsUsed];
    std::copy(weights, weights + k, top);
    kernels::Softmax(top, k, weights);
  }
  if (m.norm_topk) {
    float sum = 0.0f;
    for (int64_t j = 0; j < k; ++j) sum += weights[j];
    for (int64_t j = 0; j < k; ++j) weights[j] /= sum;
  }
  if (m.weights_scale != 1.0f)
    for (int64_t j = 0; j < k; ++j) weights[j] *= m.weights_scale;
}

void MoeBlock::AddExpertBias(const Tensor& bias, int64_t width, float* grouped) const {
  const int64_t X = step_.hp.moe.n_expert;
  for (int64_t e = 0; e < X; ++e) {
    const float* b = bias.f32() + e * width;
    for (int64_t r = expert_begin_[e]; r < expert_begin_[e + 1]; ++r)
      kernels::Add(&grouped[r * width], b, width, &grouped[r * width]);
  }
}

void MoeBlock::Run(uint32_t layer, const float* xn, float* out) {
  const LayerWeights& L = step_.w.layers[layer];
  const MoeParams& m = step_.hp.moe;
  const int64_t T = step_.n_tokens, E = step_.hp.n_embd, F = m.n_ff_expert, X = m.n_expert,
                k = m.n_expert_used;
  kernels::ThreadPool* pool = step_.pool;

  // 1. Route every token: its k experts, largest weight first, and their weights.
  step_.linear.NewInput();
  step_.linear.Mul(L.router, xn, E, logits_.data());
  for (int64_t t = 0; t < T; ++t) {
    if (L.router_b) kernels::Add(&logits_[t * X], L.router_b.f32(), X, &logits_[t * X]);
    Route(&logits_[t * X], &probs_[t * X], &chosen_[t * k], &weights_[t * k]);
  }

  // 2. Group the (token, slot) pairs by expert, tokens ascending within an expert: expert e's rows are
  //    [expert_begin_[e], expert_begin_[e + 1]) of the grouped buffers; slot_row_ says where each pair went.
  std::fill(expert_begin_.begin(), expert_begin_.end(), 0);
  for (int64_t i = 0; i < T * k; ++i) ++expert_begin_[chosen_[i] + 1];
  for (int64_t e = 0; e < X; ++e) expert_begin_[e + 1] += expert_begin_[e];
  std::vector<int64_t> fill(expert_begin_.begin(), expert_begin_.end() - 1);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t j = 0; j < k; ++j) {
      const int64_t row = fill[chosen_[t * k + j]]++;
      rows_[row] = static_cast<int32_t>(t);
      slot_row_[t * k + j] = row;
    }
  }

  // 3. gate and up of every used expert over its rows, in one parallel loop. The layer input is quantised
  //    once (shared by gate and up when their formats agree) and its rows are copied into expert order:
  //    copying changes no row's arithmetic, so a token's result does not depend on the others routed with it.
  const kernels::ActFormat fg = kernels::ActivationFormat(L.gate_exps.type);
  const kernels::ActFormat fu = kernels::ActivationFormat(L.up_exps.type);
  x_all_.Prepare(pool, fg, xn, T, E);
  x_gate_.Gather(x_all_, rows_);
  if (fu != fg) {
    x_all_.Prepare(pool, fu, xn, T, E);
    x_up_.Gather(x_all_, rows_);
  }
  const kernels::PreparedActivations& x_up = fu != fg ? x_up_ : x_gate_;
  products_.clear();
  for (int64_t e = 0; e < X; ++e) {
    const int64_t r0 = expert_begin_[e], n = expert_begin_[e + 1] - r0;
    if (n == 0) continue;
    products_.push_back({Matrix(L.gate_exps.Slab(e)), &x_gate_, &gate_[r0 * F], r0, n});
    products_.push_back({Matrix(L.up_exps.Slab(e)), &x_up, &up_[r0 * F], r0, n});
  }
  kernels::MatMulBatch(pool, products_);
  if (L.gate_exps_b) {  // each grouped row takes its expert's biases
    AddExpertBias(L.gate_exps_b, F, gate_.data());
    AddExpertBias(L.up_exps_b, F, up_.data());
  }
  step_.ForRows(T * k, F, [&](int64_t r) {
    if (m.act == FfnActivation::kSwiGluOai) {
      SwiGluOai(&gate_[r * F], &up_[r * F], F, &act_[r * F]);
    } else {
      kernels::SwiGlu(&gate_[r * F], &up_[r * F], F, &act_[r * F]);
    }
  });

  // 4. down of every used expert over its rows.
  act_prep_.Prepare(pool, kernels::ActivationFormat(L.down_exps.type), act_.data(), T * k, F);
  products_.clear();
  for (int64_t e = 0; e < X; ++e) {
    const int64_t r0 = expert_begin_[e], n = expert_begin_[e + 1] - r0;
    if (n == 0) continue;
    products_.push_back({Matrix(L.down_exps.Slab(e)), &act_prep_, &down_[r0 * E], r0, n});
  }
  kernels::MatMulBatch(pool, products_);
  if (L.down_exps_b) AddExpertBias(L.down_exps_b, E, down_.data());

  // 5. Each token's weighted sum over its experts, in slot order.
  step_.ForRows(T, k * E, [&](int64_t t) {
    float* o = &out[t * E];
    for (int64_t j = 0; j < k; ++j) {
      const float w = weights_[t * k + j];
      const float* d = &down_[slot_row_[t * k + j] * E];
      if (j == 0) {
        for (int64_t i = 0; i < E; ++i) o[i] = w * d[i];
      } else {
        for (int64_t i = 0; i < E; ++i) o[i] = o[i] + w * d[i];
      }
    }
  });

  // 6. The shared expert, which every token runs: its output is added, scaled by its gate when it has one.
  if (!shared_) return;
  shared_->Run(L.gate_shexp, L.up_shexp, L.down_shexp, xn, shared_out_.data());
  if (m.shared_gated) {
    step_.linear.NewInput();
    step_.linear.Mul(L.gate_inp_shexp, xn, E, shared_gate_.data());  // [T][1]
    Sigmoid(shared_gate_.data(), T, shared_gate_.data());
  }
  for (int64_t t = 0; t < T; ++t) {
    const float g = m.shared_gated ? shared_gate_[t] : 1.0f;
    float* o = &out[t * E];
    const float* s = &shared_out_[t * E];
    for (int64_t i = 0; i < E; ++i) o[i] = o[i] + g * s[i];
  }
}

}  // namespace llamay::model::internal
