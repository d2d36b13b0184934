// MatMul: y = x * W^T for a weight matrix in any supported type (vec_dot.h), batched and multi-threaded.
//
// Shapes: x [n_tokens][n_in] f32, W [n_out][n_in] (rows row_stride bytes apart), y [n_tokens][n_out] f32.
// The activations are first converted to the weight type's activation format (PreparedActivations; one
// preparation can serve several matrices of the same format, e.g. the Q, K and V projections). The product
// is then computed in tiles of rows x tokens, so a weight block is loaded once per register tile of tokens
// rather than once per token (prefill is matrix-matrix work), with tasks of whole output rows spread over
// the pool.
//
// Determinism: y[t][r] is VecDot(W row r, prepared row t) in the canonical order of vec_dot.h, whatever
// the thread count, the task split, the tile sizes or the other tokens in the batch; and the AVX2 and
// scalar paths give the same bits.
// Thread-safety: MatMul calls may run concurrently with distinct scratch objects (the pool serialises its
// own loops). A PreparedActivations is not safe to Prepare concurrently.
#ifndef LLAMAY_KERNELS_MATMUL_H_
#define LLAMAY_KERNELS_MATMUL_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/tensor_type.h"
#include "kernels/cpu.h"
#include "kernels/thread_pool.h"
#include "kernels/vec_dot.h"

namespace llamay::kernels {

struct WeightMatrix {
  TensorType type = TensorType::kF32;
  const void* data = nullptr;  // [n_out][row_stride bytes]
  int64_t n_out = 0;
  int64_t n_in = 0;
  size_t row_stride = 0;  // 0 means TypeRowBytes(type, n_in)
};

// Activations converted for one format: [n_tokens][row_bytes()]. Reuses its buffer across calls.
class PreparedActivations {
 public:
  // x: [n_tokens][n_in]. pool may be null (single-threaded).
  void Prepare(ThreadPool* pool, ActFormat format, const float* x, int64_t n_tokens, int64_t n_in);

  // The rows `rows` of `src`, in that order (the prepared rows of the tokens routed to one expert): their
  // bytes are src's, so a product over them gives each row exactly what it gives in src.
  // REQUIRES: every index in [0, src.n_tokens()); src is not *this.
  void Gather(const PreparedActivations& src, std::span<const int32_t> rows);

  ActFormat format() const { return format_; }
  int64_t n_tokens() const { return n_tokens_; }
  int64_t n_in() const { return n_in_; }
  size_t row_bytes() const { return row_bytes_; }
  const uint8_t* row(int64_t t) const { return buf_.data() + static_cast<size_t>(t) * row_bytes_; }

 private:
  std::vector<uint8_t> buf_;
  ActFormat format_ = ActFormat::kF32;
  int64_t n_tokens_ = 0;
  int64_t n_in_ = 0;
  size_t row_bytes_ = 0;
};

// y: [x.n_tokens()][w.n_out]. REQUIRES: MatMulSupports(w.type), x.format() == ActivationFormat(w.type),
// x.n_in() == w.n_in. pool may be null.
void MatMul(ThreadPool* pool, const WeightMatrix& w, const PreparedActivations& x, float* y,
            Isa isa = DetectIsa());

// Several independent products y = x W^T (the experts of a layer: each its slab and its tokens' rows) in
// one parallel loop over (product, row block) tasks, so that the threads share the work of all of them
// instead of meeting at a barrier after each small one. Each y is what MatMul gives for its product.
struct Product {
  WeightMatrix w;
  const PreparedActivations* x = nullptr;
  float* y = nullptr;  // [n_rows][w.n_out]
  // The rows of x multiplied: [row0, row0 + n_rows); n_rows < 0: all of them.
  int64_t row0 = 0;
  int64_t n_rows = -1;
};
void MatMulBatch(ThreadPool* pool, std::span<const Product> products, Isa isa = DetectIsa());

// Prepares x [n_tokens][w.n_in] into *scratch, then multiplies. y: [n_tokens][w.n_out].
void MatMul(ThreadPool* pool, const WeightMatrix& w, const float* x, int64_t n_tokens, float* y,
            PreparedActivations* scratch, Isa isa = DetectIsa());

}  // namespace llamay::kernels

#endif  // LLAMAY_KERNELS_MATMUL_H_
