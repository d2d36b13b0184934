// Human-readable numbers for the CLI: byte sizes ("128.00 KiB") and durations ("19µs", "1.52 ms").
#ifndef LLAMAY_TOOLS_CLI_FORMAT_H_
#define LLAMAY_TOOLS_CLI_FORMAT_H_

#include <chrono>
#include <cstdint>
#include <string>

namespace llamay::cli {

std::string FormatBytes(uint64_t bytes);
std::string FormatDuration(double seconds);
// Seconds elapsed since t0 (steady clock): what every timing the CLI prints is measured with.
double SecondsSince(std::chrono::steady_clock::time_point t0);

}  // namespace llamay::cli

#endif  // LLAMAY_TOOLS_CLI_FORMAT_H_
