// File::Impl::Parse: header, metadata, alignment, tensor infos and the placement of tensor data, each
// validated before anything is built from it (see internal.h for what holds afterwards).
#include <algorithm>
#include <limits>
#include <string>

#include "gguf/internal.h"

namespace llamay::gguf {
namespace {

using internal::Cursor;
using internal::Kv;

Status Bad(const std::string& what) { return InvalidArgumentError("gguf: " + what); }

// The smallest encodings, used to refuse counts the remaining bytes cannot hold before reserving anything:
// a kv is a key length (8) + type (4) + at least one value byte; a tensor info is a name length (8) + at
// least one name byte + n_dims (4) + one dim (8) + type (4) + offset (8).
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 8 + 4 + 8;
// Vectors grow past this by doubling, bounded by what actually parses.
constexpr uint64_t kMaxReserve = 1 << 14;

uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  return a > std::numeric_limits<uint64_t>::max() - b ? std::numeric_limits<uint64_t>::max() : a + b;
}

}  // namespace

Status File::Impl::Parse() {
  Cursor c(data, size);
  uint64_t n_tensors = 0, n_kv = 0;
  LLAMAY_RETURN_IF_ERROR(ParseHeader(c, &n_tensors, &n_kv));
  LLAMAY_RETURN_IF_ERROR(ParseKvs(c, n_kv));
  LLAMAY_RETURN_IF_ERROR(ReadAlignment());
  LLAMAY_RETURN_IF_ERROR(ParseTensorInfos(c, n_tensors));
  return PlaceTensors(c.pos());
}

Status File::Impl::ParseHeader(Cursor& c, uint64_t* n_tensors, uint64_t* n_kv) {
  uint32_t magic = 0;
  if (!c.Read(&magic)) return Bad("file of " + std::to_string(size) + " bytes is too short for a header");
  if (magic != internal::kMagic) return Bad("not a GGUF file (bad magic)");
  if (!c.Read(&version)) return Bad("truncated header (no version)");
  if (version == 1)
    return Bad("GGUF version 1 is not supported (only versions 2 and 3 are; re-convert the model)");
  if (version != 2 && version != 3) return Bad("unsupported GGUF version " + std::to_string(version));
  if (!c.Read(n_tensors) || !c.Read(n_kv)) return Bad("truncated header (no counts)");
  if (*n_kv > c.remaining() / kMinKvBytes)
    return Bad("header declares " + std::to_string(*n_kv) + " metadata keys; the " +
               std::to_string(c.remaining()) + " bytes left cannot hold them");
  if (*n_tensors > c.remaining() / kMinTensorInfoBytes)
    return Bad("header declares " + std::to_string(*n_tensors) + " tensors; the " +
               std::to_string(c.remaining()) + " bytes left cannot hold them");
  return Status::Ok();
}

Status File::Impl::ParseKvs(Cursor& c, uint64_t n_kv) {
  kvs.reserve(std::min(n_kv, kMaxReserve));
  for (uint64_t i = 0; i < n_kv; ++i) {
    Kv kv;
    LLAMAY_RETURN_IF_ERROR(internal::ParseKv(c, &kv).WithContext("gguf: metadata key " + std::to_string(i)));
    if (!kv_index.emplace(kv.key, kvs.size()).second)
      return Bad("duplicate metadata key '" + std::string(kv.key) + "'");
    kvs.push_back(kv);
  }
  return Status::Ok();
}

Status File::Impl::ReadAlignment() {
  const Kv* a = Find("general.alignment");
  if (a == nullptr) return Status::Ok();
  auto v = internal::ScalarInt(data, *a);
  if (!v.ok())
    return Bad("general.alignment holds " + std::string(ValueTypeName(a->type)) + ", not an integer");
  if (*v <= 0 || static_cast<uint64_t>(*v) > internal::kMaxAlignment || (*v & (*v - 1)) != 0)
    return Bad("general.alignment " + std::to_string(*v) + " is not a power of two in 1.." +
               std::to_string(internal::kMaxAlignment));
  alignment = static_cast<uint64_t>(*v);
  return Status::Ok();
}

Status File::Impl::ParseTensorInfos(Cursor& c, uint64_t n_tensors) {
  // Checked again now that the metadata's bytes are spent.
  if (n_tensors > c.remaining() / kMinTensorInfoBytes)
    return Bad("header declares " + std::to_string(n_tensors) + " tensors; the " +
               std::to_string(c.remaining()) + " bytes after the metadata cannot hold them");
  tensors.reserve(std::min(n_tensors, kMaxReserve));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo t;
    LLAMAY_RETURN_IF_ERROR(
        internal::ParseTensorInfo(c, alignment, &t).WithContext("gguf: tensor " + std::to_string(i)));
    tensors.push_back(std::move(t));
  }
  // Indexed once the vector no longer moves: the keys view the names it holds.
  for (size_t i = 0; i < tensors.size(); ++i)
    if (!tensor_index.emplace(tensors[i].name, i).second)
      return Bad("duplicate tensor name '" + tensors[i].name + "'");
  return Status::Ok();
}

Status File::Impl::PlaceTensors(size_t infos_end) {
  if (tensors.empty()) return Status::Ok();
  const uint64_t data_start = (infos_end + alignment - 1) / alignment * alignment;
  if (data_start > size)
    return Bad("tensor data section starts at " + std::to_string(data_start) +
               ", beyond the end of the file (size " + std::to_string(size) + ")");
  // Visit tensors by offset: each must end inside the file and before the next begins.
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return tensors[a].offset < tensors[b].offset; });
  const uint64_t data_bytes = size - data_start;
  const TensorInfo* prev = nullptr;
  for (size_t i : order) {
    TensorInfo& t = tensors[i];
    if (t.offset > data_bytes || t.n_bytes > data_bytes - t.offset) {
      const uint64_t begin = SaturatingAdd(data_start, t.offset);
      return Bad("tensor '" + t.name + "' data [" + std::to_string(begin) + ".." +
                 std::to_string(SaturatingAdd(begin, t.n_bytes)) + ") beyond end of file (size " +
                 std::to_string(size) + ")");
    }
    if (prev != nullptr && t.offset < prev->offset + prev->n_bytes)
      return Bad("tensor '" + t.name + "' data at offset " + std::to_string(t.offset) + " overlaps tensor '" +
                 prev->name + "' [" + std::to_string(prev->offset) + ".." +
                 std::to_string(prev->offset + prev->n_bytes) + ")");
    t.data = data + data_start + t.offset;
    prev = &t;
  }
  return Status::Ok();
}

}  // namespace llamay::gguf
