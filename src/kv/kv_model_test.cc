// Lockstep model test: random operation sequences run against the real cache and against a reference
// that shares nothing (every context holds its own copy of every position; the prefix tree is a flat
// list scanned linearly). After every step the whole invariant set is asserted:
//   - Cache::CheckInvariants (refcount == holders, no freed page held, allocated - freed == live, arena
//     slots out == live pages and none claimed twice, the tree is a well-formed radix tree, ...);
//   - every live context reads exactly the reference's tokens and values (a position keeps its value
//     unless its own context writes it);
//   - the tree's entries (tokens, pinned, last use) and next eviction victim equal the flat list's.
// At the end, closing everything and clearing the tree returns pool and arena to empty.
//
// Default run: LLAMAY_KV_SEEDS (20) seeds x LLAMAY_KV_OPS (300) operations per configuration.
// The full proof: LLAMAY_KV_SEEDS=500 LLAMAY_KV_OPS=400 (see docs/benchmarks.md for its time).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <cstdlib>
#include <map>
#include <random>
#include <string>

#include "kv/cache.h"
#include "kv/row_codec.h"
#include "kv/snapshot.h"

namespace llamay::kv {
namespace {

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

struct Config {
  KvPrecision precision;
  bool arena;
};

std::string ConfigName(const testing::TestParamInfo<Config>& info) {
  return std::string(KvPrecisionName(info.param.precision)) + (info.param.arena ? "_arena" : "_heap");
}

// One position of the reference: [layer][k|v][elems], as read back (after the cache's rounding).
using Values = std::vector<float>;

struct RefContext {
  std::vector<int32_t> tokens;
  std::vector<Values> values;
};

struct RefEntry {
  std::vector<int32_t> tokens;
  std::vector<Values> values;
  bool pinned = false;
  uint64_t tick = 0;
};

class Harness {
 public:
  Harness(Config cfg, uint32_t seed) : rng_(seed) {
    layout_.n_layers = 2;
    layout_.n_kv_heads = 2;
    layout_.head_dim = 16;
    layout_.page_tokens = 4;
    layout_.precision = cfg.precision;
    CacheOptions o;
    o.layout = layout_;
    if (cfg.arena) {
      o.arena_pages = 40;
    } else {
      o.max_bytes = 48 * layout_.page_bytes();
    }
    o.tree_max_entries = 6;
    auto c = Cache::Create(o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    cache_ = std::move(*c);
    digest_.fill(7);
  }

  // Runs `ops` random operations, checking everything after each. Returns false on the first failure.
  void Run(int ops) {
    for (int step = 0; step < ops; ++step) {
      Step();
      if (testing::Test::HasFailure()) {
        ADD_FAILURE() << "at step " << step << " (last op: " << last_op_ << ")";
        return;
      }
      CheckAll();
      if (testing::Test::HasFailure()) {
        ADD_FAILURE() << "after step " << step << " (op: " << last_op_ << ")";
        return;
      }
    }
    // Closing everything and clearing the tree returns the cache to empty.
    live_.clear();
    ref_.clear();
    cache_->ClearTree();
    entries_.clear();
    CacheStats s = cache_->Stats();
    EXPECT_EQ(s.pages_live, 0u);
    EXPECT_EQ(s.arena_slots_out, 0u);
    EXPECT_EQ(s.contexts_live, 0u);
    EXPECT_EQ(s.tree_nodes, 1u);
    EXPECT_EQ(s.pages_allocated_total, s.pages_freed_total);
    EXPECT_TRUE(cache_->CheckInvariants().ok());
  }

 private:
  size_t Rand(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  uint32_t RowElems() const { return layout_.row_elems(); }
  size_t PosValues() const { return size_t{layout_.n_layers} * 2 * RowElems(); }

  std::vector<int32_t> RandomTokens(size_t n) {
    std::vector<int32_t> t(n);
    for (auto& x : t) x = static_cast<int32_t>(Rand(3));
    return t;
  }
  // The value the cache will read back after storing `row`.
  std::vector<float> Rounded(std::vector<float> row) {
    std::vector<uint8_t> buf(layout_.row_bytes());
    internal::EncodeRow(layout_.precision, row.data(), RowElems(), buf.data());
    internal::DecodeRow(layout_.precision, buf.data(), RowElems(), row.data());
    return row;
  }

  int PickLive() {
    if (live_.empty()) return -1;
    auto it = live_.begin();
    std::advance(it, static_cast<long>(Rand(live_.size())));
    return it->first;
  }
  int Add(Context ctx, RefContext ref) {
    int id = next_id_++;
    live_.emplace(id, std::move(ctx));
    ref_.emplace(id, std::move(ref));
    return id;
  }
  // Evictions the cache made on its own (memory pressure): apply as many to the reference.
  void SyncEvictions() {
    const uint64_t ev = cache_->Stats().tree_evictions;
    for (; seen_evictions_ < ev; ++seen_evictions_) RefEvictOne();
  }
  bool Exhausted(const Status& s) {
    if (s.ok()) return false;
    EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
    return true;
  }

  void Step() {
    const size_t op = Rand(100);
    if (op < 12 || live_.empty()) return OpNew();
    if (op < 24) return OpExtend();
    if (op < 40) return OpWrite();
    if (op < 50) return OpFork();
    if (op < 58) return OpTruncate();
    if (op < 66) return OpClose();
    if (op < 76) return OpRetain();
    if (op < 88) return OpMatch();
    if (op < 91) return OpEvict();
    if (op < 94) return OpUnpin();
    return OpSnapshot();
  }

  void OpNew() {
    last_op_ = "new";
    if (live_.size() >= 8) return OpClose();
    Context c = cache_->NewContext();
    auto toks = RandomTokens(1 + Rand(10));
    Status s = c.Append(toks);
    SyncEvictions();
    if (Exhausted(s)) return;
    RefContext r{toks, std::vector<Values>(toks.size(), Values(PosValues(), 0.0f))};
    Add(std::move(c), std::move(r));
  }
  void OpExtend() {
    last_op_ = "extend";
    int id = PickLive();
    auto toks = RandomTokens(1 + Rand(9));
    if (ref_[id].tokens.size() + toks.size() > 24) return OpTruncate();
    Status s = live_[id].Append(toks);
    SyncEvictions();
    if (Exhausted(s)) return;
    auto& r = ref_[id];
    r.tokens.insert(r.tokens.end(), toks.begin(), toks.end());
    r.values.resize(r.tokens.size(), Values(PosValues(), 0.0f));
  }
  void OpWrite() {
    last_op_ = "write";
    int id = PickLive();
    auto& r = ref_[id];
    if (r.tokens.empty()) return;
    const size_t pos = Rand(r.tokens.size());
    const uint32_t layer = static_cast<uint32_t>(Rand(layout_.n_layers));
    const KvKind kind = Rand(2) ? KvKind::kValue : KvKind::kKey;
    std::vector<float> row(RowElems());
    std::normal_distribution<float> d(0.0f, 1.0f);
    for (auto& x : row) x = d(rng_);
    Status s = live_[id].WriteRow(pos, layer, kind, row);
    SyncEvictions();
    if (Exhausted(s)) return;
    auto rounded = Rounded(row);
    std::copy(rounded.begin(), rounded.end(),
              r.values[pos].begin() + (layer * 2 + static_cast<size_t>(kind)) * RowElems());
  }
  void OpFork() {
    last_op_ = "fork";
    if (live_.size() >= 8) return OpClose();
    int id = PickLive();
    const uint64_t before = cache_->Stats().pages_allocated_total;
    Context f = live_[id].Fork();
    EXPECT_EQ(cache_->Stats().pages_allocated_total, before) << "fork allocated a page";
    Add(std::move(f), ref_[id]);
  }
  void OpTruncate() {
    last_op_ = "truncate";
    int id = PickLive();
    auto& r = ref_[id];
    const size_t n = Rand(r.tokens.size() + 1);
    ASSERT_TRUE(live_[id].Truncate(n).ok());
    r.tokens.resize(n);
    r.values.resize(n);
  }
  void OpClose() {
    last_op_ = "close";
    int id = PickLive();
    live_.erase(id);
    ref_.erase(id);
  }
  void OpRetain() {
    last_op_ = "retain";
    int id = PickLive();
    const bool pin = Rand(10) == 0;
    ASSERT_TRUE(cache_->Retain(live_[id], pin).ok());
    const auto& r = ref_[id];
    if (r.tokens.empty()) return;
    auto it = std::find_if(entries_.begin(), entries_.end(), [&](const RefEntry& e) { return e.tokens == r.tokens; });
    if (it != entries_.end()) {
      it->pinned = it->pinned || pin;
      it->tick = ++tick_;
    } else {
      entries_.push_back({r.tokens, r.values, pin, ++tick_});
    }
    while (entries_.size() > 6 && RefEvictOne()) ++seen_evictions_;
    SyncEvictions();
  }
  void OpMatch() {
    last_op_ = "match";
    if (live_.size() >= 8) return OpClose();
    std::vector<int32_t> q;
    if (!entries_.empty() && Rand(4) != 0) {
      const auto& e = entries_[Rand(entries_.size())].tokens;
      q.assign(e.begin(), e.begin() + static_cast<long>(Rand(e.size() + 1)));
    }
    auto tail = RandomTokens(Rand(6));
    q.insert(q.end(), tail.begin(), tail.end());
    MatchResult m = cache_->Match(q);
    // Reference: the longest common prefix with any entry; ties go to the most recently used.
    size_t best_len = 0;
    RefEntry* best = nullptr;
    for (auto& e : entries_) {
      size_t k = 0;
      while (k < e.tokens.size() && k < q.size() && e.tokens[k] == q[k]) ++k;
      if (k == 0) continue;
      if (k > best_len || (k == best_len && e.tick > best->tick)) {
        best_len = k;
        best = &e;
      }
    }
    ASSERT_EQ(m.matched, best_len);
    ASSERT_EQ(m.context.size(), best_len);
    RefContext r;
    if (best != nullptr) {
      best->tick = ++tick_;
      r.tokens.assign(q.begin(), q.begin() + static_cast<long>(best_len));
      r.values.assign(best->values.begin(), best->values.begin() + static_cast<long>(best_len));
    }
    Add(std::move(m.context), std::move(r));
  }
  void OpEvict() {
    last_op_ = "evict";
    const bool evicted = cache_->EvictOne();
    EXPECT_EQ(evicted, RefEvictOne());
    if (evicted) ++seen_evictions_;
  }
  void OpUnpin() {
    last_op_ = "unpin";
    if (entries_.empty()) return;
    auto& e = entries_[Rand(entries_.size())];
    EXPECT_TRUE(cache_->SetPinned(e.tokens, false));
    e.pinned = false;
  }
  void OpSnapshot() {
    last_op_ = "snapshot";
    if (live_.size() >= 8) return OpClose();
    int id = PickLive();
    SnapshotOptions opt;
    opt.native_precision = Rand(2) == 0;
    auto bytes = SnapshotToBytes(live_[id], digest_, opt);
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    auto restored = RestoreSnapshot(*cache_, *bytes, digest_);
    SyncEvictions();
    if (!restored.ok() && Exhausted(restored.status())) return;
    ASSERT_TRUE(restored.ok()) << restored.status().ToString();
    RefContext r = ref_[id];
    if (!opt.native_precision)  // through f32 and back into the cache's precision
      for (auto& v : r.values)
        for (uint32_t row = 0; row < layout_.n_layers * 2; ++row) {
          std::vector<float> x(v.begin() + row * RowElems(), v.begin() + (row + 1) * RowElems());
          x = Rounded(x);
          std::copy(x.begin(), x.end(), v.begin() + row * RowElems());
        }
    Add(std::move(*restored), std::move(r));
  }

  RefEntry* RefVictim() {
    RefEntry* best = nullptr;
    bool best_leaf = false;
    for (auto& e : entries_) {
      if (e.pinned) continue;
      bool leaf = true;
      for (auto& o : entries_)
        if (o.tokens.size() > e.tokens.size() && std::equal(e.tokens.begin(), e.tokens.end(), o.tokens.begin()))
          leaf = false;
      if (best == nullptr || (leaf && !best_leaf) || (leaf == best_leaf && e.tick < best->tick)) {
        best = &e;
        best_leaf = leaf;
      }
    }
    return best;
  }
  bool RefEvictOne() {
    RefEntry* v = RefVictim();
    if (v == nullptr) return false;
    entries_.erase(entries_.begin() + (v - entries_.data()));
    return true;
  }

  void CheckAll() {
    Status inv = cache_->CheckInvariants();
    ASSERT_TRUE(inv.ok()) << inv.ToString();
    std::vector<float> row(RowElems());
    for (auto& [id, ctx] : live_) {
      const auto& r = ref_[id];
      ASSERT_EQ(ctx.tokens(), r.tokens) << "context " << id;
      for (size_t pos = 0; pos < r.tokens.size(); ++pos)
        for (uint32_t layer = 0; layer < layout_.n_layers; ++layer)
          for (KvKind kind : {KvKind::kKey, KvKind::kValue}) {
            ASSERT_TRUE(ctx.ReadRow(pos, layer, kind, row).ok());
            const float* want = r.values[pos].data() + (layer * 2 + static_cast<size_t>(kind)) * RowElems();
            ASSERT_EQ(0, std::memcmp(row.data(), want, row.size() * 4))
                << "context " << id << " pos " << pos << " layer " << layer;
          }
    }
    // Tree entries and eviction order equal the flat list's.
    auto got = cache_->TreeEntries();
    std::vector<RefEntry> want = entries_;
    std::sort(want.begin(), want.end(), [](const RefEntry& a, const RefEntry& b) { return a.tokens < b.tokens; });
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].tokens, want[i].tokens);
      ASSERT_EQ(got[i].pinned, want[i].pinned);
      ASSERT_EQ(got[i].last_used, want[i].tick);
    }
    auto victim = cache_->NextVictim();
    RefEntry* rv = RefVictim();
    ASSERT_EQ(victim.has_value(), rv != nullptr);
    if (rv) {
      ASSERT_EQ(*victim, rv->tokens);
    }
    // The tree never keeps nodes for evicted prefixes: at most one split node per entry.
    ASSERT_LE(cache_->Stats().tree_nodes, 2 * entries_.size() + 1);
  }

  KvLayout layout_;
  std::unique_ptr<Cache> cache_;
  Digest digest_{};
  std::mt19937 rng_;
  std::map<int, Context> live_;
  std::map<int, RefContext> ref_;
  std::vector<RefEntry> entries_;
  uint64_t tick_ = 0;
  uint64_t seen_evictions_ = 0;
  int next_id_ = 0;
  std::string last_op_;
};

class ModelledOperations : public testing::TestWithParam<Config> {};

TEST_P(ModelledOperations, RandomSequencesHoldEveryInvariant) {
  const int seeds = EnvInt("LLAMAY_KV_SEEDS", 20);
  const int ops = EnvInt("LLAMAY_KV_OPS", 300);
  for (int seed = 1; seed <= seeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Harness h(GetParam(), static_cast<uint32_t>(seed));
    h.Run(ops);
    if (HasFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(AllConfigs, ModelledOperations,
                         testing::Values(Config{KvPrecision::kF32, false}, Config{KvPrecision::kF16, false},
                                         Config{KvPrecision::kQ8_0, false}, Config{KvPrecision::kF32, true},
                                         Config{KvPrecision::kF16, true}, Config{KvPrecision::kQ8_0, true}),
                         ConfigName);

}  // namespace
}  // namespace llamay::kv
