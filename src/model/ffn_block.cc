// The gated feed-forward block (SwiGLU or GeGLU): see FfnBlock in blocks.h.
#include "kernels/recurrent.h"
#include "model/blocks.h"

namespace llamay::model::internal {

FfnBlock::FfnBlock(Step& step, uint32_t n_ff) : step_(step), n_ff_(n_ff) {
  const size_t n = static_cast<size_t>(step.n_tokens) * n_ff;
  gate_.resize(n);
  up_.resize(n);
  act_.resize(n);
}

void FfnBlock::Run(uint32_t layer, const float* xn, float* out) {
  const LayerWeights& L = step_.w.layers[layer];
  Run(L.w_gate, L.w_up, L.w_down, xn, out);
}

void FfnBlock::Run(const Tensor& gate, const Tensor& up, const Tensor& down, const float* xn, float* out) {
  const int64_t E = step_.hp.n_embd, F = n_ff_;
  step_.linear.NewInput();
  step_.linear.Mul(gate, xn, E, gate_.data());
  step_.linear.Mul(up, xn, E, up_.data());
  const bool geglu = step_.hp.ffn_act == FfnActivation::kGeGlu;
  step_.ForRows(step_.n_tokens, F, [&](int64_t t) {
    const float *g = &gate_[t * F], *u = &up_[t * F];
    if (geglu) {
      kernels::GeGlu(g, u, F, &act_[t * F]);
    } else {
      kernels::SwiGlu(g, u, F, &act_[t * F]);
    }
  });
  step_.linear.NewInput();
  step_.linear.Mul(down, act_.data(), F, out);
}

}  // namespace llamay::model::internal
