#include "tokenizer/spm.h"

#include <queue>
#include <string>

#include "tokenizer/unicode.h"

namespace llamay::tokenizer::internal {
namespace {

struct Piece {
  int prev;
  int next;
  size_t begin;  // byte range [begin, begin + len) of the text
  size_t len;    // 0 once merged into its left neighbour
};

struct Candidate {
  int left;
  int right;
  float score;
  size_t len;  // byte length of the merged text when queued (stale candidates no longer match)
};

struct CandidateOrder {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

class SpmSession {
 public:
  SpmSession(const Vocab& vocab, std::string_view text) : vocab_(vocab), text_(text) {}

  void Run(std::vector<int32_t>* out) {
    SplitCharacters();
    for (int i = 1; i < static_cast<int>(pieces_.size()); ++i) TryAddCandidate(i - 1, i);
    MergeBestPairs();
    for (int i = pieces_.empty() ? -1 : 0; i != -1; i = pieces_[i].next)
      Emit(pieces_[i].begin, pieces_[i].len, out);
  }

 private:
  void SplitCharacters() {
    size_t offset = 0;
    while (offset < text_.size()) {
      const size_t len =
          std::min(Utf8SequenceLength(static_cast<uint8_t>(text_[offset])), text_.size() - offset);
      const int index = static_cast<int>(pieces_.size());
      pieces_.push_back({index - 1, offset + len == text_.size() ? -1 : index + 1, offset, len});
      offset += len;
    }
  }

  void TryAddCandidate(int left, int right) {
    if (left == -1 || right == -1) return;
    const std::string_view merged = text_.substr(pieces_[left].begin, pieces_[left].len + pieces_[right].len);
    const int32_t id = vocab_.Find(merged);
    if (id < 0) return;
    queue_.push({left, right, vocab_.tokens[id].score, merged.size()});
  }

  void MergeBestPairs() {
    while (!queue_.empty()) {
      const Candidate c = queue_.top();
      queue_.pop();
      Piece& left = pieces_[c.left];
      Piece& right = pieces_[c.right];
      if (left.len == 0 || right.len == 0 || left.len + right.len != c.len) continue;  // stale
      left.len += right.len;
      right.len = 0;
      left.next = right.next;
      if (right.next >= 0) pieces_[right.next].prev = c.left;
      TryAddCandidate(left.prev, c.left);
      TryAddCandidate(c.left, left.next);
    }
  }

  void Emit(size_t begin, size_t len, std::vector<int32_t>* out) const {
    const std::string_view text = text_.substr(begin, len);
    if (const int32_t id = vocab_.Find(text); id >= 0) {
      out->push_back(id);
      return;
    }
    // Every merge forms a token, so a piece that is not one is a single character that never merged.
    for (unsigned char byte : text) {
      const int32_t id = vocab_.ByteToken(byte);
      if (id >= 0) {
        out->push_back(id);
      } else if (vocab_.unk >= 0) {
        out->push_back(vocab_.unk);
      }
    }
  }

  const Vocab& vocab_;
  std::string_view text_;
  std::vector<Piece> pieces_;
  std::priority_queue<Candidate, std::vector<Candidate>, CandidateOrder> queue_;
};

}  // namespace

void SpmTokenize(const Vocab& vocab, std::string_view text, std::vector<int32_t>* out) {
  SpmSession(vocab, text).Run(out);
}

}  // namespace llamay::tokenizer::internal
