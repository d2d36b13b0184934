// SnapshotStore over a directory store: round trips, chunk sharing between forks, idempotent pushes, and
// every damage refused on read.
#include "engine/snapshot_store.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <algorithm>
#include <atomic>
#include <fstream>
#include <thread>

#include "kv/snapshot.h"
#include "kv/test_util.h"

namespace llamay::engine {
namespace {

using namespace kv::testing_util;
namespace fs = std::filesystem;

Digest W(uint8_t seed) {
  Digest d;
  for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<uint8_t>(seed * 13 + i);
  return d;
}

class SnapshotStoreTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("llamay_snapstore_" + std::to_string(::getpid()) + "_" +
                                        testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    auto s = store::OpenStore(dir_.string());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::make_unique<SnapshotStore>(std::move(*s));
    cache_ = MakeCache(SmallLayout(4, kv::KvPrecision::kF16));
  }
  void TearDown() override {
    store_.reset();
    fs::remove_all(dir_);
  }
  // A snapshot of `n` positions whose first `shared` positions are the same in every call.
  std::vector<uint8_t> Snapshot(size_t n, size_t shared, int salt, std::vector<float> logits = {}) {
    kv::Context c = cache_->NewContext();
    Fill(c, shared, 1);
    if (n > shared) Fill(c, n - shared, salt, 1000);
    kv::SnapshotOptions o;
    o.native_precision = true;
    o.logits = logits;
    auto b = kv::SnapshotToBytes(c, W(1), o);
    EXPECT_TRUE(b.ok());
    return *b;
  }
  std::vector<fs::path> Files(const std::string& sub) {
    std::vector<fs::path> out;
    for (auto& e : fs::recursive_directory_iterator(dir_))
      if (e.is_regular_file() && e.path().string().find(sub) != std::string::npos) out.push_back(e.path());
    return out;
  }

  fs::path dir_;
  std::unique_ptr<SnapshotStore> store_;
  std::unique_ptr<kv::Cache> cache_;
};

TEST_F(SnapshotStoreTest, RoundTripsByteForByte) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{300}, size_t{1200}}) {
    const auto snap = Snapshot(n, n, 0, {1.0f, 2.0f});
    const std::string name = "ctx-" + std::to_string(n);
    auto pushed = store_->Push(name, snap);
    ASSERT_TRUE(pushed.ok()) << pushed.status().ToString();
    EXPECT_EQ(pushed->bytes, snap.size());
    EXPECT_EQ(pushed->chunks, (n + 255) / 256);
    auto back = store_->PullBytes(W(1), name);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, snap);
  }
  auto list = store_->List(W(1));
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->size(), 4u);
  auto models = store_->Models();
  ASSERT_TRUE(models.ok());
  ASSERT_EQ(models->size(), 1u);
  EXPECT_EQ((*models)[0], W(1));
  auto other = store_->PullBytes(W(2), "ctx-300");  // another model's namespace
  EXPECT_EQ(other.status().code(), StatusCode::kNotFound);
}

TEST_F(SnapshotStoreTest, AForkSendsOnlyTheChunksTheStoreLacksAndRepeatsSendNone) {
  const auto base = Snapshot(1024, 1024, 0);
  auto a = store_->Push("base", base);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->chunks, 4u);
  EXPECT_EQ(a->chunks_sent, 4u);
  // A branch sharing the first 600 positions: chunks 0 and 1 (positions 0-511) are the same bytes.
  const auto branch = Snapshot(1100, 600, 7);
  auto b = store_->Push("branch", branch);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->chunks, 5u);
  EXPECT_EQ(b->chunks_sent, 3u);
  EXPECT_LT(b->bytes_sent, branch.size() / 2 + branch.size() / 4);
  auto again = store_->Push("branch", branch);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->chunks_sent, 0u);
  EXPECT_EQ(*store_->PullBytes(W(1), "branch"), branch);
  EXPECT_EQ(*store_->PullBytes(W(1), "base"), base);
  EXPECT_EQ(Files("chunks/").size(), 7u);
}

TEST_F(SnapshotStoreTest, EveryDamageIsRefusedOnRead) {
  const auto snap = Snapshot(700, 700, 0);
  ASSERT_TRUE(store_->Push("s", snap).ok());
  auto flip = [](const fs::path& p, size_t at) {
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(at));
    char c;
    f.get(c);
    f.seekp(static_cast<std::streamoff>(at));
    f.put(static_cast<char>(c ^ 0x10));
  };
  const auto chunks = Files("chunks/");
  ASSERT_EQ(chunks.size(), 3u);
  flip(chunks[1], 100);
  auto r = store_->PullBytes(W(1), "s");
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << r.status().ToString();
  flip(chunks[1], 100);  // repaired
  ASSERT_TRUE(store_->PullBytes(W(1), "s").ok());
  const auto manifest = Files("snapshots/s");
  ASSERT_EQ(manifest.size(), 1u);
  for (size_t at : {size_t{3}, size_t{20}, size_t{70}, size_t{fs::file_size(manifest[0]) - 2}}) {
    flip(manifest[0], at);
    auto m = store_->PullBytes(W(1), "s");
    EXPECT_FALSE(m.ok()) << "manifest byte " << at;
    flip(manifest[0], at);
  }
  fs::resize_file(manifest[0], fs::file_size(manifest[0]) - 1);
  EXPECT_FALSE(store_->PullBytes(W(1), "s").ok());
  ASSERT_TRUE(store_->Push("s", snap).ok());  // a push repairs it
  fs::remove(chunks[2]);
  auto missing = store_->PullBytes(W(1), "s");
  EXPECT_EQ(missing.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(missing.status().message().find("missing"), std::string::npos);
}

TEST_F(SnapshotStoreTest, BadNamesAndDamagedSnapshotsWriteNothing) {
  const auto snap = Snapshot(100, 100, 0);
  for (const std::string& bad : std::vector<std::string>{"", ".hidden", "a/b", "../x", "sp ace", std::string(129, 'a')})
    EXPECT_EQ(store_->Push(bad, snap).status().code(), StatusCode::kInvalidArgument) << bad;
  auto broken = snap;
  broken[broken.size() / 2] ^= 1;
  EXPECT_FALSE(store_->Push("broken", broken).ok());
  EXPECT_TRUE(Files("").empty());
  EXPECT_EQ(store_->PullBytes(W(1), "nothing").status().code(), StatusCode::kNotFound);
}

TEST_F(SnapshotStoreTest, SessionGenerationsCommitOnceAndTheNewestIsFound) {
  const auto g1 = Snapshot(300, 300, 0), g2 = Snapshot(400, 300, 3);
  EXPECT_FALSE(store_->LatestSession(W(1), "ctx_a")->has_value());
  ASSERT_TRUE(store_->CommitSession("ctx_a", 1, g1, std::vector<int32_t>{7}).ok());
  ASSERT_TRUE(store_->CommitSession("ctx_a", 2, g2, std::vector<int32_t>{8, 9}).ok());
  auto latest = store_->LatestSession(W(1), "ctx_a");
  ASSERT_TRUE(latest.ok() && latest->has_value()) << latest.status().ToString();
  EXPECT_EQ((*latest)->generation, 2u);
  EXPECT_EQ((*latest)->tail, (std::vector<int32_t>{8, 9}));
  EXPECT_EQ(*store_->PullBytes(W(1), (*latest)->snapshot), g2);
  // The same generation again: the same bytes are a retry (fine); other bytes lost a race.
  EXPECT_TRUE(store_->CommitSession("ctx_a", 2, g2, std::vector<int32_t>{8, 9}).ok());
  Status lost = store_->CommitSession("ctx_a", 2, g1, std::vector<int32_t>{1});
  EXPECT_EQ(lost.detail(), kDetailSessionConflict) << lost.ToString();
  // A damaged record is refused.
  const auto records = Files("sessions/ctx_a/");
  ASSERT_EQ(records.size(), 2u);
  for (const auto& r : records) {
    std::fstream f(r, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(5);
    f.put('9');
  }
  EXPECT_EQ(store_->LatestSession(W(1), "ctx_a").status().code(), StatusCode::kDataLoss);
}

// Counts the requests that reach a store.
class CountingStore : public store::Store {
 public:
  explicit CountingStore(std::unique_ptr<store::Store> s) : s_(std::move(s)) {}
  Status Put(const std::string& n, std::span<const uint8_t> b) override { return ++puts, s_->Put(n, b); }
  Result<bool> PutIfAbsent(const std::string& n, std::span<const uint8_t> b) override { return s_->PutIfAbsent(n, b); }
  Result<std::vector<uint8_t>> Get(const std::string& n) override { return s_->Get(n); }
  Result<bool> Exists(const std::string& n) override { return ++exists, s_->Exists(n); }
  Result<std::vector<store::ObjectInfo>> List(const std::string& p) override { return s_->List(p); }
  Status Delete(const std::string& n) override { return s_->Delete(n); }
  std::string Describe() const override { return s_->Describe(); }
  int puts = 0, exists = 0;

 private:
  std::unique_ptr<store::Store> s_;
};

TEST_F(SnapshotStoreTest, ChunksSeenOnceAreNotAskedForAgain) {
  auto dir = fs::temp_directory_path() / ("llamay_counting_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  auto counting = std::make_unique<CountingStore>(std::move(*store::OpenStore(dir.string())));
  CountingStore* c = counting.get();
  SnapshotStore s(std::move(counting));
  const auto snap = Snapshot(1000, 1000, 0);
  ASSERT_TRUE(s.Push("a", snap).ok());
  EXPECT_EQ(c->exists, 4);
  EXPECT_EQ(c->puts, 5);  // 4 chunks and the manifest
  ASSERT_TRUE(s.Push("b", snap).ok());
  EXPECT_EQ(c->exists, 4) << "the chunks it wrote are known";
  EXPECT_EQ(c->puts, 6);  // the manifest only
  // Another instance over the same directory asks once, then knows.
  auto other = std::make_unique<CountingStore>(std::move(*store::OpenStore(dir.string())));
  CountingStore* o = other.get();
  SnapshotStore t(std::move(other));
  ASSERT_TRUE(t.Push("c", snap).ok());
  ASSERT_TRUE(t.Push("d", snap).ok());
  EXPECT_EQ(o->exists, 4);
  EXPECT_EQ(o->puts, 2);
  fs::remove_all(dir);
}

TEST(DirStorePutIfAbsent, ExactlyOneOfManyWritersCreatesTheObject) {
  const fs::path dir = fs::temp_directory_path() / ("llamay_putifabsent_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  auto s = store::OpenStore(dir.string());
  ASSERT_TRUE(s.ok());
  std::atomic<int> won{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      const std::vector<uint8_t> bytes(1000, static_cast<uint8_t>(t));
      auto r = (*s)->PutIfAbsent("race/object", bytes);
      EXPECT_TRUE(r.ok());
      if (r.ok() && *r) ++won;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(won.load(), 1);
  auto got = (*s)->Get("race/object");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->size(), 1000u);
  EXPECT_TRUE(std::all_of(got->begin(), got->end(), [&](uint8_t b) { return b == (*got)[0]; }));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace llamay::engine
