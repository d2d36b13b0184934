// `llamay ctx push | pull | ls`: snapshot files to and from a snapshot store (a directory or S3-compatible
// object storage; docs/store.md). No model is needed: a file names the weights that computed it.
#ifndef LLAMAY_TOOLS_CLI_CTX_STORE_COMMANDS_H_
#define LLAMAY_TOOLS_CLI_CTX_STORE_COMMANDS_H_

#include <CLI/CLI.hpp>

namespace llamay::cli {

void AddCtxStoreCommands(CLI::App& ctx, int* exit_code);

}  // namespace llamay::cli

#endif  // LLAMAY_TOOLS_CLI_CTX_STORE_COMMANDS_H_
