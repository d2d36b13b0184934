// Lark grammars (and plain regexes) of OpenAI "custom tools" to one anchored ECMAScript regex.
//
// A Responses API custom tool may constrain its free-text input with {"type": "grammar", "syntax":
// "lark" | "regex", "definition": "..."} (Codex CLI's apply_patch is one). When a Lark grammar is not
// recursive its language is regular, and LarkToRegex inlines every rule into one regex in exactly the
// subset PatternToGbnf (regex.h) reads, so the input can be constrained as the JSON Schema
// {"type": "string", "pattern": <regex>} with no new grammar machinery.
//
// The contract: the regex is "^...$" and matches exactly the strings that the start rule derives when every
// terminal stands for the strings its pattern matches in full, with one exception below (\d \w). Lark's
// lexer is not modelled (longest match, lazy quantifiers, terminal priorities, the contextual lexer): where
// the lexer would split a string differently from every derivation, lark itself may reject a string the
// regex accepts. Non-ASCII characters are written as \uHHHH or \u{H...} escapes, so read the regex with
// the u flag (as ajv and PatternToGbnf do).
//
// Supported Lark: rules `name: ...` (lowercase, with the ?/! modifiers and the _ prefix), terminals
// `NAME: ...` (uppercase), priorities `name.2:` (ignored: they do not change the language), alternatives
// `|` (also on continuation lines that start with `|`), `( )`, `[ ]`, `?`, `*`, `+`, `~ n`, `~ n..m`,
// string literals "..." with Lark's escapes, ranges "a".."z", regex literals /.../ in Python `re` syntax
// with the flags i and s, aliases `-> name` (ignored), comments (// and #), backslash line continuations,
// and `%import common.X`, `%import common.X -> Y`, `%import common (X, Y)` for lark's common.lark
// terminals: DIGIT HEXDIGIT INT SIGNED_INT DECIMAL FLOAT SIGNED_FLOAT NUMBER SIGNED_NUMBER ESCAPED_STRING
// LCASE_LETTER UCASE_LETTER LETTER WORD CNAME WS_INLINE WS CR LF NEWLINE SH_COMMENT CPP_COMMENT C_COMMENT
// SQL_COMMENT (as lark-parser/lark defines them; ESCAPED_STRING by its meaning, "(?:[^"\\\n]|\\[^\n])*",
// since lark writes it with a lookbehind; the letters are ASCII).
//
// Python regex syntax is translated where ECMAScript differs: `.` is [^\n] (every character with s), \s is
// Python's whitespace set, ']' first in a set and '{' that is not a quantifier are literals, {,n} is
// {0,n}, octal escapes, \a, \Uhhhhhhhh, (?P<name>...) and (?#...). \d and \w (and \D \W) take their ASCII
// meaning, as under Python's re.ASCII (Python's default also admits non-ASCII digits and letters).
//
// The i flag (on strings, "abc"i, and on regexes) is expanded case-insensitively for ASCII letters
// ("ab"i is [Aa][Bb]); a non-ASCII character under it is refused, since its case variants are not known
// here.
//
// Refused with InvalidArgument, naming the rule and the line: recursion, direct or indirect (the language
// may not be regular); undefined rules or terminals; a rule used inside a terminal; %ignore (it lets the
// ignored text appear between any two tokens, which changes the language); %declare (a declared terminal
// has no pattern); %override, %extend and imports other than common.X; templates; regex flags other than
// i and s; what PatternToGbnf cannot take (anchors, lookaround, backreferences, word boundaries, atomic
// groups, possessive quantifiers, inline flags, \N{...}, counts above 10000); empty literals; and a
// grammar whose inlined regex would exceed 32768 nodes.
//
// Thread-safety: pure functions.
#ifndef LLAMAY_GRAMMAR_LARK_H_
#define LLAMAY_GRAMMAR_LARK_H_

#include <string>
#include <string_view>

#include "base/status.h"

namespace llamay::grammar {

// The anchored regex of the language the rule `start` of `lark_grammar` derives (see above).
Result<std::string> LarkToRegex(std::string_view lark_grammar, std::string_view start = "start");

// A custom tool's grammar as an anchored regex: syntax "lark" through LarkToRegex; "regex" as given (an
// ECMAScript pattern in PatternToGbnf's subset, checked by it) when it starts with ^, ends with $ and has
// no top-level |, else as ^(?:...)$ with the ^ and $ anchors at the edges of its top-level alternatives
// dropped (the whole input must match, so they change nothing). InvalidArgument for any other syntax and
// for what the conversion or the check refuses.
Result<std::string> RegexForCustomTool(std::string_view syntax, std::string_view definition);

}  // namespace llamay::grammar

#endif  // LLAMAY_GRAMMAR_LARK_H_
