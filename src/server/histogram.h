// A Prometheus histogram of durations in seconds, for /metrics: a fixed list of bucket upper bounds, a
// count per bucket, and the sum of the observations. Rendered in the text exposition format as
// cumulative `_bucket{le="..."}` lines ending with `le="+Inf"`, then `_sum` and `_count`.
//
// Invariant: `_count` equals the `+Inf` bucket in every rendering (both are the same sum of the per-bucket
// counts read once), and the buckets never decrease from one bound to the next.
//
// Thread-safety: Observe and Render may run concurrently from any thread (handler threads observe, the
// /metrics handler renders); everything is a relaxed atomic, no lock. A rendering that races an
// observation may show its bucket without its part of `_sum`, never a bucket without its `_count`.
#ifndef LLAMAY_SERVER_HISTOGRAM_H_
#define LLAMAY_SERVER_HISTOGRAM_H_

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace llamay::server {

class Histogram {
 public:
  // REQUIRES: `bounds` ascending, finite.
  Histogram(std::initializer_list<double> bounds)
      : bounds_(bounds), counts_(std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1)) {}

  void Observe(double seconds) {
    size_t i = 0;
    while (i < bounds_.size() && seconds > bounds_[i]) ++i;  // le: the first bound >= the value
    counts_[i].fetch_add(1, std::memory_order_relaxed);
    double sum = sum_.load(std::memory_order_relaxed);
    while (!sum_.compare_exchange_weak(sum, sum + seconds, std::memory_order_relaxed)) {
    }
  }

  // Appends the histogram's HELP, TYPE, buckets, sum and count to `out`.
  void Render(const char* name, const char* help, std::string* out) const {
    char line[160];
    out->append("# HELP ").append(name).append(" ").append(help).append("\n");
    out->append("# TYPE ").append(name).append(" histogram\n");
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= bounds_.size(); ++i) {
      cumulative += counts_[i].load(std::memory_order_relaxed);
      if (i < bounds_.size()) {
        std::snprintf(line, sizeof line, "_bucket{le=\"%g\"} %llu\n", bounds_[i],
                      static_cast<unsigned long long>(cumulative));
      } else {
        std::snprintf(line, sizeof line, "_bucket{le=\"+Inf\"} %llu\n",
                      static_cast<unsigned long long>(cumulative));
      }
      out->append(name).append(line);
    }
    std::snprintf(line, sizeof line, "_sum %.9g\n", sum_.load(std::memory_order_relaxed));
    out->append(name).append(line);
    std::snprintf(line, sizeof line, "_count %llu\n", static_cast<unsigned long long>(cumulative));
    out->append(name).append(line);
  }

 private:
  const std::vector<double> bounds_;
  // [bounds_.size() + 1]: observations in (bounds_[i-1], bounds_[i]]; the last: above every bound.
  const std::unique_ptr<std::atomic<uint64_t>[]> counts_;
  std::atomic<double> sum_{0.0};
};

}  // namespace llamay::server

#endif  // LLAMAY_SERVER_HISTOGRAM_H_
