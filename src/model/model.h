// Model: a loaded GGUF model (see hparams.h for the architectures) and its forward pass over
// kv::Contexts.
//
// Forward() runs one step for several sequences at once (prefill chunks and single decode tokens mixed):
// it appends each sequence's new tokens to its kv::Context, computes every layer for all the batch's tokens
// together (matrix-matrix work), and per layer kind: an attention layer writes each new position's K and V
// into the context's pages and lets each token attend over its own context's pages; a Mamba-2 layer runs
// each sequence's tokens, in order, through its slice of the context's live recurrent slot. At the end the
// slot is committed at the new size, and a checkpoint is taken when that size is a multiple of the
// layout's checkpoint_tokens. The logits of a context depend only on the model, its tokens and the KV
// precision: not on page size, batch composition, how the tokens were split into steps, fork, rollback to
// a checkpoint or snapshot/restore.
//
// Sliding-window layers (gemma3): after a successful step Forward calls Context::TrimWindows on every
// sequence that took tokens, releasing the windowed group's pages that no query at size() or later reads;
// a long context's windowed memory stays at about window / page_tokens + 1 pages. A Rollback that would
// need released pages is refused by the context (FailedPrecondition).
//
// Thread-safety: a Model is immutable after Load; Forward may run from several threads on disjoint
// contexts. The contexts passed to Forward are owned by the caller for its duration.
#ifndef LLAMAY_MODEL_MODEL_H_
#define LLAMAY_MODEL_MODEL_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/digest.h"
#include "base/status.h"
#include "gguf/gguf.h"
#include "kernels/thread_pool.h"
#include "kv/context.h"
#include "kv/layout.h"
#include "model/hparams.h"
#include "model/weights.h"

namespace llamay::model {

// One sequence's share of a forward step.
// What a step did to a context's recurrent layers, so that its last tokens can be taken back
// (Model::RewindRecurrent): per recurrent layer, in layer order, the conv window and the chunked scan's
// pending part (header and slots) as they were before the step, then the step's conv inputs.
struct RecurrentUndo {
  size_t start = 0;   // the context's size before the step
  size_t tokens = 0;  // tokens the step ran
  std::vector<float> data;
};

struct SeqInput {
  kv::Context* context = nullptr;   // receives the tokens; its layout must be the model's
  std::span<const int32_t> tokens;  // appended at context->size()
  bool all_logits = false;          // logits for every new token; otherwise for the last one only
  // Sliding-window layers: keep the pages a query at the first new token reads, so the caller can still
  // roll the context back into the step (a verified draft); it calls Context::TrimWindows itself after.
  bool keep_windows = false;
  // Recurrent layers: Forward records here what RewindRecurrent needs. The step must then be one that
  // RewindableTokens allows (else InvalidArgument).
  RecurrentUndo* recurrent_undo = nullptr;
};

class Model {
 public:
  // n_threads: compute threads (0: one per core).
  static Result<std::unique_ptr<Model>> Load(const std::string& path, int n_threads = 0);
  static Result<std::unique_ptr<Model>> FromFile(gguf::File file, int n_threads = 0);
  int n_threads() const { return pool_->num_threads(); }

  const HParams& hparams() const { return hp_; }
  const gguf::File& file() const { return file_; }
  // Identity of the weights (see gguf::File::WeightDigest).
  const Digest& weight_digest() const { return file_.WeightDigest(); }
  // checkpoint_tokens: see MakeKvLayout (0: the default spacing of recurrent checkpoints).
  kv::KvLayout KvLayoutFor(uint32_t page_tokens, kv::KvPrecision precision,
                           uint32_t checkpoint_tokens = 0) const {
    return MakeKvLayout(hp_, page_tokens, precision, checkpoint_tokens);
  }

  // Runs the step; appends to `logits` one row of n_vocab floats per requested position, in batch order.
  // On error every context is left as it was. A context of a model with recurrent layers must have its
  // state committed at its size (state_position() == size(), as Forward and Rollback leave it).
  Status Forward(std::span<const SeqInput> batch, std::vector<float>* logits) const;

  // Speculative decoding on recurrent layers: the most tokens a step that starts at context position
  // `position` may run and still be taken back by RewindRecurrent (no chunk of the scans folds inside it:
  // kernels/recurrent_chunk.h); SIZE_MAX for a model without recurrent layers.
  size_t RewindableTokens(size_t position) const;
  // Takes back the last tokens of the step `undo` recorded, in place: the context then holds n positions
  // and its recurrent state is, bit for bit, the state a step of only the first n - undo.start tokens
  // would have left. Without recurrent layers, Context::Rollback. REQUIRES: the context is as that step
  // left it, and undo.start < n <= its size (else FailedPrecondition / OutOfRange).
  Status RewindRecurrent(kv::Context& ctx, size_t n, const RecurrentUndo& undo) const;

 private:
  Model(gguf::File file, HParams hp, Weights w, std::unique_ptr<kernels::ThreadPool> pool);
  // The checks that precede any change: context, layout, token ids, recurrent state position.
  Status CheckBatch(std::span<const SeqInput> batch) const;
  gguf::File file_;
  HParams hp_;
  Weights w_;
  std::vector<kv::LayerSlot> layer_slots_;     // [n_layer]: where each layer's state lives in a context
  std::unique_ptr<kernels::ThreadPool> pool_;  // ParallelFor serialises concurrent Forward calls
};

}  // namespace llamay::model

#endif  // LLAMAY_MODEL_MODEL_H_
