// Python `re` syntax to the regex tree (see lark_internal.h): a recursive-descent parser that follows
// sre_parse's reading of the pattern (']' first in a class is literal, '{' that is not a valid quantifier
// is literal, {,n} means {0,n}, \d \w in their ASCII meaning, \s as Python's whitespace).
#include <string>

#include "grammar/gbnf_text.h"
#include "grammar/lark_internal.h"

namespace llamay::grammar::internal {
namespace {

CpSet DigitSet() { return {{'0', '9'}}; }
CpSet WordSet() { return Normalize({{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}); }
// Python's str.isspace(), which is what \s matches in a str pattern.
CpSet SpaceSet() {
  return Normalize({{'\t', '\r'},
                    {0x1C, 0x20},
                    {0x85, 0x85},
                    {0xA0, 0xA0},
                    {0x1680, 0x1680},
                    {0x2000, 0x200A},
                    {0x2028, 0x2029},
                    {0x202F, 0x202F},
                    {0x205F, 0x205F},
                    {0x3000, 0x3000}});
}

bool IsOctal(uint32_t c) { return c >= '0' && c <= '7'; }
bool IsDigit(uint32_t c) { return c >= '0' && c <= '9'; }
bool IsAsciiAlnum(uint32_t c) { return IsDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

class PyRegexParser {
 public:
  PyRegexParser(const std::vector<uint32_t>& s, PyRegexFlags flags) : s_(s), flags_(flags) {}

  Result<ReNode> Run() {
    ReNode out;
    if (!Disjunction(&out)) return error_;
    if (!AtEnd()) return InvalidArgumentError("unbalanced parenthesis");
    return out;
  }

 private:
  // A character set item: a set, and whether it is one character (a possible range end).
  struct ClassItem {
    CpSet set;
    bool single = false;
  };

  bool AtEnd() const { return i_ >= s_.size(); }
  uint32_t Peek(size_t ahead = 0) const { return i_ + ahead < s_.size() ? s_[i_ + ahead] : 0; }
  bool Fail(std::string message) {
    error_ = InvalidArgumentError(std::move(message));
    return false;
  }

  bool Disjunction(ReNode* out) {
    std::vector<ReNode> alts;
    while (true) {
      std::vector<ReNode> parts;
      while (!AtEnd() && Peek() != '|' && Peek() != ')') {
        ReNode term;
        if (!Term(&term)) return false;
        parts.push_back(std::move(term));
      }
      alts.push_back(ReSeq(std::move(parts)));
      if (AtEnd() || Peek() != '|') break;
      ++i_;
    }
    *out = ReAlt(std::move(alts));
    return true;
  }

  // {m}, {m,}, {,n}, {m,n}, {,}: true and the counts when a valid quantifier starts at i_ (then consumed);
  // false (nothing consumed) when the '{' is a literal.
  bool Braces(uint32_t* min, uint32_t* max) {
    size_t j = i_ + 1;
    auto number = [&](std::string* digits) {
      while (j < s_.size() && IsDigit(s_[j])) digits->push_back(static_cast<char>(s_[j++]));
    };
    std::string lo, hi;
    number(&lo);
    bool comma = false;
    if (j < s_.size() && s_[j] == ',') {
      comma = true;
      ++j;
      number(&hi);
    }
    if (j >= s_.size() || s_[j] != '}' || (lo.empty() && !comma)) return false;
    if (lo.size() > 5 || hi.size() > 5) {
      *min = *max = kMaxRegexCount + 1;
    } else {
      *min = lo.empty() ? 0 : static_cast<uint32_t>(std::stoul(lo));
      *max = comma ? (hi.empty() ? kUnbounded : static_cast<uint32_t>(std::stoul(hi))) : *min;
    }
    i_ = j + 1;
    return true;
  }

  // Consumes a quantifier at i_ if there is one.
  bool Quantifier(bool* found, uint32_t* min, uint32_t* max) {
    *found = false;
    const uint32_t c = Peek();
    if (AtEnd()) return true;
    if (c == '{') {
      if (!Braces(min, max)) return true;
    } else if (c == '*' || c == '+' || c == '?') {
      ++i_;
      *min = c == '+' ? 1 : 0;
      *max = c == '?' ? 1 : kUnbounded;
    } else {
      return true;
    }
    *found = true;
    if ((*min != kUnbounded && *min > kMaxRegexCount) || (*max != kUnbounded && *max > kMaxRegexCount)) {
      return Fail(Cat("a repetition count above ", std::to_string(kMaxRegexCount)));
    }
    if (*max < *min) return Fail("a {m,n} quantifier with m > n");
    if (Peek() == '?' && !AtEnd()) {
      ++i_;  // lazy: the same strings match
    } else if (Peek() == '+' && !AtEnd()) {
      return Fail("possessive quantifiers are not supported");
    }
    return true;
  }

  bool Term(ReNode* out) {
    ReNode atom;
    if (!Atom(&atom)) return false;
    bool found;
    uint32_t min, max;
    if (!Quantifier(&found, &min, &max)) return false;
    if (!found) {
      *out = std::move(atom);
      return true;
    }
    bool again;
    uint32_t min2, max2;
    const size_t here = i_;
    if (!Quantifier(&again, &min2, &max2)) return false;
    if (again) {
      i_ = here;
      return Fail("multiple repeat");
    }
    *out = ReRepeat(std::move(atom), min, max);
    return true;
  }

  bool Literal(uint32_t cp, ReNode* out) {
    if (!flags_.ignore_case) {
      *out = ReChars({{cp, cp}});
      return true;
    }
    if (cp >= 0x80) return Fail("the i flag is supported only for ASCII text");
    *out = ReChars(FoldAsciiCase({{cp, cp}}));
    return true;
  }

  bool Atom(ReNode* out) {
    const uint32_t c = Peek();
    ++i_;
    switch (c) {
      case '.':
        *out = ReChars(flags_.dot_all ? AnyScalar() : Complement({{'\n', '\n'}}));
        return true;
      case '^':
      case '$':
        return Fail("anchors (^ and $) are not supported");
      case '(': {
        // Each level recurses: a bound keeps a request's pattern from overflowing a thread's stack (as
        // nested GBNF groups did, gbnf_parser.cc).
        if (depth_ >= kMaxGroupDepth)
          return Fail("groups nested more than " + std::to_string(kMaxGroupDepth) + " deep");
        ++depth_;
        const bool ok = Group(out);
        --depth_;
        return ok;
      }
      case '[':
        return Class(out);
      case '\\': {
        ClassItem item;
        if (!Escape(/*in_class=*/false, &item)) return false;
        if (item.single) return Literal(item.set[0].lo, out);
        *out = ReChars(std::move(item.set));
        return true;
      }
      case '*':
      case '+':
      case '?':
        return Fail("nothing to repeat");
      case '{': {
        uint32_t min, max;
        --i_;
        if (Braces(&min, &max)) return Fail("nothing to repeat");
        ++i_;
        return Literal(c, out);
      }
      default:
        return Literal(c, out);
    }
  }

  bool Group(ReNode* out) {
    if (Peek() == '?') {
      const uint32_t k = Peek(1);
      if (k == ':') {
        i_ += 2;
      } else if (k == 'P' && Peek(2) == '<') {  // a named group: skip the name
        i_ += 3;
        while (!AtEnd() && Peek() != '>') ++i_;
        if (AtEnd()) return Fail("an unterminated group name");
        ++i_;
      } else if (k == 'P' && Peek(2) == '=') {
        return Fail("backreferences are not supported");
      } else if (k == '#') {  // a comment
        while (!AtEnd() && Peek() != ')') ++i_;
        if (AtEnd()) return Fail("an unterminated comment");
        ++i_;
        *out = ReEmpty();
        return true;
      } else if (k == '=' || k == '!') {
        return Fail("lookahead is not supported");
      } else if (k == '<' && (Peek(2) == '=' || Peek(2) == '!')) {
        return Fail("lookbehind is not supported");
      } else if (k == '>') {
        return Fail("atomic groups are not supported");
      } else if (k == '(') {
        return Fail("conditional groups are not supported");
      } else if ((k >= 'a' && k <= 'z') || k == '-') {
        return Fail("inline flags are not supported");
      } else {
        return Fail("an unknown group extension");
      }
    }
    if (!Disjunction(out)) return false;
    if (AtEnd() || Peek() != ')') return Fail("missing ), unterminated subpattern");
    ++i_;
    return true;
  }

  bool Class(ReNode* out) {
    const bool negated = Peek() == '^' && !AtEnd();
    if (negated) ++i_;
    CpSet set;
    for (bool first = true;; first = false) {
      if (AtEnd()) return Fail("unterminated character set");
      if (Peek() == ']' && !first) {
        ++i_;
        break;
      }
      ClassItem lo;
      if (!ClassAtom(&lo)) return false;
      if (Peek() == '-' && i_ + 1 < s_.size()) {
        ++i_;
        if (Peek() == ']') {  // a trailing '-' is literal
          set.insert(set.end(), lo.set.begin(), lo.set.end());
          set.push_back({'-', '-'});
          ++i_;
          break;
        }
        ClassItem hi;
        if (!ClassAtom(&hi)) return false;
        if (!lo.single || !hi.single) return Fail("bad character range");
        if (hi.set[0].lo < lo.set[0].lo) return Fail("bad character range (reversed)");
        if (flags_.ignore_case && hi.set[0].lo >= 0x80)
          return Fail("the i flag is supported only for ASCII text");
        set.push_back({lo.set[0].lo, hi.set[0].lo});
      } else {
        if (flags_.ignore_case && lo.single && lo.set[0].lo >= 0x80) {
          return Fail("the i flag is supported only for ASCII text");
        }
        set.insert(set.end(), lo.set.begin(), lo.set.end());
      }
    }
    set = Normalize(std::move(set));
    if (flags_.ignore_case) set = FoldAsciiCase(set);
    if (negated) set = Complement(set);
    if (set.empty()) return Fail("a character set that matches nothing");
    *out = ReChars(std::move(set));
    return true;
  }

  bool ClassAtom(ClassItem* out) {
    const uint32_t c = Peek();
    ++i_;
    if (c == '\\') return Escape(/*in_class=*/true, out);
    out->set = {{c, c}};
    out->single = true;
    return true;
  }

  bool Hex(int digits, uint32_t* cp) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k) {
      const uint32_t h = Peek();
      const int d = IsDigit(h)               ? static_cast<int>(h - '0')
                    : (h >= 'a' && h <= 'f') ? static_cast<int>(h - 'a' + 10)
                    : (h >= 'A' && h <= 'F') ? static_cast<int>(h - 'A' + 10)
                                             : -1;
      if (AtEnd() || d < 0) return Fail("incomplete hex escape");
      v = v * 16 + d;
      if (v > kMaxCodePoint) return Fail("an escape beyond U+10FFFF");
      ++i_;
    }
    if (v >= 0xD800 && v <= 0xDFFF) return Fail("an escape of a lone surrogate");
    *cp = v;
    return true;
  }

  // After a backslash: a category escape or one character.
  bool Escape(bool in_class, ClassItem* out) {
    if (AtEnd()) return Fail("a pattern ending in a backslash");
    const uint32_t c = Peek();
    ++i_;
    uint32_t cp = c;
    switch (c) {
      case 'd':
      case 'D':
        out->set = c == 'd' ? DigitSet() : Complement(DigitSet());
        return true;
      case 'w':
      case 'W':
        out->set = c == 'w' ? WordSet() : Complement(WordSet());
        return true;
      case 's':
      case 'S':
        out->set = c == 's' ? SpaceSet() : Complement(SpaceSet());
        return true;
      case 'b':
        if (!in_class) return Fail("word boundaries (\\b) are not supported");
        cp = 8;
        break;
      case 'B':
        return Fail("word boundaries (\\B) are not supported");
      case 'A':
      case 'Z':
        return Fail("anchors (\\A and \\Z) are not supported");
      case 'N':
        return Fail("named Unicode escapes (\\N{...}) are not supported");
      case 'a':
        cp = 7;
        break;
      case 'f':
        cp = '\f';
        break;
      case 'n':
        cp = '\n';
        break;
      case 'r':
        cp = '\r';
        break;
      case 't':
        cp = '\t';
        break;
      case 'v':
        cp = '\v';
        break;
      case 'x':
        if (!Hex(2, &cp)) return false;
        break;
      case 'u':
        if (!Hex(4, &cp)) return false;
        break;
      case 'U':
        if (!Hex(8, &cp)) return false;
        break;
      default:
        if (!Octal(in_class, c, &cp)) return false;
    }
    out->set = {{cp, cp}};
    out->single = true;
    return true;
  }

  // The escapes left after the named ones: octal, backreferences, unknown letters, escaped punctuation.
  bool Octal(bool in_class, uint32_t c, uint32_t* cp) {
    if (c == '0' || (in_class && IsOctal(c))) {  // \0, \0o, \0oo; in a class also \o, \oo, \ooo
      uint32_t v = c - '0';
      for (int n = 0; n < 2 && IsOctal(Peek()) && !AtEnd(); ++n, ++i_) v = v * 8 + (Peek() - '0');
      if (v > 0377) return Fail("an octal escape above \\377");
      *cp = v;
      return true;
    }
    if (IsOctal(c) && IsOctal(Peek()) && IsOctal(Peek(1)) && i_ + 1 < s_.size()) {  // \ooo
      const uint32_t v = (c - '0') * 64 + (Peek() - '0') * 8 + (Peek(1) - '0');
      if (v > 0377) return Fail("an octal escape above \\377");
      i_ += 2;
      *cp = v;
      return true;
    }
    if (IsDigit(c))
      return Fail(in_class ? "bad escape in a character set" : "backreferences are not supported");
    if (IsAsciiAlnum(c)) return Fail(Cat("bad escape \\", std::string(1, static_cast<char>(c))));
    *cp = c;
    return true;
  }

  const std::vector<uint32_t>& s_;
  const PyRegexFlags flags_;
  static constexpr int kMaxGroupDepth = 128;
  size_t i_ = 0;
  int depth_ = 0;  // groups open at i_
  Status error_;
};

}  // namespace

Result<ReNode> PythonRegexToNode(const std::vector<uint32_t>& pattern, PyRegexFlags flags) {
  return PyRegexParser(pattern, flags).Run();
}

}  // namespace llamay::grammar::internal
