// Kernel benchmarks: the matmul at the shapes of a 1B-class llama (vocab 32000, dim 1024, ffn 2816).
//   one token   (decode)  bytes_per_second = weight bytes read per second (the decode limit is bandwidth)
//   8 tokens    (a decode step of 8 streams: the weights are read once for all of them)
//   512 tokens  (prefill) FLOP/s = 2 * n_out * n_in * tokens per second (matrix-matrix work)
// Arguments: weight type, n_out, n_in, tokens, threads, isa (1 AVX2, 2 AVX-512 VNNI; a level the CPU lacks
// is skipped). Example:
//   kernels_bench --benchmark_filter='MatMul/q8_0/n_out:2816/n_in:1024/tokens:8/threads:2'
#include <benchmark/benchmark.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "base/numeric.h"
#include "kernels/attention.h"
#include "kernels/cpu.h"
#include "kernels/delta_rule.h"
#include "kernels/dequant.h"
#include "kernels/matmul.h"
#include "kernels/ops_avx2.h"
#include "kernels/recurrent.h"
#include "kernels/ssm_scan.h"
#include "kernels/thread_pool.h"

namespace llamay::kernels {
namespace {

ThreadPool* Pool(int threads) {
  static std::map<int, std::unique_ptr<ThreadPool>> pools;
  auto& p = pools[threads];
  if (!p) p = std::make_unique<ThreadPool>(threads);
  return p.get();
}

// Random quant bytes with every block scale set to a small finite f16 (speed does not depend on values,
// but NaN or infinite scales would be unrepresentative).
std::vector<uint8_t> Weights(TensorType t, int64_t n_out, int64_t n_in) {
  const size_t bytes = TypeRowBytes(t, n_in) * n_out;
  std::vector<uint8_t> w(bytes);
  std::mt19937 rng(1);
  if (t == TensorType::kF16) {
    std::normal_distribution<float> d(0.0f, 0.05f);
    auto* h = reinterpret_cast<uint16_t*>(w.data());
    for (size_t i = 0; i < bytes / 2; ++i) h[i] = F32ToF16(d(rng));
    return w;
  }
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  const size_t block = GetTensorTypeInfo(static_cast<uint32_t>(t))->type_size;
  const uint16_t scale = F32ToF16(0.01f);
  for (size_t off = 0; off < bytes; off += block) {
    // Q6_K and Q3_K keep their scale at the end of the block, Q2_K its d and dmin; the others start with it
    // (Q4_K, Q5_K: d, then dmin).
    const bool at_end = t == TensorType::kQ6_K || t == TensorType::kQ3_K || t == TensorType::kQ2_K;
    const bool two = t == TensorType::kQ4_K || t == TensorType::kQ5_K || t == TensorType::kQ2_K;
    const size_t at = at_end ? block - (two ? 4 : 2) : 0;
    std::memcpy(w.data() + off + at, &scale, 2);
    if (two) std::memcpy(w.data() + off + at + 2, &scale, 2);
  }
  return w;
}

// Skips (and says so) a benchmark of an instruction-set level this CPU lacks.
bool SkipUnsupported(benchmark::State& state, Isa isa) {
  if (IsaCovers(SupportedIsa(), isa)) return false;
  state.SkipWithError("this CPU lacks the instruction set");
  return true;
}

void BM_MatMul(benchmark::State& state, TensorType t) {
  const int64_t n_out = state.range(0), n_in = state.range(1), tokens = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  const Isa isa = static_cast<Isa>(state.range(4));
  if (SkipUnsupported(state, isa)) return;
  const auto w = Weights(t, n_out, n_in);
  std::vector<float> x(tokens * n_in), y(tokens * n_out);
  std::mt19937 rng(2);
  std::normal_distribution<float> d;
  for (auto& v : x) v = d(rng);
  PreparedActivations act;
  const WeightMatrix m{t, w.data(), n_out, n_in, 0};
  ThreadPool* pool = Pool(threads);
  for (auto _ : state) {
    MatMul(pool, m, x.data(), tokens, y.data(), &act, isa);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(w.size()));
  state.counters["FLOP/s"] =
      benchmark::Counter(2.0 * n_out * n_in * tokens, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(TensorTypeName(t)) + (tokens == 1 ? " decode " : " batch ") +
                 std::string(IsaName(isa)));
}

// A decode step as the model runs it: one pass over 512 MiB of weights (more than the last-level cache, so
// they stream from memory as a real model's do), as 1024 x 2816 matrices, for 1 or 8 tokens.
// bytes_per_second is the weight read rate; compare it with the machine's memory bandwidth.
// Arguments: tokens, isa, weight type (0 Q8_0, 1 Q4_0, 2 Q4_K, 3 Q6_K, 4 F16, 5 Q3_K, 6 Q2_K, 7 IQ4_XS,
// 8 MXFP4, 9 IQ4_NL),
// threads.
void BM_DecodeStream(benchmark::State& state) {
  const int64_t tokens = state.range(0), n_out = 1024, n_in = 2816;
  const Isa isa = static_cast<Isa>(state.range(1));
  if (SkipUnsupported(state, isa)) return;
  const TensorType types[] = {TensorType::kQ8_0, TensorType::kQ4_0, TensorType::kQ4_K, TensorType::kQ6_K,
                              TensorType::kF16,  TensorType::kQ3_K, TensorType::kQ2_K, TensorType::kIQ4_XS,
                              TensorType::kMXFP4, TensorType::kIQ4_NL};
  const TensorType t = types[state.range(2)];
  const int threads = static_cast<int>(state.range(3));
  const size_t per = TypeRowBytes(t, n_in) * n_out;
  const size_t n_mats = (size_t{512} << 20) / per;
  static std::map<TensorType, std::vector<uint8_t>> all;
  std::vector<uint8_t>& w = all[t];
  if (w.empty()) {
    const auto one = Weights(t, n_out, n_in);
    for (size_t i = 0; i < n_mats; ++i) w.insert(w.end(), one.begin(), one.end());
  }
  std::vector<float> x(tokens * n_in), y(tokens * n_out);
  std::mt19937 rng(3);
  std::normal_distribution<float> d;
  for (auto& v : x) v = d(rng);
  PreparedActivations act;
  act.Prepare(Pool(threads), ActivationFormat(t), x.data(), tokens, n_in);
  for (auto _ : state) {
    for (size_t i = 0; i < n_mats; ++i)
      MatMul(Pool(threads), {t, w.data() + i * per, n_out, n_in, 0}, act, y.data(), isa);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n_mats * per));
  state.SetLabel(std::string(TensorTypeName(t)) + " " + std::string(IsaName(isa)) + ", " +
                 std::to_string(threads) + " threads");
}
BENCHMARK(BM_DecodeStream)
    ->ArgsProduct({{1, 8}, {1, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {2, 1}})
    ->ArgNames({"tokens", "isa", "type", "threads"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// One-token products streamed at a model's shapes, as MatMulBatch calls of `batch` products of n_out x n_in
// each, the weights in 512 MiB of copies as in BM_DecodeStream. The shapes: qwen3moe's q (4096 x 2048) and
// o (2048 x 4096), its 8 chosen experts' gate and up (16 products of 768 x 2048) and down (8 of 2048 x 768),
// and a 32000-row output head (BM_DecodeStream has the 1B llama's 1024 x 2816). type is the GGUF type id (8
// Q8_0, 2 Q4_0, 3 Q4_1, 6 Q5_0, 7 Q5_1, 12 Q4_K, 13 Q5_K, 14 Q6_K, 20 IQ4_NL, 39 MXFP4). Example:
//   kernels_bench --benchmark_filter='DecodeShape/.*/type:(8|12)/' --benchmark_repetitions=3
//     --benchmark_report_aggregates_only=true
void BM_DecodeShape(benchmark::State& state) {
  const int64_t n_out = state.range(0), n_in = state.range(1), batch = state.range(2);
  const TensorType t = static_cast<TensorType>(state.range(3));
  const int threads = static_cast<int>(state.range(4));
  const size_t per = TypeRowBytes(t, n_in) * n_out;
  const size_t n_mats = std::max<size_t>(1, (size_t{512} << 20) / per / batch) * batch;
  std::vector<uint8_t> w;
  const auto one = Weights(t, n_out, n_in);
  for (size_t i = 0; i < n_mats; ++i) w.insert(w.end(), one.begin(), one.end());
  std::vector<float> x(n_in), y(n_out * batch);
  std::mt19937 rng(3);
  std::normal_distribution<float> d;
  for (auto& v : x) v = d(rng);
  PreparedActivations act;
  act.Prepare(nullptr, ActivationFormat(t), x.data(), 1, n_in);
  std::vector<Product> products(batch);
  for (auto _ : state) {
    for (size_t i = 0; i < n_mats; i += batch) {
      for (int64_t j = 0; j < batch; ++j)
        products[j] = {{t, w.data() + (i + j) * per, n_out, n_in, 0}, &act, y.data() + j * n_out};
      MatMulBatch(Pool(threads), products);
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n_mats * per));
  state.SetLabel(std::string(TensorTypeName(t)) + ", " + std::to_string(threads) + " threads");
}
void DecodeShapes(benchmark::internal::Benchmark* b) {
  const int64_t shapes[][3] = {
      {4096, 2048, 1}, {2048, 4096, 1}, {768, 2048, 16}, {2048, 768, 8}, {32000, 2048, 1}};
  const TensorType types[] = {TensorType::kQ8_0,   TensorType::kQ4_0,  TensorType::kQ4_1, TensorType::kQ5_0,
                              TensorType::kQ5_1,   TensorType::kQ4_K,  TensorType::kQ5_K, TensorType::kQ6_K,
                              TensorType::kIQ4_NL, TensorType::kMXFP4, TensorType::kF16,  TensorType::kF32,
                              TensorType::kIQ4_XS};
  for (const auto& shape : shapes)
    for (TensorType t : types)
      for (int threads : {2, 1}) b->Args({shape[0], shape[1], shape[2], static_cast<int64_t>(t), threads});
  b->ArgNames({"n_out", "n_in", "batch", "type", "threads"})->Unit(benchmark::kMillisecond)->UseRealTime();
}
BENCHMARK(BM_DecodeShape)->Apply(DecodeShapes);

void Shapes(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2})
    for (int64_t tokens : {1, 8, 512})
      for (auto [n_out, n_in] : {std::pair<int64_t, int64_t>{32000, 1024}, {2816, 1024}, {1024, 2816}})
        for (int isa : {1, 2}) b->Args({n_out, n_in, tokens, threads, isa});
  b->ArgNames({"n_out", "n_in", "tokens", "threads", "isa"})->Unit(benchmark::kMillisecond)->UseRealTime();
}

// The super-block types also at a 2048 x 2048 projection (Llama 3.2 1B's attention) for 1, 8, 64 and 512
// tokens on one thread, AVX2 beside AVX-512. Example:
//   kernels_bench --benchmark_filter='MatMul/(q3_K|q2_K|iq4_xs)/n_out:2048/' --benchmark_repetitions=5
//     --benchmark_report_aggregates_only=true
void SuperBlockShapes(benchmark::internal::Benchmark* b) {
  for (int64_t tokens : {1, 8, 64, 512})
    for (int isa : {1, 2}) b->Args({2048, 2048, tokens, 1, isa});
  b->ArgNames({"n_out", "n_in", "tokens", "threads", "isa"})->Unit(benchmark::kMillisecond)->UseRealTime();
}

BENCHMARK_CAPTURE(BM_MatMul, f16, TensorType::kF16)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatMul, q8_0, TensorType::kQ8_0)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatMul, q4_0, TensorType::kQ4_0)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatMul, q4_K, TensorType::kQ4_K)->Apply(Shapes)->Apply(SuperBlockShapes);
BENCHMARK_CAPTURE(BM_MatMul, q5_K, TensorType::kQ5_K)->Apply(Shapes)->Apply(SuperBlockShapes);
BENCHMARK_CAPTURE(BM_MatMul, q6_K, TensorType::kQ6_K)->Apply(Shapes)->Apply(SuperBlockShapes);
BENCHMARK_CAPTURE(BM_MatMul, q3_K, TensorType::kQ3_K)->Apply(Shapes)->Apply(SuperBlockShapes);
BENCHMARK_CAPTURE(BM_MatMul, q2_K, TensorType::kQ2_K)->Apply(Shapes)->Apply(SuperBlockShapes);
BENCHMARK_CAPTURE(BM_MatMul, iq4_xs, TensorType::kIQ4_XS)->Apply(Shapes)->Apply(SuperBlockShapes);
BENCHMARK_CAPTURE(BM_MatMul, iq4_nl, TensorType::kIQ4_NL)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatMul, mxfp4, TensorType::kMXFP4)->Apply(Shapes);

// Paged attention at the peer model's shape (16 heads, 8 kv heads, head_dim 64, 64-token pages, 2 threads).
//   Prefill:    512 queries after `depth` positions of context (one sequence, causal).
//   DecodeStep: 8 forked streams, each one query, sharing a `prefix`-position prefix plus 1..8 private
//               positions each: one AttentionPagedMulti call, or 8 AttentionPagedBatch calls.
// impl 0 is the kernel as it was before query blocking (every query decodes every row it sees for itself),
// kept here as LegacyAttentionPagedBatch to measure against in the same run. Example:
//   kernels_bench --benchmark_filter='Attention' --benchmark_repetitions=5 --benchmark_report_aggregates_only
constexpr int kAttnHeads = 16, kAttnKvHeads = 8, kAttnHeadDim = 64;
constexpr int64_t kAttnPageTokens = 64;

#if defined(__x86_64__)
// The pre-blocking AVX2 kernel (AttendGroup of attention.cc before it processed tiles of queries).
void LegacyAttendGroup(const float* q_i, int64_t pos, int g, const uint8_t* const* pages,
                       const KvPageGeometry& geo, const AttentionParams& p, float* out_i) {
  const int group = p.n_head / p.n_kv_heads;
  const int64_t hd = p.head_dim, n_vis = pos + 1;
  thread_local std::vector<float> scratch;
  scratch.resize(static_cast<size_t>(group * n_vis + hd));
  float* scores = scratch.data();
  float* kv = scores + group * n_vis;
  for (int64_t j = 0; j <= pos; ++j) {
    const uint8_t* page = pages[j / geo.page_tokens];
    avx2::DecodeKvSlice(p.kv_type, page + geo.k_offset + (j % geo.page_tokens) * geo.row_bytes, g * hd, hd,
                        kv);
    for (int hh = 0; hh < group; ++hh)
      scores[hh * n_vis + j] = avx2::DotF32(q_i + (g * group + hh) * hd, kv, hd) * p.scale;
  }
  for (int hh = 0; hh < group; ++hh) avx2::Softmax(scores + hh * n_vis, n_vis, scores + hh * n_vis);
  for (int hh = 0; hh < group; ++hh) std::fill_n(out_i + (g * group + hh) * hd, hd, 0.0f);
  for (int64_t j = 0; j <= pos; ++j) {
    const uint8_t* page = pages[j / geo.page_tokens];
    avx2::DecodeKvSlice(p.kv_type, page + geo.v_offset + (j % geo.page_tokens) * geo.row_bytes, g * hd, hd,
                        kv);
    for (int hh = 0; hh < group; ++hh)
      avx2::Axpy(scores[hh * n_vis + j], kv, hd, out_i + (g * group + hh) * hd);
  }
}

void LegacyAttentionPagedBatch(const float* q, const int64_t* positions, int64_t n_q,
                               const uint8_t* const* pages, const KvPageGeometry& geo,
                               const AttentionParams& p, float* out, ThreadPool* pool) {
  const int64_t stride = static_cast<int64_t>(p.n_head) * p.head_dim;
  pool->ParallelFor(n_q * p.n_kv_heads, [&](int64_t t, int) {
    const int64_t i = t / p.n_kv_heads;
    LegacyAttendGroup(q + i * stride, positions[i], static_cast<int>(t % p.n_kv_heads), pages, geo, p,
                      out + i * stride);
  });
}
#endif

// Pages of one layer's K/V rows filled with random values of the cache precision.
struct AttnPages {
  std::vector<std::vector<uint8_t>> memory;  // one buffer per page
  KvPageGeometry geo;
  const uint8_t* Add(std::mt19937& rng, TensorType t) {
    const int64_t kv_dim = kAttnKvHeads * kAttnHeadDim;
    geo = LayerMajorGeometry(kAttnPageTokens, TypeRowBytes(t, kv_dim), 0);
    std::vector<uint8_t> page(2 * kAttnPageTokens * geo.row_bytes);
    std::normal_distribution<float> d;
    std::vector<float> x(kv_dim);
    for (int64_t r = 0; r < 2 * kAttnPageTokens; ++r) {
      for (auto& v : x) v = d(rng);
      QuantizeRow(t, x.data(), page.data() + r * geo.row_bytes, kv_dim);
    }
    memory.push_back(std::move(page));
    return memory.back().data();
  }
};

AttentionParams PeerAttention(TensorType t) { return {kAttnHeads, kAttnKvHeads, kAttnHeadDim, 0.125f, 0, t}; }

std::vector<float> RandomQueries(std::mt19937& rng, int64_t n) {
  std::normal_distribution<float> d;
  std::vector<float> q(n * kAttnHeads * kAttnHeadDim);
  for (auto& v : q) v = d(rng);
  return q;
}

void BM_AttentionPrefill(benchmark::State& state, TensorType t) {
  const int64_t depth = state.range(0), n_q = 512;
  const int impl = static_cast<int>(state.range(1));
  std::mt19937 rng(4);
  AttnPages pp;
  std::vector<const uint8_t*> pages;
  for (int64_t j = 0; j < depth + n_q; j += kAttnPageTokens) pages.push_back(pp.Add(rng, t));
  std::vector<int64_t> positions(n_q);
  for (int64_t i = 0; i < n_q; ++i) positions[i] = depth + i;
  const auto q = RandomQueries(rng, n_q);
  std::vector<float> out(q.size());
  const AttentionParams p = PeerAttention(t);
  ThreadPool* pool = Pool(2);
  for (auto _ : state) {
#if defined(__x86_64__)
    if (impl == 0)
      LegacyAttentionPagedBatch(q.data(), positions.data(), n_q, pages.data(), pp.geo, p, out.data(), pool);
#endif
    if (impl == 1)
      AttentionPagedBatch(q.data(), positions.data(), n_q, pages.data(), pp.geo, p, out.data(), pool);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(std::string(TensorTypeName(t)) + (impl == 0 ? " before" : " blocked"));
}

void BM_AttentionDecodeStep(benchmark::State& state, TensorType t) {
  const int64_t prefix = state.range(0), n_seqs = 8;
  const int impl = static_cast<int>(state.range(1));
  std::mt19937 rng(5);
  AttnPages pp;
  std::vector<const uint8_t*> shared;
  for (int64_t j = 0; j < prefix; j += kAttnPageTokens) shared.push_back(pp.Add(rng, t));
  std::vector<std::vector<const uint8_t*>> pages(n_seqs, shared);
  std::vector<int64_t> positions(n_seqs);
  for (int64_t s = 0; s < n_seqs; ++s) {
    positions[s] = prefix + s;  // 1..8 private positions; prefix is a multiple of the page size
    pages[s].push_back(pp.Add(rng, t));
  }
  const auto q = RandomQueries(rng, n_seqs);
  std::vector<float> out(q.size());
  const int64_t stride = kAttnHeads * kAttnHeadDim;
  std::vector<AttentionSeq> seqs;
  for (int64_t s = 0; s < n_seqs; ++s)
    seqs.push_back({&q[s * stride], &positions[s], 1, pages[s].data(), &out[s * stride]});
  const AttentionParams p = PeerAttention(t);
  ThreadPool* pool = Pool(2);
  for (auto _ : state) {
    if (impl == 2) {
      AttentionPagedMulti(seqs, pp.geo, p, pool);
    } else {
      for (const AttentionSeq& s : seqs) {
#if defined(__x86_64__)
        if (impl == 0) LegacyAttentionPagedBatch(s.q, s.positions, 1, s.pages, pp.geo, p, s.out, pool);
#endif
        if (impl == 1) AttentionPagedBatch(s.q, s.positions, 1, s.pages, pp.geo, p, s.out, pool);
      }
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(std::string(TensorTypeName(t)) + (impl == 0   ? " before, 8 calls"
                                                   : impl == 1 ? " blocked, 8 calls"
                                                               : " multi, 1 call"));
}

// One decode step of one sequence at depth `depth` over every layer of the peer model (8 layers, pages
// layer-major as kv/ lays them out), so that the cache (64 MiB of f16 at depth 4096) does not fit in L2 as
// it does not in the engine. isa 1 is AVX2, 2 the best level the CPU has. Example:
//   kernels_bench --benchmark_filter='AttentionDecodeLong'
void BM_AttentionDecodeLong(benchmark::State& state, TensorType t) {
  constexpr int kLayers = 8;
  const int64_t depth = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  const Isa isa = state.range(2) == 1 ? Isa::kAvx2 : DetectIsa();
  if (SkipUnsupported(state, isa)) return;
  std::mt19937 rng(6);
  const int64_t kv_dim = kAttnKvHeads * kAttnHeadDim, n_pos = depth + 1;
  const size_t row_bytes = TypeRowBytes(t, kv_dim);
  const size_t page_bytes = kLayers * 2 * kAttnPageTokens * row_bytes;
  std::vector<std::vector<uint8_t>> memory;
  std::vector<const uint8_t*> pages;
  std::normal_distribution<float> d;
  std::vector<float> x(kv_dim);
  for (int64_t j = 0; j < n_pos; j += kAttnPageTokens) {
    memory.emplace_back(page_bytes);
    for (size_t r = 0; r < page_bytes / row_bytes; ++r) {
      for (auto& v : x) v = d(rng);
      QuantizeRow(t, x.data(), memory.back().data() + r * row_bytes, kv_dim);
    }
    pages.push_back(memory.back().data());
  }
  const auto q = RandomQueries(rng, kLayers);
  std::vector<float> out(q.size());
  const int64_t stride = kAttnHeads * kAttnHeadDim;
  const AttentionParams p = PeerAttention(t);
  ThreadPool* pool = Pool(threads);
  for (auto _ : state) {
    for (int l = 0; l < kLayers; ++l)
      AttentionPaged(&q[l * stride], pages.data(), LayerMajorGeometry(kAttnPageTokens, row_bytes, l), p,
                     n_pos, &out[l * stride], pool, isa);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations());  // decode steps
  state.SetLabel(std::string(TensorTypeName(t)) + " " + std::string(IsaName(isa)));
}

BENCHMARK_CAPTURE(BM_AttentionPrefill, f16, TensorType::kF16)
    ->ArgsProduct({{0, 2048, 4096}, {0, 1}})
    ->ArgNames({"depth", "impl"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_AttentionPrefill, q8_0, TensorType::kQ8_0)
    ->ArgsProduct({{0, 2048, 4096}, {0, 1}})
    ->ArgNames({"depth", "impl"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_AttentionDecodeStep, f16, TensorType::kF16)
    ->ArgsProduct({{512, 2048}, {0, 1, 2}})
    ->ArgNames({"prefix", "impl"})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_AttentionDecodeStep, q8_0, TensorType::kQ8_0)
    ->ArgsProduct({{512, 2048}, {0, 1, 2}})
    ->ArgNames({"prefix", "impl"})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

BENCHMARK_CAPTURE(BM_AttentionDecodeLong, f16, TensorType::kF16)
    ->ArgsProduct({{128, 4096}, {1, 2}, {1, 2}})
    ->ArgNames({"depth", "threads", "isa"})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_AttentionDecodeLong, q8_0, TensorType::kQ8_0)
    ->ArgsProduct({{4096}, {2}, {1, 2}})
    ->ArgNames({"depth", "threads", "isa"})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// Recurrent kernels (recurrent.h) at the shapes of the tiny hybrid models (d_inner 512: 8 heads x 64,
// d_state 64, 1 group) and a bigger one (Mamba-2: d_inner 2048, 32 heads x 64, d_state 128; gated delta
// net: 16 key and 32 value heads of 128, as Qwen3.5). tokens 1 is a decode step, 512 a prefill chunk.
// isa 0 is the scalar reference, 1 AVX2. items_per_second counts tokens. Example:
//   kernels_bench --benchmark_filter='SsmScan|GatedDeltaRule|CausalConv1d'
std::vector<float> Normals(size_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

void BM_SsmScan(benchmark::State& state) {
  const int H = static_cast<int>(state.range(0)), P = 64, N = static_cast<int>(state.range(1)), G = 1;
  const int64_t T = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  const Isa isa = static_cast<Isa>(state.range(4));
  if (SkipUnsupported(state, isa)) return;
  auto st = Normals(int64_t{H} * P * N, 1.0f, 1);  // a folded state, nothing pending
  st.resize(static_cast<size_t>(SsmScanStateFloats(H, P, N, G)), 0.0f);
  const auto x = Normals(T * H * P, 1.0f, 2), dt = Normals(T * H, 1.0f, 3), bias = Normals(H, 0.5f, 4);
  const auto b = Normals(T * G * N, 1.0f, 5), c = Normals(T * G * N, 1.0f, 6), d = Normals(H, 1.0f, 7);
  std::vector<float> a(H, -0.5f), y(T * H * P);
  SsmScanArgs args;
  args.n_tokens = T, args.n_heads = H, args.head_dim = P, args.d_state = N, args.n_groups = G;
  args.state = st.data(), args.x = x.data(), args.dt = dt.data(), args.dt_bias = bias.data();
  args.a = a.data(), args.b = b.data(), args.c = c.data(), args.d = d.data(), args.y = y.data();
  ThreadPool* pool = Pool(threads);
  for (auto _ : state) {
    SsmScan(args, pool, isa);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetItemsProcessed(state.iterations() * T);
  state.SetLabel(std::string(IsaName(isa)));
}
BENCHMARK(BM_SsmScan)
    ->ArgsProduct({{8}, {64}, {1, 512}, {1, 2}, {0, 1, 2}})
    ->ArgsProduct({{32}, {128}, {1, 512}, {1, 2}, {0, 1, 2}})
    ->ArgNames({"heads", "d_state", "tokens", "threads", "isa"})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

void BM_GatedDeltaRule(benchmark::State& state) {
  const int Hk = static_cast<int>(state.range(0)), Hv = static_cast<int>(state.range(1));
  const int D = static_cast<int>(state.range(2));
  const int64_t T = state.range(3);
  const int threads = static_cast<int>(state.range(4));
  const Isa isa = static_cast<Isa>(state.range(5));
  if (SkipUnsupported(state, isa)) return;
  auto st = Normals(int64_t{Hv} * D * D, 0.1f, 1);  // a folded state, nothing pending
  st.resize(static_cast<size_t>(GatedDeltaStateFloats(Hk, Hv, D, D)), 0.0f);
  const auto q = Normals(T * Hk * D, 0.1f, 2), k = Normals(T * Hk * D, 0.1f, 3),
             v = Normals(T * Hv * D, 1.0f, 4);
  std::vector<float> g(T * Hv, -0.1f), beta(T * Hv, 0.5f), out(T * Hv * D);
  GatedDeltaRuleArgs args;
  args.n_tokens = T, args.n_k_heads = Hk, args.n_v_heads = Hv, args.k_dim = D, args.v_dim = D;
  args.state = st.data(), args.q = q.data(), args.k = k.data(), args.v = v.data();
  args.g = g.data(), args.beta = beta.data(), args.out = out.data();
  ThreadPool* pool = Pool(threads);
  for (auto _ : state) {
    GatedDeltaRule(args, pool, isa);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * T);
  state.SetLabel(std::string(IsaName(isa)));
}
BENCHMARK(BM_GatedDeltaRule)
    ->ArgsProduct({{1}, {8}, {64}, {1, 512}, {1, 2}, {0, 1, 2}})
    ->ArgsProduct({{16}, {32}, {128}, {1, 512}, {1, 2}, {0, 1, 2}})
    ->ArgNames({"k_heads", "v_heads", "head_dim", "tokens", "threads", "isa"})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

void BM_CausalConv1d(benchmark::State& state) {
  const int64_t C = state.range(0), T = state.range(1);
  const int K = 4;
  const Isa isa = static_cast<Isa>(state.range(2));
  if (SkipUnsupported(state, isa)) return;
  auto st = Normals((K - 1) * C, 1.0f, 1);
  const auto x = Normals(T * C, 1.0f, 2), w = Normals(C * K, 0.5f, 3), b = Normals(C, 0.5f, 4);
  std::vector<float> y(T * C);
  CausalConv1dArgs args;
  args.n_tokens = T, args.channels = C, args.kernel = K, args.x = x.data(), args.weight = w.data();
  args.bias = b.data(), args.silu = true, args.conv_state = st.data(), args.y = y.data();
  for (auto _ : state) {
    CausalConv1d(args, isa);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetItemsProcessed(state.iterations() * T);
  state.SetLabel(std::string(IsaName(isa)));
}
// channels: d_inner + 2 * groups * d_state of the two Mamba-2 shapes.
BENCHMARK(BM_CausalConv1d)
    ->ArgsProduct({{640, 2304}, {1, 512}, {0, 1}})
    ->ArgNames({"channels", "tokens", "isa"})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

#if defined(__x86_64__)
// The AVX2 integer multiplies' throughput on this core, register to register in eight independent chains:
// mix 0 vpmaddubsw alone, 1 vpmaddubsw and vpmaddwd alternated, 2 vpmaddubsw and vpsignb alternated.
// items_per_second: instructions per second. Where mix 1 runs no faster than mix 0 and mix 2 twice as fast,
// vpmaddubsw and vpmaddwd share one pipe (Zen 2), and that rate per (vpmaddubsw + vpmaddwd) bounds the packed
// tiles (docs/benchmarks.md, session 19). Mix 3 runs six vpmaddubsw chains beside six vfmadd231ps chains
// (items: the vpmaddubsw alone): at mix 0's rate, the FMAs found a pipe of their own (session 22).
// Example: kernels_bench --benchmark_filter=Avx2MultiplyMix
__attribute__((target("avx2,fma"))) void MultiplyFmaLoop(benchmark::State& state) {
  const __m256i c = _mm256_set1_epi8(3);
  const __m256 fc = _mm256_set1_ps(0.5f);
  __m256i v[6];
  __m256 f[6];
  for (int k = 0; k < 6; ++k) v[k] = _mm256_set1_epi8(static_cast<char>(k + 1)), f[k] = _mm256_set1_ps(k);
  for (auto _ : state) {
    for (int i = 0; i < 1000; ++i) {
      for (int k = 0; k < 6; ++k) {
        v[k] = _mm256_maddubs_epi16(v[k], c);
        f[k] = _mm256_fmadd_ps(f[k], fc, fc);
      }
      __asm__ volatile(""
                       : "+x"(v[0]), "+x"(v[1]), "+x"(v[2]), "+x"(v[3]), "+x"(v[4]), "+x"(v[5]), "+x"(f[0]),
                         "+x"(f[1]), "+x"(f[2]), "+x"(f[3]), "+x"(f[4]), "+x"(f[5]));
    }
  }
  state.SetItemsProcessed(state.iterations() * 6000);
}
template <int kMix>
__attribute__((target("avx2"))) void MultiplyMixLoop(benchmark::State& state) {
  const __m256i c = _mm256_set1_epi8(3), ones = _mm256_set1_epi16(1);
  __m256i v[8];
  for (int k = 0; k < 8; ++k) v[k] = _mm256_set1_epi8(static_cast<char>(k + 1));
  for (auto _ : state) {
    for (int i = 0; i < 1000; ++i) {
      for (int k = 0; k < 8; ++k) {
        if (kMix == 0 || k % 2 == 0) {
          v[k] = _mm256_maddubs_epi16(v[k], c);
        } else if (kMix == 1) {
          v[k] = _mm256_madd_epi16(v[k], ones);
        } else {
          v[k] = _mm256_sign_epi8(v[k], c);
        }
      }
      // Keeps the eight chains in registers and every instruction in the loop.
      __asm__ volatile(""
                       : "+x"(v[0]), "+x"(v[1]), "+x"(v[2]), "+x"(v[3]), "+x"(v[4]), "+x"(v[5]), "+x"(v[6]),
                         "+x"(v[7]));
    }
  }
  state.SetItemsProcessed(state.iterations() * 8000);
}
void BM_Avx2MultiplyMix(benchmark::State& state) {
  if (!UsesAvx2(DetectIsa())) {
    state.SkipWithError("no AVX2 on this CPU");
    return;
  }
  switch (state.range(0)) {
    case 0:
      return MultiplyMixLoop<0>(state);
    case 1:
      return MultiplyMixLoop<1>(state);
    case 2:
      return MultiplyMixLoop<2>(state);
    default:
      return MultiplyFmaLoop(state);
  }
}
BENCHMARK(BM_Avx2MultiplyMix)->DenseRange(0, 3)->ArgName("mix")->Unit(benchmark::kMicrosecond);
#endif

}  // namespace
}  // namespace llamay::kernels

BENCHMARK_MAIN();
