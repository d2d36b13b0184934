// Speculative decoding (issue 21; docs/benchmarks.md, "Speculative decoding"): decode tokens per second
// with drafts against plain decode, side by side in one run, each pair of runs checked to give identical
// tokens (any difference exits with status 1).
//
//   speculative_bench [--section ceiling,repeat,random,hybrid,qwen35] [--reps R] [--threads T] [--tokens N]
//
// Sections:
//   ceiling  the machinery's ceiling: drafts forced from the known continuation (an oracle, the plain run's
//            own output: every draft is taken) at draft lengths 4, 8 and 16, on the synthetic Q8_0
//            peer-shape model.
//   repeat   a repetitive workload on stories260K (a trained model that copies): a story it wrote, then its
//            opening again; drafts from the request's own text, adaptive length.
//   random   nothing repeats: random prompt tokens on the peer-shape model, drafts as they come (few), to
//            show the fallback keeps plain speed.
//   hybrid   the ceiling on the hybrid benchmark shape (granitehybrid: 4 attention and 12 Mamba-2 layers,
//            model::HybridShape), for the rollback of a recurrent state.
//   qwen35   the same on Qwen3.5's shape (4 gated attention and 12 gated delta net layers, model::Qwen35Shape).
// Decode rate: generated tokens after the first, over the time from the first token's event to the last.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <future>
#include <string>
#include <vector>

#include "bench/bench_table.h"
#include "engine/engine.h"
#include "model/synthetic_model.h"

namespace llamay::bench {
namespace {

using Clock = std::chrono::steady_clock;

template <typename T>
T Must(Result<T> r, const char* what) {
  if (!r.ok()) {
    std::fprintf(stderr, "speculative_bench: %s: %s\n", what, r.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(*r);
}

struct Run {
  std::vector<int32_t> tokens;
  double decode_tps = 0;
  size_t drafted = 0, accepted = 0;
};

Run Generate(engine::Engine& e, const std::vector<int32_t>& prompt, int n, bool speculative,
             const std::vector<int32_t>& oracle = {}, size_t draft_length = 0) {
  engine::Request r;
  r.prompt = prompt;
  r.sampling.temperature = 0;
  r.sampling.repeat_penalty = 1.0f;
  r.max_tokens = n;
  r.ignore_eos = true;
  r.retain = false;  // every run computes its prompt's suffix the same way
  r.speculative = speculative;
  r.draft_oracle = oracle;
  r.draft_length = draft_length;
  Run out;
  Clock::time_point first, last;
  std::promise<void> done;
  auto id = e.Submit(std::move(r), [&](engine::Event& ev) {
    if (ev.token >= 0) {
      last = Clock::now();
      if (out.tokens.empty()) first = last;
      out.tokens.push_back(ev.token);
    }
    if (ev.finished) {
      if (ev.reason == engine::FinishReason::kError) {
        std::fprintf(stderr, "speculative_bench: %s\n", ev.error.ToString().c_str());
        std::exit(1);
      }
      out.drafted = ev.usage.draft_tokens;
      out.accepted = ev.usage.accepted_draft_tokens;
      done.set_value();
    }
    return true;
  });
  if (!id.ok()) Must(Result<int>(id.status()), "submit");
  done.get_future().wait();
  const double s = std::chrono::duration<double>(last - first).count();
  out.decode_tps = out.tokens.size() > 1 ? static_cast<double>(out.tokens.size() - 1) / s : 0;
  return out;
}

void ExpectSame(const Run& plain, const Run& spec, const std::string& what) {
  if (plain.tokens == spec.tokens) return;
  std::fprintf(stderr, "speculative_bench: %s: speculative output differs from plain decode\n", what.c_str());
  std::exit(1);
}

std::unique_ptr<engine::Engine> NewEngine(const std::vector<uint8_t>& gguf_or_empty, const std::string& path,
                                          int threads) {
  std::unique_ptr<model::Model> m;
  if (!path.empty()) {
    m = Must(model::Model::Load(path, threads), "load the model");
  } else {
    auto f = Must(gguf::File::FromBuffer(std::vector<uint8_t>(gguf_or_empty)), "parse the synthetic model");
    m = Must(model::Model::FromFile(std::move(f), threads), "load the synthetic model");
  }
  auto tok = Must(tokenizer::Tokenizer::FromGguf(m->file()), "tokenizer");
  engine::EngineOptions eo;
  eo.kv_precision = kv::KvPrecision::kF16;
  return Must(engine::Engine::Create(std::move(m), std::move(tok), eo), "create the engine");
}

struct Options {
  std::vector<std::string> sections = {"ceiling", "repeat", "random", "hybrid", "qwen35"};
  int reps = 3;
  int threads = 2;
  int tokens = 128;
};

// Plain and speculative runs alternated, `reps` times each; medians, and the identity of every pair.
struct Pair {
  double plain = 0, spec = 0;
  size_t drafted = 0, accepted = 0;
};

Pair Measure(const Options& o, const std::function<Run()>& plain, const std::function<Run()>& spec,
             const std::string& what) {
  std::vector<double> a, b;
  Pair p;
  for (int i = 0; i < o.reps; ++i) {
    Run x = plain();
    Run y = spec();
    ExpectSame(x, y, what);
    a.push_back(x.decode_tps);
    b.push_back(y.decode_tps);
    p.drafted = y.drafted;
    p.accepted = y.accepted;
  }
  p.plain = Median(a);
  p.spec = Median(b);
  return p;
}

void CeilingRows(const Options& o, engine::Engine& e, const std::string& label, uint32_t vocab) {
  const std::vector<int32_t> prompt = RandomTokens(64, 7, vocab);
  (void)Generate(e, prompt, 16, false);  // warm up
  const Run reference = Generate(e, prompt, o.tokens, false);
  for (size_t len : {size_t{4}, size_t{8}, size_t{16}}) {
    Pair p = Measure(
        o, [&] { return Generate(e, prompt, o.tokens, false); },
        [&] { return Generate(e, prompt, o.tokens, true, reference.tokens, len); },
        label + " oracle " + std::to_string(len));
    Row({label, "oracle, draft " + std::to_string(len), Fmt("%.1f", p.plain), Fmt("%.1f", p.spec),
         Fmt("%.2fx", p.spec / p.plain), std::to_string(p.accepted) + "/" + std::to_string(p.drafted)});
  }
}

int Main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "speculative_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--section") {
      o.sections.clear();
      std::string v = next();
      for (size_t at = 0; at <= v.size();) {
        const size_t comma = std::min(v.find(',', at), v.size());
        o.sections.push_back(v.substr(at, comma - at));
        at = comma + 1;
      }
    } else if (a == "--reps") {
      o.reps = std::atoi(next().c_str());
    } else if (a == "--threads") {
      o.threads = std::atoi(next().c_str());
    } else if (a == "--tokens") {
      o.tokens = std::atoi(next().c_str());
    } else {
      std::fprintf(stderr, "usage: speculative_bench [--section ceiling,repeat,random,hybrid,qwen35] [--reps R] "
                           "[--threads T] [--tokens N]\n");
      return 2;
    }
  }
  auto wants = [&](const char* s) { return std::find(o.sections.begin(), o.sections.end(), s) != o.sections.end(); };
  std::printf("## speculative_bench: %d threads, greedy, %d generated tokens, median of %d alternated runs; "
              "decode tokens/s after the first token\n\n",
              o.threads, o.tokens, o.reps);
  Header({"model", "drafts", "plain tok/s", "speculative tok/s", "speed-up", "accepted/drafted"});
  if (wants("ceiling")) {
    const auto gguf = Must(model::BuildSyntheticModel(model::PeerShape(TensorType::kQ8_0)), "build the model");
    auto e = NewEngine(gguf, "", o.threads);
    CeilingRows(o, *e, "peer-shape Q8_0", 32000);
  }
  if (wants("hybrid")) {
    const auto gguf = Must(model::BuildSyntheticModel(model::HybridShape(TensorType::kQ8_0)), "build the hybrid model");
    auto e = NewEngine(gguf, "", o.threads);
    CeilingRows(o, *e, "hybrid-shape Q8_0", 32000);
  }
  if (wants("qwen35")) {
    const auto gguf = Must(model::BuildSyntheticModel(model::Qwen35Shape(TensorType::kQ8_0)), "build the qwen35 model");
    auto e = NewEngine(gguf, "", o.threads);
    CeilingRows(o, *e, "qwen35-shape Q8_0", 32000);
  }
  if (wants("repeat")) {
    const std::string path = std::string(LLAMAY_SHARED_DIR) + "/ref/models/stories260K.gguf";
    if (!std::filesystem::exists(path)) {
      std::fprintf(stderr, "speculative_bench: %s is absent; repeat skipped\n", path.c_str());
    } else {
      auto e = NewEngine({}, path, o.threads);
      const std::vector<int32_t> start = Must(e->tokenizer().Encode("Once upon a time", true, false), "tokenize");
      // The model writes a story; the prompt is that story, then its opening again.
      Run story = Generate(*e, start, 160, false);
      std::vector<int32_t> prompt = start;
      prompt.insert(prompt.end(), story.tokens.begin(), story.tokens.end());
      const std::vector<int32_t> again = Must(e->tokenizer().Encode("\nOnce upon a time", false, false), "tokenize");
      prompt.insert(prompt.end(), again.begin(), again.end());
      Pair p = Measure(
          o, [&] { return Generate(*e, prompt, o.tokens, false); }, [&] { return Generate(*e, prompt, o.tokens, true); },
          "stories260K repeat");
      Row({"stories260K", "lookup, adaptive", Fmt("%.1f", p.plain), Fmt("%.1f", p.spec), Fmt("%.2fx", p.spec / p.plain),
           std::to_string(p.accepted) + "/" + std::to_string(p.drafted)});
    }
  }
  if (wants("random")) {
    const auto gguf = Must(model::BuildSyntheticModel(model::PeerShape(TensorType::kQ8_0)), "build the model");
    auto e = NewEngine(gguf, "", o.threads);
    const std::vector<int32_t> prompt = RandomTokens(256, 11, 32000);
    (void)Generate(*e, prompt, 16, false);
    Pair p = Measure(
        o, [&] { return Generate(*e, prompt, o.tokens, false); }, [&] { return Generate(*e, prompt, o.tokens, true); },
        "random");
    Row({"peer-shape Q8_0", "random prompt, lookup", Fmt("%.1f", p.plain), Fmt("%.1f", p.spec),
         Fmt("%.2fx", p.spec / p.plain), std::to_string(p.accepted) + "/" + std::to_string(p.drafted)});
  }
  return 0;
}

}  // namespace
}  // namespace llamay::bench

int main(int argc, char** argv) { return llamay::bench::Main(argc, argv); }
