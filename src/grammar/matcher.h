// Matcher: one constrained generation's position in a grammar, and the per-step token mask.
//
// State: a set of parser stacks (the grammar may be ambiguous, and a token may end where several rules
// could continue). Each stack is a chain of frames (automaton state, caller frame); the frames below the
// tops are shared in one small arena that Accept compacts, so a Matcher stays small and copying one is
// cheap: a copy is an independent fork of the constrained session (best-of-n, speculative branches).
//
// FillMask walks the vocabulary's trie depth-first from the current stacks, advancing them one byte per
// trie edge and skipping every subtree whose prefix the grammar rejects, so tokens with a common prefix
// share the work. Bytes cross token boundaries: a token may stop inside a UTF-8 character or a literal
// and the next token continues from there. A token is allowed iff Accept(token) would succeed.
//
// Lazy grammars (constrain only after a trigger such as "<tool_call>"): generate unconstrained, and when
// the output contains the trigger, start a Matcher whose grammar begins with the trigger and feed it
// AcceptBytes(trigger + whatever followed it in the same token); from then on use FillMask/Accept.
// AcceptBytes also forces a prefix (e.g. an assistant prefill) through the grammar.
//
// Thread-safety: not thread-safe (FillMask reuses scratch buffers); one Matcher per request. Distinct
// Matchers over the same Grammar and Vocabulary are independent.
#ifndef LLAMAY_GRAMMAR_MATCHER_H_
#define LLAMAY_GRAMMAR_MATCHER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "grammar/grammar.h"
#include "grammar/vocabulary.h"

namespace llamay::grammar {

// A bitset over token ids: bit t set = token t allowed.
class TokenMask {
 public:
  TokenMask() = default;
  explicit TokenMask(int32_t vocab_size) { Reset(vocab_size); }

  // Sizes the mask for `vocab_size` tokens, none allowed.
  void Reset(int32_t vocab_size);
  void Set(int32_t token) { words_[token >> 6] |= uint64_t{1} << (token & 63); }
  bool allowed(int32_t token) const { return (words_[token >> 6] >> (token & 63)) & 1; }
  int32_t size() const { return size_; }
  int32_t Count() const;
  // Allows every token set in `words`. REQUIRES: words.size() == words().size() (CHECKed).
  void Merge(std::span<const uint64_t> words);
  std::span<const uint64_t> words() const { return words_; }
  // Sets the logit of every disallowed token to -infinity. REQUIRES: logits.size() == size() (CHECKed).
  void Apply(std::span<float> logits) const;

 private:
  std::vector<uint64_t> words_;  // [ceil(size / 64)]
  int32_t size_ = 0;
};

class Matcher {
 public:
  // REQUIRES: grammar and vocabulary non-null (CHECKed).
  Matcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const Vocabulary> vocabulary);

  // Resizes `mask` to the vocabulary and sets exactly the allowed tokens: those whose bytes the grammar
  // accepts next, plus the end tokens when CanEnd(). Nothing once IsTerminated().
  void FillMask(TokenMask* mask) const;

  // Consumes a token. An end token terminates the match (allowed only when CanEnd()). FailedPrecondition,
  // with the state unchanged, for a token the mask would not allow; InvalidArgument for an id out of range.
  Status Accept(int32_t token);
  // Consumes bytes that need not be whole tokens. FailedPrecondition, state unchanged, naming the offset of
  // the first byte the grammar rejects.
  Status AcceptBytes(std::string_view bytes);

  // The bytes so far form a complete sentence of the grammar.
  bool CanEnd() const;
  // Complete, and no byte may follow: only an end token is possible (the caller may stop right away).
  bool MustEnd() const;
  // An end token was accepted.
  bool IsTerminated() const { return terminated_; }
  // The fewest bytes that would complete the grammar from here (0 when CanEnd()).
  int64_t MinBytesToEnd() const;
  // Whether `byte` may come next.
  bool AllowsByte(uint8_t byte) const;

  // Back to the start of the grammar.
  void Reset();

  // The mask cache (on by default): when the matcher sits, for the second time, alone in a state (a
  // typical string body), the tokens that stay inside that state's rule are remembered, and only the
  // tokens that leave the rule are checked against the whole stack from then on. Off gives the same
  // masks (tests check it), always by a full trie walk.
  void set_mask_cache(bool on) { use_cache_ = on; }

  const Grammar& grammar() const { return *grammar_; }
  const Vocabulary& vocabulary() const { return *vocab_; }
  // Live parser stacks (a measure of ambiguity; tests and benchmarks).
  int32_t num_stacks() const { return static_cast<int32_t>(stacks_.size()); }

  // A frame: an automaton state and the index of its caller frame in the arena (-1: the bottom).
  struct Frame {
    int32_t state;
    int32_t parent;
    bool operator==(const Frame&) const = default;
  };

 private:
  // The tokens accepted from a state whatever its caller, and those whose fate depends on the caller.
  struct CacheEntry {
    std::vector<uint64_t> accepted;  // [ceil(vocab / 64)] bitset
    std::vector<int32_t> dependent;
  };
  static constexpr size_t kMaxCacheEntries = 64;

  Status AdvanceBytes(std::string_view bytes, std::string_view what);
  void Compact();
  // Walks the vocabulary trie from the top frames `start`, calling on_token(id) for each token they
  // accept, and on_dependent(id) for each token rejected only after popping a kUnknownCaller frame.
  template <typename OnToken, typename OnDependent>
  void Walk(std::span<const Frame> start, OnToken on_token, OnDependent on_dependent) const;
  // The cache entry for a lone top state, built on its second visit; nullptr before that or when full.
  std::shared_ptr<const CacheEntry> CachedMask(int32_t state) const;
  // Whether `bytes` can follow the current stacks (the state is unchanged).
  bool AcceptsBytes(std::string_view bytes) const;

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const Vocabulary> vocab_;
  std::vector<Frame> nodes_;   // caller frames (the arena); a frame's parent index is below its own
  std::vector<Frame> stacks_;  // the top frame of each live stack; no duplicates
  bool terminated_ = false;
  bool use_cache_ = true;
  // The mask cache: entries by top state, and how often each state was seen alone (never shrinks; reset
  // with the matcher).
  mutable std::unordered_map<int32_t, std::shared_ptr<const CacheEntry>> cache_;
  mutable std::unordered_map<int32_t, int32_t> seen_;

  // FillMask scratch, reused across calls.
  mutable std::vector<Frame> walk_nodes_, walk_frames_, visited_, level_scratch_;
  mutable std::vector<int32_t> level_begin_, level_end_, level_nodes_;
  mutable std::vector<uint8_t> level_escaped_;
};

}  // namespace llamay::grammar

#endif  // LLAMAY_GRAMMAR_MATCHER_H_
