// The Lark grammar tokenizer (see lark_internal.h): names, "strings" with their i flag, /regexes/ with
// their flags, numbers, punctuation and %directives; comments (// and #) and backslash line continuations
// dropped; one kNewline ending each statement, none before a continuation line's '|'.
#include <algorithm>

#include "grammar/gbnf_text.h"
#include "grammar/lark_internal.h"

namespace llamay::grammar::internal {
namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
bool IsDigitChar(char c) { return c >= '0' && c <= '9'; }

// A literal's body starting after its opening delimiter at *i; *i ends after the closing one.
Result<std::string> LiteralBody(std::string_view text, size_t* i, char delim, int line) {
  size_t j = *i;
  while (true) {
    if (j >= text.size()) {
      return LarkError(line, delim == '"' ? "an unterminated string" : "an unterminated regex");
    }
    const char c = text[j];
    if (c == '\\' && j + 1 < text.size() && (text[j + 1] == delim || text[j + 1] == '\\')) {
      j += 2;
    } else if (c == delim) {
      break;
    } else if (c == '\n') {
      return LarkError(line, delim == '"' ? "a newline in a string literal"
                                          : "a newline in a regex (lark allows it only with the x flag)");
    } else {
      ++j;
    }
  }
  std::string body(text.substr(*i, j - *i));
  *i = j + 1;
  return body;
}

}  // namespace

Status LarkError(int line, std::string_view message) {
  return InvalidArgumentError(Cat("Lark grammar line ", std::to_string(line), ": ", message));
}

Result<std::vector<Token>> Tokenize(std::string_view text) {
  std::vector<Token> raw;
  int line = 1;
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    const char next = i + 1 < text.size() ? text[i + 1] : '\0';
    Token t;
    t.line = line;
    if (c == ' ' || c == '\t' || c == '\r' || c == '\f') {
      ++i;
      continue;
    }
    if (c == '\n') {
      t.kind = Tok::kNewline;
      ++line;
      ++i;
    } else if (c == '\\') {  // a line continuation
      size_t j = i + 1;
      while (j < text.size() && (text[j] == ' ' || text[j] == '\r')) ++j;
      if (j >= text.size() || text[j] != '\n') return LarkError(line, "a backslash outside a literal");
      ++line;
      i = j + 1;
      continue;
    } else if ((c == '/' && next == '/') || c == '#') {  // a comment
      while (i < text.size() && text[i] != '\n') ++i;
      continue;
    } else if (c == '"' || c == '/') {
      t.kind = c == '"' ? Tok::kString : Tok::kRegex;
      ++i;
      LLAMAY_ASSIGN_OR_RETURN(t.text, LiteralBody(text, &i, c, line));
      if (c == '"' && i < text.size() && text[i] == 'i' &&
          (i + 1 >= text.size() || !IsNameChar(text[i + 1]))) {
        t.flags.push_back('i');
        ++i;
      }
      while (c == '/' && i < text.size() &&
             std::string_view("imslux").find(text[i]) != std::string_view::npos) {
        t.flags += text[i++];
      }
    } else if (c == '%' || IsNameChar(c)) {
      t.kind = c == '%' ? Tok::kDirective : IsDigitChar(c) ? Tok::kNumber : Tok::kName;
      size_t j = i + 1;
      while (j < text.size() && IsNameChar(text[j])) ++j;
      t.text = std::string(text.substr(i, j - i));
      if (t.kind == Tok::kNumber && !std::all_of(t.text.begin(), t.text.end(), IsDigitChar)) {
        return LarkError(line, Cat("a malformed number \"", t.text, "\""));
      }
      i = j;
    } else if (c == '-' && next == '>') {
      t.kind = Tok::kPunct;
      t.text = std::string(text.substr(i, 2));
      i += 2;
    } else if (c == '.' && next == '.') {
      t.kind = Tok::kPunct;
      t.text = std::string(text.substr(i, 2));
      i += 2;
    } else if (std::string_view(":|()[]?*+~.,{}!-").find(c) != std::string_view::npos) {
      t.kind = Tok::kPunct;
      t.text = std::string(1, c);
      ++i;
    } else {
      return LarkError(line, Cat("an unexpected character '", std::string(1, c), "'"));
    }
    raw.push_back(std::move(t));
  }
  std::vector<Token> out;
  for (size_t k = 0; k < raw.size(); ++k) {
    if (raw[k].kind != Tok::kNewline) {
      out.push_back(std::move(raw[k]));
      continue;
    }
    size_t m = k;
    while (m < raw.size() && raw[m].kind == Tok::kNewline) ++m;
    const bool continued = m < raw.size() && raw[m].Is(Tok::kPunct, "|");
    if (!continued && !out.empty() && out.back().kind != Tok::kNewline) out.push_back(std::move(raw[k]));
    k = m - 1;
  }
  if (!out.empty() && out.back().kind != Tok::kNewline) out.push_back({Tok::kNewline, "", "", line});
  out.push_back({Tok::kEnd, "", "", line});
  return out;
}

}  // namespace llamay::grammar::internal
