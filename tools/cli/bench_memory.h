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
  double bytes_per_s = 0;  // median over the passes
  size_t buffer_bytes = 0;
  size_t llc_bytes = 0;  // 0 when the system does not say
};

// Reads a buffer much larger than the last-level cache (4x it, at least 512 MiB, at most 2 GiB) with
// `threads` threads, each summing its own contiguous slice; `passes` timed passes after a first touch.
ReadBandwidth MeasureReadBandwidth(int threads, int passes = 5);

}  // namespace llamay::cli

#endif  // LLAMAY_TOOLS_CLI_BENCH_MEMORY_H_
