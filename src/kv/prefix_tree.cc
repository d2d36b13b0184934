#include "kv/prefix_tree.h"

#include <algorithm>
#include <chrono>
#include <queue>
#include <string>

#include "kv/cache.h"

namespace llamay::kv::internal {

struct PrefixTree::Node {
  std::vector<int32_t> edge;  // tokens from the parent's end to this node's end
  Node* parent = nullptr;
  std::map<int32_t, std::unique_ptr<Node>> children;  // keyed by the child's edge[0]
  size_t depth = 0;                                   // tokens from the root to the end of edge
  Context ctx;                                        // valid() iff this node is an entry
  bool pinned = false;
  uint64_t tick = 0;    // last use (entries)
  double use_clock = 0;  // the tree's clock_ at that use (the value policy's key is use_clock + 1)
  Node* best = nullptr;  // most recently used entry in this subtree
  VictimClass vclass = VictimClass::kNone;
  uint64_t vtick = 0;  // the tick under which it is filed in leaves_/interiors_
  Checkpoint cp;       // cp.state != null: this node owns a checkpoint at cp.pos == depth
  uint64_t cp_tick = 0;   // last use of the checkpoint
  uint32_t cp_resumes = 0;  // matches that resumed from it
  double cp_key = 0;      // its retention key (KeyCheckpoint): the lowest goes first
  uint64_t cp_vtick = 0;  // the tick and key under which it is filed in checkpoints_
  double cp_vkey = 0;
  bool cp_indexed = false;    // filed in checkpoints_ under (cp_key, cp_tick)
  bool cp_protected = false;  // counted in protected_checkpoints_ (at a pinned entry)
  uint64_t id = 0;            // stable while the node lives; the root's is 0
  uint64_t hits_full = 0;     // matches that reused the whole edge
  std::map<uint32_t, uint64_t> ends;  // offset k into the edge (0 < k < edge.size()) -> matches ended there
  int64_t last_hit_ms = 0;    // wall clock of the last match that reused any of the edge; 0: never
  bool entry() const { return ctx.valid(); }
  bool has_cp() const { return cp.state != nullptr; }
};

namespace {

// Offsets into one edge at which ended matches are counted separately (see "Hits" in the header).
constexpr size_t kMaxHitEnds = 16;

int64_t NowMs() {
  using std::chrono::duration_cast, std::chrono::milliseconds, std::chrono::system_clock;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

// Counts `n` matches that ended k tokens into an edge.
void AddEnd(std::map<uint32_t, uint64_t>& ends, uint32_t k, uint64_t n) {
  if (n == 0) return;
  if (auto it = ends.find(k); it != ends.end() || ends.size() < kMaxHitEnds) {
    ends[k] += n;
    return;
  }
  // Full: the nearest offset below k takes them (they reused at least that much), else the lowest.
  auto it = ends.lower_bound(k);
  if (it != ends.begin()) --it;
  it->second += n;
}

size_t CommonPrefix(const std::vector<int32_t>& edge, std::span<const int32_t> rest) {
  size_t n = std::min(edge.size(), rest.size()), k = 0;
  while (k < n && edge[k] == rest[k]) ++k;
  return k;
}

}  // namespace

PrefixTree::PrefixTree(Cache* cache) : cache_(cache), root_(std::make_unique<Node>()) {}

PrefixTree::~PrefixTree() { Clear(); }

std::unique_ptr<PrefixTree::Node> PrefixTree::NewNode() {
  auto n = std::make_unique<Node>();
  n->id = next_node_id_++;
  return n;
}

uint64_t PrefixTree::Hits(const Node* n) {
  uint64_t h = n->hits_full;
  for (const auto& [k, count] : n->ends) h += count;
  return h;
}

void PrefixTree::SplitHits(Node* mid, Node* c, size_t k) {
  // Matches that reached offset k or beyond covered the upper part whole; those that ended before it end
  // inside the upper part; those that ended past it end inside the lower part, k tokens earlier.
  mid->hits_full = c->hits_full;
  mid->last_hit_ms = c->last_hit_ms;
  std::map<uint32_t, uint64_t> lower;
  for (const auto& [off, count] : c->ends) {
    if (off < k) {
      mid->ends[off] = count;
    } else {
      mid->hits_full += count;
      if (off > k) lower[static_cast<uint32_t>(off - k)] = count;
    }
  }
  c->ends = std::move(lower);
}

void PrefixTree::MergeHits(const Node* n, Node* child) {
  // The merged node keeps the child's full and ended matches (shifted past n's edge), n's ended matches,
  // and, as matches that ended at offset |n's edge|, those that covered n but did not enter the child.
  const uint32_t a = static_cast<uint32_t>(n->edge.size());
  std::map<uint32_t, uint64_t> ends = n->ends;
  uint64_t into_child = child->hits_full;
  for (const auto& [off, count] : child->ends) {
    AddEnd(ends, a + off, count);
    into_child += count;
  }
  AddEnd(ends, a, n->hits_full > into_child ? n->hits_full - into_child : 0);
  child->ends = std::move(ends);
  child->last_hit_ms = std::max(child->last_hit_ms, n->last_hit_ms);
}

void PrefixTree::RecordHit(std::span<const int32_t> tokens, size_t matched) {
  if (matched == 0) return;
  ++hits_;
  const int64_t now = NowMs();
  Node* n = root_.get();
  size_t i = 0;
  while (i < matched) {
    auto it = n->children.find(tokens[i]);
    if (it == n->children.end()) return;  // cannot happen: tokens[0, matched) is a path of the tree
    Node* c = it->second.get();
    c->last_hit_ms = now;
    if (matched - i < c->edge.size()) {
      AddEnd(c->ends, static_cast<uint32_t>(matched - i), 1);
      return;
    }
    ++c->hits_full;
    i += c->edge.size();
    n = c;
  }
}

void PrefixTree::Hold(const Page* p, int delta) {
  if (delta > 0) {
    if (holds_[p]++ == 0) bytes_ += p->bytes;
  } else {
    auto it = holds_.find(p);
    LLAMAY_CHECK(it != holds_.end()) << "tree releases a page it does not hold";
    if (--it->second == 0) {
      bytes_ -= p->bytes;
      holds_.erase(it);
    }
  }
}

void PrefixTree::Hold(const Context& ctx, int delta) {
  for (const Page* p : ctx.s_->pages.flat())
    if (p != nullptr) Hold(p, delta);
}

bool PrefixTree::value_policy() const {
  return cache_->options().checkpoint_retention == CheckpointRetention::kValue;
}

double PrefixTree::EntryKey(const Node* n) const {
  return value_policy() ? n->use_clock + 1.0 : static_cast<double>(n->tick);
}

void PrefixTree::KeyCheckpoint(Node* n) {
  if (!value_policy()) {
    n->cp_key = static_cast<double>(n->cp_tick);
    return;
  }
  // What losing it costs: a resume here would fall back to the nearest checkpoint above and run the
  // tokens between again.
  size_t above = 0;
  for (const Node* a = n->parent; a != nullptr; a = a->parent)
    if (a->has_cp()) {
      above = a->depth;
      break;
    }
  const KvLayout& l = cache_->layout();
  n->cp_key = clock_ + CheckpointWorth(n->depth - above, n->cp_resumes, l.page_bytes(), l.page_tokens,
                                       l.recurrent_bytes());
}

void PrefixTree::ReindexCheckpoint(Node* n) {
  if (n->cp_indexed) checkpoints_.erase({n->cp_vkey, n->cp_vtick, n});
  if (n->cp_protected) --protected_checkpoints_;
  n->cp_indexed = n->cp_protected = false;
  if (!n->has_cp()) return;
  if (n->entry() && n->pinned) {
    ++protected_checkpoints_;
    n->cp_protected = true;
    return;
  }
  n->cp_indexed = true;
  n->cp_vtick = n->cp_tick;
  n->cp_vkey = n->cp_key;
  checkpoints_.insert({n->cp_vkey, n->cp_vtick, n});
}

void PrefixTree::Attach(Node* n, Checkpoint cp) {
  LLAMAY_CHECK(cp.pos == n->depth) << "checkpoint at " << cp.pos << " for a node ending at " << n->depth;
  if (n->has_cp()) {  // a cached checkpoint never changes: keep it, drop the newcomer
    Page* drop[1] = {cp.state};
    cache_->ReleasePages(drop);
    n->cp_tick = ++tick_;
  } else {
    n->cp = cp;
    n->cp_tick = ++tick_;
    n->cp_resumes = 0;
    Hold(cp.state, +1);
  }
  KeyCheckpoint(n);
  ReindexCheckpoint(n);
}

void PrefixTree::DropCheckpoint(Node* n) {
  if (!n->has_cp()) return;
  Page* state = n->cp.state;
  n->cp = {};
  ReindexCheckpoint(n);
  Hold(state, -1);
  Page* drop[1] = {state};
  cache_->ReleasePages(drop);
}

PrefixTree::Node* PrefixTree::NodeAtDepth(Node* leaf, size_t depth) {
  Node* c = leaf;
  while (c->parent != nullptr && c->parent->depth >= depth) c = c->parent;
  if (c->depth == depth) return c;
  // depth falls inside c's edge: split it, a node without an entry takes the first part.
  Node* p = c->parent;
  const size_t k = depth - p->depth;
  auto mid = NewNode();
  mid->edge.assign(c->edge.begin(), c->edge.begin() + static_cast<ptrdiff_t>(k));
  mid->parent = p;
  mid->depth = depth;
  mid->best = c->best;
  SplitHits(mid.get(), c, k);
  auto it = p->children.find(c->edge[0]);
  std::unique_ptr<Node> c_owned = std::move(it->second);
  c->edge.erase(c->edge.begin(), c->edge.begin() + static_cast<ptrdiff_t>(k));
  c->parent = mid.get();
  mid->children.emplace(c->edge[0], std::move(c_owned));
  Node* m = mid.get();
  it->second = std::move(mid);
  ++nodes_;
  return m;
}

bool PrefixTree::WindowsHeld(const Context& e, size_t n) const {
  const StateGroups& groups = cache_->groups();
  for (size_t g = 0; g < groups.attention.size(); ++g) {
    const size_t w = groups.attention[g].window;
    if (w == 0 || n == 0) continue;
    const size_t first = n >= w ? n - w + 1 : 0;
    if (first < e.s_->floor[g]) return false;
  }
  return true;
}

void PrefixTree::Reindex(Node* n) {
  if (n->vclass == VictimClass::kLeaf) leaves_.erase({n->vtick, n});
  if (n->vclass == VictimClass::kInterior) interiors_.erase({n->vtick, n});
  n->vclass = VictimClass::kNone;
  if (!n->entry() || n->pinned) return;
  n->vclass = n->children.empty() ? VictimClass::kLeaf : VictimClass::kInterior;
  n->vtick = n->tick;
  (n->children.empty() ? leaves_ : interiors_).insert({n->vtick, n});
}

void PrefixTree::Touch(Node* n) {
  n->tick = ++tick_;
  n->use_clock = clock_;
  // The newest tick is the largest: n is now the best of every subtree that contains it.
  for (Node* a = n; a != nullptr; a = a->parent) a->best = n;
  Reindex(n);
}

void PrefixTree::Insert(Context ctx, bool pin, std::vector<Checkpoint> checkpoints) {
  const std::vector<int32_t> toks = ctx.tokens();
  if (toks.empty()) {  // ctx closes on return
    for (const Checkpoint& cp : checkpoints) {
      Page* drop[1] = {cp.state};
      cache_->ReleasePages(drop);
    }
    return;
  }
  Node* n = root_.get();
  size_t i = 0;
  bool created = false;
  while (i < toks.size()) {
    std::span<const int32_t> rest(toks.data() + i, toks.size() - i);
    auto it = n->children.find(rest[0]);
    if (it == n->children.end()) {
      auto leaf = NewNode();
      leaf->edge.assign(rest.begin(), rest.end());
      leaf->parent = n;
      leaf->depth = toks.size();
      Node* raw = leaf.get();
      n->children.emplace(rest[0], std::move(leaf));
      ++nodes_;
      n = raw;
      created = true;
      break;
    }
    Node* c = it->second.get();
    const size_t k = CommonPrefix(c->edge, rest);
    if (k == c->edge.size()) {
      n = c;
      i += k;
      continue;
    }
    // Split c's edge after k tokens: a node without an entry takes the shared part.
    auto mid = NewNode();
    mid->edge.assign(c->edge.begin(), c->edge.begin() + static_cast<ptrdiff_t>(k));
    mid->parent = n;
    mid->depth = n->depth + k;
    mid->best = c->best;
    SplitHits(mid.get(), c, k);
    std::unique_ptr<Node> c_owned = std::move(it->second);
    c->edge.erase(c->edge.begin(), c->edge.begin() + static_cast<ptrdiff_t>(k));
    c->parent = mid.get();
    mid->children.emplace(c->edge[0], std::move(c_owned));
    Node* m = mid.get();
    it->second = std::move(mid);
    ++nodes_;
    n = m;
    i += k;
  }
  if (n->entry()) {  // the same tokens again: refresh, keep the existing context
    if (pin && !n->pinned) {
      n->pinned = true;
      ++pinned_;
    }
    Touch(n);
  } else {
    n->ctx = std::move(ctx);
    Hold(n->ctx, +1);
    ++entries_;
    n->pinned = pin;
    if (pin) ++pinned_;
    Touch(n);
    if (created && n->parent != root_.get()) Reindex(n->parent);
  }
  ReindexCheckpoint(n);  // its checkpoint's protection follows the pin
  // Checkpoints go to the nodes ending at their positions, deepest first (a split below never moves a
  // node above it).
  std::vector<Node*> attached;
  for (auto it = checkpoints.rbegin(); it != checkpoints.rend(); ++it) {
    LLAMAY_CHECK(it->pos > 0 && it->pos <= toks.size()) << "checkpoint at " << it->pos;
    attached.push_back(NodeAtDepth(n, it->pos));
    Attach(attached.back(), *it);
  }
  // Keyed again now that every one is in place: what each saves depends on the ones above it.
  if (value_policy())
    for (Node* c : attached) {
      KeyCheckpoint(c);
      ReindexCheckpoint(c);
    }
}

TreeMatch PrefixTree::Match(std::span<const int32_t> tokens) {
  Node* n = root_.get();
  Node* stop = nullptr;
  std::vector<Node*> cps;  // checkpoint nodes on the path, shallow to deep
  size_t i = 0;
  while (i < tokens.size()) {
    auto it = n->children.find(tokens[i]);
    if (it == n->children.end()) break;
    Node* c = it->second.get();
    const size_t k = CommonPrefix(c->edge, tokens.subspan(i));
    i += k;
    if (k < c->edge.size()) {  // the match ends inside c's edge
      stop = c;
      break;
    }
    n = c;
    if (c->has_cp()) cps.push_back(c);
  }
  if (stop == nullptr) stop = n;
  if (i == 0) return {};
  if (!cache_->groups().has_recurrent()) {
    // Every entry below `stop` holds tokens[0, i): take the most recently used.
    Node* e = stop->best;
    LLAMAY_CHECK(e != nullptr && e->entry()) << "subtree without an entry";
    if (!WindowsHeld(e->ctx, i)) return {};
    Touch(e);
    RecordHit(tokens, i);
    return {&e->ctx, i, nullptr};
  }
  // A recurrent state resumes only where a checkpoint was taken: the deepest one whose entry still
  // holds its windows.
  for (auto it = cps.rbegin(); it != cps.rend(); ++it) {
    Node* c = *it;
    Node* e = c->best;
    LLAMAY_CHECK(e != nullptr && e->entry()) << "checkpoint node without an entry below it";
    if (!WindowsHeld(e->ctx, c->depth)) continue;
    Touch(e);
    c->cp_tick = ++tick_;
    if (c->cp_resumes < UINT32_MAX) ++c->cp_resumes;
    KeyCheckpoint(c);
    ReindexCheckpoint(c);
    RecordHit(tokens, c->depth);
    return {&e->ctx, c->depth, c->cp.state};
  }
  return {};
}

PrefixTree::Node* PrefixTree::FindExact(std::span<const int32_t> tokens) const {
  Node* n = root_.get();
  size_t i = 0;
  while (i < tokens.size()) {
    auto it = n->children.find(tokens[i]);
    if (it == n->children.end()) return nullptr;
    Node* c = it->second.get();
    if (CommonPrefix(c->edge, tokens.subspan(i)) != c->edge.size()) return nullptr;
    i += c->edge.size();
    n = c;
  }
  return n == root_.get() ? nullptr : n;
}

bool PrefixTree::SetPinned(std::span<const int32_t> tokens, bool pinned) {
  Node* n = FindExact(tokens);
  if (n == nullptr || !n->entry()) return false;
  if (n->pinned != pinned) {
    n->pinned = pinned;
    pinned ? ++pinned_ : --pinned_;
    Reindex(n);
    ReindexCheckpoint(n);
  }
  return true;
}

PrefixTree::Node* PrefixTree::Victim() const {
  if (!leaves_.empty()) return leaves_.begin()->second;
  if (!interiors_.empty()) return interiors_.begin()->second;
  return nullptr;
}

PrefixTree::Node* PrefixTree::CheckpointVictim() const {
  return checkpoints_.empty() ? nullptr : std::get<2>(*checkpoints_.begin());
}

bool PrefixTree::CheckpointFirst() const {
  const Node* c = CheckpointVictim();
  if (c == nullptr) return false;
  const Node* v = Victim();
  if (v == nullptr) return true;
  const double e = EntryKey(v);
  return c->cp_key < e || (c->cp_key == e && c->cp_tick < v->tick);
}

std::optional<std::pair<std::vector<int32_t>, bool>> PrefixTree::VictimTokens() const {
  if (CheckpointFirst()) return std::make_pair(PathTokens(CheckpointVictim()), true);
  Node* v = Victim();
  if (v == nullptr) return std::nullopt;
  return std::make_pair(PathTokens(v), false);
}

bool PrefixTree::EvictOne() {
  if (CheckpointFirst()) {
    Node* c = CheckpointVictim();
    clock_ = std::max(clock_, c->cp_key);
    DropCheckpoint(c);
    // A node that is neither an entry nor a split any more goes.
    if (!c->entry() && c->children.size() == 1) Collapse(c);
    ++evictions_;
    return true;
  }
  Node* v = Victim();
  if (v == nullptr) return false;
  if (value_policy()) clock_ = std::max(clock_, EntryKey(v));
  RemoveEntry(v);
  ++evictions_;
  return true;
}

PrefixTree::Node* PrefixTree::BestOf(Node* n) {
  Node* best = n->entry() ? n : nullptr;
  for (auto& [key, child] : n->children)
    if (child->best != nullptr && (best == nullptr || child->best->tick > best->tick)) best = child->best;
  return best;
}

void PrefixTree::FixBestUpward(Node* start, Node* removed) {
  // Only subtrees whose best was `removed` change; above the first that did not, nothing does.
  for (Node* a = start; a != nullptr && a->best == removed; a = a->parent) a->best = BestOf(a);
}

PrefixTree::Node* PrefixTree::Collapse(Node* n) {
  Node* p = n->parent;
  std::unique_ptr<Node> child = std::move(n->children.begin()->second);
  MergeHits(n, child.get());
  child->edge.insert(child->edge.begin(), n->edge.begin(), n->edge.end());
  child->parent = p;
  p->children[n->edge[0]] = std::move(child);  // destroys n
  --nodes_;
  return p;
}

void PrefixTree::RemoveEntry(Node* n) {
  Hold(n->ctx, -1);
  n->ctx.Close();
  --entries_;
  if (n->pinned) --pinned_;
  n->pinned = false;
  Reindex(n);  // leaves the victim sets
  Prune(n);
}

void PrefixTree::Prune(Node* n) {
  Node* removed = n;
  Node* cur;
  ReindexCheckpoint(n);  // no longer at a pinned entry
  if (n->children.size() >= 2 || (n->children.size() == 1 && n->has_cp())) {
    cur = n;  // stays as a split or checkpoint node
  } else if (n->children.size() == 1) {
    cur = Collapse(n);
  } else {
    DropCheckpoint(n);  // nothing below it holds the KV to resume from it
    cur = n->parent;
    cur->children.erase(n->edge[0]);  // destroys n
    --nodes_;
    // Prune upward: an ancestor without an entry that no longer splits anything goes too (a checkpoint
    // node stays while it has a child).
    while (cur != root_.get() && !cur->entry() && cur->children.size() < 2) {
      if (cur->children.empty()) {
        DropCheckpoint(cur);
        Node* up = cur->parent;
        up->children.erase(cur->edge[0]);
        --nodes_;
        cur = up;
      } else if (cur->has_cp()) {
        break;
      } else {
        cur = Collapse(cur);
        break;
      }
    }
    Reindex(cur);  // an entry that lost its last child is now a leaf
  }
  FixBestUpward(cur, removed);
}

void PrefixTree::Clear() {
  std::vector<Node*> stack = {root_.get()};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    n->ctx.Close();
    if (n->has_cp()) {
      Page* drop[1] = {n->cp.state};
      cache_->ReleasePages(drop);
    }
    for (auto& [key, child] : n->children) stack.push_back(child.get());
  }
  root_ = std::make_unique<Node>();
  leaves_.clear();
  interiors_.clear();
  checkpoints_.clear();
  protected_checkpoints_ = 0;
  clock_ = 0;
  holds_.clear();
  bytes_ = 0;
  entries_ = 0;
  pinned_ = 0;
  nodes_ = 1;
}

std::vector<int32_t> PrefixTree::PathTokens(const Node* n) const {
  std::vector<const Node*> chain;
  for (; n != nullptr; n = n->parent) chain.push_back(n);
  std::vector<int32_t> out;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) out.insert(out.end(), (*it)->edge.begin(), (*it)->edge.end());
  return out;
}

void PrefixTree::VisitPaths(const std::function<void(const Node*, const std::vector<int32_t>&)>& f) const {
  std::vector<int32_t> path;
  // Depth-first, children by ascending key, a node before its descendants.
  auto visit = [&](auto&& self, const Node* n) -> void {
    path.insert(path.end(), n->edge.begin(), n->edge.end());
    f(n, path);
    for (auto& [key, child] : n->children) self(self, child.get());
    path.resize(path.size() - n->edge.size());
  };
  visit(visit, root_.get());
}

std::vector<TreeCheckpointInfo> PrefixTree::Checkpoints() const {
  std::vector<TreeCheckpointInfo> out;
  VisitPaths([&](const Node* n, const std::vector<int32_t>& path) {
    if (n->has_cp()) out.push_back({path, n->cp_tick, n->cp_protected, n->cp_resumes, n->cp_key});
  });
  return out;
}

std::unordered_map<const Page*, uint32_t> PrefixTree::CheckpointHolds() const {
  std::unordered_map<const Page*, uint32_t> out;
  std::vector<const Node*> stack = {root_.get()};
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (n->has_cp()) ++out[n->cp.state];
    for (auto& [key, child] : n->children) stack.push_back(child.get());
  }
  return out;
}

TreeView PrefixTree::Inspect(const TreeViewOptions& o) const {
  TreeView v;
  v.nodes_total = nodes_;
  v.entries = entries_;
  const size_t P = cache_->layout().page_tokens;
  const size_t groups = cache_->groups().attention.size();
  auto head = [&](const std::vector<int32_t>& t) {
    const size_t n = std::min(t.size(), o.edge_head);
    return std::vector<int32_t>(t.begin(), t.begin() + static_cast<ptrdiff_t>(n));
  };
  // Breadth first, so that the caps cut the deepest and least hit parts, never the levels near the root.
  struct Item {
    const Node* n;
    int64_t parent;
    size_t level;
  };
  std::queue<Item> queue;
  queue.push({root_.get(), -1, 0});
  while (!queue.empty()) {
    const Item it = queue.front();
    queue.pop();
    if (v.nodes.size() >= o.max_nodes) {
      v.truncated = true;
      break;
    }
    const Node* n = it.n;
    TreeNodeView& nv = v.nodes.emplace_back();
    nv.id = n->id;
    nv.parent = it.parent;
    nv.level = it.level;
    nv.edge = head(n->edge);
    nv.edge_tokens = n->edge.size();
    nv.depth = n->depth;
    if (!n->edge.empty()) nv.pages = ((n->depth + P - 1) / P - (n->depth - n->edge.size()) / P) * groups;
    nv.hits = Hits(n);
    nv.last_hit_ms = n->last_hit_ms;
    nv.entry = n->entry();
    nv.pinned = n->entry() && n->pinned;
    nv.checkpoint = n->has_cp();
    nv.children = n->children.size();
    if (n->children.empty()) continue;
    if (it.level >= o.max_depth) {
      v.truncated = true;
      continue;
    }
    std::vector<const Node*> kids;
    for (const auto& [key, child] : n->children) kids.push_back(child.get());
    if (kids.size() > o.max_children) {
      // The most hit are shown, in their usual order (by first token) so that a view is stable.
      auto more_hits = [](const Node* a, const Node* b) { return Hits(a) > Hits(b); };
      auto first_token = [](const Node* a, const Node* b) { return a->edge[0] < b->edge[0]; };
      std::stable_sort(kids.begin(), kids.end(), more_hits);
      kids.resize(o.max_children);
      std::sort(kids.begin(), kids.end(), first_token);
      v.truncated = true;
    }
    const int64_t self = static_cast<int64_t>(v.nodes.size() - 1);
    for (const Node* k : kids) queue.push({k, self, it.level + 1});
  }
  // The most hit prefixes, over the whole tree (not only the part shown).
  std::vector<const Node*> hot;
  std::vector<const Node*> stack = {root_.get()};
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    const uint64_t h = Hits(n);
    bool child_as_hot = false;
    for (const auto& [key, child] : n->children) {
      stack.push_back(child.get());
      child_as_hot = child_as_hot || Hits(child.get()) == h;
    }
    if (n != root_.get() && h > 0 && !child_as_hot) hot.push_back(n);
  }
  auto hotter = [](const Node* a, const Node* b) {
    const uint64_t ha = Hits(a), hb = Hits(b);
    return ha != hb ? ha > hb : a->depth != b->depth ? a->depth > b->depth : a->id < b->id;
  };
  const size_t top = std::min(hot.size(), o.top);
  std::partial_sort(hot.begin(), hot.begin() + static_cast<ptrdiff_t>(top), hot.end(), hotter);
  for (size_t i = 0; i < top; ++i) {
    const Node* n = hot[i];
    v.top.push_back({n->id, head(PathTokens(n)), head(n->edge), n->depth, Hits(n), n->last_hit_ms});
  }
  return v;
}

std::unordered_set<const Page*> PrefixTree::ProtectedPages() const {
  std::unordered_set<const Page*> out;
  std::vector<const Node*> stack = {root_.get()};
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (n->entry() && n->pinned)
      for (const Page* p : n->ctx.s_->pages.flat())
        if (p != nullptr) out.insert(p);
    if (n->has_cp() && n->cp_protected) out.insert(n->cp.state);
    for (const auto& [key, child] : n->children) stack.push_back(child.get());
  }
  return out;
}

std::vector<TreeEntryInfo> PrefixTree::Entries() const {
  std::vector<TreeEntryInfo> out;
  VisitPaths([&](const Node* n, const std::vector<int32_t>& path) {
    if (n->entry()) out.push_back({path, n->pinned, n->tick});
  });
  return out;
}

Status PrefixTree::CheckInvariants() const {
  size_t entries = 0, nodes = 0, pinned = 0, leaves = 0, interiors = 0, cps = 0, protected_cps = 0;
  std::unordered_map<const Page*, uint32_t> holds;
  std::vector<int32_t> path;
  Status bad;
  auto fail = [&](const std::string& what) {
    if (bad.ok()) bad = InternalError("prefix tree: " + what);
  };
  // Returns the node's best as recomputed from scratch.
  auto visit = [&](auto&& self, const Node* n) -> const Node* {
    ++nodes;
    path.insert(path.end(), n->edge.begin(), n->edge.end());
    const bool is_root = n == root_.get();
    if (!is_root) {
      if (n->edge.empty()) fail("non-root node with an empty edge");
      if (n->depth != n->parent->depth + n->edge.size()) fail("depth mismatch");
      if (!n->entry() && n->children.size() < 2 && !(n->has_cp() && n->children.size() == 1))
        fail("node without entry and with < 2 children (and no checkpoint over one child)");
    } else if (n->entry() || n->has_cp()) {
      fail("root holds an entry or a checkpoint");
    }
    if (n->has_cp()) {
      if (n->cp.pos != n->depth) fail("checkpoint endpoint differs from its node's");
      if (n->cp.state->bytes != cache_->groups().recurrent.page_bytes) fail("checkpoint of the wrong size");
      if (n->cp.state->refs.load(std::memory_order_relaxed) < 1) fail("checkpoint page released");
      ++holds[n->cp.state];
      const bool want_protected = n->entry() && n->pinned;
      if (want_protected) ++protected_cps;
      else ++cps;
      if (n->cp_indexed == want_protected || n->cp_protected != want_protected ||
          (n->cp_indexed && (n->cp_vtick != n->cp_tick || n->cp_vkey != n->cp_key)))
        fail("checkpoint victim index stale");
    } else if (n->cp_indexed || n->cp_protected) {
      fail("a node without checkpoint is indexed as a checkpoint victim");
    }
    const Node* best = nullptr;
    if (n->entry()) {
      ++entries;
      if (n->pinned) ++pinned;
      if (!n->ctx.s_->tree_owned) fail("entry context not marked tree-owned");
      if (n->ctx.s_->tokens != path) fail("entry context tokens differ from its path");
      if (n->ctx.s_->state != nullptr || !n->ctx.s_->checkpoints.empty()) fail("entry context holds a state");
      for (const Page* p : n->ctx.s_->pages.flat())
        if (p != nullptr) ++holds[p];
      best = n;
      VictimClass want = n->pinned ? VictimClass::kNone
                                   : (n->children.empty() ? VictimClass::kLeaf : VictimClass::kInterior);
      if (n->vclass != want || (want != VictimClass::kNone && n->vtick != n->tick)) fail("victim index stale");
      if (want == VictimClass::kLeaf) ++leaves;
      if (want == VictimClass::kInterior) ++interiors;
    } else if (n->vclass != VictimClass::kNone) {
      fail("a node without entry is indexed as a victim");
    }
    uint64_t child_hits = 0;
    for (auto& [key, child] : n->children) {
      child_hits += Hits(child.get());
      if (child->edge.empty() || child->edge[0] != key) fail("child keyed by the wrong token");
      if (child->parent != n) fail("bad parent pointer");
      const Node* b = self(self, child.get());
      if (b != nullptr && (best == nullptr || b->tick > best->tick)) best = b;
    }
    if (n->best != best) fail("best-in-subtree stale");
    // Every match that entered a child covered this node's whole edge first.
    if (!is_root && child_hits > n->hits_full) fail("children counted more hits than reached them");
    for (const auto& [off, count] : n->ends)
      if (off == 0 || off >= n->edge.size() || count == 0) fail("a hit ends outside its node's edge");
    if (n->ends.size() > kMaxHitEnds) fail("too many hit ends");
    if (n->has_cp() && best == nullptr) fail("checkpoint node without an entry below it");
    path.resize(path.size() - n->edge.size());
    return best;
  };
  visit(visit, root_.get());
  if (entries != entries_) fail("entry count " + std::to_string(entries_) + " != " + std::to_string(entries));
  if (nodes != nodes_) fail("node count " + std::to_string(nodes_) + " != " + std::to_string(nodes));
  if (pinned != pinned_) fail("pinned count");
  if (leaves != leaves_.size() || interiors != interiors_.size()) fail("victim sets hold other nodes");
  if (cps != checkpoints_.size() || protected_cps != protected_checkpoints_) fail("checkpoint counts");
  if (holds != holds_) fail("page holds differ from the entries' pages and checkpoints");
  size_t bytes = 0;
  for (const auto& [p, n] : holds) bytes += p->bytes;
  if (bytes != bytes_) fail("tree bytes " + std::to_string(bytes_) + " != " + std::to_string(bytes));
  return bad;
}

}  // namespace llamay::kv::internal
