#include "engine/draft.h"

#include <algorithm>

#include "base/check.h"

namespace llamay::engine {

Draft LookupDraft(std::span<const int32_t> history, size_t max, size_t min_ngram, size_t max_ngram) {
  LLAMAY_CHECK(min_ngram >= 1 && min_ngram <= max_ngram) << "n-gram bounds " << min_ngram << ".." << max_ngram;
  Draft d;
  const size_t h = history.size();
  if (max == 0 || h < min_ngram + 1) return d;
  // One pass over the candidate continuation starts i, newest first: the suffix matched at i is the number
  // of tokens before i that equal the history's last tokens, up to max_ngram. The first i reaching
  // max_ngram wins; otherwise the newest of the longest.
  size_t best_at = 0, best = 0;
  for (size_t i = h - 1; i >= min_ngram; --i) {
    size_t m = 0;
    while (m < max_ngram && m < i && history[i - 1 - m] == history[h - 1 - m]) ++m;
    if (m > best && m >= min_ngram) {
      best = m;
      best_at = i;
      if (m == max_ngram) break;
    }
  }
  if (best == 0) return d;
  d.match = best;
  const size_t n = std::min(max, h - best_at);
  d.tokens.assign(history.begin() + static_cast<long>(best_at), history.begin() + static_cast<long>(best_at + n));
  return d;
}

void StepCost::Add(double tokens, double seconds) {
  constexpr double kDecay = 0.97;  // about the last 30 steps
  w_ = kDecay * w_ + 1;
  x_ = kDecay * x_ + tokens;
  y_ = kDecay * y_ + seconds;
  xx_ = kDecay * xx_ + tokens * tokens;
  xy_ = kDecay * xy_ + tokens * seconds;
}

double StepCost::ExtraTokenShare(double fallback) const {
  const double det = w_ * xx_ - x_ * x_;
  if (w_ < 4 || det <= 1e-9 * w_ * xx_) return fallback;  // too few steps, or all of one size
  const double b = std::max(0.0, (w_ * xy_ - x_ * y_) / det);
  const double a = (y_ - b * x_) / w_;
  if (a + b <= 0) return fallback;
  return std::clamp(b / (a + b), 0.0, 1.0);
}

size_t BestDraftLength(double p, double share, size_t max, double min_gain) {
  size_t best = 0;
  double best_gain = min_gain, expected = 1, pk = 1;
  for (size_t k = 1; k <= max; ++k) {
    pk *= p;
    expected += pk;
    const double gain = expected / (1 + static_cast<double>(k) * share);
    if (gain > best_gain) {
      best_gain = gain;
      best = k;
    }
  }
  return best;
}

SuffixIndex::SuffixIndex(size_t max_tokens, size_t ngram) : max_tokens_(max_tokens), ngram_(ngram) {
  LLAMAY_CHECK(ngram >= 1) << "an n-gram has at least one token";
}

uint64_t SuffixIndex::Hash(const int32_t* p) const {
  uint64_t h = 0x9E3779B97F4A7C15ull;
  for (size_t i = 0; i < ngram_; ++i) {
    h ^= static_cast<uint32_t>(p[i]);
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
  }
  return h;
}

void SuffixIndex::Add(std::span<const int32_t> tokens) {
  if (max_tokens_ == 0 || tokens.size() <= ngram_) return;
  if (tokens.size() > max_tokens_) tokens = tokens.last(max_tokens_);
  seqs_.emplace_back(tokens.begin(), tokens.end());
  tokens_ += tokens.size();
  const uint64_t serial = first_ + seqs_.size() - 1;
  const std::vector<int32_t>& s = seqs_.back();
  for (size_t end = ngram_; end < s.size(); ++end) index_[Hash(s.data() + end - ngram_)] = {serial, static_cast<uint32_t>(end)};
  while (tokens_ > max_tokens_ && seqs_.size() > 1) {
    tokens_ -= seqs_.front().size();
    seqs_.pop_front();
    ++first_;
  }
  // Entries of dropped sequences are stale (Lookup skips them); rebuild before they outnumber the live ones.
  if (index_.size() > 2 * tokens_ + 4096) Rebuild();
}

void SuffixIndex::Rebuild() {
  index_.clear();
  for (size_t i = 0; i < seqs_.size(); ++i)
    for (size_t end = ngram_; end < seqs_[i].size(); ++end)
      index_[Hash(seqs_[i].data() + end - ngram_)] = {first_ + i, static_cast<uint32_t>(end)};
}

Draft SuffixIndex::Lookup(std::span<const int32_t> history, size_t max) const {
  Draft d;
  if (max == 0 || history.size() < ngram_) return d;
  const int32_t* key = history.data() + history.size() - ngram_;
  const auto it = index_.find(Hash(key));
  if (it == index_.end() || it->second.seq < first_) return d;
  const std::vector<int32_t>& s = seqs_[it->second.seq - first_];
  const size_t end = it->second.end;
  if (!std::equal(key, key + ngram_, s.begin() + static_cast<long>(end - ngram_))) return d;  // a collision
  d.match = ngram_;
  d.tokens.assign(s.begin() + static_cast<long>(end), s.begin() + static_cast<long>(std::min(s.size(), end + max)));
  return d;
}

}  // namespace llamay::engine
