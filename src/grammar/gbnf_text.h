// Helpers for writing GBNF text (the JSON Schema converter generates GBNF, then compiles it).
//
// Thread-safety: pure functions, and GbnfRules is a plain value.
#ifndef LLAMAY_GRAMMAR_GBNF_TEXT_H_
#define LLAMAY_GRAMMAR_GBNF_TEXT_H_

#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "grammar/utf8.h"

namespace llamay::grammar::internal {

// Concatenation by appends. (g++ 12 wrongly reports -Wrestrict on some `"literal" + std::string`.)
template <typename... Parts>
std::string Cat(const Parts&... parts) {
  std::string out;
  (out.append(std::string_view(parts)), ...);
  return out;
}

// A GBNF string literal matching exactly the bytes of `utf8` (valid UTF-8).
std::string GbnfLiteral(std::string_view utf8);
// A GBNF character class matching one code point of `set` (normalized, non-empty).
std::string GbnfClass(const CpSet& set);
// A GBNF expression matching the JSON string-body encodings of one code point of `set`: the character
// itself where JSON allows it raw, else its escape (\" \\ \n ... \u00XX). "" when the set is empty.
std::string JsonCharExpr(const CpSet& set);

// "( a | b | ... )", or the one alternative itself.
std::string GbnfAlternatives(const std::vector<std::string>& alts);

// Rules being generated: unique names, bodies in creation order. With a prefix, every name NewName
// returns starts with it (so the rules of several generated grammars can share one GBNF text).
class GbnfRules {
 public:
  // REQUIRES: prefix is made of GBNF name characters (letters, digits, '-', '_').
  explicit GbnfRules(std::string prefix = "");
  // Reserves `name` (so generated rules never take it).
  void Reserve(const std::string& name) { names_.insert(name); }
  // A fresh rule name: the prefix, then `hint` reduced to letters, digits and '-'.
  std::string NewName(std::string_view hint);
  // Defines a rule (REQUIRES: name from NewName, defined once).
  void Define(const std::string& name, std::string body) { rules_.emplace_back(name, std::move(body)); }
  // NewName + Define; returns the name.
  std::string Add(std::string_view hint, std::string body);
  // Every rule, one per line.
  std::string Text() const;

 private:
  std::string prefix_;
  std::set<std::string> names_;
  std::unordered_map<std::string, int> next_suffix_;  // per base: the next suffix NewName tries after it
  std::vector<std::pair<std::string, std::string>> rules_;
};

}  // namespace llamay::grammar::internal

#endif  // LLAMAY_GRAMMAR_GBNF_TEXT_H_
