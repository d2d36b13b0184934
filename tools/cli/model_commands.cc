#include "model_commands.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include <unistd.h>

#include <future>
#include <vector>

#include "base/file.h"
#include "ctx_commands.h"
#include "engine/engine.h"
#include "engine/grammar_constraint.h"
#include "grammar/json_schema.h"
#include "format.h"
#include "generation.h"
#include "kv/cache.h"
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
};

// --json-schema FILE or --grammar FILE as a constraint over the engine's vocabulary; none without either.
Result<std::unique_ptr<engine::LogitsProcessor>> ConstraintFor(const RunOptions& o, engine::Engine& e) {
  if (o.json_schema.empty() && o.grammar.empty()) return std::unique_ptr<engine::LogitsProcessor>();
  if (!o.json_schema.empty() && !o.grammar.empty())
    return InvalidArgumentError("use --json-schema or --grammar, not both");
  const std::string& path = o.json_schema.empty() ? o.grammar : o.json_schema;
  LLAMAY_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadFile(path));
  const std::string text(bytes.begin(), bytes.end());
  auto g = o.json_schema.empty() ? grammar::ParseGbnf(text) : grammar::FromJsonSchemaText(text);
  if (!g.ok()) return g.status().WithContext(path);
  LLAMAY_ASSIGN_OR_RETURN(auto vocab, e.GrammarVocabulary());
  return std::unique_ptr<engine::LogitsProcessor>(std::make_unique<engine::GrammarConstraint>(*g, vocab));
}

// Generation through the engine, the one decode loop the server uses too: the prompt, then the text as
// it comes; a progress bar for a long prefill; Ctrl-C stops it (exit 130).
int RunGenerate(const RunOptions& o) {
  if (o.batch == 0) return Fail(InvalidArgumentError("--batch must be positive"), kExitBadInput);
  sampling::SamplingParams sp = o.sampling;
  if (o.seed >= 0) {
    sp.seed = static_cast<uint64_t>(o.seed);
    sp.has_seed = true;
  }
  if (Status s = sp.Validate(); !s.ok()) return Fail(s, kExitBadInput);
  auto m = LoadModelOrDemo(o.model, o.threads);
  if (!m.ok()) return Fail(m.status(), kExitBadInput);
  auto precision = kv::ParseKvPrecision(o.kv_precision);
  if (!precision.ok()) return Fail(precision.status(), kExitBadInput);
  auto ids = m->tokenizer->Encode(o.prompt, !o.no_bos, false);
  if (!ids.ok()) return Fail(ids.status(), kExitBadInput);
  if (ids->empty()) return Fail(InvalidArgumentError("the prompt encodes to no tokens"), kExitBadInput);
  engine::EngineOptions eo;
  eo.page_tokens = o.page_tokens;
  eo.kv_precision = *precision;
  eo.prefill_chunk = eo.max_batch_tokens = o.batch;
  eo.kv_memory_bytes = size_t{64} << 30;  // one request: bounded by what it needs, not by a server's budget
  eo.max_active = 1;
  auto e = engine::Engine::Create(std::move(m->model), std::move(m->tokenizer), eo);
  if (!e.ok()) return Fail(e.status(), kExitBadInput);
  engine::Engine& engine = **e;

  engine::Request r;
  r.prompt = *ids;
  r.sampling = sp;
  r.max_tokens = o.n_predict;
  r.retain = false;
  r.stop = o.stop;
  r.report_progress = ids->size() > o.batch && ::isatty(STDERR_FILENO);
  auto constraint = ConstraintFor(o, engine);
  if (!constraint.ok()) return Fail(constraint.status(), kExitBadInput);
  if (*constraint) r.processors.push_back(std::move(*constraint));

  InstallInterruptHandler();
  struct Progress {
    Clock::time_point start = Clock::now(), first_token;
    bool bar = false, decoding = false;
    size_t generated = 0;
    engine::Usage usage;
  };
  auto p = std::make_shared<Progress>();
  const size_t prompt_tokens = ids->size();
  std::printf("%s", o.prompt.c_str());
  std::fflush(stdout);
  // The sink runs on the engine's thread; this thread only waits.
  engine::Sink sink = [p, prompt_tokens](engine::Event& ev) {
    if (ev.prefilled > 0 && !ev.finished && ev.token < 0) {
      p->bar = true;
      DrawProgress(ev.prefilled, prompt_tokens - ev.usage.cached_tokens);
      return true;
    }
    if (!p->decoding && (ev.token >= 0 || ev.finished)) {
      p->decoding = true;
      p->first_token = Clock::now();
      if (p->bar) std::fprintf(stderr, "\n");
    }
    if (ev.token >= 0) ++p->generated;
    std::printf("%s", ev.text.c_str());
    std::fflush(stdout);
    if (ev.finished) p->usage = ev.usage;
    return true;
  };
  auto done = std::make_shared<std::promise<engine::Event>>();
  auto id = engine.Submit(std::move(r), [sink, done](engine::Event& ev) {
    sink(ev);
    if (ev.finished) done->set_value(std::move(ev));
    return true;
  });
  if (!id.ok()) return Fail(id.status(), kExitFailure);
  std::future<engine::Event> f = done->get_future();
  while (f.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready)
    if (InterruptRequested()) engine.Cancel(*id);
  const engine::Event end = f.get();
  std::printf("\n");
  if (end.reason == engine::FinishReason::kError) return Fail(end.error, kExitFailure);
  if (end.reason == engine::FinishReason::kCancelled) return Fail(Interrupted(), ExitCodeFor(Interrupted(), kExitFailure));
  const double prefill_s = std::chrono::duration<double>(p->first_token - p->start).count();
  const double decode_s = SecondsSince(p->first_token);
  const size_t computed = p->usage.prompt_tokens - p->usage.cached_tokens;
  std::fprintf(stderr, "\nprompt: %zu tokens in %s (%.1f tokens/s); generation: %zu tokens in %s (%.1f tokens/s)\n",
               computed, FormatDuration(prefill_s).c_str(), static_cast<double>(computed) / std::max(prefill_s, 1e-9),
               p->generated, FormatDuration(decode_s).c_str(),
               static_cast<double>(p->generated) / std::max(decode_s, 1e-9));
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
  run->add_option("--stop", ro->stop, "Stop where the text contains this (repeatable)");
  run->add_option("--json-schema", ro->json_schema, "Constrain the output to this JSON Schema (a file)");
  run->add_option("--grammar", ro->grammar, "Constrain the output to this GBNF grammar (a file)");
  run->callback([ro, exit_code] { *exit_code = RunGenerate(*ro); });
}

}  // namespace llamay::cli
