// Context: an ordered list of KV pages plus the token id of every position. The unit llamay forks,
// snapshots and restores.
//
// Invariants:
//   - pages.size() == ceil(size() / page_tokens); position p lives in page p / page_tokens, slot
//     p % page_tokens.
//   - Fork() copies the page-pointer list and increments refcounts: it allocates no page.
//   - A page is copied only in Writable() (context.cc), the one place in kv/ that copies a page: before a
//     write to a page whose refcount is above one. So a write is never visible to any other context
//     (isolation), and a fork reads exactly what its parent held (exactness).
//   - Positions added by Append() read as zero until written.
//
// Thread-safety: a Context has a single owner, and the library enforces it: every mutation takes the
// context's lock exclusively and every read (ReadRow, Fork, snapshot, Cache::Retain) takes it shared, so
// concurrent use through one handle is serialised, never a data race. Different contexts (sharing pages
// or not) may be used from different threads freely. Closing a handle while another thread still uses
// the same handle is a use-after-close and is not allowed.
#ifndef LLAMAY_KV_CONTEXT_H_
#define LLAMAY_KV_CONTEXT_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "kv/layout.h"

namespace llamay::kv {

class Cache;
namespace internal {
struct ContextState;
class PrefixTree;
}  // namespace internal

class Context {
 public:
  Context() = default;  // an empty handle: valid() is false
  ~Context() { Close(); }
  Context(Context&& o) noexcept : s_(o.s_) { o.s_ = nullptr; }
  Context& operator=(Context&& o) noexcept;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  bool valid() const { return s_ != nullptr; }
  // A number unique within the cache for the cache's lifetime.
  uint64_t id() const;
  size_t size() const;  // positions
  size_t n_pages() const;
  std::vector<int32_t> tokens() const;
  const KvLayout& layout() const;
  Cache* cache() const;

  // Adds one position per token; their K/V read as zero until written. All-or-nothing: on failure (the
  // cache's memory budget) the context is unchanged.
  Status Append(std::span<const int32_t> tokens);
  // Writes the K or V row of one position in one layer; `row` has layout().row_elems() values, converted
  // to the cache's precision.
  Status WriteRow(size_t pos, uint32_t layer, KvKind kind, std::span<const float> row);
  // Reads one row back as f32 (dequantised where the cache stores f16 or q8_0).
  Status ReadRow(size_t pos, uint32_t layer, KvKind kind, std::span<float> out) const;
  // Keeps the first n positions. REQUIRES: n <= size() (else OutOfRange, unchanged).
  Status Truncate(size_t n);

  // A new context holding the same positions, sharing every page.
  Context Fork() const;
  std::vector<Context> Fork(size_t n) const;

  // Releases the pages; the handle becomes empty. Idempotent.
  void Close();

  // The data pointer of each page, in order, for kernels that read the cache directly (attention).
  // Valid until this context is next mutated or closed. REQUIRES: the caller owns the context.
  std::vector<const uint8_t*> PageData() const;

 private:
  friend class Cache;
  friend class SnapshotCodec;
  friend class internal::PrefixTree;
  explicit Context(internal::ContextState* s) : s_(s) {}
  // Makes page `index` of `s` private to it: copies the page if its refcount is above one. The only
  // function in kv/ that copies a page. REQUIRES: s->mu held exclusively.
  static Status Writable(internal::ContextState* s, size_t index);
  // Append; with `caller_overwrites`, the new positions' rows are left for the caller to fill before
  // the context is shared (restore), so only slots past the new end are zeroed.
  Status AppendImpl(std::span<const int32_t> tokens, bool caller_overwrites);
  internal::ContextState* s_ = nullptr;
};

}  // namespace llamay::kv

#endif  // LLAMAY_KV_CONTEXT_H_
