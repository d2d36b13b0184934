// The gated feed-forward block (SwiGLU or GeGLU): see FfnBlock in blocks.h.
#include "kernels/recurrent.h"
#include "model/blocks.h"

namespace llamay::model::internal {

FfnBlock::FfnBlock(Step& step) : step_(step) {
  const size_t n = static_cast<size_t>(step.n_tokens) * step.hp.n_ff;
  gate_.resize(n);
  up_.resize(n);
  act_.resize(n);
}

void FfnBlock::Run(uint32_t layer, const float* xn, float* out) {
  const LayerWeights& L = step_.w.layers[layer];
  const int64_t E = step_.hp.n_embd, F = step_.hp.n_ff;
  step_.linear.NewInput();
  step_.linear.Mul(L.w_gate, xn, E, gate_.data());
  step_.linear.Mul(L.w_up, xn, E, up_.data());
  if (step_.hp.ffn_act == FfnActivation::kGeGlu) {
    kernels::GeGlu(gate_.data(), up_.data(), step_.n_tokens * F, act_.data());
  } else {
    kernels::SwiGlu(gate_.data(), up_.data(), step_.n_tokens * F, act_.data());
  }
  step_.linear.NewInput();
  step_.linear.Mul(L.w_down, act_.data(), F, out);
}

}  // namespace llamay::model::internal
