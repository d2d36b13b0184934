// The Mamba-2 mixer: see Mamba2Block in blocks.h. The order of operations is llama.cpp's
// build_mamba2_layer; the arithmetic of each operation is the kernels' (kernels/recurrent.h).
#include "kernels/recurrent.h"
#include "kernels/ssm_scan.h"
#include "model/blocks.h"

namespace llamay::model::internal {

Mamba2Block::Mamba2Block(Step& step) : step_(step) {
  const size_t T = static_cast<size_t>(step.n_tokens);
  zxbcdt_.resize(T * step.hp.ssm.in_proj_dim());
  y_.resize(T * step.hp.ssm.d_inner);
}

void Mamba2Block::Run(uint32_t layer, const float* xn, std::span<uint8_t* const> states, float* out) {
  const HParams& hp = step_.hp;
  const SsmParams& s = hp.ssm;
  const LayerWeights& L = step_.w.layers[layer];
  const int64_t T = step_.n_tokens, E = hp.n_embd, R = s.in_proj_dim(), C = s.conv_channels();
  const int64_t DI = s.d_inner, GN = int64_t{s.n_group} * s.d_state;
  const uint64_t layer_offset = uint64_t{step_.layer_slots[layer].index} * s.state_bytes();
  // 1. in_proj for every token: rows z [0, DI), xBC [DI, DI + C), dt [DI + C, R).
  step_.linear.NewInput();
  step_.linear.Mul(L.ssm_in, xn, E, zxbcdt_.data());
  // 2. Per sequence, in token order, on its own state: the conv (in place over xBC), then the scan.
  for (size_t q = 0; q < step_.batch.size(); ++q) {
    const int64_t n = step_.seq_tokens(q);
    if (n == 0) continue;
    float* conv_state = reinterpret_cast<float*>(states[q] + layer_offset);  // [K-1][C]
    float* ssm_state = conv_state + s.conv_state_floats();  // the scan state (kernels/ssm_scan.h)
    float* row0 = &zxbcdt_[static_cast<size_t>(step_.seq_begin[q] * R)];
    if (step_.batch[q].recurrent_undo) SaveRecurrentUndo(s, conv_state, row0 + DI, R, n, step_.batch[q].recurrent_undo);
    kernels::CausalConv1dArgs conv;
    conv.n_tokens = n;
    conv.channels = C;
    conv.kernel = static_cast<int>(s.d_conv);
    conv.x = row0 + DI;
    conv.x_stride = R;
    conv.weight = L.ssm_conv1d.f32();
    conv.bias = L.ssm_conv1d_b.f32();
    conv.silu = true;
    conv.conv_state = conv_state;
    conv.y = row0 + DI;
    conv.y_stride = R;
    kernels::CausalConv1d(conv);
    kernels::SsmScanArgs scan;
    scan.n_tokens = n;
    scan.n_heads = static_cast<int>(s.n_head);
    scan.head_dim = static_cast<int>(s.head_dim());
    scan.d_state = static_cast<int>(s.d_state);
    scan.n_groups = static_cast<int>(s.n_group);
    scan.state = ssm_state;
    scan.x = row0 + DI;
    scan.x_stride = R;
    scan.dt = row0 + DI + C;
    scan.dt_stride = R;
    scan.dt_bias = L.ssm_dt_b.f32();
    scan.a = L.ssm_a.f32();
    scan.b = row0 + 2 * DI;
    scan.c = row0 + 2 * DI + GN;
    scan.bc_stride = R;
    scan.d = L.ssm_d.f32();
    scan.y = &y_[static_cast<size_t>(step_.seq_begin[q] * DI)];
    scan.y_stride = DI;
    kernels::SsmScan(scan, step_.pool);
  }
  // 3. y = rms_norm_groups(silu(z) * y) * ssm_norm, token by token (z is strided inside zxbcdt).
  kernels::GroupNormParams gp;
  gp.n_groups = s.n_group;
  gp.group_size = DI / s.n_group;
  gp.weight_len = DI;
  gp.eps = hp.rms_eps;
  gp.order = kernels::GateOrder::kGateThenNorm;
  for (int64_t t = 0; t < T; ++t)
    kernels::GroupRmsNormGated(&y_[t * DI], &zxbcdt_[t * R], L.ssm_norm.f32(), 1, gp, &y_[t * DI]);
  // 4. out_proj.
  step_.linear.NewInput();
  step_.linear.Mul(L.ssm_out, y_.data(), DI, out);
}

}  // namespace llamay::model::internal
