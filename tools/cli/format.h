// What the CLI prints besides tables: human-readable byte sizes ("128.00 KiB") and durations ("19µs",
// "1.52 ms"), and the note every command run without -m gives.
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

// The note that says the demo model's text is meaningless (stderr), for commands run without -m.
void PrintDemoModelNote();

}  // namespace llamay::cli

#endif  // LLAMAY_TOOLS_CLI_FORMAT_H_
