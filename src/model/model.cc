#include "model/model.h"

#include <cmath>
#include <cstring>

#include "model/ops.h"

namespace llamay::model {
namespace {

// Where each token of the batch belongs.
struct TokenSlot {
  size_t seq;    // index into the batch
  int64_t pos;   // its position in that sequence's context
};

}  // namespace

Result<std::unique_ptr<Model>> Model::Load(const std::string& path) {
  LLAMAY_ASSIGN_OR_RETURN(gguf::File f, gguf::File::Open(path));
  return FromFile(std::move(f));
}

Result<std::unique_ptr<Model>> Model::FromFile(gguf::File file) {
  LLAMAY_ASSIGN_OR_RETURN(HParams hp, ReadHParams(file));
  LLAMAY_ASSIGN_OR_RETURN(Weights w, BindWeights(file, hp));
  return std::unique_ptr<Model>(new Model(std::move(file), std::move(hp), std::move(w)));
}

Status Model::Forward(std::span<const SeqInput> batch, std::vector<float>* logits) const {
  const int64_t E = hp_.n_embd, Q = hp_.q_dim(), KV = hp_.kv_dim(), F = hp_.n_ff, D = hp_.head_dim;
  // 1. Validate, then append every sequence's tokens (undone on failure: nothing half-applied).
  std::vector<TokenSlot> slots;
  std::vector<int32_t> ids;
  for (size_t s = 0; s < batch.size(); ++s) {
    const SeqInput& in = batch[s];
    if (in.context == nullptr || !in.context->valid()) return InvalidArgumentError("forward: empty context");
    const kv::KvLayout& l = in.context->layout();
    if (l.n_layers != hp_.n_layer || l.n_kv_heads != hp_.n_head_kv || l.head_dim != hp_.head_dim)
      return InvalidArgumentError("forward: context layout " + l.ToString() + " does not fit the model");
    for (int32_t t : in.tokens)
      if (t < 0 || static_cast<uint32_t>(t) >= hp_.n_vocab)
        return InvalidArgumentError("forward: token id " + std::to_string(t) + " outside the vocabulary of " +
                                    std::to_string(hp_.n_vocab));
    const int64_t start = static_cast<int64_t>(in.context->size());
    for (size_t i = 0; i < in.tokens.size(); ++i) slots.push_back({s, start + static_cast<int64_t>(i)});
    ids.insert(ids.end(), in.tokens.begin(), in.tokens.end());
  }
  std::vector<size_t> old_sizes;
  for (const SeqInput& in : batch) old_sizes.push_back(in.context->size());
  auto undo = [&](size_t n) {
    for (size_t s = 0; s < n; ++s) (void)batch[s].context->Truncate(old_sizes[s]);
  };
  for (size_t s = 0; s < batch.size(); ++s) {
    Status st = batch[s].context->Append(batch[s].tokens);
    if (!st.ok()) {
      undo(s);
      return st;
    }
  }
  const int64_t T = static_cast<int64_t>(slots.size());
  if (T == 0) return Status::Ok();

  // 2. Embeddings.
  std::vector<float> x(static_cast<size_t>(T * E)), xn(x.size());
  for (int64_t t = 0; t < T; ++t) ops::GetRow(w_.tok_embd, ids[static_cast<size_t>(t)], &x[static_cast<size_t>(t * E)]);

  std::vector<float> q(static_cast<size_t>(T * Q)), k(static_cast<size_t>(T * KV)), v(k.size());
  std::vector<float> attn(q.size()), proj(x.size());
  std::vector<float> gate(static_cast<size_t>(T * F)), up(gate.size()), act(gate.size());
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const bool neox = hp_.rope_type == RopeType::kNeox;
  const float* freq_factors = w_.rope_freqs ? w_.rope_freqs.f32() : nullptr;
  std::vector<std::vector<const uint8_t*>> pages(batch.size());

  for (uint32_t li = 0; li < hp_.n_layer; ++li) {
    const LayerWeights& L = w_.layers[li];
    // 3. Attention block.
    for (int64_t t = 0; t < T; ++t) ops::RmsNorm(&x[t * E], L.attn_norm.f32(), E, hp_.rms_eps, &xn[t * E]);
    ops::MatMul(L.wq, xn.data(), T, q.data());
    ops::MatMul(L.wk, xn.data(), T, k.data());
    ops::MatMul(L.wv, xn.data(), T, v.data());
    for (int64_t t = 0; t < T; ++t) {
      float* qt = &q[t * Q];
      float* kt = &k[t * KV];
      if (L.bq) {
        for (int64_t i = 0; i < Q; ++i) qt[i] += L.bq.f32()[i];
        for (int64_t i = 0; i < KV; ++i) kt[i] += L.bk.f32()[i];
        for (int64_t i = 0; i < KV; ++i) v[t * KV + i] += L.bv.f32()[i];
      }
      if (L.q_norm) {
        for (int64_t h = 0; h < hp_.n_head; ++h) ops::RmsNorm(qt + h * D, L.q_norm.f32(), D, hp_.rms_eps, qt + h * D);
        for (int64_t h = 0; h < hp_.n_head_kv; ++h) ops::RmsNorm(kt + h * D, L.k_norm.f32(), D, hp_.rms_eps, kt + h * D);
      }
      const int64_t pos = slots[static_cast<size_t>(t)].pos;
      ops::Rope(qt, hp_.n_head, D, hp_.n_rot, pos, hp_.rope_theta, hp_.rope_freq_scale, neox, freq_factors);
      ops::Rope(kt, hp_.n_head_kv, D, hp_.n_rot, pos, hp_.rope_theta, hp_.rope_freq_scale, neox, freq_factors);
      kv::Context* ctx = batch[slots[static_cast<size_t>(t)].seq].context;
      Status s1 = ctx->WriteRow(static_cast<size_t>(pos), li, kv::KvKind::kKey, std::span<const float>(kt, KV));
      Status s2 = ctx->WriteRow(static_cast<size_t>(pos), li, kv::KvKind::kValue,
                                std::span<const float>(&v[t * KV], KV));
      if (!s1.ok() || !s2.ok()) {
        undo(batch.size());
        return s1.ok() ? s2 : s1;
      }
    }
    // Attention reads K/V back from the pages (as stored, in the cache's precision), so a token computes
    // the same values whether its neighbours in the batch were written in this step or an earlier one.
    for (size_t s = 0; s < batch.size(); ++s) pages[s] = batch[s].context->PageData();
    for (int64_t t = 0; t < T; ++t) {
      const TokenSlot& slot = slots[static_cast<size_t>(t)];
      const kv::KvLayout& layout = batch[slot.seq].context->layout();
      ops::AttendPaged(&q[t * Q], layout, pages[slot.seq].data(), li, slot.pos + 1, hp_.n_head, scale, &attn[t * Q]);
    }
    ops::MatMul(L.wo, attn.data(), T, proj.data());
    for (size_t i = 0; i < x.size(); ++i) x[i] += proj[i];
    // 4. Feed-forward block (SwiGLU).
    for (int64_t t = 0; t < T; ++t) ops::RmsNorm(&x[t * E], L.ffn_norm.f32(), E, hp_.rms_eps, &xn[t * E]);
    ops::MatMul(L.w_gate, xn.data(), T, gate.data());
    ops::MatMul(L.w_up, xn.data(), T, up.data());
    ops::SwiGlu(gate.data(), up.data(), T * F, act.data());
    ops::MatMul(L.w_down, act.data(), T, proj.data());
    for (size_t i = 0; i < x.size(); ++i) x[i] += proj[i];
  }

  // 5. Output: final norm and logits for the requested positions only.
  std::vector<float> rows;
  int64_t t0 = 0;
  for (const SeqInput& in : batch) {
    const int64_t n = static_cast<int64_t>(in.tokens.size());
    for (int64_t i = in.all_logits ? 0 : n - 1; i < n && n > 0; ++i) {
      const int64_t t = t0 + i;
      rows.resize(rows.size() + static_cast<size_t>(E));
      ops::RmsNorm(&x[t * E], w_.output_norm.f32(), E, hp_.rms_eps, &rows[rows.size() - static_cast<size_t>(E)]);
    }
    t0 += n;
  }
  const int64_t R = static_cast<int64_t>(rows.size()) / E;
  const size_t base = logits->size();
  logits->resize(base + static_cast<size_t>(R) * hp_.n_vocab);
  ops::MatMul(w_.output, rows.data(), R, logits->data() + base);
  return Status::Ok();
}

}  // namespace llamay::model
