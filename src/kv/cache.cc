#include "kv/cache.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>

#include "kv/internal.h"
#include "kv/prefix_tree.h"

namespace llamay::kv {

using internal::ContextState;
using internal::Page;

namespace {

constexpr size_t kMaxHeapFree = 64;  // recycled heap buffers kept beyond the live pages
constexpr size_t kAlign = 64;

size_t AlignedBytes(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

}  // namespace

double CheckpointWorth(size_t saved, uint32_t resumes, size_t page_bytes, uint32_t page_tokens, size_t state_bytes) {
  const double uses = static_cast<double>(std::min<uint32_t>(resumes, 15) + 1);
  if (page_bytes == 0 || state_bytes == 0) return uses * static_cast<double>(saved) / static_cast<double>(page_tokens);
  return uses * static_cast<double>(saved) * static_cast<double>(page_bytes) /
         (static_cast<double>(page_tokens) * static_cast<double>(state_bytes));
}

namespace {

// The largest kind of page: an arena slot holds any of them.
size_t LargestPage(const StateGroups& g) {
  size_t n = g.recurrent.page_bytes;
  for (const LayerGroup& a : g.attention) n = std::max(n, a.page_bytes);
  return n;
}

}  // namespace

Cache::Cache(const CacheOptions& options)
    : options_(options),
      groups_(options.layout.Groups()),
      page_bytes_(LargestPage(groups_)),
      tree_(std::make_unique<internal::PrefixTree>(this)) {}

Result<std::unique_ptr<Cache>> Cache::Create(const CacheOptions& options) {
  LLAMAY_RETURN_IF_ERROR(options.layout.Validate());
  std::unique_ptr<Cache> cache(new Cache(options));
  if (options.arena_pages > 0) {
    const size_t stride = cache->page_bytes_;
    if (options.arena_pages > (size_t{1} << 40) / stride)
      return InvalidArgumentError("kv cache: arena of " + std::to_string(options.arena_pages) +
                                  " pages is too large");
    cache->arena_ = static_cast<uint8_t*>(std::aligned_alloc(kAlign, AlignedBytes(options.arena_pages * stride)));
    if (cache->arena_ == nullptr)
      return ResourceExhaustedError("kv cache: cannot allocate an arena of " +
                                    std::to_string(options.arena_pages * stride) + " bytes");
    cache->arena_free_.reserve(options.arena_pages);
    for (size_t i = options.arena_pages; i-- > 0;) cache->arena_free_.push_back(static_cast<int64_t>(i));
  }
  return cache;
}

Cache::~Cache() {
  {
    std::lock_guard t(tree_mu_);
    tree_->Clear();
  }
  std::lock_guard l(pool_mu_);
  LLAMAY_CHECK(contexts_.empty()) << contexts_.size() << " contexts outlive their cache";
  LLAMAY_CHECK(live_.empty()) << live_.size() << " pages outlive their cache";
  for (auto& [bytes, list] : heap_free_)
    for (uint8_t* b : list) std::free(b);
  std::free(arena_);
}

Context Cache::Register(std::unique_ptr<ContextState> state) {
  state->cache = this;
  ContextState* raw = state.release();
  std::lock_guard l(pool_mu_);
  raw->id = next_context_id_++;
  contexts_.insert(raw);
  return Context(raw);
}

Context Cache::NewContext() {
  auto s = std::make_unique<ContextState>();
  s->pages.set_groups(groups_.attention.size());
  return Register(std::move(s));
}

void Cache::ClosePages(ContextState* s) {
  std::unique_lock l(s->mu);
  std::vector<Page*> drop;
  for (Page* p : s->pages.flat())
    if (p != nullptr) drop.push_back(p);
  if (s->state != nullptr) drop.push_back(s->state);
  for (const auto& c : s->checkpoints) drop.push_back(c.state);
  ReleasePages(drop);
  s->pages.resize_pages(0);
  std::fill(s->floor.begin(), s->floor.end(), 0);
  s->tokens.clear();
  s->state = nullptr;
  s->state_pos = 0;
  s->checkpoints.clear();
}

void Cache::Unregister(ContextState* s) {
  {
    std::lock_guard l(pool_mu_);
    contexts_.erase(s);
  }
  delete s;
}

bool Cache::HasRoomLocked(size_t bytes) const {
  if (arena_ != nullptr && arena_free_.empty()) return false;
  return options_.max_bytes == 0 || bytes_live_ + bytes <= options_.max_bytes;
}

Page* Cache::IssuePageLocked(size_t bytes, bool zero, bool state) {
  auto* p = new Page;
  p->serial = next_serial_++;
  p->bytes = bytes;
  p->state = state;
  if (arena_ != nullptr) {
    p->slot = arena_free_.back();
    arena_free_.pop_back();
    p->data = arena_ + static_cast<size_t>(p->slot) * page_bytes_;
  } else if (auto it = heap_free_.find(bytes); it != heap_free_.end() && !it->second.empty()) {
    p->data = it->second.back();
    it->second.pop_back();
    --heap_free_count_;
  } else {
    p->data = static_cast<uint8_t*>(std::aligned_alloc(kAlign, AlignedBytes(bytes)));
    LLAMAY_CHECK(p->data != nullptr) << "out of memory for a " << bytes << "-byte page";
  }
  // Recycled slots and buffers hold another context's values: never hand them out dirty.
  if (zero) std::memset(p->data, 0, bytes);
  live_.insert(p);
  bytes_live_ += bytes;
  ++allocated_total_;
  return p;
}

Result<Page*> Cache::AllocatePage(size_t bytes, bool zero, bool state) {
  LLAMAY_CHECK(bytes > 0 && bytes <= page_bytes_) << "a page of " << bytes << " bytes";
  for (;;) {
    {
      std::lock_guard l(pool_mu_);
      if (HasRoomLocked(bytes)) return IssuePageLocked(bytes, zero, state);
    }
    bool evicted;
    {
      std::lock_guard t(tree_mu_);
      evicted = tree_->EvictOne();
    }
    if (!evicted) break;
  }
  std::lock_guard l(pool_mu_);
  if (HasRoomLocked(bytes)) return IssuePageLocked(bytes, zero, state);
  std::string why = "kv cache memory exhausted: " + std::to_string(live_.size()) + " pages (" +
                    std::to_string(bytes_live_) + " bytes) are held by contexts";
  if (options_.max_bytes) why += ", budget " + std::to_string(options_.max_bytes) + " bytes";
  if (arena_ != nullptr) why += ", arena of " + std::to_string(options_.arena_pages) + " pages";
  why += ", and nothing is left to evict from the prefix tree";
  return ResourceExhaustedError(std::move(why));
}

void Cache::ReleasePages(std::span<Page* const> pages) {
  std::vector<Page*> dead;
  for (Page* p : pages) {
    // acq_rel: our reads of the page happen before whoever next finds the count at one writes it.
    const int32_t before = p->refs.fetch_sub(1, std::memory_order_acq_rel);
    LLAMAY_CHECK(before >= 1) << "page " << p->serial << " released with refcount " << before;
    if (before == 1) dead.push_back(p);
  }
  if (dead.empty()) return;
  std::lock_guard l(pool_mu_);
  for (Page* p : dead) {
    LLAMAY_CHECK(live_.erase(p) == 1) << "page " << p->serial << " freed twice";
    ++freed_total_;
    bytes_live_ -= p->bytes;
    if (p->slot >= 0) {
      arena_free_.push_back(p->slot);
    } else if (heap_free_count_ < kMaxHeapFree) {
      heap_free_[p->bytes].push_back(p->data);
      ++heap_free_count_;
    } else {
      std::free(p->data);
    }
    delete p;
  }
}

Status Cache::Retain(const Context& ctx, bool pin) {
  if (!ctx.valid()) return InvalidArgumentError("retain: empty context handle");
  if (ctx.cache() != this) return InvalidArgumentError("retain: context belongs to another cache");
  Context copy = ctx.Fork();  // takes ctx's lock shared, before tree_mu_ (lock order)
  if (copy.s_->tokens.empty()) return Status::Ok();
  copy.s_->tree_owned = true;
  // The fork's checkpoints, and its live slot when it has consumed every position, go to the tree's
  // nodes; entry contexts hold no state. (Nobody else can reach the fork yet: no lock needed.)
  std::vector<internal::Checkpoint> donated = std::move(copy.s_->checkpoints);
  copy.s_->checkpoints.clear();
  if (Page* state = copy.s_->state; state != nullptr) {
    const size_t n = copy.s_->tokens.size();
    if (copy.s_->state_pos == n && (donated.empty() || donated.back().pos != n)) {
      donated.push_back({n, state});
    } else {
      Page* drop[1] = {state};
      ReleasePages(drop);
    }
    copy.s_->state = nullptr;
    copy.s_->state_pos = 0;
  }
  std::lock_guard t(tree_mu_);
  tree_->Insert(std::move(copy), pin, std::move(donated));
  while ((options_.tree_max_entries && tree_->entries() > options_.tree_max_entries) ||
         (options_.tree_max_bytes && tree_->bytes() > options_.tree_max_bytes)) {
    if (!tree_->EvictOne()) break;
  }
  return Status::Ok();
}

MatchResult Cache::Match(std::span<const int32_t> tokens) {
  MatchResult r;
  {
    std::lock_guard t(tree_mu_);
    internal::TreeMatch m = tree_->Match(tokens);
    if (m.entry != nullptr) {
      r.context = m.entry->Fork();
      r.matched = m.matched;
      if (m.state != nullptr) {  // the checkpoint becomes the live slot, shared until first written
        m.state->refs.fetch_add(1, std::memory_order_relaxed);
        r.context.s_->state = m.state;
        r.context.s_->state_pos = m.matched;
      }
    }
  }
  if (!r.context.valid()) {
    r.context = NewContext();
    return r;
  }
  std::unique_lock l(r.context.s_->mu);
  Context::DropTail(r.context.s_, r.matched);
  return r;
}

bool Cache::SetPinned(std::span<const int32_t> tokens, bool pinned) {
  std::lock_guard t(tree_mu_);
  return tree_->SetPinned(tokens, pinned);
}

bool Cache::EvictOne() {
  std::lock_guard t(tree_mu_);
  return tree_->EvictOne();
}

void Cache::ClearTree() {
  std::lock_guard t(tree_mu_);
  tree_->Clear();
}

std::vector<TreeEntryInfo> Cache::TreeEntries() const {
  std::lock_guard t(tree_mu_);
  return tree_->Entries();
}

std::vector<TreeCheckpointInfo> Cache::TreeCheckpoints() const {
  std::lock_guard t(tree_mu_);
  return tree_->Checkpoints();
}

std::optional<std::pair<std::vector<int32_t>, bool>> Cache::NextVictimOf() const {
  std::lock_guard t(tree_mu_);
  return tree_->VictimTokens();
}

std::optional<std::vector<int32_t>> Cache::NextVictim() const {
  auto v = NextVictimOf();
  if (!v) return std::nullopt;
  return v->first;
}

CacheStats Cache::Stats() const {
  CacheStats s;
  std::lock_guard t(tree_mu_);
  s.tree_entries = tree_->entries();
  s.tree_nodes = tree_->nodes();
  s.tree_pinned = tree_->pinned();
  s.tree_bytes = tree_->bytes();
  s.tree_evictions = tree_->evictions();
  s.tree_checkpoints = tree_->checkpoints();
  s.tree_hits = tree_->hits();
  std::lock_guard l(pool_mu_);
  s.page_bytes = options_.layout.page_bytes();
  s.pages_live = live_.size();
  for (const Page* p : live_) {
    if (p->refs.load(std::memory_order_relaxed) > 1) ++s.pages_shared;
    if (p->state) ++s.states_live;
  }
  s.pages_allocated_total = allocated_total_;
  s.pages_freed_total = freed_total_;
  s.page_copies = copies_.load(std::memory_order_relaxed);
  s.bytes_live = bytes_live_;
  s.max_bytes = options_.max_bytes;
  s.arena_slots = options_.arena_pages;
  s.arena_slots_out = arena_ ? options_.arena_pages - arena_free_.size() : 0;
  s.contexts_live = contexts_.size();
  return s;
}

Status Cache::CheckInvariants() const {
  std::lock_guard t(tree_mu_);
  LLAMAY_RETURN_IF_ERROR(tree_->CheckInvariants());
  std::lock_guard l(pool_mu_);
  size_t tree_contexts = 0;
  for (const ContextState* s : contexts_) tree_contexts += s->tree_owned;
  if (tree_contexts != tree_->entries())
    return InternalError("kv: " + std::to_string(tree_contexts) + " tree-owned contexts for " +
                         std::to_string(tree_->entries()) + " tree entries");
  return CheckPagesLocked();
}

Status Cache::CheckPagesLocked() const {
  const size_t P = options_.layout.page_tokens;
  std::unordered_map<const Page*, int32_t> holders;
  for (const ContextState* s : contexts_) {
    const std::string who = "kv: context " + std::to_string(s->id);
    if (s->pages.size() != groups_.attention.size()) return InternalError(who + " has the wrong number of page lists");
    for (size_t g = 0; g < s->pages.size(); ++g) {
      if (s->pages[g].size() != (s->tokens.size() + P - 1) / P)
        return InternalError(who + " has " + std::to_string(s->pages[g].size()) + " pages for " +
                             std::to_string(s->tokens.size()) + " positions");
      for (size_t i = 0; i < s->pages[g].size(); ++i) {
        const Page* p = s->pages[g][i];
        if (p == nullptr) {
          // Only a windowed group releases pages, and only those no query at size() reads.
          const size_t w = groups_.attention[g].window;
          if (w == 0 || (i + 1) * P > s->floor[g])
            return InternalError(who + " lacks page " + std::to_string(i) + " of group " + std::to_string(g));
          continue;
        }
        if (p->state || p->bytes != groups_.attention[g].page_bytes)
          return InternalError(who + " holds a page of the wrong kind in group " + std::to_string(g));
        ++holders[p];
      }
    }
    for (size_t g = 0; g < s->floor.size(); ++g) {
      if (g >= groups_.attention.size()) {
        if (s->floor[g] != 0) return InternalError(who + ": a floor for a group the layout lacks");
        continue;
      }
      const size_t w = groups_.attention[g].window;
      // Only a windowed group has a floor, and never past what a query at size() reads.
      if ((w == 0 && s->floor[g] != 0) || (w != 0 && s->tokens.size() >= w && s->floor[g] > s->tokens.size() - w + 1) ||
          (w != 0 && s->tokens.size() < w && s->floor[g] != 0))
        return InternalError(who + ": floor " + std::to_string(s->floor[g]) + " of group " + std::to_string(g));
    }
    if (s->state_pos > s->tokens.size()) return InternalError(who + ": state past its positions");
    if (s->state_pos > 0 && s->state == nullptr) return InternalError(who + ": consumed positions without a state");
    if (s->state != nullptr) {
      if (s->state->bytes != groups_.recurrent.page_bytes || !s->state->state)
        return InternalError(who + ": live slot of the wrong kind");
      ++holders[s->state];
    }
    size_t last = 0;
    for (const auto& c : s->checkpoints) {
      if (c.pos <= last || c.pos > s->state_pos || c.state == nullptr || !c.state->state)
        return InternalError(who + ": checkpoint at " + std::to_string(c.pos) + " out of order or past the state");
      last = c.pos;
      ++holders[c.state];
    }
  }
  // Tree checkpoints hold their pages too.
  for (const auto& [p, n] : tree_->CheckpointHolds()) holders[p] += static_cast<int32_t>(n);
  for (const auto& [p, n] : holders) {
    if (live_.count(const_cast<Page*>(p)) == 0) return InternalError("kv: a context holds a freed page");
    const int32_t refs = p->refs.load(std::memory_order_relaxed);
    if (refs != n)
      return InternalError("kv: page " + std::to_string(p->serial) + " has refcount " + std::to_string(refs) +
                           " but " + std::to_string(n) + " holders");
  }
  for (const Page* p : live_)
    if (holders.count(p) == 0) return InternalError("kv: live page " + std::to_string(p->serial) + " is held by no context");
  if (allocated_total_ - freed_total_ != live_.size())
    return InternalError("kv: allocated - freed != live pages");
  size_t bytes = 0;
  for (const Page* p : live_) bytes += p->bytes;
  if (bytes != bytes_live_) return InternalError("kv: live bytes " + std::to_string(bytes_live_) + " != " + std::to_string(bytes));
  if (options_.max_bytes && bytes_live_ > options_.max_bytes)
    return InternalError("kv: live pages exceed the memory budget");
  std::set<int64_t> used;
  for (const Page* p : live_) {
    if ((arena_ != nullptr) != (p->slot >= 0)) return InternalError("kv: page from the wrong pool");
    if (p->slot < 0) continue;
    if (static_cast<size_t>(p->slot) >= options_.arena_pages || !used.insert(p->slot).second)
      return InternalError("kv: arena slot " + std::to_string(p->slot) + " claimed twice or out of range");
    if (p->data != arena_ + static_cast<size_t>(p->slot) * page_bytes_)
      return InternalError("kv: page data does not match its arena slot");
  }
  if (arena_ != nullptr) {
    std::set<int64_t> free_slots(arena_free_.begin(), arena_free_.end());
    if (free_slots.size() != arena_free_.size()) return InternalError("kv: arena slot freed twice");
    for (int64_t s : free_slots)
      if (used.count(s)) return InternalError("kv: arena slot both free and in use");
    if (options_.arena_pages - arena_free_.size() != live_.size())
      return InternalError("kv: arena slots out (" + std::to_string(options_.arena_pages - arena_free_.size()) +
                           ") != live pages (" + std::to_string(live_.size()) + ")");
  }
  return Status::Ok();
}

}  // namespace llamay::kv
