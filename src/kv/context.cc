#include "kv/context.h"

#include <cstring>
#include <mutex>
#include <shared_mutex>

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
  return s_->pages.size();
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

Status Context::Writable(ContextState* s, size_t index) {
  Page* old = s->pages[index];
  // acquire: pairs with the release in ReleasePages, so reads by a holder that has let go happen
  // before our writes.
  if (old->refs.load(std::memory_order_acquire) == 1) return Status::Ok();
  Cache* cache = s->cache;
  LLAMAY_ASSIGN_OR_RETURN(Page * fresh, cache->AllocatePage(/*zero=*/false));
  std::memcpy(fresh->data, old->data, cache->page_bytes_);
  cache->copies_.fetch_add(1, std::memory_order_relaxed);
  s->pages[index] = fresh;
  Page* drop[1] = {old};
  cache->ReleasePages(drop);
  return Status::Ok();
}

Status Context::Append(std::span<const int32_t> tokens) { return AppendImpl(tokens, false); }

Status Context::AppendImpl(std::span<const int32_t> tokens, bool caller_overwrites) {
  LLAMAY_CHECK(s_) << "use of an empty Context";
  LLAMAY_CHECK(!s_->tree_owned) << "a prefix-tree context is immutable";
  if (tokens.empty()) return Status::Ok();
  std::unique_lock l(s_->mu);
  const KvLayout& layout = s_->cache->layout();
  const size_t P = layout.page_tokens;
  const size_t old = s_->tokens.size();
  if (old + tokens.size() > kMaxPositions)
    return OutOfRangeError("context would hold " + std::to_string(old + tokens.size()) +
                           " positions; the limit is " + std::to_string(kMaxPositions));
  // 1. The partly used tail page becomes private (its content is unchanged by this).
  const size_t tail_used = old % P;
  if (tail_used != 0) LLAMAY_RETURN_IF_ERROR(Writable(s_, old / P));
  // 2. New pages, all or nothing.
  const size_t need = (old + tokens.size() + P - 1) / P - s_->pages.size();
  std::vector<Page*> fresh;
  fresh.reserve(need);
  for (size_t i = 0; i < need; ++i) {
    auto page = s_->cache->AllocatePage(/*zero=*/!caller_overwrites);
    if (!page.ok()) {
      s_->cache->ReleasePages(fresh);
      return page.status();
    }
    fresh.push_back(*page);
  }
  // 3. Slots of the tail page that become positions may hold values from before a truncation: clear.
  if (caller_overwrites) {
    // Slots past the new end of the last page are the only bytes nobody writes: clear them.
    const size_t end_slot = (old + tokens.size()) % P;
    if (end_slot != 0 && need > 0) {
      uint8_t* data = fresh.back()->data;
      for (uint32_t layer = 0; layer < layout.n_layers; ++layer)
        for (KvKind kind : {KvKind::kKey, KvKind::kValue})
          std::memset(data + layout.RowOffset(layer, kind, static_cast<uint32_t>(end_slot)), 0,
                      (P - end_slot) * layout.row_bytes());
    }
  }
  if (tail_used != 0) {
    const size_t n = std::min(P - tail_used, tokens.size());
    uint8_t* data = s_->pages[old / P]->data;
    for (uint32_t layer = 0; layer < layout.n_layers; ++layer)
      for (KvKind kind : {KvKind::kKey, KvKind::kValue})
        std::memset(data + layout.RowOffset(layer, kind, static_cast<uint32_t>(tail_used)), 0,
                    n * layout.row_bytes());
  }
  s_->pages.insert(s_->pages.end(), fresh.begin(), fresh.end());
  s_->tokens.insert(s_->tokens.end(), tokens.begin(), tokens.end());
  return Status::Ok();
}

namespace {

Status CheckRowArgs(const ContextState* s, size_t pos, uint32_t layer, size_t len) {
  const KvLayout& layout = s->cache->layout();
  if (pos >= s->tokens.size())
    return OutOfRangeError("position " + std::to_string(pos) + " beyond context of " +
                           std::to_string(s->tokens.size()));
  if (layer >= layout.n_layers)
    return OutOfRangeError("layer " + std::to_string(layer) + " of " + std::to_string(layout.n_layers));
  if (len != layout.row_elems())
    return InvalidArgumentError("row of " + std::to_string(len) + " values; layout wants " +
                                std::to_string(layout.row_elems()));
  return Status::Ok();
}

}  // namespace

Status Context::WriteRow(size_t pos, uint32_t layer, KvKind kind, std::span<const float> row) {
  LLAMAY_CHECK(s_) << "use of an empty Context";
  LLAMAY_CHECK(!s_->tree_owned) << "a prefix-tree context is immutable";
  std::unique_lock l(s_->mu);
  LLAMAY_RETURN_IF_ERROR(CheckRowArgs(s_, pos, layer, row.size()));
  const KvLayout& layout = s_->cache->layout();
  const size_t P = layout.page_tokens;
  LLAMAY_RETURN_IF_ERROR(Writable(s_, pos / P));
  uint8_t* dst = s_->pages[pos / P]->data + layout.RowOffset(layer, kind, static_cast<uint32_t>(pos % P));
  internal::EncodeRow(layout.precision, row.data(), layout.row_elems(), dst);
  return Status::Ok();
}

Status Context::ReadRow(size_t pos, uint32_t layer, KvKind kind, std::span<float> out) const {
  LLAMAY_CHECK(s_) << "use of an empty Context";
  std::shared_lock l(s_->mu);
  LLAMAY_RETURN_IF_ERROR(CheckRowArgs(s_, pos, layer, out.size()));
  const KvLayout& layout = s_->cache->layout();
  const size_t P = layout.page_tokens;
  const uint8_t* src =
      s_->pages[pos / P]->data + layout.RowOffset(layer, kind, static_cast<uint32_t>(pos % P));
  internal::DecodeRow(layout.precision, src, layout.row_elems(), out.data());
  return Status::Ok();
}

Status Context::Truncate(size_t n) {
  LLAMAY_CHECK(s_) << "use of an empty Context";
  LLAMAY_CHECK(!s_->tree_owned) << "a prefix-tree context is immutable";
  std::unique_lock l(s_->mu);
  if (n > s_->tokens.size())
    return OutOfRangeError("truncate to " + std::to_string(n) + " beyond context of " +
                           std::to_string(s_->tokens.size()));
  const size_t P = s_->cache->layout().page_tokens;
  const size_t keep = (n + P - 1) / P;
  s_->cache->ReleasePages(std::span<Page* const>(s_->pages).subspan(keep));
  s_->pages.resize(keep);
  s_->tokens.resize(n);
  return Status::Ok();
}

Context Context::Fork() const {
  LLAMAY_CHECK(s_) << "use of an empty Context";
  auto child = std::make_unique<ContextState>();
  child->cache = s_->cache;
  {
    std::shared_lock l(s_->mu);
    child->pages = s_->pages;
    child->tokens = s_->tokens;
    for (Page* p : child->pages) p->refs.fetch_add(1, std::memory_order_relaxed);
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

std::vector<const uint8_t*> Context::PageData() const {
  LLAMAY_CHECK(s_) << "use of an empty Context";
  std::shared_lock l(s_->mu);
  std::vector<const uint8_t*> out;
  out.reserve(s_->pages.size());
  for (const Page* p : s_->pages) out.push_back(p->data);
  return out;
}

}  // namespace llamay::kv
