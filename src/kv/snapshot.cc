#include "kv/snapshot.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <shared_mutex>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "base/crc32c.h"
#include "kv/internal.h"
#include "kv/row_codec.h"
#include "kv/snapshot_internal.h"

namespace llamay::kv {
namespace snapshot_detail {

// Restore checks the KV section's CRC a chunk at a time, just before copying the chunk out of the cache it
// was read into: a multiple of the CRC's three-lane block (3 x 8 KiB), about the size of L1 (measured: 48
// KiB chunks beat 192 KiB ones by a few percent; larger ones fall out of L2).
constexpr size_t kCrcChunk = 2 * 3 * 8192;
// Restores of at least this many KV bytes write the pages with streaming stores: the pages are written once
// and are larger than the caches, so reading each line into the cache before overwriting it only costs
// bandwidth.
constexpr size_t kStreamBytes = size_t{1} << 20;
// Status::detail() of a snapshot refusal: this base plus the SnapshotError.
constexpr int kSnapshotDetailBase = 1000;

Status SnapError(SnapshotError e, std::string msg) {
  StatusCode code = StatusCode::kInvalidArgument;
  switch (e) {
    case SnapshotError::kWrongModel:
    case SnapshotError::kGeometry: code = StatusCode::kFailedPrecondition; break;
    case SnapshotError::kUnsupportedVersion: code = StatusCode::kUnimplemented; break;
    case SnapshotError::kTruncated:
    case SnapshotError::kChecksum: code = StatusCode::kDataLoss; break;
    default: break;
  }
  return Status(code, "snapshot: " + msg, kSnapshotDetailBase + static_cast<int>(e));
}

uint32_t U32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t U64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

Status ChecksumError() { return SnapError(SnapshotError::kChecksum, "checksum mismatch (damaged file)"); }

Status VerifyChecksum(std::span<const uint8_t> b, const Parsed& p) {
  if (Crc32c(b.data(), p.info.file_bytes - 4) != p.want_crc) return ChecksumError();
  return Status::Ok();
}

// memcpy, with streaming (non-temporal) stores when `stream` and the destination allows. The caller issues
// the store fence (StreamFence) before the data is published.
inline void CopyBytes(uint8_t* dst, const uint8_t* src, size_t n, bool stream) {
#if defined(__SSE2__)
  if (stream && reinterpret_cast<uintptr_t>(dst) % 16 == 0) {
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
      const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
      const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
    }
    for (; i + 16 <= n; i += 16)
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    if (i < n) std::memcpy(dst + i, src + i, n - i);
    return;
  }
#else
  (void)stream;
#endif
  std::memcpy(dst, src, n);
}

inline void StreamFence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

Status CheckGeometry(uint32_t layers, uint32_t heads, uint32_t head_dim, uint32_t precision) {
  if (layers == 0 || layers > 4096)
    return SnapError(SnapshotError::kBadLength, "declares " + std::to_string(layers) + " layers");
  if (heads == 0 || heads > 4096)
    return SnapError(SnapshotError::kBadLength, "declares " + std::to_string(heads) + " kv heads");
  if (head_dim == 0 || head_dim > 65536)
    return SnapError(SnapshotError::kBadLength, "declares head dim " + std::to_string(head_dim));
  if (precision > 2)
    return SnapError(SnapshotError::kBadLength, "declares unknown precision " + std::to_string(precision));
  if (precision == static_cast<uint32_t>(KvPrecision::kQ8_0) && (heads * head_dim) % 32 != 0)
    return SnapError(SnapshotError::kBadLength, "q8_0 rows must be a multiple of 32 values");
  return Status::Ok();
}

Status ReadHeader(std::span<const uint8_t> b, SnapshotInfo* info, uint32_t* n_sections) {
  const size_t size = b.size();
  if (size < sizeof(kSnapshotMagic)) {
    // An empty span may have a null data(), which memcmp must not see even for 0 bytes.
    if (size == 0 || std::memcmp(b.data(), kSnapshotMagic, size) == 0)
      return SnapError(SnapshotError::kTruncated, "only " + std::to_string(size) + " bytes");
    return SnapError(SnapshotError::kBadMagic, "not a llamay snapshot (bad magic)");
  }
  if (std::memcmp(b.data(), kSnapshotMagic, sizeof(kSnapshotMagic)) != 0)
    return SnapError(SnapshotError::kBadMagic, "not a llamay snapshot (bad magic)");
  if (size < 12) return SnapError(SnapshotError::kTruncated, "ends inside the header");
  SnapshotInfo& in = *info;
  in.version = U32(&b[8]);
  if (in.version != 1 && in.version != kSnapshotVersion)
    return SnapError(SnapshotError::kUnsupportedVersion,
                     "format version " + std::to_string(in.version) + "; this build reads versions 1 to " +
                         std::to_string(kSnapshotVersion));
  if (size < kHeaderBytes) return SnapError(SnapshotError::kTruncated, "ends inside the header");
  in.n_layers = U32(&b[16]);
  in.n_kv_heads = U32(&b[20]);
  in.head_dim = U32(&b[24]);
  const uint32_t precision = U32(&b[28]);
  if (in.version == 1) {
    LLAMAY_RETURN_IF_ERROR(CheckGeometry(in.n_layers, in.n_kv_heads, in.head_dim, precision));
  } else if (precision > 2 || in.n_layers == 0 || in.n_layers > 4096) {  // the rest once the layer map is read
    return SnapError(SnapshotError::kBadLength, "declares " + std::to_string(in.n_layers) +
                                                    " layers at precision " + std::to_string(precision));
  }
  in.precision = static_cast<KvPrecision>(precision);
  in.n_positions = U64(&b[32]);
  if (in.n_positions > kMaxPositions)
    return SnapError(SnapshotError::kBadLength, "declares " + std::to_string(in.n_positions) +
                                                    " positions; the limit is " + std::to_string(kMaxPositions));
  *n_sections = U32(&b[40]);
  if (*n_sections == 0 || *n_sections > kMaxSections)
    return SnapError(SnapshotError::kBadLength, "declares " + std::to_string(*n_sections) + " sections");
  std::memcpy(in.weights.data(), &b[48], 32);
  if (size < kHeaderBytes + kSectionEntryBytes * *n_sections)
    return SnapError(SnapshotError::kTruncated, "ends inside the section table");
  return Status::Ok();
}

Result<Parsed> Parse(std::span<const uint8_t> b) {
  const size_t size = b.size();
  Parsed out;
  SnapshotInfo& in = out.info;
  uint32_t n_sections = 0;
  LLAMAY_RETURN_IF_ERROR(ReadHeader(b, &in, &n_sections));
  if (in.version == 2) return ParseV2(b, n_sections, std::move(out));
  const size_t table_end = kHeaderBytes + kSectionEntryBytes * n_sections;

  // Every length is derived from the geometry; nothing trusts a size it has not recomputed.
  const uint64_t tokens_bytes = in.n_positions * 4;
  const uint64_t kv_bytes = in.n_positions * in.n_layers * 2 *
                            uint64_t{RowBytes(in.precision, in.n_kv_heads * in.head_dim)};  // < 2^64
  if (in.n_positions != 0 && kv_bytes / in.n_positions / in.n_layers / 2 !=
                                 RowBytes(in.precision, in.n_kv_heads * in.head_dim))
    return SnapError(SnapshotError::kBadLength, "declared KV size overflows");
  uint64_t offset = table_end;
  bool have_tokens = false, have_kv = false;
  for (uint32_t i = 0; i < n_sections; ++i) {
    const uint8_t* e = &b[kHeaderBytes + kSectionEntryBytes * i];
    const uint32_t kind = U32(e), flags = U32(e + 4);
    const uint64_t off = U64(e + 8), sz = U64(e + 16);
    if (off != offset)
      return SnapError(SnapshotError::kBadLength, "section " + std::to_string(i) + " at offset " +
                                                      std::to_string(off) + ", expected " + std::to_string(offset));
    if (sz > (uint64_t{1} << 56))
      return SnapError(SnapshotError::kBadLength, "section " + std::to_string(i) + " declares " +
                                                      std::to_string(sz) + " bytes");
    if (kind == kSectionTokens || kind == kSectionKv) {
      bool& seen = kind == kSectionTokens ? have_tokens : have_kv;
      const uint64_t want = kind == kSectionTokens ? tokens_bytes : kv_bytes;
      if (seen) return SnapError(SnapshotError::kBadLength, "section kind " + std::to_string(kind) + " twice");
      if (sz != want)
        return SnapError(SnapshotError::kBadLength, "section kind " + std::to_string(kind) + " of " +
                                                        std::to_string(sz) + " bytes; the header implies " +
                                                        std::to_string(want));
      seen = true;
    } else if (flags & kSectionRequired) {
      return SnapError(SnapshotError::kUnsupportedVersion,
                       "requires section kind " + std::to_string(kind) + ", unknown to this build");
    }
    offset += sz;
  }
  if (!have_tokens || !have_kv)
    return SnapError(SnapshotError::kBadLength, "missing the tokens or KV section");
  const uint64_t total = offset + 4;
  if (size < total)
    return SnapError(SnapshotError::kTruncated,
                     std::to_string(size) + " bytes; the header declares " + std::to_string(total));
  if (size > total)
    return SnapError(SnapshotError::kBadLength, std::to_string(size - total) + " bytes after the checksum");
  out.want_crc = U32(&b[total - 4]);
  in.file_bytes = total;
  // Locate the two known sections.
  offset = table_end;
  for (uint32_t i = 0; i < n_sections; ++i) {
    const uint8_t* e = &b[kHeaderBytes + kSectionEntryBytes * i];
    const uint64_t sz = U64(e + 16);
    if (U32(e) == kSectionTokens) out.tokens = b.subspan(offset, sz);
    if (U32(e) == kSectionKv) {
      out.kv = b.subspan(offset, sz);
      out.kv_offset = offset;
    }
    offset += sz;
  }
  return out;
}

void PutHeader(std::vector<uint8_t>* buf, uint32_t version, const KvLayout& layout, KvPrecision disk, uint64_t n,
               const Digest& weights, std::vector<Section>* sections) {
  auto put = [&](const void* v, size_t len) {
    const auto* p = static_cast<const uint8_t*>(v);
    buf->insert(buf->end(), p, p + len);
  };
  auto put32 = [&](uint32_t v) { put(&v, 4); };
  auto put64 = [&](uint64_t v) { put(&v, 8); };
  put(kSnapshotMagic, 8);
  put32(version);
  put32(0);  // flags
  put32(layout.n_layers);
  put32(layout.n_kv_heads);
  put32(layout.head_dim);
  put32(static_cast<uint32_t>(disk));
  put64(n);
  put32(static_cast<uint32_t>(sections->size()));
  put32(0);  // reserved
  put(weights.data(), weights.size());
  uint64_t offset = kHeaderBytes + kSectionEntryBytes * sections->size();
  for (Section& sec : *sections) {
    sec.offset = offset;
    offset += sec.size;
    put32(sec.kind);
    put32(sec.flags);
    put64(sec.offset);
    put64(sec.size);
  }
}

bool OneFullGroup(const Cache& cache) {
  const StateGroups& g = cache.groups();
  return !g.has_recurrent() && g.attention.size() == 1 && g.attention[0].window == 0;
}

}  // namespace snapshot_detail

using namespace snapshot_detail;  // NOLINT: this file's own helpers

Status SnapshotCodec::Write(const Context& ctx, const Digest& weights, ByteSink& sink,
                            const SnapshotOptions& opt) {
  if (!ctx.valid()) return InvalidArgumentError("snapshot: empty context handle");
  const internal::ContextState* s = ctx.s_;
  const KvLayout& layout = s->cache->layout();
  // Version 1 is written whenever it can hold everything (so such files read in older builds too).
  if (!OneFullGroup(*s->cache) || opt.checkpoints || !opt.logits.empty() || opt.kv_checksums)
    return WriteV2(ctx, weights, sink, opt);
  const KvPrecision disk = opt.native_precision ? layout.precision : KvPrecision::kF32;
  const uint32_t elems = layout.row_elems();
  const size_t disk_row = RowBytes(disk, elems);
  std::shared_lock l(s->mu);
  const uint64_t n = s->tokens.size();

  std::vector<uint8_t> buf;
  buf.reserve(kFlushBytes + 2 * layout.n_layers * disk_row);
  uint32_t crc = 0;
  auto flush = [&]() -> Status {
    crc = Crc32cExtend(crc, buf.data(), buf.size());
    Status st = sink.Append(buf.data(), buf.size());
    buf.clear();
    return st;
  };
  const uint64_t tokens_bytes = n * 4;
  const uint64_t kv_bytes = n * layout.n_layers * 2 * disk_row;
  // Section flags 0: every reader knows the two base sections. kSectionRequired is for later kinds.
  std::vector<Section> secs = {{kSectionTokens, 0, 0, tokens_bytes}, {kSectionKv, 0, 0, kv_bytes}};
  PutHeader(&buf, 1, layout, disk, n, weights, &secs);
  const uint64_t tokens_off = buf.size();
  buf.resize(tokens_off + tokens_bytes);
  if (tokens_bytes != 0) std::memcpy(buf.data() + tokens_off, s->tokens.data(), tokens_bytes);

  std::vector<float> scratch(elems);
  const size_t P = layout.page_tokens;
  for (uint64_t pos = 0; pos < n; ++pos) {
    const uint8_t* page = s->pages[0][pos / P]->data;
    for (uint32_t layer = 0; layer < layout.n_layers; ++layer) {
      for (KvKind kind : {KvKind::kKey, KvKind::kValue}) {
        const size_t at = buf.size();
        buf.resize(at + disk_row);
        internal::TranscodeRow(layout.precision,
                               page + layout.RowOffset(layer, kind, static_cast<uint32_t>(pos % P)), disk,
                               elems, buf.data() + at, scratch.data());
      }
    }
    if (buf.size() >= kFlushBytes) LLAMAY_RETURN_IF_ERROR(flush());
  }
  LLAMAY_RETURN_IF_ERROR(flush());
  uint8_t trailer[4];
  std::memcpy(trailer, &crc, 4);
  return sink.Append(trailer, 4);
}

bool SnapshotCodec::RoomWithoutEviction(Cache& cache, size_t pages) {
  std::lock_guard l(cache.pool_mu_);
  if (cache.arena_ != nullptr && cache.arena_free_.size() < pages) return false;
  return cache.options_.max_bytes == 0 ||
         cache.bytes_live_ + pages * cache.groups_.attention[0].page_bytes <= cache.options_.max_bytes;
}

namespace snapshot_detail {

KvRowCopier::KvRowCopier(const KvLayout& layout, KvPrecision disk, uint64_t kv_bytes)
    : layout_(layout),
      disk_(disk),
      elems_(layout.row_elems()),
      disk_row_(RowBytes(disk, elems_)),
      pos_bytes_(size_t{layout.n_layers} * 2 * disk_row_),
      same_precision_(disk == layout.precision),
      stream_(same_precision_ && kv_bytes >= kStreamBytes),
      row_off_(size_t{layout.n_layers} * 2),
      scratch_(elems_) {
  for (uint32_t layer = 0; layer < layout.n_layers; ++layer)
    for (KvKind kind : {KvKind::kKey, KvKind::kValue})
      row_off_[2 * layer + static_cast<size_t>(kind)] = layout.RowOffset(layer, kind, 0);
}

void KvRowCopier::Copy(std::span<internal::Page* const> pages, const uint8_t* src, uint64_t from, uint64_t to) {
  const size_t P = layout_.page_tokens;
  const size_t cache_row = layout_.row_bytes();
  for (uint64_t pos = from; pos < to; ++pos) {
    uint8_t* page = pages[pos / P]->data + (pos % P) * cache_row;
    for (size_t r = 0; r < row_off_.size(); ++r, src += disk_row_) {
      if (same_precision_) {
        CopyBytes(page + row_off_[r], src, disk_row_, stream_);
      } else {
        internal::TranscodeRow(disk_, src, layout_.precision, elems_, page + row_off_[r], scratch_.data());
      }
    }
  }
}

void KvRowCopier::Fence() const {
  if (stream_) StreamFence();
}

bool OneFullGroupFile(const SnapshotInfo& in) {
  if (in.version == 1) return true;
  if (in.recurrent_layer_bytes != 0) return false;
  for (const LayerSpec& l : in.layer_specs)
    if (l.kind != LayerKind::kAttention || l.window != 0) return false;
  return true;
}

void CopyLogits(const Parsed& p, std::vector<float>* logits) {
  if (logits == nullptr) return;
  logits->resize(p.info.n_logits);
  if (p.info.n_logits != 0) std::memcpy(logits->data(), p.logits.data() + 8, 4 * p.info.n_logits);
}

}  // namespace snapshot_detail

Result<Context> SnapshotCodec::NewRestoredContext(Cache& cache, std::span<const uint8_t> tokens_bytes) {
  std::vector<int32_t> tokens(tokens_bytes.size() / 4);
  if (!tokens.empty()) std::memcpy(tokens.data(), tokens_bytes.data(), tokens_bytes.size());
  Context ctx = cache.NewContext();
  // All-or-nothing; ctx closes on failure. The caller writes every row of the new positions.
  LLAMAY_RETURN_IF_ERROR(ctx.AppendImpl(tokens, /*caller_overwrites=*/true));
  return ctx;
}

std::span<internal::Page* const> SnapshotCodec::FullGroupPages(const Context& ctx) { return ctx.s_->pages.flat(); }

// Restore reads the KV section once. When nothing could make the result a refusal other than damage (the
// digest and geometry match, and the cache has room for the pages without evicting anything), it allocates
// the context first and checks the CRC a chunk at a time as it copies the chunk into the pages, so the
// bytes come from memory once instead of twice; a mismatch then releases the pages and refuses the file.
// Otherwise it checks the whole CRC first (a damaged digest or geometry field must read as damage, and a
// damaged file must not evict anything), then copies. (Room is checked before allocating: an allocation by
// another thread in between can still make this one evict, as it could any allocation.) A version 2 file
// of a pure full-attention layout (one that carries logits) takes the same path; other version 2 layouts
// go through RestoreV2.
Result<Context> SnapshotCodec::Restore(Cache& cache, std::span<const uint8_t> bytes, const Digest& weights,
                                       std::vector<float>* logits) {
  LLAMAY_ASSIGN_OR_RETURN(Parsed p, Parse(bytes));
  if (p.info.version == 2 && (!OneFullGroupFile(p.info) || !OneFullGroup(cache)))
    return RestoreV2(cache, bytes, p, weights, logits);
  const SnapshotInfo& in = p.info;
  const KvLayout& layout = cache.layout();
  const bool same_model = in.weights == weights;
  const bool geometry_fits =
      layout.n_layers == in.n_layers && layout.n_kv_heads == in.n_kv_heads && layout.head_dim == in.head_dim &&
      OneFullGroup(cache);
  const size_t P = layout.page_tokens;
  const bool fused = same_model && geometry_fits && RoomWithoutEviction(cache, (in.n_positions + P - 1) / P);
  if (!fused) {
    LLAMAY_RETURN_IF_ERROR(VerifyChecksum(bytes, p));
    if (!same_model)
      return SnapError(SnapshotError::kWrongModel,
                       "computed by other weights (snapshot " + DigestHex(in.weights).substr(0, 16) +
                           ", this model " + DigestHex(weights).substr(0, 16) + ")");
    if (!geometry_fits)
      return SnapError(SnapshotError::kGeometry,
                       "geometry " + std::to_string(in.n_layers) + " layers x " + std::to_string(in.n_kv_heads) +
                           " kv heads x " + std::to_string(in.head_dim) + " does not fit this cache (" +
                           layout.ToString() + ")");
  }
  auto made = NewRestoredContext(cache, p.tokens);
  if (!made.ok()) {
    // Memory taken by others since the check: damage still outranks the allocation failure.
    if (fused) LLAMAY_RETURN_IF_ERROR(VerifyChecksum(bytes, p));
    return made.status();
  }
  Context ctx = std::move(*made);
  KvRowCopier copier(layout, in.precision, p.kv.size());
  const auto pages = FullGroupPages(ctx);
  const uint8_t* kv = p.kv.data();
  const size_t pos_bytes = copier.position_bytes();
  if (!fused) {
    // The whole CRC was verified above; the chunk CRCs (when the file has them) agree with it or the file
    // is refused the same way.
    if (!p.kv_checksums.empty()) {
      if (Status st = VerifyKvChecksums(p.kv_checksums, p.kv); !st.ok()) {
        ctx.Close();
        return st;
      }
    }
    copier.Copy(pages, kv, 0, in.n_positions);
  } else {
    // CRC of everything before the KV section, then of the section a chunk at a time, each chunk's whole
    // positions copied right after, then of whatever follows the section.
    uint32_t crc = Crc32c(bytes.data(), p.kv_offset);
    uint64_t checked = 0, copied = 0;  // bytes of the section, positions
    while (checked < p.kv.size()) {
      const uint64_t n = std::min<uint64_t>(kCrcChunk, p.kv.size() - checked);
      crc = Crc32cExtend(crc, kv + checked, n);
      checked += n;
      const uint64_t ready = checked / pos_bytes;
      copier.Copy(pages, kv + copied * pos_bytes, copied, ready);
      copied = ready;
    }
    crc = Crc32cExtend(crc, kv + p.kv.size(), in.file_bytes - 4 - p.kv_offset - p.kv.size());
    if (crc != p.want_crc || (!p.kv_checksums.empty() && !VerifyKvChecksums(p.kv_checksums, p.kv).ok())) {
      copier.Fence();
      ctx.Close();
      return ChecksumError();
    }
  }
  copier.Fence();
  CopyLogits(p, logits);
  return ctx;
}

std::string_view SnapshotErrorName(SnapshotError e) {
  switch (e) {
    case SnapshotError::kNone: return "none";
    case SnapshotError::kWrongModel: return "wrong_model";
    case SnapshotError::kBadMagic: return "bad_magic";
    case SnapshotError::kUnsupportedVersion: return "unsupported_version";
    case SnapshotError::kTruncated: return "truncated";
    case SnapshotError::kChecksum: return "checksum_mismatch";
    case SnapshotError::kBadLength: return "bad_length";
    case SnapshotError::kGeometry: return "geometry_mismatch";
  }
  return "unknown";
}

SnapshotError SnapshotErrorOf(const Status& s) {
  const int e = s.detail() - kSnapshotDetailBase;
  if (s.ok() || e < 1 || e > static_cast<int>(SnapshotError::kGeometry)) return SnapshotError::kNone;
  return static_cast<SnapshotError>(e);
}

Status WriteSnapshot(const Context& ctx, const Digest& weights, ByteSink& sink, const SnapshotOptions& options) {
  return SnapshotCodec::Write(ctx, weights, sink, options);
}

Result<std::vector<uint8_t>> SnapshotToBytes(const Context& ctx, const Digest& weights,
                                             const SnapshotOptions& options) {
  std::vector<uint8_t> out;
  VectorSink sink(&out);
  LLAMAY_RETURN_IF_ERROR(WriteSnapshot(ctx, weights, sink, options));
  return out;
}

Status SaveSnapshot(const Context& ctx, const Digest& weights, const std::string& path,
                    const SnapshotOptions& options) {
  return WriteFileAtomic(path, [&](ByteSink& sink) { return WriteSnapshot(ctx, weights, sink, options); });
}

Result<SnapshotInfo> InspectSnapshot(std::span<const uint8_t> bytes) {
  LLAMAY_ASSIGN_OR_RETURN(Parsed p, Parse(bytes));
  LLAMAY_RETURN_IF_ERROR(VerifyChecksum(bytes, p));
  p.info.tokens.resize(p.info.n_positions);
  if (!p.info.tokens.empty()) std::memcpy(p.info.tokens.data(), p.tokens.data(), p.tokens.size());
  p.info.kv_offset = p.kv_offset;
  p.info.kv_bytes = p.kv.size();
  if (OneFullGroupFile(p.info) && p.info.n_positions != 0)
    p.info.kv_position_bytes = p.kv.size() / p.info.n_positions;
  return p.info;
}

Result<Context> RestoreSnapshot(Cache& cache, std::span<const uint8_t> bytes, const Digest& weights,
                                std::vector<float>* logits) {
  return SnapshotCodec::Restore(cache, bytes, weights, logits);
}

// The file is mapped rather than read: the page cache's pages are mapped in one call (MAP_POPULATE), where
// reading into a fresh buffer would first fault in and zero as many new pages as the file has (most of a
// restore's time). Anything the mapping cannot serve (errors included) goes through ReadFile, which reports
// them. Like any reader of a mapped file, a restore racing a truncation of the same file in place would
// fault; snapshots are only ever replaced by rename (SaveSnapshot), which leaves a mapped file intact.
Result<Context> LoadSnapshot(Cache& cache, const std::string& path, const Digest& weights,
                             std::vector<float>* logits) {
#if defined(MAP_POPULATE)
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    struct stat st;
    void* map = MAP_FAILED;
    size_t size = 0;
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
      size = static_cast<size_t>(st.st_size);
      map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    }
    ::close(fd);
    if (map != MAP_FAILED) {
      auto r = RestoreSnapshot(cache, std::span(static_cast<const uint8_t*>(map), size), weights, logits);
      ::munmap(map, size);
      if (!r.ok()) return r.status().WithContext(path);
      return r;
    }
  }
#endif
  LLAMAY_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadFile(path));
  auto r = RestoreSnapshot(cache, bytes, weights, logits);
  if (!r.ok()) return r.status().WithContext(path);
  return r;
}

}  // namespace llamay::kv
