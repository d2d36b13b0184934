// The read-only views of inspect.h that need the pool and the contexts (the tree's own walk is in
// prefix_tree.cc).
#include "kv/inspect.h"

#include <algorithm>
#include <mutex>
#include <shared_mutex>
#include <unordered_set>

#include "base/check.h"
#include "kv/cache.h"
#include "kv/context.h"
#include "kv/internal.h"
#include "kv/prefix_tree.h"

namespace llamay::kv {

using internal::Page;

ContextView Context::Inspect() const {
  LLAMAY_CHECK(s_) << "use of an empty Context";
  std::shared_lock l(s_->mu);
  ContextView v;
  v.id = s_->id;
  v.size = s_->tokens.size();
  const size_t groups = s_->pages.size();
  v.groups.resize(groups);
  v.first_held.assign(s_->floor.begin(), s_->floor.begin() + static_cast<ptrdiff_t>(groups));
  for (size_t g = 0; g < groups; ++g) {
    const auto list = s_->pages[g];
    v.groups[g].reserve(list.size());
    for (size_t i = 0; i < list.size(); ++i) {
      const Page* p = list[i];
      if (p == nullptr) {
        v.groups[g].push_back({});
        continue;
      }
      const int32_t refs = p->refs.load(std::memory_order_relaxed);
      v.groups[g].push_back({p->serial, refs});
      (refs > 1 ? v.pages_shared : v.pages_owned) += 1;
    }
  }
  if (s_->state != nullptr) v.state = {s_->state->serial, s_->state->refs.load(std::memory_order_relaxed)};
  v.state_position = s_->state_pos;
  for (const auto& c : s_->checkpoints) v.checkpoints.push_back(c.pos);
  return v;
}

PoolView Cache::InspectPool() const {
  PoolView v;
  v.max_bytes = options_.max_bytes;
  const size_t groups = groups_.attention.size();
  v.page_bytes = groups ? options_.layout.page_bytes() / groups : 0;
  // tree_mu_ first (the lock order), held while the pool is walked so that the tree's holds describe the
  // same pages (a page freed meanwhile could otherwise come back at the same address).
  std::lock_guard t(tree_mu_);
  const auto& tree_holds = tree_->holds();
  const std::unordered_set<const Page*> kept = tree_->ProtectedPages();
  std::lock_guard l(pool_mu_);
  for (const Page* p : live_) {
    const int32_t refs = p->refs.load(std::memory_order_relaxed);
    if (refs <= 0) continue;  // released by its last holder, about to leave live_
    const auto it = tree_holds.find(p);
    const uint32_t in_tree = it == tree_holds.end() ? 0 : it->second;
    PoolCount* c;
    if (in_tree >= static_cast<uint32_t>(refs)) {
      c = &v.prefix_only;
      if (kept.count(p) == 0) {
        v.evictable.bytes += p->bytes;
        if (!p->state) ++v.evictable.pages;
      }
    } else {
      c = refs == 1 ? &v.unique : &v.shared;
    }
    c->bytes += p->bytes;
    if (p->state) {
      ++v.states;
      v.states_bytes += p->bytes;
    } else {
      ++c->pages;
    }
  }
  v.bytes_live = bytes_live_;
  size_t free_bytes = 0;
  if (options_.max_bytes > 0) free_bytes = options_.max_bytes - std::min(options_.max_bytes, bytes_live_);
  if (arena_ != nullptr) {
    const size_t arena_free = arena_free_.size() * page_bytes_;
    free_bytes = options_.max_bytes > 0 ? std::min(free_bytes, arena_free) : arena_free;
  }
  v.free.bytes = free_bytes;
  v.free.pages = v.page_bytes ? free_bytes / v.page_bytes : 0;
  return v;
}

TreeView Cache::InspectTree(const TreeViewOptions& options) const {
  std::lock_guard t(tree_mu_);
  return tree_->Inspect(options);
}

std::vector<uint64_t> Cache::TreePageSerials() const {
  std::vector<uint64_t> out;
  {
    std::lock_guard t(tree_mu_);
    out.reserve(tree_->holds().size());
    for (const auto& [p, n] : tree_->holds()) out.push_back(p->serial);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace llamay::kv
