#include "engine/grammar_constraint.h"

#include <algorithm>
#include <limits>

namespace llamay::engine {

GrammarConstraint::GrammarConstraint(std::shared_ptr<const grammar::Grammar> grammar,
                                     std::shared_ptr<const grammar::Vocabulary> vocabulary,
                                     std::vector<Trigger> triggers)
    : matcher_(std::move(grammar), std::move(vocabulary)), triggers_(std::move(triggers)), active_(triggers_.empty()) {
  for (const Trigger& t : triggers_) max_trigger_ = std::max(max_trigger_, t.text.size());
}

namespace {
bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
}  // namespace

size_t GrammarConstraint::FindTrigger() const {
  size_t best = std::string::npos;
  for (const Trigger& t : triggers_) {
    const size_t at = recent_.find(t.text);
    if (at == std::string::npos) continue;
    if (t.at_start && (spoke_ || !std::all_of(recent_.begin(), recent_.begin() + static_cast<long>(at), IsSpace)))
      continue;
    best = std::min(best, at);
  }
  return best;
}

Status GrammarConstraint::Process(std::span<float> logits) {
  if (!active_) return Status::Ok();
  const grammar::Vocabulary& vocab = matcher_.vocabulary();
  if (logits.size() < static_cast<size_t>(vocab.size()))
    return InternalError("grammar constraint: " + std::to_string(logits.size()) + " logits for a vocabulary of " +
                         std::to_string(vocab.size()));
  if (matcher_.IsTerminated()) {  // only an end token may follow the end
    for (size_t t = 0; t < logits.size(); ++t)
      if (t >= static_cast<size_t>(vocab.size()) || !vocab.is_end_token(static_cast<int32_t>(t)))
        logits[t] = -std::numeric_limits<float>::infinity();
    return Status::Ok();
  }
  matcher_.FillMask(&mask_);
  // The grammar goes on, but no token spells any byte it allows (a vocabulary without byte fallback, such
  // as the demo model's printable ASCII, meeting a literal "é"): say so rather than fail as a bare empty
  // mask.
  if (mask_.Count() == 0)
    return FailedPreconditionError("grammar constraint: no token of this model's vocabulary can continue the grammar here");
  mask_.Apply(logits.first(static_cast<size_t>(vocab.size())));
  for (size_t t = static_cast<size_t>(vocab.size()); t < logits.size(); ++t)
    logits[t] = -std::numeric_limits<float>::infinity();
  return Status::Ok();
}

Status GrammarConstraint::Accept(int32_t token) {
  const grammar::Vocabulary& vocab = matcher_.vocabulary();
  if (active_) {
    if (matcher_.IsTerminated()) return Status::Ok();
    Status s = matcher_.Accept(token);
    if (!s.ok()) return s.WithContext("grammar constraint");
    return CheckAmbiguity();
  }
  if (token < 0 || token >= vocab.size()) return Status::Ok();
  recent_ += vocab.token_bytes(token);
  const size_t at = FindTrigger();
  if (at == std::string::npos) {
    if (recent_.size() > max_trigger_) {
      const size_t drop = recent_.size() - max_trigger_;
      spoke_ = spoke_ || !std::all_of(recent_.begin(), recent_.begin() + static_cast<long>(drop), IsSpace);
      recent_.erase(0, drop);
    }
    return Status::Ok();
  }
  // The trigger appeared: from its first byte on, the output must follow the grammar.
  active_ = true;
  Status s = matcher_.AcceptBytes(std::string_view(recent_).substr(at));
  recent_.clear();
  if (!s.ok()) return s.WithContext("grammar constraint: the text after the trigger");
  return CheckAmbiguity();
}

Status GrammarConstraint::CheckAmbiguity() const {
  if (matcher_.num_stacks() <= kMaxStacks) return Status::Ok();
  return InvalidArgumentError("the grammar is too ambiguous: the output so far can be parsed " +
                              std::to_string(matcher_.num_stacks()) + " ways at once (at most " +
                              std::to_string(kMaxStacks) + "); make its alternatives and repetitions distinct");
}

std::unique_ptr<LogitsProcessor> GrammarConstraint::Clone() const {
  return std::make_unique<GrammarConstraint>(*this);
}

}  // namespace llamay::engine
