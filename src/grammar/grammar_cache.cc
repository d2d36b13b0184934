// The grammar cache (see grammar_cache.h).
#include "grammar/grammar_cache.h"

#include <utility>

#include "base/check.h"

namespace llamay::grammar {
namespace {

// A kept failure's size: its message (the key is counted apart).
size_t ResultBytes(const GrammarCache::GrammarResult& r) {
  return r.ok() ? (*r)->memory_bytes() : r.status().message().size();
}

}  // namespace

GrammarCache::GrammarCache(size_t max_entries, size_t max_bytes)
    : max_entries_(max_entries), max_bytes_(max_bytes) {
  LLAMAY_CHECK(max_entries >= 1);
}

GrammarCache::GrammarResult GrammarCache::GetOrBuild(std::string_view key, const Builder& build) {
  std::shared_ptr<Entry> entry;
  {
    std::unique_lock lock(mu_);
    const auto it = index_.find(key);
    if (it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      entry = *it->second;
      ++hits_;
      // Another thread is building it: wait for that build rather than doing the same work twice.
      built_.wait(lock, [&] { return entry->result.has_value(); });
      return *entry->result;
    }
    ++misses_;
    entry = std::make_shared<Entry>();
    entry->key = std::string(key);
    lru_.push_front(entry);
    index_.emplace(entry->key, lru_.begin());
  }
  GrammarResult result = build();  // without the lock: builds of other keys go on meanwhile
  std::lock_guard lock(mu_);
  entry->result = result;
  entry->bytes = entry->key.size() + ResultBytes(result);
  ++entries_;
  bytes_ += entry->bytes;
  built_.notify_all();
  const auto it = index_.find(entry->key);
  if (entry->bytes > max_bytes_ && it != index_.end() && *it->second == entry) EraseLocked(it->second);
  EvictLocked();
  return result;
}

void GrammarCache::EraseLocked(List::iterator it) {
  const std::shared_ptr<Entry> entry = *it;
  if (entry->result.has_value()) {
    --entries_;
    bytes_ -= entry->bytes;
  }
  index_.erase(entry->key);
  lru_.erase(it);
}

void GrammarCache::EvictLocked() {
  // From the least recently used end; entries still being built are not counted and stay.
  auto it = lru_.end();
  while ((entries_ > max_entries_ || bytes_ > max_bytes_) && it != lru_.begin()) {
    --it;
    if (!(*it)->result.has_value()) continue;
    auto victim = it;
    it = std::next(it);
    EraseLocked(victim);
  }
}

GrammarCache::Stats GrammarCache::stats() const {
  std::lock_guard lock(mu_);
  return Stats{entries_, bytes_, hits_, misses_};
}

void GrammarCache::Clear() {
  std::lock_guard lock(mu_);
  for (auto it = lru_.begin(); it != lru_.end();) {
    auto next = std::next(it);
    if ((*it)->result.has_value()) EraseLocked(it);
    it = next;
  }
}

}  // namespace llamay::grammar
