// Draft tokens for speculative decoding, with no draft model (docs/server.md, "Speculative decoding").
//
// Agents' output repeats its input: a file rewritten with a few lines changed, quoted tool results, JSON
// arguments emitted again, earlier reasoning restated. A draft is a guess at the next tokens taken from
// text already seen; the engine verifies it in one forward step and keeps only the tokens that the model's
// own sampling would have produced, so drafts change speed, never output. Two sources:
// - LookupDraft: the request's own tokens (prompt lookup). The longest recent suffix of the history that
//   occurred before is found again, and what followed it then is the draft.
// - SuffixIndex: sequences other requests computed (finished contexts: their prompts and outputs), for
//   text the request has not seen itself but the server has (a fork's sibling, the previous turn of another
//   session).
//
// Thread-safety: LookupDraft is a pure function. A SuffixIndex is used by the scheduler thread only.
#ifndef LLAMAY_ENGINE_DRAFT_H_
#define LLAMAY_ENGINE_DRAFT_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <unordered_map>
#include <vector>

namespace llamay::engine {

struct Draft {
  std::vector<int32_t> tokens;
  size_t match = 0;  // the length of the suffix that matched (0: no draft)
};

// The tokens that followed the most recent earlier occurrence of the history's last n tokens, for the
// largest n in [min_ngram, max_ngram] that occurs earlier; at most `max` of them. A match may overlap the
// suffix itself (a repeating pattern then continues). REQUIRES: 1 <= min_ngram <= max_ngram.
Draft LookupDraft(std::span<const int32_t> history, size_t max, size_t min_ngram, size_t max_ngram);

// The most recent `max_tokens` tokens of sequences added to it, indexed by their n-grams of `ngram`
// tokens: Lookup finds the latest occurrence of the history's last `ngram` tokens and drafts what followed.
// What a decode step costs against its tokens: seconds = a + b * tokens, a least-squares fit with
// exponentially decaying weights over recent decode and verification steps (the engine's; prefill steps
// are not counted). On a CPU decode reads every weight once per step, so b is a small share of a + b; a
// model small enough to sit in cache computes rather than reads, and b approaches a.
class StepCost {
 public:
  void Add(double tokens, double seconds);
  // b / (a + b): what one more token adds to a one-token step, as a share of it; `fallback` until steps of
  // several sizes have been seen.
  double ExtraTokenShare(double fallback) const;

 private:
  double w_ = 0, x_ = 0, y_ = 0, xx_ = 0, xy_ = 0;  // decayed sums of 1, tokens, seconds, tokens^2, tokens*seconds
};

// The draft length with the most expected tokens per unit of step cost, (1 + p + p^2 + ... + p^k) /
// (1 + k * share): p is the chance that each drafted token is taken (given those before it were), share
// what one more token costs (StepCost). 0 when no length in [1, max] is expected to gain `min_gain` (1.05:
// 5% more tokens per unit of time than plain decode).
size_t BestDraftLength(double p, double share, size_t max, double min_gain);

class SuffixIndex {
 public:
  SuffixIndex(size_t max_tokens, size_t ngram);
  // Indexes a sequence (a finished request's context). Older sequences are dropped past max_tokens.
  void Add(std::span<const int32_t> tokens);
  Draft Lookup(std::span<const int32_t> history, size_t max) const;
  size_t tokens() const { return tokens_; }

 private:
  struct Where {
    uint64_t seq = 0;  // serial of the sequence
    uint32_t end = 0;  // position after the n-gram in it
  };
  uint64_t Hash(const int32_t* p) const;
  void Rebuild();

  const size_t max_tokens_, ngram_;
  std::deque<std::vector<int32_t>> seqs_;  // oldest first; seqs_[i] has serial first_ + i
  uint64_t first_ = 0;
  size_t tokens_ = 0;
  std::unordered_map<uint64_t, Where> index_;  // n-gram hash -> its latest occurrence (stale once dropped)
};

}  // namespace llamay::engine

#endif  // LLAMAY_ENGINE_DRAFT_H_
