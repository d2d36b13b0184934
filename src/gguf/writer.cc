// GGUF v3 writer: entries and tensors are serialised when added; Finish() lays out the file (header, kvs,
// tensor infos, padding, tensor data at aligned offsets). It does not refuse duplicate keys or tensor names:
// tests use it to build files the reader must refuse.
#include <cstring>

#include "base/check.h"
#include "base/file.h"
#include "gguf/gguf.h"
#include "gguf/internal.h"

namespace llamay::gguf {

struct Writer::Entry {
  std::string key;
  ValueType type;
  std::vector<uint8_t> value;  // serialised exactly as in the file, after the type
};

struct Writer::Tensor {
  std::string name;
  std::vector<int64_t> dims;
  TensorType type;
  std::vector<uint8_t> data;
};

namespace {

// resize + memcpy rather than insert: g++ 12 misreports small inserts as overflows.
void PutBytes(std::vector<uint8_t>& b, const void* p, size_t n) {
  const size_t at = b.size();
  b.resize(at + n);
  if (n != 0) std::memcpy(b.data() + at, p, n);
}
template <typename T>
void Put(std::vector<uint8_t>& b, T v) {
  PutBytes(b, &v, sizeof v);
}
void PutString(std::vector<uint8_t>& b, const std::string& s) {
  Put<uint64_t>(b, s.size());
  PutBytes(b, s.data(), s.size());
}

}  // namespace

Writer::Writer(uint64_t alignment) : alignment_(alignment) {
  LLAMAY_CHECK(alignment_ != 0 && (alignment_ & (alignment_ - 1)) == 0 &&
               alignment_ <= internal::kMaxAlignment)
      << "gguf writer: alignment " << alignment_ << " is not a power of two the reader accepts";
  if (alignment_ != internal::kDefaultAlignment)
    SetUint32("general.alignment", static_cast<uint32_t>(alignment_));
}
Writer::~Writer() = default;

#define LLAMAY_GGUF_SCALAR_SETTER(Name, CType, VType) \
  void Writer::Name(std::string key, CType v) {       \
    auto e = std::make_shared<Entry>();               \
    e->key = std::move(key);                          \
    e->type = VType;                                  \
    Put(e->value, v);                                 \
    entries_.push_back(std::move(e));                 \
  }
LLAMAY_GGUF_SCALAR_SETTER(SetUint32, uint32_t, ValueType::kUint32)
LLAMAY_GGUF_SCALAR_SETTER(SetInt32, int32_t, ValueType::kInt32)
LLAMAY_GGUF_SCALAR_SETTER(SetUint64, uint64_t, ValueType::kUint64)
LLAMAY_GGUF_SCALAR_SETTER(SetFloat32, float, ValueType::kFloat32)
#undef LLAMAY_GGUF_SCALAR_SETTER

void Writer::SetBool(std::string key, bool v) {
  auto e = std::make_shared<Entry>();
  e->key = std::move(key);
  e->type = ValueType::kBool;
  e->value.push_back(v ? 1 : 0);
  entries_.push_back(std::move(e));
}

void Writer::SetString(std::string key, std::string v) {
  auto e = std::make_shared<Entry>();
  e->key = std::move(key);
  e->type = ValueType::kString;
  PutString(e->value, v);
  entries_.push_back(std::move(e));
}

void Writer::SetStringArray(std::string key, std::vector<std::string> v) {
  auto e = std::make_shared<Entry>();
  e->key = std::move(key);
  e->type = ValueType::kArray;
  Put<uint32_t>(e->value, static_cast<uint32_t>(ValueType::kString));
  Put<uint64_t>(e->value, v.size());
  for (const auto& s : v) PutString(e->value, s);
  entries_.push_back(std::move(e));
}

void Writer::SetFloat32Array(std::string key, std::vector<float> v) {
  auto e = std::make_shared<Entry>();
  e->key = std::move(key);
  e->type = ValueType::kArray;
  Put<uint32_t>(e->value, static_cast<uint32_t>(ValueType::kFloat32));
  Put<uint64_t>(e->value, v.size());
  for (float x : v) Put(e->value, x);
  entries_.push_back(std::move(e));
}

void Writer::SetInt32Array(std::string key, std::vector<int32_t> v) {
  auto e = std::make_shared<Entry>();
  e->key = std::move(key);
  e->type = ValueType::kArray;
  Put<uint32_t>(e->value, static_cast<uint32_t>(ValueType::kInt32));
  Put<uint64_t>(e->value, v.size());
  for (int32_t x : v) Put(e->value, x);
  entries_.push_back(std::move(e));
}

Status Writer::AddTensor(std::string name, std::vector<int64_t> dims, TensorType type,
                         std::span<const uint8_t> data) {
  auto bad = [&](const std::string& what) {
    return InvalidArgumentError("gguf writer: tensor '" + name + "': " + what);
  };
  auto info = GetTensorTypeInfo(static_cast<uint32_t>(type));
  if (!info) return bad("unknown tensor type " + std::to_string(static_cast<uint32_t>(type)));
  if (name.empty() || name.size() > internal::kMaxTensorName) return bad("name length out of range");
  if (dims.empty() || dims.size() > internal::kMaxDims) return bad("needs 1..4 dims");
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d <= 0) return bad("dimension " + std::to_string(d));
    if (__builtin_mul_overflow(n, d, &n)) return bad("element count overflows");
  }
  if (dims[0] % info->block_size != 0)
    return bad("row of " + std::to_string(dims[0]) + " is not a multiple of the " + std::string(info->name) +
               " block size " + std::to_string(info->block_size));
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(n) / info->block_size, uint64_t{info->type_size}, &bytes))
    return bad("byte size overflows");
  if (bytes != data.size())
    return bad("needs " + std::to_string(bytes) + " bytes, got " + std::to_string(data.size()));
  auto t = std::make_shared<Tensor>();
  t->name = std::move(name);
  t->dims = std::move(dims);
  t->type = type;
  t->data.assign(data.begin(), data.end());
  tensors_.push_back(std::move(t));
  return Status::Ok();
}

std::vector<uint8_t> Writer::Finish() const {
  std::vector<uint8_t> b;
  Put<uint32_t>(b, internal::kMagic);
  Put<uint32_t>(b, 3);
  Put<uint64_t>(b, tensors_.size());
  Put<uint64_t>(b, entries_.size());
  for (const auto& e : entries_) {
    PutString(b, e->key);
    Put<uint32_t>(b, static_cast<uint32_t>(e->type));
    PutBytes(b, e->value.data(), e->value.size());
  }
  auto align = [&](uint64_t x) { return (x + alignment_ - 1) / alignment_ * alignment_; };
  uint64_t offset = 0, end = 0;  // end: one past the last tensor's data (no padding after it)
  std::vector<uint64_t> offsets;
  for (const auto& t : tensors_) {
    PutString(b, t->name);
    Put<uint32_t>(b, static_cast<uint32_t>(t->dims.size()));
    for (int64_t d : t->dims) Put<uint64_t>(b, static_cast<uint64_t>(d));
    Put<uint32_t>(b, static_cast<uint32_t>(t->type));
    Put<uint64_t>(b, offset);
    offsets.push_back(offset);
    end = offset + t->data.size();
    offset = align(end);
  }
  const uint64_t data_start = align(b.size());
  b.resize(tensors_.empty() ? b.size() : data_start + end, 0);
  for (size_t i = 0; i < tensors_.size(); ++i)
    if (!tensors_[i]->data.empty())
      std::memcpy(b.data() + data_start + offsets[i], tensors_[i]->data.data(), tensors_[i]->data.size());
  return b;
}

Status Writer::WriteFile(const std::string& path) const { return WriteFileAtomic(path, Finish()); }

}  // namespace llamay::gguf
