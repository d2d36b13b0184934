// Lexer: template source -> a flat token stream (text, tag delimiters, expression tokens), with Jinja2's
// whitespace handling applied to the text tokens as HF transformers configures it.
//
// Whitespace rules (Jinja2 with trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False):
//   - "\r\n" and "\r" become "\n" everywhere (string literals included); one trailing newline is dropped.
//   - `{%-`, `{{-`, `{#-` strip all whitespace before the tag; `-%}`, `-}}`, `-#}` all whitespace after.
//   - trim_blocks: a `%}` or `#}` (not `}}`) swallows one newline right after it; `+%}` keeps it.
//   - lstrip_blocks: spaces and tabs between the start of a line and a `{%` or `{#` (not `{{`) are removed;
//     `{%+` keeps them. A line starts at the template start, after a newline in the text, or right after a
//     tag whose end swallowed a newline.
// Inside tags, an end delimiter counts only outside brackets, so `{{ {'a': {'b': 1}} }}` lexes as a dict.
//
// Errors: InvalidArgument with the line and column of the problem ("line 3, column 7: ...").
// Thread-safety: pure function.
#ifndef LLAMAY_TEMPLATE_LEXER_H_
#define LLAMAY_TEMPLATE_LEXER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace llamay::chat::internal {

enum class TokenKind : uint8_t {
  kText,        // literal output
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,        // identifier (keywords such as `if`, `and`, `true` included)
  kString,      // string literal, escapes decoded
  kInt,
  kFloat,
  kOp,  // operator or punctuation: + - * / // % ** ~ == != < <= > >= = ( ) [ ] { } , . : | ;
  kEof,
};

struct Token {
  TokenKind kind = TokenKind::kEof;
  std::string text;  // text, name, operator or decoded string
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;
  int col = 1;
};

// The tokens of `source`, ending with one kEof.
Result<std::vector<Token>> Tokenize(std::string_view source);

// "line L, column C: message" as an InvalidArgument.
Status SyntaxError(int line, int col, std::string_view message);

}  // namespace llamay::chat::internal

#endif  // LLAMAY_TEMPLATE_LEXER_H_
