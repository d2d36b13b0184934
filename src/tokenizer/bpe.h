// Byte-level BPE (tokenizer.ggml.model "gpt2") tokenization of one pre-token: the word is mapped byte by byte
// to GPT-2's printable code points, split into characters, and adjacent symbols are merged by merge rank
// (lowest rank first; ties: the leftmost pair) until no adjacent pair has a rank. Each final symbol is its
// token; a symbol that is not a token is emitted one byte at a time (each byte that is a token on its own).
// With ignore_merges (Llama 3), a word that is already a token is taken whole.
//
// Cost: O(n log n) in the word's length (a priority queue over a linked list of symbols); merge ranks are a
// hash lookup on the pair.
// Thread-safety: pure function of an immutable Vocab.
#ifndef LLAMAY_TOKENIZER_BPE_H_
#define LLAMAY_TOKENIZER_BPE_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace llamay::tokenizer::internal {

// Maps raw UTF-8 bytes to their byte-level form (each byte -> one printable code point).
std::string ByteLevelEncode(std::string_view raw);

// Appends the tokens of one byte-level-encoded word to `out`.
void BpeTokenizeWord(const Vocab& vocab, std::string_view word, std::vector<int32_t>* out);

}  // namespace llamay::tokenizer::internal

#endif  // LLAMAY_TOKENIZER_BPE_H_
