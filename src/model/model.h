// Model: a loaded GGUF model (llama, qwen2, qwen3) and its forward pass over paged KV contexts.
//
// Forward() runs one step for several sequences at once (prefill chunks and single decode tokens mixed):
// it appends each sequence's new tokens to its kv::Context, computes every layer for all the batch's tokens
// together (matrix-matrix work), writes each new position's K and V into the context's pages, and lets
// each token attend over its own context's pages. The logits of a context depend only on the model, its
// tokens and the KV precision: not on page size, batch composition, fork or snapshot/restore.
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
struct SeqInput {
  kv::Context* context = nullptr;    // receives the tokens; its layout must be the model's
  std::span<const int32_t> tokens;   // appended at context->size()
  bool all_logits = false;           // logits for every new token; otherwise for the last one only
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
  kv::KvLayout KvLayoutFor(uint32_t page_tokens, kv::KvPrecision precision) const {
    return MakeKvLayout(hp_, page_tokens, precision);
  }

  // Runs the step; appends to `logits` one row of n_vocab floats per requested position, in batch order.
  // On error every context is left as it was.
  Status Forward(std::span<const SeqInput> batch, std::vector<float>* logits) const;

 private:
  Model(gguf::File file, HParams hp, Weights w, std::unique_ptr<kernels::ThreadPool> pool)
      : file_(std::move(file)), hp_(std::move(hp)), w_(std::move(w)), pool_(std::move(pool)) {}
  gguf::File file_;
  HParams hp_;
  Weights w_;
  std::unique_ptr<kernels::ThreadPool> pool_;  // ParallelFor serialises concurrent Forward calls
};

}  // namespace llamay::model

#endif  // LLAMAY_MODEL_MODEL_H_
