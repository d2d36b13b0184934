// Snapshot format version 2: hybrid and windowed layouts, checkpoints and logits; every refusal.
#include <gtest/gtest.h>

#include <cstring>

#include "kv/snapshot.h"
#include "kv/test_util.h"

namespace llamay::kv {
namespace {

using namespace testing_util;

constexpr size_t kLayerState = 40;

// Full attention, recurrent, windowed attention (window 8).
KvLayout Hybrid(uint32_t page_tokens = 4, KvPrecision p = KvPrecision::kF32, uint32_t window = 8) {
  KvLayout l = SmallLayout(page_tokens, p);
  l.n_layers = 3;
  l.layer_specs = {{LayerKind::kAttention, 0}, {LayerKind::kRecurrent, 0}, {LayerKind::kAttention, window}};
  l.recurrent_layer_bytes = kLayerState;
  return l;
}

Digest D(uint8_t seed) {
  Digest d;
  for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<uint8_t>(seed + i);
  return d;
}

// Appends n positions, writes every attention row, and advances the state (a byte pattern of the size).
void Grow(Context& c, size_t n, int salt) {
  const size_t start = c.size();
  ASSERT_TRUE(c.Append(Iota(n, static_cast<int32_t>(start))).ok());
  const KvLayout& l = c.layout();
  for (size_t p = start; p < start + n; ++p)
    for (uint32_t layer : {0u, 2u})
      for (KvKind k : {KvKind::kKey, KvKind::kValue})
        ASSERT_TRUE(c.WriteRow(p, layer, k, RowValues(l, p, layer, k, salt)).ok());
  auto st = c.MutableState();
  ASSERT_TRUE(st.ok());
  for (size_t i = 0; i < kLayerState; ++i) (*st)[i] = static_cast<uint8_t>(c.size() + i);
  ASSERT_TRUE(c.CommitState(c.size()).ok());
}

std::vector<float> Row(const Context& c, size_t pos, uint32_t layer, KvKind kind) {
  std::vector<float> row(c.layout().row_elems());
  EXPECT_TRUE(c.ReadRow(pos, layer, kind, row).ok()) << "pos " << pos << " layer " << layer;
  return row;
}

std::vector<uint8_t> State(const Context& c) {
  const uint8_t* s = c.StateData();
  return s ? std::vector<uint8_t>(s, s + kLayerState) : std::vector<uint8_t>(kLayerState, 0);
}

TEST(SnapshotV2, HybridRoundTripIsExactIntoAnotherPageSize) {
  auto a = MakeCache(Hybrid(4));
  Context c = a->NewContext();
  Grow(c, 8, 1);
  ASSERT_TRUE(c.Checkpoint().ok());
  Grow(c, 29, 2);  // 37 positions
  SnapshotOptions o;
  o.checkpoints = true;
  const std::vector<float> logits = {0.5f, -1.25f, 3.0f};
  o.logits = logits;
  auto bytes = SnapshotToBytes(c, D(1), o);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto info = InspectSnapshot(*bytes);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->version, 2u);
  EXPECT_EQ(info->state_position, 37u);
  EXPECT_EQ(info->n_checkpoints, 1u);
  EXPECT_EQ(info->n_logits, 3u);

  auto b = MakeCache(Hybrid(8));  // another page size
  std::vector<float> got;
  auto r = RestoreSnapshot(*b, *bytes, D(1), &got);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(got, logits);
  EXPECT_EQ(r->tokens(), c.tokens());
  EXPECT_EQ(State(*r), State(c));
  EXPECT_EQ(r->state_position(), 37u);
  EXPECT_EQ(r->CheckpointPositions(), std::vector<size_t>({8}));
  for (size_t p = 0; p < 37; ++p)
    for (KvKind k : {KvKind::kKey, KvKind::kValue}) {
      EXPECT_EQ(Row(*r, p, 0, k), Row(c, p, 0, k));
      if (p >= 37 - 8 + 1) {
        EXPECT_EQ(Row(*r, p, 2, k), Row(c, p, 2, k));  // the window a query at 37 reads
      }
    }
  // Only the window is stored: the windowed layer's early pages are not there.
  std::vector<float> row(b->layout().row_elems());
  EXPECT_EQ(r->ReadRow(0, 2, KvKind::kKey, row).code(), StatusCode::kFailedPrecondition);
  // Rolling back to the checkpoint would need the window before position 8, which was not stored.
  EXPECT_EQ(r->Rollback(8).code(), StatusCode::kFailedPrecondition);
  ExpectInvariants(*b);
}

TEST(SnapshotV2, RestoredCheckpointsRollBackExactly) {
  auto a = MakeCache(Hybrid(4, KvPrecision::kF32, 64));  // a window wider than the context
  Context c = a->NewContext();
  Grow(c, 8, 1);
  ASSERT_TRUE(c.Checkpoint().ok());
  const auto state8 = State(c);
  const auto row8 = Row(c, 7, 2, KvKind::kKey);
  Grow(c, 13, 2);
  SnapshotOptions o;
  o.checkpoints = true;
  auto bytes = SnapshotToBytes(c, D(1), o);
  ASSERT_TRUE(bytes.ok());
  auto r = RestoreSnapshot(*a, *bytes, D(1));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->Rollback(8).ok());
  EXPECT_EQ(State(*r), state8);
  EXPECT_EQ(Row(*r, 7, 2, KvKind::kKey), row8);
  // Without the checkpoints in the file, the same rollback is refused.
  auto plain = RestoreSnapshot(*a, *SnapshotToBytes(c, D(1)), D(1));
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->Rollback(8).code(), StatusCode::kFailedPrecondition);
  ExpectInvariants(*a);
}

TEST(SnapshotV2, AWindowedSnapshotHoldsOnlyWhatARestoreNeeds) {
  KvLayout l = SmallLayout(4);
  l.layer_specs = {{LayerKind::kAttention, 8}, {LayerKind::kAttention, 8}};
  auto cache = MakeCache(l);
  Context c = cache->NewContext();
  Fill(c, 1000, 3);
  auto bytes = SnapshotToBytes(c, D(2));
  ASSERT_TRUE(bytes.ok());
  // 8 - 1 positions of 2 layers x K,V x 32 f32, plus 4 bytes of token per position and the header.
  EXPECT_LT(bytes->size(), 1000 * 4 + 7 * 2 * 2 * 32 * 4 + 400u);
  auto r = RestoreSnapshot(*cache, *bytes, D(2));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (size_t p = 993; p < 1000; ++p) EXPECT_EQ(Row(*r, p, 1, KvKind::kValue), Row(c, p, 1, KvKind::kValue));
  EXPECT_EQ(r->n_pages(), 2u);  // one group (one window): positions 993..999 in pages 248 and 249
  ExpectInvariants(*cache);
}

TEST(SnapshotV2, PureRecurrentLayoutsRoundTrip) {
  KvLayout l;
  l.n_layers = 1;
  l.page_tokens = 4;
  l.layer_specs = {{LayerKind::kRecurrent, 0}};
  l.recurrent_layer_bytes = kLayerState;
  auto cache = MakeCache(l);
  Context c = cache->NewContext();
  ASSERT_TRUE(c.Append(Iota(5)).ok());
  auto st = c.MutableState();
  ASSERT_TRUE(st.ok());
  std::memset(*st, 0x5A, kLayerState);
  ASSERT_TRUE(c.CommitState(5).ok());
  auto bytes = SnapshotToBytes(c, D(3));
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto r = RestoreSnapshot(*cache, *bytes, D(3));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(State(*r), State(c));
  EXPECT_EQ(r->state_position(), 5u);
  EXPECT_EQ(r->n_pages(), 0u);
}

TEST(SnapshotV2, PureAttentionStaysVersion1UnlessAskedForMore) {
  auto cache = MakeCache(SmallLayout(4));
  Context c = cache->NewContext();
  Fill(c, 10, 4);
  auto v1 = SnapshotToBytes(c, D(4));
  ASSERT_TRUE(v1.ok());
  EXPECT_EQ(InspectSnapshot(*v1)->version, 1u);
  SnapshotOptions o;
  const std::vector<float> logits = {1.0f, 2.0f};
  o.logits = logits;
  auto v2 = SnapshotToBytes(c, D(4), o);
  ASSERT_TRUE(v2.ok());
  EXPECT_EQ(InspectSnapshot(*v2)->version, 2u);
  std::vector<float> got;
  auto r = RestoreSnapshot(*cache, *v2, D(4), &got);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(got, logits);
  EXPECT_EQ(ReadAll(*r), ReadAll(c));
  // A version 1 file has no logits: the out-parameter is cleared.
  ASSERT_TRUE(RestoreSnapshot(*cache, *v1, D(4), &got).ok());
  EXPECT_TRUE(got.empty());
}

TEST(SnapshotV2, AnotherLayerMapIsAnotherModel) {
  auto a = MakeCache(Hybrid(4));
  Context c = a->NewContext();
  Grow(c, 12, 5);
  auto bytes = SnapshotToBytes(c, D(5));
  ASSERT_TRUE(bytes.ok());
  auto other_window = MakeCache(Hybrid(4, KvPrecision::kF32, 16));
  EXPECT_EQ(SnapshotErrorOf(RestoreSnapshot(*other_window, *bytes, D(5)).status()), SnapshotError::kWrongModel);
  auto pure = MakeCache(SmallLayout(4));
  EXPECT_EQ(SnapshotErrorOf(RestoreSnapshot(*pure, *bytes, D(5)).status()), SnapshotError::kWrongModel);
  EXPECT_EQ(SnapshotErrorOf(RestoreSnapshot(*a, *bytes, D(6)).status()), SnapshotError::kWrongModel);
  KvLayout wide = Hybrid(4);
  wide.n_kv_heads = 4;
  auto rows = MakeCache(wide);
  EXPECT_EQ(SnapshotErrorOf(RestoreSnapshot(*rows, *bytes, D(5)).status()), SnapshotError::kGeometry);
  // Into another precision: converted.
  auto f16 = MakeCache(Hybrid(4, KvPrecision::kF16));
  EXPECT_TRUE(RestoreSnapshot(*f16, *bytes, D(5)).ok());
}

// A model that appended a tail to its recurrent state (KvLayout::recurrent_legacy_layer_bytes) still loads
// the snapshots of the shorter state, each layer's bytes zero-extended, checkpoints too; any other size is
// another model.
TEST(SnapshotV2, AStateOfTheLegacySizeLoadsZeroExtendedLayerByLayer) {
  KvLayout old_layout = SmallLayout(4);
  old_layout.n_layers = 3;
  old_layout.layer_specs = {
      {LayerKind::kAttention, 0}, {LayerKind::kRecurrent, 0}, {LayerKind::kRecurrent, 0}};
  old_layout.recurrent_layer_bytes = 40;
  auto a = MakeCache(old_layout);
  Context c = a->NewContext();
  auto fill = [&](int salt) {
    auto st = c.MutableState();
    ASSERT_TRUE(st.ok());
    for (size_t i = 0; i < 80; ++i) (*st)[i] = static_cast<uint8_t>(salt + i);
    ASSERT_TRUE(c.CommitState(c.size()).ok());
  };
  ASSERT_TRUE(c.Append(Iota(8, 0)).ok());
  fill(1);
  ASSERT_TRUE(c.Checkpoint().ok());
  ASSERT_TRUE(c.Append(Iota(5, 8)).ok());
  fill(100);
  SnapshotOptions o;
  o.checkpoints = true;
  auto bytes = SnapshotToBytes(c, D(3), o);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();

  KvLayout grown = old_layout;
  grown.recurrent_layer_bytes = 56;
  grown.recurrent_legacy_layer_bytes = 40;
  auto b = MakeCache(grown);
  auto r = RestoreSnapshot(*b, *bytes, D(3));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto widened = [](int salt) {
    std::vector<uint8_t> w(112, 0);
    for (size_t l = 0; l < 2; ++l)
      for (size_t i = 0; i < 40; ++i) w[l * 56 + i] = static_cast<uint8_t>(salt + l * 40 + i);
    return w;
  };
  ASSERT_NE(r->StateData(), nullptr);
  EXPECT_EQ(std::vector<uint8_t>(r->StateData(), r->StateData() + 112), widened(100));
  EXPECT_EQ(r->state_position(), 13u);
  ASSERT_TRUE(r->Rollback(8).ok());
  EXPECT_EQ(std::vector<uint8_t>(r->StateData(), r->StateData() + 112), widened(1));
  ExpectInvariants(*b);

  // Without the declaration, or with another earlier size, the map differs: another model.
  grown.recurrent_legacy_layer_bytes = 0;
  auto none = MakeCache(grown);
  EXPECT_EQ(SnapshotErrorOf(RestoreSnapshot(*none, *bytes, D(3)).status()), SnapshotError::kWrongModel);
  grown.recurrent_legacy_layer_bytes = 32;
  auto other = MakeCache(grown);
  EXPECT_EQ(SnapshotErrorOf(RestoreSnapshot(*other, *bytes, D(3)).status()), SnapshotError::kWrongModel);
  // An "earlier" size that is not shorter is not a layout.
  grown.recurrent_legacy_layer_bytes = 56;
  EXPECT_FALSE(grown.Validate().ok());
}

TEST(SnapshotV2, EveryCorruptionAndTruncationIsRefusedAndChangesNothing) {
  auto cache = MakeCache(Hybrid(4));
  Context c = cache->NewContext();
  Grow(c, 6, 1);
  ASSERT_TRUE(c.Checkpoint().ok());
  Grow(c, 5, 2);
  SnapshotOptions o;
  o.checkpoints = true;
  const std::vector<float> logits = {1.0f};
  o.logits = logits;
  const auto good = *SnapshotToBytes(c, D(7), o);
  const CacheStats before = cache->Stats();
  for (size_t i = 0; i < good.size(); ++i)
    for (uint8_t flip : {uint8_t{0x01}, uint8_t{0x80}}) {
      auto bad = good;
      bad[i] ^= flip;
      auto r = RestoreSnapshot(*cache, bad, D(7));
      ASSERT_FALSE(r.ok()) << "byte " << i << " ^ " << int(flip) << " was accepted";
      ASSERT_NE(SnapshotErrorOf(r.status()), SnapshotError::kNone) << r.status().ToString();
    }
  for (size_t n = 0; n < good.size(); ++n) {
    auto r = RestoreSnapshot(*cache, std::span(good.data(), n), D(7));
    ASSERT_EQ(SnapshotErrorOf(r.status()), SnapshotError::kTruncated) << n << ": " << r.status().ToString();
  }
  const CacheStats after = cache->Stats();
  EXPECT_EQ(after.pages_live, before.pages_live);
  EXPECT_EQ(after.bytes_live, before.bytes_live);
  EXPECT_EQ(after.contexts_live, before.contexts_live);
  ExpectInvariants(*cache);
}

}  // namespace
}  // namespace llamay::kv
