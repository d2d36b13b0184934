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

#include "ctx_commands.h"
#include "fork_report.h"
#include "format.h"
#include "generation.h"
#include "kv/cache.h"
#include "kv/snapshot.h"
#include "model_source.h"

namespace llamay::cli {
namespace {

using Clock = std::chrono::steady_clock;

// Options every model-backed ctx command takes.
struct CommonOptions {
  std::string model;
  uint32_t page_tokens = kv::kDefaultPageTokens;
  std::string kv_precision = "f16";
  int threads = 0;
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
  sampling::SamplingParams sampling;
  int64_t seed = -1;  // -1: random
};

// The model, its tokenizer and an unbounded cache laid out for it.
struct Setup {
  LoadedModel m;
  std::unique_ptr<kv::Cache> cache;
};

Result<Setup> Prepare(const CommonOptions& o) {
  Setup s;
  LLAMAY_ASSIGN_OR_RETURN(kv::KvPrecision precision, kv::ParseKvPrecision(o.kv_precision));
  LLAMAY_ASSIGN_OR_RETURN(s.m, LoadModelOrDemo(o.model, o.threads));
  kv::CacheOptions co;
  co.layout = s.m.model->KvLayoutFor(o.page_tokens, precision);
  LLAMAY_ASSIGN_OR_RETURN(s.cache, kv::Cache::Create(co));
  return s;
}

// Bytes that are not UTF-8 (a random-weight model's text, a file name) print as U+FFFD instead of throwing.
void PrintJson(const nlohmann::json& j) {
  std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
}

// Step list: tokenize with BOS, prefill chunk by chunk, write the snapshot, report.
int RunBuild(const BuildOptions& o) {
  auto setup = Prepare(o);
  if (!setup.ok()) return Fail(setup.status(), kExitBadInput);
  const model::Model& model = *setup->m.model;
  auto ids = setup->m.tokenizer->Encode(o.prompt, /*add_special=*/true, /*parse_special=*/false);
  if (!ids.ok()) return Fail(ids.status(), kExitBadInput);
  if (ids->empty()) return Fail(InvalidArgumentError("the prompt encodes to no tokens"), kExitBadInput);
  if (ids->size() > kv::kMaxPositions)
    return Fail(InvalidArgumentError("the prompt is " + std::to_string(ids->size()) + " tokens, more than a " +
                                     "snapshot holds (" + std::to_string(kv::kMaxPositions) + ")"),
                kExitBadInput);
  kv::Context ctx = setup->cache->NewContext();
  InstallInterruptHandler();  // Ctrl-C stops the prefill within a chunk; no snapshot is written
  const auto t0 = Clock::now();
  auto logits = Prefill(model, ctx, *ids);
  if (!logits.ok()) return Fail(logits.status(), ExitCodeFor(logits.status(), kExitFailure));
  const double prefill_s = SecondsSince(t0);
  // The logits after the last position go into the file, so a restore without new tokens samples its first
  // token without a forward pass (a recurrent state could not step back a token to recompute them anyway).
  // The KV stays at the cache's precision (exact, and half the bytes of f32 for an f16 cache) unless --f32.
  kv::SnapshotOptions so;
  so.logits = *logits;
  so.native_precision = !o.f32;
  so.kv_checksums = true;
  if (Status s = kv::SaveSnapshot(ctx, model.weight_digest(), o.output, so); !s.ok()) return Fail(s, kExitFailure);
  std::error_code ec;
  const uint64_t file_bytes = std::filesystem::file_size(o.output, ec);
  const double tps = static_cast<double>(ids->size()) / std::max(prefill_s, 1e-9);
  if (o.json) {
    PrintJson({{"snapshot", o.output},
               {"tokens", ctx.size()},
               {"pages", ctx.n_pages()},
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
  PrintRow("tokens", std::to_string(ctx.size()) + " in " + std::to_string(ctx.n_pages()) + " pages of " +
                         std::to_string(o.page_tokens) + " (" + o.kv_precision + ")");
  PrintRow("file size", FormatBytes(file_bytes));
  PrintRow("prefill", FormatDuration(prefill_s) + " (" + rate + ")");
  return kExitOk;
}

// Step list: restore the source, fork it n ways (measured), write every branch, report.
int RunFork(const ForkOptions& o) {
  if (o.branches == 0) return Fail(InvalidArgumentError("-n must be at least 1"), kExitBadInput);
  auto setup = Prepare(o);
  if (!setup.ok()) return Fail(setup.status(), kExitBadInput);
  const Digest& weights = setup->m.model->weight_digest();
  std::vector<float> logits;  // carried to every branch (a hybrid model's snapshot holds them)
  auto source = kv::LoadSnapshot(*setup->cache, o.input, weights, &logits);
  if (!source.ok()) return FailSnapshot(o.input, source.status());
  kv::SnapshotOptions so;
  so.logits = logits;
  so.native_precision = true;  // what the cache holds, exactly

  std::vector<kv::Context> branches;
  const ForkReport report = MeasureFork(*source, o.branches, o.input, &branches);

  std::error_code ec;
  std::filesystem::create_directories(o.output_dir, ec);
  if (ec) return Fail(IoError("cannot create " + o.output_dir + ": " + ec.message()), kExitFailure);
  std::vector<std::string> files;
  for (size_t k = 0; k < branches.size(); ++k) {
    files.push_back((std::filesystem::path(o.output_dir) / ("branch-" + std::to_string(k + 1) + ".llamayctx"))
                        .string());
    if (Status s = kv::SaveSnapshot(branches[k], weights, files.back(), so); !s.ok()) return Fail(s, kExitFailure);
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

// Step list: restore, choose the tokens to run (-p's, or the last stored one again), prefill them,
// generate, report.
int RunRestore(const RestoreOptions& o) {
  auto sampler = MakeSampler(o.sampling, o.seed);
  if (!sampler.ok()) return Fail(sampler.status(), kExitBadInput);
  if (o.n_predict < 0) return Fail(InvalidArgumentError("-n must be >= 0"), kExitBadInput);
  auto setup = Prepare(o);
  if (!setup.ok()) return Fail(setup.status(), kExitBadInput);
  const model::Model& model = *setup->m.model;
  const tokenizer::Tokenizer& tok = *setup->m.tokenizer;

  const auto t0 = Clock::now();
  std::vector<float> stored_logits;
  auto ctx = kv::LoadSnapshot(*setup->cache, o.input, model.weight_digest(), &stored_logits);
  if (!ctx.ok()) return FailSnapshot(o.input, ctx.status());
  const double restore_s = SecondsSince(t0);
  const size_t restored = ctx->size();

  // The new tokens continue the text: no BOS (an SPM vocabulary still gives the text its leading space).
  std::vector<int32_t> run;
  if (!o.prompt.empty()) {
    auto ids = tok.Encode(o.prompt, /*add_special=*/false, /*parse_special=*/false);
    if (!ids.ok()) return Fail(ids.status(), kExitBadInput);
    run = std::move(*ids);
  }
  const bool have_logits = run.empty() && stored_logits.size() == model.hparams().n_vocab;
  if (run.empty() && !have_logits) {
    // No new tokens and no stored logits: the last stored token runs again to get them.
    if (restored == 0)
      return Fail(InvalidArgumentError(o.input + " holds no tokens and -p gives none: nothing to continue"),
                  kExitBadInput);
    run.push_back(ctx->tokens().back());
    if (Status s = ctx->Rollback(restored - 1); !s.ok())
      return Fail(FailedPreconditionError(o.input + " holds no logits and its last token cannot be run again (" +
                                          s.message() + "); continue it with -p"),
                  kExitBadInput);
  }
  const size_t reused = ctx->size();
  std::vector<int32_t> history = ctx->tokens();
  history.insert(history.end(), run.begin(), run.end());

  InstallInterruptHandler();
  const auto t1 = Clock::now();
  auto logits = have_logits ? Result<std::vector<float>>(std::move(stored_logits)) : Prefill(model, *ctx, run);
  if (!logits.ok()) return Fail(logits.status(), ExitCodeFor(logits.status(), kExitFailure));
  const double prefill_s = SecondsSince(t1);
  std::string text;
  auto gen = Decode(model, tok, *sampler, *ctx, std::move(*logits), std::move(history), o.n_predict,
                    [&](const std::string& piece) {
                      if (o.json) {
                        text += piece;
                      } else {
                        std::printf("%s", piece.c_str());
                        std::fflush(stdout);
                      }
                    });
  if (!gen.ok()) return Fail(gen.status(), ExitCodeFor(gen.status(), kExitFailure));
  const double gen_tps = gen->generated / std::max(gen->seconds, 1e-9);
  if (o.json) {
    PrintJson({{"source", o.input},
               {"text", text},  // lossy where the bytes are not UTF-8; token_ids are exact
               {"token_ids", gen->tokens},
               {"tokens_restored", restored},
               {"tokens_reused", reused},
               {"tokens_prefilled", run.size()},
               {"tokens_generated", gen->generated},
               {"page_tokens", o.page_tokens},
               {"kv_precision", o.kv_precision},
               {"restore_seconds", restore_s},
               {"prefill_seconds", prefill_s},
               {"generation_seconds", gen->seconds},
               {"generation_tokens_per_second", gen_tps}});
    return kExitOk;
  }
  std::printf("\n");
  std::fprintf(stderr,
               "\nrestore: %zu tokens in %s (%u-token pages); %zu reused, %zu prefilled in %s; "
               "generation: %d tokens in %s (%.1f tokens/s)\n",
               restored, FormatDuration(restore_s).c_str(), o.page_tokens, reused, run.size(),
               FormatDuration(prefill_s).c_str(), gen->generated, FormatDuration(gen->seconds).c_str(), gen_tps);
  return kExitOk;
}

void AddCommon(CLI::App* c, CommonOptions* o) {
  c->add_option("-m,--model", o->model, "GGUF model (default: the built-in demo model)");
  c->add_option("--page-tokens", o->page_tokens, "KV positions per page")->capture_default_str();
  c->add_option("--kv-precision", o->kv_precision, "KV precision: f32, f16, q8_0")->capture_default_str();
  c->add_option("-t,--threads", o->threads, "Compute threads (0: one per core)")->capture_default_str();
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
  restore->add_option("--seed", r->seed, "Random seed (-1: random)")->capture_default_str();
  restore->callback([r, exit_code] { *exit_code = RunRestore(*r); });
}

}  // namespace llamay::cli
