// Parsing of GGUF metadata entries and tensor infos, with every length checked against the bytes left.
#include <limits>
#include <string>

#include "gguf/internal.h"

namespace llamay::gguf::internal {
namespace {

constexpr uint64_t kMaxStringBytes = uint64_t{1} << 30;
constexpr uint32_t kMaxDims = 4;

Status Bad(const std::string& what) { return InvalidArgumentError(what); }

bool KnownType(uint32_t t) { return t <= static_cast<uint32_t>(ValueType::kFloat64); }

Status ReadString(Cursor& c, std::string_view* out) {
  uint64_t len = 0;
  if (!c.Read(&len)) return Bad("truncated string length");
  if (len > kMaxStringBytes || len > c.remaining())
    return Bad("string of " + std::to_string(len) + " bytes runs past the end of the file");
  *out = {reinterpret_cast<const char*>(c.here()), static_cast<size_t>(len)};
  c.Skip(len);
  return Status::Ok();
}

}  // namespace

size_t ScalarSize(ValueType t) {
  switch (t) {
    case ValueType::kUint8:
    case ValueType::kInt8:
    case ValueType::kBool: return 1;
    case ValueType::kUint16:
    case ValueType::kInt16: return 2;
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kFloat32: return 4;
    case ValueType::kUint64:
    case ValueType::kInt64:
    case ValueType::kFloat64: return 8;
    default: return 0;
  }
}

bool IsIntegerOrBool(ValueType t) {
  return ScalarSize(t) != 0 && t != ValueType::kFloat32 && t != ValueType::kFloat64;
}

int64_t LoadInt(const uint8_t* p, ValueType t) {
  switch (t) {
    case ValueType::kUint8: return Load<uint8_t>(p);
    case ValueType::kInt8: return Load<int8_t>(p);
    case ValueType::kBool: return Load<uint8_t>(p) != 0;
    case ValueType::kUint16: return Load<uint16_t>(p);
    case ValueType::kInt16: return Load<int16_t>(p);
    case ValueType::kUint32: return Load<uint32_t>(p);
    case ValueType::kInt32: return Load<int32_t>(p);
    case ValueType::kUint64: return static_cast<int64_t>(Load<uint64_t>(p));
    case ValueType::kInt64: return Load<int64_t>(p);
    default: return 0;
  }
}

Result<int64_t> ScalarInt(const uint8_t* data, const Kv& kv) {
  if (!IsIntegerOrBool(kv.type) || kv.type == ValueType::kBool) return InvalidArgumentError("not an integer");
  if (kv.type == ValueType::kUint64 && Load<uint64_t>(data + kv.value_off) > uint64_t(std::numeric_limits<int64_t>::max()))
    return InvalidArgumentError("integer too large");
  return LoadInt(data + kv.value_off, kv.type);
}

Status ParseKv(Cursor& c, Kv* kv) {
  LLAMAY_RETURN_IF_ERROR(ReadString(c, &kv->key));
  uint32_t type = 0;
  if (!c.Read(&type)) return Bad("key '" + std::string(kv->key) + "': truncated value type");
  if (!KnownType(type)) return Bad("key '" + std::string(kv->key) + "': unknown value type " + std::to_string(type));
  kv->type = static_cast<ValueType>(type);
  if (kv->type == ValueType::kString) {
    kv->value_off = c.pos();
    std::string_view s;
    LLAMAY_RETURN_IF_ERROR(ReadString(c, &s).WithContext("key '" + std::string(kv->key) + "'"));
  } else if (kv->type == ValueType::kArray) {
    uint32_t elem = 0;
    if (!c.Read(&elem) || !c.Read(&kv->count)) return Bad("key '" + std::string(kv->key) + "': truncated array header");
    if (!KnownType(elem)) return Bad("key '" + std::string(kv->key) + "': unknown array element type " + std::to_string(elem));
    kv->elem = static_cast<ValueType>(elem);
    if (kv->elem == ValueType::kArray) return Bad("key '" + std::string(kv->key) + "': nested arrays are not supported");
    kv->value_off = c.pos();
    if (kv->elem == ValueType::kString) {
      if (kv->count > c.remaining() / 8)
        return Bad("key '" + std::string(kv->key) + "': array of " + std::to_string(kv->count) + " strings runs past the end of the file");
      for (uint64_t i = 0; i < kv->count; ++i) {
        std::string_view s;
        LLAMAY_RETURN_IF_ERROR(ReadString(c, &s).WithContext("key '" + std::string(kv->key) + "' element " + std::to_string(i)));
      }
    } else {
      const size_t w = ScalarSize(kv->elem);
      if (kv->count > c.remaining() / w)
        return Bad("key '" + std::string(kv->key) + "': array of " + std::to_string(kv->count) + " elements runs past the end of the file");
      c.Skip(kv->count * w);
    }
  } else {
    kv->value_off = c.pos();
    if (!c.Skip(ScalarSize(kv->type))) return Bad("key '" + std::string(kv->key) + "': truncated value");
  }
  kv->value_end = c.pos();
  return Status::Ok();
}

Status ParseTensorInfo(Cursor& c, uint64_t alignment, TensorInfo* t) {
  std::string_view name;
  LLAMAY_RETURN_IF_ERROR(ReadString(c, &name));
  t->name = std::string(name);
  if (name.empty() || name.size() > 256) return Bad("tensor name of " + std::to_string(name.size()) + " bytes");
  uint32_t n_dims = 0;
  if (!c.Read(&n_dims)) return Bad("tensor '" + t->name + "': truncated");
  if (n_dims == 0 || n_dims > kMaxDims) return Bad("tensor '" + t->name + "': " + std::to_string(n_dims) + " dimensions (1..4 allowed)");
  t->dims.resize(n_dims);
  uint64_t n = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    uint64_t v = 0;
    if (!c.Read(&v)) return Bad("tensor '" + t->name + "': truncated");
    if (v == 0 || v > (uint64_t{1} << 40)) return Bad("tensor '" + t->name + "': dimension " + std::to_string(v));
    if (n > (uint64_t{1} << 50) / v) return Bad("tensor '" + t->name + "': element count overflows");
    n *= v;
    t->dims[d] = static_cast<int64_t>(v);
  }
  uint32_t type = 0;
  if (!c.Read(&type) || !c.Read(&t->offset)) return Bad("tensor '" + t->name + "': truncated");
  auto info = GetTensorTypeInfo(type);
  if (!info) return Bad("tensor '" + t->name + "': unknown tensor type " + std::to_string(type));
  t->type = info->type;
  if (static_cast<uint64_t>(t->dims[0]) % info->block_size != 0)
    return Bad("tensor '" + t->name + "': row of " + std::to_string(t->dims[0]) + " is not a multiple of the " +
               std::string(info->name) + " block size " + std::to_string(info->block_size));
  if (t->offset % alignment != 0)
    return Bad("tensor '" + t->name + "': data offset " + std::to_string(t->offset) + " is not aligned to " + std::to_string(alignment));
  t->n_elements = n;
  t->n_bytes = n / info->block_size * info->type_size;
  return Status::Ok();
}

}  // namespace llamay::gguf::internal
