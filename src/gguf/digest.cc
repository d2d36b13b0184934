// The weight digest: what the weights compute, hashed once per file.
#include <xxhash.h>

#include <string_view>

#include "gguf/internal.h"

namespace llamay::gguf::internal {
namespace {

// Keys that describe or tokenize but do not change what the weights compute.
bool Descriptive(std::string_view key) {
  if (key == "general.architecture" || key == "general.alignment") return false;
  return key.rfind("general.", 0) == 0 || key.rfind("tokenizer.", 0) == 0;
}

}  // namespace

Digest ComputeWeightDigest(const uint8_t* data, const std::vector<Kv>& kvs, const std::vector<TensorInfo>& tensors) {
  Sha256 h;
  h.Update("llamay-weights-v1", 17);
  for (const Kv& kv : kvs) {
    if (Descriptive(kv.key)) continue;
    const uint64_t klen = kv.key.size();
    h.Update(&klen, 8);
    h.Update(kv.key.data(), kv.key.size());
    const uint32_t type = static_cast<uint32_t>(kv.type);
    h.Update(&type, 4);
    if (kv.type == ValueType::kArray) {
      const uint32_t elem = static_cast<uint32_t>(kv.elem);
      h.Update(&elem, 4);
      h.Update(&kv.count, 8);
    }
    h.Update(data + kv.value_off, kv.value_end - kv.value_off);
  }
  for (const TensorInfo& t : tensors) {
    const uint64_t nlen = t.name.size();
    h.Update(&nlen, 8);
    h.Update(t.name.data(), t.name.size());
    const uint32_t type = static_cast<uint32_t>(t.type);
    h.Update(&type, 4);
    for (int64_t d : t.dims) h.Update(&d, 8);
    const XXH128_hash_t x = XXH3_128bits(t.data, t.n_bytes);
    h.Update(&x.low64, 8);
    h.Update(&x.high64, 8);
  }
  return h.Finish();
}

}  // namespace llamay::gguf::internal
