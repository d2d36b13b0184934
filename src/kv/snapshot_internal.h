// Internal to the snapshot codec (snapshot.cc: version 1 and the shared parts; snapshot_v2.cc: version 2).
// Not part of the library's interface. docs/snapshot-format.md gives the byte layout of both versions.
#ifndef LLAMAY_KV_SNAPSHOT_INTERNAL_H_
#define LLAMAY_KV_SNAPSHOT_INTERNAL_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/digest.h"
#include "base/file.h"
#include "base/status.h"
#include "kv/cache.h"
#include "kv/context.h"
#include "kv/snapshot.h"

namespace llamay::kv {
namespace snapshot_detail {

inline constexpr size_t kHeaderBytes = 80;
inline constexpr size_t kSectionEntryBytes = 24;
inline constexpr uint32_t kMaxSections = 16;
inline constexpr uint32_t kSectionTokens = 1;
inline constexpr uint32_t kSectionKv = 2;
inline constexpr uint32_t kSectionLayout = 3;       // version 2, required
inline constexpr uint32_t kSectionState = 4;        // version 2, required where the layout has recurrent layers
inline constexpr uint32_t kSectionCheckpoints = 5;  // version 2, optional
inline constexpr uint32_t kSectionLogits = 6;       // version 2, optional
inline constexpr uint32_t kSectionKvChecksums = 7;  // version 2, optional: a CRC32C per chunk of the KV section
inline constexpr uint64_t kKvChecksumChunk = uint64_t{1} << 20;  // what writers use
inline constexpr uint32_t kLastSectionKind = kSectionKvChecksums;
inline constexpr uint32_t kSectionRequired = 1;     // section flag: a reader that does not know the kind must refuse
inline constexpr size_t kFlushBytes = size_t{1} << 20;
inline constexpr uint64_t kMaxLogits = uint64_t{1} << 24;

// One entry of the section table.
struct Section {
  uint32_t kind = 0, flags = 0;
  uint64_t offset = 0, size = 0;
};

// Appends the 80-byte header and the section table to *buf, giving each section its offset (contiguous,
// in table order, right after the table).
void PutHeader(std::vector<uint8_t>* buf, uint32_t version, const KvLayout& layout, KvPrecision disk, uint64_t n,
               const Digest& weights, std::vector<Section>* sections);

// A validated view of a snapshot's bytes (everything but the checksum, which VerifyChecksum checks).
struct Parsed {
  SnapshotInfo info;
  std::span<const uint8_t> tokens;  // int32 per position
  std::span<const uint8_t> kv;      // v1: [pos][layer][k|v][row]; v2: per attention group, see the format doc
  uint64_t kv_offset = 0;           // of the KV section in the file
  uint32_t want_crc = 0;            // the trailer
  // Version 2.
  std::span<const uint8_t> state;        // u64 state position, then the slot's bytes (empty: no section)
  std::span<const uint8_t> checkpoints;  // u64 count, then count x (u64 position, the slot's bytes)
  std::span<const uint8_t> logits;       // u64 count, then count f32
  std::span<const uint8_t> kv_checksums; // u64 chunk bytes, u64 count, then count u32 (empty: none)
};

// The KV_CHECKSUMS section's geometry, checked against the KV section's size: chunk bytes a power of two
// from 4 KiB to 1 GiB, count = ceil(kv_bytes / chunk), size = 16 + 4 * count.
Status CheckKvChecksums(std::span<const uint8_t> sec, uint64_t kv_bytes);
// Verifies every chunk of `kv` against the section (kChecksum on a mismatch).
Status VerifyKvChecksums(std::span<const uint8_t> sec, std::span<const uint8_t> kv);

Status SnapError(SnapshotError e, std::string msg);
uint32_t U32(const uint8_t* p);
uint64_t U64(const uint8_t* p);
Status ChecksumError();
Status VerifyChecksum(std::span<const uint8_t> b, const Parsed& p);
// Version 1 holds a pure-attention layout: every layer full attention, one page list.
bool OneFullGroup(const Cache& cache);
// Both versions; ParseV2 (snapshot_v2.cc) after the common header. `out` holds the header already.
Result<Parsed> Parse(std::span<const uint8_t> b);
// The header and section table (b holds at least them, or the refusal says what is missing).
Status ReadHeader(std::span<const uint8_t> b, SnapshotInfo* info, uint32_t* n_sections);
Status CheckGeometry(uint32_t layers, uint32_t heads, uint32_t head_dim, uint32_t precision);
Result<Parsed> ParseV2(std::span<const uint8_t> b, uint32_t n_sections, Parsed out);
// The layout a version 2 file describes (page size and precision left at their defaults).
KvLayout FileLayout(const SnapshotInfo& in);
// The first position a version 2 file stores for attention group `g` of a context of n positions.
uint64_t FirstStored(const LayerGroup& g, uint64_t n);

// Copies whole positions of a KV section laid out [pos][layer][k|v][row] (version 1, and version 2's one
// full-attention group) at precision `disk` into the pages of one full group, converting where the cache's
// precision differs. Large copies at the same precision use streaming stores: Fence() before publishing.
class KvRowCopier {
 public:
  KvRowCopier(const KvLayout& layout, KvPrecision disk, uint64_t kv_bytes);
  size_t position_bytes() const { return pos_bytes_; }
  // Positions [from, to); `src` points at position `from`'s bytes.
  void Copy(std::span<internal::Page* const> pages, const uint8_t* src, uint64_t from, uint64_t to);
  void Fence() const;

 private:
  const KvLayout& layout_;
  KvPrecision disk_;
  uint32_t elems_;
  size_t disk_row_, pos_bytes_;
  bool same_precision_, stream_;
  std::vector<size_t> row_off_;  // of each (layer, kind) row of slot 0 inside a page, in on-disk order
  std::vector<float> scratch_;
};

// True when a file's layer map is one full-attention group (always, for version 1).
bool OneFullGroupFile(const SnapshotInfo& in);
// The stored next-token logits into *logits (cleared when the file has none); nothing when null.
void CopyLogits(const Parsed& p, std::vector<float>* logits);

}  // namespace snapshot_detail

// Reaches into Context and Cache internals (friend of both).
class SnapshotCodec {
 public:
  static Status Write(const Context& ctx, const Digest& weights, ByteSink& sink, const SnapshotOptions& opt);
  static Result<Context> Restore(Cache& cache, std::span<const uint8_t> bytes, const Digest& weights,
                                 std::vector<float>* logits);

 private:
  static Status WriteV2(const Context& ctx, const Digest& weights, ByteSink& sink, const SnapshotOptions& opt);
  static Result<Context> RestoreV2(Cache& cache, std::span<const uint8_t> bytes, const snapshot_detail::Parsed& p,
                                   const Digest& weights, std::vector<float>* logits);
  // True when `pages` more pages fit the cache's budget (and arena) without evicting a tree entry.
  static bool RoomWithoutEviction(Cache& cache, size_t pages);
  // A new context holding `tokens_bytes` (i32 each) on fresh pages whose rows the caller writes.
  static Result<Context> NewRestoredContext(Cache& cache, std::span<const uint8_t> tokens_bytes);
  // The page list of a one-full-group context.
  static std::span<internal::Page* const> FullGroupPages(const Context& ctx);

  friend class SnapshotReceiver;
};

}  // namespace llamay::kv

#endif  // LLAMAY_KV_SNAPSHOT_INTERNAL_H_
