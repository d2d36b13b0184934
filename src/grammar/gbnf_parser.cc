// GBNF text to syntax tree: a recursive-descent parser (see gbnf_parser.h for the accepted syntax).
#include "grammar/gbnf_parser.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace llamay::grammar::internal {
namespace {

constexpr uint32_t kMaxRepeatCount = 100000;

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Result<GrammarAst> Run(std::string_view root_name) {
    SkipSpace();
    while (!AtEnd()) {
      if (Peek() == ')') return Fail("unmatched ')'"), error_;
      if (!ParseRule()) return error_;
      SkipSpace();
    }
    // Lines and columns in the order of the text, so that one scan finds them all.
    std::vector<int32_t> order(ast_.rules.size());
    for (size_t r = 0; r < order.size(); ++r) order[r] = static_cast<int32_t>(r);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return rule_pos_[a] < rule_pos_[b]; });
    for (int32_t r : order) LineColumn(rule_pos_[r], &ast_.rules[r].line, &ast_.rules[r].column);
    for (const RuleDef& r : ast_.rules) {
      if (!r.defined) {
        return InvalidArgumentError("line " + std::to_string(r.line) + ", column " +
                                    std::to_string(r.column) + ": undefined rule '" + r.name + "'");
      }
    }
    const auto it = ids_.find(std::string(root_name));
    if (it == ids_.end())
      return InvalidArgumentError("grammar has no rule named '" + std::string(root_name) + "'");
    ast_.root = it->second;
    return std::move(ast_);
  }

 private:
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek(size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }

  // The line and column of byte `pos`. Positions asked for in increasing order (the rules', sorted, at the
  // end) resume where the last one stopped. Never asked per element: a scan from the start at every rule
  // reference was quadratic in a generated grammar of megabytes (minutes for 2,000 tools).
  void LineColumn(size_t pos, int* line, int* column) {
    if (pos < lc_pos_) lc_pos_ = 0, lc_line_ = 1, lc_column_ = 1;
    for (size_t i = lc_pos_; i < pos && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++lc_line_;
        lc_column_ = 1;
      } else if ((static_cast<uint8_t>(text_[i]) & 0xC0) != 0x80) {
        ++lc_column_;  // count characters, not UTF-8 continuation bytes
      }
    }
    lc_pos_ = std::min(pos, text_.size());
    *line = lc_line_;
    *column = lc_column_;
  }

  bool Fail(const std::string& message) { return FailAt(pos_, message); }
  bool FailAt(size_t pos, const std::string& message) {
    int line, column;
    LineColumn(pos, &line, &column);
    error_ = InvalidArgumentError("line " + std::to_string(line) + ", column " + std::to_string(column) +
                                  ": " + message);
    return false;
  }

  // Spaces, tabs, newlines and # comments.
  void SkipSpace() {
    while (!AtEnd()) {
      const char c = Peek();
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        ++pos_;
      } else if (c == '#') {
        while (!AtEnd() && Peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string_view ParseName() {
    const size_t start = pos_;
    while (!AtEnd() && IsNameChar(Peek())) ++pos_;
    return text_.substr(start, pos_ - start);
  }

  // True when a `name ::=` starts here (the end of the current rule); consumes nothing.
  bool AtRuleStart() {
    const size_t saved = pos_;
    const bool is_rule = !ParseName().empty() && (SkipSpace(), text_.substr(pos_, 3) == "::=");
    pos_ = saved;
    return is_rule;
  }

  int32_t RuleId(std::string_view name, size_t pos) {
    const auto found = ids_.find(name);
    if (found != ids_.end()) return found->second;
    const int32_t id = static_cast<int32_t>(ast_.rules.size());
    ids_.emplace(std::string(name), id);
    RuleDef def;
    def.name = std::string(name);
    ast_.rules.push_back(std::move(def));
    rule_pos_.push_back(pos);
    return id;
  }

  bool ParseRule() {
    const size_t start = pos_;
    const std::string_view name = ParseName();
    if (name.empty()) return Fail(std::string("expected a rule name, found '") + Peek() + "'");
    SkipSpace();
    if (text_.substr(pos_, 3) != "::=")
      return Fail("expected '::=' after rule name '" + std::string(name) + "'");
    pos_ += 3;
    const int32_t id = RuleId(name, start);
    if (ast_.rules[id].defined) return FailAt(start, "rule '" + std::string(name) + "' is defined twice");
    Expr body;
    if (!ParseAlternatives(&body)) return false;
    RuleDef& def = ast_.rules[id];
    def.defined = true;
    rule_pos_[id] = start;
    def.body = std::move(body);
    return true;
  }

  bool ParseAlternatives(Expr* out) {
    std::vector<Expr> alts;
    while (true) {
      Expr seq;
      if (!ParseSequence(&seq)) return false;
      alts.push_back(std::move(seq));
      if (Peek() != '|') break;
      ++pos_;
    }
    *out = alts.size() == 1 ? std::move(alts[0]) : Expr::Alt(std::move(alts));
    return true;
  }

  bool ParseSequence(Expr* out) {
    std::vector<Expr> items;
    while (true) {
      SkipSpace();
      if (AtEnd() || Peek() == '|' || Peek() == ')' || AtRuleStart()) break;
      Expr item;
      if (!ParsePrimary(&item)) return false;
      if (!ParsePostfix(&item)) return false;
      items.push_back(std::move(item));
    }
    *out = items.size() == 1 ? std::move(items[0]) : Expr::Seq(std::move(items));
    return true;
  }

  bool ParsePrimary(Expr* out) {
    const size_t start = pos_;
    const char c = Peek();
    if (c == '"') {
      ++pos_;
      return ParseLiteral(out);
    }
    if (c == '[') {
      ++pos_;
      return ParseClass(out);
    }
    if (c == '.') {
      ++pos_;
      *out = Expr::Chars(AnyScalar());
      return true;
    }
    if (c == '(') {
      // The parser and every pass over the tree recurse once per level: a bound keeps a request's grammar
      // from overflowing a server thread's stack (route_fuzz's request_fuzz found 3 KB of '(' did).
      if (depth_ >= kMaxGroupDepth)
        return Fail("groups nested more than " + std::to_string(kMaxGroupDepth) + " deep");
      ++pos_;
      ++depth_;
      SkipSpace();
      const bool ok = ParseAlternatives(out);
      --depth_;
      if (!ok) return false;
      if (Peek() != ')') return Fail("expected ')' to close the group opened earlier");
      ++pos_;
      return true;
    }
    if (IsNameChar(c)) {
      const std::string_view name = ParseName();
      *out = Expr::Ref(RuleId(name, start));  // its rule's RuleDef has the position errors need
      return true;
    }
    if (c == '<') return Fail("token references (<...>) are not supported");
    if (c == ')') return Fail("unmatched ')'");
    return Fail(std::string("unexpected character '") + c + "'");
  }

  // One character of a literal or class: an escape or a UTF-8 character.
  bool ParseChar(uint32_t* cp) {
    if (AtEnd()) return Fail("unexpected end of grammar");
    if (Peek() != '\\') {
      size_t p = pos_;
      if (!DecodeUtf8(text_, &p, cp)) return Fail("invalid UTF-8 in grammar text");
      pos_ = p;
      return true;
    }
    const size_t start = pos_;
    const char e = Peek(1);
    pos_ += 2;
    switch (e) {
      case 'n':
        *cp = '\n';
        return true;
      case 'r':
        *cp = '\r';
        return true;
      case 't':
        *cp = '\t';
        return true;
      case '\\':
      case '"':
      case '[':
      case ']':
      case '-':
      case '^':
        *cp = static_cast<uint8_t>(e);
        return true;
      case 'x':
        return ParseHex(2, start, cp);
      case 'u':
        return ParseHex(4, start, cp);
      case 'U':
        return ParseHex(8, start, cp);
      default:
        return FailAt(start, std::string("unknown escape '\\") + e + "'");
    }
  }

  bool ParseHex(int digits, size_t start, uint32_t* cp) {
    uint64_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const int h = HexValue(Peek());
      if (h < 0) return FailAt(start, "expected " + std::to_string(digits) + " hex digits in escape");
      v = v * 16 + h;
      ++pos_;
    }
    if (v > kMaxCodePoint || (v >= 0xD800 && v <= 0xDFFF)) {
      return FailAt(start, "escape is not a Unicode scalar value");
    }
    *cp = static_cast<uint32_t>(v);
    return true;
  }

  bool ParseLiteral(Expr* out) {
    const size_t start = pos_ - 1;
    std::vector<Expr> chars;
    while (Peek() != '"') {
      if (AtEnd()) return FailAt(start, "unterminated string literal");
      uint32_t cp;
      if (!ParseChar(&cp)) return false;
      chars.push_back(Expr::Chars({{cp, cp}}));
    }
    ++pos_;
    *out = chars.size() == 1 ? std::move(chars[0]) : Expr::Seq(std::move(chars));
    return true;
  }

  bool ParseClass(Expr* out) {
    const size_t start = pos_ - 1;
    const bool negated = Peek() == '^';
    if (negated) ++pos_;
    CpSet set;
    while (Peek() != ']') {
      if (AtEnd()) return FailAt(start, "unterminated character class");
      uint32_t lo, hi;
      if (!ParseChar(&lo)) return false;
      hi = lo;
      if (Peek() == '-' && Peek(1) != ']' && pos_ + 1 < text_.size()) {
        ++pos_;
        if (!ParseChar(&hi)) return false;
        if (hi < lo) return FailAt(start, "character range is reversed");
      }
      set.push_back({lo, hi});
    }
    ++pos_;
    set = Normalize(std::move(set));
    if (negated) set = Complement(set);
    if (set.empty()) return FailAt(start, "character class matches nothing");
    *out = Expr::Chars(std::move(set));
    return true;
  }

  bool ParseCount(uint32_t* n) {
    *n = 0;
    const size_t start = pos_;
    uint64_t v = 0;
    while (Peek() >= '0' && Peek() <= '9') {
      v = v * 10 + (Peek() - '0');
      if (v > kMaxRepeatCount)
        return FailAt(start, "repetition count above " + std::to_string(kMaxRepeatCount));
      ++pos_;
    }
    *n = static_cast<uint32_t>(v);
    return pos_ > start;
  }

  bool ParsePostfix(Expr* item) {
    while (true) {
      const size_t saved = pos_;
      SkipSpace();
      const char c = Peek();
      uint32_t min = 0, max = 0;
      if (c == '*' || c == '+' || c == '?') {
        ++pos_;
        min = c == '+' ? 1 : 0;
        max = c == '?' ? 1 : kUnbounded;
      } else if (c == '{') {
        const size_t start = pos_++;
        SkipSpace();
        const bool has_min = ParseCount(&min);
        if (!error_.ok()) return false;
        if (!has_min) min = 0;
        SkipSpace();
        if (Peek() == ',') {
          ++pos_;
          SkipSpace();
          if (!ParseCount(&max)) {
            if (!error_.ok()) return false;
            max = kUnbounded;
          }
          SkipSpace();
        } else {
          max = min;
        }
        if (Peek() != '}') return FailAt(start, "expected '}' to close the repetition");
        ++pos_;
        if (!has_min && max == kUnbounded) return FailAt(start, "repetition needs a count");
        if (max < min) return FailAt(start, "repetition maximum is below its minimum");
      } else {
        pos_ = saved;
        return true;
      }
      // A repetition of a repetition, each of *, + or ? (or a count in {0,1} to {1,unbounded}), is one
      // repetition of the same language: the product of the minimums to the product of the maximums ((x+)+ is
      // x+, (x?)* and (x+)? are x*). Nested, they would otherwise multiply the automaton: twenty of them
      // around an empty group passed a million NFA states (request_fuzz).
      auto simple = [](uint32_t lo, uint32_t hi) { return lo <= 1 && (hi == 1 || hi == kUnbounded); };
      if (item->kind == Expr::Kind::kRepeat && simple(item->min, item->max) && simple(min, max)) {
        item->min *= min;
        item->max = item->max == kUnbounded || max == kUnbounded ? kUnbounded : 1;
        continue;
      }
      // The same for counts: (x{a,b}){c,d} allows k x{a,b} for k in [c, d], that is x{n} for n in the union
      // of [ka, kb]. Where those intervals leave no gap (one k, or c(b - a) >= a - 1: then each reaches the
      // next) it is x{ca,db}: a counter, where the nested form is an automaton of (a..b) x (c..d) copies
      // ([a-z ,]{4,60}{4,60} took 0.4 s to refuse, 8 s under ASan: grammar_fuzz). Kept nested past the
      // largest count a grammar may write.
      if (item->kind == Expr::Kind::kRepeat) {
        const uint64_t a = item->min, b = item->max, c = min, d = max;
        const bool one_k = d == c;
        const bool no_gap = one_k || (b == kUnbounded ? (c >= 1 || a <= 1) : c * (b - a) + 1 >= a);
        const uint64_t lo = a * c;
        const uint64_t hi = b == 0 || d == 0 ? 0 : b == kUnbounded || d == kUnbounded ? kUnbounded : b * d;
        if (no_gap && lo <= kMaxRepeatCount && (hi == kUnbounded || hi <= kMaxRepeatCount)) {
          item->min = static_cast<uint32_t>(lo);
          item->max = static_cast<uint32_t>(hi);
          continue;
        }
      }
      *item = Expr::Repeat(std::move(*item), min, max);
    }
  }

  static constexpr int kMaxGroupDepth = 128;
  std::string_view text_;
  size_t pos_ = 0;
  int depth_ = 0;  // groups open at pos_
  GrammarAst ast_;
  std::map<std::string, int32_t, std::less<>> ids_;
  std::vector<size_t> rule_pos_;  // [rule]: where it was defined, or first referenced while undefined
  size_t lc_pos_ = 0;             // LineColumn's last position, and its line and column
  int lc_line_ = 1;
  int lc_column_ = 1;
  Status error_;
};

}  // namespace

Result<GrammarAst> ParseGbnfAst(std::string_view text, std::string_view root) {
  return Parser(text).Run(root);
}

}  // namespace llamay::grammar::internal
