#include "template/str_ops.h"

#include <algorithm>
#include <vector>

namespace llamay::chat::internal {
namespace {

std::vector<uint32_t> CodePoints(std::string_view s) {
  std::vector<uint32_t> cps;
  for (size_t i = 0; i < s.size();) cps.push_back(DecodeUtf8(s, &i));
  return cps;
}

Status TypeError(std::string message) { return InvalidArgumentError(std::move(message)); }

}  // namespace

bool IsSpaceCodePoint(uint32_t cp) {
  return cp == ' ' || (cp >= '\t' && cp <= '\r') || (cp >= 0x1c && cp <= 0x1f) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

std::string Strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  std::vector<uint32_t> set;
  if (chars) set = CodePoints(*chars);
  auto strip_it = [&](uint32_t cp) {
    return chars ? std::find(set.begin(), set.end(), cp) != set.end() : IsSpaceCodePoint(cp);
  };
  std::vector<size_t> offsets = Utf8Offsets(s);
  size_t begin = 0, end = offsets.size() - 1;  // code point indices
  auto cp_at = [&](size_t idx) {
    size_t i = offsets[idx];
    return DecodeUtf8(s, &i);
  };
  if (left) {
    while (begin < end && strip_it(cp_at(begin))) ++begin;
  }
  if (right) {
    while (end > begin && strip_it(cp_at(end - 1))) --end;
  }
  return std::string(s.substr(offsets[begin], offsets[end] - offsets[begin]));
}

Result<List> Split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit,
                   bool from_right) {
  List parts;
  if (sep) {
    if (sep->empty()) return TypeError("empty separator");
    std::vector<std::string> pieces;
    if (!from_right) {
      size_t pos = 0;
      while (maxsplit < 0 || static_cast<int64_t>(pieces.size()) < maxsplit) {
        size_t at = s.find(*sep, pos);
        if (at == std::string_view::npos) break;
        pieces.emplace_back(s.substr(pos, at - pos));
        pos = at + sep->size();
      }
      pieces.emplace_back(s.substr(pos));
    } else {
      size_t end = s.size();
      std::vector<std::string> rev;
      while (maxsplit < 0 || static_cast<int64_t>(rev.size()) < maxsplit) {
        if (end < sep->size()) break;
        size_t at = s.rfind(*sep, end - sep->size());
        if (at == std::string_view::npos) break;
        rev.emplace_back(s.substr(at + sep->size(), end - at - sep->size()));
        end = at;
      }
      rev.emplace_back(s.substr(0, end));
      pieces.assign(rev.rbegin(), rev.rend());
    }
    for (auto& p : pieces) parts.push_back(Value::String(std::move(p)));
    return parts;
  }
  // Whitespace runs; leading and trailing whitespace never yields empty strings.
  std::vector<std::pair<size_t, size_t>> words;  // byte ranges
  std::vector<size_t> offsets = Utf8Offsets(s);
  std::vector<bool> space(offsets.size() - 1);
  for (size_t k = 0; k + 1 < offsets.size(); ++k) {
    size_t i = offsets[k];
    space[k] = IsSpaceCodePoint(DecodeUtf8(s, &i));
  }
  const size_t n = space.size();
  if (!from_right) {
    size_t k = 0;
    while (true) {
      while (k < n && space[k]) ++k;
      if (k == n) break;
      if (maxsplit >= 0 && static_cast<int64_t>(words.size()) == maxsplit) {
        size_t end = n;
        words.emplace_back(offsets[k], offsets[end]);
        break;
      }
      size_t start = k;
      while (k < n && !space[k]) ++k;
      words.emplace_back(offsets[start], offsets[k]);
    }
  } else {
    size_t k = n;
    while (true) {
      while (k > 0 && space[k - 1]) --k;
      if (k == 0) break;
      if (maxsplit >= 0 && static_cast<int64_t>(words.size()) == maxsplit) {
        words.emplace_back(offsets[0], offsets[k]);
        break;
      }
      size_t end = k;
      while (k > 0 && !space[k - 1]) --k;
      words.emplace_back(offsets[k], offsets[end]);
    }
    std::reverse(words.begin(), words.end());
  }
  for (auto [b, e] : words) parts.push_back(Value::String(std::string(s.substr(b, e - b))));
  return parts;
}

namespace {

// Simple (one-to-one) case pairs: Latin-1, Latin Extended-A, Greek, Cyrillic, Armenian, fullwidth Latin.
uint32_t UpperCp(uint32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c < 0x80) return c;
  if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 0x20;
  if (c == 0xFF) return 0x178;
  if (c == 0xB5) return 0x39C;
  if (c == 0x130) return c;
  if (c == 0x131) return 'I';
  if ((c >= 0x100 && c <= 0x137) || (c >= 0x14A && c <= 0x177)) return c & ~1u;
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c % 2 == 0) ? c - 1 : c;
  if (c == 0x17F) return 'S';
  if (c >= 0x3B1 && c <= 0x3C9) return c == 0x3C2 ? 0x3A3 : c - 0x20;
  if (c == 0x3AC) return 0x386;
  if (c >= 0x3AD && c <= 0x3AF) return c - 0x25;
  if (c == 0x3CC) return 0x38C;
  if (c == 0x3CD || c == 0x3CE) return c - 0x3F;
  if (c >= 0x430 && c <= 0x44F) return c - 0x20;
  if (c >= 0x450 && c <= 0x45F) return c - 0x50;
  if ((c >= 0x460 && c <= 0x481) || (c >= 0x48A && c <= 0x4BF)) return c & ~1u;
  if (c >= 0x561 && c <= 0x586) return c - 0x30;
  if (c >= 0xFF41 && c <= 0xFF5A) return c - 0x20;
  return c;
}

uint32_t LowerCp(uint32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0x80) return c;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 0x20;
  if (c == 0x178) return 0xFF;
  if (c == 0x130 || c == 0x131) return c;  // Python lowers İ to two code points; left as is
  if ((c >= 0x100 && c <= 0x137) || (c >= 0x14A && c <= 0x177)) return c | 1u;
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c % 2 == 1) ? c + 1 : c;
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 0x20;
  if (c == 0x386) return 0x3AC;
  if (c >= 0x388 && c <= 0x38A) return c + 0x25;
  if (c == 0x38C) return 0x3CC;
  if (c == 0x38E || c == 0x38F) return c + 0x3F;
  if (c >= 0x410 && c <= 0x42F) return c + 0x20;
  if (c >= 0x400 && c <= 0x40F) return c + 0x50;
  if ((c >= 0x460 && c <= 0x481) || (c >= 0x48A && c <= 0x4BF)) return c | 1u;
  if (c >= 0x531 && c <= 0x556) return c + 0x30;
  if (c >= 0xFF21 && c <= 0xFF3A) return c + 0x20;
  return c;
}

void AppendUpper(uint32_t cp, std::string* out) {
  if (cp == 0xDF) {  // ß
    *out += "SS";
    return;
  }
  AppendUtf8(UpperCp(cp), out);
}

template <typename Fn>
std::string MapCodePoints(std::string_view s, Fn fn) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) fn(DecodeUtf8(s, &i), &out);
  return out;
}

}  // namespace

bool IsLowerCp(uint32_t cp) { return cp == 0xDF || UpperCp(cp) != cp; }
bool IsUpperCp(uint32_t cp) { return LowerCp(cp) != cp; }

std::string PyUpper(std::string_view s) { return MapCodePoints(s, AppendUpper); }

std::string PyLower(std::string_view s) {
  return MapCodePoints(s, [](uint32_t cp, std::string* out) { AppendUtf8(LowerCp(cp), out); });
}

std::string PyTitle(std::string_view s) {
  bool prev_cased = false;
  return MapCodePoints(s, [&](uint32_t cp, std::string* out) {
    const bool cased = IsLowerCp(cp) || IsUpperCp(cp);
    if (cased && !prev_cased) {
      AppendUpper(cp, out);
    } else {
      AppendUtf8(cased ? LowerCp(cp) : cp, out);
    }
    prev_cased = cased;
  });
}

std::string PyCapitalize(std::string_view s) {
  bool first = true;
  return MapCodePoints(s, [&](uint32_t cp, std::string* out) {
    if (first) {
      AppendUpper(cp, out);
    } else {
      AppendUtf8(LowerCp(cp), out);
    }
    first = false;
  });
}

std::string Replace(std::string_view s, std::string_view from, std::string_view to, int64_t count) {
  std::string out;
  int64_t done = 0;
  if (from.empty()) {  // Python inserts `to` around every code point
    std::vector<size_t> offsets = Utf8Offsets(s);
    for (size_t k = 0; k + 1 < offsets.size(); ++k) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      out.append(s.substr(offsets[k], offsets[k + 1] - offsets[k]));
    }
    if (count < 0 || done < count) out += to;
    return out;
  }
  size_t pos = 0;
  while (count < 0 || done < count) {
    size_t at = s.find(from, pos);
    if (at == std::string_view::npos) break;
    out.append(s.substr(pos, at - pos));
    out += to;
    pos = at + from.size();
    ++done;
  }
  out.append(s.substr(pos));
  return out;
}

}  // namespace llamay::chat::internal
