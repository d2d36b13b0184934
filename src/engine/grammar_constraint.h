// GrammarConstraint: a logits processor that lets through only the tokens a grammar allows next
// (grammar/matcher.h), so a request's output always matches its grammar: a JSON Schema, any JSON, GBNF,
// or a tool call's syntax.
//
// Two modes:
//   - from the start: every token is constrained; end-of-generation tokens are allowed exactly when the
//     grammar is complete, and only they once nothing may follow.
//   - lazy (triggers): generation is free until the output contains one of the trigger strings (a tool
//     call's opening marker); from then on it is constrained, the grammar having consumed the output from
//     the trigger's first byte. Plain text before the trigger is never constrained.
// Once the grammar has ended (an end token was accepted) only end tokens stay allowed.
//
// Cost: a mask per step (Matcher::FillMask walks the vocabulary's trie); docs/grammar.md measures it.
// Thread-safety: one request's (LogitsProcessor); the Grammar and Vocabulary are shared and immutable.
#ifndef LLAMAY_ENGINE_GRAMMAR_CONSTRAINT_H_
#define LLAMAY_ENGINE_GRAMMAR_CONSTRAINT_H_

#include <memory>
#include <string>
#include <vector>

#include "engine/logits_processor.h"
#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "grammar/vocabulary.h"

namespace llamay::engine {

class GrammarConstraint : public LogitsProcessor {
 public:
  // Parses followed at once, at most. An ambiguous recursive grammar can double them with every token
  // (`a ::= "(" (a | b)*` with `b` alike), and a mask's cost grows with them; past this the request ends
  // with InvalidArgument rather than stall the engine's thread for everyone (a mask over 128 stacks of a
  // 32k vocabulary stays within milliseconds).
  static constexpr int32_t kMaxStacks = 128;

  // A string that switches a lazy grammar on; `at_start`: only where nothing but whitespace precedes it in
  // the output (a JSON tool call that must be the whole message).
  struct Trigger {
    Trigger(std::string t, bool start = false) : text(std::move(t)), at_start(start) {}  // NOLINT: implicit
    std::string text;
    bool at_start;
  };

  // `triggers` empty: constrained from the first token. REQUIRES: grammar and vocabulary non-null.
  GrammarConstraint(std::shared_ptr<const grammar::Grammar> grammar,
                    std::shared_ptr<const grammar::Vocabulary> vocabulary, std::vector<Trigger> triggers = {});

  Status Process(std::span<float> logits) override;
  Status Accept(int32_t token) override;
  std::unique_ptr<LogitsProcessor> Clone() const override;

  // Whether the grammar is in force (always, unless lazy and no trigger has appeared yet).
  bool active() const { return active_; }
  const grammar::Matcher& matcher() const { return matcher_; }

 private:
  grammar::Matcher matcher_;
  // Where the earliest trigger starts in recent_, or npos.
  size_t FindTrigger() const;
  // InvalidArgument once the matcher follows more than kMaxStacks parses.
  Status CheckAmbiguity() const;

  std::vector<Trigger> triggers_;
  bool active_;
  std::string recent_;  // lazy, before a trigger: the output's last bytes (enough to hold any trigger)
  bool spoke_ = false;  // a byte other than whitespace was output before recent_
  size_t max_trigger_ = 0;
  grammar::TokenMask mask_;
};

}  // namespace llamay::engine

#endif  // LLAMAY_ENGINE_GRAMMAR_CONSTRAINT_H_
