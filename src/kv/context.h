// Context: the token id of every position, one ordered list of KV pages per attention group, and (for
// models with recurrent layers) one live recurrent slot with the checkpoints taken along the way. The
// unit llamay forks, snapshots and restores.
//
// Invariants:
//   - Each group's list holds ceil(size() / page_tokens) entries; position p lives in page
//     p / page_tokens, slot p % page_tokens. A windowed group's entry is null once TrimWindows released
//     it (no query at a position >= size() can read it).
//   - The live slot holds the recurrent state after the first state_position() positions; Append adds
//     positions the recurrent layers have not consumed yet, and the model commits them (CommitState).
//   - Fork() copies the page-pointer lists, the slot pointer and the checkpoint list and increments
//     refcounts: it allocates nothing. A branch gets its own recurrent state on its first write to it
//     (copy on first write, like a page).
//   - A page (KV or state) is copied only in Writable() (context.cc), the one place in kv/ that copies a
//     page: before a write to a page whose refcount is above one. So a write is never visible to any other
//     context (isolation), and a fork reads exactly what its parent held (exactness). A checkpoint shares
//     the slot it froze, so it never changes either.
//   - Positions added by Append() read as zero until written.
//   - Rollback(n) is the one undo. Attention positions can go back anywhere their window's KV is still
//     held; a recurrent state cannot be rolled back, so a rollback below state_position() needs a
//     checkpoint at exactly n and is refused otherwise.
//   - Memory: a page this context needs is taken from the cache, which evicts the prefix tree's entries and
//     checkpoints to make room. When nothing there is left to evict, the context gives up its own
//     checkpoints that no one else holds, one at a time (ReleaseOwnCheckpoint's order), before it fails
//     with ResourceExhausted. Those it gave up stay given up, as the tree's evictions do.
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
#include "kv/inspect.h"
#include "kv/layout.h"

namespace llamay::kv {

class Cache;
namespace internal {
struct ContextState;
struct Page;
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
  size_t size() const;     // positions
  size_t n_pages() const;  // KV pages held, every attention group
  // Bytes this context holds (shared or not): its KV pages, its live recurrent slot and its checkpoints.
  size_t bytes() const;
  std::vector<int32_t> tokens() const;
  // Its pages with their serials and refcounts, and its recurrent state (inspect.h); one pass under the
  // context's shared lock.
  ContextView Inspect() const;
  const KvLayout& layout() const;
  Cache* cache() const;

  // Adds one position per token; their K/V read as zero until written. All-or-nothing: on failure (the
  // cache's memory budget) the context is unchanged.
  Status Append(std::span<const int32_t> tokens);
  // Writes the K or V row of one position in one layer; `row` has layout().row_elems() values, converted
  // to the cache's precision.
  Status WriteRow(size_t pos, uint32_t layer, KvKind kind, std::span<const float> row);
  // `layer` is a model layer and must be an attention layer (else InvalidArgument); a windowed layer's
  // released position is FailedPrecondition.
  // Reads one row back as f32 (dequantised where the cache stores f16 or q8_0).
  Status ReadRow(size_t pos, uint32_t layer, KvKind kind, std::span<float> out) const;

  // Keeps the first n positions: the undo of Append and of a decode. Refused, unchanged, when n > size()
  // (OutOfRange), when a windowed group no longer holds the KV a query at n would read
  // (FailedPrecondition), and when n < state_position() and no checkpoint was taken at exactly n
  // (FailedPrecondition): the recurrent state then goes back to that checkpoint. Checkpoints past n go.
  Status Rollback(size_t n);
  // Rollback for an owner that has already rewound the live recurrent slot in place to the state after n
  // positions (a verified draft's rejected tokens, taken back by the model): the context keeps n positions
  // and state_position() becomes n; no checkpoint is needed. The windows' condition is Rollback's.
  // REQUIRES: n <= size() (else OutOfRange).
  Status RollbackRewound(size_t n);

  // Recurrent state (layouts with recurrent layers; FailedPrecondition otherwise).
  // Positions the live slot has consumed.
  size_t state_position() const;
  // The live slot, private to this context (copied first when shared with a fork or a checkpoint; zero
  // when nothing was consumed yet): [recurrent layer][recurrent_layer_bytes]. Valid until the context is
  // next mutated through another call or closed. REQUIRES: the caller owns the context.
  Result<uint8_t*> MutableState();
  // The live slot read-only, or null for the zero state.
  const uint8_t* StateData() const;
  // Declares that the slot now holds the state after the first n positions. REQUIRES:
  // state_position() <= n <= size() (else OutOfRange).
  Status CommitState(size_t n);
  // Freezes the live slot as a checkpoint at state_position() (shares it; the next write copies). No-op
  // at position 0 or where a checkpoint already exists. Retain donates checkpoints to the prefix tree.
  // A context holds at most kMaxContextCheckpoints: past that, every other one is dropped (the first and
  // the newest stay), so a long prefill's checkpoints stay bounded in memory and still span it.
  Status Checkpoint();
  std::vector<size_t> CheckpointPositions() const;

  // Releases the pages of windowed groups that no query at a position >= size() reads.
  void TrimWindows();

  // A new context holding the same positions, sharing every page.
  Context Fork() const;
  std::vector<Context> Fork(size_t n) const;

  // Releases the pages; the handle becomes empty. Idempotent.
  void Close();

  // The data pointer of each page of attention group `group`, in order (null where released), for
  // kernels that read the cache directly (attention). Valid until this context is next mutated or
  // closed. REQUIRES: the caller owns the context.
  std::vector<const uint8_t*> PageData(uint32_t group = 0) const;
  // Makes every page that positions [from, size()) live in private to this context (copies shared ones),
  // so that writes to them cannot fail later: the forward pass calls it before it computes anything.
  Status PrepareWrite(size_t from);

 private:
  friend class Cache;
  friend class SnapshotCodec;
  friend class internal::PrefixTree;
  explicit Context(internal::ContextState* s) : s_(s) {}
  // Makes *page private to `s`: copies the page if its refcount is above one (a KV page of a group or
  // the recurrent slot). The only function in kv/ that copies a page. REQUIRES: s->mu held exclusively.
  static Status Writable(internal::ContextState* s, internal::Page** page);
  // A page from the cache; when the cache has nothing left to evict, gives up own checkpoints
  // (ReleaseOwnCheckpoint) and tries again. REQUIRES: s->mu held exclusively.
  static Result<internal::Page*> Allocate(internal::ContextState* s, size_t bytes, bool zero,
                                          bool state = false);
  // Releases one checkpoint whose state page only this context holds (a reference from its checkpoint list,
  // and perhaps one from its live slot): the one whose loss costs least, that is the fewest positions since
  // the checkpoint before it (what a resume there would recompute); of equal ones the middle ones first,
  // oldest first, then the first, then the newest, so a prompt's start and its end stay longest. False
  // when there is none. REQUIRES: s->mu held exclusively.
  static bool ReleaseOwnCheckpoint(internal::ContextState* s);
  // Drops positions [n, size()) from every group and checkpoints past n; no checks (the state is the
  // caller's). REQUIRES: s->mu held exclusively.
  static void DropTail(internal::ContextState* s, size_t n);
  // Append; with `caller_overwrites`, the new positions' rows are left for the caller to fill before
  // the context is shared (restore), so only slots past the new end are zeroed.
  Status AppendImpl(std::span<const int32_t> tokens, bool caller_overwrites);
  internal::ContextState* s_ = nullptr;
};

}  // namespace llamay::kv

#endif  // LLAMAY_KV_CONTEXT_H_
