#include "kernels/matmul.h"

#include <algorithm>
#include <cstring>

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
  if (pool != nullptr && n_tokens > 1 && n_tokens * n_in >= kMinParallelWork) {
    pool->ParallelFor(n_tokens, prepare_row);
  } else {
    for (int64_t t = 0; t < n_tokens; ++t) prepare_row(t, 0);
  }
}

void PreparedActivations::Gather(const PreparedActivations& src, std::span<const int32_t> rows) {
  LLAMAY_CHECK(&src != this) << "gather into its own source";
  format_ = src.format_;
  n_in_ = src.n_in_;
  row_bytes_ = src.row_bytes_;
  n_tokens_ = static_cast<int64_t>(rows.size());
  buf_.resize(row_bytes_ * rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    LLAMAY_CHECK(rows[i] >= 0 && rows[i] < src.n_tokens_) << "gather: row " << rows[i] << " of " << src.n_tokens_;
    std::memcpy(buf_.data() + i * row_bytes_, src.row(rows[i]), row_bytes_);
  }
}

void MatMulBatch(ThreadPool* pool, std::span<const Product> products, Isa isa) {
  // Per product: its row tasks, numbered after the previous products' (task_begin).
  struct Plan {
    TileFn tile;
    size_t w_stride;
    int64_t rows_per_task;
    int64_t n_tokens;
  };
  const int n_threads = pool != nullptr ? pool->num_threads() : 1;
  std::vector<Plan> plans(products.size());
  std::vector<int64_t> task_begin(products.size() + 1, 0);
  int64_t work = 0;  // multiply-adds
  for (size_t i = 0; i < products.size(); ++i) {
    const Product& p = products[i];
    LLAMAY_CHECK(MatMulSupports(p.w.type)) << "no matmul for weight type " << TensorTypeName(p.w.type);
    LLAMAY_CHECK(p.x->format() == ActivationFormat(p.w.type)) << "activations prepared for another format";
    LLAMAY_CHECK(p.x->n_in() == p.w.n_in) << "n_in mismatch: activations " << p.x->n_in() << ", weights " << p.w.n_in;
    const int64_t n_tokens = p.n_rows < 0 ? p.x->n_tokens() - p.row0 : p.n_rows;
    LLAMAY_CHECK(p.row0 >= 0 && n_tokens >= 0 && p.row0 + n_tokens <= p.x->n_tokens())
        << "rows [" << p.row0 << ", +" << n_tokens << ") of " << p.x->n_tokens();
    int64_t n_tasks = 0;
    if (n_tokens > 0 && p.w.n_out > 0) {
      plans[i] = {GetTileFn(p.w.type, isa, p.w.n_in), p.w.row_stride != 0 ? p.w.row_stride : TypeRowBytes(p.w.type, p.w.n_in),
                  RowsPerTask(p.w.n_out, n_tokens, n_threads), n_tokens};
      n_tasks = CeilDiv(p.w.n_out, plans[i].rows_per_task);
      work += p.w.n_out * p.w.n_in * n_tokens;
    }
    task_begin[i + 1] = task_begin[i] + n_tasks;
  }
  auto run_task = [&](int64_t task, int) {
    const size_t i = static_cast<size_t>(std::upper_bound(task_begin.begin(), task_begin.end(), task) - task_begin.begin()) - 1;
    const Product& p = products[i];
    const Plan& plan = plans[i];
    const int64_t n_tokens = plan.n_tokens, n_out = p.w.n_out;
    const int64_t r0 = (task - task_begin[i]) * plan.rows_per_task;
    const int64_t rows = std::min(plan.rows_per_task, n_out - r0);
    const auto* wbase = static_cast<const uint8_t*>(p.w.data);
    for (int64_t t0 = 0; t0 < n_tokens; t0 += kTokenTile) {
      plan.tile(wbase + r0 * plan.w_stride, plan.w_stride, rows, p.x->row(p.row0 + t0), p.x->row_bytes(),
                std::min(kTokenTile, n_tokens - t0), p.w.n_in, p.y + t0 * n_out + r0, static_cast<size_t>(n_out));
    }
  };
  const int64_t n_tasks = task_begin.back();
  if (pool != nullptr && n_tasks > 1 && work >= kMinParallelWork) {
    pool->ParallelFor(n_tasks, run_task);
  } else {
    for (int64_t t = 0; t < n_tasks; ++t) run_task(t, 0);
  }
}

void MatMul(ThreadPool* pool, const WeightMatrix& w, const PreparedActivations& x, float* y, Isa isa) {
  const Product p{w, &x, y};
  MatMulBatch(pool, std::span(&p, 1), isa);
}

void MatMul(ThreadPool* pool, const WeightMatrix& w, const float* x, int64_t n_tokens, float* y,
            PreparedActivations* scratch, Isa isa) {
  scratch->Prepare(pool, ActivationFormat(w.type), x, n_tokens, w.n_in);
  MatMul(pool, w, *scratch, y, isa);
}

}  // namespace llamay::kernels
