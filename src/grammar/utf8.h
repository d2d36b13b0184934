// UTF-8 and code point sets for the grammar compiler.
//
// Grammars are written over Unicode code points (GBNF character classes, JSON Schema patterns) but matched
// over bytes, because tokens are arbitrary byte strings that may end inside a character. A code point set
// is turned into the UTF-8 byte-range sequences that encode exactly its members, so the compiled automaton
// accepts only well-formed UTF-8 (no surrogates, nothing above U+10FFFF, no overlong forms).
//
// Thread-safety: pure functions and values.
#ifndef LLAMAY_GRAMMAR_UTF8_H_
#define LLAMAY_GRAMMAR_UTF8_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace llamay::grammar::internal {

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// An inclusive range of code points.
struct CpRange {
  uint32_t lo = 0;
  uint32_t hi = 0;
  bool operator==(const CpRange&) const = default;
};

// Invariant (after Normalize): sorted, disjoint, non-adjacent, within [0, kMaxCodePoint], no surrogates.
using CpSet = std::vector<CpRange>;

// Sorts and merges ranges, clamps to kMaxCodePoint and removes the surrogates U+D800..U+DFFF.
CpSet Normalize(CpSet set);
// Every scalar value not in `set`. REQUIRES: set is normalized.
CpSet Complement(const CpSet& set);
CpSet Union(const CpSet& a, const CpSet& b);
bool Contains(const CpSet& set, uint32_t cp);
// Every Unicode scalar value (U+0000..U+10FFFF without surrogates).
CpSet AnyScalar();

// An inclusive byte range.
struct ByteRange {
  uint8_t lo = 0;
  uint8_t hi = 0;
};

// Byte-range sequences (each 1 to 4 long) whose concatenations are exactly the UTF-8 encodings of `set`.
// REQUIRES: set is normalized.
std::vector<std::vector<ByteRange>> Utf8Sequences(const CpSet& set);

// Appends the UTF-8 encoding of a scalar value.
void AppendUtf8(uint32_t cp, std::string* out);

// Decodes one well-formed UTF-8 character of `s` at *pos and advances *pos; false (and *pos unchanged) on
// malformed input.
bool DecodeUtf8(std::string_view s, size_t* pos, uint32_t* cp);

}  // namespace llamay::grammar::internal

#endif  // LLAMAY_GRAMMAR_UTF8_H_
