// The steps of the sampler chain, each a function over the set of tokens still in play (Candidates). The
// Sampler (sampler.h) runs them in order; they are exposed so that tests can check each step on its own.
//
// Conventions shared by every step:
// - The token order is "higher logit first, lower id on ties" (Before); it is a strict total order, so every
//   partial sort below selects and orders the same tokens on every standard library.
// - A NaN logit is treated as -infinity (never drawn while any other token remains).
// - A token's weight relative to the best logit m is exp((logit - m) / T), computed in double; a token whose
//   logit equals m weighs exactly 1 (which keeps +-infinity well-defined: when every logit is -inf, every
//   token weighs 1).
//
// Cost (V the vocabulary size, w the penalty window): penalties O(w log w); Fill O(V); FillTopK O(V) for
// logits in no particular order (O(V log k) at worst, logits ascending by id); top-p on an unsorted set O(V)
// exps plus a heap pass for the best 256, and a full sort only when those do not reach the mass (a flat
// distribution); on a sorted set O(kept). min-p O(size) without exps; draw O(size) exps. No step allocates
// once the Candidates' buffers have grown to the vocabulary.
//
// Thread-safety: pure functions of their arguments (the Candidates belong to one caller).
#ifndef LLAMAY_SAMPLING_CANDIDATES_H_
#define LLAMAY_SAMPLING_CANDIDATES_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace llamay::sampling {

struct Candidate {
  int32_t id;
  float logit;
};

// The strict total order of the chain: higher logit first, then lower id.
inline bool Before(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// exp((logit - max_logit) / temperature) in double; exactly 1 when logit == max_logit.
// REQUIRES: temperature > 0, logit <= max_logit, neither is NaN.
double RelativeWeight(float logit, float max_logit, double temperature);

struct Candidates {
  std::vector<Candidate> items;
  // True when items are in Before order (after top-k or top-p); min-p and the draw then skip their scans.
  bool sorted = false;
  // Scratch (the draw's weights, top-p's best prefix), kept here so that buffers are reused between calls.
  std::vector<double> weights;
  std::vector<Candidate> scratch;

  // The largest logit among items. REQUIRES: !items.empty().
  float MaxLogit() const;
};

// The penalties applied to tokens of the recent history. A token that occurs count > 0 times among the last
// `last_n` tokens of the history (the whole history when last_n == -1, none when 0) has its logit changed
// once, in this order:
//   repetition (llama.cpp / CTRL):  logit <= 0 ? logit * repeat : logit / repeat
//   frequency and presence (OpenAI): logit -= count * frequency + presence
struct Penalties {
  int last_n = 64;
  float repeat = 1.0f;
  float frequency = 0.0f;
  float presence = 0.0f;

  // False when the step cannot change any logit.
  bool active() const { return last_n != 0 && (repeat != 1.0f || frequency != 0.0f || presence != 0.0f); }
};

// The penalised logit of every token in the window, sorted by id (each id once): the overrides that Fill and
// FillTopK apply. Empty when the penalties are not active. History ids outside [0, logits.size()) are
// ignored. `window` is scratch, reused between calls.
void PenalizedLogits(const Penalties& penalties, std::span<const float> logits,
                     std::span<const int32_t> history, std::vector<int32_t>* window,
                     std::vector<Candidate>* overrides);

// Replaces the candidates with every token of `logits` in id order (items[i].id == i), NaN -> -inf, each
// token in `overrides` (sorted by id, as PenalizedLogits leaves them) taking its overriding logit.
void Fill(std::span<const float> logits, std::span<const Candidate> overrides, Candidates* c);

// Top-k: the same as Fill followed by keeping the k best tokens, sorted; without building the full set
// (one pass, a heap of k: one comparison for most tokens). When k <= 0 or k >= vocabulary, just Fill.
void FillTopK(int k, std::span<const float> logits, std::span<const Candidate> overrides, Candidates* c);

// Nucleus: with probabilities p_i = softmax of the current logits (temperature 1, over the current set only),
// keeps the smallest prefix in Before order whose mass reaches p (sum >= p), leaving it sorted. No-op when
// p >= 1. The best token is always kept.
void TopP(float p, Candidates* c);

// Keeps the tokens whose probability is at least p times the best token's (temperature 1), tested without
// exps as logit - max >= log(p) in double (and a token equal to the max is always kept); keeps the current
// order. No-op when p <= 0.
void MinP(float p, Candidates* c);

// Draws one item: with weights w_i = RelativeWeight(logit_i, max, temperature) summed in item order to W,
// returns the first index whose running sum exceeds u * W. A token of weight 0 is never returned.
// REQUIRES: !items.empty(), temperature > 0, 0 <= u < 1.
size_t Draw(double temperature, double u, Candidates* c);

}  // namespace llamay::sampling

#endif  // LLAMAY_SAMPLING_CANDIDATES_H_
