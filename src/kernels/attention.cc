#include "kernels/attention.h"

#include <algorithm>
#include <vector>

#include "base/check.h"
#include "base/numeric.h"
#include "kernels/attention_avx512.h"
#include "kernels/attention_neon.h"
#include "kernels/ops_avx2.h"
#include "kernels/ops_neon.h"
#include "kernels/reference/reference.h"

namespace llamay::kernels {
namespace {

// A tile's scores stay under this many floats (4 MiB per thread) unless one query alone needs more.
constexpr int64_t kMaxTileScores = int64_t{1} << 20;
// A block of positions decodes into about this many bytes of f32 rows per sequence: small enough to stay
// in L1 while every query of the tile reads them.
constexpr int64_t kBlockBytes = 16 << 10;
// How far ahead of the row being decoded to prefetch, in bytes of the task's slices (rounded up to whole
// rows, at least two). A task's slice is a short run every row_bytes, a pattern the hardware prefetchers
// hardly follow, so the lines in flight are about what this asks for: 4 rows of one 128-byte slice (the
// earlier fixed distance) left decode at long context waiting on memory.
constexpr int64_t kPrefetchBytes = 2048;
constexpr uintptr_t kCacheLine = 64;

// The steps whose implementation differs between the scalar, AVX2, AVX-512 and NEON paths; the loop structure,
// hence the order of every reduction, is shared.
struct Steps {
  // out [n] = elements [start, start + n) of a KV row, decoded exactly.
  void (*decode)(TensorType type, const uint8_t* row, int64_t start, int64_t n, float* out);
  // out[r] = dot(q, k_rows[r]) * scale in RefDotF32's order.
  void (*scores)(const float* q, const float* const* k_rows, int64_t n, int64_t hd, float scale, float* out);
  // Optional (null: scores for each head): scores for two consecutive heads q [2][hd] at once, the second
  // head's to out + out_stride, each bit for bit as `scores` would compute it.
  void (*scores2)(const float* q, const float* const* k_rows, int64_t n, int64_t hd, float scale, float* out,
                  int64_t out_stride);
  void (*softmax)(const float* x, int64_t n, float* y);
  // For r in order: out[d] = out[d] + w[r] * v_rows[r][d].
  void (*accumulate)(const float* w, const float* const* v_rows, int64_t n, int64_t hd, float* out);
};

void DecodeScalar(TensorType type, const uint8_t* row, int64_t start, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t e = start + i;
    switch (type) {
      case TensorType::kF32:
        out[i] = reinterpret_cast<const float*>(row)[e];
        break;
      case TensorType::kF16:
        out[i] = F16ToF32(reinterpret_cast<const uint16_t*>(row)[e]);
        break;
      default: {
        const BlockQ8_0& b = reinterpret_cast<const BlockQ8_0*>(row)[e / kQ8_0BlockSize];
        out[i] = F16ToF32(b.d) * static_cast<float>(b.qs[e % kQ8_0BlockSize]);
      }
    }
  }
}

void ScoresScalar(const float* q, const float* const* k_rows, int64_t n, int64_t hd, float scale,
                  float* out) {
  for (int64_t r = 0; r < n; ++r) out[r] = RefDotF32(q, k_rows[r], hd) * scale;
}

void AccumulateScalar(const float* w, const float* const* v_rows, int64_t n, int64_t hd, float* out) {
  for (int64_t r = 0; r < n; ++r)
    for (int64_t d = 0; d < hd; ++d) out[d] = out[d] + w[r] * v_rows[r][d];
}

Steps SelectSteps(const AttentionParams& p, Isa isa) {
  Steps s{DecodeScalar, ScoresScalar, nullptr, RefSoftmax, AccumulateScalar};
#if defined(__x86_64__)
  if (!UsesAvx2(isa)) return s;
  s.softmax = avx2::Softmax;
  if (p.head_dim % 8 != 0) return s;
  s.scores = avx2::AttnScores;
  s.accumulate = avx2::AttnAccumulate;
  // A head's slice of a Q8_0 row must start and end on a block boundary to decode it block by block.
  const bool slice_decodes = p.kv_type != TensorType::kQ8_0 || p.head_dim % kQ8_0BlockSize == 0;
  if (slice_decodes) s.decode = avx2::DecodeKvSlice;
  if (!UsesAvx512(isa)) return s;
  s.scores2 = avx512::AttnScores2;
  s.accumulate = avx512::AttnAccumulate;
  if (slice_decodes) s.decode = avx512::DecodeKvSlice;
#elif defined(__aarch64__)
  if (UsesNeon(isa)) s.softmax = neon::Softmax;
  if (!UsesNeon(isa) || p.head_dim % 8 != 0) return s;
  s.scores = neon::AttnScores;
  s.accumulate = neon::AttnAccumulate;
  if (p.kv_type != TensorType::kQ8_0 || p.head_dim % kQ8_0BlockSize == 0) s.decode = neon::DecodeKvSlice;
#else
  (void)p;
  (void)isa;
#endif
  return s;
}

void CheckParams(const KvPageGeometry& geo, const AttentionParams& p) {
  LLAMAY_CHECK(p.n_head > 0 && p.n_kv_heads > 0 && p.n_head % p.n_kv_heads == 0)
      << "n_head " << p.n_head << " is not a multiple of n_kv_heads " << p.n_kv_heads;
  LLAMAY_CHECK(p.head_dim > 0 && geo.page_tokens > 0) << "bad attention shape";
  LLAMAY_CHECK(p.window >= 0) << "negative attention window " << p.window;
  LLAMAY_CHECK(p.kv_type == TensorType::kF32 || p.kv_type == TensorType::kF16 ||
               p.kv_type == TensorType::kQ8_0)
      << "unsupported KV type " << TensorTypeName(p.kv_type);
}

// The first position a query at `pos` sees: pos - window + 1 (at least 0) with a window, else 0.
int64_t VisibleFrom(int64_t pos, const AttentionParams& p) {
  return p.window > 0 ? std::max<int64_t>(0, pos - p.window + 1) : 0;
}

// The first position any query of `sq` sees. REQUIRES: sq.n_q > 0.
int64_t FirstVisible(const AttentionSeq& sq, const AttentionParams& p) {
  int64_t lo = VisibleFrom(sq.positions[0], p);
  for (int64_t i = 1; i < sq.n_q; ++i) lo = std::min(lo, VisibleFrom(sq.positions[i], p));
  return lo;
}

// One query of the call.
struct QueryRef {
  const float* q;   // [n_head][head_dim]
  float* out;       // [n_head][head_dim]
  int64_t lo, pos;  // it sees positions lo..pos
  int64_t seq;      // index into the call's sequences
  int64_t share;    // the first sequence whose page 0 is this one's: forked sequences share pages
};

// Queries [begin, end) of the plan: one task per kv head.
struct Tile {
  int64_t begin, end;
  int64_t cost;  // scores to compute (and V rows to accumulate) over all heads: for ordering tasks
};

struct Plan {
  std::vector<QueryRef> queries;  // ordered by (share, pos), then call order
  std::vector<Tile> tiles;        // most expensive first
};

// Orders the queries so that a tile holds neighbouring positions of sequences likely to share pages, and
// cuts them into tiles.
Plan MakePlan(std::span<const AttentionSeq> seqs, const KvPageGeometry& geo, const AttentionParams& p) {
  const int group = p.n_head / p.n_kv_heads;
  const int64_t stride = static_cast<int64_t>(p.n_head) * p.head_dim;
  Plan plan;
  std::vector<const uint8_t*> keys(seqs.size(), nullptr);  // [seq]: its first visible page (null: no queries)
  for (size_t s = 0; s < seqs.size(); ++s) {
    const AttentionSeq& sq = seqs[s];
    if (sq.n_q <= 0) continue;
    LLAMAY_CHECK(sq.pages != nullptr && sq.positions != nullptr && sq.q != nullptr && sq.out != nullptr)
        << "attention sequence " << s << " lacks an array";
    for (int64_t i = 0; i < sq.n_q; ++i) LLAMAY_CHECK(sq.positions[i] >= 0) << "negative query position";
    // Sequences that hold the same first visible page (page 0 without a window) are likely forks sharing
    // their pages: they go to the same tiles. Pages wholly before the window may be null (released) and
    // are never read, not even to compare them.
    const uint8_t* key = sq.pages[FirstVisible(sq, p) / geo.page_tokens];
    int64_t share = static_cast<int64_t>(s);
    for (size_t t = 0; t < s; ++t)
      if (keys[t] == key) {
        share = static_cast<int64_t>(t);
        break;
      }
    keys[s] = key;
    for (int64_t i = 0; i < sq.n_q; ++i) {
      const int64_t pos = sq.positions[i];
      plan.queries.push_back(
          {sq.q + i * stride, sq.out + i * stride, VisibleFrom(pos, p), pos, static_cast<int64_t>(s), share});
    }
  }
  std::stable_sort(plan.queries.begin(), plan.queries.end(), [](const QueryRef& a, const QueryRef& b) {
    return a.share != b.share ? a.share < b.share : a.pos < b.pos;
  });
  const int64_t max_q = std::max(1, kAttentionTileQueryHeads / group);
  const int64_t n = static_cast<int64_t>(plan.queries.size());
  for (int64_t i = 0; i < n;) {
    Tile t{i, i, 0};
    while (t.end < n && plan.queries[t.end].share == plan.queries[i].share && t.end - t.begin < max_q) {
      const QueryRef& q = plan.queries[t.end];
      const int64_t scores = group * (q.pos - q.lo + 1);
      if (t.end > t.begin && t.cost + scores > kMaxTileScores) break;
      t.cost += scores;
      ++t.end;
    }
    plan.tiles.push_back(t);
    i = t.end;
  }
  // Longest first: the thread pool hands tasks out in order, so the causal tail of a prefill (its late
  // queries see the most positions) does not end up alone on one thread.
  std::stable_sort(plan.tiles.begin(), plan.tiles.end(),
                   [](const Tile& a, const Tile& b) { return a.cost > b.cost; });
  return plan;
}

// How many kv heads one task takes (a divisor of n_kv_heads). A task reads its heads' slices of each K and
// V row, one contiguous run; one head alone reads a few cache lines every row_bytes (1 KiB for 8 heads of
// 64 f16 values), a stride the hardware prefetchers hardly follow, which left decode at long context
// waiting on memory. So a task takes as many heads as still leaves two tasks per thread (some slack for a
// thread that starts late), except when tiles read the same pages (the tiles of one prefill): one head per
// task then, run head-major, lets the tiles that run one after the other find that head's slices in L2.
int HeadsPerTask(const Plan& plan, const AttentionParams& p, int threads) {
  const int64_t n_tiles = static_cast<int64_t>(plan.tiles.size());
  std::vector<int64_t> shares;
  for (const Tile& t : plan.tiles) shares.push_back(plan.queries[t.begin].share);
  std::sort(shares.begin(), shares.end());
  if (std::adjacent_find(shares.begin(), shares.end()) != shares.end()) return 1;
  for (int nh = p.n_kv_heads; nh > 1; --nh)
    if (p.n_kv_heads % nh == 0 && n_tiles * (p.n_kv_heads / nh) >= 2 * threads) return nh;
  return 1;
}

// Per-thread working memory of one tile task. Vectors only grow: a thread reuses them across tasks.
struct Scratch {
  // A sequence of the tile: the hull of the positions its queries see.
  struct SeqSpan {
    int64_t seq, lo, hi;
    int64_t source;  // during DecodeBlock: the source it reads the current page segment from, or -1
  };
  // One distinct page of the current segment and the rows decoded from it.
  struct Source {
    const uint8_t* page;
    int64_t lo, hi;      // rows lo..hi (positions) decoded
    const float* first;  // row lo
    int64_t span;        // a span that reads it: rows beyond the page are prefetched from its sequence
  };
  std::vector<SeqSpan> spans;
  std::vector<Source> sources;
  std::vector<int64_t> span_of;   // [query] -> index into spans
  std::vector<int64_t> score_at;  // [query + 1] -> offset of its scores [kv head][group][n_vis]
  std::vector<float> scores;
  std::vector<float> rows;           // decoded rows of the current block [row][kv head][head_dim]
  std::vector<const float*> row_at;  // [kv head][span][block position] -> its decoded slice
};

// Bytes of a row before element e; for Q8_0 rounded down (or up) to a whole block.
size_t BytesBefore(TensorType type, int64_t e, bool round_up) {
  switch (type) {
    case TensorType::kF32:
      return static_cast<size_t>(e) * sizeof(float);
    case TensorType::kF16:
      return static_cast<size_t>(e) * sizeof(uint16_t);
    default:
      return static_cast<size_t>((e + (round_up ? kQ8_0BlockSize - 1 : 0)) / kQ8_0BlockSize) *
             sizeof(BlockQ8_0);
  }
}

template <typename T>
void Grow(std::vector<T>* v, size_t n) {
  if (v->size() < n) v->resize(n);
}

// One tile's queries for kv heads g0..g0+nh-1. See attention.h for the steps; each head's are the same
// as in a task of its own, the heads only share the walk over the rows, whose slices for these heads are
// contiguous: nh heads read nh times the bytes per row in one run.
class TileTask {
 public:
  TileTask(const QueryRef* qs, int64_t n, int g0, int nh, std::span<const AttentionSeq> seqs,
           const KvPageGeometry& geo, const AttentionParams& p, const Steps& steps, Scratch* sc)
      : qs_(qs),
        n_(n),
        g0_(g0),
        nh_(nh),
        seqs_(seqs),
        geo_(geo),
        p_(p),
        steps_(steps),
        sc_(*sc),
        group_(p.n_head / p.n_kv_heads),
        hd_(p.head_dim),
        width_(nh * hd_),
        block_(std::max<int64_t>(8, kBlockBytes / (4 * width_) / 8 * 8)),
        slice_begin_(BytesBefore(p.kv_type, g0 * hd_, false)),
        slice_end_(BytesBefore(p.kv_type, (g0 + nh) * hd_, true)),
        prefetch_rows_(
            std::max<int64_t>(2, (kPrefetchBytes + static_cast<int64_t>(slice_end_ - slice_begin_) - 1) /
                                     static_cast<int64_t>(slice_end_ - slice_begin_))) {}

  void Run() {
    Prepare();
    // 1. Scores: each K row of a block is decoded once for every query and head of the tile.
    ForEachBlock(geo_.k_offset, [&](int64_t i, int k, const float* const* rows, int64_t a, int64_t m) {
      int hh = 0;
      if (steps_.scores2 != nullptr)
        for (; hh + 1 < group_; hh += 2)
          steps_.scores2(Head(qs_[i].q, k, hh), rows, m, hd_, p_.scale, Scores(i, k, hh) + (a - qs_[i].lo),
                         Row(i));
      for (; hh < group_; ++hh)
        steps_.scores(Head(qs_[i].q, k, hh), rows, m, hd_, p_.scale, Scores(i, k, hh) + (a - qs_[i].lo));
    });
    // 2. Softmax per query and head (a head's sink, when there are sinks, as one more score at the end,
    //    whose weight the weighted sum does not read).
    for (int64_t i = 0; i < n_; ++i)
      for (int k = 0; k < nh_; ++k)
        for (int hh = 0; hh < group_; ++hh) {
          float* s = Scores(i, k, hh);
          if (p_.sinks != nullptr) s[NVis(i)] = p_.sinks[(g0_ + k) * group_ + hh];
          steps_.softmax(s, Row(i), s);
        }
    // 3. Weighted sum of V: blocks, and rows inside a block, in increasing position.
    for (int64_t i = 0; i < n_; ++i) std::fill_n(Head(qs_[i].out, 0, 0), nh_ * group_ * hd_, 0.0f);
    ForEachBlock(geo_.v_offset, [&](int64_t i, int k, const float* const* rows, int64_t a, int64_t m) {
      for (int hh = 0; hh < group_; ++hh)
        steps_.accumulate(Scores(i, k, hh) + (a - qs_[i].lo), rows, m, hd_, Head(qs_[i].out, k, hh));
    });
  }

 private:
  // Query head hh of kv head g0_ + k in a row [n_head][head_dim].
  template <typename T>
  T* Head(T* row, int k, int hh) const {
    return row + (static_cast<int64_t>(g0_ + k) * group_ + hh) * hd_;
  }
  int64_t NVis(int64_t i) const { return qs_[i].pos - qs_[i].lo + 1; }
  // A head's scores: the visible positions', then its sink's.
  int64_t Row(int64_t i) const { return NVis(i) + (p_.sinks != nullptr ? 1 : 0); }
  float* Scores(int64_t i, int k, int hh) {
    return sc_.scores.data() + sc_.score_at[i] + (static_cast<int64_t>(k) * group_ + hh) * Row(i);
  }

  // The tile's sequences, the hull of its positions and the scratch sizes.
  void Prepare() {
    sc_.spans.clear();
    Grow(&sc_.span_of, n_);
    Grow(&sc_.score_at, n_ + 1);
    sc_.score_at[0] = 0;
    lo_ = qs_[0].lo;
    hi_ = qs_[0].pos;
    for (int64_t i = 0; i < n_; ++i) {
      const QueryRef& q = qs_[i];
      size_t k = 0;
      while (k < sc_.spans.size() && sc_.spans[k].seq != q.seq) ++k;
      if (k == sc_.spans.size()) sc_.spans.push_back({q.seq, q.lo, q.pos, -1});
      sc_.spans[k].lo = std::min(sc_.spans[k].lo, q.lo);
      sc_.spans[k].hi = std::max(sc_.spans[k].hi, q.pos);
      sc_.span_of[i] = static_cast<int64_t>(k);
      sc_.score_at[i + 1] = sc_.score_at[i] + nh_ * group_ * Row(i);
      lo_ = std::min(lo_, q.lo);
      hi_ = std::max(hi_, q.pos);
    }
    Grow(&sc_.scores, static_cast<size_t>(sc_.score_at[n_]));
    Grow(&sc_.rows, sc_.spans.size() * block_ * width_);
    Grow(&sc_.row_at, nh_ * sc_.spans.size() * block_);
  }

  // Walks the tile's positions in blocks aligned to multiples of block_ (so that sequences agree on them),
  // decoding the block's rows at `offset` (K or V) and then calling fn(query, k, rows, a, m) for each
  // query's visible positions a..a+m-1 in the block and each of the task's kv heads g0_ + k, rows[r] being
  // that head's slice of position a + r.
  template <typename Fn>
  void ForEachBlock(size_t offset, Fn fn) {
    // DecodeBlock prefetches prefetch_rows_ ahead of the row it decodes, across blocks and pages; the first
    // rows of each sequence are asked for here.
    for (const Scratch::SeqSpan& sp : sc_.spans)
      for (int64_t j = sp.lo; j <= std::min(sp.hi, sp.lo + prefetch_rows_ - 1); ++j)
        Prefetch(sp.seq, offset, j);
    for (int64_t b0 = lo_, b1; b0 <= hi_; b0 = b1) {
      b1 = std::min((b0 / block_ + 1) * block_, hi_ + 1);
      DecodeBlock(offset, b0, b1);
      for (int64_t i = 0; i < n_; ++i) {
        const int64_t a = std::max(qs_[i].lo, b0), e = std::min(qs_[i].pos, b1 - 1);
        if (a > e) continue;
        const int64_t n_spans = static_cast<int64_t>(sc_.spans.size());
        for (int k = 0; k < nh_; ++k)
          fn(i, k, sc_.row_at.data() + (k * n_spans + sc_.span_of[i]) * block_ + (a - b0), a, e - a + 1);
      }
    }
  }

  // Decodes the task's kv heads' slice of the rows in [b0, b1) that the tile's sequences need, page by page;
  // a page that several sequences hold at the same index is decoded once for all of them.
  void DecodeBlock(size_t offset, int64_t b0, int64_t b1) {
    const int64_t pt = geo_.page_tokens;
    float* next = sc_.rows.data();
    for (int64_t pi = b0 / pt; pi * pt < b1; ++pi) {
      const int64_t s0 = std::max(b0, pi * pt), s1 = std::min(b1, (pi + 1) * pt) - 1;
      sc_.sources.clear();
      for (Scratch::SeqSpan& sp : sc_.spans) {
        const int64_t a = std::max(s0, sp.lo), e = std::min(s1, sp.hi);
        sp.source = -1;
        if (a > e) continue;  // also keeps pages[pi] within the sequence's array
        const uint8_t* page = seqs_[sp.seq].pages[pi];
        size_t k = 0;
        while (k < sc_.sources.size() && sc_.sources[k].page != page) ++k;
        if (k == sc_.sources.size())
          sc_.sources.push_back({page, a, e, nullptr, static_cast<int64_t>(&sp - sc_.spans.data())});
        sc_.sources[k].lo = std::min(sc_.sources[k].lo, a);
        sc_.sources[k].hi = std::max(sc_.sources[k].hi, e);
        sp.source = static_cast<int64_t>(k);
      }
      // A block decodes at most block_ rows per sequence, the size of sc_.rows per span.
      for (Scratch::Source& src : sc_.sources) {
        src.first = next;
        const Scratch::SeqSpan& sp = sc_.spans[src.span];
        const uint8_t* const* pages = seqs_[sp.seq].pages;
        // The row prefetch_rows_ ahead, in the same sequence, followed slot by slot: a division per row
        // costs about as much as the decode.
        int64_t ahead = src.lo + prefetch_rows_, ahead_page = ahead / pt, ahead_slot = ahead % pt;
        const uint8_t* ahead_row =
            ahead <= sp.hi ? pages[ahead_page] + offset + ahead_slot * geo_.row_bytes : nullptr;
        const uint8_t* row = src.page + offset + (src.lo - pi * pt) * geo_.row_bytes;
        for (int64_t j = src.lo; j <= src.hi; ++j, next += width_, row += geo_.row_bytes) {
          if (ahead <= sp.hi) {
            PrefetchSlice(ahead_row);
            ++ahead;
            ahead_row += geo_.row_bytes;
            if (++ahead_slot == pt) {
              ahead_slot = 0;
              ++ahead_page;
              if (ahead <= sp.hi) ahead_row = pages[ahead_page] + offset;
            }
          }
          steps_.decode(p_.kv_type, row, g0_ * hd_, width_, next);
        }
      }
      const size_t n_spans = sc_.spans.size();
      for (size_t s = 0; s < n_spans; ++s) {
        const Scratch::SeqSpan& sp = sc_.spans[s];
        if (sp.source < 0) continue;
        const Scratch::Source& src = sc_.sources[sp.source];
        const int64_t a = std::max(s0, sp.lo), e = std::min(s1, sp.hi);
        for (int k = 0; k < nh_; ++k) {
          const float** at = sc_.row_at.data() + (k * n_spans + s) * block_;
          for (int64_t j = a; j <= e; ++j) at[j - b0] = src.first + (j - src.lo) * width_ + k * hd_;
        }
      }
    }
  }

  // Asks for the task's kv heads' slice of the row at `offset` of position j of sequence `seq`. REQUIRES: j
  // lies within the positions some query of the sequence sees (its page is in the array and not released).
  void Prefetch(int64_t seq, size_t offset, int64_t j) const {
    const int64_t pt = geo_.page_tokens;
    PrefetchSlice(seqs_[seq].pages[j / pt] + offset + (j % pt) * geo_.row_bytes);
  }
  // Asks for the cache lines of the task's kv heads' slice of `row`.
  void PrefetchSlice(const uint8_t* row) const {
    const uintptr_t first = reinterpret_cast<uintptr_t>(row + slice_begin_) & ~uintptr_t{kCacheLine - 1};
    for (uintptr_t line = first; line < reinterpret_cast<uintptr_t>(row + slice_end_); line += kCacheLine)
      __builtin_prefetch(reinterpret_cast<const void*>(line));
  }

  const QueryRef* qs_;
  int64_t n_;
  const int g0_, nh_;  // kv heads g0_..g0_ + nh_ - 1
  std::span<const AttentionSeq> seqs_;
  const KvPageGeometry& geo_;
  const AttentionParams& p_;
  const Steps& steps_;
  Scratch& sc_;
  const int group_;
  const int64_t hd_;
  const int64_t width_;                   // floats of a decoded row: nh_ * hd_
  const int64_t block_;                   // positions per block, a multiple of 8
  const size_t slice_begin_, slice_end_;  // bytes of the kv heads' slice within a row
  const int64_t prefetch_rows_;           // how many rows ahead of the one decoded DecodeBlock prefetches
  int64_t lo_ = 0, hi_ = 0;               // the hull of the positions the tile sees
};

}  // namespace

void AttentionPagedMulti(std::span<const AttentionSeq> seqs, const KvPageGeometry& geo,
                         const AttentionParams& p, ThreadPool* pool, Isa isa) {
  CheckParams(geo, p);
  const Steps steps = SelectSteps(p, isa);
  const Plan plan = MakePlan(seqs, geo, p);
  const int64_t n_tiles = static_cast<int64_t>(plan.tiles.size());
  const int nh = HeadsPerTask(plan, p, pool == nullptr ? 1 : pool->num_threads());
  auto task = [&](int64_t t, int) {
    thread_local Scratch scratch;
    // Head-major: the tiles running one after the other read the same kv head's slices, which stay in L2.
    const Tile& tile = plan.tiles[t % n_tiles];
    TileTask(plan.queries.data() + tile.begin, tile.end - tile.begin, static_cast<int>(t / n_tiles) * nh, nh,
             seqs, geo, p, steps, &scratch)
        .Run();
  };
  const int64_t n_tasks = n_tiles * (p.n_kv_heads / nh);
  // Multiply-adds of the scores and the weighted sums: each query reads the positions up to its own.
  int64_t work = 0;
  for (const AttentionSeq& s : seqs)
    for (int64_t i = 0; i < s.n_q; ++i) work += 2 * (s.positions[i] + 1) * p.head_dim * p.n_head;
  if (pool != nullptr && work >= kMinParallelWork) {
    pool->ParallelFor(n_tasks, task);
  } else {
    for (int64_t t = 0; t < n_tasks; ++t) task(t, 0);
  }
}

void AttentionPagedBatch(const float* q, const int64_t* positions, int64_t n_q, const uint8_t* const* pages,
                         const KvPageGeometry& geo, const AttentionParams& p, float* out, ThreadPool* pool,
                         Isa isa) {
  const AttentionSeq seq{q, positions, n_q, pages, out};
  AttentionPagedMulti(std::span<const AttentionSeq>(&seq, 1), geo, p, pool, isa);
}

void AttentionPaged(const float* q, const uint8_t* const* pages, const KvPageGeometry& geo,
                    const AttentionParams& p, int64_t n_positions, float* out, ThreadPool* pool, Isa isa) {
  LLAMAY_CHECK(n_positions >= 1) << "attention over no positions";
  const int64_t pos = n_positions - 1;
  AttentionPagedBatch(q, &pos, 1, pages, geo, p, out, pool, isa);
}

}  // namespace llamay::kernels
