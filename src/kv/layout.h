// KvLayout: the geometry of a KV cache, computed by the model and handed to kv/.
//
// kv/ never sees a model config: it knows only how many layers, KV heads and head dims a position has, how
// many positions a page holds and the precision of the stored values. A page is layer-major, the order the
// forward pass reads it:
//
//   page bytes: [layer][k|v][slot][row]   slot in [0, page_tokens), row = n_kv_heads * head_dim elements
//
// A row is stored as f32, f16 or Q8_0 blocks of 32 (which requires row_elems() % 32 == 0).
// Thread-safety: a value type.
#ifndef LLAMAY_KV_LAYOUT_H_
#define LLAMAY_KV_LAYOUT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace llamay::kv {

inline constexpr uint32_t kDefaultPageTokens = 64;
// The most positions one context (and one snapshot) may hold.
inline constexpr uint64_t kMaxPositions = 16u * 1024u * 1024u;

enum class KvPrecision : uint8_t { kF32 = 0, kF16 = 1, kQ8_0 = 2 };
std::string_view KvPrecisionName(KvPrecision p);
// Parses "f32", "f16" or "q8_0".
Result<KvPrecision> ParseKvPrecision(std::string_view name);
// Bytes one row of `elems` values takes at precision `p`. REQUIRES: q8_0 rows are a multiple of 32.
size_t RowBytes(KvPrecision p, uint32_t elems);

enum class KvKind : uint8_t { kKey = 0, kValue = 1 };

struct KvLayout {
  uint32_t n_layers = 0;
  uint32_t n_kv_heads = 0;
  uint32_t head_dim = 0;
  uint32_t page_tokens = kDefaultPageTokens;
  KvPrecision precision = KvPrecision::kF32;

  uint32_t row_elems() const { return n_kv_heads * head_dim; }
  size_t row_bytes() const { return RowBytes(precision, row_elems()); }
  // Bytes of one layer inside a page: K rows for every slot, then V rows.
  size_t layer_bytes() const { return 2 * size_t{page_tokens} * row_bytes(); }
  size_t page_bytes() const { return size_t{n_layers} * layer_bytes(); }
  // Byte offset, inside a page, of the row for (layer, kind, slot).
  size_t RowOffset(uint32_t layer, KvKind kind, uint32_t slot) const {
    return size_t{layer} * layer_bytes() +
           (size_t{static_cast<uint32_t>(kind)} * page_tokens + slot) * row_bytes();
  }
  // Same geometry per position (layers, heads, head dim): what a snapshot must match.
  bool SameGeometry(const KvLayout& o) const {
    return n_layers == o.n_layers && n_kv_heads == o.n_kv_heads && head_dim == o.head_dim;
  }

  // OK when every field is in range (page_tokens 1..65536, dims non-zero, a page under 1 GiB, q8_0 rows
  // a multiple of 32).
  Status Validate() const;
  std::string ToString() const;
};

}  // namespace llamay::kv

#endif  // LLAMAY_KV_LAYOUT_H_
