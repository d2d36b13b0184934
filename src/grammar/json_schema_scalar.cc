// JSON Schema to GBNF for strings (lengths, patterns, formats), numbers (ranges) and extra object keys.
#include <cmath>
#include <map>
#include <optional>

#include "grammar/json_schema_internal.h"
#include "grammar/regex.h"

namespace llamay::grammar::internal {
namespace {

const std::string kQuote = GbnfLiteral("\"");

// The body of each supported format (what goes between the quotes). ajv-formats' full mode accepts all of
// them: date checks the days of each month and leap years; time and date-time always carry a time zone.
const std::map<std::string, std::string>& FormatBodies() {
  static const std::map<std::string, std::string> kBodies = {
      {"date",
       R"(( [0-9]{4} "-" ( ( "0" [13578] | "1" [02] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] ) |)"
       R"( ( "0" [469] | "11" ) "-" ( "0" [1-9] | [12] [0-9] | "30" ) | "02-" ( "0" [1-9] | "1" [0-9] | "2" [0-8] ) ) |)"
       R"( ( [0-9]{2} ( "0" [48] | [2468] [048] | [13579] [26] ) | ( "0" [48] | [2468] [048] | [13579] [26] | "00" ) "00" ))"
       R"( "-02-29" ))"},
      {"time", R"(( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,9} )?)"
               R"( ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))"},
      {"uuid",
       R"([0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12})"},
      {"email",
       R"([a-zA-Z0-9_+-]+ ( "." [a-zA-Z0-9_+-]+ )* "@")"
       R"( [a-zA-Z0-9] ( [a-zA-Z0-9-]{0,61} [a-zA-Z0-9] )? ( "." [a-zA-Z0-9] ( [a-zA-Z0-9-]{0,61} [a-zA-Z0-9] )? )+)"},
      {"ipv4", R"(( "25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9]? [0-9] ))"
               R"( ( "." ( "25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9]? [0-9] ) ){3})"},
  };
  return kBodies;
}

// Digit strings of one length from `lo` to `hi` (REQUIRES: same length, lo <= hi).
std::string DigitRange(const std::string& lo, const std::string& hi) {
  if (lo.empty()) return "";
  if (lo == hi) return GbnfLiteral(lo);
  const size_t rest = lo.size() - 1;
  const std::string any_rest = rest == 0 ? "" : rest == 1 ? " [0-9]" : " [0-9]{" + std::to_string(rest) + "}";
  auto digits = [](char a, char b) {
    return a == b ? GbnfLiteral(std::string(1, a)) : Cat("[", std::string(1, a), "-", std::string(1, b), "]");
  };
  if (lo[0] == hi[0]) return GbnfLiteral(lo.substr(0, 1)) + " " + DigitRange(lo.substr(1), hi.substr(1));
  const bool lo_full = lo.find_first_not_of('0', 1) == std::string::npos;
  const bool hi_full = hi.find_first_not_of('9', 1) == std::string::npos;
  std::vector<std::string> alts;
  char first = lo[0], last = hi[0];
  if (!lo_full) {
    alts.push_back(GbnfLiteral(lo.substr(0, 1)) + " " + DigitRange(lo.substr(1), std::string(rest, '9')));
    ++first;
  }
  if (first <= (hi_full ? last : last - 1))
    alts.push_back(digits(first, hi_full ? last : last - 1) + any_rest);
  if (!hi_full)
    alts.push_back(GbnfLiteral(hi.substr(0, 1)) + " " + DigitRange(std::string(rest, '0'), hi.substr(1)));
  return GbnfAlternatives(alts);
}

// A bound from minimum/maximum/exclusive*: the value and whether it is exclusive.
struct Bound {
  double value;
  bool exclusive;
};

// The tighter of minimum and exclusiveMinimum (or maximum and exclusiveMaximum); draft-4 boolean
// exclusive forms make the plain bound exclusive.
Result<std::optional<Bound>> ReadBound(const Json& s, const std::string& ptr, const char* plain,
                                       const char* exclusive, bool lower) {
  std::optional<Bound> bound;
  bool draft4_exclusive = false;
  if (s.contains(exclusive)) {
    const Json& e = s[exclusive];
    if (e.is_boolean()) {
      draft4_exclusive = e.get<bool>();
    } else if (e.is_number()) {
      bound = Bound{e.get<double>(), true};
    } else {
      return InvalidSchema(ptr, std::string(exclusive) + " must be a number");
    }
  }
  if (s.contains(plain)) {
    const Json& p = s[plain];
    if (!p.is_number()) return InvalidSchema(ptr, std::string(plain) + " must be a number");
    const Bound b{p.get<double>(), draft4_exclusive};
    const bool tighter = !bound || (lower ? b.value > bound->value : b.value < bound->value);
    if (tighter) bound = b;
  }
  return bound;
}

int64_t Clamp(double v) {
  const double limit = static_cast<double>(kMaxInt);  // rounds up to 1e16
  if (v >= limit) return kMaxInt;
  if (v <= -limit) return -kMaxInt;
  return static_cast<int64_t>(v);
}

}  // namespace

std::string NonNegativeRangeGbnf(int64_t lo, int64_t hi) {
  const std::string a = std::to_string(lo), b = std::to_string(hi);
  if (a.size() == b.size()) return DigitRange(a, b);
  std::vector<std::string> alts{DigitRange(a, std::string(a.size(), '9'))};
  if (b.size() - a.size() >= 2) {  // every length strictly between
    alts.push_back("[1-9] [0-9]{" + std::to_string(a.size()) + "," + std::to_string(b.size() - 2) + "}");
  }
  std::string ten_power(b.size(), '0');  // the smallest number as long as b
  ten_power[0] = '1';
  alts.push_back(DigitRange(ten_power, b));
  return GbnfAlternatives(alts);
}

std::string IntRangeGbnf(int64_t lo, int64_t hi) {
  std::vector<std::string> alts;
  if (lo < 0) alts.push_back(GbnfLiteral("-") + " " + NonNegativeRangeGbnf(hi < 0 ? -hi : 1, -lo));
  if (hi >= 0) alts.push_back(NonNegativeRangeGbnf(std::max<int64_t>(lo, 0), hi));
  if (alts.size() == 1) return alts[0];
  return "( " + alts[0] + " | " + alts[1] + " )";
}

Result<std::string> SchemaConverter::VisitString(const Json& s, const std::string& ptr,
                                                 const std::string& hint) {
  const bool has_min = s.contains("minLength"), has_max = s.contains("maxLength");
  if (s.contains("format")) {
    for (const char* other : {"pattern", "minLength", "maxLength"}) {
      if (s.contains(other)) return Unsupported(other, ptr, " next to \"format\"");
    }
    if (!s["format"].is_string()) return InvalidSchema(ptr, "format must be a string");
    return Format(s["format"].get<std::string>(), ptr);
  }
  if (s.contains("pattern")) {
    for (const char* other : {"minLength", "maxLength"}) {
      if (s.contains(other)) return Unsupported(other, ptr, " next to \"pattern\"");
    }
    if (!s["pattern"].is_string()) return InvalidSchema(ptr, "pattern must be a string");
    auto body = PatternToGbnf(s["pattern"].get<std::string>());
    if (!body.ok()) return Unsupported("pattern", ptr, " (" + body.status().message() + ")");
    return rules_.Add(hint, kQuote + " " + *body + " " + kQuote);
  }
  if (!has_min && !has_max) return std::string("string");
  int64_t min = 0, max = -1;
  for (const char* key : {"minLength", "maxLength"}) {
    if (!s.contains(key)) continue;
    const Json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0) {
      return InvalidSchema(ptr, std::string(key) + " must be a non-negative integer");
    }
    (key[1] == 'i' ? min : max) = v.get<int64_t>();
  }
  if (max >= 0 && min > max) return InvalidSchema(ptr, "minLength is above maxLength");
  if (max > kMaxRepeatBound) max = -1;
  const std::string count = max < 0 ? Cat("{", std::to_string(min), ",}")
                                    : Cat("{", std::to_string(min), ",", std::to_string(max), "}");
  return rules_.Add(hint, kQuote + " char" + count + " " + kQuote);
}

Result<std::string> SchemaConverter::Format(const std::string& format, const std::string& ptr) {
  const auto known = format_rules_.find(format);
  if (known != format_rules_.end()) return known->second;
  const auto& bodies = FormatBodies();
  std::string body;
  if (format == "date-time") {
    body = bodies.at("date") + " \"T\" " + bodies.at("time");
  } else if (bodies.count(format)) {
    body = bodies.at(format);
  } else {
    return Unsupported("format", ptr, ": \"" + format + "\"");
  }
  const std::string name = rules_.Add("format-" + format, kQuote + " " + body + " " + kQuote);
  format_rules_[format] = name;
  return name;
}

Result<std::string> SchemaConverter::VisitNumber(const Json& s, const std::string& ptr, bool integer) {
  LLAMAY_ASSIGN_OR_RETURN(std::optional<Bound> lower, ReadBound(s, ptr, "minimum", "exclusiveMinimum", true));
  LLAMAY_ASSIGN_OR_RETURN(std::optional<Bound> upper,
                          ReadBound(s, ptr, "maximum", "exclusiveMaximum", false));
  if (!lower && !upper) {
    return integer ? "( " + GbnfLiteral("-") + "? int )" : std::string("number");
  }
  // Integer-valued outputs: [ilo, ihi].
  int64_t ilo = -kMaxInt, ihi = kMaxInt;
  if (lower) {
    const double v = lower->value;
    ilo = Clamp(std::floor(v) == v ? (lower->exclusive ? v + 1 : v) : std::ceil(v));
  }
  if (upper) {
    const double v = upper->value;
    ihi = Clamp(std::floor(v) == v ? (upper->exclusive ? v - 1 : v) : std::floor(v));
  }
  std::vector<std::string> alts;
  if (ilo <= ihi) alts.push_back(IntRangeGbnf(ilo, ihi));
  if (!integer) {
    // Outputs with a fraction ending in a non-zero digit: x = +-(I + f), 0 < f < 1. With integer bounds L
    // and H (a non-integer bound is rounded inward), x >= L needs I >= L (x > 0) or I <= -L - 1 (x < 0),
    // and x <= H needs I <= H - 1 (x > 0) or I >= -H (x < 0, when H < 0); exclusive bounds give the same.
    const std::string frac = GbnfLiteral(".") + " [0-9]{0,15} [1-9]";
    const int64_t l = lower ? Clamp(std::ceil(lower->value)) : -kMaxInt - 1;
    const int64_t h = upper ? Clamp(std::floor(upper->value)) : kMaxInt + 1;
    const int64_t pos_lo = std::max<int64_t>(l, 0), pos_hi = std::min<int64_t>(h - 1, kMaxInt);
    if (pos_lo <= pos_hi) alts.push_back(NonNegativeRangeGbnf(pos_lo, pos_hi) + " " + frac);
    const int64_t neg_lo = h < 0 ? -h : 0, neg_hi = std::min<int64_t>(-l - 1, kMaxInt);
    if (neg_lo <= neg_hi)
      alts.push_back(GbnfLiteral("-") + " " + NonNegativeRangeGbnf(neg_lo, neg_hi) + " " + frac);
  }
  if (alts.empty()) {
    return InvalidSchema(ptr, integer ? "no integer lies between the minimum and the maximum"
                                      : "the minimum is above the maximum");
  }
  return GbnfAlternatives(alts);
}

std::string SchemaConverter::KeyNotIn(const std::vector<std::string>& names, const std::string& hint) {
  // A trie of the names over code points; node v's rule matches the rest of a key that has read v's prefix.
  struct Node {
    std::map<uint32_t, int> children;
    bool terminal = false;
  };
  std::vector<Node> trie(1);
  for (const std::string& name : names) {
    int v = 0;
    for (size_t pos = 0; pos < name.size();) {
      uint32_t cp;
      if (!DecodeUtf8(name, &pos, &cp)) break;
      const auto it = trie[v].children.find(cp);
      if (it != trie[v].children.end()) {
        v = it->second;
      } else {
        trie[v].children[cp] = static_cast<int>(trie.size());
        v = static_cast<int>(trie.size());
        trie.emplace_back();
      }
    }
    trie[v].terminal = true;
  }
  const CpSet key_chars = Complement(Normalize({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}));
  const std::string key_char = rules_.Add(hint + "-key-char", GbnfClass(key_chars));
  std::vector<std::string> rule_names(trie.size());
  for (size_t v = 0; v < trie.size(); ++v) rule_names[v] = rules_.NewName(hint + "-key");
  for (size_t v = 0; v < trie.size(); ++v) {
    std::vector<std::string> alts;
    if (!trie[v].terminal) alts.push_back("");  // the key may end here
    CpSet others = key_chars;
    for (const auto& [cp, child] : trie[v].children) {
      if (!Contains(key_chars, cp)) continue;  // a name with escaped characters: never a raw key
      alts.push_back(GbnfClass({{cp, cp}}) + " " + rule_names[child]);
      others = Complement(Union(Complement(others), {{cp, cp}}));
    }
    if (!others.empty()) alts.push_back(GbnfClass(others) + " " + key_char + "*");
    // Always a group, even of one alternative: an empty one must still read as "( )".
    std::string body = "(";
    for (size_t i = 0; i < alts.size(); ++i) {
      body.append(i ? " | " : " ");
      body.append(alts[i]);
    }
    body.append(" )");
    rules_.Define(rule_names[v], std::move(body));
  }
  return rule_names[0];
}

}  // namespace llamay::grammar::internal
