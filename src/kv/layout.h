// KvLayout: the state layout of a model, computed by the model and handed to kv/.
//
// kv/ never sees a model config: it knows how many layers a model has, what state each layer keeps, the
// geometry of one attention row, how many positions a page holds and the precision of the stored values.
//
// Layer groups. Each layer is of one kind (LayerSpec):
//   - full attention: K/V rows for every position, in pages;
//   - windowed attention (window w): the same pages, but a query at position p reads keys p-w+1..p only,
//     so pages wholly before the window may be released (Context::TrimWindows);
//   - recurrent: a fixed-size state per sequence (conv + SSM state, or gated-delta state), no pages.
// Layers of the same kind and window form a group (Groups()). A context holds one page list per attention
// group and one live recurrent slot for all recurrent layers together. A model without layer_specs is all
// full attention: one group, exactly the layout of a pure-attention model.
//
// A page of an attention group is layer-major, the order the forward pass reads it:
//
//   page bytes: [layer in group][k|v][slot][row]   slot in [0, page_tokens), row = n_kv_heads * head_dim
//
// A row is stored as f32, f16 or Q8_0 blocks of 32 (which requires row_elems() % 32 == 0). Every attention
// layer shares one row geometry (true of every architecture llamay runs). The recurrent slot is opaque
// bytes to kv/: [recurrent layer in group][recurrent_layer_bytes], laid out by the model.
// Thread-safety: a value type.
#ifndef LLAMAY_KV_LAYOUT_H_
#define LLAMAY_KV_LAYOUT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace llamay::kv {

inline constexpr uint32_t kDefaultPageTokens = 64;
// Checkpoints one context holds at most (Context::Checkpoint thins them past this).
inline constexpr size_t kMaxContextCheckpoints = 16;
// Attention groups one layout may have (full attention plus distinct windows).
inline constexpr size_t kMaxAttentionGroups = 8;
// The most positions one context (and one snapshot) may hold.
inline constexpr uint64_t kMaxPositions = 16u * 1024u * 1024u;

enum class KvPrecision : uint8_t { kF32 = 0, kF16 = 1, kQ8_0 = 2 };
std::string_view KvPrecisionName(KvPrecision p);
// Parses "f32", "f16" or "q8_0".
Result<KvPrecision> ParseKvPrecision(std::string_view name);
// Bytes one row of `elems` values takes at precision `p`. REQUIRES: q8_0 rows are a multiple of 32.
size_t RowBytes(KvPrecision p, uint32_t elems);

enum class KvKind : uint8_t { kKey = 0, kValue = 1 };

enum class LayerKind : uint8_t { kAttention = 0, kRecurrent = 1 };

// What one model layer keeps.
struct LayerSpec {
  LayerKind kind = LayerKind::kAttention;
  uint32_t window = 0;  // attention: 0 = full; w > 0 = a query at p reads keys p-w+1..p
  bool operator==(const LayerSpec&) const = default;
};

// One layer group, derived from the specs (KvLayout::Groups).
struct LayerGroup {
  LayerKind kind = LayerKind::kAttention;
  uint32_t window = 0;
  std::vector<uint32_t> layers;  // model layer indices, ascending; a layer's index in the group is its rank
  size_t page_bytes = 0;         // attention: one page of this group; recurrent: the whole slot
};

// Where a model layer's state lives.
struct LayerSlot {
  LayerKind kind = LayerKind::kAttention;
  uint32_t group = 0;  // attention: index into StateGroups::attention
  uint32_t index = 0;  // the layer's index inside its group
};

struct StateGroups {
  std::vector<LayerGroup> attention;  // one page list each, in order of their first layer
  LayerGroup recurrent;               // layers empty when the model has no recurrent layer
  std::vector<LayerSlot> slots;       // [model layer]
  bool has_recurrent() const { return !recurrent.layers.empty(); }
};

struct KvLayout {
  uint32_t n_layers = 0;    // model layers, every kind
  uint32_t n_kv_heads = 0;  // attention row geometry, shared by every attention layer
  uint32_t head_dim = 0;
  uint32_t page_tokens = kDefaultPageTokens;
  KvPrecision precision = KvPrecision::kF32;
  // [n_layers] or empty: empty means every layer is full attention.
  std::vector<LayerSpec> layer_specs;
  uint64_t recurrent_layer_bytes = 0;  // state of one recurrent layer for one sequence
  // An earlier recurrent_layer_bytes whose states are a prefix of today's (0: none): the model appended to
  // its state a tail whose all-zero value is valid. A snapshot written with that size restores with each
  // layer's state zero-extended, and is otherwise the same model.
  uint64_t recurrent_legacy_layer_bytes = 0;
  // Checkpoints taken inside a prefill fall on multiples of this (the model's state-update granularity,
  // a multiple of page_tokens); 0 when the layout has no recurrent layer.
  uint32_t checkpoint_tokens = 0;

  uint32_t row_elems() const { return n_kv_heads * head_dim; }
  size_t row_bytes() const { return RowBytes(precision, row_elems()); }
  // Bytes of one layer inside a page: K rows for every slot, then V rows.
  size_t layer_bytes() const { return 2 * size_t{page_tokens} * row_bytes(); }
  LayerSpec spec(uint32_t layer) const { return layer_specs.empty() ? LayerSpec{} : layer_specs[layer]; }
  uint32_t n_attention_layers() const;
  // Bytes of the pages that page_tokens positions take across every attention group (one page per group;
  // a pure-attention model's page).
  size_t page_bytes() const { return size_t{n_attention_layers()} * layer_bytes(); }
  // Bytes of one sequence's recurrent slot (every recurrent layer).
  size_t recurrent_bytes() const;
  // Byte offset, inside a page of the layer's group, of the row for (layer index in group, kind, slot).
  size_t RowOffset(uint32_t index, KvKind kind, uint32_t slot) const {
    return size_t{index} * layer_bytes() +
           (size_t{static_cast<uint32_t>(kind)} * page_tokens + slot) * row_bytes();
  }
  StateGroups Groups() const;
  // Same state per position (layers and their kinds, heads, head dim, recurrent bytes): what a snapshot
  // must match. Page size and precision may differ.
  bool SameGeometry(const KvLayout& o) const;

  // OK when every field is in range (page_tokens 1..65536, dims non-zero, a page under 1 GiB, q8_0 rows
  // a multiple of 32, specs for every layer, recurrent layers with a state size and checkpoint_tokens a
  // multiple of page_tokens).
  Status Validate() const;
  std::string ToString() const;
};

}  // namespace llamay::kv

#endif  // LLAMAY_KV_LAYOUT_H_
