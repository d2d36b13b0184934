#include "sampling/candidates.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/check.h"

namespace llamay::sampling {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Top-p on an unsorted set first looks at this many best tokens; a real model's nucleus is usually smaller.
constexpr size_t kTopPFirstChunk = 256;

float Clean(float logit) { return std::isnan(logit) ? kNegInf : logit; }

// The value of logit i: the override when the next override is for i (then advances *next), else the model's.
float LogitAt(std::span<const float> logits, std::span<const Candidate> overrides, size_t i, size_t* next) {
  if (*next < overrides.size() && static_cast<size_t>(overrides[*next].id) == i) {
    return overrides[(*next)++].logit;
  }
  return Clean(logits[i]);
}

// Sums the temperature-1 weights of all items (in item order, so the result is reproducible).
double TotalWeight(const std::vector<Candidate>& items, float max_logit) {
  double total = 0.0;
  for (const Candidate& c : items) total += RelativeWeight(c.logit, max_logit, 1.0);
  return total;
}

// Writes the best min(k, in.size()) items of `in` to *out in Before order: a heap whose top is the worst
// kept, so that most items cost one comparison with it.
void SelectBest(std::span<const Candidate> in, size_t k, std::vector<Candidate>* out) {
  out->clear();
  for (const Candidate& cand : in) {
    if (out->size() < k) {
      out->push_back(cand);
      std::push_heap(out->begin(), out->end(), Before);
    } else if (Before(cand, out->front())) {
      std::pop_heap(out->begin(), out->end(), Before);
      out->back() = cand;
      std::push_heap(out->begin(), out->end(), Before);
    }
  }
  std::sort_heap(out->begin(), out->end(), Before);
}

}  // namespace

double RelativeWeight(float logit, float max_logit, double temperature) {
  if (logit == max_logit) return 1.0;
  return std::exp((static_cast<double>(logit) - static_cast<double>(max_logit)) / temperature);
}

float Candidates::MaxLogit() const {
  LLAMAY_DCHECK(!items.empty());
  if (sorted) return items.front().logit;
  float best = items.front().logit;
  for (const Candidate& c : items) best = std::max(best, c.logit);
  return best;
}

void PenalizedLogits(const Penalties& penalties, std::span<const float> logits,
                     std::span<const int32_t> history, std::vector<int32_t>* window,
                     std::vector<Candidate>* overrides) {
  overrides->clear();
  if (!penalties.active() || history.empty()) return;
  const size_t n =
      penalties.last_n < 0 ? history.size() : std::min(history.size(), static_cast<size_t>(penalties.last_n));
  // Count occurrences by sorting a copy of the window: O(w log w), no vocabulary-sized table, and the
  // overrides come out sorted by id.
  window->assign(history.end() - static_cast<std::ptrdiff_t>(n), history.end());
  std::sort(window->begin(), window->end());
  for (size_t i = 0; i < window->size();) {
    const int32_t id = (*window)[i];
    size_t j = i;
    while (j < window->size() && (*window)[j] == id) ++j;
    const size_t count = j - i;
    i = j;
    if (id < 0 || static_cast<size_t>(id) >= logits.size()) continue;
    float logit = Clean(logits[static_cast<size_t>(id)]);
    // Dividing a negative logit would make the token more likely; llama.cpp multiplies those instead.
    if (logit <= 0.0f) {
      logit *= penalties.repeat;
    } else {
      logit /= penalties.repeat;
    }
    logit -= static_cast<float>(count) * penalties.frequency + penalties.presence;
    overrides->push_back(Candidate{id, logit});
  }
}

void Fill(std::span<const float> logits, std::span<const Candidate> overrides, Candidates* c) {
  c->items.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    c->items[i] = Candidate{static_cast<int32_t>(i), Clean(logits[i])};
  }
  for (const Candidate& o : overrides) {
    LLAMAY_DCHECK(o.id >= 0 && static_cast<size_t>(o.id) < logits.size());
    c->items[static_cast<size_t>(o.id)].logit = o.logit;
  }
  c->sorted = false;
}

void FillTopK(int k, std::span<const float> logits, std::span<const Candidate> overrides, Candidates* c) {
  if (k <= 0 || static_cast<size_t>(k) >= logits.size()) {
    Fill(logits, overrides, c);
    return;
  }
  // The heap's top is the worst token kept. Tokens arrive in id order, so a newcomer beats it exactly when
  // its logit is greater (on a tie the earlier id, already kept, comes first).
  std::vector<Candidate>& heap = c->items;
  heap.clear();
  size_t next = 0;
  const size_t kk = static_cast<size_t>(k);
  for (size_t i = 0; i < kk; ++i) {
    heap.push_back(Candidate{static_cast<int32_t>(i), LogitAt(logits, overrides, i, &next)});
  }
  std::make_heap(heap.begin(), heap.end(), Before);
  float worst = heap.front().logit;
  for (size_t i = kk; i < logits.size(); ++i) {
    const float logit = LogitAt(logits, overrides, i, &next);
    if (logit > worst) {
      std::pop_heap(heap.begin(), heap.end(), Before);
      heap.back() = Candidate{static_cast<int32_t>(i), logit};
      std::push_heap(heap.begin(), heap.end(), Before);
      worst = heap.front().logit;
    }
  }
  std::sort_heap(heap.begin(), heap.end(), Before);
  c->sorted = true;
}

void TopP(float p, Candidates* c) {
  std::vector<Candidate>& items = c->items;
  if (p >= 1.0f || items.size() <= 1) return;
  const float max_logit = c->MaxLogit();
  const double target = static_cast<double>(p) * TotalWeight(items, max_logit);
  // Keeps the shortest prefix of `sorted` (in Before order) whose mass reaches the target; false if none.
  auto cut = [&](std::vector<Candidate>& sorted) {
    double mass = 0.0;
    for (size_t i = 0; i < sorted.size(); ++i) {
      mass += RelativeWeight(sorted[i].logit, max_logit, 1.0);
      if (mass >= target) {
        sorted.resize(i + 1);
        return true;
      }
    }
    return false;
  };
  if (!c->sorted && items.size() > kTopPFirstChunk) {
    SelectBest(items, kTopPFirstChunk, &c->scratch);
    if (cut(c->scratch)) {
      items.assign(c->scratch.begin(), c->scratch.end());  // a copy: items keeps its vocabulary-sized buffer
      c->sorted = true;
      return;
    }
  }
  if (!c->sorted) std::sort(items.begin(), items.end(), Before);
  c->sorted = true;
  cut(items);  // when rounding leaves the mass just short of p, everything stays
}

void MinP(float p, Candidates* c) {
  std::vector<Candidate>& items = c->items;
  if (p <= 0.0f || items.size() <= 1) return;
  const float max_logit = c->MaxLogit();
  const double min_delta = std::log(static_cast<double>(p));
  auto keep = [&](const Candidate& cand) {
    return cand.logit == max_logit ||
           static_cast<double>(cand.logit) - static_cast<double>(max_logit) >= min_delta;
  };
  if (c->sorted) {
    // Logits fall along a sorted set: cut at the first token below the threshold.
    size_t n = 1;
    while (n < items.size() && keep(items[n])) ++n;
    items.resize(n);
    return;
  }
  size_t out = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if (keep(items[i])) items[out++] = items[i];
  }
  items.resize(out);
}

size_t Draw(double temperature, double u, Candidates* c) {
  const std::vector<Candidate>& items = c->items;
  LLAMAY_CHECK(!items.empty()) << "Draw from an empty candidate set";
  LLAMAY_DCHECK(temperature > 0.0 && u >= 0.0 && u < 1.0);
  const float max_logit = c->MaxLogit();
  std::vector<double>& w = c->weights;
  w.resize(items.size());
  double total = 0.0;
  for (size_t i = 0; i < items.size(); ++i) {
    w[i] = RelativeWeight(items[i].logit, max_logit, temperature);
    total += w[i];
  }
  const double target = u * total;
  double running = 0.0;
  size_t last_positive = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if (w[i] <= 0.0) continue;
    running += w[i];
    last_positive = i;
    if (running > target) return i;
  }
  // Reached only through rounding (u * total at the very top of the range): the last token that has weight.
  return last_positive;
}

}  // namespace llamay::sampling
