// GBNF writing helpers (see gbnf_text.h).
#include "grammar/gbnf_text.h"

#include <cstdio>

#include "grammar/json_core.h"

namespace llamay::grammar::internal {
namespace {

// A code point as written inside a GBNF class or literal.
std::string Escaped(uint32_t cp) {
  if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9')) {
    return std::string(1, static_cast<char>(cp));
  }
  char buf[16];
  if (cp <= 0xFF) {
    std::snprintf(buf, sizeof(buf), "\\x%02X", cp);
  } else if (cp <= 0xFFFF) {
    std::snprintf(buf, sizeof(buf), "\\u%04X", cp);
  } else {
    std::snprintf(buf, sizeof(buf), "\\U%08X", cp);
  }
  return buf;
}

}  // namespace

std::string GbnfLiteral(std::string_view utf8) {
  std::string out = "\"";
  for (char c : utf8) {
    const uint8_t b = static_cast<uint8_t>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (b < 0x20 || b == 0x7F) {
      out += Escaped(b);
    } else {
      out += c;  // printable ASCII, or a byte of a UTF-8 character (the parser decodes it)
    }
  }
  return out + "\"";
}

std::string GbnfClass(const CpSet& set) {
  std::string out = "[";
  for (CpRange r : set) {
    out += Escaped(r.lo);
    if (r.hi != r.lo) {
      out += '-';
      out += Escaped(r.hi);
    }
  }
  return out + "]";
}

std::string JsonCharExpr(const CpSet& set) {
  std::vector<std::string> alts;
  // Raw: everything but '"', '\\' and the controls.
  CpSet raw;
  for (CpRange r : set) {
    if (r.hi < 0x20) continue;
    raw.push_back({std::max<uint32_t>(r.lo, 0x20), r.hi});
  }
  raw = Normalize(std::move(raw));
  CpSet keep;
  for (CpRange r : raw) {
    uint32_t lo = r.lo;
    for (uint32_t cut : {uint32_t{'"'}, uint32_t{'\\'}}) {
      if (cut >= lo && cut <= r.hi) {
        if (cut > lo) keep.push_back({lo, cut - 1});
        lo = cut + 1;
      }
    }
    if (lo <= r.hi) keep.push_back({lo, r.hi});
  }
  if (!keep.empty()) alts.push_back(GbnfClass(keep));
  if (Contains(set, '"')) alts.push_back(GbnfLiteral("\\\""));
  if (Contains(set, '\\')) alts.push_back(GbnfLiteral("\\\\"));
  for (uint32_t c = 0; c < 0x20; ++c) {
    if (!Contains(set, c)) continue;
    switch (c) {
      case '\n':
        alts.push_back(GbnfLiteral("\\n"));
        break;
      case '\r':
        alts.push_back(GbnfLiteral("\\r"));
        break;
      case '\t':
        alts.push_back(GbnfLiteral("\\t"));
        break;
      case '\b':
        alts.push_back(GbnfLiteral("\\b"));
        break;
      case '\f':
        alts.push_back(GbnfLiteral("\\f"));
        break;
      default: {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "\\u%04x", c);
        alts.push_back(GbnfLiteral(buf));
      }
    }
  }
  if (alts.empty()) return "";
  return GbnfAlternatives(alts);
}

std::string GbnfAlternatives(const std::vector<std::string>& alts) {
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) {
    out.append(i ? " | " : " ");
    out.append(alts[i]);
  }
  out.append(" )");
  return out;
}

GbnfRules::GbnfRules(std::string prefix) : prefix_(std::move(prefix)) {
  for (const char* const* n = JsonCoreRuleNames(); *n != nullptr; ++n) names_.insert(*n);
  names_.insert(prefix_ + "root");
}

std::string GbnfRules::NewName(std::string_view hint) {
  std::string base;
  for (char c : hint) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (ok) {
      base += c;
    } else if (!base.empty() && base.back() != '-') {
      base += '-';
    }
    if (base.size() >= 40) break;
  }
  while (!base.empty() && base.back() == '-') base.pop_back();
  if (base.empty()) base.push_back('r');
  base.insert(0, prefix_);
  // The first of base, base-2, base-3, ... not taken. Names are never given back, so the suffixes below the
  // last one this base took are still taken: the search starts there (from 2 every time, a schema whose
  // thousands of rules share one hint, like the trie of a long key, cost quadratic time; request_fuzz).
  std::string name = base;
  int& next = next_suffix_[base];
  if (next < 2) next = 2;
  while (names_.count(name)) {
    name = base;
    name += '-';
    name += std::to_string(next++);
  }
  names_.insert(name);
  return name;
}

std::string GbnfRules::Add(std::string_view hint, std::string body) {
  std::string name = NewName(hint);
  Define(name, std::move(body));
  return name;
}

std::string GbnfRules::Text() const {
  std::string out;
  for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
  return out;
}

}  // namespace llamay::grammar::internal
