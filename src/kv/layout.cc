#include "kv/layout.h"

#include "base/numeric.h"

namespace llamay::kv {

std::string_view KvPrecisionName(KvPrecision p) {
  switch (p) {
    case KvPrecision::kF32: return "f32";
    case KvPrecision::kF16: return "f16";
    case KvPrecision::kQ8_0: return "q8_0";
  }
  return "unknown";
}

Result<KvPrecision> ParseKvPrecision(std::string_view name) {
  if (name == "f32") return KvPrecision::kF32;
  if (name == "f16") return KvPrecision::kF16;
  if (name == "q8_0") return KvPrecision::kQ8_0;
  return InvalidArgumentError("unknown KV precision '" + std::string(name) + "' (want f32, f16 or q8_0)");
}

size_t RowBytes(KvPrecision p, uint32_t elems) {
  switch (p) {
    case KvPrecision::kF32: return size_t{elems} * 4;
    case KvPrecision::kF16: return size_t{elems} * 2;
    case KvPrecision::kQ8_0: return size_t{elems} / kQ8_0BlockSize * sizeof(BlockQ8_0);
  }
  return 0;
}

Status KvLayout::Validate() const {
  if (n_layers == 0 || n_layers > 4096) return InvalidArgumentError("kv layout: n_layers must be 1..4096");
  if (n_kv_heads == 0 || n_kv_heads > 4096)
    return InvalidArgumentError("kv layout: n_kv_heads must be 1..4096");
  if (head_dim == 0 || head_dim > 65536) return InvalidArgumentError("kv layout: head_dim must be 1..65536");
  if (page_tokens == 0 || page_tokens > 65536)
    return InvalidArgumentError("kv layout: page_tokens must be 1..65536");
  if (precision != KvPrecision::kF32 && precision != KvPrecision::kF16 && precision != KvPrecision::kQ8_0)
    return InvalidArgumentError("kv layout: unknown precision");
  if (precision == KvPrecision::kQ8_0 && row_elems() % kQ8_0BlockSize != 0)
    return InvalidArgumentError("kv layout: q8_0 needs n_kv_heads*head_dim to be a multiple of 32, got " +
                                std::to_string(row_elems()));
  if (page_bytes() > (size_t{1} << 30))
    return InvalidArgumentError("kv layout: a page would take " + std::to_string(page_bytes()) +
                                " bytes (limit 1 GiB); use fewer page_tokens");
  return Status::Ok();
}

std::string KvLayout::ToString() const {
  return "layers=" + std::to_string(n_layers) + " kv_heads=" + std::to_string(n_kv_heads) +
         " head_dim=" + std::to_string(head_dim) + " page_tokens=" + std::to_string(page_tokens) +
         " precision=" + std::string(KvPrecisionName(precision));
}

}  // namespace llamay::kv
