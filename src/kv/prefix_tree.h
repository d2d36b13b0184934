// PrefixTree: a radix tree over token sequences whose entries own immutable contexts. Internal to kv/;
// reached through Cache (which holds tree_mu_ around every call).
//
// Invariants (CheckInvariants):
//   - Every non-root node has a non-empty edge, is keyed in its parent by its edge's first token, and
//     depth == parent depth + edge length.
//   - A node is an entry (owns a context holding exactly the tokens from the root to its edge's end) or
//     a split node with at least two children; a split node with one child is collapsed into it, a
//     node with no entry and no children is removed.
//   - best: the most recently used entry in the node's subtree (null only for an empty root).
//   - Victim order: unpinned entries without children (leaves) by last use, then unpinned entries with
//     children by last use. Split nodes and pinned entries are never victims.
//   - holds_ counts, for every page, how many entry contexts hold it; bytes() is distinct pages * size.
// Thread-safety: none of its own; the Cache serialises access with tree_mu_.
#ifndef LLAMAY_KV_PREFIX_TREE_H_
#define LLAMAY_KV_PREFIX_TREE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <memory>
#include <set>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "kv/context.h"
#include "kv/internal.h"

namespace llamay::kv {
struct TreeEntryInfo;
}

namespace llamay::kv::internal {

class PrefixTree {
 public:
  explicit PrefixTree(size_t page_bytes);
  ~PrefixTree();

  // Takes `ctx` (a fork made by the cache, marked tree-owned) as the entry for its tokens. When an
  // entry for those tokens exists it is refreshed instead and `ctx` is closed.
  void Insert(Context ctx, bool pin);
  // The longest prefix of `tokens` held by any entry: the most recently used entry holding it, and its
  // length; {nullptr, 0} when nothing matches. Marks the entry used.
  std::pair<const Context*, size_t> Match(std::span<const int32_t> tokens);
  bool SetPinned(std::span<const int32_t> tokens, bool pinned);
  bool EvictOne();
  void Clear();

  size_t entries() const { return entries_; }
  size_t nodes() const { return nodes_; }
  size_t pinned() const { return pinned_; }
  size_t bytes() const { return holds_.size() * page_bytes_; }
  uint64_t evictions() const { return evictions_; }

  std::vector<TreeEntryInfo> Entries() const;
  std::optional<std::vector<int32_t>> VictimTokens() const;
  Status CheckInvariants() const;

 private:
  struct Node;
  enum class VictimClass { kNone, kLeaf, kInterior };

  Node* FindExact(std::span<const int32_t> tokens) const;
  Node* Victim() const;
  void Reindex(Node* n);
  void Touch(Node* n);
  void Hold(const Context& ctx, int delta);
  void RemoveEntry(Node* n);
  void Prune(Node* n);
  Node* Collapse(Node* n);
  void FixBestUpward(Node* start, Node* removed);
  static Node* BestOf(Node* n);
  std::vector<int32_t> PathTokens(const Node* n) const;

  const size_t page_bytes_;
  std::unique_ptr<Node> root_;
  uint64_t tick_ = 0;
  size_t entries_ = 0;
  size_t nodes_ = 1;
  size_t pinned_ = 0;
  uint64_t evictions_ = 0;
  std::set<std::pair<uint64_t, Node*>> leaves_;     // unpinned entries without children
  std::set<std::pair<uint64_t, Node*>> interiors_;  // unpinned entries with children
  std::unordered_map<const Page*, uint32_t> holds_;
};

}  // namespace llamay::kv::internal

#endif  // LLAMAY_KV_PREFIX_TREE_H_
