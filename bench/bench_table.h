// Helpers shared by the engine-level benchmark programs (engine_bench.cc, hybrid_bench.cc): medians,
// number formatting, markdown tables printed row by row, and random prompt tokens.
#ifndef LLAMAY_BENCH_BENCH_TABLE_H_
#define LLAMAY_BENCH_BENCH_TABLE_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace llamay::bench {

inline double Median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

inline std::string Fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// A markdown table printed row by row (right-aligned numbers after the first column).
inline void Row(const std::vector<std::string>& cells) {
  std::string line = "|";
  for (const auto& c : cells) line += " " + c + " |";
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

inline void Header(const std::vector<std::string>& cells) {
  Row(cells);
  std::vector<std::string> rule;
  for (size_t i = 0; i < cells.size(); ++i) rule.push_back(i == 0 ? "---" : "---:");
  Row(rule);
}

// Random token ids in [3, vocab): never BOS (1), EOS (2) or UNK (0).
inline std::vector<int32_t> RandomTokens(size_t n, uint32_t seed, uint32_t vocab) {
  std::mt19937 rng(seed);
  std::vector<int32_t> out(n);
  for (auto& t : out) t = static_cast<int32_t>(3 + rng() % (vocab - 3));
  return out;
}

}  // namespace llamay::bench

#endif  // LLAMAY_BENCH_BENCH_TABLE_H_
