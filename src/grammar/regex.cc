// ECMAScript pattern to GBNF: a recursive-descent parser that writes GBNF as it goes (see regex.h).
#include "grammar/regex.h"

#include <vector>

#include "grammar/ast.h"
#include "grammar/gbnf_text.h"
#include "grammar/utf8.h"

namespace llamay::grammar::internal {
namespace {

constexpr uint32_t kMaxCount = 10000;

CpSet Digits() { return {{'0', '9'}}; }
CpSet WordChars() { return Normalize({{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}); }
CpSet Spaces() {
  return Normalize({{'\t', '\r'},
                    {' ', ' '},
                    {0xA0, 0xA0},
                    {0x1680, 0x1680},
                    {0x2000, 0x200A},
                    {0x2028, 0x2029},
                    {0x202F, 0x202F},
                    {0x205F, 0x205F},
                    {0x3000, 0x3000},
                    {0xFEFF, 0xFEFF}});
}
CpSet Dot() { return Complement(Normalize({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}})); }

int HexValue(uint32_t c) {
  if (c >= '0' && c <= '9') return static_cast<int>(c - '0');
  if (c >= 'a' && c <= 'f') return static_cast<int>(c - 'a' + 10);
  if (c >= 'A' && c <= 'F') return static_cast<int>(c - 'A' + 10);
  return -1;
}

bool IsSyntaxChar(uint32_t c) {
  for (char s : std::string_view("^$\\.*+?()[]{}|/-")) {
    if (c == static_cast<uint8_t>(s)) return true;
  }
  return false;
}

class RegexParser {
 public:
  explicit RegexParser(std::vector<uint32_t> cps) : s_(std::move(cps)) {}

  Result<std::string> Run() {
    std::string out;
    if (!Disjunction(/*top=*/true, &out)) return error_;
    if (i_ < s_.size()) return InvalidArgumentError("unmatched ')'");
    return out;
  }

 private:
  bool AtEnd() const { return i_ >= s_.size(); }
  uint32_t Peek(size_t ahead = 0) const { return i_ + ahead < s_.size() ? s_[i_ + ahead] : 0; }
  bool Fail(std::string message) {
    error_ = InvalidArgumentError(std::move(message));
    return false;
  }

  bool Disjunction(bool top, std::string* out) {
    std::vector<std::string> alts;
    while (true) {
      std::string alt;
      if (!Alternative(top, &alt)) return false;
      alts.push_back(std::move(alt));
      if (Peek() != '|' || AtEnd()) break;
      ++i_;
    }
    if (alts.size() == 1) {
      *out = Cat("( ", alts[0], " )");
      return true;
    }
    *out = GbnfAlternatives(alts);
    return true;
  }

  bool Alternative(bool top, std::string* out) {
    bool anchored_start = false, anchored_end = false;
    if (top && !AtEnd() && Peek() == '^') {
      anchored_start = true;
      ++i_;
    }
    std::string body;
    while (!AtEnd() && Peek() != '|' && Peek() != ')') {
      if (Peek() == '$') {
        ++i_;
        if (top && (AtEnd() || Peek() == '|')) {
          anchored_end = true;
          break;
        }
        return Fail("the anchor $ is supported only at the end of the pattern or of a top-level alternative");
      }
      if (Peek() == '^') {
        return Fail(
            "the anchor ^ is supported only at the start of the pattern or of a top-level alternative");
      }
      std::string term;
      if (!Term(&term)) return false;
      body += (body.empty() ? "" : " ") + term;
    }
    if (top && !anchored_start) body = Cat("char* ", body);
    if (top && !anchored_end) body.append(" char*");
    *out = body;
    return true;
  }

  bool Term(std::string* out) {
    std::string atom;
    if (!Atom(&atom)) return false;
    uint32_t min, max;
    const uint32_t c = Peek();
    if (AtEnd() || (c != '*' && c != '+' && c != '?' && c != '{')) {
      *out = atom;
      return true;
    }
    if (c == '{') {
      if (!Braces(&min, &max)) return false;
    } else {
      ++i_;
      min = c == '+' ? 1 : 0;
      max = c == '?' ? 1 : kUnbounded;
    }
    if (!AtEnd() && Peek() == '?') ++i_;  // lazy: the same strings match
    if (max == kUnbounded) {
      *out = Cat("( ", atom, " )", min == 0 ? "*" : min == 1 ? "+" : Cat("{", std::to_string(min), ",}"));
    } else {
      *out = Cat("( ", atom, " ){", std::to_string(min), ",", std::to_string(max), "}");
    }
    return true;
  }

  bool Number(uint32_t* n) {
    const size_t start = i_;
    uint64_t v = 0;
    while (!AtEnd() && Peek() >= '0' && Peek() <= '9') {
      v = v * 10 + (Peek() - '0');
      if (v > kMaxCount) return Fail("a repetition count above " + std::to_string(kMaxCount));
      ++i_;
    }
    *n = static_cast<uint32_t>(v);
    return i_ > start || Fail("a malformed {m,n} quantifier");
  }

  bool Braces(uint32_t* min, uint32_t* max) {
    ++i_;
    if (!Number(min)) return false;
    *max = *min;
    if (Peek() == ',') {
      ++i_;
      if (Peek() == '}') {
        *max = kUnbounded;
      } else if (!Number(max)) {
        return false;
      }
    }
    if (AtEnd() || Peek() != '}') return Fail("a malformed {m,n} quantifier");
    ++i_;
    return *max >= *min || Fail("a {m,n} quantifier with m > n");
  }

  bool Atom(std::string* out) {
    const uint32_t c = Peek();
    ++i_;
    switch (c) {
      case '.':
        *out = JsonCharExpr(Dot());
        return true;
      case '(':
        return Group(out);
      case '[': {
        CpSet set;
        if (!Class(&set)) return false;
        if (set.empty()) return Fail("a character class that matches nothing");
        *out = JsonCharExpr(set);
        return true;
      }
      case '\\': {
        CpSet set;
        if (!Escape(/*in_class=*/false, &set)) return false;
        *out = JsonCharExpr(set);
        return !out->empty() || Fail("an escape of a lone surrogate");
      }
      case '*':
      case '+':
      case '?':
      case '{':
        return Fail("a quantifier with nothing to repeat");
      default:
        *out = JsonCharExpr({{c, c}});
        return !out->empty() || Fail("a character that cannot appear in a string");
    }
  }

  bool Group(std::string* out) {
    if (Peek() == '?') {
      const uint32_t k = Peek(1);
      if (k == ':') {
        i_ += 2;
      } else if (k == '=' || k == '!') {
        return Fail("lookahead is not supported");
      } else if (k == '<' && (Peek(2) == '=' || Peek(2) == '!')) {
        return Fail("lookbehind is not supported");
      } else if (k == '<') {
        i_ += 2;  // a named group: skip the name
        while (!AtEnd() && Peek() != '>') ++i_;
        if (AtEnd()) return Fail("an unterminated group name");
        ++i_;
      } else {
        return Fail("an unsupported group modifier");
      }
    }
    if (!Disjunction(/*top=*/false, out)) return false;
    if (AtEnd() || Peek() != ')') return Fail("an unterminated group");
    ++i_;
    return true;
  }

  bool Class(CpSet* out) {
    const bool negated = Peek() == '^';
    if (negated) ++i_;
    CpSet set;
    while (true) {
      if (AtEnd()) return Fail("an unterminated character class");
      if (Peek() == ']') {
        ++i_;
        break;
      }
      CpSet lo_set;
      if (!ClassAtom(&lo_set)) return false;
      if (Peek() == '-' && Peek(1) != ']' && i_ + 1 < s_.size()) {
        ++i_;
        CpSet hi_set;
        if (!ClassAtom(&hi_set)) return false;
        if (lo_set.size() != 1 || lo_set[0].lo != lo_set[0].hi || hi_set.size() != 1 ||
            hi_set[0].lo != hi_set[0].hi) {
          return Fail("a class range whose end is a class escape");
        }
        if (hi_set[0].lo < lo_set[0].lo) return Fail("a reversed class range");
        set.push_back({lo_set[0].lo, hi_set[0].lo});
      } else {
        set.insert(set.end(), lo_set.begin(), lo_set.end());
      }
    }
    set = Normalize(std::move(set));
    *out = negated ? Complement(set) : set;
    return true;
  }

  bool ClassAtom(CpSet* out) {
    const uint32_t c = Peek();
    ++i_;
    if (c == '\\') return Escape(/*in_class=*/true, out);
    *out = Normalize({{c, c}});
    return true;
  }

  // After a backslash: a class escape or one character.
  bool Escape(bool in_class, CpSet* out) {
    if (AtEnd()) return Fail("a pattern ending in a backslash");
    const uint32_t c = Peek();
    ++i_;
    uint32_t cp;
    switch (c) {
      case 'd':
        *out = Digits();
        return true;
      case 'D':
        *out = Complement(Digits());
        return true;
      case 'w':
        *out = WordChars();
        return true;
      case 'W':
        *out = Complement(WordChars());
        return true;
      case 's':
        *out = Spaces();
        return true;
      case 'S':
        *out = Complement(Spaces());
        return true;
      case 't':
        cp = '\t';
        break;
      case 'n':
        cp = '\n';
        break;
      case 'r':
        cp = '\r';
        break;
      case 'f':
        cp = '\f';
        break;
      case 'v':
        cp = '\v';
        break;
      case 'b':
        if (!in_class) return Fail("word boundaries (\\b) are not supported");
        cp = '\b';
        break;
      case 'B':
        return Fail("word boundaries (\\B) are not supported");
      case 'p':
      case 'P':
        return Fail("Unicode property escapes are not supported");
      case 'c':
        return Fail("control escapes (\\c) are not supported");
      case 'k':
        return Fail("backreferences are not supported");
      case 'x':
        if (!Hex(2, &cp)) return false;
        break;
      case 'u':
        if (!UnicodeEscape(&cp)) return false;
        if (cp >= 0xD800 && cp <= 0xDBFF && Peek() == '\\' && Peek(1) == 'u') {  // a surrogate pair
          const size_t saved = i_;
          uint32_t low;
          i_ += 2;
          if (Hex(4, &low) && low >= 0xDC00 && low <= 0xDFFF) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else {
            i_ = saved;
            error_ = Status();
          }
        }
        break;
      case '0':
        if (Peek() >= '0' && Peek() <= '9') return Fail("octal escapes are not supported");
        cp = 0;
        break;
      default:
        if (c >= '1' && c <= '9') return Fail("backreferences are not supported");
        if (!IsSyntaxChar(c)) return Fail("an unknown escape");
        cp = c;
    }
    *out = Normalize({{cp, cp}});
    return true;
  }

  bool Hex(int digits, uint32_t* cp) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k) {
      const int h = HexValue(Peek());
      if (AtEnd() || h < 0) return Fail("a malformed hex escape");
      v = v * 16 + h;
      ++i_;
    }
    *cp = v;
    return true;
  }

  bool UnicodeEscape(uint32_t* cp) {
    if (Peek() != '{') return Hex(4, cp);
    ++i_;
    uint64_t v = 0;
    size_t n = 0;
    while (!AtEnd() && HexValue(Peek()) >= 0) {
      v = v * 16 + HexValue(Peek());
      if (v > kMaxCodePoint) return Fail("an escape beyond U+10FFFF");
      ++i_;
      ++n;
    }
    if (n == 0 || Peek() != '}') return Fail("a malformed \\u{...} escape");
    ++i_;
    *cp = static_cast<uint32_t>(v);
    return true;
  }

  std::vector<uint32_t> s_;
  size_t i_ = 0;
  Status error_;
};

}  // namespace

Result<std::string> PatternToGbnf(std::string_view pattern) {
  std::vector<uint32_t> cps;
  for (size_t pos = 0; pos < pattern.size();) {
    uint32_t cp;
    if (!DecodeUtf8(pattern, &pos, &cp)) return InvalidArgumentError("the pattern is not valid UTF-8");
    cps.push_back(cp);
  }
  return RegexParser(std::move(cps)).Run();
}

}  // namespace llamay::grammar::internal
