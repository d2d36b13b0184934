// SentencePiece-style (tokenizer.ggml.model "llama") tokenization of one run of raw text: the text is split
// into UTF-8 characters, then adjacent pieces are merged greedily, always taking the pair whose merged text
// is a token with the highest score (ties: the leftmost pair), until no adjacent pair forms a token. A piece
// that is not a token (a character that never merged) falls back to byte tokens (<0xXX>). Space escaping (' '
// -> U+2581) and the leading space are the caller's job.
//
// Cost: O(n log n) in the number of characters (a priority queue over a linked list of pieces).
// Thread-safety: pure function of an immutable Vocab.
#ifndef LLAMAY_TOKENIZER_SPM_H_
#define LLAMAY_TOKENIZER_SPM_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace llamay::tokenizer::internal {

// Appends the tokens of `text` (already escaped) to `out`. A byte with no byte token becomes the unknown
// token, or is dropped when the vocabulary has none.
void SpmTokenize(const Vocab& vocab, std::string_view text, std::vector<int32_t>* out);

}  // namespace llamay::tokenizer::internal

#endif  // LLAMAY_TOKENIZER_SPM_H_
