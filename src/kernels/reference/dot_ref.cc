// The canonical dot products: every fast path must reproduce these bit for bit (see vec_dot.h).
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "base/numeric.h"
#include "kernels/reference/reference.h"

namespace llamay::kernels {
namespace {

// Float types: lane i%8 accumulates w_i * a_i.
template <typename Load>
float DotFloat(Load load_w, const float* a, int64_t n) {
  float acc[8] = {};
  for (int64_t i = 0; i < n; ++i) acc[i % 8] = acc[i % 8] + load_w(i) * a[i];
  return Reduce8(acc);
}

// The weight value (as an integer, offset removed for the _0 types) of element j of a 32-block.
int NibbleAt(const uint8_t* qs, int j) { return j < 16 ? (qs[j] & 0xF) : (qs[j - 16] >> 4); }
uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);  // little-endian host (x86-64, aarch64)
  return v;
}
int Q5At(const uint8_t* qs, const uint8_t* qh, int j) {
  return NibbleAt(qs, j) | static_cast<int>(((LoadU32(qh) >> j) & 1u) << 4);
}

// 32-blocks: one exact integer sum per block, then acc = acc + float(isum) * (d_w * d_a), blocks in order.
// (d_w * d_a is exact in f32: two f16 values. |isum| <= 32 * 255 * 128 < 2^24, so float(isum) is exact too.)
template <typename WeightAt>
int32_t BlockSum(WeightAt weight_at, const int8_t* aq) {
  int32_t isum = 0;
  for (int j = 0; j < kQk; ++j) isum += weight_at(j) * aq[j];
  return isum;
}

template <typename Block, typename WeightAt>
float Dot_0(const Block* w, const BlockQ8_0* a, int64_t nb, WeightAt weight_at) {
  float acc = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const float dd = F16ToF32(w[b].d) * F16ToF32(a[b].d);
    const int32_t isum = BlockSum([&](int j) { return weight_at(w[b], j); }, a[b].qs);
    acc = acc + static_cast<float>(isum) * dd;
  }
  return acc;
}

// _1 types: x = d*q + m, so dot = sum over blocks of d_w*d_a*sum(q*a) + m_w*s_a; the min terms form a
// separate sum in block order, added at the end.
template <typename Block, typename WeightAt>
float Dot_1(const Block* w, const BlockQ8_1* a, int64_t nb, WeightAt weight_at) {
  float acc = 0.0f;
  float macc = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const float dd = F16ToF32(w[b].d) * F16ToF32(a[b].d);
    const int32_t isum = BlockSum([&](int j) { return weight_at(w[b], j); }, a[b].qs);
    acc = acc + static_cast<float>(isum) * dd;
    macc = macc + F16ToF32(w[b].m) * F16ToF32(a[b].s);
  }
  return acc + macc;
}

// K-quants: exact integer sums per super-block, then acc += float(sumi)*(d*d_a) - float(smin)*(dmin*d_a).
float DotQ4_5K(const uint8_t* w, size_t block_bytes, bool five_bit, const BlockQ8_K* a, int64_t nb) {
  float acc = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = w + b * block_bytes;
    uint16_t d16, dmin16;
    std::memcpy(&d16, blk, 2);
    std::memcpy(&dmin16, blk + 2, 2);
    const uint8_t* scales = blk + 4;
    const uint8_t* qh = five_bit ? blk + 16 : nullptr;
    const uint8_t* qs = five_bit ? blk + 48 : blk + 16;
    int32_t sumi = 0, smin = 0;
    for (int s = 0; s < 8; ++s) {
      uint8_t sc, mn;
      UnpackScaleMinK4(s, scales, &sc, &mn);
      int32_t isum = 0;
      for (int l = 0; l < 32; ++l) {
        int q = (qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 0xF;
        if (qh != nullptr) q |= ((qh[l] >> s) & 1) << 4;
        isum += q * a[b].qs[32 * s + l];
      }
      sumi += sc * isum;
      smin += mn * (a[b].bsums[2 * s] + a[b].bsums[2 * s + 1]);
    }
    const float dd = F16ToF32(d16) * a[b].d, dm = F16ToF32(dmin16) * a[b].d;
    acc = acc + (static_cast<float>(sumi) * dd - static_cast<float>(smin) * dm);
  }
  return acc;
}

float DotQ6_K(const BlockQ6_K* w, const BlockQ8_K* a, int64_t nb) {
  float acc = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    int q[kQkK];
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = w[b].ql + 64 * half;
      const uint8_t* qh = w[b].qh + 32 * half;
      for (int l = 0; l < 32; ++l) {
        q[128 * half + l] = (ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4);
        q[128 * half + l + 32] = (ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4);
        q[128 * half + l + 64] = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
        q[128 * half + l + 96] = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
      }
    }
    int32_t sumi = 0;
    for (int s = 0; s < 16; ++s) {
      int32_t isum = 0;
      for (int l = 0; l < 16; ++l) isum += (q[16 * s + l] - 32) * a[b].qs[16 * s + l];
      sumi += w[b].scales[s] * isum;
    }
    acc = acc + static_cast<float>(sumi) * (F16ToF32(w[b].d) * a[b].d);
  }
  return acc;
}

// Q3_K and Q2_K weight values in element order: element 128h + 32k + l (l < 32) reads bits 2k..2k+1 of
// qs[32h + l]; Q3_K subtracts 4 where bit 4h + k of hmask[l] is clear.
void Unpack2Bit(const uint8_t* qs, const uint8_t* hmask, int* q) {
  for (int e = 0; e < kQkK; ++e) {
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    q[e] = (qs[32 * h + l] >> (2 * k)) & 3;
    if (hmask != nullptr && ((hmask[l] >> (4 * h + k)) & 1) == 0) q[e] -= 4;
  }
}

// Q3_K: sumi = sum over the 16 sub-blocks of (sc - 32) * (sum of q * a), then acc += float(sumi) * (d*d_a)
// as Q6_K (ggml's generic code keeps eight lane sums instead; its SIMD paths one sum per super-block).
float DotQ3_K(const BlockQ3_K* w, const BlockQ8_K* a, int64_t nb) {
  float acc = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    int q[kQkK];
    Unpack2Bit(w[b].qs, w[b].hmask, q);
    uint32_t words[4];
    UnpackScalesQ3K(w[b].scales, words);
    uint8_t sc[16];
    std::memcpy(sc, words, 16);
    int32_t sumi = 0;
    for (int s = 0; s < 16; ++s) {
      int32_t isum = 0;
      for (int l = 0; l < 16; ++l) isum += q[16 * s + l] * a[b].qs[16 * s + l];
      sumi += (sc[s] - 32) * isum;
    }
    acc = acc + static_cast<float>(sumi) * (F16ToF32(w[b].d) * a[b].d);
  }
  return acc;
}

// Q2_K: as Q4_K, with 16 sub-blocks of 16 and smin = sum of mn_s * bsums[s] (ggml's generic order:
// acc + (float(sumi) * (d*d_a) - float(smin) * (dmin*d_a))).
float DotQ2_K(const BlockQ2_K* w, const BlockQ8_K* a, int64_t nb) {
  float acc = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    int q[kQkK];
    Unpack2Bit(w[b].qs, nullptr, q);
    int32_t sumi = 0, smin = 0;
    for (int s = 0; s < 16; ++s) {
      int32_t isum = 0;
      for (int l = 0; l < 16; ++l) isum += q[16 * s + l] * a[b].qs[16 * s + l];
      sumi += (w[b].scales[s] & 0xF) * isum;
      smin += (w[b].scales[s] >> 4) * a[b].bsums[s];
    }
    const float dd = F16ToF32(w[b].d) * a[b].d, dm = F16ToF32(w[b].dmin) * a[b].d;
    acc = acc + (static_cast<float>(sumi) * dd - static_cast<float>(smin) * dm);
  }
  return acc;
}

// MXFP4: a 32-block whose d_w is 2^(e-128) (E8M0Half), in the 32-blocks' order.
float DotMXFP4(const BlockMXFP4* w, const BlockQ8_0* a, int64_t nb) {
  float acc = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const float dd = E8M0Half(w[b].e) * F16ToF32(a[b].d);
    const int32_t isum =
        BlockSum([&](int j) { return static_cast<int>(kMxfp4Values[NibbleAt(w[b].qs, j)]); }, a[b].qs);
    acc = acc + static_cast<float>(isum) * dd;
  }
  return acc;
}

// IQ4_XS: sumi = sum over the 8 sub-blocks of (ls - 32) * (sum of value * a), exact, then
// acc += float(sumi) * (d * d_a) as Q6_K (ggml's generic code instead adds (d * d_a * (ls - 32)) * isum per
// sub-block; its SIMD code one integer sum per super-block, as here).
float DotIQ4_XS(const BlockIQ4_XS* w, const BlockQ8_K* a, int64_t nb) {
  float acc = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    int32_t sumi = 0;
    for (int s = 0; s < 8; ++s) {
      const uint8_t* qs = w[b].qs + 16 * s;
      const int8_t* aq = a[b].qs + 32 * s;
      int32_t isum = 0;
      for (int j = 0; j < 16; ++j)
        isum += kIq4NlValues[qs[j] & 0xF] * aq[j] + kIq4NlValues[qs[j] >> 4] * aq[j + 16];
      sumi += (ScaleIQ4_XS(w[b], s) - 32) * isum;
    }
    acc = acc + static_cast<float>(sumi) * (F16ToF32(w[b].d) * a[b].d);
  }
  return acc;
}

}  // namespace

float RefDotF32(const float* x, const float* y, int64_t n) {
  return DotFloat([x](int64_t i) { return x[i]; }, y, n);
}

float RefDot(TensorType wtype, const void* w, const void* act, int64_t n) {
  const auto* a8 = static_cast<const BlockQ8_0*>(act);
  const auto* a81 = static_cast<const BlockQ8_1*>(act);
  const auto* ak = static_cast<const BlockQ8_K*>(act);
  const auto* af = static_cast<const float*>(act);
  switch (wtype) {
    case TensorType::kF32:
      return RefDotF32(static_cast<const float*>(w), af, n);
    case TensorType::kF16: {
      const auto* h = static_cast<const uint16_t*>(w);
      return DotFloat([h](int64_t i) { return F16ToF32(h[i]); }, af, n);
    }
    case TensorType::kBF16: {
      const auto* h = static_cast<const uint16_t*>(w);
      return DotFloat([h](int64_t i) { return Bf16ToF32(h[i]); }, af, n);
    }
    case TensorType::kQ8_0:
      return Dot_0(static_cast<const BlockQ8_0*>(w), a8, n / kQk,
                   [](const BlockQ8_0& blk, int j) { return static_cast<int>(blk.qs[j]); });
    case TensorType::kQ4_0:
      return Dot_0(static_cast<const BlockQ4_0*>(w), a8, n / kQk,
                   [](const BlockQ4_0& blk, int j) { return NibbleAt(blk.qs, j) - 8; });
    case TensorType::kQ5_0:
      return Dot_0(static_cast<const BlockQ5_0*>(w), a8, n / kQk,
                   [](const BlockQ5_0& blk, int j) { return Q5At(blk.qs, blk.qh, j) - 16; });
    case TensorType::kIQ4_XS:
      return DotIQ4_XS(static_cast<const BlockIQ4_XS*>(w), ak, n / kQkK);
    case TensorType::kMXFP4:
      return DotMXFP4(static_cast<const BlockMXFP4*>(w), a8, n / kQk);
    case TensorType::kIQ4_NL:
      return Dot_0(static_cast<const BlockIQ4_NL*>(w), a8, n / kQk, [](const BlockIQ4_NL& blk, int j) {
        return static_cast<int>(kIq4NlValues[NibbleAt(blk.qs, j)]);
      });
    case TensorType::kQ4_1:
      return Dot_1(static_cast<const BlockQ4_1*>(w), a81, n / kQk,
                   [](const BlockQ4_1& blk, int j) { return NibbleAt(blk.qs, j); });
    case TensorType::kQ5_1:
      return Dot_1(static_cast<const BlockQ5_1*>(w), a81, n / kQk,
                   [](const BlockQ5_1& blk, int j) { return Q5At(blk.qs, blk.qh, j); });
    case TensorType::kQ4_K:
      return DotQ4_5K(static_cast<const uint8_t*>(w), sizeof(BlockQ4_K), false, ak, n / kQkK);
    case TensorType::kQ5_K:
      return DotQ4_5K(static_cast<const uint8_t*>(w), sizeof(BlockQ5_K), true, ak, n / kQkK);
    case TensorType::kQ6_K:
      return DotQ6_K(static_cast<const BlockQ6_K*>(w), ak, n / kQkK);
    case TensorType::kQ3_K:
      return DotQ3_K(static_cast<const BlockQ3_K*>(w), ak, n / kQkK);
    case TensorType::kQ2_K:
      return DotQ2_K(static_cast<const BlockQ2_K*>(w), ak, n / kQkK);
    default:
      break;
  }
  LLAMAY_CHECK(false) << "no dot product for " << TensorTypeName(wtype);
  return 0.0f;
}

}  // namespace llamay::kernels
