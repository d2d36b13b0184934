// ReasoningBudget: a logits processor that bounds how many tokens a reasoning model spends reasoning, by
// forcing the close marker (`</think>`) once the budget is spent.
//
// The reasoning block starts at the output's first token when the prompt opened it (`starts_inside`, see
// reasoning/reasoning.h PromptOpensReasoning), or when the output's first tokens are exactly `open_tokens`
// (the tokenization of `<think>`); anywhere later an open marker means nothing. It ends when the accepted
// tokens end with `close_tokens`. Without starts_inside and with no open_tokens it never starts.
//
// Counting: a reasoning token is a token accepted inside the block that is not part of the close marker
// (the open marker's tokens are not counted either). Once `budget` of them have been accepted and the block
// is still open, Process forces the rest of the close marker: every logit but that of its next token becomes
// -infinity, one token per step, continuing from where the model's own tokens left off if they already
// began it (then the tokens of the marker the model chose do not count, and the count ends below
// `budget`). After the close marker, forced or not, the processor lets every logit through.
//
// Token ids are compared, not text: give the tokenization the model writes (`</think>` is one added token
// in Qwen3 and DeepSeek-R1's vocabularies). Put it before a grammar constraint that applies only after the
// close marker (GrammarConstraint's `after` marker); a processor before it that disallows the forced token
// makes that step fail (every logit -infinity), which ends the request with an error.
//
// Thread-safety: one request's (LogitsProcessor).
#ifndef LLAMAY_ENGINE_REASONING_BUDGET_H_
#define LLAMAY_ENGINE_REASONING_BUDGET_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/logits_processor.h"

namespace llamay::engine {

class ReasoningBudget : public LogitsProcessor {
 public:
  // `budget`: the most reasoning tokens (0: the block closes at once); negative: no limit (only counts).
  // REQUIRES: close_tokens non-empty, every id in both sequences >= 0 (CHECKed).
  ReasoningBudget(std::vector<int32_t> open_tokens, std::vector<int32_t> close_tokens, bool starts_inside,
                  int budget);

  // InvalidArgument when forcing a token the logits do not reach.
  Status Process(std::span<float> logits) override;
  // InternalError when a forced step accepted another token (a processor after this one overrode it).
  Status Accept(int32_t token) override;
  std::unique_ptr<LogitsProcessor> Clone() const override;

  // Reasoning tokens accepted so far (see the top of this file).
  int reasoning_tokens() const { return counted_ - (matched_ - forced_); }
  // Inside the reasoning block: started and not yet closed.
  bool inside() const { return phase_ == Phase::kInside; }
  // Whether the next step is forced (the budget is spent inside the block).
  bool forcing() const;
  // After each Accept, reasoning_tokens() is stored into `counter` too, for the thread that reads the
  // request's output (the engine owns the processor; the value is read once the request's final event has
  // arrived). A Clone does not report.
  void ReportTo(std::shared_ptr<std::atomic<int>> counter) { report_ = std::move(counter); }

 private:
  enum class Phase {
    kStart,   // waiting to see whether the output begins with open_tokens
    kInside,  // in the block
    kDone,    // the block closed, or it never started: pass everything through
  };

  Status Step(int32_t token);
  // The length of the longest end of the block's tokens that begins close_, once `token` follows them.
  int MatchAfter(int32_t token) const;

  std::vector<int32_t> open_;
  std::vector<int32_t> close_;
  int budget_;
  Phase phase_;
  int open_matched_ = 0;  // kStart: the output's tokens so far equal open_'s first this many
  int counted_ = 0;       // tokens the model chose inside the block, those that may be the close marker's too
  int matched_ = 0;       // the block's tokens end with close_'s first this many
  int forced_ = 0;        // of those, how many were forced
  std::shared_ptr<std::atomic<int>> report_;
};

}  // namespace llamay::engine

#endif  // LLAMAY_ENGINE_REASONING_BUDGET_H_
