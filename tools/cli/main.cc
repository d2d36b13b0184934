// llamay: the command-line entry point.
#include <CLI/CLI.hpp>

#include "bench_command.h"
#include "ctx_commands.h"
#include "model_commands.h"
#include "serve_command.h"

int main(int argc, char** argv) {
  CLI::App app{"llamay: a local LLM inference engine whose contexts fork, snapshot and restore"};
  app.require_subcommand(1);
  app.footer(llamay::cli::kExitCodesHelp);
  int exit_code = llamay::cli::kExitOk;
  llamay::cli::AddCtxCommands(app, &exit_code);
  llamay::cli::AddModelCommands(app, &exit_code);
  llamay::cli::AddBenchCommand(app, &exit_code);
  llamay::cli::AddServeCommand(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : llamay::cli::kExitBadInput;
  }
  return exit_code;
}
