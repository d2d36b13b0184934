// GGUF reader: opening (mmap or buffer) and the typed accessors (see gguf.h for the contract). Parsing and
// validation live in parse.cc and layout.cc.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "gguf/gguf.h"
#include "gguf/internal.h"

namespace llamay::gguf {

using internal::Kv;

std::string_view ValueTypeName(ValueType t) {
  switch (t) {
    case ValueType::kUint8:
      return "u8";
    case ValueType::kInt8:
      return "i8";
    case ValueType::kUint16:
      return "u16";
    case ValueType::kInt16:
      return "i16";
    case ValueType::kUint32:
      return "u32";
    case ValueType::kInt32:
      return "i32";
    case ValueType::kFloat32:
      return "f32";
    case ValueType::kBool:
      return "bool";
    case ValueType::kString:
      return "string";
    case ValueType::kArray:
      return "array";
    case ValueType::kUint64:
      return "u64";
    case ValueType::kInt64:
      return "i64";
    case ValueType::kFloat64:
      return "f64";
  }
  return "unknown";
}

int64_t TensorInfo::rows() const {
  int64_t r = 1;
  for (size_t i = 1; i < dims.size(); ++i) r *= dims[i];
  return r;
}

File::Impl::~Impl() {
  if (map != nullptr) ::munmap(map, map_size);
}

File::File(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
File::File(File&&) noexcept = default;
File& File::operator=(File&&) noexcept = default;
File::~File() = default;

Result<File> File::Open(const std::string& path) {
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const std::string msg = "gguf: open " + path + ": " + std::strerror(errno);
    return errno == ENOENT ? NotFoundError(msg) : IoError(msg);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgumentError("gguf: " + path + " is not a regular file");
  }
  impl->size = static_cast<size_t>(st.st_size);
  if (impl->size == 0) {
    ::close(fd);
    return InvalidArgumentError("gguf: " + path + " is empty");
  }
  void* map = ::mmap(nullptr, impl->size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int mmap_errno = errno;
  ::close(fd);  // the mapping keeps the file referenced
  if (map == MAP_FAILED) return IoError("gguf: mmap " + path + ": " + std::strerror(mmap_errno));
  impl->map = map;
  impl->map_size = impl->size;
  impl->data = static_cast<const uint8_t*>(map);
  LLAMAY_RETURN_IF_ERROR(impl->Parse().WithContext(path));
  return File(std::move(impl));
}

Result<File> File::FromBuffer(std::vector<uint8_t> bytes) {
  auto impl = std::make_unique<Impl>();
  impl->owned = std::move(bytes);
  impl->data = impl->owned.data();
  impl->size = impl->owned.size();
  LLAMAY_RETURN_IF_ERROR(impl->Parse());
  return File(std::move(impl));
}

uint32_t File::version() const { return impl_->version; }
uint64_t File::alignment() const { return impl_->alignment; }
const std::string& File::path() const { return impl_->path; }
std::span<const uint8_t> File::bytes() const { return {impl_->data, impl_->size}; }

std::vector<std::string_view> File::Keys() const {
  std::vector<std::string_view> out;
  out.reserve(impl_->kvs.size());
  for (const Kv& kv : impl_->kvs) out.push_back(kv.key);
  return out;
}

bool File::Has(std::string_view key) const { return impl_->Find(key) != nullptr; }

namespace {

Status Missing(std::string_view key) {
  return NotFoundError("gguf: no metadata key '" + std::string(key) + "'");
}

// "gguf: key 'k' holds u32, expected string" (arrays name their element type too).
Status WrongType(std::string_view key, const Kv& kv, std::string_view want) {
  std::string got(ValueTypeName(kv.type));
  if (kv.type == ValueType::kArray) got += " of " + std::string(ValueTypeName(kv.elem));
  return InvalidArgumentError("gguf: key '" + std::string(key) + "' holds " + got + ", expected " +
                              std::string(want));
}

}  // namespace

Result<ValueType> File::TypeOf(std::string_view key) const {
  const Kv* kv = impl_->Find(key);
  if (kv == nullptr) return Missing(key);
  return kv->type;
}

Result<ValueType> File::ArrayElementType(std::string_view key) const {
  const Kv* kv = impl_->Find(key);
  if (kv == nullptr) return Missing(key);
  if (kv->type != ValueType::kArray) return WrongType(key, *kv, "array");
  return kv->elem;
}

Result<uint64_t> File::ArrayLength(std::string_view key) const {
  const Kv* kv = impl_->Find(key);
  if (kv == nullptr) return Missing(key);
  if (kv->type != ValueType::kArray) return WrongType(key, *kv, "array");
  return kv->count;
}

Result<std::string> File::GetString(std::string_view key) const {
  const Kv* kv = impl_->Find(key);
  if (kv == nullptr) return Missing(key);
  if (kv->type != ValueType::kString) return WrongType(key, *kv, "string");
  return std::string(internal::StringAt(impl_->data, kv->value_off));
}

Result<int64_t> File::GetInt(std::string_view key) const {
  const Kv* kv = impl_->Find(key);
  if (kv == nullptr) return Missing(key);
  auto v = internal::ScalarInt(impl_->data, *kv);
  if (v.ok()) return *v;
  if (v.status().code() == StatusCode::kOutOfRange)
    return InvalidArgumentError("gguf: key '" + std::string(key) + "' holds a u64 above INT64_MAX");
  return WrongType(key, *kv, "an integer");
}

Result<double> File::GetFloat(std::string_view key) const {
  const Kv* kv = impl_->Find(key);
  if (kv == nullptr) return Missing(key);
  const uint8_t* p = impl_->data + kv->value_off;
  if (kv->type == ValueType::kFloat32) return static_cast<double>(internal::Load<float>(p));
  if (kv->type == ValueType::kFloat64) return internal::Load<double>(p);
  if (kv->type == ValueType::kUint64) return static_cast<double>(internal::Load<uint64_t>(p));
  auto v = internal::ScalarInt(impl_->data, *kv);
  if (!v.ok()) return WrongType(key, *kv, "a number");
  return static_cast<double>(*v);
}

Result<bool> File::GetBool(std::string_view key) const {
  const Kv* kv = impl_->Find(key);
  if (kv == nullptr) return Missing(key);
  if (kv->type != ValueType::kBool) return WrongType(key, *kv, "bool");
  return impl_->data[kv->value_off] != 0;
}

std::string File::GetStringOr(std::string_view key, std::string_view fallback) const {
  auto v = GetString(key);
  return v.ok() ? *v : std::string(fallback);
}
int64_t File::GetIntOr(std::string_view key, int64_t fallback) const {
  auto v = GetInt(key);
  return v.ok() ? *v : fallback;
}
double File::GetFloatOr(std::string_view key, double fallback) const {
  auto v = GetFloat(key);
  return v.ok() ? *v : fallback;
}
bool File::GetBoolOr(std::string_view key, bool fallback) const {
  auto v = GetBool(key);
  return v.ok() ? *v : fallback;
}

Result<std::vector<std::string_view>> File::GetStringArray(std::string_view key) const {
  const Kv* kv = impl_->Find(key);
  if (kv == nullptr) return Missing(key);
  if (kv->type != ValueType::kArray || kv->elem != ValueType::kString)
    return WrongType(key, *kv, "array of string");
  std::vector<std::string_view> out;
  out.reserve(kv->count);  // validated: the strings are in the file
  size_t off = kv->value_off;
  for (uint64_t i = 0; i < kv->count; ++i) {
    out.push_back(internal::StringAt(impl_->data, off));
    off += 8 + out.back().size();
  }
  return out;
}

Result<std::vector<float>> File::GetFloatArray(std::string_view key) const {
  const Kv* kv = impl_->Find(key);
  if (kv == nullptr) return Missing(key);
  if (kv->type != ValueType::kArray || (kv->elem != ValueType::kFloat32 && kv->elem != ValueType::kFloat64))
    return WrongType(key, *kv, "array of f32 or f64");
  std::vector<float> out(kv->count);
  const uint8_t* p = impl_->data + kv->value_off;
  for (uint64_t i = 0; i < kv->count; ++i)
    out[i] = kv->elem == ValueType::kFloat32 ? internal::Load<float>(p + 4 * i)
                                             : static_cast<float>(internal::Load<double>(p + 8 * i));
  return out;
}

Result<std::vector<int64_t>> File::GetIntArray(std::string_view key) const {
  const Kv* kv = impl_->Find(key);
  if (kv == nullptr) return Missing(key);
  if (kv->type != ValueType::kArray || !internal::IsIntegerOrBool(kv->elem))
    return WrongType(key, *kv, "array of integers");
  std::vector<int64_t> out(kv->count);
  const size_t width = internal::ScalarSize(kv->elem);
  const uint8_t* p = impl_->data + kv->value_off;
  for (uint64_t i = 0; i < kv->count; ++i) {
    if (kv->elem == ValueType::kUint64 &&
        internal::Load<uint64_t>(p + 8 * i) > uint64_t{std::numeric_limits<int64_t>::max()})
      return InvalidArgumentError("gguf: key '" + std::string(key) + "' element " + std::to_string(i) +
                                  " is a u64 above INT64_MAX");
    out[i] = internal::LoadInt(p + width * i, kv->elem);
  }
  return out;
}

const std::vector<TensorInfo>& File::tensors() const { return impl_->tensors; }

const TensorInfo* File::FindTensor(std::string_view name) const {
  auto it = impl_->tensor_index.find(name);
  return it == impl_->tensor_index.end() ? nullptr : &impl_->tensors[it->second];
}

const Digest& File::WeightDigest() const {
  std::call_once(impl_->digest_once, [this] {
    impl_->digest = internal::ComputeWeightDigest(impl_->data, impl_->kvs, impl_->tensors);
  });
  return impl_->digest;
}

}  // namespace llamay::gguf
