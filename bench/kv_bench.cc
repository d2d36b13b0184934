// State-engine benchmarks. Results and the command that produced them: docs/benchmarks.md.
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>

#include "kv/cache.h"
#include "kv/snapshot.h"

namespace llamay::kv {
namespace {

// The peer model's KV shape (../shared/ref/README.md: 8 layers, 8 kv heads of 64), f16, 64-token pages.
KvLayout PeerLayout(KvPrecision p = KvPrecision::kF16) {
  KvLayout l;
  l.n_layers = 8;
  l.n_kv_heads = 8;
  l.head_dim = 64;
  l.page_tokens = 64;
  l.precision = p;
  return l;
}

std::unique_ptr<Cache> NewCache(const KvLayout& l, size_t max_entries = 0) {
  CacheOptions o;
  o.layout = l;
  o.tree_max_entries = max_entries;
  return std::move(*Cache::Create(o));
}

Context Filled(Cache& cache, size_t n, uint32_t seed = 1) {
  Context c = cache.NewContext();
  std::vector<int32_t> toks(n);
  std::mt19937 rng(seed);
  for (auto& t : toks) t = static_cast<int32_t>(rng() % 32000);
  (void)c.Append(toks);
  const KvLayout& l = cache.layout();
  std::vector<float> row(l.row_elems());
  std::normal_distribution<float> d;
  for (size_t p = 0; p < n; ++p)
    for (uint32_t layer = 0; layer < l.n_layers; ++layer)
      for (KvKind k : {KvKind::kKey, KvKind::kValue}) {
        for (auto& x : row) x = d(rng);
        (void)c.WriteRow(p, layer, k, row);
      }
  return c;
}

// Fork a 32-page context 8 ways. Reported per branch; the counters show what was allocated.
void BM_Fork32Pages8Ways(benchmark::State& state) {
  auto cache = NewCache(PeerLayout());
  Context parent = Filled(*cache, 32 * 64);
  const auto before = cache->Stats();
  for (auto _ : state) {
    std::vector<Context> branches = parent.Fork(8);
    benchmark::DoNotOptimize(branches.data());
  }
  const auto after = cache->Stats();
  state.SetItemsProcessed(state.iterations() * 8);
  state.counters["pages_allocated"] = static_cast<double>(after.pages_allocated_total - before.pages_allocated_total);
  state.counters["held_MiB"] = static_cast<double>(32 * cache->Stats().page_bytes) / (1 << 20);
  state.counters["copies_would_MiB"] = static_cast<double>(8 * 32 * cache->Stats().page_bytes) / (1 << 20);
}
BENCHMARK(BM_Fork32Pages8Ways);

// A tree of N entries: groups of 16 share a 16-token prefix; each entry adds 8 tokens of its own.
struct TreeFixture {
  std::unique_ptr<Cache> cache;
  std::vector<std::vector<int32_t>> keys;
  explicit TreeFixture(size_t n) {
    KvLayout l;
    l.n_layers = 1;
    l.n_kv_heads = 1;
    l.head_dim = 8;
    l.page_tokens = 16;
    cache = NewCache(l);
    std::mt19937 rng(3);
    std::vector<int32_t> prefix(16);
    for (size_t i = 0; i < n; ++i) {
      if (i % 16 == 0)
        for (auto& t : prefix) t = static_cast<int32_t>(rng() % 32000);
      std::vector<int32_t> key = prefix;
      for (int j = 0; j < 8; ++j) key.push_back(static_cast<int32_t>(rng() % 32000));
      Context c = cache->NewContext();
      (void)c.Append(key);
      (void)cache->Retain(c);
      keys.push_back(std::move(key));
    }
  }
};

void BM_Match(benchmark::State& state) {
  TreeFixture f(static_cast<size_t>(state.range(0)));
  size_t i = 0;
  for (auto _ : state) {
    std::vector<int32_t> q = f.keys[i++ % f.keys.size()];
    q.push_back(7);
    MatchResult m = f.cache->Match(q);
    benchmark::DoNotOptimize(m.matched);
  }
  state.counters["entries"] = static_cast<double>(f.cache->Stats().tree_entries);
}
BENCHMARK(BM_Match)->Arg(1000)->Arg(100000)->Unit(benchmark::kMicrosecond);

void BM_RetainWithEviction(benchmark::State& state) {
  TreeFixture f(static_cast<size_t>(state.range(0)));
  CacheOptions o = f.cache->options();
  // Retain fresh keys into a full tree bounded at its current size: each retain evicts one entry.
  auto cache = NewCache(o.layout, static_cast<size_t>(state.range(0)));
  for (auto& k : f.keys) {
    Context c = cache->NewContext();
    (void)c.Append(k);
    (void)cache->Retain(c);
  }
  std::mt19937 rng(9);
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<int32_t> key(24);
    for (auto& t : key) t = static_cast<int32_t>(rng() % 32000);
    Context c = cache->NewContext();
    (void)c.Append(key);
    state.ResumeTiming();
    (void)cache->Retain(c);
  }
  state.counters["evictions"] = static_cast<double>(cache->Stats().tree_evictions);
}
BENCHMARK(BM_RetainWithEviction)->Arg(1000)->Arg(100000)->Unit(benchmark::kMicrosecond);

// Snapshot write/restore of a 2048-token context of the peer shape, beside memcpy of the same bytes.
void BM_SnapshotWrite(benchmark::State& state) {
  const bool native = state.range(0) != 0;
  auto cache = NewCache(PeerLayout());
  Context c = Filled(*cache, 2048);
  Digest d{};
  SnapshotOptions o;
  o.native_precision = native;
  size_t bytes = 0;
  std::vector<uint8_t> out;
  for (auto _ : state) {
    out.clear();
    VectorSink sink(&out);
    (void)WriteSnapshot(c, d, sink, o);
    bytes = out.size();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  state.SetLabel(native ? "f16 on disk" : "f32 on disk");
}
BENCHMARK(BM_SnapshotWrite)->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond);

void BM_SnapshotRestore(benchmark::State& state) {
  const bool native = state.range(0) != 0;
  auto cache = NewCache(PeerLayout());
  std::vector<uint8_t> bytes;
  {
    Context c = Filled(*cache, 2048);
    SnapshotOptions o;
    o.native_precision = native;
    bytes = *SnapshotToBytes(c, Digest{}, o);
  }
  for (auto _ : state) {
    auto r = RestoreSnapshot(*cache, bytes, Digest{});
    benchmark::DoNotOptimize(r.ok());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes.size()));
  state.SetLabel(native ? "f16 on disk" : "f32 on disk");
}
BENCHMARK(BM_SnapshotRestore)->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond);

void BM_MemcpySnapshotBytes(benchmark::State& state) {
  const size_t n = 2048 * PeerLayout().n_layers * 2 * PeerLayout().row_bytes();  // f16 KV bytes
  std::vector<uint8_t> a(n, 1), b(n);
  for (auto _ : state) {
    std::memcpy(b.data(), a.data(), n);
    benchmark::DoNotOptimize(b.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n));
}
BENCHMARK(BM_MemcpySnapshotBytes)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace llamay::kv

BENCHMARK_MAIN();
