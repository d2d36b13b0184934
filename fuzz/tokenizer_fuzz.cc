// libFuzzer target: tokenizers built from untrusted vocabularies, and untrusted text through the shipped
// reference vocabularies (../shared/ref/vocab/ggml-vocab-*.gguf, loaded once at start-up).
//
// Input: byte 0's bit 0 picks the mode, bit 1 add_special, bit 2 parse_special, bit 3 continuation, bit 4
// hides special tokens from the detokenizer, bit 5 overrides the mode:
//   Mode 2 (bit 5), a GGUF file: the rest is the file, whose tokenizer.* keys FromGguf reads; a fixed text is
//   encoded through the tokenizer it builds.
//   Mode 0, a shipped vocabulary: byte 1 picks it (modulo the number found); the rest is the text.
//   Mode 1, a fuzzed vocabulary, the fields of a VocabSpec as Tokenizer::FromGguf reads them: byte 1 picks
//   the model ("llama", "gpt2", "bert", or none) and byte 2 the pre-tokenizer (kPres); byte 3's bits say
//   which optional fields are present (scores, token types, add_bos, add_eos, add_space_prefix and their
//   values). Then the tokens, one per line, up to a NUL; the merges, one per line, up to a NUL; parameter
//   bytes up to a NUL (token i's type is param[i % n] % 8, its score param[(i + 1) % n] - 128; the
//   special ids bos, eos, eot, unk, pad are param[0..4] - 2, absent past the end); the rest is the text.
// Ids drawn from the text's bytes (two per id, some out of range) are decoded too.
//
// Properties: a vocabulary is refused with a message or builds a tokenizer whose Vocab::CheckInvariants
// hold (it aborts otherwise); Encode never crashes, and refuses with a message or returns ids in
// [0, n_vocab); Decode and TokenToPiece take any id. For the shipped vocabularies, Decode(Encode(text))
// gives the text back where the tokenizer promises it (tokenizer_parity_test's condition): valid UTF-8, a
// token for each of its bytes (vocabularies without one drop the byte, as llama.cpp does), no special
// token cut out of it (their strip attributes and the space added after them change the text),
// no " ," and the like for a vocabulary with space clean-up, and, for SentencePiece, no U+2581 in the text
// (it is the escaped space and decodes as one). For every tokenizer, a StreamingDetokenizer fed the ids one
// at a time gives pieces that concatenate to the TokenToPiece pieces, each piece whole UTF-8 when the
// whole is.
// Build: cmake --preset fuzz && cmake --build build/fuzz --target tokenizer_fuzz
// Run:   build/fuzz/fuzz/tokenizer_fuzz -max_len=32768 CORPUS_DIR   (see docs/fuzzing.md)
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace {

using llamay::tokenizer::StreamingDetokenizer;
using llamay::tokenizer::Tokenizer;
using llamay::tokenizer::VocabSpec;

// The shipped vocabularies llama.cpp's tokenizer tests use (bert-bge is refused: WordPiece).
constexpr const char* kShipped[] = {"llama-spm", "phi-3",          "baichuan",    "gpt-2",
                                    "gpt-neox",  "falcon",         "mpt",         "starcoder",
                                    "refact",    "deepseek-coder", "deepseek-llm"};
constexpr const char* kModels[] = {"llama", "gpt2", "bert", ""};
constexpr const char* kPres[] = {
    "",       "default",   "llama3",         "gpt-2",  "qwen2",       "deepseek-llm",
    "falcon", "starcoder", "deepseek-coder", "tekken", "chatglm-bpe", "no-such-pre"};

std::vector<std::unique_ptr<Tokenizer>>* shipped = nullptr;

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "tokenizer_fuzz: property failed: %s\n", what);
    __builtin_trap();
  }
}

bool ValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<uint8_t>(s[i]);
    size_t n;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 2, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 3, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 4, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      const auto cc = static_cast<uint8_t>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += n;
  }
  return true;
}

// The streaming detokenizer's pieces must add up to the pieces of the ids, whole characters when they can.
void CheckStreaming(const Tokenizer& tok, std::span<const int32_t> ids, bool render_special) {
  StreamingDetokenizer detok(tok, render_special);
  std::string streamed, whole;
  std::vector<std::string> parts;
  for (const int32_t id : ids) {
    whole += tok.TokenToPiece(id, render_special);
    parts.push_back(detok.Push(id));
    streamed += parts.back();
    Check(detok.pending() <= 3, "at most 3 bytes are held back");
  }
  parts.push_back(detok.Flush());
  streamed += parts.back();
  Check(streamed == whole, "the streamed pieces concatenate to the pieces");
  if (ValidUtf8(whole)) {
    for (const std::string& p : parts) Check(ValidUtf8(p), "each streamed piece is whole UTF-8");
  }
}

// Encodes `text`, checks the ids and the streaming detokenizer; returns the ids (empty on a refusal).
std::vector<int32_t> EncodeAndCheck(const Tokenizer& tok, std::string_view text, uint8_t flags) {
  const bool add_special = flags & 2, parse_special = flags & 4, continuation = flags & 8;
  auto ids = tok.Encode(text, add_special, parse_special, continuation);
  if (!ids.ok()) {
    Check(!ids.status().message().empty(), "an Encode refusal has a message");
    return {};
  }
  for (const int32_t id : *ids) Check(id >= 0 && id < tok.n_vocab(), "Encode's ids are in range");
  (void)tok.Decode(*ids, /*render_special=*/false);
  CheckStreaming(tok, *ids, /*render_special=*/(flags & 16) == 0);
  return std::move(ids).value();
}

// Ids from pairs of bytes, some past the vocabulary and negative: Decode and the detokenizer take any id.
// Decoding is linear in the text it makes, and the time limit is there for worse: the ids stop at 256 KiB of
// pieces (a built vocabulary's token can be 30 KB long; 512 of them made 15 MB, 6 s under ASan, nearly all of
// it the kernel zeroing fresh pages for the strings).
void DecodeArbitrary(const Tokenizer& tok, std::string_view bytes) {
  constexpr size_t kMaxText = 256 << 10;
  std::vector<int32_t> ids;
  size_t text = 0;
  for (size_t i = 0; i + 1 < bytes.size() && ids.size() < 512; i += 2) {
    const int v = static_cast<uint8_t>(bytes[i]) << 8 | static_cast<uint8_t>(bytes[i + 1]);
    const int32_t id = v >= 0xFF00 ? -(v - 0xFF00) - 1 : v % (tok.n_vocab() + 16);
    text += tok.TokenToPiece(id).size();
    if (text > kMaxText) break;
    ids.push_back(id);
  }
  (void)tok.Decode(ids);
  CheckStreaming(tok, ids, /*render_special=*/true);
}

bool RoundTripPromised(const Tokenizer& tok, std::string_view text, std::span<const int32_t> ids) {
  if (!ValidUtf8(text)) return false;
  // A byte the vocabulary has no token for is dropped, as the reference drops it (falcon has none for
  // '\v', for one).
  for (const char c : text) {
    if (tok.vocab().ByteToken(static_cast<uint8_t>(c)) < 0) return false;
  }
  for (const int32_t id : ids) {
    if (tok.IsControl(id) || tok.vocab().tokens[id].attr & llamay::tokenizer::kAttrUserDefined) return false;
  }
  if (tok.vocab().clean_spaces) {
    for (const char* s : {" ,", " .", " ?", " !", " '"})
      if (text.find(s) != std::string_view::npos) return false;
  }
  if (tok.vocab().type == llamay::tokenizer::VocabType::kSpm &&
      text.find("\xE2\x96\x81") != std::string_view::npos)
    return false;
  return true;
}

std::vector<std::string> Lines(std::string_view s) {
  std::vector<std::string> out;
  while (!s.empty()) {
    const size_t nl = s.find('\n');
    out.emplace_back(s.substr(0, nl));
    if (nl == std::string_view::npos) break;
    s.remove_prefix(nl + 1);
  }
  return out;
}

// Takes the bytes up to the next NUL (or the end) off the front of `s`.
std::string_view TakeField(std::string_view* s) {
  const size_t nul = s->find('\0');
  const std::string_view field = s->substr(0, nul);
  s->remove_prefix(nul == std::string_view::npos ? s->size() : nul + 1);
  return field;
}

void FuzzShipped(uint8_t flags, std::string_view rest) {
  if (shipped->empty() || rest.empty()) return;
  const Tokenizer& tok = *(*shipped)[static_cast<uint8_t>(rest[0]) % shipped->size()];
  const std::string_view text = rest.substr(1);
  EncodeAndCheck(tok, text, flags);
  auto plain = tok.Encode(text, /*add_special=*/false, /*parse_special=*/false);
  if (plain.ok() && RoundTripPromised(tok, text, *plain)) {
    Check(tok.Decode(*plain) == text, "Decode(Encode(text)) == text");
  }
  DecodeArbitrary(tok, text);
}

void FuzzSpec(uint8_t flags, std::string_view rest) {
  if (rest.size() < 3) return;
  VocabSpec spec;
  spec.model = kModels[static_cast<uint8_t>(rest[0]) % std::size(kModels)];
  spec.pre = kPres[static_cast<uint8_t>(rest[1]) % std::size(kPres)];
  const auto opts = static_cast<uint8_t>(rest[2]);
  rest.remove_prefix(3);
  spec.tokens = Lines(TakeField(&rest));
  spec.merges = Lines(TakeField(&rest));
  const std::string_view params = TakeField(&rest);
  if (!params.empty()) {
    for (size_t i = 0; i < spec.tokens.size(); ++i) {
      if (opts & 1)
        spec.scores.push_back(static_cast<float>(static_cast<uint8_t>(params[(i + 1) % params.size()])) -
                              128);
      if (opts & 2) spec.token_types.push_back(static_cast<uint8_t>(params[i % params.size()]) % 8);
    }
    std::optional<int64_t>* ids[] = {&spec.bos, &spec.eos, &spec.eot, &spec.unk, &spec.pad};
    for (size_t k = 0; k < std::size(ids) && k < params.size(); ++k)
      *ids[k] = static_cast<uint8_t>(params[k]) - 2;
  }
  if (opts & 4) spec.add_bos = (opts & 32) != 0;
  if (opts & 8) spec.add_eos = (opts & 64) != 0;
  if (opts & 16) spec.add_space_prefix = (opts & 128) != 0;
  auto tok = Tokenizer::FromSpec(std::move(spec));
  if (!tok.ok()) {
    Check(!tok.status().message().empty(), "a refused vocabulary has a message");
    return;
  }
  (*tok)->vocab().CheckInvariants();
  EncodeAndCheck(**tok, rest, flags);
  DecodeArbitrary(**tok, rest);
}

// A GGUF file's tokenizer keys as the model loader reads them (FromGguf, ReadVocabSpec's typed reads), then
// a fixed text through the tokenizer it builds.
void FuzzGguf(uint8_t flags, std::string_view rest) {
  auto file = llamay::gguf::File::FromBuffer(std::vector<uint8_t>(rest.begin(), rest.end()));
  if (!file.ok()) return;  // the GGUF reader's refusals are gguf_fuzz's
  auto tok = Tokenizer::FromGguf(*file);
  if (!tok.ok()) {
    Check(!tok.status().message().empty(), "a refused GGUF vocabulary has a message");
    return;
  }
  (*tok)->vocab().CheckInvariants();
  static constexpr std::string_view kText =
      "Hello world! <s>x</s> <|endoftext|>  \xE4\xBD\xA0\xE5\xA5\xBD 123 \xF0\x9F\x98\x80\n";
  EncodeAndCheck(**tok, kText, flags);
  DecodeArbitrary(**tok, kText);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  shipped = new std::vector<std::unique_ptr<Tokenizer>>();
  const std::filesystem::path dir = std::filesystem::path(LLAMAY_SHARED_DIR) / "ref" / "vocab";
  for (const char* name : kShipped) {
    const std::filesystem::path path = dir / (std::string("ggml-vocab-") + name + ".gguf");
    if (!std::filesystem::exists(path)) continue;
    auto file = llamay::gguf::File::Open(path.string());
    if (!file.ok()) continue;
    auto tok = Tokenizer::FromGguf(*file);
    if (tok.ok()) shipped->push_back(std::move(tok).value());
  }
  std::fprintf(stderr, "tokenizer_fuzz: %zu shipped vocabularies from %s\n", shipped->size(), dir.c_str());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 32) {
    FuzzGguf(data[0], rest);
  } else if (data[0] & 1) {
    FuzzSpec(data[0], rest);
  } else {
    FuzzShipped(data[0], rest);
  }
  return 0;
}
