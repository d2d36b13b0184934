// Internal state shared by the kv/ implementation files. Not part of the library's interface.
#ifndef LLAMAY_KV_INTERNAL_H_
#define LLAMAY_KV_INTERNAL_H_

#include <atomic>
#include <cstdint>
#include <shared_mutex>
#include <vector>

namespace llamay::kv {
class Cache;
}

namespace llamay::kv::internal {

// One page: page_tokens positions of every layer, laid out as KvLayout describes.
// `refs` is the number of contexts (user or prefix-tree) whose page list holds this page.
struct Page {
  uint8_t* data = nullptr;  // [layer][k|v][slot][row]; page_bytes long
  int64_t slot = -1;        // arena slot, or -1 for a heap page
  uint64_t serial = 0;      // issue number, for diagnostics
  std::atomic<int32_t> refs{1};
};

// What a Context handle points at.
struct ContextState {
  Cache* cache = nullptr;
  uint64_t id = 0;
  bool tree_owned = false;  // held by the prefix tree: never written after insertion
  // Exclusive for every mutation (append, write, truncate, close); shared for reads, fork, snapshot and
  // retain. This is what enforces the single-owner rule: misuse from two threads is serialised.
  mutable std::shared_mutex mu;
  std::vector<Page*> pages;     // GUARDED_BY(mu); pages.size() == ceil(tokens.size() / page_tokens)
  std::vector<int32_t> tokens;  // GUARDED_BY(mu); one token id per position
};

}  // namespace llamay::kv::internal

#endif  // LLAMAY_KV_INTERNAL_H_
