// The GBNF parser: llama.cpp's grammar text format to a syntax tree (ast.h).
//
// Accepted syntax (a superset of llama.cpp's, so its grammars parse unchanged):
//   rule        name ::= alternatives          names are letters, digits, '-' and '_'
//   alternatives  seq | seq | ...              an empty sequence matches the empty string
//   elements    "literal"  [class]  [^class]  .  name  ( alternatives )
//   postfix     *  +  ?  {m}  {m,}  {m,n}  {,n}
//   escapes     \n \r \t \\ \" \[ \] \- \^ \xHH \uHHHH \UHHHHHHHH (code points, as in llama.cpp), in
//               literals and classes; other characters stand for themselves (UTF-8)
//   comments    # to the end of the line
// Whitespace, newlines included, may appear between any two elements: a rule ends where the next
// `name ::=` begins (llama.cpp ends a rule at a newline outside parentheses; every grammar it accepts means
// the same here). `.` is any Unicode scalar value. Errors name the line and column.
//
// Thread-safety: a pure function.
#ifndef LLAMAY_GRAMMAR_GBNF_PARSER_H_
#define LLAMAY_GRAMMAR_GBNF_PARSER_H_

#include <string_view>

#include "base/status.h"
#include "grammar/ast.h"

namespace llamay::grammar::internal {

// Parses `text`; the rule named `root` is the start symbol. InvalidArgument, with "line L, column C: ..."
// for syntax errors, a rule defined twice, a reference to an undefined rule, or a missing root rule.
Result<GrammarAst> ParseGbnfAst(std::string_view text, std::string_view root);

}  // namespace llamay::grammar::internal

#endif  // LLAMAY_GRAMMAR_GBNF_PARSER_H_
