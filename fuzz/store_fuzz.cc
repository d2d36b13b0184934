// libFuzzer target: the snapshot-store protocol as a hostile store would answer it. The objects of an
// in-memory store (manifests, chunks, session records) come from the input, and engine::SnapshotStore
// reads them (Pull, List, Models, LatestSession); S3 answers (ListObjectsV2 pages, error bodies) go to the
// S3 backend's XML reader.
//
// Input: byte 0 holds flags: bit 0 seals each manifest with its correct CRC32C, bit 1 points each
// manifest's chunk entries at the input's chunks (entry i gets chunk i % n's size and hash, and the header's
// KV and file lengths are made to agree), bit 2 seals each session record with its correct CRC. Then records,
// each a kind byte, a 16-bit little-endian length and that many bytes. Kind % 4: 0 a manifest, stored as
// snapshot "s<i>" (i counts manifests); 1 a chunk, stored under the hash of its bytes (kind bit 2: under the
// previous chunk's hash instead, a chunk that does not match its name); 2 a session record, generation i of
// session "sess"; 3 an S3 XML document.
//
// Properties: nothing crashes; every refusal is a Status with a message; a pull that succeeds hands its
// sink exactly the manifest's file_bytes, in pieces that are the head, each chunk (as long as the
// manifest says, with the hash it names) and the tail; a sink error ends a pull with that error; List and
// Models return only valid names; LatestSession's record names its own generation. The XML reader's
// refusals are Internal with StoreError::kBadResponse, a truncated page has a continuation token, and an
// S3 error message is at most 300 bytes.
// Build: cmake --preset fuzz && cmake --build build/fuzz --target store_fuzz
// Run:   build/fuzz/fuzz/store_fuzz -max_len=65536 CORPUS_DIR   (see docs/fuzzing.md)
#include <xxhash.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/crc32c.h"
#include "base/digest.h"
#include "engine/snapshot_store.h"
#include "store/s3_xml.h"
#include "store/store.h"

namespace {

using llamay::Result;
using llamay::Status;
using llamay::StatusCode;

// The manifest layout (src/engine/snapshot_store.cc, docs/store.md): a 64-byte header (magic, version,
// file, KV offset, KV and tail lengths, chunk count at 16..48), the head, the tail, 24-byte chunk entries
// (size, XXH3-128), a CRC32C.
constexpr size_t kHeaderBytes = 64;
constexpr size_t kEntryBytes = 24;

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "store_fuzz: property failed: %s\n", what);
    __builtin_trap();
  }
}

void CheckError(const Status& s) { Check(!s.ok() && !s.message().empty(), "a refusal has a message"); }

uint64_t Get64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
void Put64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, 8); }

std::array<uint8_t, 16> HashOf(std::string_view bytes) {
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits(bytes.data(), bytes.size()));
  std::array<uint8_t, 16> out;
  std::memcpy(out.data(), c.digest, 16);
  return out;
}

// A store that holds what the input says and keeps the backend contract (store.h): List gives valid
// names that start with the prefix, sorted; Get of an absent name is NotFound.
class FakeStore : public llamay::store::Store {
 public:
  std::map<std::string, std::vector<uint8_t>> objects;

  Status Put(const std::string& name, std::span<const uint8_t> bytes) override {
    objects[name].assign(bytes.begin(), bytes.end());
    return Status::Ok();
  }
  Result<std::vector<uint8_t>> Get(const std::string& name) override {
    auto it = objects.find(name);
    if (it == objects.end()) return llamay::NotFoundError("no object " + name);
    return it->second;
  }
  Result<bool> PutIfAbsent(const std::string& name, std::span<const uint8_t> bytes) override {
    if (objects.count(name)) return false;
    objects[name].assign(bytes.begin(), bytes.end());
    return true;
  }
  Result<bool> Exists(const std::string& name) override { return objects.count(name) > 0; }
  Result<std::vector<llamay::store::ObjectInfo>> List(const std::string& prefix) override {
    std::vector<llamay::store::ObjectInfo> out;
    for (const auto& [name, bytes] : objects)
      if (name.starts_with(prefix) && llamay::store::ValidObjectName(name))
        out.push_back({name, bytes.size()});
    return out;
  }
  Status Delete(const std::string& name) override {
    objects.erase(name);
    return Status::Ok();
  }
  std::string Describe() const override { return "fuzz store"; }
};

void FuzzXml(std::string_view xml) {
  auto page = llamay::store::ParseListObjectsV2(xml);
  if (page.ok()) {
    Check(!page->truncated || !page->next_token.empty(), "a truncated page has a continuation token");
  } else {
    CheckError(page.status());
    Check(page.status().code() == StatusCode::kInternal &&
              page.status().detail() == static_cast<int>(llamay::store::StoreError::kBadResponse),
          "an unreadable page is Internal, kBadResponse");
  }
  const auto err = llamay::store::ParseS3Error(xml);
  Check(err.message.size() <= 300, "an S3 error message is at most 300 bytes");
  (void)llamay::store::XmlUnescape(xml);
}

// Gives each chunk entry of `m` the size and hash of one of `chunks` and makes the lengths agree.
void PointAtChunks(std::vector<uint8_t>* m, const std::vector<std::string>& chunks) {
  if (m->size() < kHeaderBytes + 4 || chunks.empty()) return;
  const uint64_t kv_offset = Get64(&(*m)[24]), tail = Get64(&(*m)[40]), n = Get64(&(*m)[48]);
  if (kv_offset > m->size() || tail > m->size() || n > m->size() / kEntryBytes) return;
  const uint64_t entries = kHeaderBytes + kv_offset + tail;
  if (entries + n * kEntryBytes + 4 != m->size()) return;
  uint64_t kv = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const std::string& c = chunks[i % chunks.size()];
    uint8_t* e = m->data() + entries + i * kEntryBytes;
    Put64(e, c.size());
    const auto h = HashOf(c);
    std::memcpy(e + 8, h.data(), 16);
    kv += c.size();
  }
  Put64(&(*m)[32], kv);
  Put64(&(*m)[16], kv_offset + kv + tail);
}

void Seal(std::vector<uint8_t>* m) {
  if (m->size() < 4) return;
  const uint32_t crc = llamay::Crc32c(m->data(), m->size() - 4);
  std::memcpy(m->data() + m->size() - 4, &crc, 4);
}

// The record's last line is its CRC32C in 8 hex digits (snapshot_store.cc's EncodeRecord).
void SealRecord(std::vector<uint8_t>* r) {
  std::string text(r->begin(), r->end());
  if (const size_t nl = text.rfind('\n'); nl != std::string::npos) text.resize(nl);
  char sum[16];
  std::snprintf(sum, sizeof sum, "\n%08x", llamay::Crc32c(text.data(), text.size()));
  text += sum;
  r->assign(text.begin(), text.end());
}

void CheckPull(const llamay::engine::SnapshotStore& store, const llamay::Digest& weights,
               const std::string& name, const std::vector<uint8_t>* manifest) {
  uint64_t total = 0;
  size_t pieces = 0;
  const Status s = store.Pull(weights, name, [&](std::span<const uint8_t> piece) {
    total += piece.size();
    ++pieces;
    return Status::Ok();
  });
  if (!s.ok()) {
    CheckError(s);
    if (manifest == nullptr) Check(s.code() == StatusCode::kNotFound, "an absent snapshot is NotFound");
    return;
  }
  Check(manifest != nullptr, "only a stored manifest pulls");
  Check(total == Get64(&(*manifest)[16]), "a pull hands over the manifest's file_bytes");
  Check(pieces == Get64(&(*manifest)[48]) + 2, "a pull hands over the head, each chunk and the tail");
  // A sink that refuses the last piece: the pull returns its error.
  size_t seen = 0;
  const Status stopped = store.Pull(weights, name, [&](std::span<const uint8_t>) {
    return ++seen == pieces ? llamay::DataLossError("sink refused") : Status::Ok();
  });
  Check(stopped.code() == StatusCode::kDataLoss && stopped.message() == "sink refused",
        "a sink error ends a pull");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  llamay::Digest weights;
  weights.fill(0x11);
  const std::string root = "models/" + llamay::DigestHex(weights) + "/";

  std::vector<std::vector<uint8_t>> manifests, records;
  std::vector<std::string> chunks;
  std::vector<bool> misnamed;
  size_t at = 1;
  while (at + 3 <= size) {
    const uint8_t kind = data[at];
    const size_t len = std::min<size_t>(data[at + 1] | data[at + 2] << 8, size - at - 3);
    const std::vector<uint8_t> bytes(data + at + 3, data + at + 3 + len);
    at += 3 + len;
    switch (kind % 4) {
      case 0:
        manifests.push_back(bytes);
        break;
      case 1:
        chunks.emplace_back(bytes.begin(), bytes.end());
        misnamed.push_back((kind & 4) != 0);
        break;
      case 2:
        records.push_back(bytes);
        break;
      case 3:
        FuzzXml(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
        break;
    }
  }

  auto owned = std::make_unique<FakeStore>();
  FakeStore* fake = owned.get();
  for (size_t i = 0; i < chunks.size(); ++i) {
    const auto h = HashOf(chunks[i]);
    const auto named = misnamed[i] && i > 0 ? HashOf(chunks[i - 1]) : h;
    fake->objects[root + "chunks/" + llamay::HexOf(named)].assign(chunks[i].begin(), chunks[i].end());
  }
  for (size_t i = 0; i < manifests.size(); ++i) {
    if (flags & 2) PointAtChunks(&manifests[i], chunks);
    if (flags & 1) Seal(&manifests[i]);
    fake->objects[root + "snapshots/s" + std::to_string(i)] = manifests[i];
  }
  for (size_t i = 0; i < records.size(); ++i) {
    if (flags & 4) SealRecord(&records[i]);
    char gen[24];
    std::snprintf(gen, sizeof gen, "%016zu", i);
    fake->objects[root + "sessions/sess/" + gen] = records[i];
  }
  // A manifest of another model, and objects whose names no snapshot has: List and Models skip them.
  fake->objects["models/" + std::string(64, 'A') + "/snapshots/x"] = {1};
  fake->objects["models/short/snapshots/y"] = {1};

  const llamay::engine::SnapshotStore store(std::move(owned));
  for (size_t i = 0; i < manifests.size(); ++i)
    CheckPull(store, weights, "s" + std::to_string(i), &manifests[i]);
  CheckPull(store, weights, "absent", nullptr);

  auto list = store.List(weights);
  if (list.ok()) {
    Check(list->size() == manifests.size(), "List gives every snapshot");
    for (const auto& s : *list)
      Check(llamay::engine::SnapshotStore::ValidName(s.name), "List gives valid names");
  } else {
    CheckError(list.status());
  }
  auto models = store.Models();
  if (!models.ok()) CheckError(models.status());

  auto latest = store.LatestSession(weights, "sess");
  if (latest.ok()) {
    Check(latest->has_value() == !records.empty(), "a session with records has a latest one");
    if (latest->has_value())
      Check((*latest)->generation + 1 == records.size(), "the latest record is the last");
  } else {
    CheckError(latest.status());
  }
  return 0;
}
