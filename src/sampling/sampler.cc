#include "sampling/sampler.h"

#include <limits>
#include <random>

#include "base/check.h"

namespace llamay::sampling {
namespace {

uint64_t ChooseSeed(const SamplingParams& params) {
  if (params.has_seed) return params.seed;
  std::random_device device;
  const uint64_t high = device();
  return (high << 32) ^ static_cast<uint64_t>(device());
}

const SamplingParams& Validated(const SamplingParams& params) {
  const Status status = params.Validate();
  LLAMAY_CHECK(status.ok()) << "Sampler built from invalid params: " << status.ToString();
  return params;
}

}  // namespace

Sampler::Sampler(SamplingParams params)
    : params_(Validated(params)),
      penalties_{params.repeat_last_n, params.repeat_penalty, params.frequency_penalty,
                 params.presence_penalty},
      seed_(ChooseSeed(params)),
      rng_(seed_) {}

Result<Sampler> Sampler::Create(SamplingParams params) {
  LLAMAY_RETURN_IF_ERROR(params.Validate());
  return Sampler(params);
}

int32_t Sampler::Sample(std::span<const float> logits, std::span<const int32_t> history) {
  LLAMAY_CHECK(!logits.empty()) << "Sample from an empty vocabulary";
  PenalizedLogits(penalties_, logits, history, &window_, &overrides_);
  if (params_.temperature == 0.0f) return Greedy(logits);

  FillTopK(params_.top_k, logits, overrides_, &candidates_);
  TopP(params_.top_p, &candidates_);
  MinP(params_.min_p, &candidates_);
  const size_t chosen = Draw(params_.temperature, rng_.NextDouble(), &candidates_);
  return candidates_.items[chosen].id;
}

int32_t Sampler::Greedy(std::span<const float> logits) const {
  // Strict '>' keeps the lowest id among equal logits; NaN never compares greater, so it counts as -inf.
  // Overrides (the penalised logits, sorted by id) are merged into the scan.
  size_t best = 0;
  float best_value = -std::numeric_limits<float>::infinity();
  size_t next = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    float v = logits[i];
    if (next < overrides_.size() && static_cast<size_t>(overrides_[next].id) == i) {
      v = overrides_[next++].logit;
    }
    if (v > best_value) {
      best = i;
      best_value = v;
    }
  }
  return static_cast<int32_t>(best);
}

}  // namespace llamay::sampling
