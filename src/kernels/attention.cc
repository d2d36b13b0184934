#include "kernels/attention.h"

#include <algorithm>
#include <vector>

#include "base/check.h"
#include "base/numeric.h"
#include "kernels/ops_avx2.h"
#include "kernels/reference/reference.h"

namespace llamay::kernels {
namespace {

// The four steps whose implementation differs between the scalar and AVX2 paths; everything else (the
// loop structure, hence the order of every reduction) is shared.
struct Steps {
  void (*decode)(TensorType, const uint8_t*, int64_t, int64_t, float*);
  float (*dot)(const float*, const float*, int64_t);
  void (*softmax)(const float*, int64_t, float*);
  void (*axpy)(float, const float*, int64_t, float*);
};

void DecodeScalar(TensorType type, const uint8_t* row, int64_t start, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t e = start + i;
    switch (type) {
      case TensorType::kF32:
        out[i] = reinterpret_cast<const float*>(row)[e];
        break;
      case TensorType::kF16:
        out[i] = F16ToF32(reinterpret_cast<const uint16_t*>(row)[e]);
        break;
      default: {
        const BlockQ8_0& b = reinterpret_cast<const BlockQ8_0*>(row)[e / kQ8_0BlockSize];
        out[i] = F16ToF32(b.d) * static_cast<float>(b.qs[e % kQ8_0BlockSize]);
      }
    }
  }
}

void AxpyScalar(float a, const float* x, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = y[i] + a * x[i];
}

Steps SelectSteps(const AttentionParams& p, Isa isa) {
#if defined(__x86_64__)
  const bool fits =
      p.head_dim % 8 == 0 && (p.kv_type != TensorType::kQ8_0 || p.head_dim % kQ8_0BlockSize == 0);
  if (UsesAvx2(isa) && fits) return {avx2::DecodeKvSlice, avx2::DotF32, avx2::Softmax, avx2::Axpy};
#else
  (void)isa;
#endif
  return {DecodeScalar, RefDotF32, RefSoftmax, AxpyScalar};
}

void CheckParams(const KvPageGeometry& geo, const AttentionParams& p) {
  LLAMAY_CHECK(p.n_head > 0 && p.n_kv_heads > 0 && p.n_head % p.n_kv_heads == 0)
      << "n_head " << p.n_head << " is not a multiple of n_kv_heads " << p.n_kv_heads;
  LLAMAY_CHECK(p.head_dim > 0 && geo.page_tokens > 0) << "bad attention shape";
  LLAMAY_CHECK(p.kv_type == TensorType::kF32 || p.kv_type == TensorType::kF16 ||
               p.kv_type == TensorType::kQ8_0)
      << "unsupported KV type " << TensorTypeName(p.kv_type);
}

// Query i (at position pos) for the heads sharing kv head g: q_i, out_i are [n_head][head_dim].
void AttendGroup(const float* q_i, int64_t pos, int g, const uint8_t* const* pages, const KvPageGeometry& geo,
                 const AttentionParams& p, const Steps& steps, float* out_i) {
  const int group = p.n_head / p.n_kv_heads;
  const int64_t hd = p.head_dim;
  const int64_t lo = p.window > 0 ? std::max<int64_t>(0, pos - p.window + 1) : 0;
  const int64_t n_vis = pos - lo + 1;
  thread_local std::vector<float> scratch;
  scratch.resize(static_cast<size_t>(group * n_vis + hd));
  float* scores = scratch.data();      // [group][n_vis]
  float* kv = scores + group * n_vis;  // one decoded K or V slice [head_dim]

  // 1. Scores: each K slice is decoded once for all heads of the group.
  for (int64_t j = lo; j <= pos; ++j) {
    const uint8_t* page = pages[j / geo.page_tokens];
    steps.decode(p.kv_type, page + geo.k_offset + (j % geo.page_tokens) * geo.row_bytes, g * hd, hd, kv);
    for (int hh = 0; hh < group; ++hh)
      scores[hh * n_vis + (j - lo)] = steps.dot(q_i + (g * group + hh) * hd, kv, hd) * p.scale;
  }
  // 2. Softmax per head.
  for (int hh = 0; hh < group; ++hh) steps.softmax(scores + hh * n_vis, n_vis, scores + hh * n_vis);
  // 3. Weighted sum of V, positions in order.
  for (int hh = 0; hh < group; ++hh) std::fill_n(out_i + (g * group + hh) * hd, hd, 0.0f);
  for (int64_t j = lo; j <= pos; ++j) {
    const uint8_t* page = pages[j / geo.page_tokens];
    steps.decode(p.kv_type, page + geo.v_offset + (j % geo.page_tokens) * geo.row_bytes, g * hd, hd, kv);
    for (int hh = 0; hh < group; ++hh)
      steps.axpy(scores[hh * n_vis + (j - lo)], kv, hd, out_i + (g * group + hh) * hd);
  }
}

}  // namespace

void AttentionPagedBatch(const float* q, const int64_t* positions, int64_t n_q, const uint8_t* const* pages,
                         const KvPageGeometry& geo, const AttentionParams& p, float* out, ThreadPool* pool,
                         Isa isa) {
  CheckParams(geo, p);
  const Steps steps = SelectSteps(p, isa);
  const int64_t stride = static_cast<int64_t>(p.n_head) * p.head_dim;
  auto task = [&](int64_t t, int) {
    const int64_t i = t / p.n_kv_heads;
    LLAMAY_CHECK(positions[i] >= 0) << "negative query position";
    AttendGroup(q + i * stride, positions[i], static_cast<int>(t % p.n_kv_heads), pages, geo, p, steps,
                out + i * stride);
  };
  const int64_t n_tasks = n_q * p.n_kv_heads;
  if (pool != nullptr) {
    pool->ParallelFor(n_tasks, task);
  } else {
    for (int64_t t = 0; t < n_tasks; ++t) task(t, 0);
  }
}

void AttentionPaged(const float* q, const uint8_t* const* pages, const KvPageGeometry& geo,
                    const AttentionParams& p, int64_t n_positions, float* out, ThreadPool* pool, Isa isa) {
  LLAMAY_CHECK(n_positions >= 1) << "attention over no positions";
  const int64_t pos = n_positions - 1;
  AttentionPagedBatch(q, &pos, 1, pages, geo, p, out, pool, isa);
}

}  // namespace llamay::kernels
