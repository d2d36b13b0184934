// Tokenizer: text <-> token ids for the vocabularies GGUF files carry, matching the reference engine
// (llama.cpp) token for token.
//
// Supported: SentencePiece-style vocabularies (tokenizer.ggml.model "llama": score-driven merges with byte
// fallback, spaces escaped as U+2581, optional leading space) and byte-level BPE (model "gpt2": GPT-2 byte
// mapping, merges by rank, a regex pre-tokenizer chosen by tokenizer.ggml.pre; see pre_tokenizer.h for the
// names). WordPiece ("bert") and the other model types are refused with Unimplemented naming the value.
//
// Encode first cuts special tokens out of the raw text (user-defined tokens always; control and unknown
// tokens only with parse_special), longest text first, then tokenizes each remaining run. Decode and
// TokenToPiece return exact bytes, which need not be valid UTF-8 on their own: a multi-byte character may be
// spread over several byte tokens (StreamingDetokenizer in detokenizer.h reassembles them).
//
// Invariants: ids returned by Encode are in [0, n_vocab()); bos()/eos() are -1 or valid ids.
// Thread-safety: immutable after FromGguf/FromSpec; every method is const and safe to call concurrently.
#ifndef LLAMAY_TOKENIZER_TOKENIZER_H_
#define LLAMAY_TOKENIZER_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tokenizer/vocab.h"

namespace llamay::gguf {
class File;
}  // namespace llamay::gguf

namespace llamay::tokenizer {

namespace internal {
class RegexSplitter;
}  // namespace internal

class Tokenizer {
 public:
  // Reads the tokenizer.* keys (and general.name) of a GGUF file.
  static Result<std::unique_ptr<Tokenizer>> FromGguf(const gguf::File& file);
  // Builds from metadata already in memory (tests, tools).
  static Result<std::unique_ptr<Tokenizer>> FromSpec(VocabSpec spec);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // add_special: prepend BOS / append EOS as the vocabulary's add_bos/add_eos flags say.
  // parse_special: recognise the text of control tokens (e.g. "<|im_start|>", "<s>") as those tokens.
  // continuation: the text continues a sequence already tokenized (a session's next turn), so it does not
  // start a new text run: SentencePiece vocabularies then add no space before it.
  Result<std::vector<int32_t>> Encode(std::string_view text, bool add_special, bool parse_special,
                                      bool continuation = false) const;

  // The exact bytes of one token. Control and unknown tokens render as their text unless render_special is
  // false (then ""). Out-of-range ids give "".
  std::string TokenToPiece(int32_t id, bool render_special = true) const;

  // The text of a token sequence: the pieces concatenated, minus the leading space the vocabulary adds when
  // encoding (add_space_prefix), with the vocabulary's space clean-up applied (" ," -> "," etc. for BPE
  // vocabularies that declare it). Out-of-range ids are skipped.
  std::string Decode(std::span<const int32_t> ids, bool render_special = true) const;

  int32_t bos() const { return vocab_.bos; }
  int32_t eos() const { return vocab_.eos; }
  int32_t unk() const { return vocab_.unk; }
  bool add_bos() const { return vocab_.add_bos; }
  bool add_eos() const { return vocab_.add_eos; }
  // True for tokens that end generation (EOS, EOT, "<|im_end|>", ...).
  bool IsEog(int32_t id) const { return vocab_.eog.count(id) > 0; }
  // True for control and unknown tokens (the ones render_special=false hides).
  bool IsControl(int32_t id) const;
  int32_t n_vocab() const { return vocab_.n_vocab(); }
  // The token's text as stored in the vocabulary ("" when out of range).
  const std::string& TokenText(int32_t id) const;
  // The token with exactly this text, or -1.
  int32_t FindToken(const std::string& text) const { return vocab_.Find(text); }
  const Vocab& vocab() const { return vocab_; }

 private:
  explicit Tokenizer(Vocab vocab);
  struct Fragment;
  std::vector<Fragment> PartitionSpecial(std::string_view text, bool parse_special) const;
  Status EncodeText(std::string_view text, bool prefix_space, std::vector<int32_t>* out) const;

  Vocab vocab_;
  std::unique_ptr<internal::RegexSplitter> splitter_;  // BPE only
};

// Reads a VocabSpec from a GGUF file's metadata. Errors name the key whose value has the wrong type.
Result<VocabSpec> ReadVocabSpec(const gguf::File& file);

}  // namespace llamay::tokenizer

#endif  // LLAMAY_TOKENIZER_TOKENIZER_H_
