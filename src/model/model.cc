#include "model/model.h"

#include <cmath>
#include <cstring>

#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"

namespace llamay::model {
namespace {

// Where each token of the batch belongs.
struct TokenSlot {
  size_t seq;    // index into the batch
  int64_t pos;   // its position in that sequence's context
};

}  // namespace

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

namespace {

kernels::WeightMatrix Matrix(const Tensor& t) {
  kernels::WeightMatrix w;
  w.type = t.type;
  w.data = t.data;
  w.n_out = t.rows;
  w.n_in = t.cols;
  return w;
}

TensorType KvType(kv::KvPrecision p) {
  switch (p) {
    case kv::KvPrecision::kF16: return TensorType::kF16;
    case kv::KvPrecision::kQ8_0: return TensorType::kQ8_0;
    default: return TensorType::kF32;
  }
}

}  // namespace

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
    for (size_t s = 0; s < n; ++s) (void)batch[s].context->Rollback(old_sizes[s]);
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
  kernels::ThreadPool* pool = pool_.get();

  // 2. Embeddings.
  std::vector<float> x(static_cast<size_t>(T * E)), xn(x.size());
  for (int64_t t = 0; t < T; ++t)
    kernels::EmbeddingRow(w_.tok_embd.type, w_.tok_embd.data, E, ids[static_cast<size_t>(t)], &x[t * E]);

  std::vector<float> q(static_cast<size_t>(T * Q)), k(static_cast<size_t>(T * KV)), v(k.size());
  std::vector<float> attn(q.size()), proj(x.size());
  std::vector<float> gate(static_cast<size_t>(T * F)), up(gate.size()), act(gate.size());
  kernels::PreparedActivations prep;
  const float* prep_src = nullptr;  // the input `prep` was made from
  // y = W x for every token; the activations are converted once per format and shared by the matrices
  // that read the same input (q/k/v, gate/up).
  auto mul = [&](const Tensor& w, const float* in, int64_t n_in, float* out) {
    const kernels::ActFormat f = kernels::ActivationFormat(w.type);
    if (prep.n_tokens() != T || prep.n_in() != n_in || prep.format() != f || prep_src != in) {
      prep.Prepare(pool, f, in, T, n_in);
      prep_src = in;
    }
    kernels::MatMul(pool, Matrix(w), prep, out);
  };
  kernels::RopeParams rope;
  rope.n_rot = static_cast<int>(hp_.n_rot);
  rope.freq_base = hp_.rope_theta;
  rope.freq_scale = hp_.rope_freq_scale;
  rope.mode = hp_.rope_type == RopeType::kNeox ? kernels::RopeMode::kNeox : kernels::RopeMode::kNorm;
  rope.freq_factors = w_.rope_freqs ? w_.rope_freqs.f32() : nullptr;
  std::vector<float> cs(static_cast<size_t>(T) * hp_.n_rot);
  for (int64_t t = 0; t < T; ++t) kernels::RopeCache(slots[static_cast<size_t>(t)].pos, rope, &cs[t * hp_.n_rot]);
  kernels::AttentionParams ap;
  ap.n_head = static_cast<int>(hp_.n_head);
  ap.n_kv_heads = static_cast<int>(hp_.n_head_kv);
  ap.head_dim = static_cast<int>(D);
  ap.scale = 1.0f / std::sqrt(static_cast<float>(D));
  std::vector<std::vector<const uint8_t*>> pages(batch.size());
  std::vector<int64_t> positions(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) positions[static_cast<size_t>(t)] = slots[static_cast<size_t>(t)].pos;

  for (uint32_t li = 0; li < hp_.n_layer; ++li) {
    const LayerWeights& L = w_.layers[li];
    // 3. Attention block.
    for (int64_t t = 0; t < T; ++t) kernels::RmsNorm(&x[t * E], L.attn_norm.f32(), E, hp_.rms_eps, &xn[t * E]);
    prep_src = nullptr;
    mul(L.wq, xn.data(), E, q.data());
    mul(L.wk, xn.data(), E, k.data());
    mul(L.wv, xn.data(), E, v.data());
    for (int64_t t = 0; t < T; ++t) {
      float* qt = &q[t * Q];
      float* kt = &k[t * KV];
      if (L.bq) {
        kernels::Add(qt, L.bq.f32(), Q, qt);
        kernels::Add(kt, L.bk.f32(), KV, kt);
        kernels::Add(&v[t * KV], L.bv.f32(), KV, &v[t * KV]);
      }
      if (L.q_norm) {
        for (int64_t h = 0; h < hp_.n_head; ++h) kernels::RmsNorm(qt + h * D, L.q_norm.f32(), D, hp_.rms_eps, qt + h * D);
        for (int64_t h = 0; h < hp_.n_head_kv; ++h)
          kernels::RmsNorm(kt + h * D, L.k_norm.f32(), D, hp_.rms_eps, kt + h * D);
      }
      kernels::ApplyRope(qt, static_cast<int>(hp_.n_head), static_cast<int>(D), rope, &cs[t * hp_.n_rot]);
      kernels::ApplyRope(kt, static_cast<int>(hp_.n_head_kv), static_cast<int>(D), rope, &cs[t * hp_.n_rot]);
      const size_t pos = static_cast<size_t>(slots[static_cast<size_t>(t)].pos);
      kv::Context* ctx = batch[slots[static_cast<size_t>(t)].seq].context;
      Status s1 = ctx->WriteRow(pos, li, kv::KvKind::kKey, std::span<const float>(kt, KV));
      Status s2 = ctx->WriteRow(pos, li, kv::KvKind::kValue, std::span<const float>(&v[t * KV], KV));
      if (!s1.ok() || !s2.ok()) {
        undo(batch.size());
        return s1.ok() ? s2 : s1;
      }
    }
    // Attention reads K/V back from the pages (as stored, in the cache's precision), so a token computes
    // the same values whether its neighbours in the batch were written in this step or an earlier one.
    // One call for the whole batch (per page geometry and KV precision, which a call shares), so that
    // forked sequences read the pages they share once.
    std::vector<kernels::AttentionSeq> seqs;
    std::vector<std::pair<kernels::KvPageGeometry, TensorType>> kinds;
    int64_t t0 = 0;
    for (size_t s = 0; s < batch.size(); ++s) {
      const int64_t n = static_cast<int64_t>(batch[s].tokens.size());
      if (n == 0) continue;
      pages[s] = batch[s].context->PageData();
      const kv::KvLayout& layout = batch[s].context->layout();
      kinds.push_back(
          {kernels::LayerMajorGeometry(layout.page_tokens, layout.row_bytes(), static_cast<int>(li)),
           KvType(layout.precision)});
      seqs.push_back({&q[t0 * Q], &positions[static_cast<size_t>(t0)], n, pages[s].data(), &attn[t0 * Q]});
      t0 += n;
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
      kernels::AttentionPagedMulti(same, kinds[s].first, ap, pool);
    }
    prep_src = nullptr;
    mul(L.wo, attn.data(), Q, proj.data());
    kernels::Add(x.data(), proj.data(), T * E, x.data());
    // 4. Feed-forward block (SwiGLU).
    for (int64_t t = 0; t < T; ++t) kernels::RmsNorm(&x[t * E], L.ffn_norm.f32(), E, hp_.rms_eps, &xn[t * E]);
    prep_src = nullptr;
    mul(L.w_gate, xn.data(), E, gate.data());
    mul(L.w_up, xn.data(), E, up.data());
    kernels::SwiGlu(gate.data(), up.data(), T * F, act.data());
    prep_src = nullptr;
    mul(L.w_down, act.data(), F, proj.data());
    kernels::Add(x.data(), proj.data(), T * E, x.data());
  }

  // 5. Output: final norm and logits for the requested positions only.
  std::vector<float> rows;
  int64_t t0 = 0;
  for (const SeqInput& in : batch) {
    const int64_t n = static_cast<int64_t>(in.tokens.size());
    for (int64_t i = in.all_logits ? 0 : n - 1; i < n && n > 0; ++i) {
      rows.resize(rows.size() + static_cast<size_t>(E));
      kernels::RmsNorm(&x[(t0 + i) * E], w_.output_norm.f32(), E, hp_.rms_eps, &rows[rows.size() - static_cast<size_t>(E)]);
    }
    t0 += n;
  }
  const int64_t R = static_cast<int64_t>(rows.size()) / E;
  const size_t base = logits->size();
  logits->resize(base + static_cast<size_t>(R) * hp_.n_vocab);
  kernels::PreparedActivations out_prep;
  kernels::MatMul(pool, Matrix(w_.output), rows.data(), R, logits->data() + base, &out_prep);
  return Status::Ok();
}

}  // namespace llamay::model
