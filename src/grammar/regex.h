// JSON Schema `pattern` (an ECMAScript regular expression, as ajv compiles it with the u flag) to GBNF.
//
// Supported: literals, `.` (any character but \n \r U+2028 U+2029), classes [...] and [^...] with ranges
// and the escapes \d \D \w \W \s \S, character escapes (\t \n \r \f \v \0 \xHH \uHHHH \u{H..} and escaped
// syntax characters), groups ( ), (?: ) and (?<name> ), alternation |, quantifiers ? * + {m} {m,} {m,n}
// (lazy forms too: laziness does not change what matches), and the anchors ^ and $ at the start and end
// of a top-level alternative. A side without its anchor accepts any characters there, since a pattern
// matches anywhere in the string. Refused, with the reason: lookaround, backreferences, word boundaries,
// Unicode property escapes, \c, and anchors elsewhere.
//
// Thread-safety: a pure function.
#ifndef LLAMAY_GRAMMAR_REGEX_H_
#define LLAMAY_GRAMMAR_REGEX_H_

#include <string>
#include <string_view>

#include "base/status.h"

namespace llamay::grammar::internal {

// A GBNF expression matching the JSON string bodies (between the quotes, in JSON's escaped form) whose
// decoded value the pattern matches; it uses the JSON core rule `char`. InvalidArgument naming what is
// not supported or malformed.
Result<std::string> PatternToGbnf(std::string_view pattern);

}  // namespace llamay::grammar::internal

#endif  // LLAMAY_GRAMMAR_REGEX_H_
