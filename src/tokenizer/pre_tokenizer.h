// Pre-tokenizers for byte-level BPE: the named regex sequences that split raw text into words before merges.
//
// A pre-tokenizer is a list of regexes applied in sequence, each to every piece the previous one produced.
// Within a piece, every match becomes a piece and so does every run of text between matches (nothing is
// dropped), which is how the reference engine (llama.cpp) splits. Matching runs on the code points of the
// text after two substitutions that reproduce the reference exactly: non-ASCII Unicode whitespace is seen as
// U+000B (so `\s` means ASCII whitespace plus that), and values that are not Unicode scalars are seen as
// U+FFFD. `\s`/`\S` in the table are rewritten to explicit classes; `$` means the end of the piece.
// Regexes are PCRE2 (UTF + UCP, JIT-compiled where available).
//
// Invariants: the pieces of Split() concatenate to the canonical UTF-8 re-encoding of the input's code points
// (malformed bytes become U+FFFD); no piece is empty.
//
// Thread-safety: a RegexSplitter is immutable after Create; Split may run concurrently from many threads
// (each call owns its match data).
#ifndef LLAMAY_TOKENIZER_PRE_TOKENIZER_H_
#define LLAMAY_TOKENIZER_PRE_TOKENIZER_H_

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tokenizer/vocab.h"

namespace llamay::tokenizer::internal {

struct PreTokenizerDef {
  std::string_view name;  // the canonical tokenizer.ggml.pre value
  std::span<const std::string_view> regexes;
  PreTokenizerTraits traits;
};

// The definition for a tokenizer.ggml.pre value ("" means "default"), or nullptr when unsupported.
const PreTokenizerDef* FindPreTokenizer(std::string_view name);

// Names FindPreTokenizer accepts, for error messages and tests.
std::vector<std::string_view> SupportedPreTokenizers();

class RegexSplitter {
 public:
  // Compiles `regexes` (llama.cpp's notation: \p{..} classes, \s, \S). Errors name the failing regex.
  static Result<std::unique_ptr<RegexSplitter>> Create(std::span<const std::string_view> regexes);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  // Splits `text` into words (UTF-8). Fails only if the regex engine reports an error (e.g. a resource
  // limit).
  Result<std::vector<std::string>> Split(std::string_view text) const;

 private:
  struct Compiled;
  RegexSplitter() = default;
  std::vector<std::unique_ptr<Compiled>> compiled_;
};

// Rewrites `\s` and `\S` into explicit ASCII-whitespace classes (see the header comment). Exposed for tests.
std::string RewriteWhitespaceEscapes(std::string_view regex);

}  // namespace llamay::tokenizer::internal

#endif  // LLAMAY_TOKENIZER_PRE_TOKENIZER_H_
