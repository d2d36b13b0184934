// `llamay bench`: a llama-bench-like table of prompt processing (ppN) and generation (tgN) speed.
#ifndef LLAMAY_TOOLS_CLI_BENCH_COMMAND_H_
#define LLAMAY_TOOLS_CLI_BENCH_COMMAND_H_

#include <CLI/CLI.hpp>

namespace llamay::cli {

void AddBenchCommand(CLI::App& app, int* exit_code);

}  // namespace llamay::cli

#endif  // LLAMAY_TOOLS_CLI_BENCH_COMMAND_H_
