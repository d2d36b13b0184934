// The gated-delta-net mixer of Qwen3.5: see DeltaNetBlock in blocks.h. The order of operations is
// llama.cpp's (src/models/qwen35.cpp, build_layer_attn_linear); the arithmetic of each operation is the
// kernels' (kernels/recurrent.h) or gating.h's.
#include "kernels/recurrent.h"
#include "kernels/delta_rule.h"
#include "model/blocks.h"
#include "model/gating.h"

namespace llamay::model::internal {

DeltaNetBlock::DeltaNetBlock(Step& step) : step_(step) {
  const SsmParams& s = step.hp.ssm;
  const size_t T = static_cast<size_t>(step.n_tokens);
  qkv_.resize(T * s.conv_channels());
  z_.resize(T * s.d_inner);
  beta_.resize(T * s.n_head);
  g_.resize(T * s.n_head);
  y_.resize(T * s.d_inner);
}

void DeltaNetBlock::Run(uint32_t layer, const float* xn, std::span<uint8_t* const> states, float* out) {
  const HParams& hp = step_.hp;
  const SsmParams& s = hp.ssm;
  const LayerWeights& L = step_.w.layers[layer];
  const int64_t T = step_.n_tokens, E = hp.n_embd, C = s.conv_channels(), DI = s.d_inner;
  const int64_t HV = s.n_head, HK = s.n_group, DK = s.d_state, DV = s.head_dim();
  const uint64_t layer_offset = uint64_t{step_.layer_slots[layer].index} * s.state_bytes();
  // 1. Projections of every token: q|k|v (the conv's input), the output gate z, beta and alpha.
  step_.linear.NewInput();
  step_.linear.Mul(L.ssm_qkv, xn, E, qkv_.data());
  step_.linear.Mul(L.ssm_z, xn, E, z_.data());
  step_.linear.Mul(L.ssm_beta, xn, E, beta_.data());
  step_.linear.Mul(L.ssm_alpha, xn, E, g_.data());
  // 2. beta = sigmoid(beta); the log decay g = ssm_a * softplus(alpha + dt_bias) (ssm_a is -exp(A_log)).
  Sigmoid(beta_.data(), T * HV, beta_.data());
  const float* a = L.ssm_a.f32();
  const float* dt_bias = L.ssm_dt_b.f32();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < HV; ++h) {
      float& g = g_[static_cast<size_t>(t * HV + h)];
      g = Softplus(g + dt_bias[h]) * a[h];
    }
  // 3. Per sequence, in token order, on its own state: the conv (in place over q|k|v, SiLU, no bias), the
  //    L2 norm of each q and k head, then the delta rule into y.
  for (size_t q = 0; q < step_.batch.size(); ++q) {
    const int64_t n = step_.seq_tokens(q), t0 = step_.seq_begin[q];
    if (n == 0) continue;
    float* conv_state = reinterpret_cast<float*>(states[q] + layer_offset);  // [K-1][C]
    float* delta_state = conv_state + s.conv_state_floats();  // the rule state (kernels/delta_rule.h)
    float* row0 = &qkv_[static_cast<size_t>(t0 * C)];
    if (step_.batch[q].recurrent_undo) SaveRecurrentUndo(s, conv_state, row0, C, n, step_.batch[q].recurrent_undo);
    kernels::CausalConv1dArgs conv;
    conv.n_tokens = n;
    conv.channels = C;
    conv.kernel = static_cast<int>(s.d_conv);
    conv.x = row0;
    conv.x_stride = C;
    conv.weight = L.ssm_conv1d.f32();
    conv.bias = nullptr;
    conv.silu = true;
    conv.conv_state = conv_state;
    conv.y = row0;
    conv.y_stride = C;
    kernels::CausalConv1d(conv);
    for (int64_t t = 0; t < n; ++t) L2NormHeads(row0 + t * C, 2 * HK, DK, hp.rms_eps);  // q and k heads
    kernels::GatedDeltaRuleArgs rule;
    rule.n_tokens = n;
    rule.n_k_heads = static_cast<int>(HK);
    rule.n_v_heads = static_cast<int>(HV);
    rule.k_dim = static_cast<int>(DK);
    rule.v_dim = static_cast<int>(DV);
    rule.state = delta_state;
    rule.q = row0;
    rule.q_stride = C;
    rule.k = row0 + HK * DK;
    rule.k_stride = C;
    rule.v = row0 + 2 * HK * DK;
    rule.v_stride = C;
    rule.g = &g_[static_cast<size_t>(t0 * HV)];
    rule.beta = &beta_[static_cast<size_t>(t0 * HV)];
    rule.out = &y_[static_cast<size_t>(t0 * DI)];
    kernels::GatedDeltaRule(rule, step_.pool);
  }
  // 4. y = rms_norm(y) * ssm_norm * silu(z) per value head (one weight vector shared by the heads).
  kernels::GroupNormParams gp;
  gp.n_groups = HV;
  gp.group_size = DV;
  gp.weight_len = DV;
  gp.eps = hp.rms_eps;
  gp.order = kernels::GateOrder::kNormThenGate;
  kernels::GroupRmsNormGated(y_.data(), z_.data(), L.ssm_norm.f32(), T, gp, y_.data());
  // 5. Output projection.
  step_.linear.NewInput();
  step_.linear.Mul(L.ssm_out, y_.data(), DI, out);
}

}  // namespace llamay::model::internal
