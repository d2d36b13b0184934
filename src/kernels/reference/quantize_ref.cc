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

// The index of the value of a 16-entry grid nearest to v (the first on ties).
int NearestIndex(const int8_t* grid, float v) {
  int best = 0;
  float best_err = std::fabs(v - static_cast<float>(grid[0]));
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(v - static_cast<float>(grid[i]));
    if (err < best_err) best = i, best_err = err;
  }
  return best;
}

// IQ4_NL block: d maps the element of largest magnitude to the grid's end value -127 (ggml's first guess;
// its search over nearby scales is left out), then each element takes the nearest grid value.
void QuantIQ4_NL(const float* x, BlockIQ4_NL* y) {
  y->d = F32ToF16(SignedAbsMax(x, kQk) / static_cast<float>(kIq4NlValues[0]));
  const float d = F16ToF32(y->d);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  std::memset(y->qs, 0, sizeof(y->qs));
  for (int j = 0; j < kQk; ++j)
    y->qs[j % 16] |= static_cast<uint8_t>(NearestIndex(kIq4NlValues, x[j] * id) << (j < 16 ? 0 : 4));
}

// MXFP4 block: the smallest exponent whose grid reaches the largest magnitude (12 * 2^(e-128) >= amax, so
// nothing clips), then each element takes the nearest grid value.
void QuantMXFP4(const float* x, BlockMXFP4* y) {
  float amax = 0.0f;
  for (int j = 0; j < kQk; ++j) amax = std::max(amax, std::fabs(x[j]));
  int e = 0;
  while (e < 254 && 12.0f * E8M0Half(static_cast<uint8_t>(e)) < amax) ++e;
  y->e = static_cast<uint8_t>(e);
  const float d = E8M0Half(y->e);  // divided by, not inverted: 1 / 2^-128 is not a finite f32
  std::memset(y->qs, 0, sizeof(y->qs));
  for (int j = 0; j < kQk; ++j)
    y->qs[j % 16] |= static_cast<uint8_t>(NearestIndex(kMxfp4Values, x[j] / d) << (j < 16 ? 0 : 4));
}

// IQ4_XS super-block: per sub-block of 32 a signed scale that maps its largest magnitude to the grid's end
// -127 (as QuantIQ4_NL), then 6-bit scales ls - 32 in [-32, 31] against d, the largest of them mapped to
// -32; each element takes the grid value nearest to it with its sub-block's final scale.
void QuantIQ4_XS(const float* x, BlockIQ4_XS* y) {
  float sub_scale[8];
  float max_scale = 0.0f;  // the sub-block scale of largest magnitude, with its sign
  for (int s = 0; s < 8; ++s) {
    sub_scale[s] = SignedAbsMax(x + 32 * s, 32) / static_cast<float>(kIq4NlValues[0]);
    if (std::fabs(sub_scale[s]) > std::fabs(max_scale)) max_scale = sub_scale[s];
  }
  const float d = max_scale / -32.0f;
  y->d = F32ToF16(d);
  const float df = F16ToF32(y->d);
  y->scales_h = 0;
  std::memset(y->scales_l, 0, sizeof(y->scales_l));
  std::memset(y->qs, 0, sizeof(y->qs));
  for (int s = 0; s < 8; ++s) {
    const int ls = std::clamp(df != 0.0f ? NearestInt(sub_scale[s] / df) : 0, -32, 31) + 32;
    y->scales_l[s / 2] |= static_cast<uint8_t>((ls & 0xF) << (4 * (s % 2)));
    y->scales_h |= static_cast<uint16_t>((ls >> 4) << (2 * s));
    const float dl = df * static_cast<float>(ls - 32);
    const float id = dl != 0.0f ? 1.0f / dl : 0.0f;
    for (int j = 0; j < 32; ++j)
      y->qs[16 * s + j % 16] |=
          static_cast<uint8_t>(NearestIndex(kIq4NlValues, x[32 * s + j] * id) << (j < 16 ? 0 : 4));
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

// Stores 2-bit value q (0..3) of element e of a Q3_K/Q2_K super-block: bits 2k..2k+1 of qs[32h + l] for
// e = 128h + 32k + l.
void Put2Bit(uint8_t* qs, int e, int q) {
  qs[32 * (e / 128) + e % 32] |= static_cast<uint8_t>((q & 3) << (2 * ((e % 128) / 32)));
}

// Q3_K: per sub-block of 16 a signed scale that maps the largest magnitude to q = -4, then 6-bit scales
// (sc - 32 in [-32, 31]) against d, the largest of them mapped to -32.
void QuantQ3_K(const float* x, BlockQ3_K* y) {
  float sub_scale[16];
  float max_scale = 0.0f;  // the sub-block scale of largest magnitude, with its sign
  for (int s = 0; s < 16; ++s) {
    sub_scale[s] = SignedAbsMax(x + 16 * s, 16) / -4.0f;
    if (std::fabs(sub_scale[s]) > std::fabs(max_scale)) max_scale = sub_scale[s];
  }
  const float d = max_scale / -32.0f;
  y->d = F32ToF16(d);
  const float df = F16ToF32(y->d);
  std::memset(y->scales, 0, sizeof(y->scales));
  std::memset(y->hmask, 0, sizeof(y->hmask));
  std::memset(y->qs, 0, sizeof(y->qs));
  for (int s = 0; s < 16; ++s) {
    const int ls = std::clamp(d != 0.0f ? NearestInt(sub_scale[s] / d) : 0, -32, 31);
    const int l = ls + 32;
    y->scales[s % 8] |= static_cast<uint8_t>((l & 0xF) << (s < 8 ? 0 : 4));
    y->scales[8 + s % 4] |= static_cast<uint8_t>((l >> 4) << (2 * (s / 4)));
    const float ds = df * static_cast<float>(ls);
    for (int i = 0; i < 16; ++i) {
      const int e = 16 * s + i;
      const int q = (ds != 0.0f ? std::clamp(NearestInt(x[e] / ds), -4, 3) : 0) + 4;
      Put2Bit(y->qs, e, q);
      y->hmask[e % 32] |= static_cast<uint8_t>((q >> 2) << (4 * (e / 128) + (e % 128) / 32));
    }
  }
}

// Q2_K: per sub-block of 16 a scale and a min (min clamped to <= 0, stored as a non-negative offset), both
// 4-bit against f16 d and dmin.
void QuantQ2_K(const float* x, BlockQ2_K* y) {
  float sub_scale[16], sub_min[16];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int s = 0; s < 16; ++s) {
    float mn = 0.0f, mx = 0.0f;
    for (int i = 0; i < 16; ++i) mn = std::min(mn, x[16 * s + i]), mx = std::max(mx, x[16 * s + i]);
    sub_scale[s] = (mx - mn) / 3.0f;
    sub_min[s] = -mn;
    max_scale = std::max(max_scale, sub_scale[s]);
    max_min = std::max(max_min, sub_min[s]);
  }
  const float d = max_scale / 15.0f, dmin = max_min / 15.0f;
  y->d = F32ToF16(d);
  y->dmin = F32ToF16(dmin);
  const float df = F16ToF32(y->d), dminf = F16ToF32(y->dmin);
  std::memset(y->qs, 0, sizeof(y->qs));
  for (int s = 0; s < 16; ++s) {
    const int ls = std::clamp(d > 0 ? NearestInt(sub_scale[s] / d) : 0, 0, 15);
    const int lm = std::clamp(dmin > 0 ? NearestInt(sub_min[s] / dmin) : 0, 0, 15);
    y->scales[s] = static_cast<uint8_t>(ls | (lm << 4));
    const float ds = df * static_cast<float>(ls), ms = dminf * static_cast<float>(lm);
    for (int i = 0; i < 16; ++i) {
      const int e = 16 * s + i;
      Put2Bit(y->qs, e, ds > 0 ? std::clamp(NearestInt((x[e] + ms) / ds), 0, 3) : 0);
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
    case TensorType::kIQ4_NL:
      for (int64_t b = 0; b < nb; ++b) QuantIQ4_NL(x + kQk * b, static_cast<BlockIQ4_NL*>(dst) + b);
      return;
    case TensorType::kMXFP4:
      for (int64_t b = 0; b < nb; ++b) QuantMXFP4(x + kQk * b, static_cast<BlockMXFP4*>(dst) + b);
      return;
    case TensorType::kIQ4_XS:
      for (int64_t b = 0; b < nb; ++b) QuantIQ4_XS(x + kQkK * b, static_cast<BlockIQ4_XS*>(dst) + b);
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
    case TensorType::kQ3_K:
      for (int64_t b = 0; b < nb; ++b) QuantQ3_K(x + kQkK * b, static_cast<BlockQ3_K*>(dst) + b);
      return;
    case TensorType::kQ2_K:
      for (int64_t b = 0; b < nb; ++b) QuantQ2_K(x + kQkK * b, static_cast<BlockQ2_K*>(dst) + b);
      return;
    default:
      break;
  }
  LLAMAY_CHECK(false) << "cannot quantise to " << TensorTypeName(t);
}

}  // namespace llamay::kernels
