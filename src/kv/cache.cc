#include "kv/cache.h"

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

Cache::Cache(const CacheOptions& options)
    : options_(options),
      page_bytes_(options.layout.page_bytes()),
      tree_(std::make_unique<internal::PrefixTree>(page_bytes_)) {}

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
  for (uint8_t* b : heap_free_) std::free(b);
  std::free(arena_);
}

Context Cache::NewContext() { return Register(std::make_unique<ContextState>()); }

Context Cache::Register(std::unique_ptr<ContextState> state) {
  state->cache = this;
  ContextState* raw = state.release();
  std::lock_guard l(pool_mu_);
  raw->id = next_context_id_++;
  contexts_.insert(raw);
  return Context(raw);
}

void Cache::ClosePages(ContextState* s) {
  std::unique_lock l(s->mu);
  ReleasePages(s->pages);
  s->pages.clear();
  s->tokens.clear();
}

void Cache::Unregister(ContextState* s) {
  {
    std::lock_guard l(pool_mu_);
    contexts_.erase(s);
  }
  delete s;
}

bool Cache::HasRoomLocked() const {
  if (arena_ != nullptr && arena_free_.empty()) return false;
  return options_.max_bytes == 0 || (live_.size() + 1) * page_bytes_ <= options_.max_bytes;
}

Page* Cache::IssuePageLocked(bool zero) {
  auto* p = new Page;
  p->serial = next_serial_++;
  if (arena_ != nullptr) {
    p->slot = arena_free_.back();
    arena_free_.pop_back();
    p->data = arena_ + static_cast<size_t>(p->slot) * page_bytes_;
  } else if (!heap_free_.empty()) {
    p->data = heap_free_.back();
    heap_free_.pop_back();
  } else {
    p->data = static_cast<uint8_t*>(std::aligned_alloc(kAlign, AlignedBytes(page_bytes_)));
    LLAMAY_CHECK(p->data != nullptr) << "out of memory for a " << page_bytes_ << "-byte page";
  }
  // Recycled slots and buffers hold another context's values: never hand them out dirty.
  if (zero) std::memset(p->data, 0, page_bytes_);
  live_.insert(p);
  ++allocated_total_;
  return p;
}

Result<Page*> Cache::AllocatePage(bool zero) {
  for (;;) {
    {
      std::lock_guard l(pool_mu_);
      if (HasRoomLocked()) return IssuePageLocked(zero);
    }
    bool evicted;
    {
      std::lock_guard t(tree_mu_);
      evicted = tree_->EvictOne();
    }
    if (!evicted) break;
  }
  std::lock_guard l(pool_mu_);
  if (HasRoomLocked()) return IssuePageLocked(zero);
  std::string why = "kv cache memory exhausted: " + std::to_string(live_.size()) + " pages of " +
                    std::to_string(page_bytes_) + " bytes are held by contexts";
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
    if (p->slot >= 0) {
      arena_free_.push_back(p->slot);
    } else if (heap_free_.size() < kMaxHeapFree) {
      heap_free_.push_back(p->data);
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
  std::lock_guard t(tree_mu_);
  tree_->Insert(std::move(copy), pin);
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
    auto [entry, matched] = tree_->Match(tokens);
    if (entry != nullptr) {
      r.context = entry->Fork();
      r.matched = matched;
    }
  }
  if (!r.context.valid()) {
    r.context = NewContext();
    return r;
  }
  Status s = r.context.Truncate(r.matched);
  LLAMAY_CHECK(s.ok()) << s.ToString();
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

std::optional<std::vector<int32_t>> Cache::NextVictim() const {
  std::lock_guard t(tree_mu_);
  return tree_->VictimTokens();
}

CacheStats Cache::Stats() const {
  CacheStats s;
  std::lock_guard t(tree_mu_);
  s.tree_entries = tree_->entries();
  s.tree_nodes = tree_->nodes();
  s.tree_pinned = tree_->pinned();
  s.tree_bytes = tree_->bytes();
  s.tree_evictions = tree_->evictions();
  std::lock_guard l(pool_mu_);
  s.page_bytes = page_bytes_;
  s.pages_live = live_.size();
  for (const Page* p : live_)
    if (p->refs.load(std::memory_order_relaxed) > 1) ++s.pages_shared;
  s.pages_allocated_total = allocated_total_;
  s.pages_freed_total = freed_total_;
  s.page_copies = copies_.load(std::memory_order_relaxed);
  s.bytes_live = live_.size() * page_bytes_;
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
    if (s->pages.size() != (s->tokens.size() + P - 1) / P)
      return InternalError("kv: context " + std::to_string(s->id) + " has " +
                           std::to_string(s->pages.size()) + " pages for " +
                           std::to_string(s->tokens.size()) + " positions");
    for (const Page* p : s->pages) ++holders[p];
  }
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
  if (options_.max_bytes && live_.size() * page_bytes_ > options_.max_bytes)
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
