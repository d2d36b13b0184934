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

uint32_t KvLayout::n_attention_layers() const {
  if (layer_specs.empty()) return n_layers;
  uint32_t n = 0;
  for (const LayerSpec& s : layer_specs) n += s.kind == LayerKind::kAttention;
  return n;
}

size_t KvLayout::recurrent_bytes() const {
  return size_t{n_layers - n_attention_layers()} * recurrent_layer_bytes;
}

StateGroups KvLayout::Groups() const {
  StateGroups g;
  g.slots.resize(n_layers);
  g.recurrent.kind = LayerKind::kRecurrent;
  for (uint32_t l = 0; l < n_layers; ++l) {
    const LayerSpec s = spec(l);
    LayerSlot& slot = g.slots[l];
    slot.kind = s.kind;
    if (s.kind == LayerKind::kRecurrent) {
      slot.index = static_cast<uint32_t>(g.recurrent.layers.size());
      g.recurrent.layers.push_back(l);
      continue;
    }
    size_t i = 0;
    while (i < g.attention.size() && g.attention[i].window != s.window) ++i;
    if (i == g.attention.size()) g.attention.push_back({LayerKind::kAttention, s.window, {}, 0});
    slot.group = static_cast<uint32_t>(i);
    slot.index = static_cast<uint32_t>(g.attention[i].layers.size());
    g.attention[i].layers.push_back(l);
  }
  for (LayerGroup& a : g.attention) a.page_bytes = a.layers.size() * layer_bytes();
  g.recurrent.page_bytes = recurrent_bytes();
  return g;
}

bool KvLayout::SameGeometry(const KvLayout& o) const {
  if (n_layers != o.n_layers || n_kv_heads != o.n_kv_heads || head_dim != o.head_dim) return false;
  for (uint32_t l = 0; l < n_layers; ++l)
    if (!(spec(l) == o.spec(l))) return false;
  return recurrent_bytes() == o.recurrent_bytes();
}

Status KvLayout::Validate() const {
  if (n_layers == 0 || n_layers > 4096) return InvalidArgumentError("kv layout: n_layers must be 1..4096");
  if (page_tokens == 0 || page_tokens > 65536)
    return InvalidArgumentError("kv layout: page_tokens must be 1..65536");
  if (!layer_specs.empty() && layer_specs.size() != n_layers)
    return InvalidArgumentError("kv layout: " + std::to_string(layer_specs.size()) + " layer specs for " +
                                std::to_string(n_layers) + " layers");
  const uint32_t n_attention = n_attention_layers();
  if (n_attention < n_layers) {
    if (recurrent_layer_bytes == 0 || recurrent_layer_bytes > (uint64_t{1} << 30))
      return InvalidArgumentError("kv layout: recurrent layers need a state of 1 byte..1 GiB");
    if (recurrent_legacy_layer_bytes >= recurrent_layer_bytes)
      return InvalidArgumentError("kv layout: a legacy recurrent state of " +
                                  std::to_string(recurrent_legacy_layer_bytes) + " bytes is not shorter than " +
                                  std::to_string(recurrent_layer_bytes));
    if (checkpoint_tokens != 0 && checkpoint_tokens % page_tokens != 0)
      return InvalidArgumentError("kv layout: checkpoint_tokens " + std::to_string(checkpoint_tokens) +
                                  " is not a multiple of page_tokens " + std::to_string(page_tokens));
  }
  for (const LayerSpec& s : layer_specs)
    if (s.kind == LayerKind::kAttention && s.window > kMaxPositions)
      return InvalidArgumentError("kv layout: window " + std::to_string(s.window) + " beyond the position limit");
  if (Groups().attention.size() > kMaxAttentionGroups)
    return InvalidArgumentError("kv layout: more than " + std::to_string(kMaxAttentionGroups) +
                                " distinct attention windows");
  if (n_attention == 0) return Status::Ok();  // a pure recurrent model: no rows, no pages
  if (n_kv_heads == 0 || n_kv_heads > 4096)
    return InvalidArgumentError("kv layout: n_kv_heads must be 1..4096");
  if (head_dim == 0 || head_dim > 65536) return InvalidArgumentError("kv layout: head_dim must be 1..65536");
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
  std::string kinds;
  if (!layer_specs.empty()) {
    kinds = " kinds=";
    for (const LayerSpec& s : layer_specs)
      kinds += s.kind == LayerKind::kRecurrent ? 'r' : (s.window ? 'w' : 'a');
  }
  return "layers=" + std::to_string(n_layers) + kinds + " kv_heads=" + std::to_string(n_kv_heads) +
         " head_dim=" + std::to_string(head_dim) + " page_tokens=" + std::to_string(page_tokens) +
         " precision=" + std::string(KvPrecisionName(precision));
}

}  // namespace llamay::kv
