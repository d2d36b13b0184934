// SnapshotReceiver against RestoreSnapshot: the same bytes, fed in pieces of random sizes, give the same
// outcome (the same refusal, or the same tokens, values and logits), and a refusal leaves the cache as it
// was.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "base/crc32c.h"
#include "kv/snapshot.h"
#include "kv/test_util.h"

namespace llamay::kv {
namespace {

using namespace testing_util;

Digest D(uint8_t seed) {
  Digest d;
  for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<uint8_t>(seed * 7 + i);
  return d;
}

std::vector<uint8_t> Snap(const Context& c, const Digest& d, bool native, std::span<const float> logits = {},
                          bool kv_checksums = false) {
  SnapshotOptions o;
  o.native_precision = native;
  o.logits = logits;
  o.kv_checksums = kv_checksums;
  auto b = SnapshotToBytes(c, d, o);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  return *b;
}

// Feeds `bytes` in pieces whose sizes come from `rng` (1 byte up to a few KiB, sometimes all at once).
Result<Context> Receive(Cache& cache, std::span<const uint8_t> bytes, const Digest& d, std::mt19937& rng,
                        std::vector<float>* logits, bool* streamed = nullptr) {
  SnapshotReceiver r(cache, d);
  size_t at = 0;
  const int style = static_cast<int>(rng() % 4);
  while (at < bytes.size()) {
    size_t n = style == 0 ? bytes.size() : style == 1 ? 1 + rng() % 7 : 1 + rng() % (style == 2 ? 300 : 5000);
    n = std::min(n, bytes.size() - at);
    Status s = r.Feed(bytes.subspan(at, n));
    at += n;
    if (!s.ok()) break;
  }
  if (streamed) *streamed = r.streaming();
  return r.Finish(logits);
}

// The outcome of a restore, comparable across the two paths.
struct Outcome {
  SnapshotError error = SnapshotError::kNone;
  StatusCode code = StatusCode::kOk;
  std::vector<int32_t> tokens;
  std::vector<float> values, logits;
  bool operator==(const Outcome&) const = default;
};

// Every readable row, position-major (a recurrent layer's, or a released window's, reads as one NaN), then
// the recurrent state's bytes.
std::vector<float> Values(const Context& c) {
  const KvLayout& l = c.layout();
  std::vector<float> out, row(l.row_elems());
  for (size_t p = 0; p < c.size(); ++p)
    for (uint32_t layer = 0; layer < l.n_layers; ++layer)
      for (KvKind k : {KvKind::kKey, KvKind::kValue}) {
        if (c.ReadRow(p, layer, k, row).ok()) {
          out.insert(out.end(), row.begin(), row.end());
        } else {
          out.push_back(-1e30f);
        }
      }
  if (const uint8_t* st = c.StateData())
    for (size_t i = 0; i < l.recurrent_bytes(); ++i) out.push_back(st[i]);
  return out;
}

Outcome Of(Result<Context> r, const std::vector<float>& logits) {
  Outcome o;
  if (!r.ok()) {
    o.error = SnapshotErrorOf(r.status());
    o.code = r.status().code();
    return o;
  }
  o.tokens = r->tokens();
  o.values = Values(*r);
  o.logits = logits;
  return o;
}

void ExpectSameOutcome(Cache& cache, std::span<const uint8_t> bytes, const Digest& d, std::mt19937& rng,
                       const std::string& what) {
  SCOPED_TRACE(what);
  const auto before = cache.Stats().pages_live;
  std::vector<float> la, lb;
  const Outcome want = Of(RestoreSnapshot(cache, bytes, d, &la), la);
  ASSERT_EQ(cache.Stats().pages_live, before);
  for (int rep = 0; rep < 4; ++rep) {
    const Outcome got = Of(Receive(cache, bytes, d, rng, &lb), lb);
    EXPECT_EQ(got.error, want.error) << "rep " << rep;
    EXPECT_EQ(got.code, want.code);
    EXPECT_TRUE(got == want) << "rep " << rep << ": the restored context differs";
    EXPECT_EQ(cache.Stats().pages_live, before) << "pages left behind";
  }
  ExpectInvariants(cache);
}

TEST(SnapshotReceiver, StreamsValidFilesIntoPagesAtEveryPrecision) {
  std::mt19937 rng(1);
  for (KvPrecision p : {KvPrecision::kF32, KvPrecision::kF16, KvPrecision::kQ8_0}) {
    for (bool native : {false, true}) {
      for (bool with_logits : {false, true}) {
        auto cache = MakeCache(SmallLayout(4, p));
        Context c = cache->NewContext();
        Fill(c, 23, 5);
        std::vector<float> logits = {1.5f, -2.0f, 0.25f};
        const auto bytes = Snap(c, D(1), native, with_logits ? std::span<const float>(logits) : std::span<const float>());
        // Another page size: position-major files do not care.
        auto other = MakeCache(SmallLayout(8, p));
        bool streamed = false;
        std::vector<float> got_logits;
        auto r = Receive(*other, bytes, D(1), rng, &got_logits, &streamed);
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        EXPECT_TRUE(streamed) << "a file of this cache's model should stream into pages";
        EXPECT_EQ(r->tokens(), c.tokens());
        const auto a = ReadAll(c), b = ReadAll(*r);
        ASSERT_EQ(a.size(), b.size());
        EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4));
        EXPECT_EQ(got_logits, with_logits ? logits : std::vector<float>());
        ExpectSameOutcome(*other, bytes, D(1), rng, std::string(KvPrecisionName(p)));
      }
    }
  }
}

TEST(SnapshotReceiver, EveryDamageIsRefusedAsRestoreSnapshotRefusesIt) {
  std::mt19937 rng(2);
  auto cache = MakeCache(SmallLayout(4, KvPrecision::kF16));
  Context c = cache->NewContext();
  Fill(c, 13, 9);
  std::vector<float> logits(5, 0.5f);
  for (bool with_logits : {false, true}) {
    const auto good = Snap(c, D(3), true, with_logits ? std::span<const float>(logits) : std::span<const float>());
    ExpectSameOutcome(*cache, good, D(3), rng, "intact");
    ExpectSameOutcome(*cache, good, D(4), rng, "another model");
    // Every single-byte flip in the header and table, and a sample elsewhere.
    for (size_t i = 0; i < good.size(); i += i < 200 ? 1 : 97) {
      auto bad = good;
      bad[i] ^= 0x41;
      ExpectSameOutcome(*cache, bad, D(3), rng, "byte " + std::to_string(i) + " flipped");
    }
    for (size_t cut : {size_t{0}, size_t{5}, size_t{79}, size_t{100}, good.size() / 2, good.size() - 5, good.size() - 1}) {
      ExpectSameOutcome(*cache, std::span(good).first(cut), D(3), rng, "cut at " + std::to_string(cut));
    }
    auto longer = good;
    longer.push_back(0);
    ExpectSameOutcome(*cache, longer, D(3), rng, "a byte after the checksum");
  }
  // Another geometry.
  auto wide = MakeCache(SmallLayout(4, KvPrecision::kF16));
  KvLayout l = SmallLayout(4, KvPrecision::kF16);
  l.n_kv_heads = 4;
  auto other_geometry = MakeCache(l);
  ExpectSameOutcome(*other_geometry, Snap(c, D(3), true), D(3), rng, "another geometry");
}

TEST(SnapshotReceiver, BuffersWhatCannotStreamAndStillRestoresIt) {
  std::mt19937 rng(3);
  // A hybrid layout: buffered, restored whole.
  KvLayout h = SmallLayout(4);
  h.n_layers = 3;
  h.layer_specs = {{LayerKind::kAttention, 0}, {LayerKind::kRecurrent, 0}, {LayerKind::kAttention, 8}};
  h.recurrent_layer_bytes = 16;
  auto hc = MakeCache(h);
  Context c = hc->NewContext();
  ASSERT_TRUE(c.Append(Iota(10)).ok());
  for (size_t p = 0; p < 10; ++p)
    for (uint32_t layer : {0u, 2u})
      for (KvKind k : {KvKind::kKey, KvKind::kValue}) ASSERT_TRUE(c.WriteRow(p, layer, k, RowValues(h, p, layer, k, 1)).ok());
  auto st = c.MutableState();
  ASSERT_TRUE(st.ok());
  std::memset(*st, 7, 16);
  ASSERT_TRUE(c.CommitState(10).ok());
  const auto bytes = Snap(c, D(5), false);
  bool streamed = true;
  std::vector<float> lg;
  auto r = Receive(*hc, bytes, D(5), rng, &lg, &streamed);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(streamed);
  EXPECT_EQ(r->tokens(), c.tokens());
  EXPECT_EQ(0, std::memcmp(r->StateData(), c.StateData(), 16));
  ExpectSameOutcome(*hc, bytes, D(5), rng, "hybrid");

  // A cache that would have to evict to hold it: buffered (a damaged file must not evict anything).
  const KvLayout small = SmallLayout(4, KvPrecision::kF32);
  auto tight = MakeCache(small, /*arena_pages=*/4);
  Context big = tight->NewContext();
  Fill(big, 12, 2);  // 3 of 4 slots
  const auto file = Snap(big, D(6), false);
  Context keep = std::move(big);
  bool s2 = true;
  auto r2 = Receive(*tight, file, D(6), rng, &lg, &s2);
  EXPECT_FALSE(s2);
  EXPECT_FALSE(r2.ok());  // 3 more pages do not fit
  EXPECT_EQ(ReadAll(keep).size(), size_t{12} * 2 * 2 * 32);
}

// KV_CHECKSUMS: a CRC per 1 MiB chunk of the KV section, ahead of it. Whole files restore as before; a
// chunk damaged in transit is refused as soon as it has arrived, long before the file's end; a file whose
// chunk CRCs disagree with its bytes is refused even when its whole CRC was recomputed to match.
TEST(SnapshotReceiver, ChunkChecksumsRefuseADamagedChunkAsSoonAsItArrives) {
  std::mt19937 rng(4);
  auto cache = MakeCache(SmallLayout(16, KvPrecision::kF32));
  Context c = cache->NewContext();
  Fill(c, 6000, 2);  // 3 MB of KV: three chunks
  const auto plain = Snap(c, D(7), true);
  const auto sealed = Snap(c, D(7), true, {}, /*kv_checksums=*/true);
  auto info = InspectSnapshot(sealed);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->kv_checksum_chunk, uint64_t{1} << 20);
  EXPECT_EQ(info->version, 2u);
  // Version 2 adds two table entries, the layout (8 per layer + 8) and the checksums (16 + 4 per chunk).
  ASSERT_EQ(sealed.size(), plain.size() + 2 * 24 + (8 * 2 + 8) + 16 + 3 * 4);
  ExpectSameOutcome(*cache, sealed, D(7), rng, "sealed, intact");
  for (size_t at : {info->kv_offset + 10, info->kv_offset + (size_t{1} << 20) + 5, sealed.size() - 30}) {
    auto bad = sealed;
    bad[at] ^= 0x20;
    ExpectSameOutcome(*cache, bad, D(7), rng, "sealed, byte " + std::to_string(at));
  }
  // Damage in the first chunk: the receiver refuses it once that chunk is in, with 2 MB still to come.
  auto bad = sealed;
  bad[info->kv_offset + 100] ^= 1;
  SnapshotReceiver r(*cache, D(7));
  const size_t first_chunk_end = info->kv_offset + (size_t{1} << 20);
  Status st = r.Feed(std::span(bad).first(first_chunk_end));
  EXPECT_EQ(SnapshotErrorOf(st), SnapshotError::kChecksum) << st.ToString();
  EXPECT_EQ(SnapshotErrorOf(r.Finish().status()), SnapshotError::kChecksum);
  EXPECT_EQ(cache->Stats().pages_live, c.n_pages());
  // The whole CRC recomputed over a damaged KV byte: only the chunk CRCs catch it, on both paths.
  auto resealed = sealed;
  resealed[info->kv_offset + (size_t{2} << 20) + 1] ^= 4;
  const uint32_t crc = Crc32c(resealed.data(), resealed.size() - 4);
  std::memcpy(resealed.data() + resealed.size() - 4, &crc, 4);
  EXPECT_EQ(SnapshotErrorOf(RestoreSnapshot(*cache, resealed, D(7)).status()), SnapshotError::kChecksum);
  ExpectSameOutcome(*cache, resealed, D(7), rng, "resealed");
  ExpectInvariants(*cache);
}

}  // namespace
}  // namespace llamay::kv
