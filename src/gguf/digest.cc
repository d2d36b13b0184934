// The weight digest: a 32-byte identity of what the weights compute, hashed once per file.
//
// Encoding hashed by SHA-256 (all integers little-endian, as in the file):
//   "llamay-weights-v1"
//   for each metadata entry in file order, except tokenizer.* and general.* (general.architecture and
//   general.alignment are kept: they change what the tensors mean):
//     'K', u64 key length, key, u32 value type, [arrays: u32 element type, u64 count], the value's bytes
//   for each tensor in file order:
//     'T', u64 name length, name, u32 tensor type, u32 n_dims, i64 dims[n_dims], XXH3-128 of the data (lo,
//     hi)
// Tags and length prefixes make the encoding unambiguous. Snapshots store this digest: changing the
// encoding makes every stored snapshot unrestorable, so it is pinned by a test.
#include <xxhash.h>

#include <string_view>

#include "gguf/internal.h"

namespace llamay::gguf::internal {
namespace {

// Keys that describe or tokenize but do not change what the weights compute.
bool Descriptive(std::string_view key) {
  if (key == "general.architecture" || key == "general.alignment") return false;
  return key.starts_with("general.") || key.starts_with("tokenizer.");
}

class Hasher {
 public:
  void Tag(char t) { sha_.Update(&t, 1); }
  template <typename T>
  void Put(T v) {
    sha_.Update(&v, sizeof v);
  }
  void PutString(std::string_view s) {
    Put<uint64_t>(s.size());
    sha_.Update(s.data(), s.size());
  }
  void PutBytes(const void* p, size_t n) { sha_.Update(p, n); }
  Digest Finish() { return sha_.Finish(); }

 private:
  Sha256 sha_;
};

}  // namespace

Digest ComputeWeightDigest(const uint8_t* data, const std::vector<Kv>& kvs,
                           const std::vector<TensorInfo>& tensors) {
  Hasher h;
  constexpr std::string_view kDomain = "llamay-weights-v1";
  h.PutBytes(kDomain.data(), kDomain.size());
  for (const Kv& kv : kvs) {
    if (Descriptive(kv.key)) continue;
    h.Tag('K');
    h.PutString(kv.key);
    h.Put(static_cast<uint32_t>(kv.type));
    if (kv.type == ValueType::kArray) {
      h.Put(static_cast<uint32_t>(kv.elem));
      h.Put<uint64_t>(kv.count);
    }
    h.PutBytes(data + kv.value_off, kv.value_end - kv.value_off);
  }
  for (const TensorInfo& t : tensors) {
    h.Tag('T');
    h.PutString(t.name);
    h.Put(static_cast<uint32_t>(t.type));
    h.Put(static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) h.Put<int64_t>(d);
    const XXH128_hash_t x = XXH3_128bits(t.data, t.n_bytes);
    h.Put<uint64_t>(x.low64);
    h.Put<uint64_t>(x.high64);
  }
  return h.Finish();
}

}  // namespace llamay::gguf::internal
