// Vocabulary: the token table and the special-token facts a tokenizer needs, built from a VocabSpec (what a
// GGUF file's tokenizer.* keys say) by applying the reference engine's (llama.cpp's) defaults and
// per-model rules: default BOS/EOS/UNK ids per model type, add_bos/add_eos/add_space_prefix defaults,
// end-of-generation detection by token text, control-looking tokens promoted to control, the special-token
// match list (longest text first) and per-token strip attributes.
//
// Invariants (checked by CheckInvariants): every token text is unique and non-empty; Find is the exact
// inverse of tokens; every special id is -1 or in [0, n_vocab); special_tokens holds exactly the
// control, user-defined and unknown tokens, sorted by text length descending (ties by id); every EOG id is
// in range; pieces has one entry per token.
//
// Thread-safety: immutable after BuildVocab; safe to read from many threads.
#ifndef LLAMAY_TOKENIZER_VOCAB_H_
#define LLAMAY_TOKENIZER_VOCAB_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "base/status.h"
#include "tokenizer/text_index.h"

namespace llamay::tokenizer {

// GGUF token types (tokenizer.ggml.token_type).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// Token attribute bits (internal; a token may carry several).
enum TokenAttr : uint32_t {
  kAttrUndefined = 0,
  kAttrUnknown = 1u << 0,
  kAttrUnused = 1u << 1,
  kAttrNormal = 1u << 2,
  kAttrControl = 1u << 3,
  kAttrUserDefined = 1u << 4,
  kAttrByte = 1u << 5,
  kAttrLstrip = 1u << 7,  // whitespace before the token's text is swallowed when it is matched in raw text
  kAttrRstrip = 1u << 8,  // whitespace after it is swallowed
};

// The tokenizer's GGUF metadata, unprocessed. Absent keys are empty / nullopt.
struct VocabSpec {
  std::string model;  // tokenizer.ggml.model: "llama" (SentencePiece-style), "gpt2" (byte-level BPE), ...
  std::string pre;    // tokenizer.ggml.pre; empty when absent
  std::string name;   // general.name (one per-model rule keys on it)
  std::vector<std::string> tokens;
  std::vector<float> scores;         // empty or one per token
  std::vector<int32_t> token_types;  // empty or one per token (TokenType values)
  std::vector<std::string> merges;   // "left right", rank = index
  // Special token ids as stored (any integer; out-of-range values are ignored like the reference does).
  std::optional<int64_t> bos, eos, eot, eom, unk, sep, pad, mask;
  std::optional<int64_t> fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
  std::optional<bool> add_bos, add_eos, add_space_prefix;
};

enum class VocabType { kSpm, kBpe };

struct TokenData {
  std::string text;
  float score = 0.0f;
  uint32_t attr = kAttrNormal;
};

struct Vocab {
  VocabType type = VocabType::kSpm;
  std::string pre;  // pre-tokenizer name as resolved ("default" when the file names none)
  std::vector<TokenData> tokens;
  TextIndex token_index;            // token text -> id (Find)
  std::vector<std::string> merges;  // BPE only: merge keys "left right" by rank
  TextIndex merge_index;            // merge key -> rank, the first rank of a repeated key (MergeRank)

  int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, sep = -1, pad = -1, mask = -1;
  int32_t fim_pre = -1, fim_suf = -1, fim_mid = -1, fim_pad = -1, fim_rep = -1, fim_sep = -1;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;  // SPM: prefix raw text with a space; both: drop it again when decoding
  bool clean_spaces = false;      // decoding removes spaces before punctuation (BPE vocabularies)
  bool ignore_merges = false;     // BPE: a pre-token that is itself a token is taken whole

  std::vector<int32_t> special_tokens;  // control/user-defined/unknown, longest text first
  std::unordered_set<int32_t> eog;      // ids that end generation
  std::vector<std::string> pieces;      // exact bytes each token stands for (special tokens: their text)

  int32_t n_vocab() const { return static_cast<int32_t>(tokens.size()); }
  bool InRange(int32_t id) const { return id >= 0 && id < n_vocab(); }
  // The id whose text is exactly `text`, or -1.
  int32_t Find(std::string_view text) const;
  // The merge rank of (left, right), or -1.
  int32_t MergeRank(std::string_view left, std::string_view right) const;
  // The byte-fallback token for `byte` (SPM "<0xXX>", else the single-byte text), or -1.
  int32_t ByteToken(uint8_t byte) const;
  void CheckInvariants() const;
};

// Per-pre-tokenizer decisions the vocabulary needs (the regexes live in pre_tokenizer.h).
struct PreTokenizerTraits {
  bool clean_spaces = true;
  bool ignore_merges = false;
  bool add_bos = false;
  bool clear_bos = false;  // the reference drops the default BOS for this pre-tokenizer
};

// Applies the reference's defaults and rules. Errors: unsupported model type or pre-tokenizer (Unimplemented,
// naming the value), malformed tables (InvalidArgument: duplicate token, length mismatch, add_bos without a
// BOS id, ...).
Result<Vocab> BuildVocab(VocabSpec spec);

}  // namespace llamay::tokenizer

#endif  // LLAMAY_TOKENIZER_VOCAB_H_
