// A synthetic byte-level vocabulary for tests and benchmarks of constrained decoding.
//
// Shaped like a real byte-level BPE vocabulary: every single byte, JSON punctuation and its common merges
// ("{\"", "\":", "\",", "},{", newline+indent, ...), numbers, common English words and subwords with and
// without a leading space or capital, UTF-8 characters and fragments of them (tokens that end inside a
// character), then deterministic random-ish tokens up to the requested size. The last two ids are a
// control token (no bytes) and the end token.
//
// Thread-safety: pure functions.
#ifndef LLAMAY_GRAMMAR_SYNTHETIC_VOCAB_H_
#define LLAMAY_GRAMMAR_SYNTHETIC_VOCAB_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "grammar/vocabulary.h"

namespace llamay::grammar {

// `size` token byte strings (REQUIRES: size >= 1024); the last one is the end token, the one before it a
// control token with empty bytes. The same (size, seed) always gives the same tokens.
std::vector<std::string> SyntheticTokens(int32_t size, uint64_t seed = 1);
// The Vocabulary of SyntheticTokens(size, seed) with its last id as the end token.
std::shared_ptr<const Vocabulary> SyntheticVocabulary(int32_t size, uint64_t seed = 1);

}  // namespace llamay::grammar

#endif  // LLAMAY_GRAMMAR_SYNTHETIC_VOCAB_H_
