#include "engine/grammar_constraint.h"

#include <algorithm>
#include <limits>

#include "base/check.h"

namespace llamay::engine {

namespace {
bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

size_t SkipSpace(std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size() && IsSpace(bytes[i])) ++i;
  return i;
}

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
}  // namespace

GrammarConstraint::GrammarConstraint(std::shared_ptr<const grammar::Grammar> grammar,
                                     std::shared_ptr<const grammar::Vocabulary> vocabulary,
                                     std::vector<Trigger> triggers, std::string after)
    : matcher_(std::move(grammar), std::move(vocabulary)), triggers_(std::move(triggers)), after_(std::move(after)) {
  LLAMAY_CHECK(after_.empty() || !IsSpace(after_[0])) << "grammar constraint: the marker begins with whitespace";
  for (const Trigger& t : triggers_) max_trigger_ = std::max(max_trigger_, t.text.size());
  if (!after_.empty()) {
    phase_ = Phase::kMarker;
  } else {
    phase_ = triggers_.empty() ? Phase::kActive : Phase::kLazy;
  }
}

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
  const grammar::Vocabulary& vocab = matcher_.vocabulary();
  switch (phase_) {
    case Phase::kLazy:
      return Status::Ok();
    case Phase::kMarker:
      if (triggers_.empty())  // the answer is required: no stopping before it
        for (int32_t t : vocab.end_tokens())
          if (static_cast<size_t>(t) < logits.size()) logits[static_cast<size_t>(t)] = kNegInf;
      return Status::Ok();
    case Phase::kSpace:
    case Phase::kActive:
      break;
  }
  if (logits.size() < static_cast<size_t>(vocab.size()))
    return InternalError("grammar constraint: " + std::to_string(logits.size()) + " logits for a vocabulary of " +
                         std::to_string(vocab.size()));
  if (matcher_.IsTerminated()) {  // only an end token may follow the end
    for (size_t t = 0; t < logits.size(); ++t)
      if (t >= static_cast<size_t>(vocab.size()) || !vocab.is_end_token(static_cast<int32_t>(t)))
        logits[t] = kNegInf;
    return Status::Ok();
  }
  if (phase_ == Phase::kSpace) {
    const SpaceStart& start = GetSpaceStart();
    mask_ = start.first;
    for (const auto& [token, space] : start.spaced)
      if (space_bytes_ + space <= kMaxSpace) mask_.Set(token);
  } else {
    matcher_.FillMask(&mask_);
  }
  // The grammar goes on, but no token spells any byte it allows (a vocabulary without byte fallback, such
  // as the demo model's printable ASCII, meeting a literal "é"): say so rather than fail as a bare empty
  // mask.
  if (mask_.Count() == 0)
    return FailedPreconditionError("grammar constraint: no token of this model's vocabulary can continue the grammar here");
  mask_.Apply(logits.first(static_cast<size_t>(vocab.size())));
  for (size_t t = static_cast<size_t>(vocab.size()); t < logits.size(); ++t) logits[t] = kNegInf;
  return Status::Ok();
}

const GrammarConstraint::SpaceStart& GrammarConstraint::GetSpaceStart() {
  if (space_start_) return *space_start_;
  // The matcher is still at the grammar's start here.
  auto start = std::make_shared<SpaceStart>();
  matcher_.FillMask(&start->first);
  // The tokens that begin with whitespace: walk the trie's nodes that spell only whitespace. A token at
  // one is whitespace; one below such a node's other children is whitespace and then bytes, allowed when
  // the grammar takes them (the child's byte alone first, which rules out whole subtrees at once).
  const grammar::Vocabulary& vocab = matcher_.vocabulary();
  const grammar::TokenTrie& trie = vocab.trie();
  grammar::Matcher probe = matcher_;
  auto take = [&](int32_t node, int32_t space) {
    for (int32_t i = trie.token_begin[node]; i < trie.token_begin[node + 1]; ++i) {
      const int32_t t = trie.tokens[i];
      if (vocab.is_end_token(t)) continue;  // FillMask decided those
      const std::string_view bytes = vocab.token_bytes(t);
      if (static_cast<size_t>(space) == bytes.size()) {
        start->spaced.push_back({t, space});
      } else if (probe.AcceptBytes(bytes.substr(static_cast<size_t>(space))).ok()) {
        start->spaced.push_back({t, space});
        probe.Reset();
      }
    }
  };
  std::vector<int32_t> spaces = {0};  // trie nodes whose bytes are all whitespace
  while (!spaces.empty()) {
    const int32_t node = spaces.back();
    spaces.pop_back();
    for (int32_t child = node + 1; child < trie.subtree_end[node]; child = trie.subtree_end[child]) {
      const uint8_t b = trie.byte[child];
      if (IsSpace(static_cast<char>(b))) {
        if (trie.depth[child] > kMaxSpace) continue;  // longer whitespace is never allowed
        take(child, trie.depth[child]);
        spaces.push_back(child);
      } else if (node != 0 && matcher_.AllowsByte(b)) {  // the root's other children are FillMask's
        for (int32_t n = child; n < trie.subtree_end[child]; ++n) take(n, trie.depth[node]);
      }
    }
  }
  space_start_ = std::move(start);
  return *space_start_;
}

Status GrammarConstraint::Accept(int32_t token) {
  const grammar::Vocabulary& vocab = matcher_.vocabulary();
  if (phase_ == Phase::kActive) {
    if (matcher_.IsTerminated()) return Status::Ok();
    Status s = matcher_.Accept(token);
    if (!s.ok()) return s.WithContext("grammar constraint");
    return CheckAmbiguity();
  }
  if (phase_ == Phase::kSpace && (token < 0 || token >= vocab.size() || vocab.is_end_token(token))) {
    Status s = matcher_.Accept(token);  // an end token where the grammar may be empty; else its error
    if (!s.ok()) return s.WithContext("grammar constraint");
    phase_ = Phase::kActive;
    return Status::Ok();
  }
  if (token < 0 || token >= vocab.size()) return Status::Ok();
  const std::string& bytes = vocab.token_bytes(token);
  switch (phase_) {
    case Phase::kMarker:
      return vocab.is_end_token(token) ? Status::Ok() : MarkerBytes(bytes);
    case Phase::kSpace:
      if (bytes.empty()) return FailedPreconditionError("grammar constraint: a control token before the grammar");
      return SpaceBytes(bytes);
    case Phase::kLazy:
      return LazyBytes(bytes);
    case Phase::kActive:
      break;
  }
  return Status::Ok();
}

Status GrammarConstraint::MarkerBytes(std::string_view bytes) {
  recent_ += bytes;
  const size_t at = recent_.find(after_);
  if (at == std::string::npos) {
    if (recent_.size() >= after_.size()) recent_.erase(0, recent_.size() - (after_.size() - 1));
    return Status::Ok();
  }
  // The marker appeared: what follows it is the output the grammar's mode sees from its start.
  const std::string rest = recent_.substr(at + after_.size());
  recent_.clear();
  if (triggers_.empty()) {
    phase_ = Phase::kSpace;
    return SpaceBytes(rest);
  }
  phase_ = Phase::kLazy;
  return LazyBytes(rest);
}

Status GrammarConstraint::SpaceBytes(std::string_view bytes) {
  const size_t space = SkipSpace(bytes);
  if (static_cast<size_t>(space_bytes_) + space > static_cast<size_t>(kMaxSpace))
    return FailedPreconditionError("grammar constraint: more than " + std::to_string(kMaxSpace) +
                                   " bytes of whitespace after \"" + after_ + "\"");
  const std::string_view rest = bytes.substr(space);
  if (!rest.empty()) {
    Status s = matcher_.AcceptBytes(rest);
    if (!s.ok()) return s.WithContext("grammar constraint: the text after \"" + after_ + "\"");
    phase_ = Phase::kActive;
  }
  space_bytes_ += static_cast<int32_t>(space);
  return CheckAmbiguity();
}

Status GrammarConstraint::LazyBytes(std::string_view bytes) {
  recent_ += bytes;
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
  phase_ = Phase::kActive;
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
