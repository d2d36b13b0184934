#include "tokenizer/unicode.h"

#include <array>

namespace llamay::tokenizer::internal {
namespace {

bool IsContinuation(uint8_t b) { return (b & 0xC0) == 0x80; }

struct ByteTables {
  std::array<std::string, 256> byte_to_utf8;
  std::array<int16_t, 324> cpt_to_byte;  // images are all below U+0144
};

// GPT-2's table: printable Latin-1 bytes ('!'..'~', 0xA1..0xAC, 0xAE..0xFF) map to themselves, the other
// 68 bytes map, in byte order, to U+0100, U+0101, ...
const ByteTables& Tables() {
  static const ByteTables tables = [] {
    ByteTables t;
    t.cpt_to_byte.fill(-1);
    auto printable = [](int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; };
    int next_extra = 0;
    for (int b = 0; b < 256; ++b) {
      const uint32_t cpt = printable(b) ? static_cast<uint32_t>(b) : 256u + next_extra++;
      AppendUtf8(cpt, &t.byte_to_utf8[b]);
      t.cpt_to_byte[cpt] = static_cast<int16_t>(b);
    }
    return t;
  }();
  return tables;
}

}  // namespace

size_t Utf8SequenceLength(uint8_t lead) {
  static constexpr uint8_t kLengths[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLengths[lead >> 4];
}

std::vector<uint32_t> DecodeUtf8Lossy(std::string_view text) {
  std::vector<uint32_t> out;
  out.reserve(text.size());
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const uint8_t b0 = s[i];
    size_t len = 0;
    uint32_t cpt = 0;
    if (b0 < 0x80) {
      len = 1;
      cpt = b0;
    } else if ((b0 & 0x40) == 0) {
      len = 0;  // a continuation byte cannot start a sequence
    } else if ((b0 & 0x20) == 0) {
      len = 2;
      cpt = b0 & 0x1F;
    } else if ((b0 & 0x10) == 0) {
      len = 3;
      cpt = b0 & 0x0F;
    } else if ((b0 & 0x08) == 0) {
      len = 4;
      cpt = b0 & 0x07;
    }
    bool ok = len > 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) {
      if (!IsContinuation(s[i + k])) {
        ok = false;
      } else {
        cpt = (cpt << 6) | (s[i + k] & 0x3F);
      }
    }
    if (!ok) {
      out.push_back(kReplacementChar);
      ++i;
      continue;
    }
    out.push_back(cpt);
    i += len;
  }
  return out;
}

void AppendUtf8(uint32_t cpt, std::string* out) {
  if (cpt <= 0x7F) {
    out->push_back(static_cast<char>(cpt));
  } else if (cpt <= 0x7FF) {
    out->push_back(static_cast<char>(0xC0 | (cpt >> 6)));
    out->push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt <= 0xFFFF) {
    out->push_back(static_cast<char>(0xE0 | (cpt >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt <= 0x10FFFF) {
    out->push_back(static_cast<char>(0xF0 | (cpt >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cpt >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else {
    AppendUtf8(kReplacementChar, out);
  }
}

bool IsUnicodeWhitespace(uint32_t cpt) {
  if (cpt <= 0x20) return cpt == 0x20 || (cpt >= 0x09 && cpt <= 0x0D);
  switch (cpt) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cpt >= 0x2000 && cpt <= 0x200A;
  }
}

const std::string& ByteToUnicode(uint8_t byte) { return Tables().byte_to_utf8[byte]; }

int UnicodeToByte(uint32_t cpt) {
  const auto& t = Tables().cpt_to_byte;
  return cpt < t.size() ? t[cpt] : -1;
}

size_t CompleteUtf8Prefix(std::string_view bytes) {
  const auto* s = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t n = bytes.size();
  // Only the last three bytes can belong to a sequence that is still waiting for bytes.
  const size_t first = n > 3 ? n - 3 : 0;
  for (size_t i = n; i > first; --i) {
    const uint8_t b = s[i - 1];
    if (IsContinuation(b)) continue;
    if (b < 0xC0 || b >= 0xF8) return n;  // ASCII or never-valid: nothing pending
    const size_t need = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
    const size_t have = n - (i - 1);
    return have < need ? i - 1 : n;
  }
  return n;  // only continuation bytes in the window: they can never complete
}

}  // namespace llamay::tokenizer::internal
