#include "model_commands.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "ctx_commands.h"
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
};

int RunGenerate(const RunOptions& o) {
  auto sampler = MakeSampler(o.sampling, o.seed);
  if (!sampler.ok()) return Fail(sampler.status(), kExitBadInput);
  if (o.batch == 0) return Fail(InvalidArgumentError("--batch must be positive"), kExitBadInput);
  auto m = LoadModelOrDemo(o.model, o.threads);
  if (!m.ok()) return Fail(m.status(), kExitBadInput);
  auto precision = kv::ParseKvPrecision(o.kv_precision);
  if (!precision.ok()) return Fail(precision.status(), kExitBadInput);
  kv::CacheOptions co;
  co.layout = m->model->KvLayoutFor(o.page_tokens, *precision);
  auto cache = kv::Cache::Create(co);
  if (!cache.ok()) return Fail(cache.status(), kExitBadInput);
  auto ids = m->tokenizer->Encode(o.prompt, !o.no_bos, false);
  if (!ids.ok()) return Fail(ids.status(), kExitBadInput);
  if (ids->empty()) return Fail(InvalidArgumentError("the prompt encodes to no tokens"), kExitBadInput);
  kv::Context ctx = (*cache)->NewContext();
  InstallInterruptHandler();
  const auto t0 = Clock::now();
  auto logits = Prefill(*m->model, ctx, *ids, o.batch);
  if (!logits.ok()) return Fail(logits.status(), ExitCodeFor(logits.status(), kExitFailure));
  const double prefill_s = SecondsSince(t0);
  std::printf("%s", o.prompt.c_str());
  std::fflush(stdout);
  auto gen = Decode(*m->model, *m->tokenizer, *sampler, ctx, std::move(*logits), *ids, o.n_predict,
                    [](const std::string& text) {
                      std::printf("%s", text.c_str());
                      std::fflush(stdout);
                    });
  if (!gen.ok()) return Fail(gen.status(), ExitCodeFor(gen.status(), kExitFailure));
  std::printf("\n");
  std::fprintf(stderr, "\nprompt: %zu tokens in %s (%.1f tokens/s); generation: %d tokens in %s (%.1f tokens/s)\n",
               ids->size(), FormatDuration(prefill_s).c_str(), static_cast<double>(ids->size()) / prefill_s,
               gen->generated, FormatDuration(gen->seconds).c_str(), gen->generated / std::max(gen->seconds, 1e-9));
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
  run->callback([ro, exit_code] { *exit_code = RunGenerate(*ro); });
}

}  // namespace llamay::cli
