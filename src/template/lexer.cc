#include "template/lexer.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>

#include "template/value.h"

namespace llamay::chat::internal {

Status SyntaxError(int line, int col, std::string_view message) {
  return InvalidArgumentError("line " + std::to_string(line) + ", column " + std::to_string(col) + ": " +
                              std::string(message));
}

namespace {

// Python's str.isspace() over ASCII (what str.strip() and re's \s remove).
bool IsSpace(char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || IsDigit(c); }
int HexValue(char c) {
  if (IsDigit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Operators, longest first so that "//" wins over "/".
constexpr std::string_view kOperators[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*",
                                           "/",  "%",  "~",  "<",  ">",  "=",  "(", ")", "[",
                                           "]",  "{",  "}",  ",",  ".",  ":",  "|", ";"};

class Lexer {
 public:
  explicit Lexer(std::string_view source) {
    // Newline normalisation, then keep_trailing_newline=False.
    src_.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        src_.push_back('\n');
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      } else {
        src_.push_back(source[i]);
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  Result<std::vector<Token>> Run() {
    size_t pos = 0;
    const size_t n = src_.size();
    while (pos < n) {
      size_t start = FindTagStart(pos);
      if (start == std::string::npos) {
        Emit(TokenKind::kText, src_.substr(pos), pos);
        break;
      }
      const char type = src_[start + 1];
      size_t p = start + 2;
      char flag = 0;
      if (p < n && (src_[p] == '-' || src_[p] == '+')) flag = src_[p++];
      std::string text = src_.substr(pos, start - pos);
      StripBeforeTag(type, flag, &text);
      if (!text.empty()) Emit(TokenKind::kText, std::move(text), pos);
      size_t raw_body = 0;
      if (type == '%' && MatchRawBegin(&p, &raw_body)) {
        LLAMAY_RETURN_IF_ERROR(LexRaw(start, raw_body, &p));
      } else if (type == '#') {
        LLAMAY_RETURN_IF_ERROR(LexComment(start, &p));
      } else {
        LLAMAY_RETURN_IF_ERROR(LexTag(start, type == '%', &p));
      }
      pos = p;
    }
    Token eof;
    eof.kind = TokenKind::kEof;
    Locate(src_.size(), &eof);
    tokens_.push_back(std::move(eof));
    return std::move(tokens_);
  }

 private:
  size_t FindTagStart(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return std::string::npos;
  }

  void StripBeforeTag(char type, char flag, std::string* text) const {
    if (flag == '-') {
      size_t end = text->size();
      while (end > 0 && IsSpace((*text)[end - 1])) --end;
      text->resize(end);
      return;
    }
    if (flag == '+' || type == '{') return;  // lstrip_blocks applies to blocks and comments only
    size_t nl = text->rfind('\n');
    size_t line_pos = nl == std::string::npos ? 0 : nl + 1;
    if (line_pos == 0 && !line_starting_) return;
    for (size_t i = line_pos; i < text->size(); ++i) {
      if (!IsSpace((*text)[i])) return;
    }
    text->resize(line_pos);
  }

  // After a tag end: `-` strips all whitespace, trim_blocks one newline (blocks and comments).
  void StripAfterTag(char flag, bool trim_newline, size_t* p) {
    size_t start = *p;
    if (flag == '-') {
      while (*p < src_.size() && IsSpace(src_[*p])) ++*p;
    } else if (flag != '+' && trim_newline && *p < src_.size() && src_[*p] == '\n') {
      ++*p;
    }
    line_starting_ = *p > start && src_[*p - 1] == '\n';
  }

  // `{% raw %}` or `{% raw -%}` at *p (just after `{%` and its flag): on a match, *body is where the raw
  // text starts (a `-%}` strips the whitespace after it; a plain `%}` keeps even the newline).
  bool MatchRawBegin(size_t* p, size_t* body) {
    size_t q = *p;
    while (q < src_.size() && IsSpace(src_[q])) ++q;
    if (src_.compare(q, 3, "raw") != 0 || (q + 3 < src_.size() && IsNameChar(src_[q + 3]))) return false;
    q += 3;
    while (q < src_.size() && IsSpace(src_[q])) ++q;
    const size_t tag_end = q;
    if (src_.compare(q, 3, "-%}") == 0) {
      q += 3;
      while (q < src_.size() && IsSpace(src_[q])) ++q;
    } else if (src_.compare(q, 2, "%}") == 0) {
      q += 2;
    } else {
      return false;
    }
    line_starting_ = q > tag_end && src_[q - 1] == '\n';
    *p = q;
    *body = q;
    return true;
  }

  // The raw text up to `{% endraw %}` (with the usual whitespace control on both sides of that tag).
  Status LexRaw(size_t start, size_t body, size_t* p) {
    for (size_t at = src_.find("{%", body); at != std::string::npos; at = src_.find("{%", at + 1)) {
      size_t q = at + 2;
      char flag = 0;
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) flag = src_[q++];
      while (q < src_.size() && IsSpace(src_[q])) ++q;
      if (src_.compare(q, 6, "endraw") != 0) continue;
      q += 6;
      while (q < src_.size() && IsSpace(src_[q])) ++q;
      char end_flag = 0;
      size_t len = MatchTagEnd(/*block=*/true, q, &end_flag);
      if (len == 0) continue;
      std::string text = src_.substr(body, at - body);
      StripBeforeTag('%', flag, &text);
      if (!text.empty()) Emit(TokenKind::kText, std::move(text), body);
      *p = q + len;
      StripAfterTag(end_flag, /*trim_newline=*/true, p);
      return Status::Ok();
    }
    return ErrorAt(start, "missing end of raw directive");
  }

  Status LexComment(size_t start, size_t* p) {
    size_t end = src_.find("#}", *p);
    if (end == std::string::npos) return ErrorAt(start, "missing end of comment tag");
    char flag = (end > *p && (src_[end - 1] == '-' || src_[end - 1] == '+')) ? src_[end - 1] : 0;
    *p = end + 2;
    StripAfterTag(flag, /*trim_newline=*/true, p);
    return Status::Ok();
  }

  Status LexTag(size_t start, bool block, size_t* p) {
    Emit(block ? TokenKind::kBlockBegin : TokenKind::kVarBegin, "", start);
    std::vector<char> brackets;
    while (true) {
      while (*p < src_.size() && IsSpace(src_[*p])) ++*p;
      if (*p >= src_.size()) {
        return ErrorAt(start, block ? "unexpected end of template, expected '%}'"
                                    : "unexpected end of template, expected '}}'");
      }
      if (brackets.empty()) {
        char end_flag = 0;
        size_t len = MatchTagEnd(block, *p, &end_flag);
        if (len > 0) {
          Emit(block ? TokenKind::kBlockEnd : TokenKind::kVarEnd, "", *p);
          *p += len;
          StripAfterTag(end_flag, /*trim_newline=*/block, p);
          return Status::Ok();
        }
      }
      LLAMAY_RETURN_IF_ERROR(LexExprToken(p, &brackets));
    }
  }

  // Length of the end delimiter at `p` (0 if none); its whitespace flag in *flag.
  size_t MatchTagEnd(bool block, size_t p, char* flag) const {
    std::string_view rest(src_.data() + p, src_.size() - p);
    std::string_view close = block ? "%}" : "}}";
    if (rest.substr(0, close.size()) == close) return close.size();
    if (rest.size() > close.size() && rest.substr(1, close.size()) == close &&
        (rest[0] == '-' || (block && rest[0] == '+'))) {
      *flag = rest[0];
      return close.size() + 1;
    }
    return 0;
  }

  Status LexExprToken(size_t* p, std::vector<char>* brackets) {
    const size_t start = *p;
    const char c = src_[start];
    if (c == '\'' || c == '"') return LexString(p);
    if (IsDigit(c)) return LexNumber(p);
    if (IsNameStart(c)) {
      while (*p < src_.size() && IsNameChar(src_[*p])) ++*p;
      Emit(TokenKind::kName, src_.substr(start, *p - start), start);
      return Status::Ok();
    }
    std::string_view rest(src_.data() + start, src_.size() - start);
    for (std::string_view op : kOperators) {
      if (rest.substr(0, op.size()) != op) continue;
      if (op == "(" || op == "[" || op == "{") {
        brackets->push_back(op[0] == '(' ? ')' : op[0] == '[' ? ']' : '}');
      } else if (op == ")" || op == "]" || op == "}") {
        if (brackets->empty()) return ErrorAt(start, "unexpected '" + std::string(op) + "'");
        if (brackets->back() != op[0]) {
          return ErrorAt(start, "unexpected '" + std::string(op) + "', expected '" + brackets->back() + "'");
        }
        brackets->pop_back();
      }
      *p += op.size();
      Emit(TokenKind::kOp, std::string(op), start);
      return Status::Ok();
    }
    return ErrorAt(start, std::string("unexpected char '") + c + "'");
  }

  Status LexString(size_t* p) {
    const size_t start = *p;
    const char quote = src_[start];
    std::string value;
    size_t i = start + 1;
    while (true) {
      if (i >= src_.size()) return ErrorAt(start, "unterminated string literal");
      char c = src_[i];
      if (c == quote) break;
      if (c != '\\') {
        value.push_back(c);
        ++i;
        continue;
      }
      if (i + 1 >= src_.size()) return ErrorAt(start, "unterminated string literal");
      char e = src_[i + 1];
      i += 2;
      switch (e) {
        case '\n':
          break;  // line continuation
        case '\\':
          value.push_back('\\');
          break;
        case '\'':
          value.push_back('\'');
          break;
        case '"':
          value.push_back('"');
          break;
        case 'a':
          value.push_back('\a');
          break;
        case 'b':
          value.push_back('\b');
          break;
        case 'f':
          value.push_back('\f');
          break;
        case 'n':
          value.push_back('\n');
          break;
        case 'r':
          value.push_back('\r');
          break;
        case 't':
          value.push_back('\t');
          break;
        case 'v':
          value.push_back('\v');
          break;
        case 'x':
        case 'u':
        case 'U': {
          int digits = e == 'x' ? 2 : (e == 'u' ? 4 : 8);
          uint32_t cp = 0;
          for (int k = 0; k < digits; ++k) {
            int h = i < src_.size() ? HexValue(src_[i]) : -1;
            if (h < 0) return ErrorAt(i, std::string("truncated \\") + e + " escape");
            cp = cp * 16 + static_cast<uint32_t>(h);
            ++i;
          }
          if (cp > 0x10FFFF) return ErrorAt(i, "illegal Unicode character in escape");
          AppendUtf8(cp, &value);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = static_cast<uint32_t>(e - '0');
            for (int k = 0; k < 2 && i < src_.size() && src_[i] >= '0' && src_[i] <= '7'; ++k, ++i) {
              cp = cp * 8 + static_cast<uint32_t>(src_[i] - '0');
            }
            AppendUtf8(cp, &value);
          } else if (e == 'N') {
            return ErrorAt(i - 2, "\\N{...} escapes are not supported");
          } else {  // Python keeps unknown escapes as written
            value.push_back('\\');
            value.push_back(e);
          }
      }
    }
    *p = i + 1;
    Emit(TokenKind::kString, std::move(value), start);
    return Status::Ok();
  }

  // Jinja's float `(?<!\.)(\d+_)*\d+((\.(\d+_)*\d+)?e[+-]?(\d+_)*\d+|\.(\d+_)*\d+)`, tried first, then its
  // integer `0b(_?[01])+ | 0o(_?[0-7])+ | 0x(_?[0-9a-f])+ | [1-9](_?\d)* | 0(_?0)*` (so `012` is two tokens).
  Status LexNumber(size_t* p) {
    const size_t start = *p;
    auto run = [&](size_t i, auto is_digit) {  // end of (_?D)* starting at i
      while (true) {
        if (i < src_.size() && is_digit(src_[i])) {
          ++i;
        } else if (i + 1 < src_.size() && src_[i] == '_' && is_digit(src_[i + 1])) {
          i += 2;
        } else {
          return i;
        }
      }
    };
    auto dec = [](char c) { return IsDigit(c); };
    size_t end = start;
    bool is_float = false;
    if (start == 0 || src_[start - 1] != '.') {
      size_t i = run(start, dec), k = i;
      if (i + 1 < src_.size() && src_[i] == '.' && IsDigit(src_[i + 1])) {
        k = run(i + 1, dec);
        is_float = true;
        end = k;
      }
      if (k < src_.size() && (src_[k] == 'e' || src_[k] == 'E')) {
        size_t m = k + 1;
        if (m < src_.size() && (src_[m] == '+' || src_[m] == '-')) ++m;
        if (m < src_.size() && IsDigit(src_[m])) {
          is_float = true;
          end = run(m, dec);
        }
      }
    }
    int base = 10;
    size_t digits_start = start;
    if (!is_float) {
      const char prefix = start + 1 < src_.size() ? static_cast<char>(src_[start + 1] | 0x20) : 0;
      auto bin = [](char c) { return c == '0' || c == '1'; };
      auto oct = [](char c) { return c >= '0' && c <= '7'; };
      auto hex = [](char c) { return HexValue(c) >= 0; };
      if (src_[start] == '0' && (prefix == 'b' || prefix == 'o' || prefix == 'x')) {
        base = prefix == 'b' ? 2 : prefix == 'o' ? 8 : 16;
        size_t i = start + 2;
        end = base == 2 ? run(i, bin) : base == 8 ? run(i, oct) : run(i, hex);
        if (end == i) {
          base = 10;  // no digits after the prefix: just "0"
          end = start + 1;
        } else {
          digits_start = i;
        }
      } else if (src_[start] == '0') {
        end = run(start + 1, [](char c) { return c == '0'; });
      } else {
        end = run(start, dec);
      }
    }
    std::string text;
    for (size_t k = digits_start; k < end; ++k) {
      if (src_[k] != '_') text.push_back(src_[k]);
    }
    *p = end;
    Token& tok = Emit(is_float ? TokenKind::kFloat : TokenKind::kInt, text, start);
    if (is_float) {
      tok.float_value = std::strtod(text.c_str(), nullptr);
      return Status::Ok();
    }
    errno = 0;
    unsigned long long v = std::strtoull(text.c_str(), nullptr, base);
    if (errno == ERANGE || v > static_cast<unsigned long long>(INT64_MAX)) {
      return ErrorAt(start, "integer literal out of range");
    }
    tok.int_value = static_cast<int64_t>(v);
    return Status::Ok();
  }

  Token& Emit(TokenKind kind, std::string text, size_t offset) {
    Token tok;
    tok.kind = kind;
    tok.text = std::move(text);
    Locate(offset, &tok);
    tokens_.push_back(std::move(tok));
    return tokens_.back();
  }

  void Locate(size_t offset, Token* tok) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    size_t line = static_cast<size_t>(it - line_starts_.begin());
    tok->line = static_cast<int>(line);
    tok->col = static_cast<int>(offset - line_starts_[line - 1]) + 1;
  }

  Status ErrorAt(size_t offset, std::string_view message) const {
    Token tok;
    Locate(offset, &tok);
    return SyntaxError(tok.line, tok.col, message);
  }

  std::string src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
  bool line_starting_ = true;
};

}  // namespace

Result<std::vector<Token>> Tokenize(std::string_view source) { return Lexer(source).Run(); }

}  // namespace llamay::chat::internal
