// A bounded cache of compiled grammars, for a server whose clients send the same tools and schemas on
// every turn: an agent's tool list is compiled on its first request and looked up on the next ones.
//
// A key is a text that determines the grammar completely: its GBNF source, or a serialization of what it
// is built from (tools, tool choice, schema). Whole keys are compared, not only their hashes, so two
// requests never share a grammar through a hash collision. Failures are kept too (a refused tool list
// sent again is refused at once); every builder is a pure function of its key, so a kept failure is what
// building again would return. While one thread builds a key, others asking for the same key wait for that
// build instead of starting their own (parallel sub-agents send the same tools at once).
//
// Bounded in entries and in bytes (key plus automaton, grammar.h's Grammar::memory_bytes); the least
// recently used entries go first. A result larger than the byte bound is returned but not kept.
//
//   static grammar::GrammarCache cache(64, 256 << 20);
//   auto g = cache.GetOrBuild(key, [&] { return grammar::ParseGbnf(text); });
//
// Thread-safety: every member may be called concurrently; a builder runs without the cache's lock held.
#ifndef LLAMAY_GRAMMAR_GRAMMAR_CACHE_H_
#define LLAMAY_GRAMMAR_GRAMMAR_CACHE_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/status.h"
#include "grammar/grammar.h"

namespace llamay::grammar {

class GrammarCache {
 public:
  using GrammarResult = Result<std::shared_ptr<const Grammar>>;
  using Builder = std::function<GrammarResult()>;

  // REQUIRES: max_entries >= 1.
  GrammarCache(size_t max_entries, size_t max_bytes);
  GrammarCache(const GrammarCache&) = delete;
  GrammarCache& operator=(const GrammarCache&) = delete;

  // The result kept under `key`, or else build()'s, which is kept (within the bounds) and returned.
  GrammarResult GetOrBuild(std::string_view key, const Builder& build);

  struct Stats {
    size_t entries = 0;  // kept results (builds under way not counted)
    size_t bytes = 0;    // their keys and grammars
    uint64_t hits = 0;   // lookups answered by a kept result or by another thread's build
    uint64_t misses = 0;  // lookups that built
  };
  Stats stats() const;
  // Drops every kept result (builds under way finish and are kept).
  void Clear();

 private:
  struct Entry {
    std::string key;
    std::optional<GrammarResult> result;  // empty while being built
    size_t bytes = 0;
  };
  // Shared: a thread waiting for a build holds its entry even if the entry leaves the cache meanwhile.
  using List = std::list<std::shared_ptr<Entry>>;

  // Drops least recently used finished entries until the bounds hold. REQUIRES: mu_ held.
  void EvictLocked();
  // REQUIRES: mu_ held.
  void EraseLocked(List::iterator it);

  const size_t max_entries_;
  const size_t max_bytes_;
  mutable std::mutex mu_;
  std::condition_variable built_;
  List lru_;  // most recently used first
  // Views into each entry's own key (entries never move).
  std::unordered_map<std::string_view, List::iterator> index_;
  size_t entries_ = 0;  // finished entries in lru_
  size_t bytes_ = 0;
  uint64_t hits_ = 0;
  uint64_t misses_ = 0;
};

}  // namespace llamay::grammar

#endif  // LLAMAY_GRAMMAR_GRAMMAR_CACHE_H_
