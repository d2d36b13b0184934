// Reference paged attention: the canonical order of attention.h, written as plainly as possible.
#include <algorithm>
#include <vector>

#include "base/check.h"
#include "base/numeric.h"
#include "kernels/attention.h"
#include "kernels/reference/reference.h"

namespace llamay::kernels {
namespace {

// Element e of a row stored as `type`.
float RowElement(TensorType type, const uint8_t* row, int64_t e) {
  switch (type) {
    case TensorType::kF32:
      return reinterpret_cast<const float*>(row)[e];
    case TensorType::kF16:
      return F16ToF32(reinterpret_cast<const uint16_t*>(row)[e]);
    case TensorType::kQ8_0: {
      const BlockQ8_0& b = reinterpret_cast<const BlockQ8_0*>(row)[e / kQ8_0BlockSize];
      return F16ToF32(b.d) * static_cast<float>(b.qs[e % kQ8_0BlockSize]);
    }
    default:
      break;
  }
  LLAMAY_CHECK(false) << "unsupported KV type " << TensorTypeName(type);
  return 0.0f;
}

}  // namespace

void RefAttentionPagedBatch(const float* q, const int64_t* positions, int64_t n_q,
                            const uint8_t* const* pages, const KvPageGeometry& geo, const AttentionParams& p,
                            float* out) {
  const int group = p.n_head / p.n_kv_heads;
  const int64_t hd = p.head_dim;
  std::vector<float> k(hd), scores;
  for (int64_t i = 0; i < n_q; ++i) {
    const int64_t pos = positions[i];
    const int64_t lo = p.window > 0 ? std::max<int64_t>(0, pos - p.window + 1) : 0;
    for (int h = 0; h < p.n_head; ++h) {
      const int g = h / group;
      const float* qh = q + (i * p.n_head + h) * hd;
      scores.assign(pos - lo + 1, 0.0f);
      for (int64_t j = lo; j <= pos; ++j) {
        const uint8_t* page = pages[j / geo.page_tokens];
        const uint8_t* row = page + geo.k_offset + (j % geo.page_tokens) * geo.row_bytes;
        for (int64_t d = 0; d < hd; ++d) k[d] = RowElement(p.kv_type, row, g * hd + d);
        scores[j - lo] = RefDotF32(qh, k.data(), hd) * p.scale;
      }
      if (p.sinks != nullptr) scores.push_back(p.sinks[h]);  // its weight is computed and not used
      RefSoftmax(scores.data(), static_cast<int64_t>(scores.size()), scores.data());
      float* o = out + (i * p.n_head + h) * hd;
      for (int64_t d = 0; d < hd; ++d) {
        float acc = 0.0f;
        for (int64_t j = lo; j <= pos; ++j) {
          const uint8_t* page = pages[j / geo.page_tokens];
          const uint8_t* row = page + geo.v_offset + (j % geo.page_tokens) * geo.row_bytes;
          acc = acc + scores[j - lo] * RowElement(p.kv_type, row, g * hd + d);
        }
        o[d] = acc;
      }
    }
  }
}

}  // namespace llamay::kernels
