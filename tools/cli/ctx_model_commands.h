// `llamay ctx build|fork|restore`: a model's contexts on disk.
//
//   build    prefills a prompt into a context and writes it as a snapshot. Every prompt token's K/V is in
//            the snapshot; no logits are stored.
//   fork     restores a snapshot, forks it N ways (the seed guide's table; pages allocated is measured) and
//            writes each branch as DIR/branch-<k>.llamayctx, k = 1..N.
//   restore  restores a snapshot (any page size) and continues it: -p's tokens (no BOS) are appended and
//            prefilled, and their last logits start generation. With no -p the context's last position is
//            dropped (Context::Rollback) and its token run again to get its logits: exact, since the
//            computation is deterministic and that position's K/V is recomputed bit for bit.
// So `ctx restore -i base -p X` prints what `llamay run -p "<prompt> X"` generates whenever the two
// tokenisations agree (tests/cli_ctx.sh checks it).
//
// Exit codes (ctx_commands.h): 2 for bad arguments or an unreadable, malformed or damaged file;
// 3 (kExitWrongModel) for a snapshot computed by other weights; 1 for other failures.
#ifndef LLAMAY_TOOLS_CLI_CTX_MODEL_COMMANDS_H_
#define LLAMAY_TOOLS_CLI_CTX_MODEL_COMMANDS_H_

#include <CLI/CLI.hpp>

namespace llamay::cli {

// Adds build, fork and restore under `ctx`.
void AddCtxModelCommands(CLI::App& ctx, int* exit_code);

}  // namespace llamay::cli

#endif  // LLAMAY_TOOLS_CLI_CTX_MODEL_COMMANDS_H_
