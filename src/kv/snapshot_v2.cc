// Snapshot format version 2: layer map, per-group KV, recurrent state, checkpoints, logits.
// docs/snapshot-format.md gives the byte layout; snapshot.cc holds version 1 and the shared parts.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <shared_mutex>

#include "base/crc32c.h"
#include "kv/internal.h"
#include "kv/row_codec.h"
#include <functional>

#include "kv/snapshot_internal.h"

namespace llamay::kv {
namespace snapshot_detail {

uint64_t FirstStored(const LayerGroup& g, uint64_t n) {
  // A query at position n reads keys from n - window + 1: nothing before it is needed.
  return g.window != 0 && n >= g.window ? n - g.window + 1 : 0;
}

KvLayout FileLayout(const SnapshotInfo& in) {
  KvLayout l;
  l.n_layers = in.n_layers;
  l.n_kv_heads = in.n_kv_heads;
  l.head_dim = in.head_dim;
  l.precision = in.precision;
  l.layer_specs = in.layer_specs;
  l.recurrent_layer_bytes = in.recurrent_layer_bytes;
  return l;
}

namespace {

// One sequence's recurrent slot of `layers` layers, stored with `from` bytes per layer, into a slot of `to`
// bytes per layer (to >= from): each layer's bytes, then zeros (KvLayout::recurrent_legacy_layer_bytes).
void WidenSlot(const uint8_t* src, uint64_t from, uint8_t* dst, uint64_t to, uint32_t layers) {
  if (from == to) {
    std::memcpy(dst, src, from * layers);
    return;
  }
  for (uint32_t l = 0; l < layers; ++l) {
    std::memcpy(dst + l * to, src + l * from, from);
    std::memset(dst + l * to + from, 0, to - from);
  }
}

// The LAYOUT section: [n_layers] x {u32 kind, u32 window}, then u64 recurrent_layer_bytes.
Status ReadLayerMap(std::span<const uint8_t> sec, SnapshotInfo* in) {
  if (sec.size() != 8 * uint64_t{in->n_layers} + 8)
    return SnapError(SnapshotError::kBadLength, "layout section of " + std::to_string(sec.size()) + " bytes for " +
                                                    std::to_string(in->n_layers) + " layers");
  bool any_recurrent = false, any_attention = false;
  for (uint32_t l = 0; l < in->n_layers; ++l) {
    const uint32_t kind = U32(&sec[8 * l]), window = U32(&sec[8 * l + 4]);
    if (kind > 1 || (kind == 1 && window != 0) || window > kMaxPositions)
      return SnapError(SnapshotError::kBadLength, "layer " + std::to_string(l) + " of unknown kind " +
                                                      std::to_string(kind) + " or window " + std::to_string(window));
    in->layer_specs.push_back({kind == 1 ? LayerKind::kRecurrent : LayerKind::kAttention, window});
    (kind == 1 ? any_recurrent : any_attention) = true;
  }
  in->recurrent_layer_bytes = U64(&sec[8 * uint64_t{in->n_layers}]);
  if (any_recurrent != (in->recurrent_layer_bytes != 0) || in->recurrent_layer_bytes > (uint64_t{1} << 30))
    return SnapError(SnapshotError::kBadLength,
                     "recurrent state of " + std::to_string(in->recurrent_layer_bytes) + " bytes per layer");
  if (any_attention) {
    const uint32_t heads = in->n_kv_heads, dim = in->head_dim;
    if (heads == 0 || heads > 4096 || dim == 0 || dim > 65536 ||
        (in->precision == KvPrecision::kQ8_0 && (heads * dim) % 32 != 0))
      return SnapError(SnapshotError::kBadLength,
                       "attention rows of " + std::to_string(heads) + " x " + std::to_string(dim));
  }
  return Status::Ok();
}

}  // namespace

Result<Parsed> ParseV2(std::span<const uint8_t> b, uint32_t n_sections, Parsed out) {
  SnapshotInfo& in = out.info;
  const uint64_t size = b.size();
  const size_t table_end = kHeaderBytes + kSectionEntryBytes * n_sections;
  // 1. The table: contiguous sections, each kind once; unknown required kinds refused.
  std::vector<Section> secs;
  uint64_t offset = table_end;
  const Section* layout = nullptr;
  for (uint32_t i = 0; i < n_sections; ++i) {
    const uint8_t* e = &b[kHeaderBytes + kSectionEntryBytes * i];
    Section s{U32(e), U32(e + 4), U64(e + 8), U64(e + 16)};
    if (s.offset != offset)
      return SnapError(SnapshotError::kBadLength, "section " + std::to_string(i) + " at offset " +
                                                      std::to_string(s.offset) + ", expected " + std::to_string(offset));
    if (s.size > (uint64_t{1} << 56))
      return SnapError(SnapshotError::kBadLength, "section " + std::to_string(i) + " declares " +
                                                      std::to_string(s.size) + " bytes");
    for (const Section& o : secs)
      if (o.kind == s.kind) return SnapError(SnapshotError::kBadLength, "section kind " + std::to_string(s.kind) + " twice");
    if (s.kind > kLastSectionKind && (s.flags & kSectionRequired))
      return SnapError(SnapshotError::kUnsupportedVersion,
                       "requires section kind " + std::to_string(s.kind) + ", unknown to this build");
    offset += s.size;
    secs.push_back(s);
  }
  const uint64_t total = offset + 4;
  for (const Section& s : secs)
    if (s.kind == kSectionLayout) layout = &s;
  if (layout == nullptr) return SnapError(SnapshotError::kBadLength, "version 2 without a layout section");
  if (layout->size != 8 * uint64_t{in.n_layers} + 8)
    return SnapError(SnapshotError::kBadLength, "layout section of " + std::to_string(layout->size) + " bytes");
  if (size < layout->offset + layout->size) return SnapError(SnapshotError::kTruncated, "ends inside the layout");
  // 2. The layer map, then every length recomputed from it.
  LLAMAY_RETURN_IF_ERROR(ReadLayerMap(b.subspan(layout->offset, layout->size), &in));
  const KvLayout fl = FileLayout(in);
  const StateGroups groups = fl.Groups();
  const uint64_t n = in.n_positions;
  const uint64_t disk_row = fl.n_attention_layers() ? RowBytes(in.precision, fl.row_elems()) : 0;
  uint64_t kv_bytes = 0;
  for (const LayerGroup& g : groups.attention) kv_bytes += (n - FirstStored(g, n)) * g.layers.size() * 2 * disk_row;
  const uint64_t slot = fl.recurrent_bytes();
  bool have_tokens = false, have_kv = false, have_state = false;
  for (const Section& s : secs) {
    auto want = [&](uint64_t bytes, const char* what) -> Status {
      if (s.size == bytes) return Status::Ok();
      return SnapError(SnapshotError::kBadLength, std::string(what) + " section of " + std::to_string(s.size) +
                                                      " bytes; the header implies " + std::to_string(bytes));
    };
    switch (s.kind) {
      case kSectionTokens:
        LLAMAY_RETURN_IF_ERROR(want(4 * n, "tokens"));
        have_tokens = true;
        break;
      case kSectionKv:
        LLAMAY_RETURN_IF_ERROR(want(kv_bytes, "KV"));
        have_kv = true;
        break;
      case kSectionState:
        if (slot == 0) return SnapError(SnapshotError::kBadLength, "a recurrent state without recurrent layers");
        LLAMAY_RETURN_IF_ERROR(want(8 + slot, "state"));
        have_state = true;
        break;
      case kSectionCheckpoints:
        if (slot == 0 || s.size < 8 || (s.size - 8) % (8 + slot) != 0 || (s.size - 8) / (8 + slot) > n)
          return SnapError(SnapshotError::kBadLength, "checkpoints section of " + std::to_string(s.size) + " bytes");
        break;
      case kSectionLogits:
        if (s.size < 8 || (s.size - 8) % 4 != 0 || (s.size - 8) / 4 > kMaxLogits)
          return SnapError(SnapshotError::kBadLength, "logits section of " + std::to_string(s.size) + " bytes");
        break;
      case kSectionKvChecksums:
        if (s.size < 16 || s.size > (uint64_t{1} << 32))
          return SnapError(SnapshotError::kBadLength, "KV checksums section of " + std::to_string(s.size) + " bytes");
        break;
      default: break;
    }
  }
  if (!have_tokens || !have_kv || have_state != (slot != 0))
    return SnapError(SnapshotError::kBadLength, "missing the tokens, KV or state section");
  // 3. Whole file present, nothing after the checksum.
  if (size < total)
    return SnapError(SnapshotError::kTruncated, std::to_string(size) + " bytes; the header declares " + std::to_string(total));
  if (size > total) return SnapError(SnapshotError::kBadLength, std::to_string(size - total) + " bytes after the checksum");
  out.want_crc = U32(&b[total - 4]);
  in.file_bytes = total;
  for (const Section& s : secs) {
    const auto bytes = b.subspan(s.offset, s.size);
    if (s.kind == kSectionTokens) out.tokens = bytes;
    if (s.kind == kSectionKv) {
      out.kv = bytes;
      out.kv_offset = s.offset;
    }
    if (s.kind == kSectionState) out.state = bytes;
    if (s.kind == kSectionCheckpoints) out.checkpoints = bytes;
    if (s.kind == kSectionLogits) out.logits = bytes;
    if (s.kind == kSectionKvChecksums) out.kv_checksums = bytes;
  }
  // 4. Counts inside the sections agree with their sizes.
  if (!out.state.empty()) {
    in.state_position = U64(out.state.data());
    if (in.state_position > n) return SnapError(SnapshotError::kBadLength, "state past the positions");
  }
  if (!out.checkpoints.empty()) {
    in.n_checkpoints = U64(out.checkpoints.data());
    if (in.n_checkpoints != (out.checkpoints.size() - 8) / (8 + slot))
      return SnapError(SnapshotError::kBadLength, "checkpoint count disagrees with its section");
  }
  if (!out.logits.empty()) {
    in.n_logits = U64(out.logits.data());
    if (in.n_logits != (out.logits.size() - 8) / 4)
      return SnapError(SnapshotError::kBadLength, "logit count disagrees with its section");
  }
  if (!out.kv_checksums.empty()) {
    LLAMAY_RETURN_IF_ERROR(CheckKvChecksums(out.kv_checksums, out.kv.size()));
    in.kv_checksum_chunk = U64(out.kv_checksums.data());
  }
  return out;
}

Status CheckKvChecksums(std::span<const uint8_t> sec, uint64_t kv_bytes) {
  const uint64_t chunk = U64(sec.data()), count = U64(sec.data() + 8);
  if (chunk < 4096 || chunk > (uint64_t{1} << 30) || (chunk & (chunk - 1)) != 0)
    return SnapError(SnapshotError::kBadLength, "KV checksum chunks of " + std::to_string(chunk) + " bytes");
  if (count != (kv_bytes + chunk - 1) / chunk || sec.size() != 16 + 4 * count)
    return SnapError(SnapshotError::kBadLength, "KV checksum count disagrees with the KV section");
  return Status::Ok();
}

Status VerifyKvChecksums(std::span<const uint8_t> sec, std::span<const uint8_t> kv) {
  const uint64_t chunk = U64(sec.data());
  for (uint64_t at = 0, i = 0; at < kv.size(); at += chunk, ++i)
    if (Crc32c(kv.data() + at, std::min<uint64_t>(chunk, kv.size() - at)) != U32(sec.data() + 16 + 4 * i))
      return ChecksumError();
  return Status::Ok();
}

}  // namespace snapshot_detail

using namespace snapshot_detail;  // NOLINT: this codec's own helpers

Status SnapshotCodec::WriteV2(const Context& ctx, const Digest& weights, ByteSink& sink, const SnapshotOptions& opt) {
  const internal::ContextState* s = ctx.s_;
  const KvLayout& layout = s->cache->layout();
  const StateGroups& groups = s->cache->groups();
  const KvPrecision disk = opt.native_precision ? layout.precision : KvPrecision::kF32;
  const uint32_t elems = layout.row_elems();
  const size_t disk_row = groups.attention.empty() ? 0 : RowBytes(disk, elems);
  const size_t P = layout.page_tokens;
  const uint64_t slot = layout.recurrent_bytes();
  std::shared_lock l(s->mu);
  const uint64_t n = s->tokens.size();

  // 1. Section sizes.
  uint64_t kv_bytes = 0;
  for (const LayerGroup& g : groups.attention) kv_bytes += (n - FirstStored(g, n)) * g.layers.size() * 2 * disk_row;
  std::vector<Section> secs;
  auto add = [&](uint32_t kind, uint32_t flags, uint64_t bytes) { secs.push_back({kind, flags, 0, bytes}); };
  add(kSectionTokens, 0, 4 * n);
  add(kSectionLayout, kSectionRequired, 8 * uint64_t{layout.n_layers} + 8);
  const uint64_t n_kv_chunks = opt.kv_checksums ? (kv_bytes + kKvChecksumChunk - 1) / kKvChecksumChunk : 0;
  if (opt.kv_checksums) add(kSectionKvChecksums, 0, 16 + 4 * n_kv_chunks);
  add(kSectionKv, 0, kv_bytes);
  if (slot != 0) add(kSectionState, kSectionRequired, 8 + slot);
  const bool cps = opt.checkpoints && slot != 0;
  if (cps) add(kSectionCheckpoints, 0, 8 + s->checkpoints.size() * (8 + slot));
  if (!opt.logits.empty()) add(kSectionLogits, 0, 8 + 4 * uint64_t{opt.logits.size()});

  // 2. Bytes, through one buffer flushed a megabyte at a time with a running CRC.
  std::vector<uint8_t> buf;
  buf.reserve(kFlushBytes + 2 * layout.n_layers * disk_row + slot + 64);
  uint32_t crc = 0;
  auto flush = [&]() -> Status {
    crc = Crc32cExtend(crc, buf.data(), buf.size());
    Status st = sink.Append(buf.data(), buf.size());
    buf.clear();
    return st;
  };
  auto put = [&](const void* v, size_t len) {
    const auto* p = static_cast<const uint8_t*>(v);
    buf.insert(buf.end(), p, p + len);
  };
  auto put32 = [&](uint32_t v) { put(&v, 4); };
  auto put64 = [&](uint64_t v) { put(&v, 8); };
  auto maybe_flush = [&]() -> Status { return buf.size() >= kFlushBytes ? flush() : Status::Ok(); };
  PutHeader(&buf, 2, layout, disk, n, weights, &secs);
  put(s->tokens.data(), 4 * n);
  for (uint32_t i = 0; i < layout.n_layers; ++i) {
    const LayerSpec spec = layout.spec(i);
    put32(spec.kind == LayerKind::kRecurrent ? 1 : 0);
    put32(spec.window);
  }
  put64(layout.recurrent_layer_bytes);
  // KV: each attention group's stored positions, [pos][layer in group][k|v][row]; `row(bytes)` gets each
  // row at the on-disk precision, and may flush after each position.
  std::vector<float> scratch(elems);
  std::vector<uint8_t> one_row(disk_row);
  auto each_row = [&](const std::function<Status(const uint8_t*, bool end_of_position)>& row) -> Status {
    for (size_t g = 0; g < groups.attention.size(); ++g) {
      const uint32_t n_layers = static_cast<uint32_t>(groups.attention[g].layers.size());
      for (uint64_t pos = FirstStored(groups.attention[g], n); pos < n; ++pos) {
        const internal::Page* page = s->pages[g][pos / P];
        if (page == nullptr) return InternalError("snapshot: a position the window needs was released");
        for (uint32_t i = 0; i < n_layers; ++i)
          for (KvKind kind : {KvKind::kKey, KvKind::kValue}) {
            internal::TranscodeRow(layout.precision,
                                   page->data + layout.RowOffset(i, kind, static_cast<uint32_t>(pos % P)), disk, elems,
                                   one_row.data(), scratch.data());
            LLAMAY_RETURN_IF_ERROR(row(one_row.data(), i + 1 == n_layers && kind == KvKind::kValue));
          }
      }
    }
    return Status::Ok();
  };
  if (opt.kv_checksums) {
    // A first pass for the CRC of each chunk, which a streaming reader checks as the chunk arrives.
    std::vector<uint32_t> crcs;
    uint32_t c = 0;
    uint64_t in_chunk = 0;
    LLAMAY_RETURN_IF_ERROR(each_row([&](const uint8_t* r, bool) {
      for (size_t done = 0; done < disk_row;) {
        const size_t take = std::min<uint64_t>(disk_row - done, kKvChecksumChunk - in_chunk);
        c = Crc32cExtend(c, r + done, take);
        done += take;
        in_chunk += take;
        if (in_chunk == kKvChecksumChunk) {
          crcs.push_back(c);
          c = 0;
          in_chunk = 0;
        }
      }
      return Status::Ok();
    }));
    if (in_chunk != 0) crcs.push_back(c);
    if (crcs.size() != n_kv_chunks) return InternalError("snapshot: KV checksum count");
    put64(kKvChecksumChunk);
    put64(n_kv_chunks);
    put(crcs.data(), 4 * crcs.size());
  }
  LLAMAY_RETURN_IF_ERROR(each_row([&](const uint8_t* r, bool end_of_position) -> Status {
    put(r, disk_row);
    return end_of_position ? maybe_flush() : Status::Ok();
  }));
  const std::vector<uint8_t> zero_state(s->state == nullptr ? slot : 0, 0);
  if (slot != 0) {
    put64(s->state_pos);
    put(s->state ? s->state->data : zero_state.data(), slot);
  }
  if (cps) {
    put64(s->checkpoints.size());
    for (const internal::Checkpoint& c : s->checkpoints) {
      put64(c.pos);
      put(c.state->data, slot);
      LLAMAY_RETURN_IF_ERROR(maybe_flush());
    }
  }
  if (!opt.logits.empty()) {
    put64(opt.logits.size());
    put(opt.logits.data(), 4 * opt.logits.size());
  }
  LLAMAY_RETURN_IF_ERROR(flush());
  uint8_t trailer[4];
  std::memcpy(trailer, &crc, 4);
  return sink.Append(trailer, 4);
}

Result<Context> SnapshotCodec::RestoreV2(Cache& cache, std::span<const uint8_t> bytes, const Parsed& p,
                                         const Digest& weights, std::vector<float>* logits) {
  // 1. Damage first (the whole checksum), then identity: other weights or another layer map are another
  //    model; the same layers with other rows do not fit this cache.
  LLAMAY_RETURN_IF_ERROR(VerifyChecksum(bytes, p));
  if (!p.kv_checksums.empty()) LLAMAY_RETURN_IF_ERROR(VerifyKvChecksums(p.kv_checksums, p.kv));
  const SnapshotInfo& in = p.info;
  if (in.weights != weights)
    return SnapError(SnapshotError::kWrongModel, "computed by other weights (snapshot " +
                                                     DigestHex(in.weights).substr(0, 16) + ", this model " +
                                                     DigestHex(weights).substr(0, 16) + ")");
  const KvLayout& layout = cache.layout();
  const KvLayout fl = FileLayout(in);
  // A recurrent state of the layout's earlier size loads zero-extended (KvLayout::recurrent_legacy_layer_bytes).
  const uint64_t file_layer = fl.recurrent_layer_bytes;
  bool same_map = fl.n_layers == layout.n_layers &&
                  (file_layer == layout.recurrent_layer_bytes ||
                   (file_layer != 0 && file_layer == layout.recurrent_legacy_layer_bytes));
  for (uint32_t i = 0; same_map && i < fl.n_layers; ++i) same_map = fl.spec(i) == layout.spec(i);
  if (!same_map)
    return SnapError(SnapshotError::kWrongModel, "computed by a model with another layer map (" + fl.ToString() +
                                                     "; this cache: " + layout.ToString() + ")");
  if (layout.n_attention_layers() != 0 && (fl.n_kv_heads != layout.n_kv_heads || fl.head_dim != layout.head_dim))
    return SnapError(SnapshotError::kGeometry, "attention rows of " + std::to_string(fl.n_kv_heads) + " x " +
                                                   std::to_string(fl.head_dim) + " do not fit this cache (" +
                                                   layout.ToString() + ")");
  // 2. Checkpoint positions, before anything is allocated.
  const uint64_t n = in.n_positions;
  const uint64_t slot = fl.recurrent_bytes();  // as stored; layout.recurrent_bytes() once widened
  uint64_t last = 0;
  for (uint64_t i = 0; i < in.n_checkpoints; ++i) {
    const uint64_t pos = U64(&p.checkpoints[8 + i * (8 + slot)]);
    if (pos <= last || pos > in.state_position)
      return SnapError(SnapshotError::kBadLength, "checkpoint at " + std::to_string(pos) + " out of order");
    last = pos;
  }
  // 3. Positions: zeroed pages (a windowed group's leading ones released), then the stored rows.
  std::vector<int32_t> tokens(n);
  if (n != 0) std::memcpy(tokens.data(), p.tokens.data(), p.tokens.size());
  Context ctx = cache.NewContext();
  LLAMAY_RETURN_IF_ERROR(ctx.Append(tokens));
  internal::ContextState* s = ctx.s_;
  const StateGroups& groups = cache.groups();
  const size_t P = layout.page_tokens;
  const uint32_t elems = layout.row_elems();
  const size_t disk_row = groups.attention.empty() ? 0 : RowBytes(in.precision, elems);
  std::vector<float> scratch(elems);
  const uint8_t* src = p.kv.data();
  for (size_t g = 0; g < groups.attention.size(); ++g) {
    const uint64_t first = FirstStored(groups.attention[g], n);
    std::vector<internal::Page*> drop;
    for (size_t i = 0; i < first / P; ++i) {
      drop.push_back(s->pages[g][i]);
      s->pages[g][i] = nullptr;
    }
    cache.ReleasePages(drop);
    s->floor[g] = first;
    const uint32_t n_layers = static_cast<uint32_t>(groups.attention[g].layers.size());
    for (uint64_t pos = first; pos < n; ++pos)
      for (uint32_t i = 0; i < n_layers; ++i)
        for (KvKind kind : {KvKind::kKey, KvKind::kValue}) {
          internal::TranscodeRow(in.precision, src, layout.precision, elems,
                                 s->pages[g][pos / P]->data + layout.RowOffset(i, kind, static_cast<uint32_t>(pos % P)),
                                 scratch.data());
          src += disk_row;
        }
  }
  // 4. The recurrent state and the checkpoints.
  if (slot != 0) {
    const uint8_t* state = p.state.data() + 8;
    const uint32_t layers = layout.n_layers - layout.n_attention_layers();
    if (in.state_position != 0 || std::any_of(state, state + slot, [](uint8_t b) { return b != 0; })) {
      LLAMAY_ASSIGN_OR_RETURN(uint8_t * live, ctx.MutableState());
      WidenSlot(state, file_layer, live, layout.recurrent_layer_bytes, layers);
      LLAMAY_RETURN_IF_ERROR(ctx.CommitState(in.state_position));
    }
    for (uint64_t i = 0; i < in.n_checkpoints; ++i) {
      const uint8_t* c = &p.checkpoints[8 + i * (8 + slot)];
      LLAMAY_ASSIGN_OR_RETURN(internal::Page * page,
                              cache.AllocatePage(layout.recurrent_bytes(), /*zero=*/false, /*state=*/true));
      WidenSlot(c + 8, file_layer, page->data, layout.recurrent_layer_bytes, layers);
      s->checkpoints.push_back({U64(c), page});
    }
  }
  if (logits != nullptr) {
    logits->resize(in.n_logits);
    if (in.n_logits != 0) std::memcpy(logits->data(), p.logits.data() + 8, 4 * in.n_logits);
  }
  return ctx;
}

}  // namespace llamay::kv
