// The shared machinery of a forward step: weight matrices as kernels see them, the batched linear layer
// with its activation cache, and the token bookkeeping of a batch.
#include "model/blocks.h"

namespace llamay::model::internal {

kernels::WeightMatrix Matrix(const Tensor& t) {
  kernels::WeightMatrix w;
  w.type = t.type;
  w.data = t.data;
  w.n_out = t.rows;
  w.n_in = t.cols;
  return w;
}

void Linear::Mul(const Tensor& w, const float* in, int64_t n_in, float* out) {
  const kernels::ActFormat f = kernels::ActivationFormat(w.type);
  if (prep_.n_tokens() != n_tokens_ || prep_.n_in() != n_in || prep_.format() != f || src_ != in) {
    prep_.Prepare(pool_, f, in, n_tokens_, n_in);
    src_ = in;
  }
  kernels::MatMul(pool_, Matrix(w), prep_, out);
}

namespace {

int64_t CountTokens(std::span<const SeqInput> batch) {
  int64_t n = 0;
  for (const SeqInput& in : batch) n += static_cast<int64_t>(in.tokens.size());
  return n;
}

}  // namespace

Step::Step(const HParams& h, const Weights& wt, kernels::ThreadPool* p, std::span<const SeqInput> b,
           const std::vector<kv::LayerSlot>& slots)
    : hp(h), w(wt), pool(p), batch(b), layer_slots(slots), n_tokens(CountTokens(b)), linear(p, n_tokens) {
  ids.reserve(static_cast<size_t>(n_tokens));
  token_seq.reserve(static_cast<size_t>(n_tokens));
  positions.reserve(static_cast<size_t>(n_tokens));
  seq_begin.push_back(0);
  for (size_t s = 0; s < batch.size(); ++s) {
    // Positions start where the context stood before this step appended the tokens.
    const int64_t n = static_cast<int64_t>(batch[s].tokens.size());
    const int64_t start = static_cast<int64_t>(batch[s].context->size()) - n;
    ids.insert(ids.end(), batch[s].tokens.begin(), batch[s].tokens.end());
    for (int64_t i = 0; i < n; ++i) {
      token_seq.push_back(s);
      positions.push_back(start + i);
    }
    seq_begin.push_back(seq_begin.back() + n);
  }
}

}  // namespace llamay::model::internal
