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
// Either mode may start after a marker (`after`, a reasoning model's "</think>"): generation is free until
// the output contains the marker, and the output from the byte after it is what the mode above sees, as if
// it began there (an `at_start` trigger may follow the marker and whitespace). From the start: up to
// kMaxSpace bytes of whitespace may come between the marker and the grammar's first byte
// ("</think>\n\n{...}"; a bound, so that a model cannot spend its tokens on whitespace), and end tokens are
// disallowed until the marker has appeared (the answer is required: the model may not stop inside its
// reasoning); a token that completes the marker and goes on with bytes the grammar rejects (after the
// whitespace) ends the request with an error, as a trigger's does. Lazy: before the marker everything is
// allowed, end tokens too, and a trigger inside the reasoning does not count. If the marker never appears
// the grammar never applies: use it only where the model reasons (reasoning/reasoning.h).
//
// Cost: a mask per step (Matcher::FillMask walks the vocabulary's trie); docs/grammar.md measures it. After
// a marker, the whitespace phase's tokens are found once (a walk of the trie's whitespace-led tokens that
// tries only those whose first byte after the whitespace the grammar takes).
// Thread-safety: one request's (LogitsProcessor); the Grammar and Vocabulary are shared and immutable.
#ifndef LLAMAY_ENGINE_GRAMMAR_CONSTRAINT_H_
#define LLAMAY_ENGINE_GRAMMAR_CONSTRAINT_H_

#include <memory>
#include <string>
#include <string_view>
#include <utility>
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
  // Whitespace bytes allowed between the `after` marker and the grammar (from the start).
  static constexpr int32_t kMaxSpace = 16;

  // A string that switches a lazy grammar on; `at_start`: only where nothing but whitespace precedes it in
  // the output (a JSON tool call that must be the whole message).
  struct Trigger {
    Trigger(std::string t, bool start = false) : text(std::move(t)), at_start(start) {}  // NOLINT: implicit
    std::string text;
    bool at_start;
  };

  // `triggers` empty: constrained from the first token. `after` empty: from the output's start, else from
  // the byte after the marker `after`. REQUIRES: grammar and vocabulary non-null; `after` does not begin
  // with whitespace.
  GrammarConstraint(std::shared_ptr<const grammar::Grammar> grammar,
                    std::shared_ptr<const grammar::Vocabulary> vocabulary, std::vector<Trigger> triggers = {},
                    std::string after = {});

  Status Process(std::span<float> logits) override;
  Status Accept(int32_t token) override;
  std::unique_ptr<LogitsProcessor> Clone() const override;

  // Whether the grammar is in force: always, unless waiting for the `after` marker or, lazy, for a trigger
  // (from the start after a marker: from the marker on, the whitespace before the grammar included).
  bool active() const { return phase_ == Phase::kSpace || phase_ == Phase::kActive; }
  // Whether the `after` marker has appeared (true without one).
  bool marker_seen() const { return phase_ != Phase::kMarker; }
  const grammar::Matcher& matcher() const { return matcher_; }

 private:
  enum class Phase {
    kMarker,  // before the `after` marker: free, but for end tokens when the grammar is required
    kSpace,   // from the start, after the marker: whitespace, then the grammar's first byte
    kLazy,    // lazy, before a trigger: free
    kActive,  // the grammar is in force
  };

  // The output's bytes in each free phase; each may move on to the next phase with the bytes that follow.
  Status MarkerBytes(std::string_view bytes);
  Status SpaceBytes(std::string_view bytes);
  Status LazyBytes(std::string_view bytes);
  // kSpace's tokens: what the grammar allows first, and the tokens of whitespace, alone or followed by
  // bytes the grammar allows first. The same at every step of the phase: built once, shared by clones.
  struct SpaceStart {
    grammar::TokenMask first;                         // with the end tokens if the grammar may be empty
    std::vector<std::pair<int32_t, int32_t>> spaced;  // (token, bytes of whitespace it begins with)
  };
  const SpaceStart& GetSpaceStart();
  // Where the earliest trigger starts in recent_, or npos.
  size_t FindTrigger() const;
  // InvalidArgument once the matcher follows more than kMaxStacks parses.
  Status CheckAmbiguity() const;

  grammar::Matcher matcher_;
  std::vector<Trigger> triggers_;
  std::string after_;
  Phase phase_;
  // kMarker: the output's last bytes (enough to hold the marker); kLazy: likewise for any trigger.
  std::string recent_;
  bool spoke_ = false;  // kLazy: a byte other than whitespace was output before recent_
  size_t max_trigger_ = 0;
  int32_t space_bytes_ = 0;  // kSpace: whitespace output since the marker
  grammar::TokenMask mask_;
  std::shared_ptr<const SpaceStart> space_start_;
};

}  // namespace llamay::engine

#endif  // LLAMAY_ENGINE_GRAMMAR_CONSTRAINT_H_
