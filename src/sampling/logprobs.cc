#include "sampling/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/check.h"
#include "sampling/candidates.h"

namespace llamay::sampling {
namespace {

float Clean(float logit) { return std::isnan(logit) ? -std::numeric_limits<float>::infinity() : logit; }

float MaxLogit(std::span<const float> logits) {
  float best = Clean(logits[0]);
  for (float l : logits) best = std::max(best, Clean(l));
  return best;
}

}  // namespace

double LogSumExp(std::span<const float> logits) {
  LLAMAY_CHECK(!logits.empty()) << "LogSumExp of no logits";
  const float max_logit = MaxLogit(logits);
  double sum = 0.0;
  for (float l : logits) sum += RelativeWeight(Clean(l), max_logit, 1.0);
  return static_cast<double>(max_logit) + std::log(sum);
}

float TokenLogprob(std::span<const float> logits, int32_t token) {
  LLAMAY_CHECK(token >= 0 && static_cast<size_t>(token) < logits.size())
      << "token " << token << " outside a vocabulary of " << logits.size();
  const float max_logit = MaxLogit(logits);
  double sum = 0.0;
  for (float l : logits) sum += RelativeWeight(Clean(l), max_logit, 1.0);
  // Written relative to the max so that +-infinity logits give 0 / -inf rather than NaN.
  const float logit = Clean(logits[static_cast<size_t>(token)]);
  const double rel = logit == max_logit ? 0.0 : static_cast<double>(logit) - static_cast<double>(max_logit);
  return static_cast<float>(rel - std::log(sum));
}

std::vector<std::pair<int32_t, float>> TopLogprobs(std::span<const float> logits, int n) {
  std::vector<std::pair<int32_t, float>> out;
  if (n <= 0 || logits.empty()) return out;
  const size_t keep = std::min(static_cast<size_t>(n), logits.size());
  // A heap of the best `keep` so far whose top is the worst of them (Before as the heap's "less").
  std::vector<Candidate> heap;
  heap.reserve(keep + 1);
  const float max_logit = MaxLogit(logits);
  double sum = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const Candidate cand{static_cast<int32_t>(i), Clean(logits[i])};
    sum += RelativeWeight(cand.logit, max_logit, 1.0);
    if (heap.size() < keep) {
      heap.push_back(cand);
      std::push_heap(heap.begin(), heap.end(), Before);
    } else if (Before(cand, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), Before);
      heap.back() = cand;
      std::push_heap(heap.begin(), heap.end(), Before);
    }
  }
  std::sort(heap.begin(), heap.end(), Before);
  const double log_sum = std::log(sum);
  out.reserve(heap.size());
  for (const Candidate& c : heap) {
    const double rel =
        c.logit == max_logit ? 0.0 : static_cast<double>(c.logit) - static_cast<double>(max_logit);
    out.emplace_back(c.id, static_cast<float>(rel - log_sum));
  }
  return out;
}

}  // namespace llamay::sampling
