// GGUF internals shared by parse.cc, layout.cc, reader.cc, digest.cc and writer.cc; not part of the
// interface.
//
// File::Impl holds the bytes (an mmap or an owned vector) and what the parser found in them: one Kv per
// metadata entry (offsets into the bytes, never copies) and one TensorInfo per tensor.
// Invariants once Parse() has returned OK: every Kv's [value_off, value_end) lies inside the bytes and
// holds a well-formed value of its type (string lengths and array lengths already checked), every tensor's
// data lies inside the bytes, aligned, without overlap; keys and tensor names are unique. Accessors rely on
// this and do no further bounds checks.
// Thread-safety: an Impl is written only while parsing (single-threaded); afterwards it is read-only except
// for the weight digest, which is computed under a std::once_flag.
#ifndef LLAMAY_GGUF_INTERNAL_H_
#define LLAMAY_GGUF_INTERNAL_H_

#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gguf/gguf.h"

namespace llamay::gguf::internal {

inline constexpr uint32_t kMagic = 0x46554747u;  // "GGUF" read as a little-endian u32
inline constexpr uint64_t kDefaultAlignment = 32;
inline constexpr uint64_t kMaxAlignment = uint64_t{1} << 24;
inline constexpr uint32_t kMaxDims = 4;
inline constexpr size_t kMaxTensorName = 256;  // ggml allows 63; be lenient, but bounded

// One metadata entry: where its value lies in the file's bytes.
struct Kv {
  std::string_view key;  // into the file's bytes
  ValueType type = ValueType::kUint8;
  size_t value_off = 0;                // first byte of the value (for arrays: the first element)
  size_t value_end = 0;                // one past the value's last byte
  ValueType elem = ValueType::kUint8;  // arrays only
  uint64_t count = 0;                  // arrays only
};

template <typename T>
T Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Bounds-checked sequential reads over [data, data + size).
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

size_t ScalarSize(ValueType t);  // 0 for string/array
bool IsIntegerOrBool(ValueType t);
// REQUIRES: t is an integer or bool type and p points at sizeof bytes of it. u64 wraps (see ScalarInt).
int64_t LoadInt(const uint8_t* p, ValueType t);
// The string whose u64 length prefix starts at `off` (already validated).
inline std::string_view StringAt(const uint8_t* data, size_t off) {
  return {reinterpret_cast<const char*>(data + off + 8), static_cast<size_t>(Load<uint64_t>(data + off))};
}
// An integer scalar's value (a u64 above INT64_MAX is refused); an error for every other type.
Result<int64_t> ScalarInt(const uint8_t* data, const Kv& kv);

// Parse one entry / tensor info at the cursor; errors name the key or tensor and the problem.
Status ParseKv(Cursor& c, Kv* kv);
Status ParseTensorInfo(Cursor& c, uint64_t alignment, TensorInfo* t);

Digest ComputeWeightDigest(const uint8_t* data, const std::vector<Kv>& kvs,
                           const std::vector<TensorInfo>& tensors);

}  // namespace llamay::gguf::internal

namespace llamay::gguf {

struct File::Impl {
  std::vector<uint8_t> owned;  // FromBuffer: the bytes
  void* map = nullptr;         // Open: the mapping, unmapped by the destructor
  size_t map_size = 0;
  const uint8_t* data = nullptr;  // [data, data + size): the file
  size_t size = 0;
  std::string path;
  uint32_t version = 0;
  uint64_t alignment = internal::kDefaultAlignment;
  std::vector<internal::Kv> kvs;                              // file order
  std::unordered_map<std::string_view, size_t> kv_index;      // key -> index into kvs
  std::vector<TensorInfo> tensors;                            // file order
  std::unordered_map<std::string_view, size_t> tensor_index;  // views into tensors[i].name
  mutable std::once_flag digest_once;
  mutable Digest digest{};

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl();

  // Validates the whole file and fills kvs, tensors and the indexes (layout.cc).
  Status Parse();
  const internal::Kv* Find(std::string_view key) const {
    auto it = kv_index.find(key);
    return it == kv_index.end() ? nullptr : &kvs[it->second];
  }

 private:
  Status ParseHeader(internal::Cursor& c, uint64_t* n_tensors, uint64_t* n_kv);
  Status ParseKvs(internal::Cursor& c, uint64_t n_kv);
  Status ReadAlignment();
  Status ParseTensorInfos(internal::Cursor& c, uint64_t n_tensors);
  Status PlaceTensors(size_t infos_end);
};

}  // namespace llamay::gguf

#endif  // LLAMAY_GGUF_INTERNAL_H_
