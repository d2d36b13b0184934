// Log probabilities as the OpenAI routes write them, and the echoed prompt's text offsets.
//
// Completions API (`logprobs: N`): {"tokens": [...], "token_logprobs": [...], "top_logprobs": [{token:
// logprob}], "text_offset": [...]}, one element per token. An echoed prompt's first token has null in
// token_logprobs and top_logprobs (nothing precedes it). Each top_logprobs object holds the N most probable
// tokens and the chosen one (so up to N + 1 keys, as OpenAI's); where two tokens print the same, the more
// probable keeps the key. text_offset counts Unicode code points (as OpenAI's and vLLM's) into the choice's
// text, the echoed prompt included.
//
// Chat API (`logprobs: true, top_logprobs: N`): {"content": [{token, logprob, bytes, top_logprobs: [{token,
// logprob, bytes}]}]}; "bytes" carries a piece exactly where "token" cannot (part of a UTF-8 character).
//
// Token strings are the tokens' pieces; bytes that are not UTF-8 become U+FFFD as everywhere in a response.
// Thread-safety: pure functions.
#ifndef LLAMAY_SERVER_LOGPROBS_JSON_H_
#define LLAMAY_SERVER_LOGPROBS_JSON_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace llamay::server {

// One token of a choice: generated, or an echoed prompt token.
struct LogprobEntry {
  int32_t token = -1;
  std::optional<float> logprob;                // none: an echoed prompt's first token
  std::vector<std::pair<int32_t, float>> top;  // most probable first
  size_t text_offset = 0;                      // code points of the choice's text before this token
};

nlohmann::json CompletionLogprobsJson(const tokenizer::Tokenizer& tok, std::span<const LogprobEntry> entries);
nlohmann::json ChatLogprobsJson(const tokenizer::Tokenizer& tok, std::span<const LogprobEntry> entries);

// Code points in `text`: the bytes that do not continue a UTF-8 sequence.
size_t CodePoints(std::string_view text);

// Where each prompt token's text starts in `text`, the prompt as the client sent it (bytes). Pieces are
// matched in order; a SentencePiece token's leading space may be absent (the space the vocabulary adds);
// a control or unknown token whose piece is not there verbatim (BOS, "<unk>") has zero width, and the
// token after unknown ones is looked for a few bytes ahead (the text they stood for).
std::vector<size_t> PromptByteOffsets(const tokenizer::Tokenizer& tok, std::span<const int32_t> prompt,
                                      std::string_view text);

}  // namespace llamay::server

#endif  // LLAMAY_SERVER_LOGPROBS_JSON_H_
