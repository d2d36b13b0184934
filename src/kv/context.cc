#include "kv/context.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <utility>

#include "kv/cache.h"
#include "kv/internal.h"
#include "kv/row_codec.h"

namespace llamay::kv {

using internal::ContextState;
using internal::Page;

Context& Context::operator=(Context&& o) noexcept {
  if (this != &o) {
    Close();
    s_ = o.s_;
    o.s_ = nullptr;
  }
  return *this;
}

uint64_t Context::id() const {
  LLAMAY_CHECK(s_) << "use of an empty Context";
  return s_->id;
}

size_t Context::size() const {
  LLAMAY_CHECK(s_) << "use of an empty Context";
  std::shared_lock l(s_->mu);
  return s_->tokens.size();
}

size_t Context::n_pages() const {
  LLAMAY_CHECK(s_) << "use of an empty Context";
  std::shared_lock l(s_->mu);
  size_t n = 0;
  for (const Page* p : s_->pages.flat()) n += p != nullptr;
  return n;
}

size_t Context::bytes() const {
  LLAMAY_CHECK(s_) << "use of an empty Context";
  std::shared_lock l(s_->mu);
  size_t n = s_->state ? s_->state->bytes : 0;
  for (const Page* p : s_->pages.flat()) n += p ? p->bytes : 0;
  for (const auto& c : s_->checkpoints) n += c.state->bytes;
  return n;
}

std::vector<int32_t> Context::tokens() const {
  LLAMAY_CHECK(s_) << "use of an empty Context";
  std::shared_lock l(s_->mu);
  return s_->tokens;
}

const KvLayout& Context::layout() const {
  LLAMAY_CHECK(s_) << "use of an empty Context";
  return s_->cache->layout();
}

Cache* Context::cache() const { return s_ ? s_->cache : nullptr; }

Status Context::Writable(ContextState* s, Page** page) {
  Cache* cache = s->cache;
  for (;;) {
    Page* old = *page;
    // acquire: pairs with the release in ReleasePages, so reads by a holder that has let go happen
    // before our writes.
    if (old->refs.load(std::memory_order_acquire) == 1) return Status::Ok();
    auto fresh = cache->AllocatePage(old->bytes, /*zero=*/false, old->state);
    if (!fresh.ok()) {
      // Giving up a checkpoint frees memory, or (the one that shares the live slot) makes the copy needless.
      if (fresh.status().code() == StatusCode::kResourceExhausted && ReleaseOwnCheckpoint(s)) continue;
      return fresh.status();
    }
    std::memcpy((*fresh)->data, old->data, old->bytes);
    cache->copies_.fetch_add(1, std::memory_order_relaxed);
    *page = *fresh;
    Page* drop[1] = {old};
    cache->ReleasePages(drop);
    return Status::Ok();
  }
}

Result<Page*> Context::Allocate(ContextState* s, size_t bytes, bool zero, bool state) {
  for (;;) {
    auto page = s->cache->AllocatePage(bytes, zero, state);
    if (page.ok() || page.status().code() != StatusCode::kResourceExhausted || !ReleaseOwnCheckpoint(s))
      return page;
  }
}

bool Context::ReleaseOwnCheckpoint(ContextState* s) {
  std::vector<internal::Checkpoint>& cps = s->checkpoints;
  const size_t n = cps.size();
  auto own = [&](size_t i) {
    const uint32_t refs = cps[i].state->refs.load(std::memory_order_acquire);
    return refs == 1 || (refs == 2 && cps[i].state == s->state);
  };
  // Least loss first: without checkpoint i, a resume there starts from the one before it and recomputes
  // the gap between them. Ties: the middle ones, oldest first, then the first, then the newest.
  auto key = [&](size_t i) {
    const size_t gap = cps[i].pos - (i == 0 ? 0 : cps[i - 1].pos);
    return std::pair(gap, i == 0 ? n : i + 1 == n ? n + 1 : i);
  };
  size_t best = n;
  for (size_t i = 0; i < n; ++i)
    if (own(i) && (best == n || key(i) < key(best))) best = i;
  if (best == n) return false;
  Page* drop[1] = {cps[best].state};
  cps.erase(cps.begin() + static_cast<std::ptrdiff_t>(best));
  s->cache->ReleasePages(drop);
  return true;
}

Status Context::Append(std::span<const int32_t> tokens) { return AppendImpl(tokens, false); }

Status Context::AppendImpl(std::span<const int32_t> tokens, bool caller_overwrites) {
  LLAMAY_CHECK(s_) << "use of an empty Context";
  LLAMAY_CHECK(!s_->tree_owned) << "a prefix-tree context is immutable";
  if (tokens.empty()) return Status::Ok();
  std::unique_lock l(s_->mu);
  const KvLayout& layout = s_->cache->layout();
  const StateGroups& groups = s_->cache->groups();
  const size_t P = layout.page_tokens;
  const size_t old = s_->tokens.size();
  if (old + tokens.size() > kMaxPositions)
    return OutOfRangeError("context would hold " + std::to_string(old + tokens.size()) +
                           " positions; the limit is " + std::to_string(kMaxPositions));
  const size_t tail_used = old % P;
  const size_t need = (old + tokens.size() + P - 1) / P - (old + P - 1) / P;
  const size_t n_groups = groups.attention.size();
  // 1. The partly used tail page of each group becomes private (its content is unchanged by this).
  //    A released tail page cannot occur: a windowed group always keeps the page holding size() - 1.
  if (tail_used != 0)
    for (size_t g = 0; g < n_groups; ++g) LLAMAY_RETURN_IF_ERROR(Writable(s_, &s_->pages[g][old / P]));
  // 2. New pages for every group, all or nothing.
  std::vector<std::vector<Page*>> fresh(n_groups);
  for (size_t g = 0; g < n_groups; ++g) {
    for (size_t i = 0; i < need; ++i) {
      auto page = Allocate(s_, groups.attention[g].page_bytes, /*zero=*/!caller_overwrites);
      if (!page.ok()) {
        for (auto& f : fresh) s_->cache->ReleasePages(f);
        return page.status();
      }
      fresh[g].push_back(*page);
    }
  }
  // 3. Slots that become positions may hold values from before a rollback; with caller_overwrites, slots
  //    past the new end of the last page are the only bytes nobody writes. Clear both.
  const size_t end_slot = (old + tokens.size()) % P;
  for (size_t g = 0; g < n_groups; ++g) {
    const uint32_t n_layers = static_cast<uint32_t>(groups.attention[g].layers.size());
    if (caller_overwrites && end_slot != 0 && need > 0) {
      uint8_t* data = fresh[g].back()->data;
      for (uint32_t layer = 0; layer < n_layers; ++layer)
        for (KvKind kind : {KvKind::kKey, KvKind::kValue})
          std::memset(data + layout.RowOffset(layer, kind, static_cast<uint32_t>(end_slot)), 0,
                      (P - end_slot) * layout.row_bytes());
    }
    if (tail_used != 0) {
      const size_t n = std::min(P - tail_used, tokens.size());
      uint8_t* data = s_->pages[g][old / P]->data;
      for (uint32_t layer = 0; layer < n_layers; ++layer)
        for (KvKind kind : {KvKind::kKey, KvKind::kValue})
          std::memset(data + layout.RowOffset(layer, kind, static_cast<uint32_t>(tail_used)), 0,
                      n * layout.row_bytes());
    }
  }
  for (size_t i = 0; i < need; ++i)
    for (size_t g = 0; g < n_groups; ++g) s_->pages.flat().push_back(fresh[g][i]);
  s_->tokens.insert(s_->tokens.end(), tokens.begin(), tokens.end());
  return Status::Ok();
}

namespace {

// The group page holding (pos, layer), after checking the arguments.
Result<LayerSlot> CheckRowArgs(const ContextState* s, size_t pos, uint32_t layer, size_t len) {
  const KvLayout& layout = s->cache->layout();
  if (pos >= s->tokens.size())
    return OutOfRangeError("position " + std::to_string(pos) + " beyond context of " +
                           std::to_string(s->tokens.size()));
  if (layer >= layout.n_layers)
    return OutOfRangeError("layer " + std::to_string(layer) + " of " + std::to_string(layout.n_layers));
  const LayerSlot slot = s->cache->groups().slots[layer];
  if (slot.kind != LayerKind::kAttention)
    return InvalidArgumentError("layer " + std::to_string(layer) + " is recurrent: it has no K/V rows");
  if (len != layout.row_elems())
    return InvalidArgumentError("row of " + std::to_string(len) + " values; layout wants " +
                                std::to_string(layout.row_elems()));
  if (pos < s->floor[slot.group])
    return FailedPreconditionError("position " + std::to_string(pos) + " of layer " + std::to_string(layer) +
                                   " is outside its window and was released");
  return slot;
}

}  // namespace

Status Context::WriteRow(size_t pos, uint32_t layer, KvKind kind, std::span<const float> row) {
  LLAMAY_CHECK(s_) << "use of an empty Context";
  LLAMAY_CHECK(!s_->tree_owned) << "a prefix-tree context is immutable";
  std::unique_lock l(s_->mu);
  LLAMAY_ASSIGN_OR_RETURN(LayerSlot slot, CheckRowArgs(s_, pos, layer, row.size()));
  const KvLayout& layout = s_->cache->layout();
  const size_t P = layout.page_tokens;
  Page** page = &s_->pages[slot.group][pos / P];
  LLAMAY_RETURN_IF_ERROR(Writable(s_, page));
  uint8_t* dst = (*page)->data + layout.RowOffset(slot.index, kind, static_cast<uint32_t>(pos % P));
  internal::EncodeRow(layout.precision, row.data(), layout.row_elems(), dst);
  return Status::Ok();
}

Status Context::ReadRow(size_t pos, uint32_t layer, KvKind kind, std::span<float> out) const {
  LLAMAY_CHECK(s_) << "use of an empty Context";
  std::shared_lock l(s_->mu);
  LLAMAY_ASSIGN_OR_RETURN(LayerSlot slot, CheckRowArgs(s_, pos, layer, out.size()));
  const KvLayout& layout = s_->cache->layout();
  const size_t P = layout.page_tokens;
  const uint8_t* src = s_->pages[slot.group][pos / P]->data +
                       layout.RowOffset(slot.index, kind, static_cast<uint32_t>(pos % P));
  internal::DecodeRow(layout.precision, src, layout.row_elems(), out.data());
  return Status::Ok();
}

void Context::DropTail(ContextState* s, size_t n) {
  const size_t P = s->cache->layout().page_tokens;
  const size_t keep = (n + P - 1) / P;
  {
    std::vector<Page*> drop;
    const std::vector<Page*>& flat = s->pages.flat();
    for (size_t i = keep * s->pages.size(); i < flat.size(); ++i)
      if (flat[i] != nullptr) drop.push_back(flat[i]);
    s->cache->ReleasePages(drop);
    s->pages.resize_pages(keep);
  }
  if (n == 0) std::fill(s->floor.begin(), s->floor.end(), 0);
  s->tokens.resize(n);
  std::vector<Page*> drop;
  while (!s->checkpoints.empty() && s->checkpoints.back().pos > n) {
    drop.push_back(s->checkpoints.back().state);
    s->checkpoints.pop_back();
  }
  s->cache->ReleasePages(drop);
}

namespace {

// Whether a context of this many tokens can go back to n: n within it, and (windows) the keys a query at n
// reads, [n - w + 1, n), still held.
Status CheckRollback(const internal::ContextState& s, size_t n) {
  if (n > s.tokens.size())
    return OutOfRangeError("rollback to " + std::to_string(n) + " beyond context of " +
                           std::to_string(s.tokens.size()));
  const StateGroups& groups = s.cache->groups();
  for (size_t g = 0; g < groups.attention.size(); ++g) {
    const size_t w = groups.attention[g].window;
    if (w == 0 || n == 0) continue;
    const size_t first = n >= w ? n - w + 1 : 0;
    if (first < s.floor[g])
      return FailedPreconditionError("cannot roll back to position " + std::to_string(n) +
                                     ": the window of " + std::to_string(w) +
                                     " positions before it was released");
  }
  return Status::Ok();
}

}  // namespace

Status Context::RollbackRewound(size_t n) {
  LLAMAY_CHECK(s_) << "use of an empty Context";
  LLAMAY_CHECK(!s_->tree_owned) << "a prefix-tree context is immutable";
  std::unique_lock l(s_->mu);
  LLAMAY_RETURN_IF_ERROR(CheckRollback(*s_, n));
  if (s_->cache->groups().has_recurrent()) s_->state_pos = std::min(s_->state_pos, n);
  DropTail(s_, n);
  return Status::Ok();
}

Status Context::Rollback(size_t n) {
  LLAMAY_CHECK(s_) << "use of an empty Context";
  LLAMAY_CHECK(!s_->tree_owned) << "a prefix-tree context is immutable";
  std::unique_lock l(s_->mu);
  LLAMAY_RETURN_IF_ERROR(CheckRollback(*s_, n));
  const StateGroups& groups = s_->cache->groups();
  // The recurrent state: unchanged when it has not consumed past n, else a checkpoint at exactly n.
  Page* restore = nullptr;
  if (groups.has_recurrent() && n < s_->state_pos) {
    auto it = std::find_if(s_->checkpoints.begin(), s_->checkpoints.end(),
                           [n](const internal::Checkpoint& c) { return c.pos == n; });
    if (n != 0 && it == s_->checkpoints.end()) {
      std::string have;
      for (const auto& c : s_->checkpoints) have += (have.empty() ? "" : ", ") + std::to_string(c.pos);
      return FailedPreconditionError(
          "cannot roll back a recurrent state from position " + std::to_string(s_->state_pos) + " to " +
          std::to_string(n) + ": no checkpoint there (checkpoints at: " + (have.empty() ? "none" : have) +
          ")");
    }
    if (n != 0) {
      restore = it->state;
      restore->refs.fetch_add(1, std::memory_order_relaxed);
    }
    Page* drop[1] = {s_->state};
    s_->cache->ReleasePages(std::span<Page* const>(drop, s_->state ? 1 : 0));
    s_->state = restore;
    s_->state_pos = n;
  }
  DropTail(s_, n);
  return Status::Ok();
}

size_t Context::state_position() const {
  LLAMAY_CHECK(s_) << "use of an empty Context";
  std::shared_lock l(s_->mu);
  return s_->state_pos;
}

Result<uint8_t*> Context::MutableState() {
  LLAMAY_CHECK(s_) << "use of an empty Context";
  LLAMAY_CHECK(!s_->tree_owned) << "a prefix-tree context is immutable";
  std::unique_lock l(s_->mu);
  const StateGroups& groups = s_->cache->groups();
  if (!groups.has_recurrent()) return FailedPreconditionError("the layout has no recurrent layer");
  if (s_->state == nullptr) {
    LLAMAY_ASSIGN_OR_RETURN(s_->state,
                            Allocate(s_, groups.recurrent.page_bytes, /*zero=*/true, /*state=*/true));
    return s_->state->data;
  }
  LLAMAY_RETURN_IF_ERROR(Writable(s_, &s_->state));
  return s_->state->data;
}

const uint8_t* Context::StateData() const {
  LLAMAY_CHECK(s_) << "use of an empty Context";
  std::shared_lock l(s_->mu);
  return s_->state ? s_->state->data : nullptr;
}

Status Context::CommitState(size_t n) {
  LLAMAY_CHECK(s_) << "use of an empty Context";
  LLAMAY_CHECK(!s_->tree_owned) << "a prefix-tree context is immutable";
  std::unique_lock l(s_->mu);
  if (!s_->cache->groups().has_recurrent())
    return FailedPreconditionError("the layout has no recurrent layer");
  if (n < s_->state_pos || n > s_->tokens.size())
    return OutOfRangeError("commit of the state at " + std::to_string(n) + " outside [" +
                           std::to_string(s_->state_pos) + ", " + std::to_string(s_->tokens.size()) + "]");
  if (n > 0 && s_->state == nullptr)
    return FailedPreconditionError("commit of a state that was never written");
  s_->state_pos = n;
  return Status::Ok();
}

Status Context::Checkpoint() {
  LLAMAY_CHECK(s_) << "use of an empty Context";
  LLAMAY_CHECK(!s_->tree_owned) << "a prefix-tree context is immutable";
  std::unique_lock l(s_->mu);
  if (!s_->cache->groups().has_recurrent())
    return FailedPreconditionError("the layout has no recurrent layer");
  if (s_->state_pos == 0) return Status::Ok();
  if (!s_->checkpoints.empty() && s_->checkpoints.back().pos == s_->state_pos) return Status::Ok();
  s_->state->refs.fetch_add(1, std::memory_order_relaxed);
  s_->checkpoints.push_back({s_->state_pos, s_->state});
  // Bounded: past the limit every other checkpoint goes (the first and the newest stay), so however long
  // the context grows its checkpoints still span it, at twice the spacing.
  if (s_->checkpoints.size() > kMaxContextCheckpoints) {
    std::vector<Page*> drop;
    std::vector<internal::Checkpoint> kept;
    for (size_t i = 0; i < s_->checkpoints.size(); ++i) {
      if (i % 2 == 0 || i + 1 == s_->checkpoints.size()) {
        kept.push_back(s_->checkpoints[i]);
      } else {
        drop.push_back(s_->checkpoints[i].state);
      }
    }
    s_->checkpoints = std::move(kept);
    s_->cache->ReleasePages(drop);
  }
  return Status::Ok();
}

std::vector<size_t> Context::CheckpointPositions() const {
  LLAMAY_CHECK(s_) << "use of an empty Context";
  std::shared_lock l(s_->mu);
  std::vector<size_t> out;
  for (const auto& c : s_->checkpoints) out.push_back(c.pos);
  return out;
}

void Context::TrimWindows() {
  LLAMAY_CHECK(s_) << "use of an empty Context";
  LLAMAY_CHECK(!s_->tree_owned) << "a prefix-tree context is immutable";
  std::unique_lock l(s_->mu);
  const StateGroups& groups = s_->cache->groups();
  const size_t P = s_->cache->layout().page_tokens;
  const size_t n = s_->tokens.size();
  for (size_t g = 0; g < groups.attention.size(); ++g) {
    const size_t w = groups.attention[g].window;
    if (w == 0 || n < w) continue;
    // A query at n reads keys from n - w + 1: pages wholly before it go.
    const size_t first_needed_page = (n - w + 1) / P;
    s_->floor[g] = std::max(s_->floor[g], first_needed_page * P);
    std::vector<Page*> drop;
    for (size_t i = 0; i < first_needed_page; ++i)
      if (s_->pages[g][i] != nullptr) {
        drop.push_back(s_->pages[g][i]);
        s_->pages[g][i] = nullptr;
      }
    s_->cache->ReleasePages(drop);
  }
}

Context Context::Fork() const {
  LLAMAY_CHECK(s_) << "use of an empty Context";
  auto child = std::make_unique<ContextState>();
  child->cache = s_->cache;
  {
    std::shared_lock l(s_->mu);
    child->pages = s_->pages;
    child->floor = s_->floor;
    child->tokens = s_->tokens;
    child->state = s_->state;
    child->state_pos = s_->state_pos;
    child->checkpoints = s_->checkpoints;
    for (Page* p : child->pages.flat())
      if (p != nullptr) p->refs.fetch_add(1, std::memory_order_relaxed);
    if (child->state != nullptr) child->state->refs.fetch_add(1, std::memory_order_relaxed);
    for (const auto& c : child->checkpoints) c.state->refs.fetch_add(1, std::memory_order_relaxed);
  }
  return s_->cache->Register(std::move(child));
}

std::vector<Context> Context::Fork(size_t n) const {
  std::vector<Context> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) out.push_back(Fork());
  return out;
}

void Context::Close() {
  if (!s_) return;
  ContextState* s = s_;
  s_ = nullptr;
  s->cache->ClosePages(s);
  s->cache->Unregister(s);  // deletes s
}

std::vector<const uint8_t*> Context::PageData(uint32_t group) const {
  LLAMAY_CHECK(s_) << "use of an empty Context";
  std::shared_lock l(s_->mu);
  LLAMAY_CHECK(group < s_->pages.size()) << "attention group " << group << " of " << s_->pages.size();
  std::vector<const uint8_t*> out;
  out.reserve(s_->pages[group].size());
  const auto list = s_->pages[group];
  for (size_t i = 0; i < list.size(); ++i) out.push_back(list[i] ? list[i]->data : nullptr);
  return out;
}

Status Context::PrepareWrite(size_t from) {
  LLAMAY_CHECK(s_) << "use of an empty Context";
  LLAMAY_CHECK(!s_->tree_owned) << "a prefix-tree context is immutable";
  std::unique_lock l(s_->mu);
  const size_t P = s_->cache->layout().page_tokens;
  const size_t n = s_->tokens.size();
  if (from >= n) return Status::Ok();
  for (size_t g = 0; g < s_->pages.size(); ++g)
    for (size_t i = from / P; i <= (n - 1) / P; ++i) {
      if (s_->pages[g][i] == nullptr)
        return FailedPreconditionError("position " + std::to_string(i * P) + " was released by its window");
      LLAMAY_RETURN_IF_ERROR(Writable(s_, &s_->pages[g][i]));
    }
  return Status::Ok();
}

}  // namespace llamay::kv
