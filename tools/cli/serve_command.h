// `llamay serve`: the OpenAI-compatible HTTP server (default 127.0.0.1:11435) on a model, the built-in demo
// model when none is given.
#ifndef LLAMAY_TOOLS_CLI_SERVE_COMMAND_H_
#define LLAMAY_TOOLS_CLI_SERVE_COMMAND_H_

#include <CLI/CLI.hpp>

namespace llamay::cli {

void AddServeCommand(CLI::App& app, int* exit_code);

}  // namespace llamay::cli

#endif  // LLAMAY_TOOLS_CLI_SERVE_COMMAND_H_
