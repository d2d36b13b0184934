// Snapshots: a context serialised position-major, so any cache of the same geometry can restore it
// whatever its page size or precision. docs/snapshot-format.md gives the byte layout.
//
//   header (80 bytes): magic "LLAMAYCX", version, flags, geometry, on-disk precision, positions,
//                      section count, the 32-byte weight digest
//   section table:     {kind, flags, offset, size} per section
//   sections:          TOKENS (int32 per position), KV ([pos][layer][k|v][row] at the on-disk precision),
//                      and in later versions more kinds, which older readers skip unless marked required
//   trailer:           CRC32C of every byte before it
//
// Version 2 (hybrid and windowed layouts, and whatever asks for checkpoints or logits) adds a LAYOUT
// section (every layer's kind and window: part of the model's identity), stores the KV of each attention
// group for the positions a restore needs (a windowed group: its last window only), the live recurrent
// state, optionally the context's checkpoints and the next token's logits. A snapshot that version 1 can
// hold is still written as version 1; both versions load.
//
// Restore refuses, each with its own SnapshotError (Status::detail()), checked in this order: bad magic,
// unsupported version, impossible or oversized declared lengths (more than kMaxPositions positions is
// refused by name; every length is checked against the geometry before anything is allocated),
// truncation, checksum mismatch, a different model's weights, and a geometry the cache cannot hold.
//
// Thread-safety: writing takes the context's lock shared (a snapshot never races its own writer);
// restoring builds a new context.
#ifndef LLAMAY_KV_SNAPSHOT_H_
#define LLAMAY_KV_SNAPSHOT_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/digest.h"
#include "base/file.h"
#include "base/status.h"
#include "kv/cache.h"
#include "kv/context.h"
#include "kv/layout.h"

namespace llamay::kv {

inline constexpr uint32_t kSnapshotVersion = 2;  // the newest this build reads and writes
inline constexpr char kSnapshotMagic[8] = {'L', 'L', 'A', 'M', 'A', 'Y', 'C', 'X'};

enum class SnapshotError : int {
  kNone = 0,
  kWrongModel = 1,          // intact file, computed by other weights
  kBadMagic = 2,            // not a llamay snapshot
  kUnsupportedVersion = 3,  // a format version (or required section) this build cannot read
  kTruncated = 4,           // fewer bytes than the header declares
  kChecksum = 5,            // the CRC does not match: damaged in transit or on disk
  kBadLength = 6,           // a declared length is impossible or beyond the limits
  kGeometry = 7,            // layers/heads/head dim differ from the cache's
};
std::string_view SnapshotErrorName(SnapshotError e);
// The SnapshotError a failed restore carries (kNone for OK or for other failures).
SnapshotError SnapshotErrorOf(const Status& s);

struct SnapshotOptions {
  // false: values are written as f32 (a snapshot outlives the settings that produced it).
  // true: the cache's own precision, so a q8_0 cache does not quadruple on disk.
  bool native_precision = false;
  // Recurrent layouts: also store the context's checkpoints, so the restored context can roll back to
  // them (version 2).
  bool checkpoints = false;
  // The logits of the next token (after the last position), stored so that a restored context samples
  // its first token without a forward pass (version 2). Empty: none.
  std::span<const float> logits = {};
  // A CRC32C of each 1 MiB chunk of the KV section, ahead of it (version 2): a streaming restore
  // (SnapshotReceiver) refuses a damaged chunk as soon as it arrives instead of at the end of the file.
  bool kv_checksums = false;
};

// What a snapshot's header says; Inspect verifies the checksum too.
struct SnapshotInfo {
  uint32_t version = 0;
  uint32_t n_layers = 0, n_kv_heads = 0, head_dim = 0;
  KvPrecision precision = KvPrecision::kF32;  // on disk
  uint64_t n_positions = 0;
  Digest weights{};
  std::vector<int32_t> tokens;
  uint64_t file_bytes = 0;
  // Version 2: the layer map (empty specs: every layer full attention), the recurrent state's position,
  // how many checkpoints and logits the file carries.
  std::vector<LayerSpec> layer_specs;
  uint64_t recurrent_layer_bytes = 0;
  uint64_t state_position = 0;
  uint64_t n_checkpoints = 0;
  uint64_t n_logits = 0;
  // Where the KV section lies in the file, and the bytes of one position in it when it is one
  // position-major run (version 1, and version 2 of one full-attention group; 0 otherwise). A file cut
  // at position boundaries shares its leading pieces with every file of the same prefix (the snapshot
  // store's chunks).
  uint64_t kv_offset = 0, kv_bytes = 0, kv_position_bytes = 0;
  // Version 2 with a KV_CHECKSUMS section: its chunk size (0: none).
  uint64_t kv_checksum_chunk = 0;
};

Status WriteSnapshot(const Context& ctx, const Digest& weights, ByteSink& sink,
                     const SnapshotOptions& options = {});
Result<std::vector<uint8_t>> SnapshotToBytes(const Context& ctx, const Digest& weights,
                                             const SnapshotOptions& options = {});
// Temporary file in the same directory, fsynced, renamed over `path`.
Status SaveSnapshot(const Context& ctx, const Digest& weights, const std::string& path,
                    const SnapshotOptions& options = {});

Result<SnapshotInfo> InspectSnapshot(std::span<const uint8_t> bytes);
// A new context in `cache` holding the snapshot's positions. Nothing in the cache changes on failure: when
// the pages fit without evicting anything, the KV section's checksum is verified while it is copied into
// them (one pass over the bytes) and a mismatch releases them before the refusal; otherwise (and whenever
// the digest or geometry differ) the whole checksum is verified before any page is allocated.
// Version 2: a layer map other than the cache's is refused as another model's (kWrongModel); the whole
// checksum is verified before anything is allocated. `logits` (optional) receives the stored next-token
// logits, or is cleared when the file has none.
Result<Context> RestoreSnapshot(Cache& cache, std::span<const uint8_t> bytes, const Digest& weights,
                                std::vector<float>* logits = nullptr);
Result<Context> LoadSnapshot(Cache& cache, const std::string& path, const Digest& weights,
                             std::vector<float>* logits = nullptr);

// Restores a snapshot whose bytes arrive in pieces (an upload), with the outcome RestoreSnapshot gives for
// the same bytes, but without holding the file in memory where it can avoid it: once the header, the
// tokens and the layer map have arrived, a file of the cache's own model and geometry (one full-attention
// group, versions 1 and 2) whose pages fit without evicting anything gets a fresh context at once, and
// each KV position is copied into its page as it arrives (converting precision where needed) while the
// checksum runs; the context is handed out only by Finish, after the whole checksum and every length
// check passed, and released otherwise. Any other file (another model, a hybrid layout, a cache under
// memory pressure) is buffered and restored by RestoreSnapshot at Finish.
// Thread-safety: one thread at a time; the cache may be used by others meanwhile.
class SnapshotReceiver {
 public:
  SnapshotReceiver(Cache& cache, const Digest& weights);
  ~SnapshotReceiver();
  SnapshotReceiver(const SnapshotReceiver&) = delete;
  SnapshotReceiver& operator=(const SnapshotReceiver&) = delete;

  // The next bytes of the file. An error is final (more bytes than the file declares, a refused header):
  // later calls and Finish return it again.
  Status Feed(std::span<const uint8_t> bytes);
  // After the last byte: the restored context, or the refusal.
  Result<Context> Finish(std::vector<float>* logits = nullptr);
  // True once the bytes are being copied straight into pages (for tests and metrics).
  bool streaming() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace llamay::kv

#endif  // LLAMAY_KV_SNAPSHOT_H_
