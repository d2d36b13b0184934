// Helpers of `llamay bench` for the decode memory bound: the bytes of weights one decode step reads, and
// the machine's read bandwidth measured on the spot.
// Thread-safety: MeasureReadBandwidth starts and joins its own threads; call it from one thread.
#ifndef LLAMAY_TOOLS_CLI_BENCH_MEMORY_H_
#define LLAMAY_TOOLS_CLI_BENCH_MEMORY_H_

#include <cstddef>
#include <cstdint>

#include "gguf/gguf.h"

namespace llamay::cli {

// Sum of the tensor bytes a one-token decode step reads: every tensor whole, except the token embedding,
// of which a step reads one row (unless the file has no output.weight, when the embedding is also the
// output projection and is read whole), and a mixture of experts' expert tensors (ffn_*_exps), of which it
// reads the expert_used_count slabs the token was routed to.
uint64_t DecodeWeightBytes(const gguf::File& file);

struct ReadBandwidth {
  double bytes_per_s = 0;  // the median over the passes of the faster way of reading
  int streams = 0;         // that way: streams read side by side by each thread
  size_t buffer_bytes = 0;
  size_t llc_bytes = 0;  // 0 when the system does not say
};

// The ways of reading tried: each thread reads its slice as 1 sequential stream, or as 4, 8 or 16 regions
// side by side. One stream per thread leaves bandwidth unused on some machines (a Zen 2 VM, 2 threads:
// 21-23 GB/s against 25-36 with 8 streams each, 33-34 with 16, from one run to the next), and the one-token
// kernels read 2 or 8 rows apart (kernels/avx2_util.h), so the bound is the fastest of them.
inline constexpr int kReadStreams[] = {1, 4, 8, 16};

// Reads a buffer much larger than the last-level cache (4x it, at least 512 MiB, at most 2 GiB) with
// `threads` threads, each summing its own contiguous slice in each of the kReadStreams ways; `passes` timed
// passes of each after a first touch.
ReadBandwidth MeasureReadBandwidth(int threads, int passes = 5);

}  // namespace llamay::cli

#endif  // LLAMAY_TOOLS_CLI_BENCH_MEMORY_H_
