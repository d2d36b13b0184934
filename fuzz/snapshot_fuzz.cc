// libFuzzer target: snapshot restore on arbitrary bytes (and inspect).
#include <cstddef>
#include <cstdint>
#include <memory>

#include "kv/cache.h"
#include "kv/snapshot.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::unique_ptr<llamay::kv::Cache> cache = [] {
    llamay::kv::CacheOptions o;
    o.layout.n_layers = 2;
    o.layout.n_kv_heads = 2;
    o.layout.head_dim = 16;
    o.layout.page_tokens = 4;
    o.max_bytes = 64 << 20;
    return std::move(*llamay::kv::Cache::Create(o));
  }();
  std::span<const uint8_t> bytes(data, size);
  (void)llamay::kv::InspectSnapshot(bytes);
  llamay::Digest d{};
  auto r = llamay::kv::RestoreSnapshot(*cache, bytes, d);
  return 0;
}
