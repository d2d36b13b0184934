#include "kv/row_codec.h"

#include <cstring>

#include "base/numeric.h"

namespace llamay::kv::internal {

void EncodeRow(KvPrecision p, const float* src, uint32_t elems, uint8_t* dst) {
  switch (p) {
    case KvPrecision::kF32: std::memcpy(dst, src, size_t{elems} * 4); return;
    case KvPrecision::kF16: ConvertF32ToF16(src, reinterpret_cast<uint16_t*>(dst), elems); return;
    case KvPrecision::kQ8_0: QuantizeRowQ8_0(src, reinterpret_cast<BlockQ8_0*>(dst), elems); return;
  }
}

void DecodeRow(KvPrecision p, const uint8_t* src, uint32_t elems, float* dst) {
  switch (p) {
    case KvPrecision::kF32: std::memcpy(dst, src, size_t{elems} * 4); return;
    case KvPrecision::kF16: ConvertF16ToF32(reinterpret_cast<const uint16_t*>(src), dst, elems); return;
    case KvPrecision::kQ8_0:
      DequantizeRowQ8_0(reinterpret_cast<const BlockQ8_0*>(src), dst, elems);
      return;
  }
}

void TranscodeRow(KvPrecision from, const uint8_t* src, KvPrecision to, uint32_t elems, uint8_t* dst,
                  float* scratch) {
  if (from == to) {
    std::memcpy(dst, src, RowBytes(from, elems));
    return;
  }
  DecodeRow(from, src, elems, scratch);
  EncodeRow(to, scratch, elems, dst);
}

}  // namespace llamay::kv::internal
