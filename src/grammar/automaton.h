// The compiled form of a grammar: one deterministic automaton per rule over bytes and rule references.
//
// Each rule is a DFA whose edges are bytes (through byte classes: bytes no edge label tells apart share a
// class) or references to other rules. A parser stack is a chain of frames; the top frame is a state of
// the rule being matched, the frames below hold the states to resume in their callers once it ends. A
// byte step (matcher.cc) follows the top state's byte edge, descends into referenced rules, or, where the
// top state is final, pops to the caller. Left recursion is refused at compile time, so descending always
// terminates; every state can reach the end of its rule (dead states are trimmed), so any prefix the
// automaton accepts can be completed.
//
// Per state, precomputed: `first` (the bytes that can be consumed without leaving the rule), `can_pop`
// (the rule can end here, maybe after sub-rules that match nothing) and `dist` (the fewest bytes that end
// the rule from here).
//
// Thread-safety: immutable once built; shared read-only by every Matcher.
#ifndef LLAMAY_GRAMMAR_AUTOMATON_H_
#define LLAMAY_GRAMMAR_AUTOMATON_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace llamay::grammar::internal {

// A set of byte values.
struct ByteSet {
  std::array<uint64_t, 4> w{};
  bool Has(uint8_t b) const { return (w[b >> 6] >> (b & 63)) & 1; }
  void Set(uint8_t b) { w[b >> 6] |= uint64_t{1} << (b & 63); }
  bool Empty() const { return (w[0] | w[1] | w[2] | w[3]) == 0; }
  // Adds `o`; true when that changed this set.
  bool Merge(const ByteSet& o) {
    bool changed = false;
    for (int i = 0; i < 4; ++i) {
      const uint64_t v = w[i] | o.w[i];
      changed |= v != w[i];
      w[i] = v;
    }
    return changed;
  }
};

struct Automaton {
  struct State {
    int32_t rule = 0;        // the rule this state belongs to
    uint32_t ref_begin = 0;  // refs[ref_begin, ref_end): this state's rule-reference edges
    uint32_t ref_end = 0;
    bool final = false;    // the rule may end here
    bool can_pop = false;  // the rule may end here without consuming a byte (dist == 0)
    bool simple = false;   // no reference edges and not final: a byte step is one table lookup
    int32_t dist = 0;      // fewest bytes from here to the end of the rule
  };
  // Entering `rule` from a state; when it ends, matching resumes at `target` (same rule as the source).
  struct Ref {
    int32_t rule = 0;
    int32_t target = 0;
  };

  int32_t num_classes = 1;
  std::array<uint8_t, 256> byte_class{};
  std::vector<int32_t> trans;  // [state * num_classes + class]: the next state, or -1
  std::vector<State> states;
  std::vector<ByteSet> first;       // [state]
  std::vector<uint8_t> simple;      // [state]: states[s].simple, packed for the mask walk
  std::vector<uint8_t> loop_kinds;  // [state]: ByteKind bits whose every byte leads back to this state
  // [state]: how many text bytes (ByteKind kKindText) in a row are accepted from here whatever they are:
  // each leads, all to the same simple state, onward (a counted string: its remaining length; a loop: a
  // large number). 0 when text bytes branch or are refused.
  std::vector<int32_t> text_run;
  std::vector<Ref> refs;
  std::vector<int32_t> rule_start;  // [rule]: its start state
  std::vector<std::string> rule_names;
  int32_t root = 0;  // the start rule

  int32_t Next(int32_t state, uint8_t byte) const {
    return trans[static_cast<size_t>(state) * num_classes + byte_class[byte]];
  }
};

}  // namespace llamay::grammar::internal

#endif  // LLAMAY_GRAMMAR_AUTOMATON_H_
