// Kernel benchmarks: the matmul at the shapes of a 1B-class llama (vocab 32000, dim 1024, ffn 2816).
//   one token   (decode)  bytes_per_second = weight bytes read per second (the decode limit is bandwidth)
//   8 tokens    (a decode step of 8 streams: the weights are read once for all of them)
//   512 tokens  (prefill) FLOP/s = 2 * n_out * n_in * tokens per second (matrix-matrix work)
// Arguments: weight type, n_out, n_in, tokens, threads, isa (1 AVX2, 2 AVX-512 VNNI; a level the CPU lacks
// is skipped). Example:
//   kernels_bench --benchmark_filter='MatMul/q8_0/n_out:2816/n_in:1024/tokens:8/threads:2'
#include <benchmark/benchmark.h>

#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "base/numeric.h"
#include "kernels/cpu.h"
#include "kernels/dequant.h"
#include "kernels/matmul.h"
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
    // Q6_K keeps its scale at the end of the block; the others start with it (K-quants: d, then dmin).
    const size_t at = t == TensorType::kQ6_K ? block - 2 : 0;
    std::memcpy(w.data() + off + at, &scale, 2);
    if (t == TensorType::kQ4_K) std::memcpy(w.data() + off + 2, &scale, 2);
  }
  return w;
}

void BM_MatMul(benchmark::State& state, TensorType t) {
  const int64_t n_out = state.range(0), n_in = state.range(1), tokens = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  const Isa isa = static_cast<Isa>(state.range(4));
  if (isa > SupportedIsa()) {
    state.SkipWithError("this CPU lacks the instruction set");
    return;
  }
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

// A decode step as the model runs it: one pass over 256 MiB of Q8_0 weights (more than the last-level
// cache, so they stream from memory as a real model's do), as 1024 x 2816 matrices, for 1 or 8 tokens.
// bytes_per_second is the weight read rate; compare it with the machine's memory bandwidth.
void BM_DecodeStream(benchmark::State& state) {
  const int64_t tokens = state.range(0), n_out = 1024, n_in = 2816;
  const Isa isa = static_cast<Isa>(state.range(1));
  if (isa > SupportedIsa()) {
    state.SkipWithError("this CPU lacks the instruction set");
    return;
  }
  const TensorType t = TensorType::kQ8_0;
  const size_t per = TypeRowBytes(t, n_in) * n_out;
  const size_t n_mats = (size_t{256} << 20) / per;
  static const std::vector<uint8_t> w = [&] {
    std::vector<uint8_t> all;
    const auto one = Weights(t, n_out, n_in);
    for (size_t i = 0; i < n_mats; ++i) all.insert(all.end(), one.begin(), one.end());
    return all;
  }();
  std::vector<float> x(tokens * n_in), y(tokens * n_out);
  std::mt19937 rng(3);
  std::normal_distribution<float> d;
  for (auto& v : x) v = d(rng);
  PreparedActivations act;
  act.Prepare(Pool(2), ActivationFormat(t), x.data(), tokens, n_in);
  for (auto _ : state) {
    for (size_t i = 0; i < n_mats; ++i)
      MatMul(Pool(2), {t, w.data() + i * per, n_out, n_in, 0}, act, y.data(), isa);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n_mats * per));
  state.SetLabel(std::string(IsaName(isa)) + ", 2 threads");
}
BENCHMARK(BM_DecodeStream)
    ->ArgsProduct({{1, 8}, {1, 2}})
    ->ArgNames({"tokens", "isa"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void Shapes(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2})
    for (int64_t tokens : {1, 8, 512})
      for (auto [n_out, n_in] : {std::pair<int64_t, int64_t>{32000, 1024}, {2816, 1024}, {1024, 2816}})
        for (int isa : {1, 2}) b->Args({n_out, n_in, tokens, threads, isa});
  b->ArgNames({"n_out", "n_in", "tokens", "threads", "isa"})->Unit(benchmark::kMillisecond)->UseRealTime();
}

BENCHMARK_CAPTURE(BM_MatMul, f16, TensorType::kF16)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatMul, q8_0, TensorType::kQ8_0)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatMul, q4_0, TensorType::kQ4_0)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatMul, q4_K, TensorType::kQ4_K)->Apply(Shapes);

}  // namespace
}  // namespace llamay::kernels

BENCHMARK_MAIN();
