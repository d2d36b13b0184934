// libFuzzer target: snapshot restore on arbitrary bytes (and inspect), into a pure-attention cache (format
// version 1's layout) and a hybrid one (full attention, recurrent, windowed: version 2's sections).
#include <cstddef>
#include <cstdint>
#include <memory>

#include "kv/cache.h"
#include "kv/snapshot.h"

namespace {

std::unique_ptr<llamay::kv::Cache> MakeCache(bool hybrid) {
  llamay::kv::CacheOptions o;
  o.layout.n_layers = hybrid ? 3 : 2;
  o.layout.n_kv_heads = 2;
  o.layout.head_dim = 16;
  o.layout.page_tokens = 4;
  if (hybrid) {
    using llamay::kv::LayerKind;
    o.layout.layer_specs = {{LayerKind::kAttention, 0}, {LayerKind::kRecurrent, 0}, {LayerKind::kAttention, 8}};
    o.layout.recurrent_layer_bytes = 40;
  }
  o.max_bytes = 64 << 20;
  return std::move(*llamay::kv::Cache::Create(o));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::unique_ptr<llamay::kv::Cache> pure = MakeCache(false);
  static std::unique_ptr<llamay::kv::Cache> hybrid = MakeCache(true);
  std::span<const uint8_t> bytes(data, size);
  (void)llamay::kv::InspectSnapshot(bytes);
  llamay::Digest d{};
  std::vector<float> logits;
  (void)llamay::kv::RestoreSnapshot(*pure, bytes, d, &logits);
  (void)llamay::kv::RestoreSnapshot(*hybrid, bytes, d, &logits);
  return 0;
}
