// engine_bench --hybrid: see hybrid_bench.h.
#include "bench/hybrid_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>

#include "bench/bench_table.h"
#include "engine/engine.h"
#include "gguf/gguf.h"
#include "kv/cache.h"
#include "model/model.h"
#include "model/synthetic_model.h"
#include "tokenizer/tokenizer.h"

namespace llamay::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }
double MiB(double bytes) { return bytes / (1 << 20); }

int g_failures = 0;

void Check(bool ok, const std::string& what) {
  if (ok) return;
  ++g_failures;
  std::fprintf(stderr, "CHECK FAILED: %s\n", what.c_str());
}

[[noreturn]] void Die(const Status& s, const std::string& what) {
  std::fprintf(stderr, "engine_bench --hybrid: %s: %s\n", what.c_str(), s.ToString().c_str());
  std::exit(1);
}

template <typename T>
T Must(Result<T> r, const std::string& what) {
  if (!r.ok()) Die(r.status(), what);
  return std::move(*r);
}

// The synthetic hybrid model, built once; each engine parses its own copy of the bytes.
struct Source {
  std::vector<uint8_t> gguf;
  int threads = 2;

  std::unique_ptr<engine::Engine> NewEngine() const {
    auto f = Must(gguf::File::FromBuffer(std::vector<uint8_t>(gguf)), "parse the synthetic model");
    auto m = Must(model::Model::FromFile(std::move(f), threads), "load the synthetic model");
    auto tok = Must(tokenizer::Tokenizer::FromGguf(m->file()), "tokenizer of the synthetic model");
    engine::EngineOptions eo;
    eo.kv_precision = kv::KvPrecision::kF16;
    eo.kv_memory_bytes = size_t{4} << 30;  // nothing is evicted: part 2 reports what the tree holds
    return Must(engine::Engine::Create(std::move(m), std::move(tok), eo), "create the engine");
  }
};

struct Outcome {
  std::vector<int32_t> tokens;
  engine::Usage usage;
  double ttft_ms = NAN;
  kv::Context context;  // max_tokens == 0
};

// Submits and waits; TTFT = Submit to the first token event.
Outcome Run(engine::Engine& e, engine::Request r) {
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    Outcome out;
    Status error;
    Clock::time_point t0;
  };
  auto st = std::make_shared<State>();
  st->t0 = Clock::now();
  auto id = e.Submit(std::move(r), [st](engine::Event& ev) {
    const auto now = Clock::now();
    std::lock_guard l(st->mu);
    if (ev.token >= 0) {
      if (st->out.tokens.empty()) st->out.ttft_ms = Ms(now - st->t0);
      st->out.tokens.push_back(ev.token);
    }
    if (ev.finished) {
      st->out.usage = ev.usage;
      st->out.context = std::move(ev.context);
      st->error = ev.error;
      st->done = true;
      st->cv.notify_all();
    }
    return true;
  });
  if (!id.ok()) Die(id.status(), "submit");
  std::unique_lock l(st->mu);
  st->cv.wait(l, [&] { return st->done; });
  if (!st->error.ok()) Die(st->error, "request");
  return std::move(st->out);
}

engine::Request Greedy(const std::vector<int32_t>& prompt, int gen, bool retain) {
  engine::Request r;
  r.prompt = prompt;
  r.max_tokens = gen;
  r.sampling.temperature = 0;
  r.retain = retain;
  r.ignore_eos = true;
  return r;
}

// ---------------------------------------------------------------------------------------------------------
// 1 and 2. The agent trace, then what the tree holds

struct TurnRow {
  size_t turn = 0, prompt = 0, cached = 0;
  double reuse_ms = NAN, recompute_ms = NAN;  // medians; recompute only at measured turns
};

// Returns the prompt of the first measured turn at or past `fork_at` tokens (for part 3).
std::vector<int32_t> TraceSection(const HybridOptions& o, const Source& src, engine::Engine& reuse,
                                  size_t fork_at) {
  std::printf("\n### Agent trace: checkpoint reuse against recompute\n\n");
  auto recompute = src.NewEngine();
  const uint32_t vocab = reuse.model().hparams().n_vocab;
  for (auto* e : {&reuse, recompute.get()})  // first-use costs (scratch, page faults) out of the timings
    (void)Run(*e, Greedy(RandomTokens(300, 1, vocab), 2, false));
  std::vector<size_t> targets = o.history;
  std::sort(targets.begin(), targets.end());
  std::printf("One conversation: a %zu-token system prompt, then each turn appends a %zu-token tool result and "
              "the turn's %d greedy tokens (ignore_eos). Reuse: the engine's prefix tree (every turn retained; "
              "the next turn resumes at the previous turn's output-end checkpoint, prompt + %d - 1 tokens). "
              "Recompute: a second engine, every request retain=false, so its tree stays empty and the whole "
              "prompt is prefilled. At the first turn reaching each history length both modes run the same "
              "prompt %d times (reuse: %d times retain=false, then the turn itself retained; each resumes "
              "from the same checkpoint); TTFT = Submit to the first token, medians. Other turns run once "
              "(reuse only).\n\n",
              o.system_tokens, o.turn_tokens, o.gen, o.gen, o.reps, o.reps - 1);
  std::vector<int32_t> prompt = RandomTokens(o.system_tokens, 42, vocab);
  std::vector<int32_t> fork_prompt;
  std::vector<TurnRow> rows;
  size_t prev_prompt = 0, ti = 0;
  for (size_t turn = 0; ti < targets.size(); ++turn) {
    const auto tool = RandomTokens(o.turn_tokens, 7000 + static_cast<uint32_t>(turn), vocab);
    prompt.insert(prompt.end(), tool.begin(), tool.end());
    const bool measured = prompt.size() >= targets[ti];
    const size_t expected = turn == 0 ? 0 : prev_prompt + static_cast<size_t>(o.gen) - 1;
    TurnRow row;
    row.turn = turn;
    row.prompt = prompt.size();
    std::vector<double> reuse_ms;
    std::vector<int32_t> generated;
    for (int rep = 0; rep < (measured ? o.reps : 1); ++rep) {
      const bool last = rep == (measured ? o.reps : 1) - 1;
      Outcome out = Run(reuse, Greedy(prompt, o.gen, /*retain=*/last));
      Check(out.usage.cached_tokens == expected, "turn " + std::to_string(turn) + " cached " +
                                                     std::to_string(out.usage.cached_tokens) + ", expected " +
                                                     std::to_string(expected));
      Check(out.tokens.size() == static_cast<size_t>(o.gen), "a turn generated " + std::to_string(out.tokens.size()));
      if (rep > 0) Check(out.tokens == generated, "reuse: repeated runs of a turn generated different tokens");
      generated = out.tokens;
      row.cached = out.usage.cached_tokens;
      reuse_ms.push_back(out.ttft_ms);
    }
    row.reuse_ms = Median(reuse_ms);
    if (measured) {
      std::vector<double> ms;
      for (int rep = 0; rep < o.reps; ++rep) {
        Outcome out = Run(*recompute, Greedy(prompt, o.gen, false));
        Check(out.usage.cached_tokens == 0, "recompute cached " + std::to_string(out.usage.cached_tokens));
        Check(out.tokens == generated, "turn " + std::to_string(turn) +
                                           ": recompute generated other tokens than checkpoint reuse");
        ms.push_back(out.ttft_ms);
      }
      row.recompute_ms = Median(ms);
      if (fork_prompt.empty() && prompt.size() >= fork_at) fork_prompt = prompt;
      ++ti;
      while (ti < targets.size() && prompt.size() >= targets[ti]) ++ti;  // one turn may reach several
    }
    std::fprintf(stderr, "  turn %zu: %zu prompt tokens, %zu cached, TTFT reuse %.0f ms, recompute %s ms\n", turn,
                 row.prompt, row.cached, row.reuse_ms, Fmt("%.0f", row.recompute_ms).c_str());
    rows.push_back(row);
    prev_prompt = prompt.size();
    prompt.insert(prompt.end(), generated.begin(), generated.end());
  }
  Header({"turn", "prompt tokens", "cached (reuse)", "prefilled (reuse)", "TTFT reuse ms", "TTFT recompute ms",
          "recompute / reuse", "prompt / prefilled", "reuse ms per prefilled token", "recompute ms per token"});
  for (const auto& r : rows) {
    if (std::isnan(r.recompute_ms)) continue;
    const double prefilled = static_cast<double>(r.prompt - r.cached);
    Row({std::to_string(r.turn), std::to_string(r.prompt), std::to_string(r.cached),
         Fmt("%.0f", prefilled), Fmt("%.0f", r.reuse_ms), Fmt("%.0f", r.recompute_ms),
         Fmt("%.1fx", r.recompute_ms / r.reuse_ms), Fmt("%.1fx", static_cast<double>(r.prompt) / prefilled),
         Fmt("%.2f", r.reuse_ms / prefilled), Fmt("%.2f", r.recompute_ms / static_cast<double>(r.prompt))});
  }
  std::printf("\nTTFT with reuse, every turn (ms; one run each, medians at the measured turns): ");
  for (const auto& r : rows) std::printf("%s%zu:%.0f", r.turn ? ", " : "", r.prompt, r.reuse_ms);
  std::printf(" (prompt tokens:TTFT).\nGreedy tokens identical with reuse and recompute at every measured turn, "
              "cached_tokens as expected at every turn: %s.\n",
              g_failures == 0 ? "yes" : "NO (see the failed checks)");
  return fork_prompt.empty() ? prompt : fork_prompt;
}

void HeldSection(engine::Engine& e) {
  std::printf("\n### What the prefix tree holds after the trace\n\n");
  const kv::CacheStats s = e.cache().Stats();
  const size_t slot = e.cache().layout().recurrent_bytes();
  const size_t state_bytes = s.states_live * slot;
  Header({"tree entries", "tree checkpoints", "states live (slots + checkpoints)", "one state MiB",
          "state MiB", "KV pages", "KV MiB", "bytes_live MiB", "tree_bytes MiB", "evictions"});
  Row({std::to_string(s.tree_entries), std::to_string(s.tree_checkpoints), std::to_string(s.states_live),
       Fmt("%.2f", MiB(static_cast<double>(slot))), Fmt("%.1f", MiB(static_cast<double>(state_bytes))),
       std::to_string(s.pages_live), Fmt("%.1f", MiB(static_cast<double>(s.bytes_live - state_bytes))),
       Fmt("%.1f", MiB(static_cast<double>(s.bytes_live))), Fmt("%.1f", MiB(static_cast<double>(s.tree_bytes))),
       std::to_string(s.tree_evictions)});
  Check(s.tree_evictions == 0, "the trace evicted from the tree (budget too small for part 2)");
}

// ---------------------------------------------------------------------------------------------------------
// 3. Fork of a hybrid context: shared slot (copy on first write) against a copy per branch at fork time

// One decode step on `ctx`; returns its time and appends the logits.
double Decode(const model::Model& m, kv::Context& ctx, int32_t token, std::vector<float>* logits) {
  model::SeqInput in{&ctx, std::span(&token, 1), false};
  const auto t0 = Clock::now();
  const Status st = m.Forward(std::span(&in, 1), logits);
  const double ms = Ms(Clock::now() - t0);
  if (!st.ok()) Die(st, "decode step");
  return ms;
}

void ForkSection(const HybridOptions& o, engine::Engine& e, const std::vector<int32_t>& prompt) {
  std::printf("\n### Fork of a hybrid context\n\n");
  // The context: the trace's prompt through the engine (resumes from the tree), handed back unretained.
  engine::Request r = Greedy(prompt, 0, false);
  Outcome out = Run(e, std::move(r));
  kv::Context parent = std::move(out.context);
  Check(parent.valid() && parent.size() == prompt.size() && parent.state_position() == prompt.size(),
        "the fork section's context is not the whole prompt");
  const model::Model& m = e.model();
  kv::Cache& cache = e.cache();
  const size_t slot = cache.layout().recurrent_bytes();
  std::printf("A %zu-token context (%.1f MiB of KV pages, one %.2f MiB recurrent slot) forked N ways. Lazy: "
              "Context::Fork(N), every page and the slot shared; a branch copies the slot on its first write. "
              "Eager: Fork(N), then MutableState() on every branch (the copy at fork time). Fork times are "
              "medians of %d; decode steps (one token, each branch in turn, %d threads) medians over the "
              "branches, in the last repetition (state pages recycled by the pool, not first touched); bytes from kv::CacheStats::bytes_live.\n\n",
              parent.size(), MiB(static_cast<double>(parent.n_pages() * cache.Stats().page_bytes)),
              MiB(static_cast<double>(slot)), o.fork_reps, m.n_threads());
  Header({"N", "lazy fork ms", "lazy MiB added", "eager fork+copy ms", "eager MiB added", "copy ms per branch",
          "1st decode lazy ms", "2nd decode lazy ms", "1st decode eager ms", "lazy total ms", "eager total ms"});
  const int32_t next = 5, after = 6;
  std::vector<float> reference;  // the parent's continuation
  {
    kv::Context c = parent.Fork();
    (void)Decode(m, c, next, &reference);
  }
  for (int n : o.branches) {
    std::vector<double> lazy_ms, eager_ms;
    double lazy_bytes = 0, eager_bytes = 0;
    std::vector<double> first_lazy, second_lazy, first_eager;
    for (int rep = 0; rep < o.fork_reps; ++rep) {
      const size_t b0 = cache.Stats().bytes_live;
      auto t0 = Clock::now();
      std::vector<kv::Context> lazy = parent.Fork(static_cast<size_t>(n));
      lazy_ms.push_back(Ms(Clock::now() - t0));
      lazy_bytes = static_cast<double>(cache.Stats().bytes_live - b0);
      Check(lazy_bytes == 0, "a lazy fork allocated " + Fmt("%.0f", lazy_bytes) + " bytes");
      if (rep == o.fork_reps - 1) {  // the pool recycles pages by then: no first-touch faults
        for (auto& c : lazy) {
          std::vector<float> logits;
          first_lazy.push_back(Decode(m, c, next, &logits));
          Check(logits == reference, "a lazy branch's logits differ from the parent's continuation");
        }
        for (auto& c : lazy) {
          std::vector<float> logits;
          second_lazy.push_back(Decode(m, c, after, &logits));
        }
      }
      for (auto& c : lazy) c.Close();
      const size_t b1 = cache.Stats().bytes_live;
      t0 = Clock::now();
      std::vector<kv::Context> eager = parent.Fork(static_cast<size_t>(n));
      for (auto& c : eager) (void)Must(c.MutableState(), "MutableState");
      eager_ms.push_back(Ms(Clock::now() - t0));
      eager_bytes = static_cast<double>(cache.Stats().bytes_live - b1);
      Check(eager_bytes == static_cast<double>(n) * static_cast<double>(slot),
            "an eager fork allocated " + Fmt("%.0f", eager_bytes) + " bytes, expected one slot per branch");
      if (rep == o.fork_reps - 1) {  // the pool recycles pages by then: no first-touch faults
        for (auto& c : eager) {
          std::vector<float> logits;
          first_eager.push_back(Decode(m, c, next, &logits));
          Check(logits == reference, "an eager branch's logits differ from the parent's continuation");
        }
      }
      for (auto& c : eager) c.Close();
    }
    const double copy = (Median(eager_ms) - Median(lazy_ms)) / n;
    Row({std::to_string(n), Fmt("%.3f", Median(lazy_ms)), Fmt("%.1f", MiB(lazy_bytes)), Fmt("%.2f", Median(eager_ms)),
         Fmt("%.1f", MiB(eager_bytes)), Fmt("%.2f", copy), Fmt("%.1f", Median(first_lazy)),
         Fmt("%.1f", Median(second_lazy)), Fmt("%.1f", Median(first_eager)),
         Fmt("%.1f", Median(lazy_ms) + n * Median(first_lazy)),
         Fmt("%.1f", Median(eager_ms) + n * Median(first_eager))});
  }
  std::printf("\n\"total\" = fork (+ copies) + one decode step on every branch: the same work either way when "
              "every branch decodes; lazy allocates nothing until a branch writes, so branches that never "
              "decode (closed, only read or snapshotted) cost nothing.\n");
  parent.Close();
}

}  // namespace

int RunHybridBench(const HybridOptions& o) {
  std::fprintf(stderr, "engine_bench --hybrid: building the synthetic Q8_0 hybrid model...\n");
  Source src;
  src.threads = o.threads;
  src.gguf = Must(model::BuildSyntheticModel(model::HybridShape(TensorType::kQ8_0)), "build the hybrid model");
  auto reuse = src.NewEngine();
  const model::HParams& hp = reuse->model().hparams();
  const kv::KvLayout& layout = reuse->cache().layout();
  uint64_t params = 0;
  for (const auto& t : reuse->model().file().tensors()) params += t.n_elements;
  std::printf("## engine_bench --hybrid: synthetic granitehybrid model (vocab %u, dim %u, %u layers: %u attention "
              "(%u/%u heads), %u Mamba-2 (d_inner %u, %u heads, d_state %u, %u group, d_conv %u), ffn %u; %.0fM "
              "parameters), Q8_0 weights, KV f16 in %u-token pages, checkpoints every %u tokens, recurrent state "
              "%.2f MiB per sequence, %d threads\n",
              hp.n_vocab, hp.n_embd, hp.n_layer, hp.n_attention_layers(), hp.n_head, hp.n_head_kv,
              hp.n_layer - hp.n_attention_layers(), hp.ssm.d_inner, hp.ssm.n_head, hp.ssm.d_state, hp.ssm.n_group,
              hp.ssm.d_conv, hp.n_ff, static_cast<double>(params) / 1e6,
              layout.page_tokens, layout.checkpoint_tokens, MiB(static_cast<double>(layout.recurrent_bytes())),
              o.threads);
  const std::vector<int32_t> fork_prompt = TraceSection(o, src, *reuse, o.fork_tokens);
  HeldSection(*reuse);
  ForkSection(o, *reuse, fork_prompt);
  return g_failures;
}

}  // namespace llamay::bench
