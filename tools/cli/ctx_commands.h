// `llamay ctx ...` subcommands. Until the model runtime lands, `ctx demo` exercises the state engine on a
// synthetic layout of the peer model's KV shape; `ctx inspect` reads any snapshot's header.
#ifndef LLAMAY_TOOLS_CLI_CTX_COMMANDS_H_
#define LLAMAY_TOOLS_CLI_CTX_COMMANDS_H_

#include <CLI/CLI.hpp>

#include "base/status.h"

namespace llamay::cli {

// Exit codes shared by every command.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;    // the operation failed (I/O, memory)
inline constexpr int kExitBadInput = 2;   // bad arguments or a bad input file

// Prints "llamay: <status>" to stderr and returns `code`: how every command reports a failure.
int Fail(const Status& s, int code);

void AddCtxCommands(CLI::App& app, int* exit_code);

}  // namespace llamay::cli

#endif  // LLAMAY_TOOLS_CLI_CTX_COMMANDS_H_
