// The compiler's passes, shared by compile.cc, inline.cc and analyze.cc (see compile.h for the pipeline).
//
// Thread-safety: pure functions.
#ifndef LLAMAY_GRAMMAR_COMPILE_INTERNAL_H_
#define LLAMAY_GRAMMAR_COMPILE_INTERNAL_H_

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "grammar/ast.h"
#include "grammar/automaton.h"

namespace llamay::grammar::internal {

// Inlines every reference to a non-recursive rule whose body is small enough (counting repetitions) into
// the referring rule, then drops the rules the root no longer reaches and renumbers the rest (the root
// keeps its name). The language is unchanged.
void InlineRules(GrammarAst* ast);

// The rules each rule's body references, in order of first appearance.
std::vector<std::vector<int32_t>> ReferencedRules(const GrammarAst& ast);

// After determinisation (states, trans, refs and rule_start filled): trims dead states and refuses rules
// that can never end, computes can_pop, refuses left recursion, then computes first, dist and simple.
Status Analyze(Automaton* a);

}  // namespace llamay::grammar::internal

#endif  // LLAMAY_GRAMMAR_COMPILE_INTERNAL_H_
