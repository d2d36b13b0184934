// The grammar syntax tree: what the GBNF parser produces and the compiler consumes.
//
// A grammar is a list of rules; each rule's body is an expression over code point sets (terminals), rule
// references, sequences, alternatives and bounded or unbounded repetition. Literals are sequences of
// one-code-point sets. Nothing here knows about bytes or tokens yet: compile.h lowers it to automata.
//
// Thread-safety: plain values.
#ifndef LLAMAY_GRAMMAR_AST_H_
#define LLAMAY_GRAMMAR_AST_H_

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "grammar/utf8.h"

namespace llamay::grammar::internal {

inline constexpr uint32_t kUnbounded = std::numeric_limits<uint32_t>::max();

struct Expr {
  enum class Kind : uint8_t { kSeq, kAlt, kChars, kRef, kRepeat };

  Kind kind = Kind::kSeq;
  std::vector<Expr> items;  // kSeq, kAlt: the parts (an empty kSeq matches the empty string); kRepeat: one
  CpSet chars;              // kChars: one code point from this set (normalized, never empty)
  int32_t rule = -1;        // kRef: the rule's index
  uint32_t min = 0;         // kRepeat: at least `min` ...
  uint32_t max = 0;         // ... and at most `max` (kUnbounded: no maximum) repetitions of items[0]
  int line = 0;             // kRef: where it was written, when the producer says (the GBNF parser does
  int column = 0;           // not: RuleDef holds each rule's first reference, for "undefined rule" errors)

  static Expr Seq(std::vector<Expr> parts) {
    Expr e;
    e.kind = Kind::kSeq;
    e.items = std::move(parts);
    return e;
  }
  static Expr Alt(std::vector<Expr> parts) {
    Expr e;
    e.kind = Kind::kAlt;
    e.items = std::move(parts);
    return e;
  }
  static Expr Chars(CpSet set) {
    Expr e;
    e.kind = Kind::kChars;
    e.chars = std::move(set);
    return e;
  }
  static Expr Ref(int32_t rule, int line = 0, int column = 0) {
    Expr e;
    e.kind = Kind::kRef;
    e.rule = rule;
    e.line = line;
    e.column = column;
    return e;
  }
  static Expr Repeat(Expr item, uint32_t min, uint32_t max) {
    Expr e;
    e.kind = Kind::kRepeat;
    e.items.push_back(std::move(item));
    e.min = min;
    e.max = max;
    return e;
  }
};

struct RuleDef {
  std::string name;
  Expr body;
  bool defined = false;
  int line = 0;  // where it was defined, or first referenced while undefined
  int column = 0;
};

struct GrammarAst {
  std::vector<RuleDef> rules;
  int32_t root = -1;
};

}  // namespace llamay::grammar::internal

#endif  // LLAMAY_GRAMMAR_AST_H_
