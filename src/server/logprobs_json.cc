#include "server/logprobs_json.h"

#include "server/http_util.h"

namespace llamay::server {
namespace {

// How far ahead a piece is looked for after text that no token's piece matched (an unknown character).
constexpr size_t kResyncBytes = 8;

// The piece as it will print: invalid UTF-8 replaced as Dump does, so that a key of top_logprobs and the
// same token in "tokens" read alike.
std::string Printable(const std::string& piece) { return json::parse(Dump(json(piece))).get<std::string>(); }

json ChatEntry(const tokenizer::Tokenizer& tok, int32_t t, float lp) {
  const std::string piece = tok.TokenToPiece(t);
  return json{{"token", piece}, {"logprob", lp}, {"bytes", std::vector<uint8_t>(piece.begin(), piece.end())}};
}

}  // namespace

json CompletionLogprobsJson(const tokenizer::Tokenizer& tok, std::span<const LogprobEntry> entries) {
  json tokens = json::array(), token_logprobs = json::array(), top_logprobs = json::array(),
       offsets = json::array();
  for (const LogprobEntry& e : entries) {
    tokens.push_back(Printable(tok.TokenToPiece(e.token)));
    offsets.push_back(e.text_offset);
    if (!e.logprob) {
      token_logprobs.push_back(nullptr);
      top_logprobs.push_back(nullptr);
      continue;
    }
    token_logprobs.push_back(*e.logprob);
    json top = json::object();
    for (const auto& [t, lp] : e.top) {
      const std::string key = Printable(tok.TokenToPiece(t));
      if (!top.contains(key)) top[key] = lp;
    }
    const std::string chosen = Printable(tok.TokenToPiece(e.token));
    if (!top.contains(chosen)) top[chosen] = *e.logprob;
    top_logprobs.push_back(std::move(top));
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top_logprobs)},
          {"text_offset", std::move(offsets)}};
}

json ChatLogprobsJson(const tokenizer::Tokenizer& tok, std::span<const LogprobEntry> entries) {
  json content = json::array();
  for (const LogprobEntry& e : entries) {
    json top = json::array();
    for (const auto& [t, lp] : e.top) top.push_back(ChatEntry(tok, t, lp));
    json chosen = ChatEntry(tok, e.token, e.logprob.value_or(0.0f));
    chosen["top_logprobs"] = std::move(top);
    content.push_back(std::move(chosen));
  }
  return {{"content", std::move(content)}};
}

size_t CodePoints(std::string_view text) {
  // Every byte but a continuation byte (10xxxxxx) starts a code point, or is one U+FFFD on its own.
  size_t n = 0;
  for (const char c : text) n += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
  return n;
}

std::vector<size_t> PromptByteOffsets(const tokenizer::Tokenizer& tok, std::span<const int32_t> prompt,
                                      std::string_view text) {
  std::vector<size_t> out;
  out.reserve(prompt.size());
  size_t pos = 0;
  for (const int32_t t : prompt) {
    out.push_back(pos);
    const std::string piece = tok.TokenToPiece(t);
    if (piece.empty()) continue;
    const std::string_view rest = text.substr(pos);
    if (rest.starts_with(piece)) {
      pos += piece.size();
    } else if (piece[0] == ' ' && rest.starts_with(std::string_view(piece).substr(1))) {
      pos += piece.size() - 1;
    } else if (!tok.IsControl(t)) {
      // Text that unknown tokens stood for comes first: the piece is found a character or so ahead.
      const size_t at = rest.substr(0, kResyncBytes + piece.size()).find(piece);
      if (at != std::string_view::npos) {
        out.back() = pos + at;
        pos += at + piece.size();
      }
    }
  }
  return out;
}

}  // namespace llamay::server
