#include "model/model.h"

#include <optional>

#include "base/check.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/blocks.h"

namespace llamay::model {

Result<std::unique_ptr<Model>> Model::Load(const std::string& path, int n_threads) {
  LLAMAY_ASSIGN_OR_RETURN(gguf::File f, gguf::File::Open(path));
  return FromFile(std::move(f), n_threads);
}

Result<std::unique_ptr<Model>> Model::FromFile(gguf::File file, int n_threads) {
  LLAMAY_ASSIGN_OR_RETURN(HParams hp, ReadHParams(file));
  LLAMAY_ASSIGN_OR_RETURN(Weights w, BindWeights(file, hp));
  auto pool = std::make_unique<kernels::ThreadPool>(n_threads);
  return std::unique_ptr<Model>(new Model(std::move(file), std::move(hp), std::move(w), std::move(pool)));
}

Model::Model(gguf::File file, HParams hp, Weights w, std::unique_ptr<kernels::ThreadPool> pool)
    : file_(std::move(file)), hp_(std::move(hp)), w_(std::move(w)), pool_(std::move(pool)) {
  // Where a layer's state lives does not depend on the page size or precision.
  layer_slots_ = KvLayoutFor(kv::kDefaultPageTokens, kv::KvPrecision::kF32).Groups().slots;
}

Status Model::CheckBatch(std::span<const SeqInput> batch) const {
  const kv::KvLayout want = KvLayoutFor(kv::kDefaultPageTokens, kv::KvPrecision::kF32);
  for (const SeqInput& in : batch) {
    if (in.context == nullptr || !in.context->valid()) return InvalidArgumentError("forward: empty context");
    const kv::KvLayout& l = in.context->layout();
    bool fits = l.n_layers == hp_.n_layer && l.n_kv_heads == hp_.n_head_kv && l.head_dim == hp_.head_dim &&
                (!hp_.has_recurrent() || l.recurrent_layer_bytes == want.recurrent_layer_bytes);
    for (uint32_t i = 0; fits && i < hp_.n_layer; ++i) fits = l.spec(i) == want.spec(i);
    if (!fits)
      return InvalidArgumentError("forward: context layout " + l.ToString() + " does not fit the model");
    for (int32_t t : in.tokens)
      if (t < 0 || static_cast<uint32_t>(t) >= hp_.n_vocab)
        return InvalidArgumentError("forward: token id " + std::to_string(t) + " outside the vocabulary of " +
                                    std::to_string(hp_.n_vocab));
    if (hp_.has_recurrent() && !in.tokens.empty() && in.context->state_position() != in.context->size())
      return FailedPreconditionError("forward: the recurrent state holds " +
                                     std::to_string(in.context->state_position()) + " of the context's " +
                                     std::to_string(in.context->size()) + " positions");
  }
  return Status::Ok();
}

namespace {

// Each sequence's live recurrent slot, private to its context (null for a sequence without tokens).
Status LiveStates(std::span<const SeqInput> batch, std::vector<uint8_t*>* states) {
  states->assign(batch.size(), nullptr);
  for (size_t s = 0; s < batch.size(); ++s) {
    if (batch[s].tokens.empty()) continue;
    LLAMAY_ASSIGN_OR_RETURN((*states)[s], batch[s].context->MutableState());
  }
  return Status::Ok();
}

void RmsNormRows(const float* x, const Tensor& w, int64_t n_tokens, int64_t n, float eps, float* y) {
  for (int64_t t = 0; t < n_tokens; ++t) kernels::RmsNorm(&x[t * n], w.f32(), n, eps, &y[t * n]);
}

// x += scale * out (scale 0: x += out), the residual add of a block.
void Residual(float* out, float scale, int64_t n, float* x) {
  if (scale != 0.0f) kernels::Scale(out, scale, n, out);
  kernels::Add(x, out, n, x);
}

}  // namespace

Status Model::Forward(std::span<const SeqInput> batch, std::vector<float>* logits) const {
  const int64_t E = hp_.n_embd;
  const bool recurrent = hp_.has_recurrent();
  // 1. Check, then append every sequence's tokens and make what the step writes private to each context
  //    (its KV pages, its recurrent slot): undone on failure, so nothing is half-applied, and no write
  //    below can fail for want of memory.
  LLAMAY_RETURN_IF_ERROR(CheckBatch(batch));
  std::vector<size_t> old_sizes;
  for (const SeqInput& in : batch) old_sizes.push_back(in.context->size());
  auto undo = [&](size_t n) {
    for (size_t s = 0; s < n; ++s) (void)batch[s].context->Rollback(old_sizes[s]);
  };
  for (size_t s = 0; s < batch.size(); ++s) {
    Status st = batch[s].context->Append(batch[s].tokens);
    if (st.ok()) st = batch[s].context->PrepareWrite(old_sizes[s]);
    if (!st.ok()) {
      undo(s + 1);
      return st;
    }
  }
  std::vector<uint8_t*> states;
  if (recurrent) {
    Status st = LiveStates(batch, &states);
    if (!st.ok()) {
      undo(batch.size());
      return st;
    }
  }
  internal::Step step(hp_, w_, pool_.get(), batch, layer_slots_);
  const int64_t T = step.n_tokens;
  if (T == 0) return Status::Ok();

  // 2. Embeddings.
  std::vector<float> x(static_cast<size_t>(T * E)), xn(x.size()), out(x.size());
  for (int64_t t = 0; t < T; ++t)
    kernels::EmbeddingRow(w_.tok_embd.type, w_.tok_embd.data, E, step.ids[static_cast<size_t>(t)], &x[t * E]);
  if (hp_.embedding_scale != 0.0f) kernels::Scale(x.data(), hp_.embedding_scale, T * E, x.data());

  // 3. Layers: norm, mixer, [post norm], residual, then (norm, FFN or experts, [post norm], residual).
  std::optional<internal::AttentionBlock> attention;
  std::optional<internal::Mamba2Block> mamba2;
  std::optional<internal::DeltaNetBlock> delta_net;
  std::optional<internal::FfnBlock> ffn;
  std::optional<internal::MoeBlock> moe;
  if (hp_.n_attention_layers() > 0) attention.emplace(step);
  for (MixerKind m : hp_.mixers) {
    if (m == MixerKind::kMamba2 && !mamba2) mamba2.emplace(step);
    if (m == MixerKind::kGatedDeltaNet && !delta_net) delta_net.emplace(step);
  }
  if (hp_.has_dense_ffn()) ffn.emplace(step, hp_.n_ff);
  if (hp_.has_moe()) moe.emplace(step);
  for (uint32_t li = 0; li < hp_.n_layer; ++li) {
    const LayerWeights& L = w_.layers[li];
    RmsNormRows(x.data(), L.attn_norm, T, E, hp_.rms_eps, xn.data());
    switch (hp_.mixers[li]) {
      case MixerKind::kAttention: {
        Status st = attention->Run(li, xn.data(), out.data());
        if (!st.ok()) {
          // PrepareWrite made every row this step writes private, so this is not expected; a recurrent
          // state already advanced by an earlier layer could not be undone.
          LLAMAY_CHECK(!recurrent) << "forward: a K/V row write failed after PrepareWrite: " << st.ToString();
          undo(batch.size());
          return st;
        }
        break;
      }
      case MixerKind::kMamba2:
        // Fetched again per layer: the pointer is valid until the context is next mutated (the attention
        // layers write rows). The slots are already private, so this neither allocates nor fails.
        LLAMAY_CHECK(LiveStates(batch, &states).ok()) << "forward: the live recurrent slot moved";
        mamba2->Run(li, xn.data(), states, out.data());
        break;
      case MixerKind::kGatedDeltaNet:
        LLAMAY_CHECK(LiveStates(batch, &states).ok()) << "forward: the live recurrent slot moved";
        delta_net->Run(li, xn.data(), states, out.data());
        break;
    }
    if (L.attn_post_norm) RmsNormRows(out.data(), L.attn_post_norm, T, E, hp_.rms_eps, out.data());
    Residual(out.data(), hp_.residual_scale, T * E, x.data());
    if (hp_.has_ffn(li)) {
      RmsNormRows(x.data(), L.ffn_norm, T, E, hp_.rms_eps, xn.data());
      if (hp_.ffns[li] == FfnKind::kMoe) {
        moe->Run(li, xn.data(), out.data());
      } else {
        ffn->Run(li, xn.data(), out.data());
      }
      if (L.ffn_post_norm) RmsNormRows(out.data(), L.ffn_post_norm, T, E, hp_.rms_eps, out.data());
      Residual(out.data(), hp_.residual_scale, T * E, x.data());
    }
  }

  // 4. Recurrent state: committed at the new size; a checkpoint where that size is on the layout's grid.
  if (recurrent) {
    for (const SeqInput& in : batch) {
      if (in.tokens.empty()) continue;
      const size_t n = in.context->size();
      LLAMAY_CHECK(in.context->CommitState(n).ok()) << "forward: commit of the recurrent state failed";
      const uint32_t every = in.context->layout().checkpoint_tokens;
      if (every != 0 && n % every == 0)
        LLAMAY_CHECK(in.context->Checkpoint().ok()) << "forward: checkpoint failed";
    }
  }

  // 4b. Sliding windows: the pages no later query reads are released, so a long context's windowed layers
  //     hold about window / page_tokens + 1 pages. Only after the step succeeded: the undo above needs them.
  if (!hp_.windows.empty())
    for (const SeqInput& in : batch)
      if (!in.tokens.empty()) in.context->TrimWindows();

  // 5. Output: final norm and logits for the requested positions only.
  std::vector<float> rows;
  int64_t t0 = 0;
  for (const SeqInput& in : batch) {
    const int64_t n = static_cast<int64_t>(in.tokens.size());
    for (int64_t i = in.all_logits ? 0 : n - 1; i < n && n > 0; ++i) {
      rows.resize(rows.size() + static_cast<size_t>(E));
      kernels::RmsNorm(&x[(t0 + i) * E], w_.output_norm.f32(), E, hp_.rms_eps,
                       &rows[rows.size() - static_cast<size_t>(E)]);
    }
    t0 += n;
  }
  const int64_t R = static_cast<int64_t>(rows.size()) / E;
  const size_t base = logits->size();
  logits->resize(base + static_cast<size_t>(R) * hp_.n_vocab);
  kernels::PreparedActivations out_prep;
  kernels::MatMul(pool_.get(), internal::Matrix(w_.output), rows.data(), R, logits->data() + base, &out_prep);
  if (hp_.logit_scale != 0.0f)
    kernels::Scale(logits->data() + base, 1.0f / hp_.logit_scale, R * hp_.n_vocab, logits->data() + base);
  return Status::Ok();
}

}  // namespace llamay::model
