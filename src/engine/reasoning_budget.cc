#include "engine/reasoning_budget.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "base/check.h"

namespace llamay::engine {

ReasoningBudget::ReasoningBudget(std::vector<int32_t> open_tokens, std::vector<int32_t> close_tokens,
                                 bool starts_inside, int budget)
    : open_(std::move(open_tokens)), close_(std::move(close_tokens)), budget_(budget) {
  LLAMAY_CHECK(!close_.empty()) << "reasoning budget: no close marker tokens";
  for (int32_t t : open_) LLAMAY_CHECK(t >= 0) << "reasoning budget: open marker token " << t;
  for (int32_t t : close_) LLAMAY_CHECK(t >= 0) << "reasoning budget: close marker token " << t;
  if (starts_inside) {
    phase_ = Phase::kInside;
  } else {
    phase_ = open_.empty() ? Phase::kDone : Phase::kStart;
  }
}

bool ReasoningBudget::forcing() const {
  return phase_ == Phase::kInside && budget_ >= 0 && counted_ >= budget_;
}

int ReasoningBudget::MatchAfter(int32_t token) const {
  // The block's last matched_ tokens are close_[0, matched_), and no longer end of them begins close_; so a
  // new match of length k is close_[0, k - 1) ending close_[0, matched_), then `token` == close_[k - 1].
  for (int k = std::min(matched_ + 1, static_cast<int>(close_.size())); k > 0; --k) {
    if (close_[static_cast<size_t>(k - 1)] != token) continue;
    if (std::equal(close_.begin(), close_.begin() + (k - 1), close_.begin() + (matched_ - (k - 1)))) return k;
  }
  return 0;
}

Status ReasoningBudget::Process(std::span<float> logits) {
  if (!forcing()) return Status::Ok();
  const int32_t next = close_[static_cast<size_t>(matched_)];
  if (static_cast<size_t>(next) >= logits.size())
    return InvalidArgumentError("reasoning budget: the close marker's token " + std::to_string(next) +
                                " is outside the " + std::to_string(logits.size()) + " logits");
  const float kept = logits[static_cast<size_t>(next)];
  std::fill(logits.begin(), logits.end(), -std::numeric_limits<float>::infinity());
  logits[static_cast<size_t>(next)] = kept;
  return Status::Ok();
}

Status ReasoningBudget::Accept(int32_t token) {
  Status s = Step(token);
  if (report_) report_->store(reasoning_tokens(), std::memory_order_relaxed);
  return s;
}

Status ReasoningBudget::Step(int32_t token) {
  switch (phase_) {
    case Phase::kDone:
      return Status::Ok();
    case Phase::kStart:  // the open marker counts only as the output's very first tokens
      if (token != open_[static_cast<size_t>(open_matched_)]) {
        phase_ = Phase::kDone;
      } else if (++open_matched_ == static_cast<int>(open_.size())) {
        phase_ = Phase::kInside;
      }
      return Status::Ok();
    case Phase::kInside:
      break;
  }
  if (forcing()) {
    const int32_t want = close_[static_cast<size_t>(matched_)];
    if (token != want)
      return InternalError("reasoning budget: forced the close marker's token " + std::to_string(want) +
                           ", accepted " + std::to_string(token));
    ++matched_;
    ++forced_;
  } else {
    ++counted_;
    matched_ = MatchAfter(token);
  }
  if (matched_ == static_cast<int>(close_.size())) phase_ = Phase::kDone;
  return Status::Ok();
}

std::unique_ptr<LogitsProcessor> ReasoningBudget::Clone() const {
  auto copy = std::make_unique<ReasoningBudget>(*this);
  copy->report_.reset();  // a copy counts for its own request
  return copy;
}

}  // namespace llamay::engine
