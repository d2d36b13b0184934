// Read-only views of the state engine, for tools that show it (the server's /v1/state and the built-in
// page): a context's pages with their identities and refcounts, the page pool by who holds what, and a
// bounded walk of the prefix tree with its hit counts.
//
// Every view is a copy taken under the locks the cache already has (cache.h gives their order), so it is
// consistent within itself at one instant and says nothing about the next. Taking one never allocates a
// page and never blocks a writer for longer than one pass over what it describes (a context's page list,
// the live pages, the tree's nodes).
//
// Page identity: a page's serial is unique for the cache's lifetime (a page copied on write is a new page
// with a new serial), so two contexts hold the same page exactly when they report the same serial.
#ifndef LLAMAY_KV_INSPECT_H_
#define LLAMAY_KV_INSPECT_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace llamay::kv {

struct PageView {
  uint64_t serial = 0;  // 0: no page (a windowed group released it)
  int32_t refs = 0;     // holders now: contexts (user and prefix tree) and tree checkpoints
};

struct ContextView {
  uint64_t id = 0;
  size_t size = 0;  // positions
  std::vector<std::vector<PageView>>
      groups;                      // [attention group][page index], page i holds positions [i*P, (i+1)*P)
  std::vector<size_t> first_held;  // [attention group] the first position whose rows are held
  size_t pages_shared = 0;         // held pages (every group) with refs > 1
  size_t pages_owned = 0;          // held pages with refs == 1
  // Recurrent layouts: the live slot (serial 0 while nothing was consumed), the positions it has consumed
  // and the checkpoints this context holds (ascending positions).
  PageView state;
  size_t state_position = 0;
  std::vector<size_t> checkpoints;
};

struct PoolCount {
  size_t pages = 0;  // pages of the attention groups only (a recurrent state is not a page of the strip)
  size_t bytes = 0;  // every kind of page, recurrent states and checkpoints included
};

// The live pages by who holds them. unique + shared + prefix_only cover every live page exactly once;
// evictable is the part of prefix_only that evicting every unpinned tree entry and checkpoint would free.
struct PoolView {
  PoolCount free;         // what the budget (or the arena) still allows; pages in mean attention-page size
  PoolCount unique;       // held by exactly one holder, not the prefix tree alone
  PoolCount shared;       // more than one holder, at least one of them outside the prefix tree
  PoolCount prefix_only;  // every holder is the prefix tree (its entries and checkpoints)
  PoolCount evictable;    // prefix_only and held by no pinned entry (nor a checkpoint at one)
  size_t states = 0;      // recurrent pages live (slots and checkpoints)
  size_t states_bytes = 0;
  size_t bytes_live = 0;
  size_t max_bytes = 0;   // 0: unbounded
  size_t page_bytes = 0;  // the mean attention page (every attention group's page_bytes / groups)
};

struct TreeViewOptions {
  size_t max_depth = 16;     // node levels below the root that are shown
  size_t max_children = 32;  // children shown per node (the most hit first)
  size_t max_nodes = 2048;   // nodes shown in all
  size_t edge_head = 64;     // edge tokens copied per node
  size_t top = 10;           // most hit prefixes reported
};

struct TreeNodeView {
  uint64_t id = 0;            // stable while the node lives (a split's upper part is a new node); root 0
  int64_t parent = -1;        // index of the parent in TreeView::nodes; -1 for the root
  size_t level = 0;           // nodes from the root (root 0)
  std::vector<int32_t> edge;  // the first edge_head tokens of the node's own edge
  size_t edge_tokens = 0;     // the whole edge's length
  size_t depth = 0;           // tokens from the root to the end of the edge
  size_t pages = 0;           // pages (every attention group) that the edge's positions lie in
  uint64_t hits = 0;          // matches that reused at least one token of the edge
  int64_t last_hit_ms = 0;    // wall-clock ms since the Unix epoch of the last such match; 0: never
  bool entry = false;         // owns a context (a retained sequence)
  bool pinned = false;
  bool checkpoint = false;  // owns a recurrent checkpoint
  size_t children = 0;      // children it has (shown or not)
};

struct TreeTopView {
  uint64_t id = 0;            // the node
  std::vector<int32_t> head;  // the first edge_head tokens of the path from the root
  std::vector<int32_t> edge;  // the first edge_head tokens of the node's own edge
  size_t tokens = 0;          // the path's length
  uint64_t hits = 0;
  int64_t last_hit_ms = 0;
};

struct TreeView {
  std::vector<TreeNodeView> nodes;  // breadth first, root first, a node before its children
  bool truncated = false;           // a cap left nodes out
  size_t nodes_total = 0;           // every node, the root included
  size_t entries = 0;
  // The most hit nodes, most hits first (ties: the longer prefix first); a node whose child has as many
  // hits is left out (the child names the same reuse, further).
  std::vector<TreeTopView> top;
};

}  // namespace llamay::kv

#endif  // LLAMAY_KV_INSPECT_H_
