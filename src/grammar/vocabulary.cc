// Vocabulary and its token trie (see vocabulary.h).
#include "grammar/vocabulary.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <utility>

namespace llamay::grammar {
namespace {

constexpr size_t kMaxTokenBytes = 65535;

// Builds the preorder trie of the given tokens (sorted by bytes, so nodes are created in preorder).
TokenTrie BuildTrie(const std::vector<std::string>& bytes, std::vector<int32_t> ids) {
  std::sort(ids.begin(), ids.end(), [&](int32_t x, int32_t y) {
    const int c = bytes[x].compare(bytes[y]);  // char_traits<char> compares as unsigned char
    return c != 0 ? c < 0 : x < y;
  });
  TokenTrie trie;
  trie.byte.push_back(0);
  trie.depth.push_back(0);
  std::vector<int32_t> node_of_token(ids.size());
  std::vector<int32_t> path{0};  // path[d]: the node at depth d on the current token's path
  const std::string* prev = nullptr;
  for (size_t k = 0; k < ids.size(); ++k) {
    const std::string& s = bytes[ids[k]];
    size_t lcp = 0;
    if (prev != nullptr) {
      const size_t m = std::min(prev->size(), s.size());
      while (lcp < m && (*prev)[lcp] == s[lcp]) ++lcp;
    }
    path.resize(lcp + 1);
    for (size_t d = lcp; d < s.size(); ++d) {
      path.push_back(trie.size());
      trie.byte.push_back(static_cast<uint8_t>(s[d]));
      trie.depth.push_back(static_cast<uint16_t>(d + 1));
      trie.max_depth = std::max(trie.max_depth, static_cast<int32_t>(d + 1));
    }
    node_of_token[k] = path[s.size()];
    prev = &s;
  }
  const int32_t n = trie.size();
  // Subtree ends: a node's subtree closes at the next node that is not deeper than it.
  trie.subtree_end.assign(n, n);
  std::vector<int32_t> open;
  for (int32_t i = 0; i < n; ++i) {
    while (!open.empty() && trie.depth[open.back()] >= trie.depth[i]) {
      trie.subtree_end[open.back()] = i;
      open.pop_back();
    }
    open.push_back(i);
  }
  // Byte kinds of each subtree: children come after their parent, so one backward pass suffices.
  trie.kinds.assign(n, 0);
  trie.height.assign(n, 0);
  for (int32_t i = n - 1; i > 0; --i) {
    trie.kinds[i] |= KindOf(trie.byte[i]);
    uint16_t below = 0;
    for (int32_t c = i + 1; c < trie.subtree_end[i]; c = trie.subtree_end[c]) {
      trie.kinds[i] |= trie.kinds[c];
      below = std::max(below, trie.height[c]);
    }
    trie.height[i] = static_cast<uint16_t>(below + 1);
  }
  // Tokens grouped by node; node_of_token is non-decreasing in sorted order.
  trie.token_begin.assign(n + 1, 0);
  for (int32_t node : node_of_token) ++trie.token_begin[node + 1];
  std::partial_sum(trie.token_begin.begin(), trie.token_begin.end(), trie.token_begin.begin());
  trie.tokens.resize(ids.size());
  std::vector<int32_t> fill(trie.token_begin.begin(), trie.token_begin.end() - 1);
  for (size_t k = 0; k < ids.size(); ++k) trie.tokens[fill[node_of_token[k]]++] = ids[k];
  return trie;
}

}  // namespace

uint8_t KindOf(uint8_t byte) {
  if (byte >= 0x80) return kKindHigh;
  if (byte < 0x20 || byte == 0x7F) return kKindControl;
  if (byte == '"') return kKindQuote;
  if (byte == '\\') return kKindBackslash;
  return kKindText;
}

Result<std::shared_ptr<const Vocabulary>> Vocabulary::Build(std::vector<std::string> token_bytes,
                                                            std::vector<int32_t> end_tokens) {
  if (token_bytes.empty()) return InvalidArgumentError("empty vocabulary");
  const int32_t n = static_cast<int32_t>(token_bytes.size());
  std::shared_ptr<Vocabulary> v(new Vocabulary());
  v->is_end_.assign(n, 0);
  for (int32_t t : end_tokens) {
    if (t < 0 || t >= n) {
      return InvalidArgumentError("end token " + std::to_string(t) + " is outside the vocabulary of " +
                                  std::to_string(n));
    }
    if (!v->is_end_[t]) v->end_tokens_.push_back(t);
    v->is_end_[t] = 1;
  }
  std::vector<int32_t> ids;  // the tokens a grammar can match: non-empty bytes, not end tokens
  for (int32_t t = 0; t < n; ++t) {
    if (token_bytes[t].size() > kMaxTokenBytes) {
      return InvalidArgumentError("token " + std::to_string(t) + " is longer than " +
                                  std::to_string(kMaxTokenBytes) + " bytes");
    }
    if (!token_bytes[t].empty() && !v->is_end_[t]) ids.push_back(t);
  }
  v->trie_ = BuildTrie(token_bytes, std::move(ids));
  v->bytes_ = std::move(token_bytes);
  return std::shared_ptr<const Vocabulary>(std::move(v));
}

}  // namespace llamay::grammar
