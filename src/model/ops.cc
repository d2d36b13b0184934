#include "model/ops.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "base/numeric.h"

namespace llamay::model::ops {
namespace {

size_t RowBytes(const Tensor& w) {
  auto info = GetTensorTypeInfo(static_cast<uint32_t>(w.type));
  LLAMAY_CHECK(info.has_value());
  return static_cast<size_t>(w.cols) / info->block_size * info->type_size;
}

}  // namespace

void GetRow(const Tensor& w, int64_t row, float* out) {
  const uint8_t* src = w.data + static_cast<size_t>(row) * RowBytes(w);
  const size_t n = static_cast<size_t>(w.cols);
  switch (w.type) {
    case TensorType::kF32: std::memcpy(out, src, n * 4); return;
    case TensorType::kF16: ConvertF16ToF32(reinterpret_cast<const uint16_t*>(src), out, n); return;
    case TensorType::kBF16:
      for (size_t i = 0; i < n; ++i) out[i] = Bf16ToF32(reinterpret_cast<const uint16_t*>(src)[i]);
      return;
    case TensorType::kQ8_0: DequantizeRowQ8_0(reinterpret_cast<const BlockQ8_0*>(src), out, n); return;
    default: LLAMAY_CHECK(false) << "GetRow: type " << TensorTypeName(w.type) << " not available yet";
  }
}

void MatMul(const Tensor& w, const float* x, int64_t n_tokens, float* y) {
  const int64_t cols = w.cols, rows = w.rows;
  std::vector<float> wrow(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    GetRow(w, r, wrow.data());
    for (int64_t t = 0; t < n_tokens; ++t) {
      const float* xt = x + t * cols;
      float acc = 0.0f;
      for (int64_t c = 0; c < cols; ++c) acc += wrow[static_cast<size_t>(c)] * xt[c];
      y[t * rows + r] = acc;
    }
  }
}

void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += x[i] * x[i];
  const float scale = 1.0f / std::sqrt(sum / static_cast<float>(n) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

void Rope(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos, float theta_base,
          float freq_scale, bool neox, const float* freq_factors) {
  for (int64_t i = 0; i < n_rot / 2; ++i) {
    float theta = static_cast<float>(pos) * freq_scale *
                  std::pow(theta_base, -2.0f * static_cast<float>(i) / static_cast<float>(n_rot));
    if (freq_factors != nullptr) theta /= freq_factors[i];
    const float c = std::cos(theta), s = std::sin(theta);
    for (int64_t h = 0; h < n_heads; ++h) {
      float* xh = x + h * head_dim;
      const int64_t a = neox ? i : 2 * i, b = neox ? i + n_rot / 2 : 2 * i + 1;
      const float x0 = xh[a], x1 = xh[b];
      xh[a] = x0 * c - x1 * s;
      xh[b] = x0 * s + x1 * c;
    }
  }
}

void SwiGlu(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void AttendPaged(const float* q, const kv::KvLayout& layout, const uint8_t* const* pages, uint32_t layer,
                 int64_t n_pos, int64_t n_head, float scale, float* out) {
  const int64_t D = layout.head_dim, group = n_head / layout.n_kv_heads;
  const uint32_t P = layout.page_tokens, row = layout.row_elems();
  std::vector<float> k_row(row), v_row(row), scores(static_cast<size_t>(n_pos));
  std::memset(out, 0, static_cast<size_t>(n_head * D) * sizeof(float));
  auto decode = [&](const uint8_t* src, float* dst) {
    switch (layout.precision) {
      case kv::KvPrecision::kF32: std::memcpy(dst, src, row * 4u); break;
      case kv::KvPrecision::kF16: ConvertF16ToF32(reinterpret_cast<const uint16_t*>(src), dst, row); break;
      case kv::KvPrecision::kQ8_0: DequantizeRowQ8_0(reinterpret_cast<const BlockQ8_0*>(src), dst, row); break;
    }
  };
  for (int64_t h = 0; h < n_head; ++h) {
    const int64_t kvh = h / group;
    const float* qh = q + h * D;
    float max = -INFINITY;
    for (int64_t p = 0; p < n_pos; ++p) {
      decode(pages[p / P] + layout.RowOffset(layer, kv::KvKind::kKey, static_cast<uint32_t>(p % P)), k_row.data());
      const float* kh = k_row.data() + kvh * D;
      float dot = 0.0f;
      for (int64_t d = 0; d < D; ++d) dot += qh[d] * kh[d];
      scores[static_cast<size_t>(p)] = dot * scale;
      max = std::fmax(max, dot * scale);
    }
    float sum = 0.0f;
    for (int64_t p = 0; p < n_pos; ++p) {
      const float e = std::exp(scores[static_cast<size_t>(p)] - max);
      scores[static_cast<size_t>(p)] = e;
      sum += e;
    }
    float* oh = out + h * D;
    for (int64_t p = 0; p < n_pos; ++p) {
      decode(pages[p / P] + layout.RowOffset(layer, kv::KvKind::kValue, static_cast<uint32_t>(p % P)), v_row.data());
      const float wgt = scores[static_cast<size_t>(p)] / sum;
      const float* vh = v_row.data() + kvh * D;
      for (int64_t d = 0; d < D; ++d) oh[d] += wgt * vh[d];
    }
  }
}

}  // namespace llamay::model::ops
