#include "fork_report.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "format.h"
#include "kv/cache.h"

namespace llamay::cli {

ForkReport MeasureFork(const kv::Context& source, size_t n, std::string label, std::vector<kv::Context>* branches) {
  kv::Cache& cache = *source.cache();
  ForkReport r;
  r.source = std::move(label);
  r.tokens = source.size();
  r.pages = source.n_pages();
  r.source_bytes = source.bytes();
  r.branches = n;
  const kv::CacheStats before = cache.Stats();
  const auto t0 = std::chrono::steady_clock::now();
  *branches = source.Fork(n);
  r.fork_seconds = SecondsSince(t0);
  const kv::CacheStats after = cache.Stats();
  r.pages_allocated = after.pages_allocated_total - before.pages_allocated_total;
  r.pages_live_before = before.pages_live;
  r.pages_live_after = after.pages_live;
  r.page_bytes = after.page_bytes;
  return r;
}

void PrintRow(const char* label, const std::string& value) { std::printf("%-25s %s\n", label, value.c_str()); }

void PrintForkTable(const ForkReport& r) {
  const double each = r.fork_seconds / static_cast<double>(std::max<size_t>(r.branches, 1));
  PrintRow("source", r.source + ", " + std::to_string(r.tokens) + " tokens, " + std::to_string(r.pages) + " pages");
  PrintRow("branches", std::to_string(r.branches) + " in " + FormatDuration(r.fork_seconds) + " (" +
                           FormatDuration(each) + " each)");
  PrintRow("pages allocated", std::to_string(r.pages_allocated));
  PrintRow("pages a copy would need", std::to_string(r.pages_a_copy_would_need()));
  PrintRow("memory held", FormatBytes(r.bytes_held()) + " (a copy would be " +
                              FormatBytes(r.bytes_a_copy_would_hold()) + ")");
}

nlohmann::json ForkReportJson(const ForkReport& r) {
  return {{"source", r.source},
          {"tokens", r.tokens},
          {"pages", r.pages},
          {"branches", r.branches},
          {"fork_seconds", r.fork_seconds},
          {"pages_allocated", r.pages_allocated},
          {"pages_live_before", r.pages_live_before},
          {"pages_live_after", r.pages_live_after},
          {"pages_a_copy_would_need", r.pages_a_copy_would_need()},
          {"page_bytes", r.page_bytes},
          {"bytes_held", r.bytes_held()},
          {"bytes_a_copy_would_hold", r.bytes_a_copy_would_hold()}};
}

}  // namespace llamay::cli
