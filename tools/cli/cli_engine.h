// The engine a CLI command that generates runs on: the public API's (include/llamay/llamay.h), the one the
// server uses, sized for the command's own sessions. `run` and `ctx build|fork|restore` open it alike.
#ifndef LLAMAY_TOOLS_CLI_CLI_ENGINE_H_
#define LLAMAY_TOOLS_CLI_CLI_ENGINE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "llamay/llamay.h"

namespace llamay::cli {

struct CliEngineOptions {
  std::string model;  // empty: the built-in demo model (a note on stderr says its text is meaningless)
  int threads = 0;
  uint32_t page_tokens = 64;
  std::string kv_precision = "f16";
  size_t ctx_size = 0;  // 0: the model's trained context
  size_t prefill_chunk = 256;
  std::string speculative = "auto";  // --speculative auto|off
};

// InvalidArgument for a bad option; the loader's errors for the model file. Callers exit 2 on failure.
Result<std::unique_ptr<Engine>> OpenCliEngine(const CliEngineOptions& o);

}  // namespace llamay::cli

#endif  // LLAMAY_TOOLS_CLI_CLI_ENGINE_H_
