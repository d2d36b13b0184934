// The JSON grammar rules every JSON grammar here builds on (AnyJson and JSON Schema grammars).
//
// Rules: value, object, member, array, string, char (one character of a string body: a raw UTF-8
// character other than '"', '\\' and U+0000..U+001F, or an escape; \u escapes of surrogates are excluded,
// so every string decodes to valid Unicode and counts one code point per char), number, int (an integer
// part of at most 16 digits), frac, exp, ws. Whitespace policy (docs/grammar.md): ws is nothing, one
// space, or a newline followed by at most 20 spaces or tabs; it may follow '{', '[', ',' and ':', and
// precede '}' and ']'; never before ',' or ':' and never around the top-level value. Numbers have at most
// 16 integer digits, 16 fraction digits and a 2-digit exponent, so every one is finite as a double.
//
// Thread-safety: constants.
#ifndef LLAMAY_GRAMMAR_JSON_CORE_H_
#define LLAMAY_GRAMMAR_JSON_CORE_H_

#include <string>

namespace llamay::grammar::internal {

// The rules above, without a root rule.
const std::string& JsonCoreGbnf();
// Names JsonCoreGbnf defines (a generated grammar must not reuse them).
const char* const* JsonCoreRuleNames();

}  // namespace llamay::grammar::internal

#endif  // LLAMAY_GRAMMAR_JSON_CORE_H_
