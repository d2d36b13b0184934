// PrefixTree: a radix tree over token sequences whose entries own immutable contexts. Internal to kv/;
// reached through Cache (which holds tree_mu_ around every call).
//
// Invariants (CheckInvariants):
//   - Every non-root node has a non-empty edge, is keyed in its parent by its edge's first token, and
//     depth == parent depth + edge length.
//   - A node is an entry (owns a context holding exactly the tokens from the root to its edge's end), a
//     split node with at least two children, or a checkpoint node (owns a checkpoint, see below) with at
//     least one child; any other node is collapsed into its one child or removed.
//   - Checkpoints (recurrent layouts): a node may own one checkpoint, whose position equals the node's
//     depth (the state after exactly the node's path). Every checkpoint node has an entry in its subtree
//     (the KV a match there reuses). Entry contexts hold no state of their own.
//   - best: the most recently used entry in the node's subtree (null only for an empty root).
//   - Victim order: unpinned entries without children (leaves) by last use, then unpinned entries with
//     children by last use. Split nodes and pinned entries are never victims. Checkpoints not at a pinned
//     entry are victims by their retention key, lowest first; EvictOne takes the checkpoint victim when
//     its key is below the entry victim's (ties: the one used first). Keys (CheckpointRetention, cache.h):
//       - kLastUse: a use's tick, for entries and checkpoints alike (least recently used first);
//       - kValue: a clock that rises to the key of whatever is evicted (never falls) gives both kinds
//         their age: an entry's key is the clock at its last use + 1, a checkpoint's the clock at its last
//         use + CheckpointWorth (the prefill a resume from it saves, per byte of state, against an entry's
//         KV, times its resumes). Entries keep their least-recently-used order among themselves; a
//         checkpoint that saves a long prefix and is resumed often outlives entries and checkpoints used
//         after it, one that saves a few tokens goes before them.
//   - holds_ counts, for every page, how many entry contexts and checkpoints hold it; bytes() is the sum
//     of the distinct pages' sizes.
//   - Hits (for tools that show the tree, inspect.h): a node counts the matches that reused its whole edge
//     (hits_full) and, by offset into the edge, those that ended inside it (ends). A split hands the upper
//     part every match that covered it, a collapse turns the matches that ended at the upper node into
//     ends of the merged one, so the counts stay exact as the shape changes (up to kMaxHitEnds offsets per
//     node; past that a new offset's count goes to the nearest offset below it).
// Thread-safety: none of its own; the Cache serialises access with tree_mu_.
#ifndef LLAMAY_KV_PREFIX_TREE_H_
#define LLAMAY_KV_PREFIX_TREE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <set>
#include <tuple>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "base/status.h"
#include "kv/context.h"
#include "kv/inspect.h"
#include "kv/internal.h"

namespace llamay::kv {
struct TreeEntryInfo;
struct TreeCheckpointInfo;
}

namespace llamay::kv::internal {

struct TreeMatch {
  const Context* entry = nullptr;  // holds at least `matched` positions; null when nothing matched
  size_t matched = 0;
  Page* state = nullptr;           // recurrent layouts: the checkpoint after exactly `matched` positions
};

class PrefixTree {
 public:
  // `cache` releases the checkpoints the tree drops; its layout gives windows and page size.
  explicit PrefixTree(Cache* cache);
  ~PrefixTree();

  // Takes `ctx` (a fork made by the cache, marked tree-owned, holding no state) as the entry for its
  // tokens. When an entry for those tokens exists it is refreshed instead and `ctx` is closed. Each of
  // `checkpoints` (positions in (0, size]) goes to the node ending at its position unless that node owns
  // one already (then it is released: a cached checkpoint never changes).
  void Insert(Context ctx, bool pin, std::vector<Checkpoint> checkpoints = {});
  // The longest prefix of `tokens` that can be resumed: the most recently used entry holding it, and its
  // length; for recurrent layouts cut back to the deepest checkpoint on the path, and for windowed
  // groups to where the entry still holds the window. {nullptr, 0} when nothing matches. Marks the entry
  // (and checkpoint) used.
  TreeMatch Match(std::span<const int32_t> tokens);
  bool SetPinned(std::span<const int32_t> tokens, bool pinned);
  bool EvictOne();
  void Clear();

  size_t entries() const { return entries_; }
  size_t nodes() const { return nodes_; }
  size_t pinned() const { return pinned_; }
  size_t bytes() const { return bytes_; }
  size_t checkpoints() const { return checkpoints_.size() + protected_checkpoints_; }
  uint64_t evictions() const { return evictions_; }
  uint64_t hits() const { return hits_; }

  // Counts one use of tokens[0, matched) in the nodes it reached (see "Hits"); Match calls it.
  void RecordHit(std::span<const int32_t> tokens, size_t matched);
  // A bounded walk for tools that show the tree (inspect.h).
  TreeView Inspect(const TreeViewOptions& options) const;
  // For every page, how many entry contexts and checkpoints hold it.
  const std::unordered_map<const Page*, uint32_t>& holds() const { return holds_; }
  // Pages that eviction never frees: those of pinned entries and of checkpoints at pinned entries.
  std::unordered_set<const Page*> ProtectedPages() const;

  std::vector<TreeEntryInfo> Entries() const;
  std::vector<TreeCheckpointInfo> Checkpoints() const;
  // The checkpoint pages nodes hold, with how many nodes hold each (one: a page is donated once).
  std::unordered_map<const Page*, uint32_t> CheckpointHolds() const;
  // The victim's tokens, and true when it is a checkpoint.
  std::optional<std::pair<std::vector<int32_t>, bool>> VictimTokens() const;
  Status CheckInvariants() const;

 private:
  struct Node;
  enum class VictimClass { kNone, kLeaf, kInterior };

  Node* FindExact(std::span<const int32_t> tokens) const;
  Node* Victim() const;
  Node* CheckpointVictim() const;
  bool CheckpointFirst() const;
  bool value_policy() const;
  double EntryKey(const Node* n) const;
  // Sets n->cp_key from its last use (see the header comment).
  void KeyCheckpoint(Node* n);
  void Reindex(Node* n);
  void ReindexCheckpoint(Node* n);
  void Touch(Node* n);
  void Hold(const Page* p, int delta);
  void Hold(const Context& ctx, int delta);
  // The node ending exactly `depth` tokens down the path of entry `leaf` (splitting an edge if needed).
  Node* NodeAtDepth(Node* leaf, size_t depth);
  void Attach(Node* n, Checkpoint cp);
  void DropCheckpoint(Node* n);
  // True when `e` holds the pages a query at position n reads in every windowed group.
  bool WindowsHeld(const Context& e, size_t n) const;
  void RemoveEntry(Node* n);
  void Prune(Node* n);
  Node* Collapse(Node* n);
  // Moves `c`'s hits for its first k edge tokens to `mid`, the new node that takes them (a split).
  static void SplitHits(Node* mid, Node* c, size_t k);
  // Folds n's hits into its only child, which takes n's edge in front of its own (a collapse).
  static void MergeHits(const Node* n, Node* child);
  static uint64_t Hits(const Node* n);
  std::unique_ptr<Node> NewNode();
  void FixBestUpward(Node* start, Node* removed);
  static Node* BestOf(Node* n);
  std::vector<int32_t> PathTokens(const Node* n) const;
  // Calls f(node, its path's tokens) for every node, depth-first, children by ascending first token.
  void VisitPaths(const std::function<void(const Node*, const std::vector<int32_t>&)>& f) const;

  Cache* const cache_;
  std::unique_ptr<Node> root_;
  uint64_t tick_ = 0;
  double clock_ = 0;  // kValue: the largest key evicted so far
  uint64_t next_node_id_ = 1;  // the root is node 0
  size_t entries_ = 0;
  size_t nodes_ = 1;
  size_t pinned_ = 0;
  uint64_t evictions_ = 0;
  uint64_t hits_ = 0;  // RecordHit calls that reused something
  std::set<std::pair<uint64_t, Node*>> leaves_;     // unpinned entries without children
  std::set<std::pair<uint64_t, Node*>> interiors_;  // unpinned entries with children
  // Checkpoint nodes not at a pinned entry, by (retention key, last use).
  std::set<std::tuple<double, uint64_t, Node*>> checkpoints_;
  size_t protected_checkpoints_ = 0;                   // checkpoint nodes at a pinned entry
  std::unordered_map<const Page*, uint32_t> holds_;
  size_t bytes_ = 0;
};

}  // namespace llamay::kv::internal

#endif  // LLAMAY_KV_PREFIX_TREE_H_
