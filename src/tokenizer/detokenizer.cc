#include "tokenizer/detokenizer.h"

#include "tokenizer/unicode.h"

namespace llamay::tokenizer {

std::string StreamingDetokenizer::Push(int32_t id) {
  pending_ += tokenizer_.TokenToPiece(id, render_special_);
  const size_t complete = internal::CompleteUtf8Prefix(pending_);
  std::string out = pending_.substr(0, complete);
  pending_.erase(0, complete);
  return out;
}

std::string StreamingDetokenizer::Flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace llamay::tokenizer
