#include "engine/snapshot_store.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <set>

#include <xxhash.h>

#include "base/crc32c.h"
#include "kv/snapshot.h"

namespace llamay::engine {
namespace {

constexpr char kMagic[8] = {'L', 'L', 'A', 'M', 'A', 'Y', 'M', 'F'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 64;
constexpr size_t kChunkEntryBytes = 24;  // size (u64), XXH3-128
constexpr uint64_t kChunkPositions = 256;
constexpr uint64_t kChunkBytes = uint64_t{4} << 20;
// Bounds a manifest must respect before anything it declares is trusted.
constexpr uint64_t kMaxPart = uint64_t{1} << 28;  // the head (header, tokens, layout) and the tail
constexpr uint64_t kMaxChunks = uint64_t{1} << 20;
constexpr size_t kMaxKnownChunks = size_t{1} << 18;  // names remembered as present (about 30 MB at most)

// A chunk's content hash: XXH3-128 (tens of GB/s, where SHA-256 would cost most of a restore's time). It
// names the chunk and detects damage; it is not a defence against someone who may write the store, who
// could replace any object anyway (the snapshot's weights digest and CRC are checked on restore too).
using ChunkHash = std::array<uint8_t, 16>;

ChunkHash HashOf(std::span<const uint8_t> bytes) {
  const XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, h);
  ChunkHash out;
  std::memcpy(out.data(), c.digest, 16);
  return out;
}

std::string Hex(const ChunkHash& h) { return HexOf(h); }

struct Chunk {
  uint64_t size = 0;
  ChunkHash hash{};
};

struct Manifest {
  uint64_t file_bytes = 0, kv_offset = 0, kv_bytes = 0, tail_bytes = 0;
  std::span<const uint8_t> head, tail;
  std::vector<Chunk> chunks;
};

void Put64(std::vector<uint8_t>& out, uint64_t v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + 8);
}
uint64_t Get64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

std::string Prefix(const Digest& weights) { return "models/" + DigestHex(weights) + "/"; }
std::string ChunkName(const Digest& weights, const ChunkHash& hash) { return Prefix(weights) + "chunks/" + Hex(hash); }
std::string ManifestName(const Digest& weights, const std::string& name) {
  return Prefix(weights) + "snapshots/" + name;
}

Status Damaged(const std::string& name, const std::string& why) {
  return DataLossError("snapshot '" + name + "' in the store is damaged: " + why);
}

Result<Manifest> Decode(const std::string& name, std::span<const uint8_t> b) {
  if (b.size() < kHeaderBytes + 4 || std::memcmp(b.data(), kMagic, 8) != 0) return Damaged(name, "not a manifest");
  uint32_t version;
  std::memcpy(&version, b.data() + 8, 4);
  if (version != kVersion)
    return UnimplementedError("snapshot '" + name + "': manifest version " + std::to_string(version) +
                              "; this build reads version " + std::to_string(kVersion));
  Manifest m;
  m.file_bytes = Get64(&b[16]);
  m.kv_offset = Get64(&b[24]);
  m.kv_bytes = Get64(&b[32]);
  m.tail_bytes = Get64(&b[40]);
  const uint64_t n = Get64(&b[48]);
  if (m.kv_offset > kMaxPart || m.tail_bytes > kMaxPart || m.tail_bytes < 4 || n > kMaxChunks ||
      m.kv_bytes > (uint64_t{1} << 46) || m.file_bytes != m.kv_offset + m.kv_bytes + m.tail_bytes)
    return Damaged(name, "impossible lengths");
  const uint64_t want = kHeaderBytes + m.kv_offset + m.tail_bytes + n * kChunkEntryBytes + 4;
  if (b.size() != want)
    return Damaged(name, std::to_string(b.size()) + " bytes; its header implies " + std::to_string(want));
  uint32_t crc;
  std::memcpy(&crc, b.data() + b.size() - 4, 4);
  if (Crc32c(b.data(), b.size() - 4) != crc) return Damaged(name, "manifest checksum mismatch");
  m.head = b.subspan(kHeaderBytes, m.kv_offset);
  m.tail = b.subspan(kHeaderBytes + m.kv_offset, m.tail_bytes);
  uint64_t sum = 0;
  const uint8_t* e = b.data() + kHeaderBytes + m.kv_offset + m.tail_bytes;
  for (uint64_t i = 0; i < n; ++i, e += kChunkEntryBytes) {
    Chunk c;
    c.size = Get64(e);
    std::memcpy(c.hash.data(), e + 8, 16);
    // Against what is left of the KV section, so that the sum cannot wrap around (a hostile manifest).
    if (c.size == 0 || c.size > m.kv_bytes - sum)
      return Damaged(name, "a chunk of " + std::to_string(c.size) + " bytes");
    sum += c.size;
    m.chunks.push_back(c);
  }
  if (sum != m.kv_bytes) return Damaged(name, "its chunks do not add up to its KV section");
  return m;
}

}  // namespace

SnapshotStore::SnapshotStore(std::unique_ptr<store::Store> store) : store_(std::move(store)) {}

bool SnapshotStore::ValidName(std::string_view name) {
  if (name.empty() || name.size() > 128 || name[0] == '.') return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) return false;
  return true;
}

Result<PushResult> SnapshotStore::Push(const std::string& name, std::span<const uint8_t> snapshot) {
  if (!ValidName(name)) return InvalidArgumentError("invalid snapshot name '" + name + "' (1 to 128 of A-Z a-z 0-9 . _ -)");
  auto info = kv::InspectSnapshot(snapshot);
  if (!info.ok()) return info.status().WithContext("refusing to push '" + name + "'");
  const Digest& weights = info->weights;
  const uint64_t step = info->kv_position_bytes ? kChunkPositions * info->kv_position_bytes : kChunkBytes;
  PushResult out;
  out.bytes = snapshot.size();
  std::vector<uint8_t> manifest(kHeaderBytes, 0);
  std::memcpy(manifest.data(), kMagic, 8);
  std::memcpy(manifest.data() + 8, &kVersion, 4);
  const uint64_t tail_bytes = snapshot.size() - info->kv_offset - info->kv_bytes;
  const uint64_t n_chunks = (info->kv_bytes + step - 1) / step;
  for (auto [at, v] : {std::pair<size_t, uint64_t>{16, snapshot.size()}, {24, info->kv_offset}, {32, info->kv_bytes},
                       {40, tail_bytes}, {48, n_chunks}})
    std::memcpy(manifest.data() + at, &v, 8);
  manifest.insert(manifest.end(), snapshot.begin(), snapshot.begin() + static_cast<long>(info->kv_offset));
  manifest.insert(manifest.end(), snapshot.end() - static_cast<long>(tail_bytes), snapshot.end());
  const auto kv = snapshot.subspan(info->kv_offset, info->kv_bytes);
  for (uint64_t at = 0; at < kv.size(); at += step) {
    const auto piece = kv.subspan(at, std::min<uint64_t>(step, kv.size() - at));
    const ChunkHash hash = HashOf(piece);
    Put64(manifest, piece.size());
    manifest.insert(manifest.end(), hash.begin(), hash.end());
    ++out.chunks;
    const std::string chunk = ChunkName(weights, hash);
    LLAMAY_ASSIGN_OR_RETURN(bool have, HaveChunk(chunk));
    if (have) continue;
    LLAMAY_RETURN_IF_ERROR(store_->Put(chunk, piece));
    SawChunk(chunk);
    ++out.chunks_sent;
    out.bytes_sent += piece.size();
  }
  const uint32_t crc = Crc32c(manifest.data(), manifest.size());
  const auto* c = reinterpret_cast<const uint8_t*>(&crc);
  manifest.insert(manifest.end(), c, c + 4);
  // Last, and atomically: a manifest is never visible before all of its chunks.
  LLAMAY_RETURN_IF_ERROR(store_->Put(ManifestName(weights, name), manifest));
  out.bytes_sent += manifest.size();
  return out;
}

Result<bool> SnapshotStore::HaveChunk(const std::string& name) {
  {
    std::lock_guard l(known_mu_);
    if (known_chunks_.count(name)) return true;
  }
  LLAMAY_ASSIGN_OR_RETURN(bool have, store_->Exists(name));
  if (have) SawChunk(name);
  return have;
}

void SnapshotStore::SawChunk(const std::string& name) const {
  std::lock_guard l(known_mu_);
  if (known_chunks_.size() >= kMaxKnownChunks) known_chunks_.clear();  // bounded memory; asks again
  known_chunks_.insert(name);
}

Status SnapshotStore::Pull(const Digest& weights, const std::string& name,
                           const std::function<Status(std::span<const uint8_t>)>& sink) const {
  if (!ValidName(name)) return InvalidArgumentError("invalid snapshot name '" + name + "' (1 to 128 of A-Z a-z 0-9 . _ -)");
  auto bytes = store_->Get(ManifestName(weights, name));
  if (!bytes.ok()) {
    if (bytes.status().code() == StatusCode::kNotFound)
      return NotFoundError("no snapshot '" + name + "' of this model in " + store_->Describe());
    return bytes.status();
  }
  LLAMAY_ASSIGN_OR_RETURN(Manifest m, Decode(name, *bytes));
  LLAMAY_RETURN_IF_ERROR(sink(m.head));
  for (const Chunk& c : m.chunks) {
    // Verified before the sink sees a byte of it.
    const std::string chunk = ChunkName(weights, c.hash);
    Status read = store_->Read(chunk, [&](std::span<const uint8_t> piece) {
      if (piece.size() != c.size || HashOf(piece) != c.hash)
        return Damaged(name, "chunk " + Hex(c.hash) + " does not match its hash");
      SawChunk(chunk);
      return sink(piece);
    });
    if (read.code() == StatusCode::kNotFound) return Damaged(name, "chunk " + Hex(c.hash) + " is missing");
    LLAMAY_RETURN_IF_ERROR(read);
  }
  return sink(m.tail);
}

Result<std::vector<uint8_t>> SnapshotStore::PullBytes(const Digest& weights, const std::string& name) const {
  std::vector<uint8_t> out;
  LLAMAY_RETURN_IF_ERROR(Pull(weights, name, [&](std::span<const uint8_t> piece) {
    out.insert(out.end(), piece.begin(), piece.end());
    return Status::Ok();
  }));
  return out;
}

Result<std::vector<StoredSnapshot>> SnapshotStore::List(const Digest& weights) const {
  const std::string prefix = Prefix(weights) + "snapshots/";
  LLAMAY_ASSIGN_OR_RETURN(std::vector<store::ObjectInfo> objects, store_->List(prefix));
  std::vector<StoredSnapshot> out;
  for (const auto& o : objects) {
    const std::string name = o.name.substr(prefix.size());
    if (ValidName(name)) out.push_back({name, o.size});
  }
  return out;
}

Result<std::vector<Digest>> SnapshotStore::Models() const {
  LLAMAY_ASSIGN_OR_RETURN(std::vector<store::ObjectInfo> objects, store_->List("models/"));
  std::set<std::string> hex;
  for (const auto& o : objects) {
    const size_t at = std::string("models/").size();
    if (o.name.size() > at + 64 && o.name[at + 64] == '/' && o.name.compare(at + 65, 10, "snapshots/") == 0)
      hex.insert(o.name.substr(at, 64));
  }
  std::vector<Digest> out;
  for (const std::string& h : hex)
    if (auto d = DigestFromHex(h)) out.push_back(*d);
  return out;
}

Status SnapshotStore::Delete(const Digest& weights, const std::string& name) {
  if (!ValidName(name)) return InvalidArgumentError("invalid snapshot name '" + name + "'");
  return store_->Delete(ManifestName(weights, name));
}

namespace {

std::string SessionPrefix(const Digest& weights, const std::string& id) {
  return Prefix(weights) + "sessions/" + id + "/";
}
// Zero-padded so that names sort by generation.
std::string GenerationName(uint64_t g) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llu", static_cast<unsigned long long>(g));
  return buf;
}

std::vector<uint8_t> EncodeRecord(const SessionRecord& r) {
  std::string text = "{\"generation\":" + std::to_string(r.generation) + ",\"snapshot\":\"" + r.snapshot + "\",\"tail\":[";
  for (size_t i = 0; i < r.tail.size(); ++i) {
    if (i != 0) text += ',';
    text += std::to_string(r.tail[i]);
  }
  text += "]}";
  const uint32_t crc = Crc32c(text.data(), text.size());
  char sum[16];
  std::snprintf(sum, sizeof sum, "\n%08x", crc);
  text += sum;
  return std::vector<uint8_t>(text.begin(), text.end());
}

// The record's text, its CRC32C on the last line; parsed without a JSON library (kept below engine's
// dependencies): {"generation":N,"snapshot":"NAME","tail":[T,...]}.
Result<SessionRecord> DecodeRecord(const std::string& id, const std::vector<uint8_t>& bytes) {
  const std::string all(bytes.begin(), bytes.end());
  const auto damaged = [&] { return DataLossError("session '" + id + "' in the store: its record is damaged"); };
  const size_t nl = all.rfind('\n');
  if (nl == std::string::npos || all.size() - nl != 9) return damaged();
  const std::string text = all.substr(0, nl);
  if (std::strtoul(all.c_str() + nl + 1, nullptr, 16) != Crc32c(text.data(), text.size())) return damaged();
  SessionRecord r;
  unsigned long long g = 0;
  char name[160] = {};
  int used = 0;
  if (std::sscanf(text.c_str(), "{\"generation\":%llu,\"snapshot\":\"%159[^\"]\",\"tail\":[%n", &g, name, &used) != 2 ||
      used == 0)
    return damaged();
  r.generation = g;
  r.snapshot = name;
  const char* p = text.c_str() + used;
  while (*p != ']') {
    char* end = nullptr;
    const long v = std::strtol(p, &end, 10);
    if (end == p) return damaged();
    r.tail.push_back(static_cast<int32_t>(v));
    p = end;
    if (*p == ',') ++p;
  }
  return r;
}

}  // namespace

Status SnapshotStore::CommitSession(const std::string& id, uint64_t generation, std::span<const uint8_t> snapshot,
                                    std::span<const int32_t> tail) {
  LLAMAY_ASSIGN_OR_RETURN(kv::SnapshotInfo info, kv::InspectSnapshot(snapshot));
  SessionRecord r;
  r.generation = generation;
  r.snapshot = id + ".g" + std::to_string(generation);
  r.tail.assign(tail.begin(), tail.end());
  if (!ValidName(r.snapshot)) return InvalidArgumentError("invalid session id '" + id + "'");
  LLAMAY_RETURN_IF_ERROR(Push(r.snapshot, snapshot).status());
  const std::vector<uint8_t> record = EncodeRecord(r);
  const std::string name = SessionPrefix(info.weights, id) + GenerationName(generation);
  LLAMAY_ASSIGN_OR_RETURN(bool created, store_->PutIfAbsent(name, record));
  if (created) return Status::Ok();
  // Taken: by another instance, or by this very commit when a retried request's first attempt landed
  // (then the record holds exactly these bytes).
  auto existing = store_->Get(name);
  if (existing.ok() && *existing == record) return Status::Ok();
  return Status(StatusCode::kFailedPrecondition,
                "session '" + id + "': another instance continued it to generation " + std::to_string(generation) +
                    " first; this continuation was not saved (send the turn again)",
                kDetailSessionConflict);
}

Result<std::optional<SessionRecord>> SnapshotStore::LatestSession(const Digest& weights, const std::string& id) const {
  if (!ValidName(id)) return InvalidArgumentError("invalid session id '" + id + "'");
  const std::string prefix = SessionPrefix(weights, id);
  LLAMAY_ASSIGN_OR_RETURN(std::vector<store::ObjectInfo> objects, store_->List(prefix));
  if (objects.empty()) return std::optional<SessionRecord>();
  // Sorted by name: the last is the newest generation.
  LLAMAY_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, store_->Get(objects.back().name));
  LLAMAY_ASSIGN_OR_RETURN(SessionRecord r, DecodeRecord(id, bytes));
  if (GenerationName(r.generation) != objects.back().name.substr(prefix.size()))
    return DataLossError("session '" + id + "' in the store: its record disagrees with its name");
  return std::optional<SessionRecord>(std::move(r));
}

}  // namespace llamay::engine
