// Internal to src/model: the blocks a layer is built from, and the step they run in.
//
// Model::Forward (model.cc) reads as the block diagram:
//   embeddings -> for each layer: norm, mixer (AttentionBlock | Mamba2Block | DeltaNetBlock), [post norm],
//                                 residual, [norm, FfnBlock | MoeBlock, [post norm], residual]
//   -> output norm -> logits
//   -> (after a successful step, a model with sliding-window layers) Context::TrimWindows for each sequence
// (post norms: HParams::post_norms, gemma3.)
// Every block maps a normalised input xn [T][n_embd] (T: the tokens of the whole batch, sequence after
// sequence) to its output out [T][n_embd]; the caller adds the residual. Matrix products run over all T
// tokens at once (matrix-matrix work); whatever depends on a sequence's history (attention over its pages,
// the recurrent scan over its state) runs per sequence, in token order, so a sequence's results do not
// depend on the other sequences of the batch or on how its tokens were split into steps.
//
// Thread-safety: a Step and its blocks belong to one Forward call (one thread); the kernels they call
// spread work over the step's ThreadPool.
#ifndef LLAMAY_MODEL_BLOCKS_H_
#define LLAMAY_MODEL_BLOCKS_H_

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/thread_pool.h"
#include "kv/layout.h"
#include "model/hparams.h"
#include "model/model.h"
#include "model/weights.h"

namespace llamay::model::internal {

kernels::WeightMatrix Matrix(const Tensor& t);

// y = W x for the T tokens of a step. The activations are converted once per format and shared by the
// matrices that read the same input (q/k/v, gate/up): the cache is keyed on the input pointer, so a caller
// that rewrites an input buffer calls NewInput() before the next product that reads it.
class Linear {
 public:
  Linear(kernels::ThreadPool* pool, int64_t n_tokens) : pool_(pool), n_tokens_(n_tokens) {}
  // in [T][n_in] -> out [T][w.rows].
  void Mul(const Tensor& w, const float* in, int64_t n_in, float* out);
  void NewInput() { src_ = nullptr; }

 private:
  kernels::ThreadPool* pool_;
  int64_t n_tokens_;
  kernels::PreparedActivations prep_;
  const float* src_ = nullptr;  // the input prep_ was made from
};

// One forward step: the batch, where each of its tokens belongs, and where each layer's state lives.
struct Step {
  const HParams& hp;
  const Weights& w;
  kernels::ThreadPool* pool;
  std::span<const SeqInput> batch;
  const std::vector<kv::LayerSlot>& layer_slots;  // [n_layer]: where each layer's state lives
  int64_t n_tokens = 0;                           // T
  std::vector<int32_t> ids;                       // [T]: the token ids, sequence after sequence
  std::vector<size_t> token_seq;                  // [T]: the batch index of each token
  std::vector<int64_t> positions;                 // [T]: each token's position in its context
  std::vector<int64_t> seq_begin;                 // [batch.size() + 1]: first token of each sequence
  Linear linear;

  // REQUIRES: the batch's tokens were appended to their contexts (positions count back from size()).
  Step(const HParams& h, const Weights& wt, kernels::ThreadPool* p, std::span<const SeqInput> b,
       const std::vector<kv::LayerSlot>& slots);
  int64_t seq_tokens(size_t s) const { return seq_begin[s + 1] - seq_begin[s]; }
  // fn(row) for every row in [0, rows), over the pool when the work (rows x row_work, elements) is worth
  // handing out (kernels::kMinParallelWork), else on this thread: for row-wise elementwise work (norms,
  // activations), whose results never depend on which thread ran a row.
  template <typename F>
  void ForRows(int64_t rows, int64_t row_work, F&& fn) const {
    if (pool != nullptr && rows > 1 && rows * row_work >= kernels::kMinParallelWork) {
      pool->ParallelFor(rows, [&](int64_t r, int) { fn(r); });
    } else {
      for (int64_t r = 0; r < rows; ++r) fn(r);
    }
  }
};

// The attention mixer of the llama family (and granite): q/k/v projections (+ bias, + per-head q/k norm,
// or olmoe's over whole rows), rope, the new K/V rows written into each context's pages, paged attention over them, output projection.
// The rope table for the step's positions is computed once and shared by every attention layer (a second
// one for sliding-window layers, which rope with their own base: HParams::windows, rope_theta_swa). A
// windowed layer attends over its window only (kernels::AttentionParams::window) and reads its pages from
// its own layer group (kv::LayerSlot::group; the page geometry takes the layer's index in that group,
// Context::WriteRow the model layer). Options from HParams: partial rotary (n_rot < head_dim: the dims past
// n_rot pass through) and, for qwen35, an output gate (attn_output_gate: attn_q yields [q_h, gate_h] per
// head; the attention output is multiplied by sigmoid(gate) before the output projection).
class AttentionBlock {
 public:
  explicit AttentionBlock(Step& step);
  // xn, out: [T][n_embd]. Fails only if a K/V row cannot be written (the caller undoes the step).
  Status Run(uint32_t layer, const float* xn, float* out);

 private:
  Step& step_;
  kernels::RopeParams rope_, rope_swa_;  // full layers; sliding-window layers (HParams::windows)
  std::vector<float> cs_, cs_swa_;       // [T][n_rot/2][2]: cos/sin of each token's position, per rope
  std::vector<float> q_, k_, v_, attn_;  // [T][q_dim], [T][kv_dim] x2, [T][q_dim]
  std::vector<float> qg_, gate_;         // attn_output_gate: [T][n_head][2][head_dim], [T][q_dim]
};

// The Mamba-2 mixer (llama.cpp's build_mamba2_layer): in_proj -> z | xBC | dt; causal conv over xBC with the
// layer's conv state, + bias, SiLU; selective scan of x with dt, A, B, C, D and the layer's SSM state;
// grouped RMS norm of y * silu(z); out_proj. The state of sequence s, layer `layer` is the slice
// [slot index][recurrent_layer_bytes] of its context's live slot: conv [d_conv-1][conv_channels] f32, then
// the chunked scan's state (kernels/ssm_scan.h: the folded [n_head][head_dim][d_state], then the pending
// tokens).
// Appends one recurrent layer's part of a RecurrentUndo (model.h) for a sequence of n tokens, before its
// conv and scan run: the layer's conv window and pending part, and the conv inputs x (rows of C floats,
// x_stride apart).
void SaveRecurrentUndo(const SsmParams& s, const float* conv_state, const float* x, int64_t x_stride, int64_t n,
                       RecurrentUndo* undo);

class Mamba2Block {
 public:
  explicit Mamba2Block(Step& step);
  // xn, out: [T][n_embd]; `states` [batch.size()]: each sequence's live slot (null when it has no tokens).
  void Run(uint32_t layer, const float* xn, std::span<uint8_t* const> states, float* out);

 private:
  Step& step_;
  std::vector<float> zxbcdt_;  // [T][in_proj_dim]: z [d_inner] | xBC [conv_channels] | dt [n_head]
  std::vector<float> y_;       // [T][d_inner]
};

// The gated-delta-net mixer of Qwen3.5 (llama.cpp's qwen35 build_layer_attn_linear; SsmParams read as Hv
// value heads of Dv, Hk key heads of Dk, C = conv_channels): q|k|v = attn_qkv x, z = attn_gate x,
// beta = sigmoid(ssm_beta x), log decay g = ssm_a * softplus(ssm_alpha x + dt_bias); causal conv over the
// C channels with the layer's conv state (no bias), SiLU; q and k L2-normalised per head; the gated delta
// rule (value head h reads key head h % Hk) on the layer's state; an RMS norm over each value head (one
// ssm_norm weight shared by the heads) times silu(z); ssm_out. The state of sequence s is the slice
// [slot index][recurrent_layer_bytes] of its context's live slot: conv [d_conv-1][C] f32, then the chunked
// rule's state (kernels/delta_rule.h: the folded [Hv][Dk][Dv], then the pending tokens).
class DeltaNetBlock {
 public:
  explicit DeltaNetBlock(Step& step);
  // xn, out: [T][n_embd]; `states` [batch.size()]: each sequence's live slot (null when it has no tokens).
  void Run(uint32_t layer, const float* xn, std::span<uint8_t* const> states, float* out);

 private:
  Step& step_;
  std::vector<float> qkv_;       // [T][C]: q [Hk][Dk] | k [Hk][Dk] | v [Hv][Dv]; conv output in place
  std::vector<float> z_;         // [T][d_inner]: the output gate
  std::vector<float> beta_, g_;  // [T][Hv]: beta (after the sigmoid), log decay
  std::vector<float> y_;         // [T][d_inner]: delta rule output, then normed and gated in place
};

// The gated feed-forward block: down(act(gate x) * up x), act = silu (SwiGLU) or the tanh GELU (GeGLU,
// gemma3), per HParams::ffn_act.
class FfnBlock {
 public:
  // n_ff: the width (HParams::n_ff for the layers' dense FFN; a MoE's shared expert has its own).
  FfnBlock(Step& step, uint32_t n_ff);
  void Run(uint32_t layer, const float* xn, float* out);  // the layer's dense FFN; xn, out: [T][n_embd]
  // The same with these weights: gate, up [n_ff][n_embd], down [n_embd][n_ff].
  void Run(const Tensor& gate, const Tensor& up, const Tensor& down, const float* xn, float* out);

 private:
  Step& step_;
  int64_t n_ff_;
  std::vector<float> gate_, up_, act_;  // [T][n_ff]
};

// The mixture-of-experts FFN (MoeParams): router logits, gating and the top k per token (Route), then the
// step's (token, slot) pairs grouped by expert: every used expert's gate and up products over its tokens'
// rows run in one parallel loop (kernels::MatMulBatch, threads split across (expert, row block)), SwiGLU,
// the down products likewise, and each token's weighted sum over its k experts in slot order; then, with a
// shared expert, its output (times sigmoid(ffn_gate_inp_shexp x) when gated) is added. With
// MoeParams::biases (gpt-oss) the router's logits and each expert's gate, up and down outputs take their
// biases, and MoeParams::act picks the activation.
// Determinism: the input is quantised once per token and its rows only copied into expert order; the
// kernels give a row the same bits whatever rows it is multiplied with; routing and the sum are per token.
// So a token's output does not depend on the batch, the thread count or how a prompt was split.
class MoeBlock {
 public:
  explicit MoeBlock(Step& step);
  void Run(uint32_t layer, const float* xn, float* out);  // xn, out: [T][n_embd]

 private:
  // One token: probs [X] (scratch), chosen [k] expert ids, weights [k].
  void Route(const float* logits, float* probs, int32_t* chosen, float* weights) const;
  // grouped [T*k][width] (expert after expert, expert_begin_): row r of expert e += bias [e][width].
  void AddExpertBias(const Tensor& bias, int64_t width, float* grouped) const;

  Step& step_;
  std::vector<float> logits_, probs_;  // [T][X]
  std::vector<int32_t> chosen_;        // [T][k]
  std::vector<float> weights_;         // [T][k]
  std::vector<int64_t> slot_row_;      // [T][k]: the grouped row of each (token, slot)
  std::vector<int32_t> rows_;          // [T*k]: the token of each grouped row, expert after expert
  std::vector<int64_t> expert_begin_;  // [X + 1]: expert e's grouped rows start at expert_begin_[e]
  kernels::PreparedActivations x_all_, x_gate_, x_up_, act_prep_;
  std::vector<kernels::Product> products_;
  std::vector<float> gate_, up_, act_;  // [T*k][n_ff_expert], grouped
  std::vector<float> down_;             // [T*k][n_embd], grouped
  std::optional<FfnBlock> shared_;      // the shared expert, when MoeParams::n_ff_shared > 0
  std::vector<float> shared_out_;       // [T][n_embd]
  std::vector<float> shared_gate_;      // [T]: the gate's logit, then its sigmoid
};

}  // namespace llamay::model::internal

#endif  // LLAMAY_MODEL_BLOCKS_H_
