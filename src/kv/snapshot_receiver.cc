// SnapshotReceiver: a snapshot restored from bytes that arrive in pieces (snapshot.h).
#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "base/crc32c.h"
#include "kv/internal.h"
#include "kv/snapshot.h"
#include "kv/snapshot_internal.h"

namespace llamay::kv {

using namespace snapshot_detail;  // NOLINT: the codec's own helpers

namespace {

// The streaming path holds everything before the KV section in memory: at most this much (the tokens of
// 16M positions take 64 MiB; anything larger is buffered whole and left to RestoreSnapshot's checks).
constexpr uint64_t kMaxPrefix = uint64_t{1} << 27;
// Declared files above this size are never mapped for the final length checks (buffered instead).
constexpr uint64_t kMaxMapped = uint64_t{1} << 40;

}  // namespace

struct SnapshotReceiver::Impl {
  enum class Mode { kHead, kKv, kTail, kBuffered, kFailed };

  Impl(Cache& c, const Digest& w) : cache(c), weights(w) {}

  Cache& cache;
  Digest weights;
  Mode mode = Mode::kHead;
  Status error;
  uint64_t received = 0;
  // kHead: every byte so far; then the bytes before the KV section.
  std::vector<uint8_t> head;
  // Known once the table has arrived.
  uint64_t total = 0, kv_offset = 0, kv_bytes = 0;
  // kKv.
  Context ctx;
  std::unique_ptr<KvRowCopier> copier;
  std::vector<uint8_t> carry;  // a position's bytes split across pieces
  uint64_t positions_done = 0;
  uint32_t crc = 0;            // of every byte before the trailer, so far
  // A KV_CHECKSUMS section in the head: each chunk of the KV section checked as soon as it is complete.
  std::span<const uint8_t> kv_checksums;
  uint64_t kv_chunk = 0, chunk_filled = 0, chunk_index = 0, kv_checked = 0;
  uint32_t chunk_crc = 0;
  // kTail: the bytes after the KV section (the trailer included). kBuffered: the whole file.
  std::vector<uint8_t> tail;

  Status Fail(Status s) {
    if (ctx.valid()) ctx.Close();
    mode = Mode::kFailed;
    error = s;
    return s;
  }

  // The declared total size and the KV section's place, from the header and table in `head`; false when
  // the table does not allow the streaming path (the buffered path then reports whatever is wrong).
  bool Locate(uint32_t n_sections) {
    uint64_t offset = kHeaderBytes + kSectionEntryBytes * n_sections;
    bool have_kv = false;
    for (uint32_t i = 0; i < n_sections; ++i) {
      const uint8_t* e = &head[kHeaderBytes + kSectionEntryBytes * i];
      const uint64_t off = U64(e + 8), size = U64(e + 16);
      if (off != offset || size > (uint64_t{1} << 56)) return false;
      if (U32(e) == kSectionKv) {
        if (have_kv) return false;
        have_kv = true;
        kv_offset = off;
        kv_bytes = size;
      }
      offset += size;
    }
    total = offset + 4;
    return have_kv && kv_offset <= kMaxPrefix && total <= kMaxMapped;
  }

  // Whether the file can be streamed into this cache, once `head` holds everything before the KV section.
  bool Streamable(const SnapshotInfo& in, uint32_t n_sections) {
    const KvLayout& layout = cache.layout();
    if (!OneFullGroup(cache) || in.weights != weights) return false;
    if (in.n_layers != layout.n_layers || in.n_kv_heads != layout.n_kv_heads || in.head_dim != layout.head_dim)
      return false;
    if (!CheckGeometry(in.n_layers, in.n_kv_heads, in.head_dim, static_cast<uint32_t>(in.precision)).ok())
      return false;
    const uint64_t n = in.n_positions;
    if (kv_bytes != n * layout.n_layers * 2 * RowBytes(in.precision, layout.row_elems())) return false;
    bool have_tokens = false, have_layout = in.version == 1;
    for (uint32_t i = 0; i < n_sections; ++i) {
      const uint8_t* e = &head[kHeaderBytes + kSectionEntryBytes * i];
      const uint32_t kind = U32(e);
      const uint64_t off = U64(e + 8), size = U64(e + 16);
      if (kind == kSectionTokens) {
        if (size != 4 * n || off + size > kv_offset) return false;
        have_tokens = true;
      }
      if (kind == kSectionLayout && in.version == 2) {
        // The cache's own map: every layer full attention, no recurrent bytes.
        if (size != 8 * uint64_t{in.n_layers} + 8 || off + size > kv_offset) return false;
        for (uint64_t b = off; b < off + size; ++b)
          if (head[b] != 0) return false;
        have_layout = true;
      }
    }
    const size_t P = layout.page_tokens;
    return have_tokens && have_layout && SnapshotCodec::RoomWithoutEviction(cache, (n + P - 1) / P);
  }

  Status StartKv() {
    SnapshotInfo in;
    uint32_t n_sections = 0;
    LLAMAY_RETURN_IF_ERROR(ReadHeader(head, &in, &n_sections));
    if (!Streamable(in, n_sections)) return Buffer();
    std::span<const uint8_t> tokens;
    for (uint32_t i = 0; i < n_sections; ++i) {
      const uint8_t* e = &head[kHeaderBytes + kSectionEntryBytes * i];
      if (U32(e) == kSectionTokens) tokens = std::span(head).subspan(U64(e + 8), U64(e + 16));
    }
    for (uint32_t i = 0; i < n_sections; ++i) {
      const uint8_t* e = &head[kHeaderBytes + kSectionEntryBytes * i];
      if (U32(e) != kSectionKvChecksums || U64(e + 8) + U64(e + 16) > kv_offset) continue;
      const auto sec = std::span<const uint8_t>(head).subspan(U64(e + 8), U64(e + 16));
      if (in.version == 2 && CheckKvChecksums(sec, kv_bytes).ok()) {
        kv_checksums = sec;
        kv_chunk = U64(sec.data());
      }
    }
    auto made = SnapshotCodec::NewRestoredContext(cache, tokens);
    if (!made.ok()) return Buffer();  // memory taken since the check: the buffered path decides
    ctx = std::move(*made);
    copier = std::make_unique<KvRowCopier>(cache.layout(), in.precision, kv_bytes);
    crc = Crc32c(head.data(), head.size());
    mode = kv_bytes == 0 ? Mode::kTail : Mode::kKv;
    return Status::Ok();
  }

  // Gives up streaming: everything so far (and later) is kept for RestoreSnapshot.
  Status Buffer() {
    mode = Mode::kBuffered;
    tail = std::move(head);
    head.clear();
    return Status::Ok();
  }

  // With KV_CHECKSUMS: false once a completed chunk does not match its CRC.
  bool ChunksIntact(const uint8_t* p, size_t n) {
    if (kv_chunk == 0) return true;
    while (n > 0) {
      const size_t take = std::min<uint64_t>(n, kv_chunk - chunk_filled);
      chunk_crc = Crc32cExtend(chunk_crc, p, take);
      p += take;
      n -= take;
      chunk_filled += take;
      kv_checked += take;
      if (chunk_filled == kv_chunk || kv_checked == kv_bytes) {
        if (chunk_crc != U32(kv_checksums.data() + 16 + 4 * chunk_index)) return false;
        ++chunk_index;
        chunk_filled = 0;
        chunk_crc = 0;
      }
    }
    return true;
  }

  // KV bytes: whole positions into the pages, a split one through `carry`.
  void TakeKv(const uint8_t* p, size_t n) {
    crc = Crc32cExtend(crc, p, n);
    const size_t pos_bytes = copier->position_bytes();
    const auto pages = SnapshotCodec::FullGroupPages(ctx);
    if (!carry.empty()) {
      const size_t take = std::min(n, pos_bytes - carry.size());
      carry.insert(carry.end(), p, p + take);
      p += take;
      n -= take;
      if (carry.size() < pos_bytes) return;
      copier->Copy(pages, carry.data(), positions_done, positions_done + 1);
      ++positions_done;
      carry.clear();
    }
    const uint64_t whole = n / pos_bytes;
    copier->Copy(pages, p, positions_done, positions_done + whole);
    positions_done += whole;
    carry.assign(p + whole * pos_bytes, p + n);
  }

  // kHead: what `head` must hold before the next decision (the header, then the table, then everything
  // before the KV section), and that decision.
  enum class Stage { kHeader, kTable, kPrefix } stage = Stage::kHeader;
  size_t target = kHeaderBytes;

  Status Advance() {
    SnapshotInfo in;
    uint32_t n_sections = 0;
    switch (stage) {
      case Stage::kHeader: {
        Status h = ReadHeader(head, &in, &n_sections);
        const bool table_missing = SnapshotErrorOf(h) == SnapshotError::kTruncated && n_sections != 0;
        if (!h.ok() && !table_missing) return Buffer();  // RestoreSnapshot names the problem at Finish
        stage = Stage::kTable;
        target = kHeaderBytes + kSectionEntryBytes * n_sections;
        return Status::Ok();
      }
      case Stage::kTable:
        if (!ReadHeader(head, &in, &n_sections).ok() || !Locate(n_sections)) return Buffer();
        stage = Stage::kPrefix;
        target = kv_offset;
        return Status::Ok();
      case Stage::kPrefix: return StartKv();
    }
    return Status::Ok();
  }

  Status Feed(const uint8_t* p, size_t n) {
    for (;;) {
      switch (mode) {
        case Mode::kFailed: return error;
        case Mode::kBuffered:
          tail.insert(tail.end(), p, p + n);
          return Status::Ok();
        case Mode::kHead: {
          const size_t take = std::min(n, target - head.size());
          head.insert(head.end(), p, p + take);
          p += take;
          n -= take;
          if (head.size() < target) return Status::Ok();
          LLAMAY_RETURN_IF_ERROR(Advance());
          break;  // the same piece goes on in the next mode (or stage)
        }
        case Mode::kKv: {
          if (n == 0) return Status::Ok();
          const size_t take = std::min<uint64_t>(n, kv_bytes - kv_received);
          if (!ChunksIntact(p, take)) return Fail(ChecksumError());
          TakeKv(p, take);
          kv_received += take;
          p += take;
          n -= take;
          if (kv_received == kv_bytes) mode = Mode::kTail;
          break;
        }
        case Mode::kTail: {
          // Bytes past the declared end are counted, not kept: Finish refuses the file for them.
          const uint64_t room = total - kv_offset - kv_bytes - tail.size();
          tail.insert(tail.end(), p, p + std::min<uint64_t>(n, room));
          return Status::Ok();
        }
      }
    }
  }

  uint64_t kv_received = 0;
};

SnapshotReceiver::SnapshotReceiver(Cache& cache, const Digest& weights)
    : impl_(std::make_unique<Impl>(cache, weights)) {}

SnapshotReceiver::~SnapshotReceiver() {
  if (impl_->ctx.valid()) impl_->ctx.Close();
}

bool SnapshotReceiver::streaming() const {
  return impl_->mode == Impl::Mode::kKv || impl_->mode == Impl::Mode::kTail;
}

Status SnapshotReceiver::Feed(std::span<const uint8_t> bytes) {
  impl_->received += bytes.size();
  return impl_->Feed(bytes.data(), bytes.size());
}

Result<Context> SnapshotReceiver::Finish(std::vector<float>* logits) {
  Impl& m = *impl_;
  switch (m.mode) {
    case Impl::Mode::kFailed: return m.error;
    case Impl::Mode::kHead:
      // Ended before the KV section: RestoreSnapshot names what is missing.
      return RestoreSnapshot(m.cache, m.head, m.weights, logits);
    case Impl::Mode::kBuffered: {
      auto r = RestoreSnapshot(m.cache, m.tail, m.weights, logits);
      m.tail = {};
      return r;
    }
    case Impl::Mode::kKv:
    case Impl::Mode::kTail: break;
  }
  // Every check of Parse, in its order, over a mapping of the bytes received that holds the head and the
  // tail at their offsets: the KV section between them is never touched (untouched anonymous memory costs
  // nothing), and Parse reads nothing of it. Truncated or overlong files get Parse's own refusal.
  const uint64_t size = m.received;
  void* map = ::mmap(nullptr, std::max<uint64_t>(size, 1), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map == MAP_FAILED)
    return m.Fail(ResourceExhaustedError("snapshot: cannot map " + std::to_string(size) + " bytes"));
  auto* b = static_cast<uint8_t*>(map);
  std::memcpy(b, m.head.data(), m.head.size());
  const uint64_t tail_at = m.kv_offset + m.kv_bytes;
  if (size > tail_at) std::memcpy(b + tail_at, m.tail.data(), std::min<uint64_t>(m.tail.size(), size - tail_at));
  auto parsed = Parse(std::span<const uint8_t>(b, size));
  Status verdict = parsed.status();
  if (verdict.ok()) {
    m.crc = Crc32cExtend(m.crc, m.tail.data(), m.tail.size() - 4);
    if (m.crc != parsed->want_crc) verdict = ChecksumError();
  }
  if (verdict.ok()) CopyLogits(*parsed, logits);
  ::munmap(map, std::max<uint64_t>(size, 1));
  m.copier->Fence();
  if (!verdict.ok()) return m.Fail(verdict);
  m.mode = Impl::Mode::kFailed;
  m.error = FailedPreconditionError("snapshot: the receiver already finished");
  return std::move(m.ctx);
}

}  // namespace llamay::kv
