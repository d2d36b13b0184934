// Concurrency as the scheduler creates it. Run under the tsan preset (CI does) to prove the absence of
// data races; in other builds these still check the results.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "kv/cache.h"
#include "kv/snapshot.h"
#include "kv/test_util.h"

namespace llamay::kv {
namespace {

using namespace testing_util;

TEST(Concurrency, SixteenThreadsForkOneParent) {
  auto cache = MakeCache(SmallLayout(4));
  Context parent = cache->NewContext();
  Fill(parent, 21, 1);
  const auto want = ReadAll(parent);
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        Context b = parent.Fork();
        if (ReadAll(b) != want) ++bad;
        // Each branch writes a shared page and grows: copies, never visible to the parent.
        const size_t pos = static_cast<size_t>(t + i) % 21;
        if (!b.WriteRow(pos, 1, KvKind::kKey, RowValues(b.layout(), pos, 1, KvKind::kKey, t)).ok()) ++bad;
        if (!b.Append(Iota(3)).ok()) ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(ReadAll(parent), want);
  ExpectInvariants(*cache);
  EXPECT_EQ(cache->Stats().pages_live, parent.n_pages());
}

// The views of inspect.h race forks, writes, retains, matches, evictions and closes: each stays whole
// (the pool's classes cover every live page it saw; a context's view has a page list its size implies).
TEST(Concurrency, InspectionRacesTheOperationsItDescribes) {
  auto cache = MakeCache(SmallLayout(4), 0, /*max_bytes=*/64 * SmallLayout(4).page_bytes());
  Context parent = cache->NewContext();
  Fill(parent, 13, 1);
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < 4; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        Context b = parent.Fork();
        const size_t pos = static_cast<size_t>(t * 7 + i) % 13;
        if (!b.WriteRow(pos, 0, KvKind::kKey, RowValues(b.layout(), pos, 0, KvKind::kKey, t)).ok()) ++bad;
        if (!b.Append(Iota(1 + i % 5, 100 * t)).ok()) ++bad;
        if (!cache->Retain(b, i % 7 == 0).ok()) ++bad;
        cache->Match(b.tokens());
        if (i % 3 == 0) cache->EvictOne();
        if (i % 11 == 0) cache->SetPinned(b.tokens(), false);
      }
    });
  }
  std::thread inspector([&] {
    while (!stop.load()) {
      const PoolView p = cache->InspectPool();
      if (p.evictable.pages > p.prefix_only.pages) ++bad;
      const TreeView v = cache->InspectTree();
      for (size_t i = 1; i < v.nodes.size(); ++i)
        if (v.nodes[i].parent < 0 || static_cast<size_t>(v.nodes[i].parent) >= i) ++bad;
      const ContextView c = parent.Inspect();
      if (c.groups.size() != 1 || c.groups[0].size() != 4) ++bad;
      (void)cache->TreePageSerials();
    }
  });
  for (auto& w : workers) w.join();
  stop = true;
  inspector.join();
  EXPECT_EQ(bad.load(), 0);
  ExpectInvariants(*cache);
}

// Snapshot and restore of one branch race a writer that keeps rewriting the shared prefix through
// another branch: every snapshot reads exactly the first branch's values.
TEST(Concurrency, SnapshotRestoreRacesAWriterOfTheSharedPrefix) {
  auto cache = MakeCache(SmallLayout(4));
  Context parent = cache->NewContext();
  Fill(parent, 17, 1);
  Context a = parent.Fork();
  Context b = parent.Fork();
  parent.Close();
  const auto want = ReadAll(a);
  const Digest d{};
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::thread writer([&] {
    for (int i = 0; !stop.load(); ++i) {
      const size_t pos = static_cast<size_t>(i) % 17;
      if (!b.WriteRow(pos, 0, KvKind::kValue, RowValues(b.layout(), pos, 0, KvKind::kValue, i)).ok()) ++bad;
      if (i % 7 == 0) {  // re-share pages so the copy-on-write path keeps running
        Context f = b.Fork();
        b = std::move(f);
      }
    }
  });
  std::thread snapshotter([&] {
    for (int i = 0; i < 200; ++i) {
      auto bytes = SnapshotToBytes(a, d);
      if (!bytes.ok()) {
        ++bad;
        continue;
      }
      auto r = RestoreSnapshot(*cache, *bytes, d);
      if (!r.ok() || ReadAll(*r) != want) ++bad;
    }
    stop = true;
  });
  snapshotter.join();
  writer.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(ReadAll(a), want);
  ExpectInvariants(*cache);
}

// Eviction (retains against a small bound, and budget pressure) races allocation in other threads.
TEST(Concurrency, EvictionRacesAllocation) {
  KvLayout l = SmallLayout(4);
  auto cache = MakeCache(l, /*arena_pages=*/64, 0, /*tree_max_entries=*/8);
  std::atomic<int> unexpected{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 150; ++i) {
        Context c = cache->NewContext();
        Status s = c.Append(Iota(6 + static_cast<size_t>(i % 9), (t * 1000 + i) % 40));
        if (!s.ok()) {
          if (s.code() != StatusCode::kResourceExhausted) ++unexpected;
          continue;
        }
        if (!cache->Retain(c).ok()) ++unexpected;
        MatchResult m = cache->Match(Iota(8, (t * 1000 + i) % 40));
        if (m.context.size() != m.matched) ++unexpected;
        s = m.context.Append(Iota(5));
        if (!s.ok() && s.code() != StatusCode::kResourceExhausted) ++unexpected;
        if (i % 10 == 0) cache->EvictOne();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(unexpected.load(), 0);
  ExpectInvariants(*cache);
  cache->ClearTree();
  EXPECT_EQ(cache->Stats().arena_slots_out, 0u);
}

// Hybrid layouts: threads match checkpoints (sharing the cached state), write their own copies, retain
// (donating), fork and evict, all at once; every matched state must read exactly as it was donated.
TEST(Concurrency, CheckpointsRaceMatchWriteAndEviction) {
  KvLayout l = SmallLayout(4);
  l.n_layers = 3;
  l.layer_specs = {{LayerKind::kAttention, 0}, {LayerKind::kRecurrent, 0}, {LayerKind::kAttention, 6}};
  l.recurrent_layer_bytes = 64;
  auto cache = MakeCache(l, /*arena_pages=*/96, 0, /*tree_max_entries=*/8);
  std::atomic<int> unexpected{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 150; ++i) {
        const int32_t base = (t * 1000 + i) % 30;
        // A state is a function of its tokens here (byte k = first token + length), so whatever checkpoint a
        // match returns can be checked.
        auto stamp = [](Context& c) -> bool {
          auto st = c.MutableState();
          if (!st.ok()) return st.status().code() == StatusCode::kResourceExhausted;
          const std::vector<int32_t> tok = c.tokens();
          std::memset(*st, static_cast<int>((tok.empty() ? 0 : tok[0]) + tok.size()), 64);
          return c.CommitState(c.size()).ok();
        };
        Context c = cache->NewContext();
        Status s = c.Append(Iota(4, base));
        if (!s.ok()) {
          if (s.code() != StatusCode::kResourceExhausted) ++unexpected;
          continue;
        }
        if (!stamp(c) || !c.Checkpoint().ok()) ++unexpected;
        if (c.Append(Iota(3, base + 4)).ok() && !stamp(c)) ++unexpected;
        if (!cache->Retain(c).ok()) ++unexpected;
        MatchResult m = cache->Match(Iota(9, base));
        if (m.context.size() != m.matched) ++unexpected;
        if (m.matched != 0) {
          const uint8_t* st = m.context.StateData();
          if (st == nullptr || st[0] != static_cast<uint8_t>(base + m.matched)) ++unexpected;
          Context f = m.context.Fork();
          if (f.Append(Iota(2)).ok() && !stamp(f)) ++unexpected;
        }
        if (i % 10 == 0) cache->EvictOne();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(unexpected.load(), 0);
  ExpectInvariants(*cache);
  cache->ClearTree();
  EXPECT_EQ(cache->Stats().arena_slots_out, 0u);
}

}  // namespace
}  // namespace llamay::kv
