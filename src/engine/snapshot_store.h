// SnapshotStore: snapshots kept in a store::Store (a directory, or S3-compatible object storage), cut into
// content-addressed chunks so that contexts sharing a prefix share its chunks: pushing a fork sends only
// the chunks the store lacks (docs/store.md, "Snapshots in a store").
//
// Objects, below models/<weights digest, 64 hex>/:
//   chunks/<XXH3-128 of the chunk, 32 hex>  a run of the snapshot's KV section: 256 whole positions when the
//                                           section is position-major (so a prefix's chunks are the same
//                                           bytes in every file that shares it), else 4 MiB;
//   snapshots/<name>                        the manifest: the snapshot file with its KV section replaced by
//                                           the list of its chunks (size and hash each), CRC32C-sealed.
// A manifest is written only after all of its chunks, by an atomic put, so a reader never finds one whose
// chunks are missing (an interrupted push leaves only unreferenced chunks). Pushes are idempotent: the same
// context pushed twice, or by two servers, writes the same bytes under the same names.
//
// Chunks are never deleted by llamay (forks and generations share them); a clean-up of chunks from outside
// must stop the servers that use the store first, since each remembers which chunks it has seen there.
//
// Every read is verified before a byte of it leaves this class: the manifest's CRC and lengths, each
// chunk's size and hash; the reassembled file then carries its own CRC, which the restore checks (a snapshot is
// only ever restored through kv::SnapshotReceiver or RestoreSnapshot).
//
// Thread-safety: safe from several threads (the store is; the set of chunks known to be there is guarded).
#ifndef LLAMAY_ENGINE_SNAPSHOT_STORE_H_
#define LLAMAY_ENGINE_SNAPSHOT_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_set>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/digest.h"
#include "base/status.h"
#include "store/store.h"

namespace llamay::engine {

struct PushResult {
  uint64_t bytes = 0;       // the snapshot file's size
  size_t chunks = 0;        // chunks it is made of
  size_t chunks_sent = 0;   // of them, those the store lacked
  uint64_t bytes_sent = 0;  // chunk and manifest bytes written
};

// A session's state in the store at one generation: its snapshot (computed positions) and the tokens it
// has sampled but not yet run through the model (its tail), which the next request runs first.
struct SessionRecord {
  uint64_t generation = 0;
  std::string snapshot;  // the name of its snapshot in this store
  std::vector<int32_t> tail;
};

// Status::detail() of a session commit that lost to another instance's (SnapshotStore::CommitSession).
inline constexpr int kDetailSessionConflict = 3002;

struct StoredSnapshot {
  std::string name;
  uint64_t manifest_bytes = 0;
};

class SnapshotStore {
 public:
  explicit SnapshotStore(std::unique_ptr<store::Store> store);

  // A snapshot's name: 1 to 128 characters of [A-Za-z0-9._-], not starting with '.'.
  static bool ValidName(std::string_view name);

  // Stores a snapshot file under `name` for the model whose weights computed it (the file's own digest).
  // The file is verified first (kv::InspectSnapshot): a damaged one is refused and nothing is written.
  Result<PushResult> Push(const std::string& name, std::span<const uint8_t> snapshot);
  // The snapshot `name` of the model `weights`, reassembled and handed to `sink` a piece at a time (the
  // manifest's head, each chunk once verified, the tail); NotFound when the store has no such snapshot.
  // A sink error stops the pull and is returned.
  Status Pull(const Digest& weights, const std::string& name,
              const std::function<Status(std::span<const uint8_t>)>& sink) const;
  Result<std::vector<uint8_t>> PullBytes(const Digest& weights, const std::string& name) const;
  // The snapshots of the model `weights`, by name.
  Result<std::vector<StoredSnapshot>> List(const Digest& weights) const;
  // The weights digests that have snapshots in the store.
  Result<std::vector<Digest>> Models() const;
  Status Delete(const Digest& weights, const std::string& name);

  // Sessions that move between instances (docs/deploy.md). Generation g of session `id` is committed by
  // pushing its snapshot (as "<id>.g<g>"), then creating sessions/<id>/<g> if it does not exist yet: of
  // two instances that continued generation g - 1 at once, exactly one commits g, and the other gets
  // FailedPrecondition with detail kDetailSessionConflict (its continuation is a fork nobody else sees).
  Status CommitSession(const std::string& id, uint64_t generation, std::span<const uint8_t> snapshot,
                       std::span<const int32_t> tail);
  // The newest committed generation of session `id` of the model `weights`; nullopt when it has none.
  Result<std::optional<SessionRecord>> LatestSession(const Digest& weights, const std::string& id) const;

  std::string Describe() const { return store_->Describe(); }

 private:
  // Whether the store holds chunk `name`, remembered: chunks are content-addressed and never deleted, so
  // one seen (written, found or read) needs no second request (a write-through commit asks for each).
  Result<bool> HaveChunk(const std::string& name);
  void SawChunk(const std::string& name) const;

  std::unique_ptr<store::Store> store_;
  mutable std::mutex known_mu_;
  mutable std::unordered_set<std::string> known_chunks_;  // GUARDED_BY(known_mu_)
};

}  // namespace llamay::engine

#endif  // LLAMAY_ENGINE_SNAPSHOT_STORE_H_
