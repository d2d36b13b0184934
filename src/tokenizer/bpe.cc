#include "tokenizer/bpe.h"

#include <queue>
#include <string>

#include "tokenizer/unicode.h"

namespace llamay::tokenizer::internal {
namespace {

struct Symbol {
  int prev;
  int next;
  size_t begin;  // byte range of the word
  size_t len;    // 0 once merged into its left neighbour
};

struct Candidate {
  int left;
  int right;
  int32_t rank;
  size_t left_len;  // lengths when queued: a candidate whose symbols changed since is stale
  size_t right_len;
};

struct CandidateOrder {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

class BpeSession {
 public:
  BpeSession(const Vocab& vocab, std::string_view word) : vocab_(vocab), word_(word) {}

  void Run(std::vector<int32_t>* out) {
    if (vocab_.ignore_merges && vocab_.Find(word_) >= 0) {
      symbols_.push_back({-1, -1, 0, word_.size()});
    } else {
      SplitCharacters();
    }
    for (int i = 1; i < static_cast<int>(symbols_.size()); ++i) TryAddCandidate(i - 1, i);
    MergeBestPairs();
    for (int i = symbols_.empty() ? -1 : 0; i != -1; i = symbols_[i].next) Emit(symbols_[i], out);
  }

 private:
  std::string_view Text(const Symbol& s) const { return word_.substr(s.begin, s.len); }

  void SplitCharacters() {
    size_t offset = 0;
    while (offset < word_.size()) {
      const size_t len =
          std::min(Utf8SequenceLength(static_cast<uint8_t>(word_[offset])), word_.size() - offset);
      const int index = static_cast<int>(symbols_.size());
      symbols_.push_back({index - 1, offset + len == word_.size() ? -1 : index + 1, offset, len});
      offset += len;
    }
  }

  void TryAddCandidate(int left, int right) {
    if (left == -1 || right == -1) return;
    const int32_t rank = vocab_.MergeRank(Text(symbols_[left]), Text(symbols_[right]));
    if (rank < 0) return;
    queue_.push({left, right, rank, symbols_[left].len, symbols_[right].len});
  }

  void MergeBestPairs() {
    while (!queue_.empty()) {
      const Candidate c = queue_.top();
      queue_.pop();
      Symbol& left = symbols_[c.left];
      Symbol& right = symbols_[c.right];
      // Symbols only grow to the right and never move, so unchanged lengths mean unchanged texts.
      if (left.len == 0 || right.len == 0 || left.len != c.left_len || right.len != c.right_len ||
          left.next != c.right) {
        continue;
      }
      left.len += right.len;
      right.len = 0;
      left.next = right.next;
      if (right.next >= 0) symbols_[right.next].prev = c.left;
      TryAddCandidate(left.prev, c.left);
      TryAddCandidate(c.left, left.next);
    }
  }

  void Emit(const Symbol& s, std::vector<int32_t>* out) const {
    const std::string_view text = Text(s);
    if (const int32_t id = vocab_.Find(text); id >= 0) {
      out->push_back(id);
      return;
    }
    for (char byte : text) {
      if (const int32_t id = vocab_.Find(std::string_view(&byte, 1)); id >= 0) out->push_back(id);
    }
  }

  const Vocab& vocab_;
  std::string_view word_;
  std::vector<Symbol> symbols_;
  std::priority_queue<Candidate, std::vector<Candidate>, CandidateOrder> queue_;
};

}  // namespace

std::string ByteLevelEncode(std::string_view raw) {
  std::string out;
  out.reserve(raw.size() * 2);
  for (unsigned char byte : raw) out += ByteToUnicode(byte);
  return out;
}

void BpeTokenizeWord(const Vocab& vocab, std::string_view word, std::vector<int32_t>* out) {
  BpeSession(vocab, word).Run(out);
}

}  // namespace llamay::tokenizer::internal
