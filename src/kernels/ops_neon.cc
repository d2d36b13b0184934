// NEON ops: each vector step performs, per lane, exactly the f32 operations of reference/ops_ref.cc
// (neon::Exp is RefExp on four lanes; multiply, then add, never fused), and reductions keep the reference's
// lane i%8 order (two registers: lanes 0..3 and 4..7), so results match the scalar reference bit for bit.
// Tails shorter than a register run the scalar element functions.
#if defined(__aarch64__)
#include "kernels/ops_neon.h"

#include <arm_neon.h>

#include <cmath>

#include "kernels/neon_util.h"
#include "kernels/reference/reference.h"

namespace llamay::kernels::neon {
namespace {

// RefSilu on four lanes: x / (1 + exp(-x)).
LLAMAY_NEON_INLINE float32x4_t SiluV(float32x4_t x) {
  return vdivq_f32(x, vaddq_f32(vdupq_n_f32(1.0f), Exp(vnegq_f32(x))));
}

// RefGelu on four lanes: u = ((s * x) * (1 + ((a * x) * x))), as the scalar expression associates, then
// t = 1 - 2 / (exp(2u) + 1) and (0.5 * x) * (1 + t).
LLAMAY_NEON_INLINE float32x4_t GeluV(float32x4_t x) {
  const float32x4_t one = vdupq_n_f32(1.0f), two = vdupq_n_f32(2.0f);
  const float32x4_t inner = vaddq_f32(one, vmulq_f32(vmulq_f32(vdupq_n_f32(0.044715f), x), x));
  const float32x4_t u = vmulq_f32(vmulq_f32(vdupq_n_f32(0.79788456080286535588f), x), inner);
  const float32x4_t t = vsubq_f32(one, vdivq_f32(two, vaddq_f32(Exp(vmulq_f32(two, u)), one)));
  return vmulq_f32(vmulq_f32(vdupq_n_f32(0.5f), x), vaddq_f32(one, t));
}

// m = v > m ? v : m per lane, as RefSoftmax's maximum (a NaN v never wins; vmaxq_f32 would return it).
LLAMAY_NEON_INLINE float32x4_t MaxV(float32x4_t m, float32x4_t v) { return vbslq_f32(vcgtq_f32(v, m), v, m); }

}  // namespace

void RmsNorm(const float* x, const float* w, int64_t n, float eps, float* y) {
  // acc[k] holds the double lane sums 2k and 2k + 1. A product of two floats is exact in double.
  float64x2_t acc[4];
  for (auto& a : acc) a = vdupq_n_f64(0.0);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const float32x4_t a = vld1q_f32(x + i), b = vld1q_f32(x + i + 4);
    const float64x2_t d[4] = {vcvt_f64_f32(vget_low_f32(a)), vcvt_high_f64_f32(a),
                              vcvt_f64_f32(vget_low_f32(b)), vcvt_high_f64_f32(b)};
    for (int k = 0; k < 4; ++k) acc[k] = vaddq_f64(acc[k], vmulq_f64(d[k], d[k]));
  }
  double sums[8];
  for (int k = 0; k < 4; ++k) vst1q_f64(sums + 2 * k, acc[k]);
  for (; i < n; ++i) sums[i % 8] = sums[i % 8] + static_cast<double>(x[i]) * static_cast<double>(x[i]);
  // RmsNormFinish's scale, then its f32 products four lanes at a time.
  const float mean = static_cast<float>(kernels::Reduce8(sums) / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  const float32x4_t s4 = vdupq_n_f32(scale);
  i = 0;
  if (w == nullptr) {
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vmulq_f32(vld1q_f32(x + i), s4));
    for (; i < n; ++i) y[i] = x[i] * scale;
  } else {
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vmulq_f32(vmulq_f32(vld1q_f32(x + i), s4), vld1q_f32(w + i)));
    for (; i < n; ++i) y[i] = (x[i] * scale) * w[i];
  }
}

void Silu(const float* x, int64_t n, float* y) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(y + i, SiluV(vld1q_f32(x + i)));
  for (; i < n; ++i) y[i] = RefSilu(x[i]);
}

void SwiGlu(const float* gate, const float* up, int64_t n, float* y) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vmulq_f32(SiluV(vld1q_f32(gate + i)), vld1q_f32(up + i)));
  for (; i < n; ++i) y[i] = RefSilu(gate[i]) * up[i];
}

void Gelu(const float* x, int64_t n, float* y) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(y + i, GeluV(vld1q_f32(x + i)));
  for (; i < n; ++i) y[i] = RefGelu(x[i]);
}

void Softmax(const float* x, int64_t n, float* y) {
  // The maximum: its value does not depend on the order (only which of +0 and -0 wins a tie may, and
  // exp(x - m) is the same for both).
  float32x4_t m_lo = vdupq_n_f32(x[0]), m_hi = m_lo;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    m_lo = MaxV(m_lo, vld1q_f32(x + i));
    m_hi = MaxV(m_hi, vld1q_f32(x + i + 4));
  }
  float lanes[8];
  vst1q_f32(lanes, m_lo);
  vst1q_f32(lanes + 4, m_hi);
  float m = lanes[0];
  for (int k = 1; k < 8; ++k) m = lanes[k] > m ? lanes[k] : m;
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;

  // e_i = RefExp(x_i - m), added to lane i%8 in order of i.
  const float32x4_t m4 = vdupq_n_f32(m);
  float32x4_t lo = vdupq_n_f32(0.0f), hi = lo;
  for (i = 0; i + 8 <= n; i += 8) {
    const float32x4_t e0 = Exp(vsubq_f32(vld1q_f32(x + i), m4));
    const float32x4_t e1 = Exp(vsubq_f32(vld1q_f32(x + i + 4), m4));
    vst1q_f32(y + i, e0);
    vst1q_f32(y + i + 4, e1);
    lo = vaddq_f32(lo, e0);
    hi = vaddq_f32(hi, e1);
  }
  if (i + 4 <= n) {  // i % 8 == 0 here: lanes 0..3
    const float32x4_t e = Exp(vsubq_f32(vld1q_f32(x + i), m4));
    vst1q_f32(y + i, e);
    lo = vaddq_f32(lo, e);
    i += 4;
  }
  float sums[8];
  vst1q_f32(sums, lo);
  vst1q_f32(sums + 4, hi);
  for (; i < n; ++i) {
    const float e = RefExp(x[i] - m);
    y[i] = e;
    sums[i % 8] = sums[i % 8] + e;
  }
  const float inv = 1.0f / kernels::Reduce8(sums);
  const float32x4_t inv4 = vdupq_n_f32(inv);
  for (i = 0; i + 4 <= n; i += 4) vst1q_f32(y + i, vmulq_f32(vld1q_f32(y + i), inv4));
  for (; i < n; ++i) y[i] = y[i] * inv;
}

}  // namespace llamay::kernels::neon
#endif  // __aarch64__
