// The fork table of the seed guide, shared by `ctx demo` (synthetic KV) and `ctx fork` (a real snapshot):
//
//   source                    base.llamayctx, 46 tokens, 1 pages
//   branches                  8 in 19µs (2µs each)
//   pages allocated           0
//   pages a copy would need   8
//   memory held               128.00 KiB (a copy would be 1.00 MiB)
//
// "pages allocated" is measured from the cache's counters around the fork, never assumed: `ctx demo` reads
// the state engine's counters, `ctx fork` the public API's (llamay::Engine::Memory).
// Thread-safety: functions only.
#ifndef LLAMAY_TOOLS_CLI_FORK_REPORT_H_
#define LLAMAY_TOOLS_CLI_FORK_REPORT_H_

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace llamay::cli {

struct ForkReport {
  std::string source;  // what the table's first line names: a file, or "synthetic"
  size_t tokens = 0;
  size_t pages = 0;  // pages the source holds
  size_t branches = 0;
  double fork_seconds = 0;
  uint64_t pages_allocated = 0;  // pages the cache allocated during the fork
  size_t pages_live_before = 0, pages_live_after = 0;
  size_t page_bytes = 0;
  size_t source_bytes = 0;  // what the source holds: KV pages, and a hybrid model's recurrent state

  size_t pages_a_copy_would_need() const { return pages * branches; }
  uint64_t bytes_held() const { return source_bytes; }
  uint64_t bytes_a_copy_would_hold() const { return bytes_held() * branches; }
};

// One "label   value" line of a CLI table (the label padded to 25 columns).
void PrintRow(const char* label, const std::string& value);
void PrintForkTable(const ForkReport& r);
// The same facts as the table, for --json.
nlohmann::json ForkReportJson(const ForkReport& r);

}  // namespace llamay::cli

#endif  // LLAMAY_TOOLS_CLI_FORK_REPORT_H_
