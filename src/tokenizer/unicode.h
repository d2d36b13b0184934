// UTF-8 helpers shared by the tokenizers: lossy decoding with the exact rules llama.cpp applies, canonical
// encoding, the GPT-2 byte-to-unicode table used by byte-level BPE, and complete-character scanning for
// streaming output.
//
// Invariants: DecodeUtf8Lossy never fails: each byte that does not start a well-formed sequence (lead byte
// plus the right number of continuation bytes) becomes one U+FFFD. Overlong forms and surrogates are NOT
// rejected (they decode to their numeric value), because the reference tokenizer does not reject them.
//
// Thread-safety: all functions are pure; the byte tables are immutable after first use (function-local
// statics, initialised thread-safely).
#ifndef LLAMAY_TOKENIZER_UNICODE_H_
#define LLAMAY_TOKENIZER_UNICODE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace llamay::tokenizer::internal {

inline constexpr uint32_t kReplacementChar = 0xFFFD;

// Length of the UTF-8 sequence a lead byte announces, from its high nibble alone (0x0-0xB -> 1, 0xC-0xD -> 2,
// 0xE -> 3, 0xF -> 4). Continuation bytes count as 1. This is how SentencePiece-style splitting walks text.
size_t Utf8SequenceLength(uint8_t lead);

// Code points of `text`; malformed bytes become U+FFFD one byte at a time (see the header comment).
std::vector<uint32_t> DecodeUtf8Lossy(std::string_view text);

// Appends the UTF-8 form of `cpt`. Surrogates are encoded as three bytes (as the reference does); values
// above U+10FFFF, which have no UTF-8 form, are written as U+FFFD.
void AppendUtf8(uint32_t cpt, std::string* out);

// True for the Unicode White_Space code points (the set the reference pre-tokenizers treat as \s).
bool IsUnicodeWhitespace(uint32_t cpt);

// GPT-2 byte-level encoding: every byte value maps to one printable code point (as UTF-8).
const std::string& ByteToUnicode(uint8_t byte);
// The byte a byte-level code point stands for, or -1 when `cpt` is not one of the 256 images.
int UnicodeToByte(uint32_t cpt);

// Length of the longest prefix of `bytes` that does not end inside an incomplete-but-still-valid UTF-8
// sequence. Bytes that can never become valid (a stray continuation byte, 0xF8..0xFF, a lead byte followed by
// a non-continuation byte) are not held back. REQUIRES: nothing; returns bytes.size() when nothing is
// pending.
size_t CompleteUtf8Prefix(std::string_view bytes);

}  // namespace llamay::tokenizer::internal

#endif  // LLAMAY_TOKENIZER_UNICODE_H_
