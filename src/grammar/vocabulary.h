// Vocabulary: a model's tokens as byte strings, which of them end generation, and a trie over the bytes.
//
// Built once per model and shared by every Matcher. The trie is laid out in depth-first preorder (node i's
// subtree is [i, subtree_end[i])), so a mask walk is one forward loop that skips a rejected subtree in one
// step, and every token sharing a prefix shares the work of matching it.
//
// Tokens with empty bytes (control tokens) are never allowed by a grammar; end tokens (EOS, EOT, ...) are
// allowed exactly when the grammar can be complete, whatever their bytes (their text is never matched).
//
// Thread-safety: immutable after Build; share it across threads.
#ifndef LLAMAY_GRAMMAR_VOCABULARY_H_
#define LLAMAY_GRAMMAR_VOCABULARY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace llamay::grammar {

// Coarse byte kinds, so a grammar state can tell at a glance that every byte below a trie node keeps it
// where it is (inside a JSON string, most tokens): bit k of a kind mask is kind k.
enum ByteKind : uint8_t {
  kKindText = 1,       // printable ASCII (0x20..0x7E) other than '"' and '\\'
  kKindQuote = 2,      // '"'
  kKindBackslash = 4,  // '\\'
  kKindControl = 8,    // 0x00..0x1F and 0x7F
  kKindHigh = 16,      // 0x80..0xFF (UTF-8 lead and continuation bytes)
};
uint8_t KindOf(uint8_t byte);

// The token trie, preorder. Node 0 is the root (the empty string). Shapes: [nodes] unless stated.
struct TokenTrie {
  std::vector<uint8_t> byte;         // the byte on the edge into the node (root: 0)
  std::vector<uint16_t> depth;       // bytes from the root
  std::vector<int32_t> subtree_end;  // one past the node's last descendant
  std::vector<int32_t> token_begin;  // [nodes + 1]: tokens[token_begin[i], token_begin[i+1]) end at node i
  std::vector<int32_t> tokens;       // token ids, grouped by node
  std::vector<uint8_t> kinds;        // ByteKind bits of every byte on the edges of the node's subtree
  std::vector<uint16_t> height;      // bytes on the longest path from the node's parent to a leaf below
  int32_t max_depth = 0;

  int32_t size() const { return static_cast<int32_t>(byte.size()); }
};

class Vocabulary {
 public:
  // token_bytes[id]: the bytes token `id` stands for (its decoded piece; byte-fallback tokens as their byte;
  // control tokens empty). end_tokens: the ids that end generation. InvalidArgument for an empty
  // vocabulary, an end token out of range, or a token longer than 65535 bytes.
  static Result<std::shared_ptr<const Vocabulary>> Build(std::vector<std::string> token_bytes,
                                                         std::vector<int32_t> end_tokens);

  int32_t size() const { return static_cast<int32_t>(bytes_.size()); }
  const std::string& token_bytes(int32_t id) const { return bytes_[id]; }
  bool is_end_token(int32_t id) const { return is_end_[id] != 0; }
  const std::vector<int32_t>& end_tokens() const { return end_tokens_; }
  const TokenTrie& trie() const { return trie_; }

 private:
  Vocabulary() = default;

  std::vector<std::string> bytes_;
  std::vector<uint8_t> is_end_;
  std::vector<int32_t> end_tokens_;
  TokenTrie trie_;
};

}  // namespace llamay::grammar

#endif  // LLAMAY_GRAMMAR_VOCABULARY_H_
