// `llamay model demo|synth`, `llamay tokenize` and `llamay run`: models from the command line. `run`
// generates through the public API (include/llamay/llamay.h), the engine the server uses. Without -m,
// commands use the built-in demo model (meaningless text; see README).
#ifndef LLAMAY_TOOLS_CLI_MODEL_COMMANDS_H_
#define LLAMAY_TOOLS_CLI_MODEL_COMMANDS_H_

#include <CLI/CLI.hpp>

namespace llamay::cli {

void AddModelCommands(CLI::App& app, int* exit_code);

}  // namespace llamay::cli

#endif  // LLAMAY_TOOLS_CLI_MODEL_COMMANDS_H_
