// Cache: the page pool (heap or arena), the memory budget, the registry of live contexts and the prefix
// tree. The entry point of the state engine.
//
// Pages
//   - A page is a page of one attention group (the group's page_bytes) or one recurrent state (a live
//     slot or a checkpoint). Every page comes from AllocatePage and goes back through ReleasePages, the one
//     release path (heap or arena alike). Pages are zeroed when issued (except a page about to be
//     overwritten whole by a copy).
//   - With arena_pages > 0 every page is a slot of one preallocated slab (slots as large as the largest
//     kind of page); slots out == live pages.
//   - Memory is bounded in bytes: the bytes of every live page (KV pages, live slots, checkpoints) <=
//     max_bytes (when set). An allocation that would exceed it first evicts prefix-tree entries and
//     checkpoints, and fails with ResourceExhausted only when none is evictable.
//
// Prefix tree (prefix_tree.h)
//   - Retain(ctx) inserts a fork of ctx under its token sequence; Match(tokens) returns a new context
//     holding the longest prefix of `tokens` that any entry computed, and its length. A match may end
//     inside a page: that page is then shared, and copied only when the new context writes it.
//   - Recurrent layouts: Retain donates the context's checkpoints (and its live slot, when it has consumed
//     every position) to the tree nodes ending exactly at their positions. Match truncates reuse to the
//     deepest node on the matched path that owns a checkpoint, and hands the new context the checkpoint
//     as its live slot (shared: the first write copies it, so the cached one never changes, and the
//     context's reference protects it from eviction). Windowed groups: reuse at n needs the pages a
//     query at n reads; a shorter candidate is tried, else nothing is reused.
//   - Checkpoints are evicted independently of entries, in the same byte budget, by
//     CacheOptions::checkpoint_retention (the value of what a checkpoint saves against the memory it
//     takes, by default; prefix_tree.h has the order); a checkpoint at a pinned entry is never a victim.
//   - Bounded by tree_max_bytes (bytes of the distinct pages its entries hold) and tree_max_entries.
//     Eviction takes the least recently used unpinned leaf entry first (then unpinned interior entries),
//     never an interior split node, never a pinned entry; it prunes upward and collapses one-child nodes.
//
// Thread-safety: all methods are thread-safe. Lock order: a context's lock, then tree_mu_, then a
// prefix-tree context's lock, then pool_mu_. The tree never takes a user context's lock while holding
// tree_mu_ (Retain forks first, then inserts).
#ifndef LLAMAY_KV_CACHE_H_
#define LLAMAY_KV_CACHE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "base/status.h"
#include "kv/context.h"
#include "kv/inspect.h"
#include "kv/layout.h"

namespace llamay::kv {

namespace internal {
struct Page;
struct ContextState;
class PrefixTree;
}  // namespace internal

// How the prefix tree weighs its checkpoints against its entries when it evicts (prefix_tree.h).
enum class CheckpointRetention : uint8_t {
  kValue,    // by what a checkpoint saves per byte of state, how often it is resumed, and age
  kLastUse,  // least recently used first, checkpoints and entries alike
};

// The value policy's worth of a checkpoint, in units of an entry's: a resume from it saves `saved` tokens
// of prefill (those since the nearest checkpoint above it), its state takes `state_bytes` where an entry's
// KV takes page_bytes / page_tokens a token, and it was resumed `resumes` times (counted up to 15, so an
// old favourite cannot outlive every change of traffic). That is
//   min(resumes + 1, 16) * saved * (page_bytes / page_tokens) / state_bytes,
// or, with no attention layers (page_bytes 0, entries hold no memory), min(resumes + 1, 16) * saved /
// page_tokens. An entry's worth is 1: a checkpoint worth less than 1 goes before an entry last used at
// the same time, one worth k survives as many evictions of entries used then.
double CheckpointWorth(size_t saved, uint32_t resumes, size_t page_bytes, uint32_t page_tokens, size_t state_bytes);

struct CacheOptions {
  KvLayout layout;
  size_t max_bytes = 0;         // budget for live pages; 0 = unbounded
  size_t arena_pages = 0;       // > 0: pages are slots of one preallocated slab of this many pages
  size_t tree_max_bytes = 0;    // bytes of pages the prefix tree may hold; 0 = bounded only by max_bytes
  size_t tree_max_entries = 0;  // 0 = unbounded
  CheckpointRetention checkpoint_retention = CheckpointRetention::kValue;
};

struct CacheStats {
  size_t page_bytes = 0;    // KV pages of every attention group for page_tokens positions
  size_t pages_live = 0;
  size_t pages_shared = 0;  // live pages with refcount > 1
  uint64_t pages_allocated_total = 0;
  uint64_t pages_freed_total = 0;
  uint64_t page_copies = 0;  // copy-on-write copies made by Writable()
  size_t states_live = 0;  // live recurrent slots and checkpoints (pages of the state kind)
  size_t bytes_live = 0;    // every live page, both kinds
  size_t max_bytes = 0;
  size_t arena_slots = 0;
  size_t arena_slots_out = 0;
  size_t contexts_live = 0;  // user and tree contexts
  size_t tree_entries = 0;
  size_t tree_nodes = 0;  // including the root
  size_t tree_pinned = 0;
  size_t tree_bytes = 0;    // distinct pages held by tree entries and checkpoints
  size_t tree_checkpoints = 0;
  uint64_t tree_evictions = 0;  // entries and checkpoints
  uint64_t tree_hits = 0;       // matches that reused at least one token
};

struct MatchResult {
  Context context;     // holds tokens[0, matched); empty (size 0) when nothing matched
  size_t matched = 0;
};

struct TreeEntryInfo {
  std::vector<int32_t> tokens;
  bool pinned = false;
  uint64_t last_used = 0;  // tick of the last Retain or Match that used it
};

struct TreeCheckpointInfo {
  std::vector<int32_t> tokens;  // the node's path: the state is the one after exactly these tokens
  uint64_t last_used = 0;       // tick of the Retain that donated it or the last Match that used it
  bool protected_ = false;      // at a pinned entry: never a victim
  uint32_t resumes = 0;         // matches that resumed from it
  double retention_key = 0;     // lowest goes first (CheckpointRetention)
};

class Cache {
 public:
  static Result<std::unique_ptr<Cache>> Create(const CacheOptions& options);
  // REQUIRES: every user context from this cache is closed (CHECKed). Tree entries are released here.
  ~Cache();
  Cache(const Cache&) = delete;
  Cache& operator=(const Cache&) = delete;

  const KvLayout& layout() const { return options_.layout; }
  const StateGroups& groups() const { return groups_; }
  const CacheOptions& options() const { return options_; }

  Context NewContext();

  // Inserts ctx's positions into the prefix tree (a fork: no page is copied). Re-retaining the same
  // tokens refreshes the entry (and pins it if `pin`). Empty contexts are ignored.
  Status Retain(const Context& ctx, bool pin = false);
  MatchResult Match(std::span<const int32_t> tokens);
  // Pins or unpins the entry for exactly `tokens`; false when there is none.
  bool SetPinned(std::span<const int32_t> tokens, bool pinned);
  // Evicts the next victim; false when nothing is evictable.
  bool EvictOne();
  // Removes every tree entry, pinned or not.
  void ClearTree();

  CacheStats Stats() const;
  // Tree entries in depth-first order (children by ascending first token).
  std::vector<TreeEntryInfo> TreeEntries() const;
  // Checkpoints owned by tree nodes, in the same order.
  std::vector<TreeCheckpointInfo> TreeCheckpoints() const;
  // The tokens of the entry (or checkpoint node) EvictOne would remove, and whether it is a checkpoint.
  std::optional<std::pair<std::vector<int32_t>, bool>> NextVictimOf() const;
  std::optional<std::vector<int32_t>> NextVictim() const;

  // Views for tools that show the state (inspect.h). Each takes tree_mu_ (and for the pool pool_mu_ too)
  // for one pass over what it describes.
  PoolView InspectPool() const;
  TreeView InspectTree(const TreeViewOptions& options = {}) const;
  // Serials of the pages the prefix tree holds (its entries' pages and its checkpoints), ascending.
  std::vector<uint64_t> TreePageSerials() const;

  // Checks every invariant of pages, arena, contexts and tree (see docs/design.md); an Internal status
  // names the first that fails. REQUIRES: no other thread is using the cache.
  Status CheckInvariants() const;

 private:
  friend class Context;
  friend class SnapshotCodec;
  friend class internal::PrefixTree;
  explicit Cache(const CacheOptions& options);

  // A page of `bytes` with refcount 1. zero: clear it (false only when the caller overwrites every byte).
  // state: a recurrent state page rather than a KV page.
  Result<internal::Page*> AllocatePage(size_t bytes, bool zero, bool state = false);
  bool HasRoomLocked(size_t bytes) const;
  internal::Page* IssuePageLocked(size_t bytes, bool zero, bool state);
  // The one release path: drops one reference from each page; a page whose count reaches zero goes
  // back to the heap free list or the arena.
  void ReleasePages(std::span<internal::Page* const> pages);
  Context Register(std::unique_ptr<internal::ContextState> state);
  void Unregister(internal::ContextState* s);
  void ClosePages(internal::ContextState* s);
  Status CheckPagesLocked() const;

  const CacheOptions options_;
  const StateGroups groups_;
  const size_t page_bytes_;  // the largest kind of page: an arena slot

  mutable std::mutex tree_mu_;
  std::unique_ptr<internal::PrefixTree> tree_;  // GUARDED_BY(tree_mu_)

  mutable std::mutex pool_mu_;
  std::unordered_set<internal::Page*> live_;              // GUARDED_BY(pool_mu_)
  std::unordered_set<internal::ContextState*> contexts_;  // GUARDED_BY(pool_mu_)
  std::unordered_map<size_t, std::vector<uint8_t*>> heap_free_;  // GUARDED_BY(pool_mu_): by size
  size_t heap_free_count_ = 0;                                   // GUARDED_BY(pool_mu_)
  size_t bytes_live_ = 0;                                        // GUARDED_BY(pool_mu_)
  uint8_t* arena_ = nullptr;                              // arena_pages * page_bytes_
  std::vector<int64_t> arena_free_;                       // GUARDED_BY(pool_mu_)
  uint64_t allocated_total_ = 0;                          // GUARDED_BY(pool_mu_)
  uint64_t freed_total_ = 0;                              // GUARDED_BY(pool_mu_)
  uint64_t next_serial_ = 1;                              // GUARDED_BY(pool_mu_)
  uint64_t next_context_id_ = 1;                          // GUARDED_BY(pool_mu_)
  std::atomic<uint64_t> copies_{0};
};

}  // namespace llamay::kv

#endif  // LLAMAY_KV_CACHE_H_
