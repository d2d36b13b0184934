#include "ctx_model_commands.h"


#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <system_error>
#include <vector>

#include "cli_engine.h"
#include "ctx_commands.h"
#include "fork_report.h"
#include "format.h"
#include "progress.h"

namespace llamay::cli {
namespace {

using Clock = std::chrono::steady_clock;

// Options every model-backed ctx command takes.
struct CommonOptions {
  std::string model;
  uint32_t page_tokens = 64;
  std::string kv_precision = "f16";
  int threads = 0;
  size_t ctx_size = 0;  // 0: the model's trained context
  bool json = false;
};

struct BuildOptions : CommonOptions {
  std::string prompt, output;
  bool f32 = false;  // the portable on-disk precision instead of the cache's own
};

struct ForkOptions : CommonOptions {
  std::string input, output_dir;
  size_t branches = 8;
};

struct RestoreOptions : CommonOptions {
  std::string input, prompt;
  int n_predict = 128;
  SamplingOptions sampling;
};

Result<std::unique_ptr<Engine>> OpenEngine(const CommonOptions& o) {
  return OpenCliEngine({o.model, o.threads, o.page_tokens, o.kv_precision, o.ctx_size, kPrefillChunk});
}

// Bytes that are not UTF-8 (a random-weight model's text, a file name) print as U+FFFD instead of throwing.
void PrintJson(const nlohmann::json& j) {
  std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
}

// Step list: prefill the prompt (with BOS) into a new session, write its snapshot, report.
int RunBuild(const BuildOptions& o) {
  auto engine = OpenEngine(o);
  if (!engine.ok()) return Fail(engine.status(), kExitBadInput);
  std::unique_ptr<Session> session = (*engine)->NewSession();
  InstallInterruptHandler();  // Ctrl-C stops the prefill within a chunk; no snapshot is written
  bool bar = false;
  GenerateOptions g;
  g.max_tokens = 0;  // take the prompt in; the session keeps the next token's logits
  g.on_prefill_progress = PrefillProgress(kPrefillChunk, &bar);
  auto out = session->Generate(o.prompt, g);
  if (bar) std::fprintf(stderr, "\n");
  if (!out.ok()) return FailGeneration(out.status());
  if (out->finish_reason == "cancelled") return Fail(Interrupted(), ExitCodeFor(Interrupted(), kExitFailure));
  // The logits after the last position go into the file, so a restore without new tokens samples its first
  // token without a forward pass (a recurrent state could not step back a token to recompute them anyway).
  // The KV stays at the cache's precision (exact, and half the bytes of f32 for an f16 cache) unless --f32.
  if (Status s = session->Snapshot(o.output, {.f32 = o.f32}); !s.ok()) return Fail(s, kExitFailure);
  const SessionStats stats = session->Stats();
  std::error_code ec;
  const uint64_t file_bytes = std::filesystem::file_size(o.output, ec);
  const double prefill_s = out->prefill_seconds;
  const double tps = static_cast<double>(out->prompt_tokens - out->cached_tokens) / std::max(prefill_s, 1e-9);
  if (o.json) {
    PrintJson({{"snapshot", o.output},
               {"tokens", stats.tokens},
               {"pages", stats.pages},
               {"page_tokens", o.page_tokens},
               {"kv_precision", o.kv_precision},
               {"bytes", file_bytes},
               {"prefill_seconds", prefill_s},
               {"prefill_tokens_per_second", tps}});
    return kExitOk;
  }
  char rate[64];
  std::snprintf(rate, sizeof rate, "%.1f tokens/s", tps);
  PrintRow("snapshot", o.output);
  PrintRow("tokens", std::to_string(stats.tokens) + " in " + std::to_string(stats.pages) + " pages of " +
                         std::to_string(o.page_tokens) + " (" + o.kv_precision + ")");
  PrintRow("file size", FormatBytes(file_bytes));
  PrintRow("prefill", FormatDuration(prefill_s) + " (" + rate + ")");
  return kExitOk;
}

// Step list: restore the source, fork it n ways (timed, the engine's page counters read around it), write
// every branch, report.
int RunFork(const ForkOptions& o) {
  if (o.branches == 0) return Fail(InvalidArgumentError("-n must be at least 1"), kExitBadInput);
  auto engine = OpenEngine(o);
  if (!engine.ok()) return Fail(engine.status(), kExitBadInput);
  auto source = (*engine)->Restore(o.input);
  if (!source.ok()) return FailSnapshot(o.input, source.status());

  const SessionStats held = (*source)->Stats();
  ForkReport report;
  report.source = o.input;
  report.tokens = held.tokens;
  report.pages = held.pages;
  report.source_bytes = held.bytes;
  report.branches = o.branches;
  const MemoryStats before = (*engine)->Memory();
  const auto t0 = Clock::now();
  std::vector<std::unique_ptr<Session>> branches = (*source)->Fork(o.branches);
  report.fork_seconds = SecondsSince(t0);
  const MemoryStats after = (*engine)->Memory();
  report.pages_allocated = after.pages_allocated_total - before.pages_allocated_total;
  report.pages_live_before = before.pages_live;
  report.pages_live_after = after.pages_live;
  report.page_bytes = after.page_bytes;

  std::error_code ec;
  std::filesystem::create_directories(o.output_dir, ec);
  if (ec) return Fail(IoError("cannot create " + o.output_dir + ": " + ec.message()), kExitFailure);
  std::vector<std::string> files;
  for (size_t k = 0; k < branches.size(); ++k) {
    files.push_back((std::filesystem::path(o.output_dir) / ("branch-" + std::to_string(k + 1) + ".llamayctx"))
                        .string());
    if (Status s = branches[k]->Snapshot(files.back()); !s.ok()) return Fail(s, kExitFailure);
  }
  if (o.json) {
    nlohmann::json j = ForkReportJson(report);
    j["branch_files"] = files;
    PrintJson(j);
  } else {
    PrintForkTable(report);
    std::fprintf(stderr, "llamay: wrote %zu branches to %s (branch-1.llamayctx ... branch-%zu.llamayctx)\n",
                 files.size(), o.output_dir.c_str(), files.size());
  }
  return kExitOk;
}

// Step list: restore, append -p's tokens (or none: the snapshot's stored logits give the first token),
// generate, report.
int RunRestore(const RestoreOptions& o) {
  if (o.n_predict < 0) return Fail(InvalidArgumentError("-n must be >= 0"), kExitBadInput);
  auto engine = OpenEngine(o);
  if (!engine.ok()) return Fail(engine.status(), kExitBadInput);
  const auto t0 = Clock::now();
  auto session = (*engine)->Restore(o.input);
  if (!session.ok()) return FailSnapshot(o.input, session.status());
  const double restore_s = SecondsSince(t0);
  const size_t restored = (*session)->tokens();

  // The new tokens continue the text: no BOS, and an SPM vocabulary still gives the text its leading space
  // (as `llamay run` on the joint prompt tokenizes it).
  std::vector<int32_t> run;
  if (!o.prompt.empty()) {
    auto ids = (*engine)->Tokenize(o.prompt, /*add_bos=*/false);
    if (!ids.ok()) return Fail(ids.status(), kExitBadInput);
    run = std::move(*ids);
  }
  GenerateOptions g;
  g.sampling = o.sampling;
  g.max_tokens = o.n_predict;
  bool bar = false;
  g.on_prefill_progress = PrefillProgress(kPrefillChunk, &bar);
  InstallInterruptHandler();
  std::string text;
  auto out = (*session)->Generate(std::span<const int32_t>(run), g, [&](std::string_view piece) {
    if (bar) std::fprintf(stderr, "\n");
    bar = false;
    if (o.json) {
      text += piece;
    } else {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    }
    return !InterruptRequested();
  });
  if (!out.ok()) {
    if (out.status().code() == StatusCode::kInvalidArgument && restored == 0 && run.empty())
      return Fail(InvalidArgumentError(o.input + " holds no tokens and -p gives none: nothing to continue"),
                  kExitBadInput);
    return FailGeneration(out.status());
  }
  if (out->finish_reason == "cancelled") return Fail(Interrupted(), ExitCodeFor(Interrupted(), kExitFailure));
  const size_t generated = out->tokens.size();
  const size_t reused = out->cached_tokens;
  const size_t prefilled = out->prompt_tokens - out->cached_tokens;
  const double gen_tps = static_cast<double>(generated) / std::max(out->generate_seconds, 1e-9);
  if (o.json) {
    PrintJson({{"source", o.input},
               {"text", text},  // lossy where the bytes are not UTF-8; token_ids are exact
               {"token_ids", out->tokens},
               {"tokens_restored", restored},
               {"tokens_reused", reused},
               {"tokens_prefilled", prefilled},
               {"tokens_generated", generated},
               {"page_tokens", o.page_tokens},
               {"kv_precision", o.kv_precision},
               {"restore_seconds", restore_s},
               {"prefill_seconds", out->prefill_seconds},
               {"generation_seconds", out->generate_seconds},
               {"generation_tokens_per_second", gen_tps}});
    return kExitOk;
  }
  std::printf("\n");
  std::fprintf(stderr,
               "\nrestore: %zu tokens in %s (%u-token pages); %zu reused, %zu prefilled in %s; "
               "generation: %zu tokens in %s (%.1f tokens/s)\n",
               restored, FormatDuration(restore_s).c_str(), o.page_tokens, reused, prefilled,
               FormatDuration(out->prefill_seconds).c_str(), generated,
               FormatDuration(out->generate_seconds).c_str(), gen_tps);
  return kExitOk;
}

void AddCommon(CLI::App* c, CommonOptions* o) {
  c->add_option("-m,--model", o->model, "GGUF model (default: the built-in demo model)");
  c->add_option("--page-tokens", o->page_tokens, "KV positions per page")->capture_default_str();
  c->add_option("--kv-precision", o->kv_precision, "KV precision: f32, f16, q8_0")->capture_default_str();
  c->add_option("-t,--threads", o->threads, "Compute threads (0: one per core)")->capture_default_str();
  c->add_option("-c,--ctx-size", o->ctx_size, "Positions a context may hold (0: the model's trained context)")
      ->capture_default_str();
  c->add_flag("--json", o->json, "One JSON object on stdout instead of the table");
}

}  // namespace

void AddCtxModelCommands(CLI::App& ctx, int* exit_code) {
  auto b = std::make_shared<BuildOptions>();
  CLI::App* build = ctx.add_subcommand("build", "Prefill a prompt into a context and write it as a snapshot");
  AddCommon(build, b.get());
  build->add_option("-p,--prompt", b->prompt, "Prompt (the model's BOS is added)")->required();
  build->add_option("-o,--output", b->output, "Snapshot file to write")->required();
  build->add_flag("--f32", b->f32, "Store the KV as f32 (portable) instead of the cache's own precision");
  build->callback([b, exit_code] { *exit_code = RunBuild(*b); });

  auto f = std::make_shared<ForkOptions>();
  CLI::App* fork = ctx.add_subcommand("fork", "Fork a snapshot N ways and write every branch to DIR");
  AddCommon(fork, f.get());
  fork->add_option("-i,--input", f->input, "Snapshot to fork")->required();
  fork->add_option("-n,--branches", f->branches, "Branches")->capture_default_str();
  fork->add_option("-o,--output", f->output_dir, "Directory for branch-<k>.llamayctx (created if missing)")
      ->required();
  fork->callback([f, exit_code] { *exit_code = RunFork(*f); });

  auto r = std::make_shared<RestoreOptions>();
  CLI::App* restore = ctx.add_subcommand("restore", "Restore a snapshot and continue generating from it");
  AddCommon(restore, r.get());
  restore->add_option("-i,--input", r->input, "Snapshot to restore")->required();
  restore->add_option("-p,--prompt", r->prompt, "Text appended to the context (no BOS)");
  restore->add_option("-n,--n-predict", r->n_predict, "Tokens to generate")->capture_default_str();
  restore->add_option("--temp", r->sampling.temperature, "Temperature (0: greedy)")->capture_default_str();
  restore->add_option("--top-k", r->sampling.top_k, "Top-k (0: off)")->capture_default_str();
  restore->add_option("--top-p", r->sampling.top_p, "Top-p (1: off)")->capture_default_str();
  restore->add_option("--min-p", r->sampling.min_p, "Min-p (0: off)")->capture_default_str();
  restore->add_option("--repeat-penalty", r->sampling.repeat_penalty, "Repetition penalty (1: off)")
      ->capture_default_str();
  restore->add_option("--seed", r->sampling.seed, "Random seed (-1: random)")->capture_default_str();
  restore->callback([r, exit_code] { *exit_code = RunRestore(*r); });
}

}  // namespace llamay::cli
