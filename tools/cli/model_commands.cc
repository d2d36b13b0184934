#include "model_commands.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "ctx_commands.h"
#include "format.h"
#include "kv/cache.h"
#include "model/demo_model.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace llamay::cli {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The model at `path`, or the built-in demo model when `path` is empty.
Result<std::unique_ptr<model::Model>> LoadModel(const std::string& path) {
  if (path.empty()) {
    LLAMAY_ASSIGN_OR_RETURN(gguf::File f, gguf::File::FromBuffer(model::BuildDemoModel()));
    return model::Model::FromFile(std::move(f));
  }
  return model::Model::Load(path);
}

struct RunOptions {
  std::string model;
  std::string prompt;
  int n_predict = 128;
  uint32_t page_tokens = 64;
  std::string kv_precision = "f16";
  size_t batch = 256;
  bool no_bos = false;
  sampling::SamplingParams sampling;
  int64_t seed = -1;  // -1: random
};

// Prefill in chunks of `batch` tokens with a progress line on a terminal.
Result<std::vector<float>> Prefill(const model::Model& m, kv::Context& ctx, const std::vector<int32_t>& tokens,
                                   size_t batch) {
  std::vector<float> last;
  const bool tty = ::isatty(STDERR_FILENO);
  for (size_t i = 0; i < tokens.size(); i += batch) {
    const size_t n = std::min(batch, tokens.size() - i);
    model::SeqInput in{&ctx, std::span(tokens.data() + i, n), false};
    last.clear();
    LLAMAY_RETURN_IF_ERROR(m.Forward(std::span(&in, 1), &last));
    if (tty && tokens.size() > batch)
      std::fprintf(stderr, "\rprefill %zu/%zu tokens", i + n, tokens.size());
  }
  if (tty && tokens.size() > batch) std::fprintf(stderr, "\n");
  return last;
}

int RunGenerate(RunOptions o) {
  if (o.seed >= 0) {
    o.sampling.seed = static_cast<uint64_t>(o.seed);
    o.sampling.has_seed = true;
  }
  auto sampler = sampling::Sampler::Create(o.sampling);
  if (!sampler.ok()) return Fail(sampler.status(), kExitBadInput);
  auto m = LoadModel(o.model);
  if (!m.ok()) return Fail(m.status(), kExitBadInput);
  if (o.model.empty())
    std::fprintf(stderr, "llamay: no -m given: using the built-in demo model (its text is meaningless)\n");
  auto tok = tokenizer::Tokenizer::FromGguf((*m)->file());
  if (!tok.ok()) return Fail(tok.status(), kExitBadInput);
  auto precision = kv::ParseKvPrecision(o.kv_precision);
  if (!precision.ok()) return Fail(precision.status(), kExitBadInput);
  kv::CacheOptions co;
  co.layout = (*m)->KvLayoutFor(o.page_tokens, *precision);
  auto cache = kv::Cache::Create(co);
  if (!cache.ok()) return Fail(cache.status(), kExitBadInput);
  auto ids = (*tok)->Encode(o.prompt, !o.no_bos, false);
  if (!ids.ok()) return Fail(ids.status(), kExitBadInput);
  if (ids->empty()) return Fail(InvalidArgumentError("the prompt encodes to no tokens"), kExitBadInput);
  kv::Context ctx = (*cache)->NewContext();
  const auto t0 = Clock::now();
  auto logits = Prefill(**m, ctx, *ids, o.batch);
  if (!logits.ok()) return Fail(logits.status(), kExitFailure);
  const double prefill_s = Since(t0);
  std::printf("%s", o.prompt.c_str());
  std::fflush(stdout);
  tokenizer::StreamingDetokenizer detok(**tok);
  const auto t1 = Clock::now();
  int generated = 0;
  std::vector<float> last = std::move(*logits);
  std::vector<int32_t> history = *ids;
  for (; generated < o.n_predict; ++generated) {
    const int32_t next = sampler->Sample(last, history);
    history.push_back(next);
    if ((*tok)->IsEog(next)) break;
    std::printf("%s", detok.Push(next).c_str());
    std::fflush(stdout);
    last.clear();
    model::SeqInput in{&ctx, std::span(&next, 1), false};
    if (Status s = (*m)->Forward(std::span(&in, 1), &last); !s.ok()) return Fail(s, kExitFailure);
  }
  std::printf("%s\n", detok.Flush().c_str());
  const double gen_s = Since(t1);
  std::fprintf(stderr, "\nprompt: %zu tokens in %s (%.1f tokens/s); generation: %d tokens in %s (%.1f tokens/s)\n",
               ids->size(), FormatDuration(prefill_s).c_str(), static_cast<double>(ids->size()) / prefill_s, generated,
               FormatDuration(gen_s).c_str(), generated / std::max(gen_s, 1e-9));
  return kExitOk;
}

int RunTokenize(const std::string& model_path, const std::string& text, bool no_bos) {
  Result<std::unique_ptr<tokenizer::Tokenizer>> tok = InternalError("unset");
  if (model_path.empty()) {
    auto f = gguf::File::FromBuffer(model::BuildDemoModel());
    if (!f.ok()) return Fail(f.status(), kExitFailure);
    tok = tokenizer::Tokenizer::FromGguf(*f);
  } else {
    auto f = gguf::File::Open(model_path);  // vocabulary-only files work too
    if (!f.ok()) return Fail(f.status(), kExitBadInput);
    tok = tokenizer::Tokenizer::FromGguf(*f);
  }
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
