// Synthetic llama-architecture GGUF models with deterministic weights, built by llamay's own code: the
// built-in demo model, and models of a chosen shape and weight type for benchmarks (the peer shape of
// ../shared/ref/README.md: vocab 32000, dim 1024, 8 layers, 16 heads / 8 KV heads, ffn 2816).
//
// Weights are uniform with variance 1/fan_in from an integer PRNG (no libm), so the bytes are identical on
// every machine. Matrices use `type` (quantised by kernels::QuantizeRow, round-to-nearest); norms are f32.
// Thread-safety: pure functions.
#ifndef LLAMAY_MODEL_SYNTHETIC_MODEL_H_
#define LLAMAY_MODEL_SYNTHETIC_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/tensor_type.h"

namespace llamay::model {

struct SyntheticSpec {
  std::string name = "llamay-synthetic";
  uint32_t n_vocab = 32000;  // at least 3 + the byte tokens
  uint32_t n_embd = 1024;
  uint32_t n_layer = 8;
  uint32_t n_head = 16;
  uint32_t n_head_kv = 8;
  uint32_t n_ff = 2816;
  TensorType type = TensorType::kQ8_0;
  // Byte tokens for newline and printable ASCII only (the demo model), instead of all 256 bytes.
  bool ascii_bytes_only = false;
  uint64_t seed = 0x11A3A7;
};

// The peer model's shape (see the header comment) in `type`.
SyntheticSpec PeerShape(TensorType type);

Result<std::vector<uint8_t>> BuildSyntheticModel(const SyntheticSpec& spec);

}  // namespace llamay::model

#endif  // LLAMAY_MODEL_SYNTHETIC_MODEL_H_
