// Sampler: picks the next token from a vector of logits, the last step of every decode.
//
// The chain (llama.cpp's default order, common/sampling.cpp and src/llama-sampling.cpp, without the steps
// llamay does not offer: DRY, typical-p, XTC, top-n-sigma, mirostat), each step documented in candidates.h:
//   1. penalties    repetition (divide positive logits, multiply the others), then frequency and presence
//                   (logit -= count * frequency + presence) for tokens in the last repeat_last_n of history
//   2. top-k        keep the k highest logits
//   3. top-p        keep the smallest prefix (best first) whose probability mass reaches top_p
//   4. min-p        keep tokens with probability >= min_p * the best token's probability
//   5. temperature  divide the logits by the temperature
//   6. softmax and draw one token with a uniform double from the seeded generator.
// Top-p and min-p measure probabilities at temperature 1 over the tokens left by the steps before them (as in
// llama.cpp, where temperature comes after the filters); the temperature only reshapes the final draw.
// Temperature 0 is greedy: the argmax of the penalised logits (step 1 still applies, as in llama.cpp, where
// filters never remove the argmax), the lowest id winning ties; it consumes no randomness.
//
// Determinism: the generator is xoshiro256** seeded through splitmix64 (rng.h), and every step orders tokens
// by a strict total order (higher logit, then lower id), so a seed reproduces the same tokens given the same
// logits on any machine and standard library. Each non-greedy Sample() consumes exactly one Rng output.
// Weights are exp() in double: a last-bit difference in a platform's exp() could change a draw only if the
// uniform number fell within ~1e-16 of a boundary between two tokens.
//
// Invariant: params() passed Validate(). Buffers (candidates, weights, the penalty window) are members,
// reused across calls: once they have grown to the vocabulary and the window, Sample() does not allocate.
//
// Cost per call for a vocabulary of V: one pass over the logits plus O(k log k) with top-k set (the
// default); without top-k, O(V) exps for the draw, and for top-p a heap pass that finds the nucleus among the
// best 256 tokens, falling back to sorting all V only for a flat distribution. Greedy is one pass.
//
// Thread-safety: a Sampler is single-threaded (one per request); distinct Samplers are independent.
#ifndef LLAMAY_SAMPLING_SAMPLER_H_
#define LLAMAY_SAMPLING_SAMPLER_H_

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "sampling/candidates.h"
#include "sampling/rng.h"
#include "sampling/sampling_params.h"

namespace llamay::sampling {

class Sampler {
 public:
  // REQUIRES: params.Validate().ok() (CHECKed). Without params.has_seed the seed comes from
  // std::random_device; seed() reports it.
  explicit Sampler(SamplingParams params);

  // The Status of Validate() instead of a CHECK failure, for parameters that come from a request.
  static Result<Sampler> Create(SamplingParams params);

  // The next token, given this step's logits ([vocab]) and the tokens so far (prompt and generated, oldest
  // first; only the last repeat_last_n matter). REQUIRES: !logits.empty() (CHECKed).
  int32_t Sample(std::span<const float> logits, std::span<const int32_t> history);

  const SamplingParams& params() const { return params_; }
  // The seed in use: params().seed when has_seed, else the one drawn from std::random_device.
  uint64_t seed() const { return seed_; }

 private:
  // The argmax of the logits with overrides_ applied.
  int32_t Greedy(std::span<const float> logits) const;

  SamplingParams params_;
  Penalties penalties_;
  uint64_t seed_;
  Rng rng_;
  Candidates candidates_;
  std::vector<int32_t> window_;       // penalty window scratch
  std::vector<Candidate> overrides_;  // this call's penalised logits, sorted by id
};

}  // namespace llamay::sampling

#endif  // LLAMAY_SAMPLING_SAMPLER_H_
