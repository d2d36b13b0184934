// GGUF reader: parsing and validation (see gguf.h for the contract).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "gguf/gguf.h"
#include "gguf/internal.h"

namespace llamay::gguf {

using internal::Kv;

std::string_view ValueTypeName(ValueType t) {
  switch (t) {
    case ValueType::kUint8: return "u8";
    case ValueType::kInt8: return "i8";
    case ValueType::kUint16: return "u16";
    case ValueType::kInt16: return "i16";
    case ValueType::kUint32: return "u32";
    case ValueType::kInt32: return "i32";
    case ValueType::kFloat32: return "f32";
    case ValueType::kBool: return "bool";
    case ValueType::kString: return "string";
    case ValueType::kArray: return "array";
    case ValueType::kUint64: return "u64";
    case ValueType::kInt64: return "i64";
    case ValueType::kFloat64: return "f64";
  }
  return "unknown";
}

int64_t TensorInfo::rows() const {
  int64_t r = 1;
  for (size_t i = 1; i < dims.size(); ++i) r *= dims[i];
  return r;
}

struct File::Impl {
  std::vector<uint8_t> owned;
  void* map = nullptr;
  size_t map_size = 0;
  const uint8_t* data = nullptr;
  size_t size = 0;
  std::string path;
  uint32_t version = 0;
  uint64_t alignment = 32;
  std::vector<Kv> kvs;
  std::unordered_map<std::string_view, size_t> kv_index;
  std::vector<TensorInfo> tensors;
  std::unordered_map<std::string, size_t> tensor_index;
  mutable std::once_flag digest_once;
  mutable Digest digest{};

  ~Impl() {
    if (map != nullptr) ::munmap(map, map_size);
  }
  Status Parse();
  const Kv* Find(std::string_view key) const {
    auto it = kv_index.find(key);
    return it == kv_index.end() ? nullptr : &kvs[it->second];
  }
};

namespace {

Status Bad(const std::string& what) { return InvalidArgumentError("gguf: " + what); }

}  // namespace

Status File::Impl::Parse() {
  internal::Cursor c(data, size);
  uint32_t magic = 0;
  if (!c.Read(&magic)) return Bad("file of " + std::to_string(size) + " bytes is too short for a header");
  if (magic != 0x46554747u) return Bad("not a GGUF file (bad magic)");
  if (!c.Read(&version)) return Bad("truncated header");
  if (version == 1) return Bad("GGUF version 1 is not supported (re-convert the model: versions 2 and 3 are)");
  if (version != 2 && version != 3) return Bad("unsupported GGUF version " + std::to_string(version));
  uint64_t n_tensors = 0, n_kv = 0;
  if (!c.Read(&n_tensors) || !c.Read(&n_kv)) return Bad("truncated header");
  // Each kv takes at least 8 (key length) + 4 (type) + 1 bytes; each tensor info at least 8 + 4 + 8 + 4 + 8.
  if (n_kv > c.remaining() / 13) return Bad("header declares " + std::to_string(n_kv) + " metadata keys; the file cannot hold them");
  if (n_tensors > c.remaining() / 32)
    return Bad("header declares " + std::to_string(n_tensors) + " tensors; the file cannot hold them");
  kvs.reserve(n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    Kv kv;
    LLAMAY_RETURN_IF_ERROR(internal::ParseKv(c, &kv).WithContext("gguf: metadata key " + std::to_string(i)));
    if (!kv_index.emplace(kv.key, kvs.size()).second) return Bad("duplicate metadata key '" + std::string(kv.key) + "'");
    kvs.push_back(kv);
  }
  if (const Kv* a = Find("general.alignment")) {
    auto v = internal::ScalarInt(data, *a);
    if (!v.ok()) return Bad("general.alignment must be an integer");
    if (*v <= 0 || *v > (1 << 24) || (*v & (*v - 1)) != 0)
      return Bad("general.alignment " + std::to_string(*v) + " is not a power of two");
    alignment = static_cast<uint64_t>(*v);
  }
  tensors.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo t;
    LLAMAY_RETURN_IF_ERROR(internal::ParseTensorInfo(c, alignment, &t).WithContext("gguf: tensor " + std::to_string(i)));
    if (!tensor_index.emplace(t.name, tensors.size()).second) return Bad("duplicate tensor name '" + t.name + "'");
    tensors.push_back(std::move(t));
  }
  const uint64_t data_start = (c.pos() + alignment - 1) / alignment * alignment;
  if (n_tensors > 0 && data_start > size) return Bad("tensor data section starts beyond the end of the file");
  // Bounds and overlap.
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return tensors[a].offset < tensors[b].offset; });
  uint64_t prev_end = 0;
  std::string prev_name;
  for (size_t i : order) {
    TensorInfo& t = tensors[i];
    const uint64_t begin = data_start + t.offset;
    if (t.offset > size || begin > size || t.n_bytes > size - begin)
      return Bad("tensor '" + t.name + "' data [" + std::to_string(begin) + ", +" + std::to_string(t.n_bytes) +
                 ") lies beyond the end of the file (size " + std::to_string(size) + ")");
    if (t.offset < prev_end) return Bad("tensor '" + t.name + "' overlaps tensor '" + prev_name + "'");
    prev_end = t.offset + t.n_bytes;
    prev_name = t.name;
    t.data = data + begin;
  }
  return Status::Ok();
}

File::File(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
File::File(File&&) noexcept = default;
File& File::operator=(File&&) noexcept = default;
File::~File() = default;

Result<File> File::Open(const std::string& path) {
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
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
  impl->map = ::mmap(nullptr, impl->size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (impl->map == MAP_FAILED) {
    impl->map = nullptr;
    return IoError("gguf: mmap " + path + ": " + std::strerror(errno));
  }
  impl->map_size = impl->size;
  impl->data = static_cast<const uint8_t*>(impl->map);
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
  for (const Kv& kv : impl_->kvs) out.push_back(kv.key);
  return out;
}

bool File::Has(std::string_view key) const { return impl_->Find(key) != nullptr; }

namespace {
Status Missing(std::string_view key) { return NotFoundError("gguf: no metadata key '" + std::string(key) + "'"); }
Status WrongType(std::string_view key, ValueType got, std::string_view want) {
  return InvalidArgumentError("gguf: key '" + std::string(key) + "' holds " + std::string(ValueTypeName(got)) +
                              ", expected " + std::string(want));
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
  if (kv->type != ValueType::kArray) return WrongType(key, kv->type, "array");
  return kv->elem;
}

Result<uint64_t> File::ArrayLength(std::string_view key) const {
  const Kv* kv = impl_->Find(key);
  if (kv == nullptr) return Missing(key);
  if (kv->type != ValueType::kArray) return WrongType(key, kv->type, "array");
  return kv->count;
}

Result<std::string> File::GetString(std::string_view key) const {
  const Kv* kv = impl_->Find(key);
  if (kv == nullptr) return Missing(key);
  if (kv->type != ValueType::kString) return WrongType(key, kv->type, "string");
  return std::string(internal::StringAt(impl_->data, kv->value_off));
}

Result<int64_t> File::GetInt(std::string_view key) const {
  const Kv* kv = impl_->Find(key);
  if (kv == nullptr) return Missing(key);
  auto v = internal::ScalarInt(impl_->data, *kv);
  if (!v.ok()) return WrongType(key, kv->type, "an integer");
  return *v;
}

Result<double> File::GetFloat(std::string_view key) const {
  const Kv* kv = impl_->Find(key);
  if (kv == nullptr) return Missing(key);
  if (kv->type == ValueType::kFloat32) return static_cast<double>(internal::Load<float>(impl_->data + kv->value_off));
  if (kv->type == ValueType::kFloat64) return internal::Load<double>(impl_->data + kv->value_off);
  auto v = internal::ScalarInt(impl_->data, *kv);
  if (!v.ok()) return WrongType(key, kv->type, "a number");
  return static_cast<double>(*v);
}

Result<bool> File::GetBool(std::string_view key) const {
  const Kv* kv = impl_->Find(key);
  if (kv == nullptr) return Missing(key);
  if (kv->type != ValueType::kBool) return WrongType(key, kv->type, "bool");
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
  if (kv->type != ValueType::kArray || kv->elem != ValueType::kString) return WrongType(key, kv->type, "array of strings");
  std::vector<std::string_view> out;
  out.reserve(kv->count);
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
    return WrongType(key, kv->type, "array of floats");
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
    return WrongType(key, kv->type, "array of integers");
  std::vector<int64_t> out(kv->count);
  const size_t w = internal::ScalarSize(kv->elem);
  for (uint64_t i = 0; i < kv->count; ++i)
    out[i] = internal::LoadInt(impl_->data + kv->value_off + w * i, kv->elem);
  return out;
}

const std::vector<TensorInfo>& File::tensors() const { return impl_->tensors; }

const TensorInfo* File::FindTensor(std::string_view name) const {
  auto it = impl_->tensor_index.find(std::string(name));
  return it == impl_->tensor_index.end() ? nullptr : &impl_->tensors[it->second];
}

const Digest& File::WeightDigest() const {
  std::call_once(impl_->digest_once, [this] { impl_->digest = internal::ComputeWeightDigest(impl_->data, impl_->kvs, impl_->tensors); });
  return impl_->digest;
}

}  // namespace llamay::gguf
