#include "kernels/vec_dot.h"

#include <cstring>

#include "base/check.h"
#include "base/numeric.h"
#include "kernels/dequant.h"
#include "kernels/matmul_kernels.h"
#include "kernels/ops_avx2.h"
#include "kernels/quant_blocks.h"
#include "kernels/reference/reference.h"

namespace llamay::kernels {
namespace {

void TileScalar(TensorType type, const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as,
                int64_t tokens, int64_t n_in, float* y, size_t ys) {
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t r = 0; r < rows; ++r) y[t * ys + r] = RefDot(type, w + r * ws, act + t * as, n_in);
}

template <TensorType kType>
void TileScalarFor(const uint8_t* w, size_t ws, int64_t rows, const uint8_t* act, size_t as, int64_t tokens,
                   int64_t n_in, float* y, size_t ys) {
  TileScalar(kType, w, ws, rows, act, as, tokens, n_in, y, ys);
}

// Rounds each value through a 16-bit float format (`to` then back) in chunks.
template <typename To, typename From>
void RoundThrough(const float* x, int64_t n, float* out, To to, From from) {
  uint16_t buf[256];
  for (int64_t i = 0; i < n; i += 256) {
    const int64_t m = n - i < 256 ? n - i : 256;
    to(x + i, buf, m);
    from(buf, out + i, m);
  }
}

}  // namespace

bool MatMulSupports(TensorType t) {
  // Every type with a dequantiser has a dot product: one list, in dequant.
  return CanDequantize(t);
}

ActFormat ActivationFormat(TensorType t) {
  switch (t) {
    case TensorType::kF32:
      return ActFormat::kF32;
    case TensorType::kF16:
      return ActFormat::kF16Rounded;
    case TensorType::kBF16:
      return ActFormat::kBf16Rounded;
    case TensorType::kQ8_0:
    case TensorType::kQ4_0:
    case TensorType::kQ5_0:
    case TensorType::kIQ4_NL:
    case TensorType::kMXFP4:
      return ActFormat::kQ8_0;
    case TensorType::kQ4_1:
    case TensorType::kQ5_1:
      return ActFormat::kQ8_1;
    case TensorType::kQ4_K:
    case TensorType::kQ5_K:
    case TensorType::kQ6_K:
    case TensorType::kQ3_K:
    case TensorType::kQ2_K:
    case TensorType::kIQ4_XS:
      return ActFormat::kQ8_K;
    default:
      break;
  }
  LLAMAY_CHECK(false) << "no matmul for weight type " << TensorTypeName(t);
  return ActFormat::kF32;
}

size_t ActivationRowBytes(ActFormat f, int64_t n) {
  switch (f) {
    case ActFormat::kF32:
    case ActFormat::kF16Rounded:
    case ActFormat::kBf16Rounded:
      return sizeof(float) * static_cast<size_t>(n);
    case ActFormat::kQ8_0:
      return sizeof(BlockQ8_0) * static_cast<size_t>(n / kQk);
    case ActFormat::kQ8_1:
      return sizeof(BlockQ8_1) * static_cast<size_t>(n / kQk);
    case ActFormat::kQ8_K:
      return sizeof(BlockQ8_K) * static_cast<size_t>(n / kQkK);
  }
  return 0;
}

void QuantizeActivationRow(ActFormat f, const float* x, int64_t n, void* act) {
  switch (f) {
    case ActFormat::kF32:
      std::memcpy(act, x, sizeof(float) * n);
      return;
    case ActFormat::kF16Rounded:
      RoundThrough(x, n, static_cast<float*>(act), ConvertF32ToF16, ConvertF16ToF32);
      return;
    case ActFormat::kBf16Rounded:
      for (int64_t i = 0; i < n; ++i) static_cast<float*>(act)[i] = Bf16ToF32(F32ToBf16(x[i]));
      return;
    case ActFormat::kQ8_0:
      LLAMAY_CHECK(n % kQk == 0) << "Q8_0 activations need n % 32 == 0, got " << n;
      QuantizeRowQ8_0(x, static_cast<BlockQ8_0*>(act), n);
      return;
    case ActFormat::kQ8_1:
      LLAMAY_CHECK(n % kQk == 0) << "Q8_1 activations need n % 32 == 0, got " << n;
      QuantizeRowQ8_1(x, static_cast<BlockQ8_1*>(act), n);
      return;
    case ActFormat::kQ8_K:
      LLAMAY_CHECK(n % kQkK == 0) << "Q8_K activations need n % 256 == 0, got " << n;
#if defined(__x86_64__)
      if (UsesAvx2(DetectIsa())) return avx2::QuantizeRowQ8_K(x, static_cast<BlockQ8_K*>(act), n);
#endif
      QuantizeRowQ8_K(x, static_cast<BlockQ8_K*>(act), n);
      return;
  }
}

TileFn GetTileFn(TensorType type, Isa isa, int64_t n_in) {
#if defined(__x86_64__)
  if (UsesAvx512(isa)) {
    if (type == TensorType::kQ8_0) return TileAvx512Q8_0;
    if (type == TensorType::kQ4_0) return TileAvx512Q4_0;
    if (type == TensorType::kQ5_0) return TileAvx512Q5_0;
    if (type == TensorType::kIQ4_NL) return TileAvx512IQ4_NL;
    if (type == TensorType::kMXFP4) return TileAvx512MXFP4;
    if (type == TensorType::kQ4_K) return TileAvx512Q4_K;
    if (type == TensorType::kQ5_K) return TileAvx512Q5_K;
    if (type == TensorType::kQ6_K) return TileAvx512Q6_K;
    if (type == TensorType::kQ3_K) return TileAvx512Q3_K;
    if (type == TensorType::kQ2_K) return TileAvx512Q2_K;
    if (type == TensorType::kIQ4_XS) return TileAvx512IQ4_XS;
    if (n_in % 8 == 0) {
      if (type == TensorType::kF32) return TileAvx512F32;
      if (type == TensorType::kF16) return TileAvx512F16;
      if (type == TensorType::kBF16) return TileAvx512Bf16;
    }
  }
  if (UsesAvx2(isa)) {
    switch (type) {
      case TensorType::kF32:
        return TileAvx2F32;  // any n_in: the AVX2 float kernels take the tail in zero-filled lanes
      case TensorType::kF16:
        return TileAvx2F16;
      case TensorType::kBF16:
        return TileAvx2Bf16;
      case TensorType::kQ8_0:
        return TileAvx2Q8_0;
      case TensorType::kQ4_0:
        return TileAvx2Q4_0;
      case TensorType::kQ5_0:
        return TileAvx2Q5_0;
      case TensorType::kIQ4_NL:
        return TileAvx2IQ4_NL;
      case TensorType::kMXFP4:
        return TileAvx2MXFP4;
      case TensorType::kIQ4_XS:
        return TileAvx2IQ4_XS;
      case TensorType::kQ4_1:
        return TileAvx2Q4_1;
      case TensorType::kQ5_1:
        return TileAvx2Q5_1;
      case TensorType::kQ4_K:
        return TileAvx2Q4_K;
      case TensorType::kQ5_K:
        return TileAvx2Q5_K;
      case TensorType::kQ6_K:
        return TileAvx2Q6_K;
      case TensorType::kQ3_K:
        return TileAvx2Q3_K;
      case TensorType::kQ2_K:
        return TileAvx2Q2_K;
      default:
        break;
    }
  }
#elif defined(__aarch64__)
  if (UsesNeon(isa)) {
    const bool whole8 = n_in % 8 == 0;
    switch (type) {
      case TensorType::kF32:
        if (whole8) return TileNeonF32;
        break;
      case TensorType::kF16:
        if (whole8) return TileNeonF16;
        break;
      case TensorType::kBF16:
        if (whole8) return TileNeonBf16;
        break;
      case TensorType::kQ8_0:
        return TileNeonQ8_0;
      case TensorType::kQ4_0:
        return TileNeonQ4_0;
      case TensorType::kQ5_0:
        return TileNeonQ5_0;
      case TensorType::kIQ4_NL:
        return TileNeonIQ4_NL;
      case TensorType::kMXFP4:
        return TileNeonMXFP4;
      case TensorType::kIQ4_XS:
        return TileNeonIQ4_XS;
      case TensorType::kQ4_1:
        return TileNeonQ4_1;
      case TensorType::kQ5_1:
        return TileNeonQ5_1;
      case TensorType::kQ4_K:
        return TileNeonQ4_K;
      case TensorType::kQ5_K:
        return TileNeonQ5_K;
      case TensorType::kQ6_K:
        return TileNeonQ6_K;
      case TensorType::kQ3_K:
        return TileNeonQ3_K;
      case TensorType::kQ2_K:
        return TileNeonQ2_K;
      default:
        break;
    }
  }
#else
  (void)isa;
  (void)n_in;
#endif
  switch (type) {
    case TensorType::kF32:
      return TileScalarFor<TensorType::kF32>;
    case TensorType::kF16:
      return TileScalarFor<TensorType::kF16>;
    case TensorType::kBF16:
      return TileScalarFor<TensorType::kBF16>;
    case TensorType::kQ8_0:
      return TileScalarFor<TensorType::kQ8_0>;
    case TensorType::kQ4_0:
      return TileScalarFor<TensorType::kQ4_0>;
    case TensorType::kQ5_0:
      return TileScalarFor<TensorType::kQ5_0>;
    case TensorType::kIQ4_NL:
      return TileScalarFor<TensorType::kIQ4_NL>;
    case TensorType::kMXFP4:
      return TileScalarFor<TensorType::kMXFP4>;
    case TensorType::kIQ4_XS:
      return TileScalarFor<TensorType::kIQ4_XS>;
    case TensorType::kQ4_1:
      return TileScalarFor<TensorType::kQ4_1>;
    case TensorType::kQ5_1:
      return TileScalarFor<TensorType::kQ5_1>;
    case TensorType::kQ4_K:
      return TileScalarFor<TensorType::kQ4_K>;
    case TensorType::kQ5_K:
      return TileScalarFor<TensorType::kQ5_K>;
    case TensorType::kQ6_K:
      return TileScalarFor<TensorType::kQ6_K>;
    case TensorType::kQ3_K:
      return TileScalarFor<TensorType::kQ3_K>;
    case TensorType::kQ2_K:
      return TileScalarFor<TensorType::kQ2_K>;
    default:
      break;
  }
  LLAMAY_CHECK(false) << "no matmul for weight type " << TensorTypeName(type);
  return nullptr;
}

float VecDot(TensorType type, const void* w_row, const void* act_row, int64_t n_in, Isa isa) {
  float y = 0.0f;
  GetTileFn(type, isa, n_in)(static_cast<const uint8_t*>(w_row), 0, 1, static_cast<const uint8_t*>(act_row),
                             0, 1, n_in, &y, 1);
  return y;
}

}  // namespace llamay::kernels
