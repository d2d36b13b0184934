#include "bench_memory.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace llamay::cli {
namespace {

// Largest cache size the system reports (sysfs index*/size of cpu0: "260M", "4096K").
size_t LastLevelCacheBytes() {
  size_t best = 0;
  for (int i = 0; i < 8; ++i) {
    std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/size");
    std::string s;
    if (!(in >> s) || s.empty()) continue;
    size_t mult = 1;
    if (s.back() == 'K') mult = size_t{1} << 10;
    if (s.back() == 'M') mult = size_t{1} << 20;
    if (s.back() == 'G') mult = size_t{1} << 30;
    best = std::max(best, static_cast<size_t>(std::stoull(s)) * mult);
  }
  return best;
}

// Sum of the 64-bit words of [p, p + n), read as `streams` equal regions side by side, a cache line of
// each in turn (the tail past the last whole line of a region is read last); four independent sums so the
// loads, not the adds, set the pace.
uint64_t SumWords(const uint64_t* p, size_t n, int streams) {
  const size_t region = n / static_cast<size_t>(streams) / 8 * 8;
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (size_t i = 0; i < region; i += 8) {
    for (int j = 0; j < streams; ++j) {
      const uint64_t* q = p + static_cast<size_t>(j) * region + i;
      s0 += q[0] + q[4], s1 += q[1] + q[5], s2 += q[2] + q[6], s3 += q[3] + q[7];
    }
  }
  for (size_t i = region * static_cast<size_t>(streams); i < n; ++i) s0 += p[i];
  return s0 + s1 + s2 + s3;
}

}  // namespace

uint64_t DecodeWeightBytes(const gguf::File& file) {
  bool has_output = false;
  for (const auto& t : file.tensors()) has_output |= t.name == "output.weight";
  // A mixture of experts reads the slabs of the experts a token chose: expert_used_count of the last
  // dimension's expert_count (ffn_*_exps weights and biases); the router and a shared expert whole.
  const std::string arch = file.GetStringOr("general.architecture", "");
  const int64_t used = file.GetIntOr(arch + ".expert_used_count", 0);
  uint64_t total = 0;
  for (const auto& t : file.tensors()) {
    if (t.name == "token_embd.weight" && !has_output) {
      total += t.n_bytes;  // tied: also the output projection
    } else if (t.name == "token_embd.weight") {
      total += t.n_bytes / static_cast<uint64_t>(std::max<int64_t>(1, t.rows()));  // one row per token
    } else if (used > 0 && t.name.find("_exps.") != std::string::npos && !t.dims.empty() &&
               t.dims.back() > used) {
      total += t.n_bytes / static_cast<uint64_t>(t.dims.back()) * static_cast<uint64_t>(used);
    } else {
      total += t.n_bytes;
    }
  }
  return total;
}

ReadBandwidth MeasureReadBandwidth(int threads, int passes) {
  threads = std::max(1, threads);
  ReadBandwidth out;
  out.llc_bytes = LastLevelCacheBytes();
  out.buffer_bytes = std::clamp<size_t>(4 * out.llc_bytes, size_t{512} << 20, size_t{2} << 30);
  const size_t words = out.buffer_bytes / sizeof(uint64_t);
  std::unique_ptr<uint64_t[]> buf(new uint64_t[words]);
  std::memset(buf.get(), 1, words * sizeof(uint64_t));  // first touch: every page mapped before timing
  std::atomic<uint64_t> sink{0};
  auto pass = [&](int streams) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    const size_t per = words / static_cast<size_t>(threads);
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        const size_t n = t + 1 == threads ? words - per * t : per;
        sink.fetch_add(SumWords(buf.get() + per * t, n, streams), std::memory_order_relaxed);
      });
    }
    for (auto& th : pool) th.join();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  pass(1);  // warm-up
  for (int streams : kReadStreams) {
    std::vector<double> rates;
    for (int i = 0; i < std::max(1, passes); ++i)
      rates.push_back(static_cast<double>(words * sizeof(uint64_t)) / pass(streams));
    std::sort(rates.begin(), rates.end());
    const double median = rates[rates.size() / 2];
    if (median > out.bytes_per_s) {
      out.bytes_per_s = median;
      out.streams = streams;
    }
  }
  if (sink.load() == 42) out.bytes_per_s += 0;  // keeps the sums observable
  return out;
}

}  // namespace llamay::cli
