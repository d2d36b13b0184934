#include "model/model.h"

#include <array>
#include <limits>
#include <optional>

#include "base/check.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/recurrent_chunk.h"
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
    if (in.recurrent_undo && in.tokens.size() > RewindableTokens(in.context->size()))
      return InvalidArgumentError("forward: a step of " + std::to_string(in.tokens.size()) + " tokens from position " +
                                  std::to_string(in.context->size()) + " cannot be taken back (at most " +
                                  std::to_string(RewindableTokens(in.context->size())) + ")");
  }
  return Status::Ok();
}

size_t Model::RewindableTokens(size_t position) const {
  if (!hp_.has_recurrent()) return std::numeric_limits<size_t>::max();
  // A step whose last token lands on a chunk's last slot folds the chunk: that fold could not be undone.
  return kernels::kRecurrentChunk - 1 - position % kernels::kRecurrentChunk;
}

namespace internal {

// One recurrent layer's part of a RecurrentUndo: [K-1][C] conv window, the pending part (header and
// slots), [n][C] conv inputs.
void SaveRecurrentUndo(const SsmParams& s, const float* conv_state, const float* x, int64_t x_stride, int64_t n,
                       RecurrentUndo* undo) {
  const size_t C = s.conv_channels(), window = s.conv_state_floats();
  const size_t pending = s.scan_state_floats() - s.folded_floats();
  std::vector<float>& d = undo->data;
  d.insert(d.end(), conv_state, conv_state + window);
  const float* scan = conv_state + window;
  d.insert(d.end(), scan + s.folded_floats(), scan + s.folded_floats() + pending);
  for (int64_t t = 0; t < n; ++t) d.insert(d.end(), x + t * x_stride, x + t * x_stride + C);
}

}  // namespace internal

Status Model::RewindRecurrent(kv::Context& ctx, size_t n, const RecurrentUndo& undo) const {
  if (!hp_.has_recurrent()) return ctx.Rollback(n);
  const size_t size = ctx.size(), T = undo.tokens;
  if (size != undo.start + T || ctx.state_position() != size)
    return FailedPreconditionError("rewind: the context is not as the recorded step left it");
  if (n <= undo.start || n > size)
    return OutOfRangeError("rewind to " + std::to_string(n) + " outside (" + std::to_string(undo.start) + ", " +
                           std::to_string(size) + "]");
  if (n == size) return Status::Ok();
  const SsmParams& s = hp_.ssm;
  const size_t C = s.conv_channels(), K1 = s.d_conv - 1, window = s.conv_state_floats();
  const size_t folded = s.folded_floats(), pending = s.scan_state_floats() - folded;
  const size_t per_layer = window + pending + T * C;
  size_t layers = 0;
  for (const kv::LayerSlot& slot : layer_slots_) layers += slot.kind == kv::LayerKind::kRecurrent;
  if (undo.data.size() != layers * per_layer) return FailedPreconditionError("rewind: the record does not fit the model");
  LLAMAY_ASSIGN_OR_RETURN(uint8_t* state, ctx.MutableState());
  const size_t kept = n - undo.start;                              // tokens of the step that stay
  const size_t m0 = undo.start % kernels::kRecurrentChunk;         // pending before the step
  const std::array<uint64_t, 3> slot = s.pending_slot_floats();
  const float* saved = undo.data.data();
  for (const kv::LayerSlot& ls : layer_slots_) {
    if (ls.kind != kv::LayerKind::kRecurrent) continue;
    float* conv = reinterpret_cast<float*>(state + uint64_t{ls.index} * s.state_bytes());
    const float* saved_window = saved;
    const float* saved_pending = saved + window;
    const float* inputs = saved + window + pending;
    // The conv window: the last K-1 rows of (the window before the step, the kept tokens' inputs).
    for (size_t i = 0; i < K1; ++i) {
      const size_t g = kept + i;
      const float* row = g < K1 ? saved_window + g * C : inputs + (g - K1) * C;
      std::copy(row, row + C, conv + i * C);
    }
    // The pending part: the header as before the step with m0 + kept pending; the slots the dropped tokens
    // wrote get back what they held (no fold happened: RewindableTokens).
    float* head = conv + window + folded;
    std::copy(saved_pending, saved_pending + kernels::kChunkHeaderFloats, head);
    kernels::SetChunkPending(head, static_cast<int>(m0 + kept));
    size_t array = kernels::kChunkHeaderFloats;
    for (uint64_t w : slot) {
      for (size_t p = m0 + kept; p < m0 + T; ++p)
        std::copy(saved_pending + array + p * w, saved_pending + array + (p + 1) * w, head + array + p * w);
      array += kernels::kRecurrentChunk * w;
    }
    saved += per_layer;
  }
  return ctx.RollbackRewound(n);
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

void RmsNormRows(const internal::Step& step, const float* x, const Tensor& w, int64_t n, float eps, float* y) {
  step.ForRows(step.n_tokens, n, [&](int64_t t) { kernels::RmsNorm(&x[t * n], w.f32(), n, eps, &y[t * n]); });
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
  for (const SeqInput& in : batch)
    if (in.recurrent_undo) *in.recurrent_undo = {in.context->size(), in.tokens.size(), {}};
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
    RmsNormRows(step, x.data(), L.attn_norm, E, hp_.rms_eps, xn.data());
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
    if (L.attn_post_norm) RmsNormRows(step, out.data(), L.attn_post_norm, E, hp_.rms_eps, out.data());
    Residual(out.data(), hp_.residual_scale, T * E, x.data());
    if (hp_.has_ffn(li)) {
      RmsNormRows(step, x.data(), L.ffn_norm, E, hp_.rms_eps, xn.data());
      if (hp_.ffns[li] == FfnKind::kMoe) {
        moe->Run(li, xn.data(), out.data());
      } else {
        ffn->Run(li, xn.data(), out.data());
      }
      if (L.ffn_post_norm) RmsNormRows(step, out.data(), L.ffn_post_norm, E, hp_.rms_eps, out.data());
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
      if (!in.tokens.empty() && !in.keep_windows) in.context->TrimWindows();

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
