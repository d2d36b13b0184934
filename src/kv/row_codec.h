// Conversion of one KV row between f32 and a cache precision. Internal to kv/.
#ifndef LLAMAY_KV_ROW_CODEC_H_
#define LLAMAY_KV_ROW_CODEC_H_

#include <cstdint>

#include "kv/layout.h"

namespace llamay::kv::internal {

// Stores `elems` f32 values as precision `p` at `dst` (RowBytes(p, elems) bytes).
void EncodeRow(KvPrecision p, const float* src, uint32_t elems, uint8_t* dst);
// Reads a row stored at precision `p` into `elems` f32 values.
void DecodeRow(KvPrecision p, const uint8_t* src, uint32_t elems, float* dst);
// Re-encodes a row from one precision to another (a byte copy when they are the same).
void TranscodeRow(KvPrecision from, const uint8_t* src, KvPrecision to, uint32_t elems, uint8_t* dst,
                  float* scratch);

}  // namespace llamay::kv::internal

#endif  // LLAMAY_KV_ROW_CODEC_H_
