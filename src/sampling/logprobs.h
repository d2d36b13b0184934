// Log probabilities for the OpenAI `logprobs` / `top_logprobs` options: log-softmax of the model's logits
// (before penalties, filters and temperature), for the chosen token and the best alternatives.
//
// log p_i = logit_i - m - log(sum_j exp(logit_j - m)), m the largest logit, computed in double. NaN logits
// count as -infinity, as in the sampler (candidates.h).
//
// Cost: TokenLogprob O(V); TopLogprobs O(V log n) with no vocabulary-sized allocation.
// Thread-safety: pure functions.
#ifndef LLAMAY_SAMPLING_LOGPROBS_H_
#define LLAMAY_SAMPLING_LOGPROBS_H_

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace llamay::sampling {

// log(sum_j exp(logit_j)), stable. REQUIRES: !logits.empty().
double LogSumExp(std::span<const float> logits);

// The log probability of `token`. REQUIRES: 0 <= token < logits.size().
float TokenLogprob(std::span<const float> logits, int32_t token);

// The min(n, V) most probable tokens as (id, log probability), most probable first, lower id first on ties.
// Empty when n <= 0 or logits is empty.
std::vector<std::pair<int32_t, float>> TopLogprobs(std::span<const float> logits, int n);

}  // namespace llamay::sampling

#endif  // LLAMAY_SAMPLING_LOGPROBS_H_
