// The grammar compiler: syntax tree (ast.h) to automata (automaton.h).
//
// Steps: inline small non-recursive rules into their callers (fewer stack frames at match time); build a
// Thompson NFA per rule over UTF-8 byte ranges and rule references; split bytes into classes; determinise
// each rule (subset construction); trim states that cannot end their rule; refuse left recursion; compute
// first sets, can_pop and dist. Size limits keep a hostile grammar from exhausting memory.
//
// Thread-safety: a pure function.
#ifndef LLAMAY_GRAMMAR_COMPILE_H_
#define LLAMAY_GRAMMAR_COMPILE_H_

#include "base/status.h"
#include "grammar/ast.h"
#include "grammar/automaton.h"

namespace llamay::grammar::internal {

// InvalidArgument for left recursion (naming the cycle of rules), a rule that can never end, or a grammar
// whose automata would exceed the size limits.
Result<Automaton> Compile(GrammarAst ast);

}  // namespace llamay::grammar::internal

#endif  // LLAMAY_GRAMMAR_COMPILE_H_
