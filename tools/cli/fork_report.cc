#include "fork_report.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "format.h"

namespace llamay::cli {

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
