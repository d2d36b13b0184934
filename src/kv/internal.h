// Internal state shared by the kv/ implementation files. Not part of the library's interface.
#ifndef LLAMAY_KV_INTERNAL_H_
#define LLAMAY_KV_INTERNAL_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <shared_mutex>
#include <cstddef>
#include <vector>

#include "kv/layout.h"

namespace llamay::kv {
class Cache;
}

namespace llamay::kv::internal {

// One page: either page_tokens positions of every layer of one attention group, laid out as KvLayout
// describes, or one recurrent state (a live slot or a checkpoint: every recurrent layer's state).
// `refs` is the number of holders: contexts (user or prefix-tree) whose page lists, live slot or
// checkpoint list hold it, and prefix-tree nodes that own it as a checkpoint.
struct Page {
  uint8_t* data = nullptr;  // group page: [layer in group][k|v][slot][row]; state: [layer][state bytes]
  size_t bytes = 0;         // page_bytes of its group, or the recurrent slot's bytes
  bool state = false;       // a recurrent state (live slot or checkpoint), not a KV page
  int64_t slot = -1;        // arena slot, or -1 for a heap page
  uint64_t serial = 0;      // issue number, for diagnostics
  std::atomic<int32_t> refs{1};
};

// The page lists of a context, one per attention group, stored interleaved ([page index][group]) in one
// vector, so a fork copies them with one allocation (a pure-attention layout's table is exactly its page
// list). pages[g][i] is group g's page i (null where a windowed group released it).
class PageTable {
 public:
  template <typename T>
  class View {  // one group's list
   public:
    T& operator[](size_t i) const { return flat_[i * groups_ + g_]; }
    size_t size() const { return groups_ ? n_ / groups_ : 0; }

   private:
    friend class PageTable;
    View(T* flat, size_t n, size_t groups, size_t g) : flat_(flat), n_(n), groups_(groups), g_(g) {}
    T* flat_;
    size_t n_, groups_, g_;
  };
  View<Page*> operator[](size_t g) { return {flat_.data(), flat_.size(), groups_, g}; }
  View<Page* const> operator[](size_t g) const { return {flat_.data(), flat_.size(), groups_, g}; }
  size_t size() const { return groups_; }  // groups
  size_t pages() const { return groups_ ? flat_.size() / groups_ : 0; }  // per group
  void set_groups(size_t g) { groups_ = g; }
  void resize_pages(size_t n) { flat_.resize(n * groups_); }
  // Every page pointer, all groups (null included).
  std::vector<Page*>& flat() { return flat_; }
  const std::vector<Page*>& flat() const { return flat_; }

 private:
  std::vector<Page*> flat_;
  size_t groups_ = 0;
};

// A frozen recurrent state: the complete state after exactly the first `pos` positions.
struct Checkpoint {
  size_t pos = 0;
  Page* state = nullptr;
};

// What a Context handle points at.
struct ContextState {
  Cache* cache = nullptr;
  uint64_t id = 0;
  bool tree_owned = false;  // held by the prefix tree: never written after insertion
  // Exclusive for every mutation (append, write, truncate, close); shared for reads, fork, snapshot and
  // retain. This is what enforces the single-owner rule: misuse from two threads is serialised.
  mutable std::shared_mutex mu;
  // GUARDED_BY(mu): [attention group][page]; each list holds ceil(tokens.size() / page_tokens) entries,
  // null where a windowed group released a page that no later query can read.
  PageTable pages;
  // GUARDED_BY(mu): [attention group] the first position whose rows are held. Below it a windowed group
  // released the pages (TrimWindows) or never had the rows (a restore stores the window only); 0 for a
  // full-attention group.
  // (A fixed array: a fork copies it without allocating.)
  std::array<size_t, kMaxAttentionGroups> floor{};
  std::vector<int32_t> tokens;  // GUARDED_BY(mu); one token id per position
  // GUARDED_BY(mu). The live recurrent slot: the state after the first state_pos positions (null while
  // state_pos == 0: the zero state). state_pos <= tokens.size(); positions past it are appended but not
  // yet consumed by the recurrent layers.
  Page* state = nullptr;
  size_t state_pos = 0;
  std::vector<Checkpoint> checkpoints;  // GUARDED_BY(mu); ascending pos, each in (0, state_pos]
};

}  // namespace llamay::kv::internal

#endif  // LLAMAY_KV_INTERNAL_H_
