#include "kernels/matmul.h"

#include <algorithm>

#include "base/check.h"
#include "kernels/dequant.h"
#include "kernels/matmul_kernels.h"

namespace llamay::kernels {
namespace {

// Tokens per cache tile: the prepared rows of one tile (64 x ~1-6 KB) stay in L2 while a task sweeps its
// weight rows over them.
constexpr int64_t kTokenTile = 64;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Rows per task. Decode (few tokens) is bound by reading the weights: many tasks balance the threads.
// Prefill reuses each task's rows across token tiles, so tasks stay small enough to sit in L2.
int64_t RowsPerTask(int64_t n_out, int64_t n_tokens, int n_threads) {
  if (n_tokens <= 8) return std::clamp<int64_t>(CeilDiv(CeilDiv(n_out, 8 * n_threads), 16) * 16, 16, 512);
  return std::clamp<int64_t>(CeilDiv(CeilDiv(n_out, 4 * n_threads), 16) * 16, 16, 64);
}

}  // namespace

void PreparedActivations::Prepare(ThreadPool* pool, ActFormat format, const float* x, int64_t n_tokens,
                                  int64_t n_in) {
  LLAMAY_CHECK(n_tokens >= 0 && n_in > 0) << "bad activation shape " << n_tokens << "x" << n_in;
  format_ = format;
  n_tokens_ = n_tokens;
  n_in_ = n_in;
  row_bytes_ = ActivationRowBytes(format, n_in);
  buf_.resize(row_bytes_ * static_cast<size_t>(n_tokens));
  auto prepare_row = [&](int64_t t, int) {
    QuantizeActivationRow(format, x + t * n_in, n_in, buf_.data() + static_cast<size_t>(t) * row_bytes_);
  };
  if (pool != nullptr && n_tokens > 1) {
    pool->ParallelFor(n_tokens, prepare_row);
  } else {
    for (int64_t t = 0; t < n_tokens; ++t) prepare_row(t, 0);
  }
}

void MatMul(ThreadPool* pool, const WeightMatrix& w, const PreparedActivations& x, float* y, Isa isa) {
  LLAMAY_CHECK(MatMulSupports(w.type)) << "no matmul for weight type " << TensorTypeName(w.type);
  LLAMAY_CHECK(x.format() == ActivationFormat(w.type)) << "activations prepared for another format";
  LLAMAY_CHECK(x.n_in() == w.n_in) << "n_in mismatch: activations " << x.n_in() << ", weights " << w.n_in;
  const int64_t n_tokens = x.n_tokens(), n_out = w.n_out;
  if (n_tokens == 0 || n_out == 0) return;
  const size_t w_stride = w.row_stride != 0 ? w.row_stride : TypeRowBytes(w.type, w.n_in);
  const TileFn tile = GetTileFn(w.type, isa, w.n_in);
  const int n_threads = pool != nullptr ? pool->num_threads() : 1;
  const int64_t rows_per_task = RowsPerTask(n_out, n_tokens, n_threads);
  const auto* wbase = static_cast<const uint8_t*>(w.data);
  auto run_task = [&](int64_t task, int) {
    const int64_t r0 = task * rows_per_task;
    const int64_t rows = std::min(rows_per_task, n_out - r0);
    for (int64_t t0 = 0; t0 < n_tokens; t0 += kTokenTile) {
      tile(wbase + r0 * w_stride, w_stride, rows, x.row(t0), x.row_bytes(),
           std::min(kTokenTile, n_tokens - t0), w.n_in, y + t0 * n_out + r0, static_cast<size_t>(n_out));
    }
  };
  const int64_t n_tasks = CeilDiv(n_out, rows_per_task);
  if (pool != nullptr) {
    pool->ParallelFor(n_tasks, run_task);
  } else {
    for (int64_t t = 0; t < n_tasks; ++t) run_task(t, 0);
  }
}

void MatMul(ThreadPool* pool, const WeightMatrix& w, const float* x, int64_t n_tokens, float* y,
            PreparedActivations* scratch, Isa isa) {
  scratch->Prepare(pool, ActivationFormat(w.type), x, n_tokens, w.n_in);
  MatMul(pool, w, *scratch, y, isa);
}

}  // namespace llamay::kernels
