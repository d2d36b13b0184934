// Simple round-to-nearest quantisers for weights (tests, tools) and the activation quantisers Q8_1, Q8_K.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "base/numeric.h"
#include "kernels/dequant.h"
#include "kernels/quant_blocks.h"
#include "kernels/reference/reference.h"

namespace llamay::kernels {
namespace {

int NearestInt(float v) { return static_cast<int>(std::nearbyint(v)); }

// The element of largest magnitude, with its sign (the first one on ties).
float SignedAbsMax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

// Symmetric 4/5-bit block: d = max / -half so that the largest magnitude maps to q = 0.
void QuantSymmetric(const float* x, int half, uint16_t* d16, uint8_t* qs, uint32_t* qh) {
  const float d = SignedAbsMax(x, kQk) / static_cast<float>(-half);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  *d16 = F32ToF16(d);
  std::memset(qs, 0, kQk / 2);
  if (qh != nullptr) *qh = 0;
  for (int j = 0; j < kQk; ++j) {
    const int q = std::clamp(static_cast<int>(std::floor(x[j] * id + static_cast<float>(half) + 0.5f)), 0,
                             2 * half - 1);
    qs[j % 16] |= static_cast<uint8_t>((q & 0xF) << (j < 16 ? 0 : 4));
    if (qh != nullptr) *qh |= static_cast<uint32_t>((q >> 4) & 1) << j;
  }
}

// Asymmetric block: x ~= d*q + m with m the block minimum.
void QuantAsymmetric(const float* x, int levels, uint16_t* d16, uint16_t* m16, uint8_t* qs, uint32_t* qh) {
  float mn = x[0], mx = x[0];
  for (int j = 1; j < kQk; ++j) mn = std::min(mn, x[j]), mx = std::max(mx, x[j]);
  const float d = (mx - mn) / static_cast<float>(levels - 1);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  *d16 = F32ToF16(d);
  *m16 = F32ToF16(mn);
  std::memset(qs, 0, kQk / 2);
  if (qh != nullptr) *qh = 0;
  for (int j = 0; j < kQk; ++j) {
    const int q = std::clamp(static_cast<int>(std::floor((x[j] - mn) * id + 0.5f)), 0, levels - 1);
    qs[j % 16] |= static_cast<uint8_t>((q & 0xF) << (j < 16 ? 0 : 4));
    if (qh != nullptr) *qh |= static_cast<uint32_t>((q >> 4) & 1) << j;
  }
}

void StoreU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

// Q4_K / Q5_K super-block: per sub-block of 32 a scale and a min (both 6-bit against f16 d and dmin).
void QuantK45(const float* x, int levels, uint16_t* d16, uint16_t* dmin16, uint8_t* scales, uint8_t* qh,
              uint8_t* qs) {
  float sub_scale[8], sub_min[8];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int s = 0; s < 8; ++s) {
    float mn = 0.0f, mx = 0.0f;  // the min is clamped to <= 0, so it is stored as a non-negative offset
    for (int l = 0; l < 32; ++l) mn = std::min(mn, x[32 * s + l]), mx = std::max(mx, x[32 * s + l]);
    sub_scale[s] = (mx - mn) / static_cast<float>(levels - 1);
    sub_min[s] = -mn;
    max_scale = std::max(max_scale, sub_scale[s]);
    max_min = std::max(max_min, sub_min[s]);
  }
  const float d = max_scale / 63.0f, dmin = max_min / 63.0f;
  *d16 = F32ToF16(d);
  *dmin16 = F32ToF16(dmin);
  uint8_t ls[8], lm[8];
  for (int s = 0; s < 8; ++s) {
    ls[s] = static_cast<uint8_t>(std::clamp(d > 0 ? NearestInt(sub_scale[s] / d) : 0, 0, 63));
    lm[s] = static_cast<uint8_t>(std::clamp(dmin > 0 ? NearestInt(sub_min[s] / dmin) : 0, 0, 63));
  }
  std::memset(scales, 0, 12);
  for (int s = 0; s < 8; ++s) {
    if (s < 4) {
      scales[s] |= ls[s];
      scales[s + 4] |= lm[s];
    } else {
      scales[s + 4] = static_cast<uint8_t>((ls[s] & 0xF) | ((lm[s] & 0xF) << 4));
      scales[s - 4] |= static_cast<uint8_t>((ls[s] >> 4) << 6);
      scales[s] |= static_cast<uint8_t>((lm[s] >> 4) << 6);
    }
  }
  std::memset(qs, 0, kQkK / 2);
  if (qh != nullptr) std::memset(qh, 0, kQkK / 8);
  const float df = F16ToF32(*d16), dminf = F16ToF32(*dmin16);
  for (int s = 0; s < 8; ++s) {
    uint8_t sc, m;
    UnpackScaleMinK4(s, scales, &sc, &m);
    const float ds = df * sc, ms = dminf * m;
    for (int l = 0; l < 32; ++l) {
      const int q = ds > 0 ? std::clamp(NearestInt((x[32 * s + l] + ms) / ds), 0, levels - 1) : 0;
      qs[32 * (s / 2) + l] |= static_cast<uint8_t>((q & 0xF) << (4 * (s % 2)));
      if (qh != nullptr) qh[l] |= static_cast<uint8_t>(((q >> 4) & 1) << s);
    }
  }
}

void QuantQ6_K(const float* x, BlockQ6_K* y) {
  float sub_scale[16], max_scale = 0.0f;
  for (int s = 0; s < 16; ++s) {
    float amax = 0.0f;
    for (int l = 0; l < 16; ++l) amax = std::max(amax, std::fabs(x[16 * s + l]));
    sub_scale[s] = amax / 31.0f;
    max_scale = std::max(max_scale, sub_scale[s]);
  }
  const float d = max_scale / 127.0f;
  y->d = F32ToF16(d);
  const float df = F16ToF32(y->d);
  int q[kQkK];
  for (int s = 0; s < 16; ++s) {
    y->scales[s] = static_cast<int8_t>(std::clamp(d > 0 ? NearestInt(sub_scale[s] / d) : 0, 0, 127));
    const float ds = df * y->scales[s];
    for (int l = 0; l < 16; ++l)
      q[16 * s + l] = ds > 0 ? std::clamp(NearestInt(x[16 * s + l] / ds), -32, 31) + 32 : 32;
  }
  for (int half = 0; half < 2; ++half) {
    const int* L = q + 128 * half;
    for (int l = 0; l < 32; ++l) {
      y->ql[64 * half + l] = static_cast<uint8_t>((L[l] & 0xF) | ((L[l + 64] & 0xF) << 4));
      y->ql[64 * half + l + 32] = static_cast<uint8_t>((L[l + 32] & 0xF) | ((L[l + 96] & 0xF) << 4));
      y->qh[32 * half + l] = static_cast<uint8_t>((L[l] >> 4) | ((L[l + 32] >> 4) << 2) |
                                                  ((L[l + 64] >> 4) << 4) | ((L[l + 96] >> 4) << 6));
    }
  }
}

}  // namespace

void QuantizeRowQ8_1(const float* x, BlockQ8_1* y, int64_t n) {
  for (int64_t b = 0; b < n / kQk; ++b, x += kQk) {
    float amax = 0.0f;
    for (int j = 0; j < kQk; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int sum = 0;
    for (int j = 0; j < kQk; ++j) {
      y[b].qs[j] = static_cast<int8_t>(std::lround(x[j] * id));
      sum += y[b].qs[j];
    }
    y[b].d = F32ToF16(d);
    y[b].s = F32ToF16(static_cast<float>(sum) * d);
  }
}

void QuantizeRowQ8_K(const float* x, BlockQ8_K* y, int64_t n) {
  for (int64_t b = 0; b < n / kQkK; ++b, x += kQkK) {
    const float max = SignedAbsMax(x, kQkK);
    if (max == 0.0f) {
      std::memset(&y[b], 0, sizeof(BlockQ8_K));
      continue;
    }
    // The largest magnitude maps to -127 (as ggml does, so its sign does not matter).
    const float iscale = -127.0f / max;
    for (int j = 0; j < kQkK; ++j) y[b].qs[j] = static_cast<int8_t>(std::min(127, NearestInt(iscale * x[j])));
    for (int g = 0; g < kQkK / 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += y[b].qs[16 * g + l];
      y[b].bsums[g] = static_cast<int16_t>(sum);
    }
    y[b].d = 1.0f / iscale;
  }
}

void QuantizeRow(TensorType t, const float* x, void* dst, int64_t n) {
  const int64_t nb = n / TypeBlockSize(t);
  LLAMAY_CHECK(nb * TypeBlockSize(t) == n) << "partial block";
  switch (t) {
    case TensorType::kF32:
      std::memcpy(dst, x, sizeof(float) * n);
      return;
    case TensorType::kF16:
      ConvertF32ToF16Portable(x, static_cast<uint16_t*>(dst), n);
      return;
    case TensorType::kBF16:
      for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = F32ToBf16(x[i]);
      return;
    case TensorType::kQ8_0:
      QuantizeRowQ8_0(x, static_cast<BlockQ8_0*>(dst), n);
      return;
    case TensorType::kQ4_0:
      for (int64_t b = 0; b < nb; ++b) {
        auto& y = static_cast<BlockQ4_0*>(dst)[b];
        QuantSymmetric(x + kQk * b, 8, &y.d, y.qs, nullptr);
      }
      return;
    case TensorType::kQ5_0:
      for (int64_t b = 0; b < nb; ++b) {
        auto& y = static_cast<BlockQ5_0*>(dst)[b];
        uint32_t qh;
        QuantSymmetric(x + kQk * b, 16, &y.d, y.qs, &qh);
        StoreU32(y.qh, qh);
      }
      return;
    case TensorType::kQ4_1:
      for (int64_t b = 0; b < nb; ++b) {
        auto& y = static_cast<BlockQ4_1*>(dst)[b];
        QuantAsymmetric(x + kQk * b, 16, &y.d, &y.m, y.qs, nullptr);
      }
      return;
    case TensorType::kQ5_1:
      for (int64_t b = 0; b < nb; ++b) {
        auto& y = static_cast<BlockQ5_1*>(dst)[b];
        uint32_t qh;
        QuantAsymmetric(x + kQk * b, 32, &y.d, &y.m, y.qs, &qh);
        StoreU32(y.qh, qh);
      }
      return;
    case TensorType::kQ4_K:
      for (int64_t b = 0; b < nb; ++b) {
        auto& y = static_cast<BlockQ4_K*>(dst)[b];
        QuantK45(x + kQkK * b, 16, &y.d, &y.dmin, y.scales, nullptr, y.qs);
      }
      return;
    case TensorType::kQ5_K:
      for (int64_t b = 0; b < nb; ++b) {
        auto& y = static_cast<BlockQ5_K*>(dst)[b];
        QuantK45(x + kQkK * b, 32, &y.d, &y.dmin, y.scales, y.qh, y.qs);
      }
      return;
    case TensorType::kQ6_K:
      for (int64_t b = 0; b < nb; ++b) QuantQ6_K(x + kQkK * b, static_cast<BlockQ6_K*>(dst) + b);
      return;
    default:
      break;
  }
  LLAMAY_CHECK(false) << "cannot quantise to " << TensorTypeName(t);
}

}  // namespace llamay::kernels
