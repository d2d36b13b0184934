// Parsing of GGUF metadata entries and tensor infos. Every length is checked against the bytes left before it
// is used; nothing is allocated from an unchecked count.
#include <limits>
#include <string>

#include "gguf/internal.h"

namespace llamay::gguf::internal {
namespace {

constexpr uint64_t kMaxStringBytes = uint64_t{1} << 30;

// Messages from here get "gguf: metadata key N: " or "gguf: tensor N: " prepended by the caller.
Status Bad(const std::string& what) { return InvalidArgumentError(what); }

bool KnownValueType(uint32_t t) { return t <= static_cast<uint32_t>(ValueType::kFloat64); }

std::string Quoted(std::string_view s) {
  std::string q;  // appended piecewise: g++ 12 misreports "'" + std::string(s) + "'" (-Wrestrict)
  q.reserve(s.size() + 2);
  q.push_back('\'');
  q.append(s);
  q.push_back('\'');
  return q;
}

Status ReadString(Cursor& c, std::string_view* out) {
  uint64_t len = 0;
  if (!c.Read(&len)) return Bad("truncated string length");
  if (len > kMaxStringBytes || len > c.remaining())
    return Bad("string of " + std::to_string(len) + " bytes runs past the end of the file (" +
               std::to_string(c.remaining()) + " bytes left)");
  *out = {reinterpret_cast<const char*>(c.here()), static_cast<size_t>(len)};
  c.Skip(len);
  return Status::Ok();
}

// An array's elements, after its element type and count have been read.
Status ParseArrayElements(Cursor& c, const Kv& kv) {
  const std::string key = Quoted(kv.key);
  if (kv.elem == ValueType::kString) {
    // Each string needs at least its 8-byte length.
    if (kv.count > c.remaining() / 8)
      return Bad("key " + key + ": array of " + std::to_string(kv.count) +
                 " strings runs past the end of the file");
    for (uint64_t i = 0; i < kv.count; ++i) {
      std::string_view s;
      // The context is built only on failure: a vocabulary has 32k-250k elements.
      if (Status read = ReadString(c, &s); !read.ok())
        return read.WithContext("key " + key + " element " + std::to_string(i));
    }
    return Status::Ok();
  }
  const size_t width = ScalarSize(kv.elem);
  if (kv.count > c.remaining() / width)
    return Bad("key " + key + ": array of " + std::to_string(kv.count) + " " +
               std::string(ValueTypeName(kv.elem)) + " elements runs past the end of the file");
  c.Skip(kv.count * width);
  return Status::Ok();
}

}  // namespace

size_t ScalarSize(ValueType t) {
  switch (t) {
    case ValueType::kUint8:
    case ValueType::kInt8:
    case ValueType::kBool:
      return 1;
    case ValueType::kUint16:
    case ValueType::kInt16:
      return 2;
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kFloat32:
      return 4;
    case ValueType::kUint64:
    case ValueType::kInt64:
    case ValueType::kFloat64:
      return 8;
    case ValueType::kString:
    case ValueType::kArray:
      return 0;
  }
  return 0;
}

bool IsIntegerOrBool(ValueType t) {
  return ScalarSize(t) != 0 && t != ValueType::kFloat32 && t != ValueType::kFloat64;
}

int64_t LoadInt(const uint8_t* p, ValueType t) {
  switch (t) {
    case ValueType::kUint8:
      return Load<uint8_t>(p);
    case ValueType::kInt8:
      return Load<int8_t>(p);
    case ValueType::kBool:
      return Load<uint8_t>(p) != 0;
    case ValueType::kUint16:
      return Load<uint16_t>(p);
    case ValueType::kInt16:
      return Load<int16_t>(p);
    case ValueType::kUint32:
      return Load<uint32_t>(p);
    case ValueType::kInt32:
      return Load<int32_t>(p);
    case ValueType::kUint64:
      return static_cast<int64_t>(Load<uint64_t>(p));
    case ValueType::kInt64:
      return Load<int64_t>(p);
    default:
      return 0;
  }
}

Result<int64_t> ScalarInt(const uint8_t* data, const Kv& kv) {
  if (!IsIntegerOrBool(kv.type) || kv.type == ValueType::kBool) return InvalidArgumentError("not an integer");
  if (kv.type == ValueType::kUint64 &&
      Load<uint64_t>(data + kv.value_off) > uint64_t{std::numeric_limits<int64_t>::max()})
    return OutOfRangeError("integer above INT64_MAX");
  return LoadInt(data + kv.value_off, kv.type);
}

Status ParseKv(Cursor& c, Kv* kv) {
  LLAMAY_RETURN_IF_ERROR(ReadString(c, &kv->key).WithContext("key name"));
  const std::string key = Quoted(kv->key);
  uint32_t type = 0;
  if (!c.Read(&type)) return Bad("key " + key + ": truncated value type");
  if (!KnownValueType(type)) return Bad("key " + key + ": unknown value type " + std::to_string(type));
  kv->type = static_cast<ValueType>(type);
  if (kv->type == ValueType::kString) {
    kv->value_off = c.pos();
    std::string_view s;
    LLAMAY_RETURN_IF_ERROR(ReadString(c, &s).WithContext("key " + key));
  } else if (kv->type == ValueType::kArray) {
    uint32_t elem = 0;
    if (!c.Read(&elem) || !c.Read(&kv->count)) return Bad("key " + key + ": truncated array header");
    if (!KnownValueType(elem))
      return Bad("key " + key + ": unknown array element type " + std::to_string(elem));
    kv->elem = static_cast<ValueType>(elem);
    if (kv->elem == ValueType::kArray) return Bad("key " + key + ": nested arrays are not supported");
    kv->value_off = c.pos();
    LLAMAY_RETURN_IF_ERROR(ParseArrayElements(c, *kv));
  } else {
    kv->value_off = c.pos();
    if (!c.Skip(ScalarSize(kv->type))) return Bad("key " + key + ": truncated value");
  }
  kv->value_end = c.pos();
  return Status::Ok();
}

Status ParseTensorInfo(Cursor& c, uint64_t alignment, TensorInfo* t) {
  // Name.
  std::string_view name;
  LLAMAY_RETURN_IF_ERROR(ReadString(c, &name).WithContext("tensor name"));
  if (name.empty() || name.size() > kMaxTensorName)
    return Bad("tensor name of " + std::to_string(name.size()) + " bytes (1.." +
               std::to_string(kMaxTensorName) + " allowed)");
  t->name = std::string(name);
  const std::string what = "tensor " + Quoted(name);
  // Dimensions: each positive, the element count representable.
  uint32_t n_dims = 0;
  if (!c.Read(&n_dims)) return Bad(what + ": truncated");
  if (n_dims == 0 || n_dims > kMaxDims)
    return Bad(what + ": " + std::to_string(n_dims) + " dimensions (1.." + std::to_string(kMaxDims) +
               " allowed)");
  t->dims.resize(n_dims);
  int64_t n = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    int64_t v = 0;
    if (!c.Read(&v)) return Bad(what + ": truncated");
    if (v <= 0) return Bad(what + ": dimension " + std::to_string(d) + " is " + std::to_string(v));
    if (__builtin_mul_overflow(n, v, &n)) return Bad(what + ": element count overflows");
    t->dims[d] = v;
  }
  // Type and offset.
  uint32_t type = 0;
  if (!c.Read(&type) || !c.Read(&t->offset)) return Bad(what + ": truncated");
  auto info = GetTensorTypeInfo(type);
  if (!info) return Bad(what + ": unknown tensor type " + std::to_string(type));
  t->type = info->type;
  if (t->dims[0] % info->block_size != 0)
    return Bad(what + ": row of " + std::to_string(t->dims[0]) + " is not a multiple of the " +
               std::string(info->name) + " block size " + std::to_string(info->block_size));
  uint64_t n_bytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(n) / info->block_size, uint64_t{info->type_size},
                             &n_bytes))
    return Bad(what + ": byte size overflows");
  if (t->offset % alignment != 0)
    return Bad(what + ": data offset " + std::to_string(t->offset) + " is not aligned to " +
               std::to_string(alignment));
  t->n_elements = static_cast<uint64_t>(n);
  t->n_bytes = n_bytes;
  return Status::Ok();
}

}  // namespace llamay::gguf::internal
