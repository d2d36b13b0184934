// Scalar dequantisation of every supported type: the source of truth for the block layouts.
#include <cstring>

#include "base/check.h"
#include "base/numeric.h"
#include "kernels/dequant.h"
#include "kernels/quant_blocks.h"

namespace llamay::kernels {
namespace {

void DequantQ4_0(const BlockQ4_0* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kQk) {
    const float d = F16ToF32(x[b].d);
    for (int j = 0; j < kQk / 2; ++j) {
      y[j] = static_cast<float>((x[b].qs[j] & 0xF) - 8) * d;
      y[j + kQk / 2] = static_cast<float>((x[b].qs[j] >> 4) - 8) * d;
    }
  }
}

void DequantQ4_1(const BlockQ4_1* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kQk) {
    const float d = F16ToF32(x[b].d), m = F16ToF32(x[b].m);
    for (int j = 0; j < kQk / 2; ++j) {
      y[j] = static_cast<float>(x[b].qs[j] & 0xF) * d + m;
      y[j + kQk / 2] = static_cast<float>(x[b].qs[j] >> 4) * d + m;
    }
  }
}

uint32_t LoadU32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

// The 5-bit value of element j (0..31) of a Q5 block.
inline int Q5Value(const uint8_t* qs, uint32_t qh, int j) {
  const int lo = j < kQk / 2 ? (qs[j] & 0xF) : (qs[j - kQk / 2] >> 4);
  return lo | static_cast<int>(((qh >> j) & 1u) << 4);
}

void DequantQ5_0(const BlockQ5_0* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kQk) {
    const float d = F16ToF32(x[b].d);
    const uint32_t qh = LoadU32(x[b].qh);
    for (int j = 0; j < kQk; ++j) y[j] = static_cast<float>(Q5Value(x[b].qs, qh, j) - 16) * d;
  }
}

void DequantQ5_1(const BlockQ5_1* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kQk) {
    const float d = F16ToF32(x[b].d), m = F16ToF32(x[b].m);
    const uint32_t qh = LoadU32(x[b].qh);
    for (int j = 0; j < kQk; ++j) y[j] = static_cast<float>(Q5Value(x[b].qs, qh, j)) * d + m;
  }
}

// IQ4_NL: ggml's f32 step is d * float(value).
void DequantIQ4_NL(const BlockIQ4_NL* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kQk) {
    const float d = F16ToF32(x[b].d);
    for (int j = 0; j < kQk / 2; ++j) {
      y[j] = d * static_cast<float>(kIq4NlValues[x[b].qs[j] & 0xF]);
      y[j + kQk / 2] = d * static_cast<float>(kIq4NlValues[x[b].qs[j] >> 4]);
    }
  }
}

// MXFP4: ggml's f32 step is float(value) * d, d = 2^(e-128).
void DequantMXFP4(const BlockMXFP4* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kQk) {
    const float d = E8M0Half(x[b].e);
    for (int j = 0; j < kQk / 2; ++j) {
      y[j] = static_cast<float>(kMxfp4Values[x[b].qs[j] & 0xF]) * d;
      y[j + kQk / 2] = static_cast<float>(kMxfp4Values[x[b].qs[j] >> 4]) * d;
    }
  }
}

// IQ4_XS: ggml's f32 steps are dl = d * float(ls - 32) per sub-block of 32, then dl * float(value).
void DequantIQ4_XS(const BlockIQ4_XS* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = F16ToF32(x[b].d);
    for (int s = 0; s < kQkK / 32; ++s, y += 32) {
      const float dl = d * static_cast<float>(ScaleIQ4_XS(x[b], s) - 32);
      const uint8_t* qs = x[b].qs + 16 * s;
      for (int j = 0; j < 16; ++j) {
        y[j] = dl * static_cast<float>(kIq4NlValues[qs[j] & 0xF]);
        y[j + 16] = dl * static_cast<float>(kIq4NlValues[qs[j] >> 4]);
      }
    }
  }
}

// Q4_K and Q5_K share the scale layout; qh is null for Q4_K.
void DequantK45(uint16_t d16, uint16_t dmin16, const uint8_t* scales, const uint8_t* qh, const uint8_t* qs,
                float* y) {
  const float d = F16ToF32(d16), dmin = F16ToF32(dmin16);
  for (int c = 0; c < 4; ++c) {
    for (int half = 0; half < 2; ++half) {
      const int s = 2 * c + half;
      uint8_t sc, mn;
      UnpackScaleMinK4(s, scales, &sc, &mn);
      const float ds = d * static_cast<float>(sc), ms = dmin * static_cast<float>(mn);
      for (int l = 0; l < 32; ++l) {
        int q = half == 0 ? (qs[32 * c + l] & 0xF) : (qs[32 * c + l] >> 4);
        if (qh != nullptr) q += ((qh[l] >> s) & 1) << 4;
        y[32 * s + l] = ds * static_cast<float>(q) - ms;
      }
    }
  }
}

void DequantQ6_K(const BlockQ6_K* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kQkK) {
    const float d = F16ToF32(x[b].d);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = x[b].ql + 64 * half;
      const uint8_t* qh = x[b].qh + 32 * half;
      float* yh = y + 128 * half;
      for (int l = 0; l < 32; ++l) {
        const int q[4] = {
            (ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4), (ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4),
            (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4), (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)};
        for (int k = 0; k < 4; ++k) {
          const int e = l + 32 * k;  // element inside the half; its sub-block is (128*half + e) / 16
          const float sc = static_cast<float>(x[b].scales[(128 * half + e) / 16]);
          yh[e] = d * sc * static_cast<float>(q[k] - 32);
        }
      }
    }
  }
}

// Q3_K and Q2_K: element 128h + 32k + l (l < 32) of a super-block, sub-block (128h + 32k + l) / 16, reads
// bits 2k..2k+1 of qs[32h + l]. ggml's order of f32 operations: dl = d * float(scale), x = dl * float(q)
// (Q2_K: minus dmin * float(min)).
void DequantQ3_K(const BlockQ3_K* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kQkK) {
    const float d = F16ToF32(x[b].d);
    uint32_t words[4];
    UnpackScalesQ3K(x[b].scales, words);
    uint8_t sc[16];
    std::memcpy(sc, words, 16);
    for (int e = 0; e < kQkK; ++e) {
      const int h = e / 128, k = (e % 128) / 32, l = e % 32;
      const int lo = (x[b].qs[32 * h + l] >> (2 * k)) & 3;
      const int q = lo - (((x[b].hmask[l] >> (4 * h + k)) & 1) != 0 ? 0 : 4);
      const float dl = d * static_cast<float>(sc[e / 16] - 32);
      y[e] = dl * static_cast<float>(q);
    }
  }
}

void DequantQ2_K(const BlockQ2_K* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += kQkK) {
    const float d = F16ToF32(x[b].d), dmin = F16ToF32(x[b].dmin);
    for (int e = 0; e < kQkK; ++e) {
      const int h = e / 128, k = (e % 128) / 32, l = e % 32;
      const int q = (x[b].qs[32 * h + l] >> (2 * k)) & 3;
      const uint8_t sc = x[b].scales[e / 16];
      const float dl = d * static_cast<float>(sc & 0xF), ml = dmin * static_cast<float>(sc >> 4);
      y[e] = dl * static_cast<float>(q) - ml;
    }
  }
}

}  // namespace

bool CanDequantize(TensorType t) {
  switch (t) {
    case TensorType::kF32:
    case TensorType::kF16:
    case TensorType::kBF16:
    case TensorType::kQ8_0:
    case TensorType::kQ4_0:
    case TensorType::kQ4_1:
    case TensorType::kQ5_0:
    case TensorType::kQ5_1:
    case TensorType::kIQ4_NL:
    case TensorType::kMXFP4:
    case TensorType::kIQ4_XS:
    case TensorType::kQ4_K:
    case TensorType::kQ5_K:
    case TensorType::kQ6_K:
    case TensorType::kQ3_K:
    case TensorType::kQ2_K:
      return true;
    default:
      return false;
  }
}
bool CanQuantize(TensorType t) { return CanDequantize(t); }

int64_t TypeBlockSize(TensorType t) {
  auto info = GetTensorTypeInfo(static_cast<uint32_t>(t));
  LLAMAY_CHECK(info.has_value()) << "unknown tensor type " << static_cast<uint32_t>(t);
  return info->block_size;
}

size_t TypeRowBytes(TensorType t, int64_t n) {
  auto info = GetTensorTypeInfo(static_cast<uint32_t>(t));
  LLAMAY_CHECK(info.has_value()) << "unknown tensor type " << static_cast<uint32_t>(t);
  LLAMAY_CHECK(n % info->block_size == 0)
      << "row of " << n << " elements is not whole blocks of " << info->name;
  return static_cast<size_t>(n / info->block_size) * info->type_size;
}

void DequantizeRow(TensorType t, const void* src, float* y, int64_t n) {
  const int64_t nb = n / TypeBlockSize(t);
  LLAMAY_CHECK(nb * TypeBlockSize(t) == n) << "partial block";
  switch (t) {
    case TensorType::kF32:
      std::memcpy(y, src, sizeof(float) * n);
      return;
    case TensorType::kF16:
      ConvertF16ToF32Portable(static_cast<const uint16_t*>(src), y, n);
      return;
    case TensorType::kBF16:
      for (int64_t i = 0; i < n; ++i) y[i] = Bf16ToF32(static_cast<const uint16_t*>(src)[i]);
      return;
    case TensorType::kQ8_0:
      DequantizeRowQ8_0(static_cast<const BlockQ8_0*>(src), y, n);
      return;
    case TensorType::kQ4_0:
      DequantQ4_0(static_cast<const BlockQ4_0*>(src), y, nb);
      return;
    case TensorType::kQ4_1:
      DequantQ4_1(static_cast<const BlockQ4_1*>(src), y, nb);
      return;
    case TensorType::kQ5_0:
      DequantQ5_0(static_cast<const BlockQ5_0*>(src), y, nb);
      return;
    case TensorType::kQ5_1:
      DequantQ5_1(static_cast<const BlockQ5_1*>(src), y, nb);
      return;
    case TensorType::kIQ4_NL:
      DequantIQ4_NL(static_cast<const BlockIQ4_NL*>(src), y, nb);
      return;
    case TensorType::kMXFP4:
      DequantMXFP4(static_cast<const BlockMXFP4*>(src), y, nb);
      return;
    case TensorType::kIQ4_XS:
      DequantIQ4_XS(static_cast<const BlockIQ4_XS*>(src), y, nb);
      return;
    case TensorType::kQ4_K:
      for (int64_t b = 0; b < nb; ++b) {
        const auto& x = static_cast<const BlockQ4_K*>(src)[b];
        DequantK45(x.d, x.dmin, x.scales, nullptr, x.qs, y + kQkK * b);
      }
      return;
    case TensorType::kQ5_K:
      for (int64_t b = 0; b < nb; ++b) {
        const auto& x = static_cast<const BlockQ5_K*>(src)[b];
        DequantK45(x.d, x.dmin, x.scales, x.qh, x.qs, y + kQkK * b);
      }
      return;
    case TensorType::kQ6_K:
      DequantQ6_K(static_cast<const BlockQ6_K*>(src), y, nb);
      return;
    case TensorType::kQ3_K:
      DequantQ3_K(static_cast<const BlockQ3_K*>(src), y, nb);
      return;
    case TensorType::kQ2_K:
      DequantQ2_K(static_cast<const BlockQ2_K*>(src), y, nb);
      return;
    default:
      break;
  }
  LLAMAY_CHECK(false) << "cannot dequantise " << TensorTypeName(t);
}

}  // namespace llamay::kernels
