// Matcher: byte steps over the parser stacks, the trie walk that fills the mask, and stack compaction.
#include "grammar/matcher.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <limits>
#include <string>
#include <unordered_map>
#include <utility>

#include "base/check.h"
#include "grammar/automaton.h"

namespace llamay::grammar {
namespace {

using Frame = Matcher::Frame;
using internal::Automaton;

// The caller of a frame whose context is unknown (a mask cache entry is built without one): popping it
// means the token's fate depends on the context.
constexpr int32_t kUnknownCaller = -2;

// Advances top frames by one byte. Descending into a rule appends the caller's resume frame to `nodes`.
class Stepper {
 public:
  Stepper(const Automaton& a, std::vector<Frame>* nodes, std::vector<Frame>* visited)
      : a_(a), nodes_(*nodes), visited_(*visited) {}

  // Appends to *out (keeping out[out_begin, end) free of duplicates) every top frame reachable from `top`
  // by consuming `b`: along the state's byte edge, inside the rules it references, or, where its rule can
  // end, in the caller's frame. REQUIRES: visited cleared before the first Step of each byte.
  void Step(Frame top, uint8_t b, std::vector<Frame>* out, size_t out_begin) {
    const Automaton::State& st = a_.states[top.state];
    const int32_t t = a_.Next(top.state, b);
    if (st.simple) {
      if (t >= 0) Add(out, out_begin, {t, top.parent});
      return;
    }
    if (!a_.first[top.state].Has(b) && !st.can_pop) return;
    if (t >= 0) Add(out, out_begin, {t, top.parent});
    for (uint32_t i = st.ref_begin; i < st.ref_end; ++i) {
      const Automaton::Ref ref = a_.refs[i];
      const int32_t start = a_.rule_start[ref.rule];
      if (a_.first[start].Has(b)) {
        nodes_.push_back({ref.target, top.parent});
        Step({start, static_cast<int32_t>(nodes_.size()) - 1}, b, out, out_begin);
      } else if (a_.states[start].can_pop) {
        Enter({ref.target, top.parent}, b, out, out_begin);  // the rule matches nothing here
      }
    }
    if (st.final) {
      if (top.parent >= 0) {
        Enter(nodes_[top.parent], b, out, out_begin);
      } else if (top.parent == kUnknownCaller) {
        escaped_ = true;
      }
    }
  }

  // Whether a Step since the last call popped a frame whose caller is kUnknownCaller.
  bool TakeEscaped() {
    const bool e = escaped_;
    escaped_ = false;
    return e;
  }

 private:
  // A frame reached without consuming (a pop, or past an empty rule): each is stepped once per byte, which
  // also ends loops through rules that match the empty string.
  void Enter(Frame f, uint8_t b, std::vector<Frame>* out, size_t out_begin) {
    if (std::find(visited_.begin(), visited_.end(), f) != visited_.end()) return;
    visited_.push_back(f);
    Step(f, b, out, out_begin);
  }

  static void Add(std::vector<Frame>* out, size_t begin, Frame f) {
    for (size_t k = begin; k < out->size(); ++k) {
      if ((*out)[k] == f) return;
    }
    out->push_back(f);
  }

  const Automaton& a_;
  std::vector<Frame>& nodes_;
  std::vector<Frame>& visited_;
  bool escaped_ = false;
};

std::string Hex(uint8_t b) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "0x%02x", b);
  return buf;
}

}  // namespace

void TokenMask::Reset(int32_t vocab_size) {
  size_ = vocab_size;
  words_.assign((static_cast<size_t>(vocab_size) + 63) / 64, 0);
}

void TokenMask::Merge(std::span<const uint64_t> words) {
  LLAMAY_CHECK(words.size() == words_.size());
  for (size_t i = 0; i < words.size(); ++i) words_[i] |= words[i];
}

int32_t TokenMask::Count() const {
  int32_t n = 0;
  for (uint64_t w : words_) n += std::popcount(w);
  return n;
}

void TokenMask::Apply(std::span<float> logits) const {
  LLAMAY_CHECK(static_cast<int32_t>(logits.size()) == size_)
      << "mask of " << size_ << " for " << logits.size();
  for (int32_t t = 0; t < size_; ++t) {
    if (!allowed(t)) logits[t] = -std::numeric_limits<float>::infinity();
  }
}

Matcher::Matcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const Vocabulary> vocabulary)
    : grammar_(std::move(grammar)), vocab_(std::move(vocabulary)) {
  LLAMAY_CHECK(grammar_ != nullptr && vocab_ != nullptr);
  Reset();
}

void Matcher::Reset() {
  const Automaton& a = grammar_->automaton();
  nodes_.clear();
  stacks_.assign(1, Frame{a.rule_start[a.root], -1});
  terminated_ = false;
}

bool Matcher::CanEnd() const {
  const Automaton& a = grammar_->automaton();
  for (Frame f : stacks_) {
    while (a.states[f.state].can_pop) {
      if (f.parent < 0) return true;
      f = nodes_[f.parent];
    }
  }
  return false;
}

bool Matcher::AllowsByte(uint8_t byte) const {
  const Automaton& a = grammar_->automaton();
  for (Frame f : stacks_) {
    while (true) {
      if (a.first[f.state].Has(byte)) return true;
      if (!a.states[f.state].can_pop || f.parent < 0) break;
      f = nodes_[f.parent];
    }
  }
  return false;
}

bool Matcher::MustEnd() const {
  if (terminated_ || !CanEnd()) return false;
  for (int b = 0; b < 256; ++b) {
    if (AllowsByte(static_cast<uint8_t>(b))) return false;
  }
  return true;
}

int64_t Matcher::MinBytesToEnd() const {
  const Automaton& a = grammar_->automaton();
  int64_t best = std::numeric_limits<int64_t>::max();
  for (Frame f : stacks_) {
    int64_t total = a.states[f.state].dist;
    while (f.parent >= 0) {
      f = nodes_[f.parent];
      total += a.states[f.state].dist;
    }
    best = std::min(best, total);
  }
  return best;
}

template <typename OnToken, typename OnDependent>
void Matcher::Walk(std::span<const Frame> start, OnToken on_token, OnDependent on_dependent) const {
  const TokenTrie& trie = vocab_->trie();
  const Automaton& a = grammar_->automaton();
  // Level d holds the top frames after the d bytes of the current trie path:
  // walk_frames_[level_begin_[d], level_end_[d]); frames it pushed end at walk_nodes_[level_nodes_[d]];
  // level_escaped_[d]: some path along those bytes popped a frame of unknown caller.
  walk_nodes_.assign(nodes_.begin(), nodes_.end());
  walk_frames_.assign(start.begin(), start.end());
  const size_t levels = static_cast<size_t>(trie.max_depth) + 1;
  level_begin_.assign(levels, 0);
  level_end_.assign(levels, 0);
  level_nodes_.assign(levels, 0);
  level_escaped_.assign(levels, 0);
  level_end_[0] = static_cast<int32_t>(start.size());
  level_nodes_[0] = static_cast<int32_t>(nodes_.size());
  Stepper stepper(a, &walk_nodes_, &visited_);
  // Raw views of the hot arrays: the loop below runs once per trie node reached.
  const uint8_t* const byte = trie.byte.data();
  const uint16_t* const depth = trie.depth.data();
  const int32_t* const subtree_end = trie.subtree_end.data();
  const int32_t* const token_begin = trie.token_begin.data();
  const int32_t* const tokens = trie.tokens.data();
  int32_t* const lbegin = level_begin_.data();
  int32_t* const lend = level_end_.data();
  int32_t* const lnodes = level_nodes_.data();
  uint8_t* const lescaped = level_escaped_.data();
  const uint8_t* const simple = a.simple.data();
  const uint8_t* const loop_kinds = a.loop_kinds.data();
  const uint8_t* const kinds = trie.kinds.data();
  const uint16_t* const height = trie.height.data();
  const int32_t* const text_run = a.text_run.data();
  const int32_t n = trie.size();
  int32_t i = 1;
  while (i < n) {
    const int d = depth[i];
    const int32_t begin = lbegin[d - 1], base = lend[d - 1];
    const uint8_t b = byte[i];
    bool escaped = lescaped[d - 1];
    int32_t size;
    if (base - begin == 1 && simple[walk_frames_[begin].state]) {
      // The common case inside a string or a literal: one stack, one table lookup, nothing pushed.
      const Frame f = walk_frames_[begin];
      if ((kinds[i] & ~loop_kinds[f.state]) == 0 ||
          ((kinds[i] & ~kKindText) == 0 && height[i] <= text_run[f.state])) {
        // Every byte below loops on this state, or is text and the state takes that much text whatever it
        // is (inside a string, plain or counted): the whole subtree is allowed.
        for (int32_t k = token_begin[i]; k < token_begin[subtree_end[i]]; ++k) on_token(tokens[k]);
        i = subtree_end[i];
        continue;
      }
      const int32_t t = a.Next(f.state, b);
      size = base;
      if (t >= 0) {
        if (walk_frames_.size() <= static_cast<size_t>(base)) walk_frames_.resize(base + 1);
        walk_frames_[base] = {t, f.parent};
        size = base + 1;
        lnodes[d] = lnodes[d - 1];
      }
    } else {
      walk_frames_.resize(base);
      walk_nodes_.resize(lnodes[d - 1]);
      visited_.clear();
      for (int32_t k = begin; k < base; ++k) stepper.Step(walk_frames_[k], b, &walk_frames_, base);
      escaped |= stepper.TakeEscaped();
      size = static_cast<int32_t>(walk_frames_.size());
      lnodes[d] = static_cast<int32_t>(walk_nodes_.size());
    }
    if (size == base) {
      // The grammar rejects this prefix here: skip every token that starts with it, unless the context
      // might still accept them.
      if (escaped) {
        for (int32_t k = token_begin[i]; k < token_begin[subtree_end[i]]; ++k) on_dependent(tokens[k]);
      }
      i = subtree_end[i];
      continue;
    }
    lbegin[d] = base;
    lend[d] = size;
    lescaped[d] = escaped;
    for (int32_t k = token_begin[i]; k < token_begin[i + 1]; ++k) on_token(tokens[k]);
    ++i;
  }
}

std::shared_ptr<const Matcher::CacheEntry> Matcher::CachedMask(int32_t state) const {
  const auto it = cache_.find(state);
  if (it != cache_.end()) return it->second;
  // Built on a state's second lone visit: states seen once (a long counted repetition) are not worth it.
  if (++seen_[state] < 2 || cache_.size() >= kMaxCacheEntries) return nullptr;
  auto entry = std::make_shared<CacheEntry>();
  entry->accepted.assign((static_cast<size_t>(vocab_->size()) + 63) / 64, 0);
  const Frame start{state, kUnknownCaller};
  Walk(
      std::span<const Frame>(&start, 1),
      [&](int32_t t) { entry->accepted[t >> 6] |= uint64_t{1} << (t & 63); },
      [&](int32_t t) { entry->dependent.push_back(t); });
  // Each dependent token costs a check against the whole stack at every use: where they are many (a
  // state that can end its rule on almost any byte, such as inside a number), the full walk is cheaper,
  // and the state keeps a null entry so it is not walked twice for nothing.
  if (entry->dependent.size() > std::max<size_t>(512, vocab_->size() / 16)) entry = nullptr;
  cache_.emplace(state, entry);
  return entry;
}

bool Matcher::AcceptsBytes(std::string_view bytes) const {
  walk_nodes_.assign(nodes_.begin(), nodes_.end());
  walk_frames_.assign(stacks_.begin(), stacks_.end());
  Stepper stepper(grammar_->automaton(), &walk_nodes_, &visited_);
  std::vector<Frame>& next = level_scratch_;
  for (char c : bytes) {
    next.clear();
    visited_.clear();
    for (Frame f : walk_frames_) stepper.Step(f, static_cast<uint8_t>(c), &next, 0);
    if (next.empty()) return false;
    walk_frames_.swap(next);
  }
  return true;
}

void Matcher::FillMask(TokenMask* mask) const {
  mask->Reset(vocab_->size());
  if (terminated_) return;
  if (CanEnd()) {
    for (int32_t t : vocab_->end_tokens()) mask->Set(t);
  }
  // One stack whose top state recurs (inside a string, most often): the tokens that stay inside its frame
  // come from the cache; only those that leave it are checked against the whole stack.
  std::shared_ptr<const CacheEntry> entry;
  if (use_cache_ && stacks_.size() == 1) entry = CachedMask(stacks_[0].state);
  if (entry != nullptr) {
    mask->Merge(entry->accepted);
    for (int32_t t : entry->dependent) {
      if (AcceptsBytes(vocab_->token_bytes(t))) mask->Set(t);
    }
    return;
  }
  Walk(
      stacks_, [&](int32_t t) { mask->Set(t); }, [](int32_t) {});
}

Status Matcher::Accept(int32_t token) {
  if (token < 0 || token >= vocab_->size()) {
    return InvalidArgumentError("token " + std::to_string(token) + " is outside the vocabulary");
  }
  if (terminated_)
    return FailedPreconditionError("the grammar has already ended (an end token was accepted)");
  if (vocab_->is_end_token(token)) {
    if (!CanEnd()) {
      return FailedPreconditionError("end token " + std::to_string(token) +
                                     " before the grammar is complete");
    }
    terminated_ = true;
    return Status::Ok();
  }
  const std::string& bytes = vocab_->token_bytes(token);
  if (bytes.empty()) {
    return FailedPreconditionError("token " + std::to_string(token) + " has no bytes and is never allowed");
  }
  return AdvanceBytes(bytes, "token " + std::to_string(token));
}

Status Matcher::AcceptBytes(std::string_view bytes) {
  if (terminated_)
    return FailedPreconditionError("the grammar has already ended (an end token was accepted)");
  return AdvanceBytes(bytes, "bytes");
}

Status Matcher::AdvanceBytes(std::string_view bytes, std::string_view what) {
  const size_t saved_nodes = nodes_.size();
  std::vector<Frame> cur = stacks_, next, visited;
  Stepper stepper(grammar_->automaton(), &nodes_, &visited);
  for (size_t k = 0; k < bytes.size(); ++k) {
    next.clear();
    visited.clear();
    const uint8_t b = static_cast<uint8_t>(bytes[k]);
    for (Frame f : cur) stepper.Step(f, b, &next, 0);
    if (next.empty()) {
      nodes_.resize(saved_nodes);
      return FailedPreconditionError(std::string(what) + " is not allowed by the grammar here: byte " +
                                     std::to_string(k) + " of " + std::to_string(bytes.size()) + " (" +
                                     Hex(b) + ") is rejected");
    }
    cur.swap(next);
  }
  stacks_ = std::move(cur);
  Compact();
  return Status::Ok();
}

// Keeps only the arena frames the live stacks reach, merging identical chains (same state, same caller),
// so the arena stays as small as the stacks themselves and copying a Matcher stays cheap.
void Matcher::Compact() {
  std::vector<uint8_t> live(nodes_.size(), 0);
  for (const Frame& f : stacks_) {
    for (int32_t p = f.parent; p >= 0 && !live[p]; p = nodes_[p].parent) live[p] = 1;
  }
  std::vector<int32_t> new_id(nodes_.size(), -1);
  std::vector<Frame> kept;
  std::unordered_map<uint64_t, int32_t> ids;
  for (size_t i = 0; i < nodes_.size(); ++i) {  // a frame's caller always has a lower index
    if (!live[i]) continue;
    Frame f = nodes_[i];
    if (f.parent >= 0) f.parent = new_id[f.parent];
    const uint64_t key = (uint64_t{static_cast<uint32_t>(f.state)} << 32) | static_cast<uint32_t>(f.parent);
    const auto [it, inserted] = ids.emplace(key, static_cast<int32_t>(kept.size()));
    if (inserted) kept.push_back(f);
    new_id[i] = it->second;
  }
  std::vector<Frame> stacks;
  for (Frame f : stacks_) {
    if (f.parent >= 0) f.parent = new_id[f.parent];
    if (std::find(stacks.begin(), stacks.end(), f) == stacks.end()) stacks.push_back(f);
  }
  nodes_ = std::move(kept);
  stacks_ = std::move(stacks);
}

}  // namespace llamay::grammar
