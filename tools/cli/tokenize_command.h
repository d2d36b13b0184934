// `llamay tokenize`: a text's token ids as a JSON list. It reads only the vocabulary, so a
// vocabulary-only GGUF file (no tensors) works too.
#ifndef LLAMAY_TOOLS_CLI_TOKENIZE_COMMAND_H_
#define LLAMAY_TOOLS_CLI_TOKENIZE_COMMAND_H_

#include <CLI/CLI.hpp>

namespace llamay::cli {

void AddTokenizeCommand(CLI::App& app, int* exit_code);

}  // namespace llamay::cli

#endif  // LLAMAY_TOOLS_CLI_TOKENIZE_COMMAND_H_
