// `llamay model demo` writes the built-in demo model as a GGUF file. `llamay model synth` writes GGUF files
// of a chosen shape with deterministic synthetic weights, in any weight type llamay can quantise to, so
// that llamay and llama.cpp benchmark the very same file (bench/side_by_side).
#ifndef LLAMAY_TOOLS_CLI_SYNTH_COMMAND_H_
#define LLAMAY_TOOLS_CLI_SYNTH_COMMAND_H_

#include <CLI/CLI.hpp>
#include <string>

#include "base/status.h"
#include "base/tensor_type.h"

namespace llamay::cli {

// A weight type by llama.cpp's name ("f16", "q8_0", "q4_K"), refused unless llamay can quantise to it.
Result<TensorType> ParseWeightType(const std::string& name);

// `model demo` and `model synth`.
void AddModelFileCommands(CLI::App& model_cmd, int* exit_code);

}  // namespace llamay::cli

#endif  // LLAMAY_TOOLS_CLI_SYNTH_COMMAND_H_
