// GGUF internals shared by reader.cc, parse.cc, digest.cc and writer.cc. Not part of the interface.
#ifndef LLAMAY_GGUF_INTERNAL_H_
#define LLAMAY_GGUF_INTERNAL_H_

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "gguf/gguf.h"

namespace llamay::gguf::internal {

// One metadata entry: where its value lies in the file's bytes.
struct Kv {
  std::string_view key;
  ValueType type = ValueType::kUint8;
  size_t value_off = 0;  // first byte of the value (for arrays: the first element)
  size_t value_end = 0;  // one past the value's last byte
  ValueType elem = ValueType::kUint8;  // arrays only
  uint64_t count = 0;                  // arrays only
};

template <typename T>
T Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Bounds-checked sequential reads.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }
  template <typename T>
  bool Read(T* v) {
    if (remaining() < sizeof(T)) return false;
    *v = Load<T>(data_ + pos_);
    pos_ += sizeof(T);
    return true;
  }
  bool Skip(uint64_t n) {
    if (n > remaining()) return false;
    pos_ += static_cast<size_t>(n);
    return true;
  }
  const uint8_t* here() const { return data_ + pos_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

size_t ScalarSize(ValueType t);  // 0 for string/array/unknown
bool IsIntegerOrBool(ValueType t);
int64_t LoadInt(const uint8_t* p, ValueType t);
// The string whose u64 length prefix starts at `off` (already validated).
inline std::string_view StringAt(const uint8_t* data, size_t off) {
  return {reinterpret_cast<const char*>(data + off + 8), static_cast<size_t>(Load<uint64_t>(data + off))};
}
// An integer scalar's value (u64 above INT64_MAX refused); error for other types.
Result<int64_t> ScalarInt(const uint8_t* data, const Kv& kv);

Status ParseKv(Cursor& c, Kv* kv);
Status ParseTensorInfo(Cursor& c, uint64_t alignment, TensorInfo* t);
Digest ComputeWeightDigest(const uint8_t* data, const std::vector<Kv>& kvs, const std::vector<TensorInfo>& tensors);

}  // namespace llamay::gguf::internal

#endif  // LLAMAY_GGUF_INTERNAL_H_
