#include "model_commands.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <unistd.h>

#include "base/file.h"
#include "ctx_commands.h"
#include "llamay/llamay.h"
#include "format.h"
#include "generation.h"
#include "model/demo_model.h"
#include "model_source.h"
#include "synth_command.h"

namespace llamay::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct RunOptions {
  std::string model;
  std::string prompt;
  int n_predict = 128;
  uint32_t page_tokens = 64;
  std::string kv_precision = "f16";
  size_t batch = kPrefillChunk;
  bool no_bos = false;
  int threads = 0;
  sampling::SamplingParams sampling;
  int64_t seed = -1;  // -1: random
  std::vector<std::string> stop;
  std::string json_schema, grammar;  // files
  size_t ctx_size = 0;               // 0: the model's trained context
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
  if (Status s = o.sampling.Validate(); !s.ok()) return Fail(s, kExitBadInput);
  if (o.model.empty()) PrintDemoModelNote();
  Options opts;
  opts.model_path = o.model;
  opts.threads = o.threads;
  opts.page_tokens = o.page_tokens;
  opts.kv_precision = o.kv_precision;
  opts.kv_memory_bytes = size_t{64} << 30;  // one session: bounded by what it needs
  opts.max_context = o.ctx_size;
  opts.prefill_chunk = o.batch;
  auto engine = Engine::Open(opts);
  if (!engine.ok()) return Fail(engine.status(), kExitBadInput);
  std::unique_ptr<Session> session = (*engine)->NewSession();
  if (Status s = Constrain(o, *session); !s.ok()) return Fail(s, kExitBadInput);
  GenerateOptions g;
  const sampling::SamplingParams& sp = o.sampling;
  g.sampling = {sp.temperature, sp.top_k, sp.top_p, sp.min_p, sp.repeat_penalty, sp.repeat_last_n,
                sp.frequency_penalty, sp.presence_penalty, o.seed};
  g.max_tokens = o.n_predict;
  g.stop = o.stop;
  const bool tty = ::isatty(STDERR_FILENO);
  bool bar = false;
  Clock::time_point first_text{};
  g.on_prefill_progress = [&](size_t done, size_t total) {
    if (tty && total > o.batch) {
      bar = true;
      DrawProgress(done, total);
    }
    return !InterruptRequested();
  };
  InstallInterruptHandler();
  std::printf("%s", o.prompt.c_str());
  std::fflush(stdout);
  const auto t0 = Clock::now();
  size_t pieces = 0;
  auto out = session->Generate(o.prompt, g, [&](std::string_view text) {
    if (pieces++ == 0) {
      first_text = Clock::now();
      if (bar) std::fprintf(stderr, "\n");
    }
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return !InterruptRequested();
  });
  std::printf("\n");
  if (!out.ok()) return Fail(out.status(), out.status().code() == StatusCode::kInvalidArgument ? kExitBadInput : kExitFailure);
  if (out->finish_reason == "cancelled") return Fail(Interrupted(), ExitCodeFor(Interrupted(), kExitFailure));
  if (pieces == 0) first_text = Clock::now();
  const double prefill_s = std::chrono::duration<double>(first_text - t0).count();
  const double decode_s = SecondsSince(first_text);
  const size_t computed = out->prompt_tokens - out->cached_tokens;
  std::fprintf(stderr, "\nprompt: %zu tokens in %s (%.1f tokens/s); generation: %zu tokens in %s (%.1f tokens/s)\n",
               computed, FormatDuration(prefill_s).c_str(), static_cast<double>(computed) / std::max(prefill_s, 1e-9),
               out->tokens.size(), FormatDuration(decode_s).c_str(),
               static_cast<double>(out->tokens.size()) / std::max(decode_s, 1e-9));
  return kExitOk;
}

int RunTokenize(const std::string& model_path, const std::string& text, bool no_bos) {
  auto tok = LoadTokenizerOrDemo(model_path);  // vocabulary-only files work too
  if (!tok.ok()) return Fail(tok.status(), kExitBadInput);
  auto ids = (*tok)->Encode(text, !no_bos, false);
  if (!ids.ok()) return Fail(ids.status(), kExitBadInput);
  std::printf("%s\n", nlohmann::json(*ids).dump().c_str());
  return kExitOk;
}

}  // namespace

void AddModelCommands(CLI::App& app, int* exit_code) {
  CLI::App* model_cmd = app.add_subcommand("model", "Model files");
  model_cmd->require_subcommand(1);
  auto demo_out = std::make_shared<std::string>();
  CLI::App* demo = model_cmd->add_subcommand("demo", "Write the built-in demo model (synthetic weights) as GGUF");
  demo->add_option("-o,--output", *demo_out, "Destination file")->required();
  demo->callback([demo_out, exit_code] {
    Status s = model::WriteDemoModel(*demo_out);
    *exit_code = s.ok() ? kExitOk : Fail(s, kExitFailure);
    if (s.ok()) std::printf("wrote %s (%s)\n", demo_out->c_str(), model::kDemoModelName);
  });
  AddSynthCommand(*model_cmd, exit_code);

  struct TokenizeArgs {
    std::string model, text;
    bool no_bos = false;
  };
  auto ta = std::make_shared<TokenizeArgs>();
  CLI::App* tokenize = app.add_subcommand("tokenize", "Print the token ids of a text as a JSON list");
  tokenize->add_option("-m,--model", ta->model, "GGUF model or vocabulary file (default: the demo model)");
  tokenize->add_option("-p,--prompt", ta->text, "Text")->required();
  tokenize->add_flag("--no-bos", ta->no_bos, "Do not add the BOS token");
  tokenize->callback([ta, exit_code] { *exit_code = RunTokenize(ta->model, ta->text, ta->no_bos); });

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
  run->add_option("--seed", ro->seed, "Random seed (-1: random)")->capture_default_str();
  run->add_option("-c,--ctx-size", ro->ctx_size, "Positions the context may hold (0: the model's trained context)")
      ->capture_default_str();
  run->add_option("--stop", ro->stop, "Stop where the text contains this (repeatable)");
  run->add_option("--json-schema", ro->json_schema, "Constrain the output to this JSON Schema (a file)");
  run->add_option("--grammar", ro->grammar, "Constrain the output to this GBNF grammar (a file)");
  run->callback([ro, exit_code] { *exit_code = RunGenerate(*ro); });
}

}  // namespace llamay::cli
