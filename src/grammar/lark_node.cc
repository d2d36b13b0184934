// The regex tree's simplifying constructors, its ECMAScript rendering, and Lark's literal escape
// evaluation (see lark_internal.h).
#include <algorithm>
#include <cstdio>

#include "grammar/gbnf_text.h"
#include "grammar/lark_internal.h"

namespace llamay::grammar::internal {
namespace {

uint64_t WeightOf(const std::vector<ReNode>& items) {
  uint64_t w = 1;
  for (const ReNode& n : items) w += n.weight;
  return w;
}

std::string Hex(uint32_t cp, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%0*X", digits, cp);
  return buf;
}

// One code point as a pattern character: inside a class or outside one (where every syntax character,
// including '/', is escaped; '-' is not, since the u flag refuses "\-" outside a class).
std::string EscapeChar(uint32_t cp, bool in_class) {
  switch (cp) {
    case '\t':
      return "\\t";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\f':
      return "\\f";
    case '\v':
      return "\\v";
    default:
      break;
  }
  if (cp < 0x20 || cp == 0x7F) return Cat("\\x", Hex(cp, 2));
  if (cp >= 0x80) return cp <= 0xFFFF ? Cat("\\u", Hex(cp, 4)) : Cat("\\u{", Hex(cp, 1), "}");
  const std::string_view specials = in_class ? "\\]-[^/" : "^$\\.*+?()[]{}|/";
  std::string out;
  if (specials.find(static_cast<char>(cp)) != std::string_view::npos) out += '\\';
  out += static_cast<char>(cp);
  return out;
}

std::string ClassItems(const CpSet& set) {
  std::string out;
  for (const CpRange& r : set) {
    out += EscapeChar(r.lo, /*in_class=*/true);
    if (r.hi == r.lo) continue;
    if (r.hi != r.lo + 1) out += '-';
    out += EscapeChar(r.hi, /*in_class=*/true);
  }
  return out;
}

std::string RenderChars(const CpSet& set) {
  if (set.size() == 1 && set[0].lo == set[0].hi) return EscapeChar(set[0].lo, /*in_class=*/false);
  if (set == AnyScalar()) return "[\\s\\S]";
  const CpSet complement = Complement(set);
  if (complement.size() < set.size()) return Cat("[^", ClassItems(complement), "]");
  return Cat("[", ClassItems(set), "]");
}

std::string Quantifier(uint32_t min, uint32_t max) {
  if (min == 0 && max == 1) return "?";
  if (min == 0 && max == kUnbounded) return "*";
  if (min == 1 && max == kUnbounded) return "+";
  if (min == max) return Cat("{", std::to_string(min), "}");
  if (max == kUnbounded) return Cat("{", std::to_string(min), ",}");
  return Cat("{", std::to_string(min), ",", std::to_string(max), "}");
}

int HexDigit(uint32_t c) {
  if (c >= '0' && c <= '9') return static_cast<int>(c - '0');
  if (c >= 'a' && c <= 'f') return static_cast<int>(c - 'a' + 10);
  if (c >= 'A' && c <= 'F') return static_cast<int>(c - 'A' + 10);
  return -1;
}

// Replaces every `from` pair with `to`, scanning left to right like Python's str.replace.
std::vector<uint32_t> ReplacePair(const std::vector<uint32_t>& s, uint32_t a, uint32_t b,
                                  const std::vector<uint32_t>& to) {
  std::vector<uint32_t> out;
  for (size_t k = 0; k < s.size(); ++k) {
    if (s[k] == a && k + 1 < s.size() && s[k + 1] == b) {
      out.insert(out.end(), to.begin(), to.end());
      ++k;
    } else {
      out.push_back(s[k]);
    }
  }
  return out;
}

// Python's evaluation of a string literal's escapes (what Lark's literal_eval does to the prepared text).
Result<std::vector<uint32_t>> PythonUnescape(const std::vector<uint32_t>& w) {
  std::vector<uint32_t> out;
  for (size_t k = 0; k < w.size(); ++k) {
    if (w[k] != '\\') {
      out.push_back(w[k]);
      continue;
    }
    if (++k == w.size()) return InvalidArgumentError("a literal ending in a backslash");
    const uint32_t e = w[k];
    switch (e) {
      case '\\':
      case '\'':
      case '"':
        out.push_back(e);
        continue;
      case 'a':
        out.push_back(7);
        continue;
      case 'b':
        out.push_back(8);
        continue;
      case 'f':
        out.push_back('\f');
        continue;
      case 'n':
        out.push_back('\n');
        continue;
      case 'r':
        out.push_back('\r');
        continue;
      case 't':
        out.push_back('\t');
        continue;
      case 'v':
        out.push_back('\v');
        continue;
      case 'N':
        return InvalidArgumentError("named escapes (\\N{...}) are not supported");
      default:
        break;
    }
    if (e >= '0' && e <= '7') {
      uint32_t v = e - '0';
      for (int n = 0; n < 2 && k + 1 < w.size() && w[k + 1] >= '0' && w[k + 1] <= '7'; ++n)
        v = v * 8 + (w[++k] - '0');
      out.push_back(v);
      continue;
    }
    const int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
    if (digits == 0) {  // an unknown escape keeps its backslash
      out.push_back('\\');
      out.push_back(e);
      continue;
    }
    uint32_t v = 0;
    for (int n = 0; n < digits; ++n) {
      if (k + 1 >= w.size() || HexDigit(w[k + 1]) < 0) {
        return InvalidArgumentError(Cat("a truncated \\", std::string(1, static_cast<char>(e)), " escape"));
      }
      v = v * 16 + HexDigit(w[++k]);
      if (v > kMaxCodePoint) return InvalidArgumentError("an escape beyond U+10FFFF");
    }
    if (v >= 0xD800 && v <= 0xDFFF) return InvalidArgumentError("an escape of a lone surrogate");
    out.push_back(v);
  }
  return out;
}

}  // namespace

ReNode ReEmpty() { return ReNode{}; }

bool ReIsEmpty(const ReNode& node) { return node.kind == ReNode::Kind::kSeq && node.items.empty(); }

ReNode ReChars(CpSet set) {
  ReNode n;
  n.kind = ReNode::Kind::kChars;
  n.chars = std::move(set);
  return n;
}

ReNode ReLiteral(const std::vector<uint32_t>& cps) {
  std::vector<ReNode> parts;
  for (uint32_t cp : cps) parts.push_back(ReChars({{cp, cp}}));
  return ReSeq(std::move(parts));
}

ReNode ReSeq(std::vector<ReNode> parts) {
  std::vector<ReNode> flat;
  for (ReNode& p : parts) {
    if (p.kind == ReNode::Kind::kSeq) {
      for (ReNode& q : p.items) flat.push_back(std::move(q));
    } else {
      flat.push_back(std::move(p));
    }
  }
  if (flat.size() == 1) return std::move(flat[0]);
  ReNode n;
  n.kind = ReNode::Kind::kSeq;
  n.weight = flat.empty() ? 1 : WeightOf(flat);
  n.items = std::move(flat);
  return n;
}

ReNode ReAlt(std::vector<ReNode> options) {
  std::vector<ReNode> flat;
  for (ReNode& o : options) {
    if (o.kind == ReNode::Kind::kAlt) {
      for (ReNode& q : o.items) flat.push_back(std::move(q));
    } else {
      flat.push_back(std::move(o));
    }
  }
  // Step 1: drop empty options (remembered as "optional"), merge single characters into one class, and
  // drop duplicates. The order of alternatives does not change the language.
  bool nullable = false;
  int chars_at = -1;
  std::vector<ReNode> out;
  for (ReNode& o : flat) {
    if (ReIsEmpty(o)) {
      nullable = true;
    } else if (o.kind == ReNode::Kind::kChars && chars_at >= 0) {
      out[chars_at].chars = Union(out[chars_at].chars, o.chars);
    } else if (std::none_of(out.begin(), out.end(), [&](const ReNode& e) { return ReEqual(e, o); })) {
      if (o.kind == ReNode::Kind::kChars) chars_at = static_cast<int>(out.size());
      out.push_back(std::move(o));
    }
  }
  // Step 2: one option is itself; an empty option makes the rest optional.
  if (out.empty()) return ReEmpty();
  ReNode n;
  if (out.size() == 1) {
    n = std::move(out[0]);
  } else {
    n.kind = ReNode::Kind::kAlt;
    n.weight = WeightOf(out);
    n.items = std::move(out);
  }
  return nullable ? ReRepeat(std::move(n), 0, 1) : n;
}

ReNode ReRepeat(ReNode item, uint32_t min, uint32_t max) {
  if (max == 0 || ReIsEmpty(item)) return ReEmpty();
  if (min == 1 && max == 1) return item;
  if (item.kind == ReNode::Kind::kRepeat) {  // collapse the nestings that are exact
    const uint32_t a = item.min, b = item.max;
    if (min == 0 && max == 1 && a == 0) return item;                           // (x{0,b})? = x{0,b}
    if (b == kUnbounded && min >= 1 && uint64_t{a} * min <= kMaxRegexCount) {  // (x{a,}){m,n} = x{am,}
      return ReRepeat(std::move(item.items[0]), a * min, kUnbounded);
    }
    if ((b == kUnbounded && min == 0 && a <= 1) || (a == 0 && b == 1 && max == kUnbounded)) {
      return ReRepeat(std::move(item.items[0]), 0, kUnbounded);  // (x*)?, (x+)?, (x?)* ... = x*
    }
  }
  ReNode n;
  n.kind = ReNode::Kind::kRepeat;
  n.min = min;
  n.max = max;
  n.weight = 1 + item.weight;
  n.items.push_back(std::move(item));
  return n;
}

ReNode ReRef(int32_t ref) {
  ReNode n;
  n.kind = ReNode::Kind::kRef;
  n.ref = ref;
  return n;
}

bool ReEqual(const ReNode& a, const ReNode& b) {
  if (a.kind != b.kind || a.weight != b.weight || a.min != b.min || a.max != b.max || a.ref != b.ref ||
      a.chars != b.chars || a.items.size() != b.items.size()) {
    return false;
  }
  for (size_t k = 0; k < a.items.size(); ++k) {
    if (!ReEqual(a.items[k], b.items[k])) return false;
  }
  return true;
}

std::string RenderRegex(const ReNode& node) {
  std::string out;
  switch (node.kind) {
    case ReNode::Kind::kChars:
      return RenderChars(node.chars);
    case ReNode::Kind::kSeq:
      for (const ReNode& item : node.items) {
        out += item.kind == ReNode::Kind::kAlt ? Cat("(?:", RenderRegex(item), ")") : RenderRegex(item);
      }
      return out;
    case ReNode::Kind::kAlt:
      for (const ReNode& item : node.items) {
        if (!out.empty()) out += '|';
        out += RenderRegex(item);
      }
      return out;
    case ReNode::Kind::kRepeat: {
      const ReNode& item = node.items[0];
      out = RenderRegex(item);
      if (item.kind != ReNode::Kind::kChars) out = Cat("(?:", out, ")");
      return out + Quantifier(node.min, node.max);
    }
    case ReNode::Kind::kRef:
      break;
  }
  LLAMAY_CHECK(false) << "RenderRegex on an unresolved reference";
  return out;
}

std::string RenderAnchoredRegex(const ReNode& node) {
  const std::string body = RenderRegex(node);
  return node.kind == ReNode::Kind::kAlt ? Cat("^(?:", body, ")$") : Cat("^", body, "$");
}

CpSet FoldAsciiCase(const CpSet& set) {
  CpSet out = set;
  for (const CpRange& r : set) {
    const uint32_t upper_lo = std::max<uint32_t>(r.lo, 'A'), upper_hi = std::min<uint32_t>(r.hi, 'Z');
    if (upper_lo <= upper_hi) out.push_back({upper_lo + 32, upper_hi + 32});
    const uint32_t lower_lo = std::max<uint32_t>(r.lo, 'a'), lower_hi = std::min<uint32_t>(r.hi, 'z');
    if (lower_lo <= lower_hi) out.push_back({lower_lo - 32, lower_hi - 32});
  }
  return Normalize(std::move(out));
}

Result<std::vector<uint32_t>> EvalLarkEscapes(std::string_view body, bool is_regex) {
  std::vector<uint32_t> cps;
  for (size_t pos = 0; pos < body.size();) {
    uint32_t cp;
    if (!DecodeUtf8(body, &pos, &cp)) return InvalidArgumentError("a literal that is not valid UTF-8");
    cps.push_back(cp);
  }
  // Step 1 (Lark's eval_escaping): double every backslash whose escape Python must not evaluate.
  std::vector<uint32_t> w;
  for (size_t k = 0; k < cps.size(); ++k) {
    w.push_back(cps[k]);
    if (cps[k] != '\\') continue;
    if (++k == cps.size()) return InvalidArgumentError("a literal ending in a backslash");
    const uint32_t n2 = cps[k];
    if (n2 == '\\') {
      w.insert(w.end(), {'\\', '\\'});
    } else if (std::u32string_view(U"Uuxnftr").find(static_cast<char32_t>(n2)) == std::u32string_view::npos) {
      w.push_back('\\');
    }
    w.push_back(n2);
  }
  // Step 2: \" -> ", ' -> \', then Python's own evaluation of the result.
  w = ReplacePair(w, '\\', '"', {'"'});
  std::vector<uint32_t> quoted;
  for (uint32_t c : w) {
    if (c == '\'') quoted.push_back('\\');
    quoted.push_back(c);
  }
  auto value = PythonUnescape(quoted);
  if (!value.ok() || is_regex) return value;
  // Step 3: a string's escaped backslash is one backslash.
  return ReplacePair(*value, '\\', '\\', {'\\'});
}

}  // namespace llamay::grammar::internal
