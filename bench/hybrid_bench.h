// engine_bench --hybrid: what recurrent checkpoints buy on a hybrid model, the synthetic granitehybrid
// model of model::HybridShape (about 290M parameters: 12 Mamba-2 layers, 4 GQA attention layers, SwiGLU
// FFN in each) with Q8_0 weights, KV f16 in 64-token pages. Three parts, printed as markdown tables
// (docs/benchmarks.md, "Hybrid checkpoints"):
//   1. an agent's trace: one conversation grows turn by turn (tool result + generated tokens); time to
//      first token with the prefix tree's checkpoint reuse against recompute (a second engine whose tree
//      stays empty), at the first turns reaching each history length;
//   2. what the prefix tree holds after the trace (kv::CacheStats);
//   3. Context::Fork of a hybrid context (pages and recurrent slot shared, copy on first write) against
//      forking and copying the state into every branch at once (Fork + MutableState).
// Checks (each failure counted, the program then exits 1): reuse and recompute generate the same greedy
// tokens; cached_tokens equal the previous turn's output-end checkpoint; recompute caches nothing; a fork
// allocates no byte; the eager copy allocates exactly one slot per branch; a forked branch's next logits
// equal its parent's continuation bit for bit.
// Thread-safety: single-threaded driver (the engines run their own scheduler threads).
#ifndef LLAMAY_BENCH_HYBRID_BENCH_H_
#define LLAMAY_BENCH_HYBRID_BENCH_H_

#include <cstddef>
#include <vector>

namespace llamay::bench {

struct HybridOptions {
  int threads = 2;
  std::vector<size_t> history = {2048, 4096, 8192};  // measure at the first turn whose prompt reaches each
  int reps = 3;                                      // TTFT samples per measured turn and mode (median)
  size_t system_tokens = 1000;
  size_t turn_tokens = 250;  // the tool result appended each turn
  int gen = 4;               // greedy tokens generated per turn
  size_t fork_tokens = 4096;
  std::vector<int> branches = {1, 4, 16};
  int fork_reps = 5;
};

// Runs the three parts; returns the number of failed checks.
int RunHybridBench(const HybridOptions& o);

}  // namespace llamay::bench

#endif  // LLAMAY_BENCH_HYBRID_BENCH_H_
