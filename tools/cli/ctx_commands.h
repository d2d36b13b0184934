// `llamay ctx ...` subcommands: `build`, `fork` and `restore` work on a model's contexts
// (ctx_model_commands.h); `demo` exercises the state engine on a synthetic layout of the peer model's KV
// shape (no model needed); `inspect` reads any snapshot's header.
#ifndef LLAMAY_TOOLS_CLI_CTX_COMMANDS_H_
#define LLAMAY_TOOLS_CLI_CTX_COMMANDS_H_

#include <CLI/CLI.hpp>
#include <string>

#include "base/status.h"

namespace llamay::cli {

// Exit codes shared by every command.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;    // the operation failed (I/O, memory)
inline constexpr int kExitBadInput = 2;   // bad arguments, or an unreadable or damaged input file
inline constexpr int kExitWrongModel = 3; // a snapshot computed by another model's weights
// The text `llamay --help` ends with.
inline constexpr const char* kExitCodesHelp =
    "Exit codes: 0 ok; 1 the operation failed (I/O, memory); 2 bad arguments, or an unreadable or damaged\n"
    "input (missing file, malformed GGUF, corrupt or truncated snapshot); 3 a snapshot from another model;\n"
    "130 interrupted (Ctrl-C during a prefill or generation; a second Ctrl-C ends it at once).";

// Prints "llamay: <status>" to stderr and returns `code`: how every command reports a failure.
int Fail(const Status& s, int code);
// How a failed snapshot read or restore of `path` is reported: "llamay: PATH: message (reason)" and
// kExitWrongModel for another model's snapshot, kExitBadInput for a missing, unreadable or damaged file,
// kExitFailure for anything else (memory).
int FailSnapshot(const std::string& path, const Status& s);
// How a failed generation is reported: kExitBadInput for bad input (an over-long prompt, bad sampling
// options), kExitFailure otherwise.
int FailGeneration(const Status& s);

void AddCtxCommands(CLI::App& app, int* exit_code);

}  // namespace llamay::cli

#endif  // LLAMAY_TOOLS_CLI_CTX_COMMANDS_H_
