#include "model_commands.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>


#include "base/file.h"
#include "cli_engine.h"
#include "ctx_commands.h"
#include "format.h"
#include "progress.h"
#include "tokenize_command.h"
#include "synth_command.h"

namespace llamay::cli {
namespace {

struct RunOptions {
  std::string model;
  std::string prompt;
  int n_predict = 128;
  uint32_t page_tokens = 64;
  std::string kv_precision = "f16";
  size_t batch = kPrefillChunk;
  bool no_bos = false;
  int threads = 0;
  SamplingOptions sampling;
  std::vector<std::string> stop;
  std::string json_schema, grammar;  // files
  size_t ctx_size = 0;               // 0: the model's trained context
  std::string speculative = "auto";
};

// --json-schema FILE or --grammar FILE as the session's constraint.
Status Constrain(const RunOptions& o, Session& session) {
  if (o.json_schema.empty() && o.grammar.empty()) return Status::Ok();
  if (!o.json_schema.empty() && !o.grammar.empty()) return InvalidArgumentError("use --json-schema or --grammar, not both");
  const std::string& path = o.json_schema.empty() ? o.grammar : o.json_schema;
  LLAMAY_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadFile(path));
  const std::string text(bytes.begin(), bytes.end());
  Status s = o.json_schema.empty() ? session.ConstrainToGrammar(text) : session.ConstrainToJsonSchema(text);
  return s.ok() ? s : s.WithContext(path);
}

// Generation through the public API (include/llamay/llamay.h), the engine the server uses too: the prompt,
// then the text as it comes; a progress bar for a long prefill; Ctrl-C stops it (exit 130).
int RunGenerate(const RunOptions& o) {
  if (o.batch == 0) return Fail(InvalidArgumentError("--batch must be positive"), kExitBadInput);
  if (Status s = o.sampling.Validate(); !s.ok()) return Fail(s, kExitBadInput);  // before a long load
  auto engine = OpenCliEngine({o.model, o.threads, o.page_tokens, o.kv_precision, o.ctx_size, o.batch, o.speculative});
  if (!engine.ok()) return Fail(engine.status(), kExitBadInput);
  std::unique_ptr<Session> session = (*engine)->NewSession();
  if (Status s = Constrain(o, *session); !s.ok()) return Fail(s, kExitBadInput);
  auto prompt = (*engine)->Tokenize(o.prompt, /*add_bos=*/!o.no_bos);
  if (!prompt.ok()) return Fail(prompt.status(), kExitBadInput);
  GenerateOptions g;
  g.sampling = o.sampling;
  g.max_tokens = o.n_predict;
  g.stop = o.stop;
  bool bar = false;
  g.on_prefill_progress = PrefillProgress(o.batch, &bar);
  InstallInterruptHandler();
  std::printf("%s", o.prompt.c_str());
  std::fflush(stdout);
  auto out = session->Generate(std::span<const int32_t>(*prompt), g, [&](std::string_view text) {
    if (bar) std::fprintf(stderr, "\n");  // the progress bar's line ends before the text
    bar = false;
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return !InterruptRequested();
  });
  std::printf("\n");
  if (!out.ok()) return FailGeneration(out.status());
  if (out->finish_reason == "cancelled") return Fail(Interrupted(), ExitCodeFor(Interrupted(), kExitFailure));
  const double prefill_s = out->prefill_seconds, decode_s = out->generate_seconds;
  const size_t computed = out->prompt_tokens - out->cached_tokens;
  std::fprintf(stderr, "\nprompt: %zu tokens in %s (%.1f tokens/s); generation: %zu tokens in %s (%.1f tokens/s)\n",
               computed, FormatDuration(prefill_s).c_str(), static_cast<double>(computed) / std::max(prefill_s, 1e-9),
               out->tokens.size(), FormatDuration(decode_s).c_str(),
               static_cast<double>(out->tokens.size()) / std::max(decode_s, 1e-9));
  if (out->draft_tokens > 0)
    std::fprintf(stderr, "speculative: %zu of %zu drafted tokens accepted\n", out->accepted_draft_tokens, out->draft_tokens);
  return kExitOk;
}

}  // namespace

void AddModelCommands(CLI::App& app, int* exit_code) {
  CLI::App* model_cmd = app.add_subcommand("model", "Model files");
  model_cmd->require_subcommand(1);
  AddModelFileCommands(*model_cmd, exit_code);

  AddTokenizeCommand(app, exit_code);

  auto ro = std::make_shared<RunOptions>();
  CLI::App* run = app.add_subcommand("run", "Generate text from a prompt");
  run->add_option("-m,--model", ro->model, "GGUF model (default: the built-in demo model)");
  run->add_option("-p,--prompt", ro->prompt, "Prompt")->required();
  run->add_option("-n,--n-predict", ro->n_predict, "Tokens to generate")->capture_default_str();
  run->add_option("--page-tokens", ro->page_tokens, "KV positions per page")->capture_default_str();
  run->add_option("--kv-precision", ro->kv_precision, "KV precision: f32, f16, q8_0")->capture_default_str();
  run->add_option("-b,--batch", ro->batch, "Prefill chunk size")->capture_default_str();
  run->add_flag("--no-bos", ro->no_bos, "Do not add the BOS token");
  run->add_option("-t,--threads", ro->threads, "Compute threads (0: one per core)")->capture_default_str();
  run->add_option("--temp", ro->sampling.temperature, "Temperature (0: greedy)")->capture_default_str();
  run->add_option("--top-k", ro->sampling.top_k, "Top-k (0: off)")->capture_default_str();
  run->add_option("--top-p", ro->sampling.top_p, "Top-p (1: off)")->capture_default_str();
  run->add_option("--min-p", ro->sampling.min_p, "Min-p (0: off)")->capture_default_str();
  run->add_option("--repeat-penalty", ro->sampling.repeat_penalty, "Repetition penalty (1: off)")->capture_default_str();
  run->add_option("--repeat-last-n", ro->sampling.repeat_last_n, "Window of the penalties")->capture_default_str();
  run->add_option("--seed", ro->sampling.seed, "Random seed (-1: random)")->capture_default_str();
  run->add_option("-c,--ctx-size", ro->ctx_size, "Positions the context may hold (0: the model's trained context)")
      ->capture_default_str();
  run->add_option("--stop", ro->stop, "Stop where the text contains this (repeatable)");
  run->add_option("--json-schema", ro->json_schema, "Constrain the output to this JSON Schema (a file)");
  run->add_option("--grammar", ro->grammar, "Constrain the output to this GBNF grammar (a file)");
  run->add_option("--speculative", ro->speculative,
                  "auto: draft tokens from text already seen and verify them in one step (same output); off: never")
      ->check(CLI::IsMember({"auto", "off"}))
      ->capture_default_str();
  run->callback([ro, exit_code] { *exit_code = RunGenerate(*ro); });
}

}  // namespace llamay::cli
