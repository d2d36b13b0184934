// libFuzzer target: the grammar front ends (GBNF, JSON Schema) and the Matcher driven over what they accept.
//
// The first byte picks the mode (bits 0-1) and options (bits 2-7); the rest is the payload.
//   mode 0, 3  ParseGbnf(text)            text: the payload up to its first NUL byte; the bytes after the
//   mode 1     FromJsonSchemaText(text)   NUL choose the tokens (below)
//   mode 2     AcceptBytes on AnyJson()    the whole payload, in chunks of 1 + (options >> 1) bytes
// A refusal must carry a message. A compiled grammar is then driven over a 1024-token synthetic vocabulary
// (grammar/synthetic_vocab.h: every single byte is a token, id = the byte): each step FillMask, then two
// choice bytes pick one of the allowed tokens, whose Accept must succeed; at most kMaxSteps steps, ending
// when the choices run out, the end token is taken or the parser stacks grow too many (kMaxStacks). Checked
// at every step: the mask is never empty before the end (every state can complete and every byte is a
// token), the end token is allowed exactly
// when CanEnd() (and MinBytesToEnd() is 0 exactly then), the control token never is, the single-byte tokens
// agree with AllowsByte. With option bit 2 a second Matcher with the mask cache off must produce the same
// masks. A choice with its top bit set first tries a disallowed token, which Accept must refuse, with a
// message, leaving the mask unchanged. For JSON Schema and AnyJson, a complete output must parse as JSON.
// In mode 2 a second matcher takes the bytes one at a time, and AllowsByte must predict each AcceptBytes.
// Build: cmake --preset fuzz && cmake --build build/fuzz --target grammar_fuzz
// Run:   build/fuzz/fuzz/grammar_fuzz -max_len=4096 CORPUS_DIR   (see docs/fuzzing.md)
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/synthetic_vocab.h"

namespace {

using llamay::grammar::Grammar;
using llamay::grammar::Matcher;
using llamay::grammar::TokenMask;
using llamay::grammar::Vocabulary;

constexpr int32_t kVocabSize = 1024;
constexpr int kMaxSteps = 300;
// A mask costs about one trie walk per parser stack, and an ambiguous recursive grammar doubles its stacks
// at every token (docs/fuzzing.md, findings): the drive stops before a mask over more than kMaxStacks
// stacks or past kMaxStackWork stacks summed over its steps, so that each input stays well under a second.
constexpr int32_t kMaxStacks = 32;
constexpr int64_t kMaxStackWork = 1000;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

bool SameMask(const TokenMask& a, const TokenMask& b) {
  return a.size() == b.size() && std::equal(a.words().begin(), a.words().end(), b.words().begin());
}

// The n-th token (0-based) whose allowed bit equals `allowed`; -1 when there are fewer.
int32_t NthToken(const TokenMask& mask, bool allowed, uint32_t n) {
  for (int32_t t = 0; t < mask.size(); ++t) {
    if (mask.allowed(t) == allowed && n-- == 0) return t;
  }
  return -1;
}

// Drives `grammar` with token choices; `json`: a complete output must parse as JSON.
void Drive(const std::shared_ptr<const Grammar>& grammar, std::string_view choices, bool compare_uncached,
           bool json) {
  static const std::shared_ptr<const Vocabulary> vocab = llamay::grammar::SyntheticVocabulary(kVocabSize);
  const int32_t end_token = kVocabSize - 1, control_token = kVocabSize - 2;
  Matcher m(grammar, vocab);
  Matcher uncached(grammar, vocab);
  uncached.set_mask_cache(false);
  TokenMask mask, other;
  std::string out;
  int64_t work = 0;
  for (int step = 0; step < kMaxSteps && choices.size() >= 2 && !m.IsTerminated(); ++step) {
    work += m.num_stacks();
    if (m.num_stacks() > kMaxStacks || work > kMaxStackWork) break;
    const uint8_t hi = static_cast<uint8_t>(choices[0]), lo = static_cast<uint8_t>(choices[1]);
    choices.remove_prefix(2);
    m.FillMask(&mask);
    Check(mask.size() == kVocabSize);
    if (compare_uncached) {
      uncached.FillMask(&other);
      Check(SameMask(mask, other));
    }
    const int32_t count = mask.Count();
    Check(count > 0);
    Check(mask.allowed(end_token) == m.CanEnd());
    Check((m.MinBytesToEnd() == 0) == m.CanEnd());
    Check(m.MinBytesToEnd() >= 0);
    Check(!m.MustEnd() || (m.CanEnd() && count == 1));
    Check(!mask.allowed(control_token));
    for (int b = 0; b < 256; ++b) Check(mask.allowed(b) == m.AllowsByte(static_cast<uint8_t>(b)));

    if ((hi & 0x80) && count < kVocabSize) {  // a disallowed token is refused and changes nothing
      const int32_t bad = NthToken(mask, false, ((hi & 0x7f) << 8 | lo) % (kVocabSize - count));
      Check(bad >= 0);
      const auto st = m.Accept(bad);
      Check(!st.ok() && !st.message().empty());
      m.FillMask(&other);
      Check(SameMask(mask, other));
    }
    const int32_t token = NthToken(mask, true, ((hi & 0x7f) << 8 | lo) % count);
    Check(token >= 0);
    Check(m.Accept(token).ok());
    if (compare_uncached) Check(uncached.Accept(token).ok());
    if (token != end_token) out += vocab->token_bytes(token);
  }
  if (json && m.CanEnd()) Check(nlohmann::json::accept(out));
}

// AnyJson over arbitrary bytes: chunked AcceptBytes against a byte-at-a-time matcher checked by AllowsByte.
void AnyJsonBytes(std::string_view bytes, size_t chunk) {
  static const std::shared_ptr<const Vocabulary> vocab = llamay::grammar::SyntheticVocabulary(kVocabSize);
  const auto grammar = llamay::grammar::AnyJson();
  Matcher chunked(grammar, vocab), single(grammar, vocab);
  size_t accepted = 0;  // bytes both matchers took
  bool refused = false;
  for (size_t pos = 0; pos < bytes.size() && !refused; pos += chunk) {
    const std::string_view piece = bytes.substr(pos, chunk);
    const bool can_end = chunked.CanEnd();
    const int64_t min_bytes = chunked.MinBytesToEnd();
    const auto st = chunked.AcceptBytes(piece);
    size_t i = 0;
    for (; i < piece.size(); ++i) {
      const bool allows = single.AllowsByte(static_cast<uint8_t>(piece[i]));
      const auto one = single.AcceptBytes(piece.substr(i, 1));
      Check(allows == one.ok());
      if (!one.ok()) {
        Check(!one.message().empty());
        break;
      }
    }
    Check(st.ok() == (i == piece.size()));
    if (!st.ok()) {
      Check(!st.message().empty());
      Check(chunked.CanEnd() == can_end && chunked.MinBytesToEnd() == min_bytes);  // unchanged
      refused = true;
    } else {
      accepted = pos + piece.size();
    }
  }
  if (!refused) {
    Check(chunked.CanEnd() == single.CanEnd());
    if (chunked.CanEnd()) Check(nlohmann::json::accept(bytes.substr(0, accepted)));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0] & 3, options = data[0] >> 2;
  const std::string_view payload(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (mode == 2) {
    AnyJsonBytes(payload, 1 + (options >> 1));
    return 0;
  }
  const size_t nul = payload.find('\0');
  const std::string_view text = payload.substr(0, nul);
  const std::string_view choices =
      nul == std::string_view::npos ? std::string_view() : payload.substr(nul + 1);
  auto grammar = mode == 1 ? llamay::grammar::FromJsonSchemaText(text) : llamay::grammar::ParseGbnf(text);
  if (!grammar.ok()) {
    Check(!grammar.status().message().empty());  // every refusal says why
    return 0;
  }
  Drive(*grammar, choices, options & 1, mode == 1);
  return 0;
}
