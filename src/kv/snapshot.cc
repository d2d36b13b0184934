#include "kv/snapshot.h"

#include <cstring>
#include <mutex>
#include <shared_mutex>

#include "base/crc32c.h"
#include "kv/internal.h"
#include "kv/row_codec.h"

namespace llamay::kv {
namespace {

constexpr size_t kHeaderBytes = 80;
constexpr size_t kSectionEntryBytes = 24;
constexpr uint32_t kMaxSections = 16;
constexpr uint32_t kSectionTokens = 1;
constexpr uint32_t kSectionKv = 2;
constexpr uint32_t kSectionRequired = 1;  // section flag: a reader that does not know the kind must refuse
constexpr size_t kFlushBytes = size_t{1} << 20;
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
// A validated view of a snapshot's bytes.
struct Parsed {
  SnapshotInfo info;
  std::span<const uint8_t> tokens;  // int32 per position
  std::span<const uint8_t> kv;      // [pos][layer][k|v][row] at info.precision
};

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

Result<Parsed> Parse(std::span<const uint8_t> b) {
  const size_t size = b.size();
  if (size < sizeof(kSnapshotMagic)) {
    if (std::memcmp(b.data(), kSnapshotMagic, size) == 0)
      return SnapError(SnapshotError::kTruncated, "only " + std::to_string(size) + " bytes");
    return SnapError(SnapshotError::kBadMagic, "not a llamay snapshot (bad magic)");
  }
  if (std::memcmp(b.data(), kSnapshotMagic, sizeof(kSnapshotMagic)) != 0)
    return SnapError(SnapshotError::kBadMagic, "not a llamay snapshot (bad magic)");
  if (size < 12) return SnapError(SnapshotError::kTruncated, "ends inside the header");
  Parsed out;
  SnapshotInfo& in = out.info;
  in.version = U32(&b[8]);
  if (in.version != kSnapshotVersion)
    return SnapError(SnapshotError::kUnsupportedVersion,
                     "format version " + std::to_string(in.version) + "; this build reads version " +
                         std::to_string(kSnapshotVersion));
  if (size < kHeaderBytes) return SnapError(SnapshotError::kTruncated, "ends inside the header");
  in.n_layers = U32(&b[16]);
  in.n_kv_heads = U32(&b[20]);
  in.head_dim = U32(&b[24]);
  const uint32_t precision = U32(&b[28]);
  LLAMAY_RETURN_IF_ERROR(CheckGeometry(in.n_layers, in.n_kv_heads, in.head_dim, precision));
  in.precision = static_cast<KvPrecision>(precision);
  in.n_positions = U64(&b[32]);
  if (in.n_positions > kMaxPositions)
    return SnapError(SnapshotError::kBadLength, "declares " + std::to_string(in.n_positions) +
                                                    " positions; the limit is " + std::to_string(kMaxPositions));
  const uint32_t n_sections = U32(&b[40]);
  if (n_sections == 0 || n_sections > kMaxSections)
    return SnapError(SnapshotError::kBadLength, "declares " + std::to_string(n_sections) + " sections");
  std::memcpy(in.weights.data(), &b[48], 32);
  const size_t table_end = kHeaderBytes + kSectionEntryBytes * n_sections;
  if (size < table_end) return SnapError(SnapshotError::kTruncated, "ends inside the section table");

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
  const uint32_t want_crc = U32(&b[total - 4]);
  const uint32_t got_crc = Crc32c(b.data(), total - 4);
  if (want_crc != got_crc) return SnapError(SnapshotError::kChecksum, "checksum mismatch (damaged file)");
  in.file_bytes = total;
  // Locate the two known sections.
  offset = table_end;
  for (uint32_t i = 0; i < n_sections; ++i) {
    const uint8_t* e = &b[kHeaderBytes + kSectionEntryBytes * i];
    const uint64_t sz = U64(e + 16);
    if (U32(e) == kSectionTokens) out.tokens = b.subspan(offset, sz);
    if (U32(e) == kSectionKv) out.kv = b.subspan(offset, sz);
    offset += sz;
  }
  return out;
}

}  // namespace

// Reaches into Context and Cache internals (friend of both).
class SnapshotCodec {
 public:
  static Status Write(const Context& ctx, const Digest& weights, ByteSink& sink, const SnapshotOptions& opt);
  static Result<Context> Restore(Cache& cache, std::span<const uint8_t> bytes, const Digest& weights);
};

Status SnapshotCodec::Write(const Context& ctx, const Digest& weights, ByteSink& sink,
                            const SnapshotOptions& opt) {
  if (!ctx.valid()) return InvalidArgumentError("snapshot: empty context handle");
  const internal::ContextState* s = ctx.s_;
  const KvLayout& layout = s->cache->layout();
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
  const uint64_t tokens_off = kHeaderBytes + 2 * kSectionEntryBytes;
  const uint64_t tokens_bytes = n * 4;
  const uint64_t kv_bytes = n * layout.n_layers * 2 * disk_row;
  uint8_t head[tokens_off] = {};
  size_t at = 0;
  auto put = [&](const void* v, size_t len) {
    std::memcpy(head + at, v, len);
    at += len;
  };
  auto put32 = [&](uint32_t v) { put(&v, 4); };
  auto put64 = [&](uint64_t v) { put(&v, 8); };
  put(kSnapshotMagic, 8);
  put32(kSnapshotVersion);
  put32(0);  // flags
  put32(layout.n_layers);
  put32(layout.n_kv_heads);
  put32(layout.head_dim);
  put32(static_cast<uint32_t>(disk));
  put64(n);
  put32(2);  // sections
  put32(0);  // reserved
  put(weights.data(), weights.size());
  // Section flags 0: every reader knows the two base sections. kSectionRequired is for later kinds.
  put32(kSectionTokens);
  put32(0);
  put64(tokens_off);
  put64(tokens_bytes);
  put32(kSectionKv);
  put32(0);
  put64(tokens_off + tokens_bytes);
  put64(kv_bytes);
  LLAMAY_CHECK(at == tokens_off);
  buf.resize(tokens_off + tokens_bytes);
  std::memcpy(buf.data(), head, tokens_off);
  if (tokens_bytes != 0) std::memcpy(buf.data() + tokens_off, s->tokens.data(), tokens_bytes);

  std::vector<float> scratch(elems);
  const size_t P = layout.page_tokens;
  for (uint64_t pos = 0; pos < n; ++pos) {
    const uint8_t* page = s->pages[pos / P]->data;
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

Result<Context> SnapshotCodec::Restore(Cache& cache, std::span<const uint8_t> bytes, const Digest& weights) {
  LLAMAY_ASSIGN_OR_RETURN(Parsed p, Parse(bytes));
  const SnapshotInfo& in = p.info;
  if (in.weights != weights)
    return SnapError(SnapshotError::kWrongModel,
                     "computed by other weights (snapshot " + DigestHex(in.weights).substr(0, 16) +
                         ", this model " + DigestHex(weights).substr(0, 16) + ")");
  const KvLayout& layout = cache.layout();
  if (layout.n_layers != in.n_layers || layout.n_kv_heads != in.n_kv_heads || layout.head_dim != in.head_dim)
    return SnapError(SnapshotError::kGeometry,
                     "geometry " + std::to_string(in.n_layers) + " layers x " + std::to_string(in.n_kv_heads) +
                         " kv heads x " + std::to_string(in.head_dim) + " does not fit this cache (" +
                         layout.ToString() + ")");
  // Token ids first, into a plain buffer whose size the checks above bounded.
  std::vector<int32_t> tokens(in.n_positions);
  if (!tokens.empty()) std::memcpy(tokens.data(), p.tokens.data(), p.tokens.size());
  Context ctx = cache.NewContext();
  // All-or-nothing; ctx closes on failure. Every row of the new positions is written below.
  LLAMAY_RETURN_IF_ERROR(ctx.AppendImpl(tokens, /*caller_overwrites=*/true));
  const uint32_t elems = layout.row_elems();
  const size_t disk_row = RowBytes(in.precision, elems);
  const size_t P = layout.page_tokens;
  std::vector<float> scratch(elems);
  const uint8_t* src = p.kv.data();
  // Fresh pages, private to ctx (refcount 1): filled in place.
  for (uint64_t pos = 0; pos < in.n_positions; ++pos) {
    uint8_t* page = ctx.s_->pages[pos / P]->data;
    for (uint32_t layer = 0; layer < layout.n_layers; ++layer) {
      for (KvKind kind : {KvKind::kKey, KvKind::kValue}) {
        internal::TranscodeRow(in.precision, src, layout.precision, elems,
                               page + layout.RowOffset(layer, kind, static_cast<uint32_t>(pos % P)),
                               scratch.data());
        src += disk_row;
      }
    }
  }
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
  p.info.tokens.resize(p.info.n_positions);
  if (!p.info.tokens.empty()) std::memcpy(p.info.tokens.data(), p.tokens.data(), p.tokens.size());
  return p.info;
}

Result<Context> RestoreSnapshot(Cache& cache, std::span<const uint8_t> bytes, const Digest& weights) {
  return SnapshotCodec::Restore(cache, bytes, weights);
}

Result<Context> LoadSnapshot(Cache& cache, const std::string& path, const Digest& weights) {
  LLAMAY_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadFile(path));
  auto r = RestoreSnapshot(cache, bytes, weights);
  if (!r.ok()) return r.status().WithContext(path);
  return r;
}

}  // namespace llamay::kv
