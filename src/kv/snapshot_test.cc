#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <unistd.h>

#include "base/crc32c.h"
#include "base/file.h"
#include "kv/snapshot.h"
#include "kv/test_util.h"

namespace llamay::kv {
namespace {

using namespace testing_util;

Digest TestDigest(uint8_t seed) {
  Digest d;
  for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<uint8_t>(seed * 31 + i);
  return d;
}

std::vector<uint8_t> Snap(const Context& c, const Digest& d, bool native = false) {
  SnapshotOptions o;
  o.native_precision = native;
  auto b = SnapshotToBytes(c, d, o);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  return *b;
}

SnapshotError RestoreError(Cache& cache, std::span<const uint8_t> bytes, const Digest& d) {
  auto r = RestoreSnapshot(cache, bytes, d);
  return r.ok() ? SnapshotError::kNone : SnapshotErrorOf(r.status());
}

TEST(Snapshot, RoundTripIsExactAtEveryPrecision) {
  for (KvPrecision p : {KvPrecision::kF32, KvPrecision::kF16, KvPrecision::kQ8_0}) {
    for (bool native : {false, true}) {
      SCOPED_TRACE(std::string(KvPrecisionName(p)) + (native ? " native" : " f32 on disk"));
      auto cache = MakeCache(SmallLayout(4, p));
      Context c = cache->NewContext();
      Fill(c, 11, 3);
      const Digest d = TestDigest(1);
      auto bytes = Snap(c, d, native);
      auto info = InspectSnapshot(bytes);
      ASSERT_TRUE(info.ok());
      EXPECT_EQ(info->n_positions, 11u);
      EXPECT_EQ(info->precision, native ? p : KvPrecision::kF32);
      EXPECT_EQ(info->tokens, Iota(11));
      auto r = RestoreSnapshot(*cache, bytes, d);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(r->tokens(), c.tokens());
      const auto a = ReadAll(c), b = ReadAll(*r);
      ASSERT_EQ(a.size(), b.size());
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << "restored values differ";
      ExpectInvariants(*cache);
    }
  }
}

TEST(Snapshot, NativeQ8_0IsAQuarterOfF32OnDisk) {
  auto cache = MakeCache(SmallLayout(4, KvPrecision::kQ8_0));
  Context c = cache->NewContext();
  Fill(c, 64, 1);
  const size_t f32 = Snap(c, TestDigest(1)).size(), q8 = Snap(c, TestDigest(1), true).size();
  EXPECT_LT(q8 * 3, f32);
}

// Position-major on disk: a snapshot written by a cache with 128-token pages restores into caches with
// 64-token (and odd-sized) pages with identical values.
TEST(Snapshot, IndependentOfPageSize) {
  auto big = MakeCache(SmallLayout(128));
  Context c = big->NewContext();
  Fill(c, 300, 5);
  const Digest d = TestDigest(2);
  const auto bytes = Snap(c, d);
  const auto want = ReadAll(c);
  for (uint32_t P : {64u, 7u, 1u, 512u}) {
    auto small = MakeCache(SmallLayout(P));
    auto r = RestoreSnapshot(*small, bytes, d);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->n_pages(), (300 + P - 1) / P);
    EXPECT_EQ(ReadAll(*r), want) << "page size " << P;
    // And back: written with P-token pages, identical bytes to the original writer's.
    EXPECT_EQ(Snap(*r, d), bytes);
  }
}

TEST(Snapshot, RefusesWrongModelAndGeometryDistinctly) {
  auto cache = MakeCache(SmallLayout(4));
  Context c = cache->NewContext();
  Fill(c, 9, 1);
  const auto bytes = Snap(c, TestDigest(1));
  auto wrong = RestoreSnapshot(*cache, bytes, TestDigest(2));
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(SnapshotErrorOf(wrong.status()), SnapshotError::kWrongModel);
  EXPECT_NE(wrong.status().message().find("other weights"), std::string::npos);
  KvLayout other = SmallLayout(4);
  other.n_layers = 3;
  auto cache3 = MakeCache(other);
  EXPECT_EQ(RestoreError(*cache3, bytes, TestDigest(1)), SnapshotError::kGeometry);
  EXPECT_EQ(SnapshotErrorOf(Status()), SnapshotError::kNone);
  EXPECT_EQ(SnapshotErrorOf(InvalidArgumentError("x")), SnapshotError::kNone);
}

// What each byte of the file is for decides the error its corruption gives.
SnapshotError ExpectedForCorruptByte(size_t i, size_t size) {
  if (i < 8) return SnapshotError::kBadMagic;
  if (i < 12) return SnapshotError::kUnsupportedVersion;
  if (i < 16) return SnapshotError::kChecksum;   // flags
  if (i < 44) return SnapshotError::kBadLength;  // geometry, precision, positions, section count
  if (i < 80) return SnapshotError::kChecksum;   // reserved, weight digest
  if (i < 128) {                                 // section table: kind, flags, offset, size
    const size_t f = (i - 80) % 24;
    return (f >= 4 && f < 8) ? SnapshotError::kChecksum : SnapshotError::kBadLength;
  }
  (void)size;
  return SnapshotError::kChecksum;  // tokens, KV, the CRC itself
}

TEST(Snapshot, EverySingleByteCorruptionIsRefusedWithItsError) {
  auto cache = MakeCache(SmallLayout(4));
  Context c = cache->NewContext();
  Fill(c, 10, 1);  // three pages
  const Digest d = TestDigest(1);
  const auto good = Snap(c, d);
  const auto before = cache->Stats();
  for (size_t i = 0; i < good.size(); ++i) {
    for (uint8_t flip : {uint8_t{0x01}, uint8_t{0x80}, uint8_t{0xFF}}) {
      auto bad = good;
      bad[i] ^= flip;
      const SnapshotError got = RestoreError(*cache, bad, d);
      ASSERT_EQ(got, ExpectedForCorruptByte(i, good.size()))
          << "byte " << i << " ^ " << int(flip) << ": " << SnapshotErrorName(got);
    }
  }
  const auto after = cache->Stats();
  EXPECT_EQ(after.pages_live, before.pages_live);
  EXPECT_EQ(after.contexts_live, before.contexts_live);
  ExpectInvariants(*cache);
}

TEST(Snapshot, EveryTruncationIsRefusedAsTruncated) {
  auto cache = MakeCache(SmallLayout(4));
  Context c = cache->NewContext();
  Fill(c, 10, 1);
  const Digest d = TestDigest(1);
  const auto good = Snap(c, d);
  for (size_t n = 0; n < good.size(); ++n)
    ASSERT_EQ(RestoreError(*cache, std::span(good.data(), n), d), SnapshotError::kTruncated) << n;
  auto longer = good;
  longer.push_back(0);
  EXPECT_EQ(RestoreError(*cache, longer, d), SnapshotError::kBadLength);
  EXPECT_EQ(cache->Stats().pages_live, c.n_pages());
}

std::vector<uint8_t> WithCrc(std::vector<uint8_t> b) {
  const uint32_t crc = Crc32c(b.data(), b.size() - 4);
  std::memcpy(b.data() + b.size() - 4, &crc, 4);
  return b;
}

// Regression: Restore believed the length it was told. A declared length beyond 16M positions is refused
// by name, and any declared length the bytes cannot back is refused before positions are allocated.
TEST(Regression, RestoreDoesNotTrustDeclaredLengths) {
  auto cache = MakeCache(SmallLayout(4));
  Context c = cache->NewContext();
  Fill(c, 10, 1);
  const Digest d = TestDigest(1);
  auto good = Snap(c, d);
  const auto before = cache->Stats().pages_allocated_total;
  for (uint64_t claim : {uint64_t{1} << 24 | 1, uint64_t{1} << 40, ~uint64_t{0}}) {
    auto bad = good;
    std::memcpy(bad.data() + 32, &claim, 8);
    auto r = RestoreSnapshot(*cache, WithCrc(bad), d);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(SnapshotErrorOf(r.status()), SnapshotError::kBadLength);
    EXPECT_NE(r.status().message().find("16777216"), std::string::npos) << r.status().message();
  }
  // Within the limit but more than the bytes hold, with section sizes claiming to match.
  auto bad = good;
  const uint64_t n = 1u << 24;
  std::memcpy(bad.data() + 32, &n, 8);
  const uint64_t tok = n * 4, kv = n * 2 * 2 * 128;
  std::memcpy(bad.data() + 80 + 16, &tok, 8);
  const uint64_t kv_off = 128 + tok;
  std::memcpy(bad.data() + 104 + 8, &kv_off, 8);
  std::memcpy(bad.data() + 104 + 16, &kv, 8);
  EXPECT_EQ(RestoreError(*cache, WithCrc(bad), d), SnapshotError::kTruncated);
  EXPECT_EQ(cache->Stats().pages_allocated_total, before) << "a refused restore allocated pages";
}

// Later versions may add sections; this reader skips the kinds it does not know unless marked required.
TEST(Snapshot, SkipsUnknownOptionalSectionsAndRefusesRequiredOnes) {
  auto cache = MakeCache(SmallLayout(4));
  Context c = cache->NewContext();
  Fill(c, 5, 1);
  const Digest d = TestDigest(1);
  const auto good = Snap(c, d);
  for (uint32_t flags : {0u, 1u}) {
    // Header with 3 sections; the extra (kind 99, 6 bytes) goes first.
    std::vector<uint8_t> b(good.begin(), good.begin() + 80);
    const uint32_t three = 3;
    std::memcpy(b.data() + 40, &three, 4);
    auto put = [&](uint32_t kind, uint32_t fl, uint64_t off, uint64_t sz) {
      for (uint64_t v : {uint64_t{kind} | uint64_t{fl} << 32, off, sz})
        b.insert(b.end(), reinterpret_cast<uint8_t*>(&v), reinterpret_cast<uint8_t*>(&v) + 8);
    };
    const uint64_t base = 80 + 72, tok = 20, kv = good.size() - 4 - 128 - tok;
    put(99, flags, base, 6);
    put(1, 0, base + 6, tok);
    put(2, 0, base + 6 + tok, kv);
    b.insert(b.end(), {1, 2, 3, 4, 5, 6});
    b.insert(b.end(), good.begin() + 128, good.end());
    b = WithCrc(b);
    auto r = RestoreSnapshot(*cache, b, d);
    if (flags == 0) {
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(ReadAll(*r), ReadAll(c));
    } else {
      EXPECT_EQ(SnapshotErrorOf(r.status()), SnapshotError::kUnsupportedVersion);
    }
  }
}

TEST(Snapshot, SaveIsAtomicAndLoadReadsIt) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("llamay_snap_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto cache = MakeCache(SmallLayout(4));
  Context c = cache->NewContext();
  Fill(c, 9, 1);
  const Digest d = TestDigest(1);
  const std::string path = (dir / "a.llamayctx").string();
  ASSERT_TRUE(SaveSnapshot(c, d, path).ok());
  auto r = LoadSnapshot(*cache, path, d);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(ReadAll(*r), ReadAll(c));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
  auto missing = LoadSnapshot(*cache, (dir / "none").string(), d);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  fs::remove_all(dir);
}

TEST(Snapshot, RestoreUnderMemoryPressureFailsCleanly) {
  KvLayout l = SmallLayout(4);
  auto cache = MakeCache(l, 0, 3 * l.page_bytes());
  Context c = cache->NewContext();
  Fill(c, 10, 1);  // 3 pages: the budget is full
  const auto bytes = Snap(c, TestDigest(1));
  auto r = RestoreSnapshot(*cache, bytes, TestDigest(1));
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(cache->Stats().pages_live, 3u);
  EXPECT_EQ(cache->Stats().contexts_live, 1u);
  ExpectInvariants(*cache);
}

// Restores of a MiB or more take the streaming-store path, and the CRC is checked a chunk at a time while
// the pages are filled: the values must still be exact, and damage late in the KV section (after most pages
// were filled) must still refuse the file and release every page.
TEST(Snapshot, LargeRestoreIsExactAndRefusesLateDamage) {
  KvLayout l;
  l.n_layers = 2;
  l.n_kv_heads = 8;
  l.head_dim = 64;  // f16 rows of 1 KiB: 4 KiB per position
  l.page_tokens = 64;
  l.precision = KvPrecision::kF16;
  auto cache = MakeCache(l);
  Context c = cache->NewContext();
  Fill(c, 601, 4);  // 2.3 MiB of KV, not a whole number of pages or CRC chunks
  const Digest d = TestDigest(3);
  for (bool native : {true, false}) {
    SCOPED_TRACE(native ? "f16 on disk" : "f32 on disk");
    const auto good = Snap(c, d, native);
    auto r = RestoreSnapshot(*cache, good, d);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->tokens(), c.tokens());
    EXPECT_EQ(ReadAll(*r), ReadAll(c));
    r->Close();
    const auto before = cache->Stats();
    for (size_t at : {good.size() - 5, good.size() / 2, good.size() - 1}) {
      auto bad = good;
      bad[at] ^= 0x10;
      EXPECT_EQ(RestoreError(*cache, bad, d), SnapshotError::kChecksum) << "byte " << at;
    }
    EXPECT_EQ(cache->Stats().pages_live, before.pages_live);
    EXPECT_EQ(cache->Stats().contexts_live, before.contexts_live);
    ExpectInvariants(*cache);
  }
}

// A damaged file must not cost the prefix tree anything: when the pages would only fit by evicting, the
// checksum is verified before any page is allocated.
TEST(Snapshot, DamagedSnapshotNeverEvicts) {
  KvLayout l = SmallLayout(4);
  auto cache = MakeCache(l, 0, 6 * l.page_bytes());
  const Digest d = TestDigest(1);
  std::vector<uint8_t> good;
  for (int salt : {1, 2}) {
    Context c = cache->NewContext();
    Fill(c, 10, salt, salt * 100);  // 3 pages each: the budget is full of evictable tree entries
    if (good.empty()) good = Snap(c, d);
    ASSERT_TRUE(cache->Retain(c).ok());
  }
  ASSERT_EQ(cache->Stats().tree_entries, 2u);
  auto bad = good;
  bad[bad.size() - 10] ^= 1;
  EXPECT_EQ(RestoreError(*cache, bad, d), SnapshotError::kChecksum);
  EXPECT_EQ(cache->Stats().tree_entries, 2u) << "a damaged snapshot evicted a tree entry";
  EXPECT_EQ(cache->Stats().tree_evictions, 0u);
  auto r = RestoreSnapshot(*cache, good, d);  // an intact one may evict to fit
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_LT(cache->Stats().tree_entries, 2u);
  ExpectInvariants(*cache);
}

// Golden files from earlier builds must keep loading. LLAMAY_WRITE_GOLDEN=1 regenerates them (only when
// the format gains a version; old files stay).
TEST(Snapshot, GoldenFilesOfVersion1StillLoad) {
  const std::string dir = std::string(LLAMAY_SOURCE_DIR) + "/src/kv/testdata/";
  struct Golden {
    const char* name;
    KvPrecision cache_precision;
    bool native;
  };
  for (const Golden& g : {Golden{"snapshot_v1_f32.llamayctx", KvPrecision::kF32, false},
                          Golden{"snapshot_v1_q8_0.llamayctx", KvPrecision::kQ8_0, true}}) {
    SCOPED_TRACE(g.name);
    auto cache = MakeCache(SmallLayout(4, g.cache_precision));
    Context c = cache->NewContext();
    Fill(c, 9, 11);
    const Digest d = TestDigest(9);
    if (std::getenv("LLAMAY_WRITE_GOLDEN")) {
      SnapshotOptions o;
      o.native_precision = g.native;
      ASSERT_TRUE(SaveSnapshot(c, d, dir + g.name, o).ok());
    }
    auto r = LoadSnapshot(*cache, dir + g.name, d);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->tokens(), Iota(9));
    EXPECT_EQ(ReadAll(*r), ReadAll(c));
  }
}

}  // namespace
}  // namespace llamay::kv
