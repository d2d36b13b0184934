// The grammar cache: one build per key, the same object on a hit, failures kept, bounds on entries and
// bytes (least recently used first), and concurrent requests for one key sharing a single build.
#include "grammar/grammar_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace llamay::grammar {
namespace {

// A builder that counts its calls and compiles a grammar of one literal (distinct per key).
GrammarCache::Builder Counting(const std::string& literal, std::atomic<int>* calls) {
  return [literal, calls]() -> GrammarCache::GrammarResult {
    ++*calls;
    return ParseGbnf(std::string("root ::= \"").append(literal).append("\""));
  };
}

TEST(GrammarCacheTest, TheSameKeyGetsTheSameGrammarObjectAndBuildsOnce) {
  GrammarCache cache(8, size_t{64} << 20);
  std::atomic<int> calls = 0;
  auto a = cache.GetOrBuild("k", Counting("x", &calls));
  auto b = cache.GetOrBuild("k", Counting("x", &calls));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->get(), b->get());
  EXPECT_EQ(calls, 1);
  auto c = cache.GetOrBuild("other", Counting("y", &calls));
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a->get(), c->get());
  EXPECT_EQ(calls, 2);
  const GrammarCache::Stats s = cache.stats();
  EXPECT_EQ(s.entries, 2u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 2u);
  EXPECT_GT(s.bytes, (*a)->memory_bytes());
}

// Keys are compared whole: a key that is a prefix of another, or that differs in one byte, is another.
TEST(GrammarCacheTest, KeysAreComparedWhole) {
  GrammarCache cache(8, size_t{64} << 20);
  std::atomic<int> calls = 0;
  const std::string key(10000, 'k');
  std::string near = key;
  near[5000] = 'j';
  auto a = cache.GetOrBuild(key, Counting("a", &calls));
  auto b = cache.GetOrBuild(near, Counting("b", &calls));
  auto c = cache.GetOrBuild(key.substr(0, 9999), Counting("c", &calls));
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(calls, 3);
  EXPECT_EQ((*b)->gbnf(), "root ::= \"b\"");
  EXPECT_EQ((*cache.GetOrBuild(key, Counting("z", &calls)))->gbnf(), "root ::= \"a\"");
}

TEST(GrammarCacheTest, FailuresAreKeptToo) {
  GrammarCache cache(8, size_t{64} << 20);
  int calls = 0;
  auto failing = [&]() -> GrammarCache::GrammarResult {
    ++calls;
    return ParseGbnf("root ::= undefined-rule");
  };
  auto a = cache.GetOrBuild("bad", failing);
  auto b = cache.GetOrBuild("bad", failing);
  ASSERT_FALSE(a.ok());
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(a.status().message(), b.status().message());
  EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(calls, 1);
}

TEST(GrammarCacheTest, BoundedInEntriesLeastRecentlyUsedFirst) {
  GrammarCache cache(2, size_t{64} << 20);
  std::atomic<int> calls = 0;
  ASSERT_TRUE(cache.GetOrBuild("a", Counting("a", &calls)).ok());
  ASSERT_TRUE(cache.GetOrBuild("b", Counting("b", &calls)).ok());
  ASSERT_TRUE(cache.GetOrBuild("a", Counting("a", &calls)).ok());  // a is now the most recent
  ASSERT_TRUE(cache.GetOrBuild("c", Counting("c", &calls)).ok());  // evicts b
  EXPECT_EQ(cache.stats().entries, 2u);
  EXPECT_EQ(calls, 3);
  ASSERT_TRUE(cache.GetOrBuild("a", Counting("a", &calls)).ok());
  EXPECT_EQ(calls, 3);  // kept
  ASSERT_TRUE(cache.GetOrBuild("b", Counting("b", &calls)).ok());
  EXPECT_EQ(calls, 4);  // was evicted: built again
  EXPECT_EQ(cache.stats().entries, 2u);
}

TEST(GrammarCacheTest, BoundedInBytes) {
  std::atomic<int> calls = 0;
  auto one = ParseGbnf("root ::= \"a\"");
  ASSERT_TRUE(one.ok());
  const size_t size = (*one)->memory_bytes() + 1;
  // Room for about two such grammars.
  GrammarCache cache(100, 2 * size + size / 2);
  for (const char* k : {"a", "b", "c", "d"}) ASSERT_TRUE(cache.GetOrBuild(k, Counting(k, &calls)).ok());
  EXPECT_EQ(cache.stats().entries, 2u);
  EXPECT_LE(cache.stats().bytes, 2 * size + size / 2);
  // A result larger than the whole bound is returned but not kept.
  GrammarCache tiny(100, 10);
  auto g = tiny.GetOrBuild("a", Counting("a", &calls));
  ASSERT_TRUE(g.ok());
  EXPECT_EQ((*g)->gbnf(), "root ::= \"a\"");
  EXPECT_EQ(tiny.stats().entries, 0u);
  EXPECT_EQ(tiny.stats().bytes, 0u);
  tiny.Clear();
  cache.Clear();
  EXPECT_EQ(cache.stats().entries, 0u);
  EXPECT_EQ(cache.stats().bytes, 0u);
}

TEST(GrammarCacheTest, ConcurrentRequestsForOneKeyShareOneBuild) {
  GrammarCache cache(8, size_t{64} << 20);
  std::atomic<int> calls = 0;
  auto slow = [&]() -> GrammarCache::GrammarResult {
    ++calls;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the others arrive while it builds
    return ParseGbnf("root ::= \"slow\"");
  };
  std::vector<const Grammar*> got(8, nullptr);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i) {
    threads.emplace_back([&, i] {
      auto g = cache.GetOrBuild("shared", slow);
      if (g.ok()) got[i] = g->get();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(calls, 1);
  for (const Grammar* g : got) EXPECT_EQ(g, got[0]);
  EXPECT_NE(got[0], nullptr);
}

// Many threads, many keys, a small bound: no lost or mixed-up results (run under TSan in CI).
TEST(GrammarCacheTest, ConcurrentMixedKeysStayConsistent) {
  GrammarCache cache(3, size_t{64} << 20);
  std::atomic<int> calls = 0;
  std::atomic<int> wrong = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const std::string k = std::string("k").append(std::to_string((i * 7 + t) % 6));
        auto g = cache.GetOrBuild(k, Counting(k, &calls));
        if (!g.ok() || (*g)->gbnf() != std::string("root ::= \"").append(k).append("\"")) ++wrong;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong, 0);
  EXPECT_LE(cache.stats().entries, 3u);
}

}  // namespace
}  // namespace llamay::grammar
