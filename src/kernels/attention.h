// Attention of query positions over a paged KV cache (DESIGN.md section 2: a page holds page_tokens
// positions for every layer, layer-major).
//
// Page layout as this module reads it, for the layer being computed (the caller fills in the geometry
// from its KV layout; kernels/ knows nothing of kv/):
//   page + k_offset + slot * row_bytes   K row of the position at `slot` in the page
//   page + v_offset + slot * row_bytes   V row
// A row is [n_kv_heads][head_dim] elements stored as f32, f16 or Q8_0 blocks of 32 running over the
// whole row. Position j lives in pages[j / page_tokens] at slot j % page_tokens.
//
// Sliding window (AttentionParams::window = w > 0): a query at p sees positions max(0, p - w + 1)..p. The
// kernels never read a page that lies wholly before the first position some query of its sequence sees,
// not even its pointer's target: such entries may be null (kv::Context::TrimWindows releases them). With
// window 0 nothing changes: every query sees 0..p.
//
// For a query at position p (q: [n_head][head_dim]) and head h, with kv head g = h / (n_head / n_kv_heads)
// (grouped-query attention), the visible positions are lo..p with lo = max(0, p - window + 1) when a
// sliding window is set, else 0. Canonical order, shared by the scalar and AVX2 paths (bit-identical):
//   s_j = dot(q_h, K_j[g]) * scale     (the f32 lane order of vec_dot.h; K decoded exactly to f32)
//   w   = softmax(s) over lo..p        (max-subtracted; exp sums in lane (j-lo)%8; w_j = e_j * (1/sum));
//         with sinks, the softmax of s followed by sink_h as one more element, that element's weight unused
//   out_h[d] = sum over j in order of w_j * V_j[g][d]   (multiply, then add)
// so a query's result depends only on the KV values it sees: not on the page size, the other queries in
// the batch, or the thread count.
//
// How the fast path gets there without changing a bit (attention.cc): the queries of a call are cut into
// tiles of up to kAttentionTileQueryHeads / group queries (sorted by position, forked sequences that
// share their first page together); one task is a tile x one kv head (or x several adjacent kv heads when
// there are few tiles, as in decode, so that a task reads one contiguous run of each row). The task walks
// the positions its tile sees in blocks, decodes each K row of a block once for all its queries (once per
// distinct page pointer: sequences whose page arrays hold the same page at the same index read it once),
// computes every visible score, then does the softmax per query and head, then walks the blocks again
// accumulating V rows into each query's output, positions in increasing order. Only the number of times a
// row is decoded changes; each query's own sequence of f32 operations is the canonical one above.
// Thread-safety: pure functions over caller-owned memory; scratch is per thread.
#ifndef LLAMAY_KERNELS_ATTENTION_H_
#define LLAMAY_KERNELS_ATTENTION_H_

#include <cstddef>
#include <cstdint>
#include <span>

#include "base/tensor_type.h"
#include "kernels/cpu.h"
#include "kernels/thread_pool.h"

namespace llamay::kernels {

struct KvPageGeometry {
  int64_t page_tokens = 0;  // positions per page
  size_t row_bytes = 0;     // bytes of one K or V row: [n_kv_heads * head_dim] at the cache precision
  size_t k_offset = 0;      // bytes from a page's start to this layer's K rows [page_tokens][row_bytes]
  size_t v_offset = 0;      // bytes from a page's start to this layer's V rows [page_tokens][row_bytes]
  bool operator==(const KvPageGeometry&) const = default;
};

// The geometry of layer `layer` in the layer-major page of DESIGN.md, [layer][k|v][slot][row]:
// K rows start at layer * 2 * page_tokens * row_bytes, V rows page_tokens rows later.
inline KvPageGeometry LayerMajorGeometry(int64_t page_tokens, size_t row_bytes, int layer) {
  const size_t k = static_cast<size_t>(layer) * 2 * static_cast<size_t>(page_tokens) * row_bytes;
  return {page_tokens, row_bytes, k, k + static_cast<size_t>(page_tokens) * row_bytes};
}

struct AttentionParams {
  int n_head = 0;
  int n_kv_heads = 0;  // divides n_head
  int head_dim = 0;
  float scale = 1.0f;                     // multiplies q.k (usually 1/sqrt(head_dim))
  int64_t window = 0;                     // sliding window in positions; 0 means unlimited
  TensorType kv_type = TensorType::kF32;  // kF32, kF16 or kQ8_0 (then n_kv_heads*head_dim % 32 == 0)
  // Attention sinks (gpt-oss), [n_head] or null: one more logit per head in the softmax, with no value:
  // the weights are softmax(s_lo..s_p, sink_h) of which the last is dropped, so they sum to less than 1.
  const float* sinks = nullptr;
};

// One query at position n_positions - 1, seeing positions [0, n_positions) (fewer with a window).
// q: [n_head][head_dim]; pages: [ceil(n_positions / page_tokens)] (null before the window allowed);
// out: [n_head][head_dim].
// pool may be null.
void AttentionPaged(const float* q, const uint8_t* const* pages, const KvPageGeometry& geo,
                    const AttentionParams& p, int64_t n_positions, float* out, ThreadPool* pool = nullptr,
                    Isa isa = DetectIsa());

// Several queries of one sequence (causal): query i at position positions[i] sees positions up to its
// own. q, out: [n_q][n_head][head_dim]; pages cover max(positions) + 1 positions. Each query's result is
// bit-identical to AttentionPaged for that query alone.
void AttentionPagedBatch(const float* q, const int64_t* positions, int64_t n_q, const uint8_t* const* pages,
                         const KvPageGeometry& geo, const AttentionParams& p, float* out,
                         ThreadPool* pool = nullptr, Isa isa = DetectIsa());

// One sequence of an AttentionPagedMulti call: n_q queries (causal, as in AttentionPagedBatch) over that
// sequence's own page array. q, out: [n_q][n_head][head_dim]; positions: [n_q]; pages cover
// max(positions) + 1 positions. A page pointer that occurs at the same index in several sequences' arrays
// (forks share their prefix pages until they write) is decoded once for all of them.
struct AttentionSeq {
  const float* q = nullptr;
  const int64_t* positions = nullptr;
  int64_t n_q = 0;
  const uint8_t* const* pages = nullptr;
  float* out = nullptr;
};

// The queries of several sequences with one geometry and one set of parameters (a batch step), in one
// parallel loop. Each query's result is bit-identical to AttentionPagedBatch on its sequence alone. The
// output rows of different sequences must not overlap.
void AttentionPagedMulti(std::span<const AttentionSeq> seqs, const KvPageGeometry& geo,
                         const AttentionParams& p, ThreadPool* pool = nullptr, Isa isa = DetectIsa());

// Query heads per tile (queries per tile = this / (n_head / n_kv_heads), at least 1; fewer when the
// tile's scores would pass a few MiB). Tests use it to place queries on either side of a tile boundary.
inline constexpr int kAttentionTileQueryHeads = 64;

// The scalar source of truth (reference/attention_ref.cc): one query, one head at a time, decoding every
// element on its own. Same arguments as AttentionPagedBatch.
void RefAttentionPagedBatch(const float* q, const int64_t* positions, int64_t n_q,
                            const uint8_t* const* pages, const KvPageGeometry& geo, const AttentionParams& p,
                            float* out);

}  // namespace llamay::kernels

#endif  // LLAMAY_KERNELS_ATTENTION_H_
