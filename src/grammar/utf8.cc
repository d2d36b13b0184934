// UTF-8 range splitting: see utf8.h.
#include "grammar/utf8.h"

#include <algorithm>

namespace llamay::grammar::internal {
namespace {

constexpr uint32_t kSurrogateLo = 0xD800;
constexpr uint32_t kSurrogateHi = 0xDFFF;

int EncodedLength(uint32_t cp) {
  if (cp < 0x80) return 1;
  if (cp < 0x800) return 2;
  if (cp < 0x10000) return 3;
  return 4;
}

// The encoding of cp in exactly `n` bytes (cp must need n bytes).
void Encode(uint32_t cp, int n, uint8_t* b) {
  switch (n) {
    case 1:
      b[0] = static_cast<uint8_t>(cp);
      return;
    case 2:
      b[0] = static_cast<uint8_t>(0xC0 | (cp >> 6));
      b[1] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
      return;
    case 3:
      b[0] = static_cast<uint8_t>(0xE0 | (cp >> 12));
      b[1] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
      b[2] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
      return;
    default:
      b[0] = static_cast<uint8_t>(0xF0 | (cp >> 18));
      b[1] = static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F));
      b[2] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
      b[3] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
  }
}

// Splits [lo, hi] (same encoded length) until every piece's encodings form a product of byte ranges.
void Split(uint32_t lo, uint32_t hi, std::vector<std::vector<ByteRange>>* out) {
  const int n = EncodedLength(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;  // the low 6*i bits: the last i continuation bytes
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        Split(lo, lo | m, out);
        Split((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        Split(lo, (hi & ~m) - 1, out);
        Split(hi & ~m, hi, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  Encode(lo, n, a);
  Encode(hi, n, b);
  std::vector<ByteRange> seq(n);
  for (int i = 0; i < n; ++i) seq[i] = {a[i], b[i]};
  out->push_back(std::move(seq));
}

}  // namespace

CpSet Normalize(CpSet set) {
  CpSet clipped;
  for (CpRange r : set) {
    if (r.lo > r.hi || r.lo > kMaxCodePoint) continue;
    r.hi = std::min(r.hi, kMaxCodePoint);
    // Cut out the surrogates.
    if (r.hi < kSurrogateLo || r.lo > kSurrogateHi) {
      clipped.push_back(r);
      continue;
    }
    if (r.lo < kSurrogateLo) clipped.push_back({r.lo, kSurrogateLo - 1});
    if (r.hi > kSurrogateHi) clipped.push_back({kSurrogateHi + 1, r.hi});
  }
  std::sort(clipped.begin(), clipped.end(), [](CpRange a, CpRange b) { return a.lo < b.lo; });
  CpSet out;
  for (CpRange r : clipped) {
    // Ranges that touch across the surrogate gap stay separate, which is harmless.
    if (!out.empty() && r.lo <= out.back().hi + 1) {
      out.back().hi = std::max(out.back().hi, r.hi);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

CpSet Complement(const CpSet& set) {
  CpSet out;
  uint32_t next = 0;
  for (CpRange r : set) {
    if (r.lo > next) out.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return Normalize(std::move(out));
}

CpSet Union(const CpSet& a, const CpSet& b) {
  CpSet all = a;
  all.insert(all.end(), b.begin(), b.end());
  return Normalize(std::move(all));
}

bool Contains(const CpSet& set, uint32_t cp) {
  for (CpRange r : set) {
    if (cp >= r.lo && cp <= r.hi) return true;
  }
  return false;
}

CpSet AnyScalar() { return Normalize({{0, kMaxCodePoint}}); }

std::vector<std::vector<ByteRange>> Utf8Sequences(const CpSet& set) {
  std::vector<std::vector<ByteRange>> out;
  static constexpr uint32_t kLengthEnds[] = {0x7F, 0x7FF, 0xFFFF, kMaxCodePoint};
  for (CpRange r : set) {
    uint32_t lo = r.lo;
    for (uint32_t end : kLengthEnds) {
      if (lo > r.hi) break;
      if (lo > end) continue;
      const uint32_t hi = std::min(r.hi, end);
      Split(lo, hi, &out);
      lo = hi + 1;
    }
  }
  return out;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  uint8_t b[4];
  const int n = EncodedLength(cp);
  Encode(cp, n, b);
  out->append(reinterpret_cast<const char*>(b), n);
}

bool DecodeUtf8(std::string_view s, size_t* pos, uint32_t* cp) {
  if (*pos >= s.size()) return false;
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  const uint8_t b0 = byte(*pos);
  int n;
  uint32_t v;
  if (b0 < 0x80) {
    n = 1;
    v = b0;
  } else if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
    v = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    v = b0 & 0x0F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    v = b0 & 0x07;
  } else {
    return false;
  }
  if (*pos + n > s.size()) return false;
  for (int i = 1; i < n; ++i) {
    const uint8_t b = byte(*pos + i);
    if ((b & 0xC0) != 0x80) return false;
    v = (v << 6) | (b & 0x3F);
  }
  if (EncodedLength(v) != n || v > kMaxCodePoint || (v >= kSurrogateLo && v <= kSurrogateHi)) return false;
  *pos += n;
  *cp = v;
  return true;
}

}  // namespace llamay::grammar::internal
