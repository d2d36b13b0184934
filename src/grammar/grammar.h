// Constrained decoding: grammars that decide, at each decode step, which tokens may come next.
//
// A Grammar is compiled once from llama.cpp's GBNF (ParseGbnf), from a JSON Schema (FromJsonSchema,
// json_schema.h) or built in (AnyJson, AnyJsonObject). It is matched over bytes, not characters: tokens are
// arbitrary byte strings and may end in the middle of a UTF-8 character or of a literal. A Vocabulary
// (vocabulary.h) holds a model's token bytes and a trie over them, built once per model. A Matcher
// (matcher.h), one per request, tracks the bytes generated so far and fills the per-step token mask.
//
//   auto grammar = grammar::FromJsonSchema(schema);            // or ParseGbnf(text), AnyJson()
//   auto vocab = grammar::Vocabulary::Build(token_bytes, {eos_id});
//   grammar::Matcher m(*grammar, *vocab);
//   grammar::TokenMask mask;
//   while (!m.IsTerminated()) {
//     m.FillMask(&mask);          // allowed tokens; end tokens exactly when m.CanEnd()
//     mask.Apply(logits);         // disallowed logits -> -inf
//     int32_t t = sample(logits);
//     CHECK(m.Accept(t).ok());    // always OK for a token the mask allowed
//   }
//
// docs/grammar.md lists the supported GBNF, the JSON Schema subset and the whitespace policy, and explains
// how the mask is computed and what it costs.
//
// Thread-safety: a Grammar is immutable; share it (shared_ptr<const Grammar>) across threads and requests.
#ifndef LLAMAY_GRAMMAR_GRAMMAR_H_
#define LLAMAY_GRAMMAR_GRAMMAR_H_

#include <bitset>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

namespace llamay::grammar {

namespace internal {
struct Automaton;
}

class Grammar {
 public:
  // Use ParseGbnf, FromJsonSchema, AnyJson or AnyJsonObject.
  Grammar(std::unique_ptr<const internal::Automaton> automaton, std::string gbnf);
  ~Grammar();
  Grammar(const Grammar&) = delete;
  Grammar& operator=(const Grammar&) = delete;

  // The GBNF text this grammar was compiled from (for a JSON Schema: the generated grammar).
  const std::string& gbnf() const { return gbnf_; }
  // Rules left after inlining, and automaton states (a measure of the grammar's size).
  int32_t num_rules() const;
  int32_t num_states() const;
  // Bytes held: the automaton's tables and the GBNF text (what a cache of grammars counts).
  size_t memory_bytes() const;
  // The bytes that begin a byte class (bytes that no edge label tells apart share a class; byte 0 always
  // begins one). The classes of a grammar made of several grammars' rules begin at the union of theirs,
  // and its transition table has one entry per state and class.
  std::bitset<256> byte_class_starts() const;

  const internal::Automaton& automaton() const { return *automaton_; }

 private:
  std::unique_ptr<const internal::Automaton> automaton_;
  std::string gbnf_;
};

// The size limits of a compiled grammar (docs/grammar.md): automaton states over all rules, transition
// table entries (states times byte classes), states of the intermediate NFA, and NFA states summed over the
// automaton states' sets (the subset construction's work and memory: the largest grammars of the tests and
// benchmarks, a 100,000-value enum among them, stay under 400,000, about 2 a state; ambiguous nested
// repetitions reached 6.8M at the state limit, 0.7 s of a core). A grammar beyond them is refused with
// InvalidArgument "grammar too large: ...".
inline constexpr int32_t kMaxAutomatonStates = 250'000;
inline constexpr int64_t kMaxAutomatonTransitions = 16'000'000;
inline constexpr int64_t kMaxNfaStates = 1'000'000;
inline constexpr int64_t kMaxNfaSetElements = 2'000'000;

// Compiles a GBNF grammar whose start symbol is the rule `root`. InvalidArgument with the line and column
// for syntax errors, undefined or doubly defined rules; with the rule names for left recursion (refused,
// as llama.cpp refuses it) and for rules that can never complete.
Result<std::shared_ptr<const Grammar>> ParseGbnf(std::string_view text, std::string_view root = "root");

// Any JSON value / any JSON object (response_format json_object), with the whitespace policy of
// docs/grammar.md: no whitespace before or after the value; between tokens, nothing, one space, or a
// newline and up to 20 spaces or tabs. The GBNF text is AnyJsonGbnf().
std::shared_ptr<const Grammar> AnyJson();
std::shared_ptr<const Grammar> AnyJsonObject();
// The GBNF of AnyJson (rule `root`); its rules (value, object, array, string, number, ws, ...) are what
// JSON Schema grammars build on.
const std::string& AnyJsonGbnf();
// The rules of AnyJsonGbnf without `root`: what a grammar that embeds JSON values or JsonSchemaRulesGbnf
// rules appends once. Its rule names (value, object, member, array, string, char, number, int, frac, exp,
// ws) are taken.
const std::string& JsonRulesGbnf();

}  // namespace llamay::grammar

#endif  // LLAMAY_GRAMMAR_GRAMMAR_H_
