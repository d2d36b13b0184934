// StreamingDetokenizer: turns tokens arriving one at a time into text that is always whole UTF-8 characters,
// for printing or streaming generated tokens. A character split across byte tokens (e.g. <0xE2> <0x82> <0xAC>
// for "€") is held back until its last byte arrives.
//
// The output is the concatenation of Tokenizer::TokenToPiece over the tokens (no leading-space stripping or
// space clean-up: those are whole-text operations, see Tokenizer::Decode). Bytes that can never form a valid
// character (a stray continuation byte, a truncated sequence followed by something else) are passed through
// as they come rather than held forever. Invariant: Push outputs + Flush() == all pieces concatenated.
//
// Thread-safety: not thread-safe (one stream, one owner); the Tokenizer it reads must outlive it.
#ifndef LLAMAY_TOKENIZER_DETOKENIZER_H_
#define LLAMAY_TOKENIZER_DETOKENIZER_H_

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"

namespace llamay::tokenizer {

class StreamingDetokenizer {
 public:
  explicit StreamingDetokenizer(const Tokenizer& tokenizer, bool render_special = true)
      : tokenizer_(tokenizer), render_special_(render_special) {}

  // Adds one token; returns the text that is now complete (possibly empty).
  std::string Push(int32_t id);
  // Returns whatever is still held back (an incomplete character) and resets the stream.
  std::string Flush();
  // Bytes held back (at most 3).
  size_t pending() const { return pending_.size(); }

 private:
  const Tokenizer& tokenizer_;
  bool render_special_;
  std::string pending_;
};

}  // namespace llamay::tokenizer

#endif  // LLAMAY_TOKENIZER_DETOKENIZER_H_
