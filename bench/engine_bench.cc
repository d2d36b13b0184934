// Engine-level benchmarks: context restore against re-prefill, an agent trace through the prefix tree,
// best-of-N branches and concurrent HTTP clients, all on a synthetic model of the peer shape
// (../shared/ref/README.md) with Q8_0 weights and an f16 KV cache. Prints markdown tables; the command and
// the results are in docs/benchmarks.md ("Engine").
//
//   engine_bench [--section restore,trace,bestof,clients] [--quick] [--reps R] [--threads T] [...]
//   engine_bench --hybrid [--quick] [--threads T] [--hybrid-history 2048,4096,8192] [...]: the hybrid model's
//     checkpoint benchmarks instead (hybrid_bench.h; docs/benchmarks.md, "Hybrid checkpoints")
//
// Every section also checks invariants (restored logits bit-identical, cached-token counts, determinism
// across batch compositions); any failure makes the program exit with status 1. Token ids are random with
// fixed seeds (in [3, vocab), so no BOS/EOS/UNK in prompts): the tokenizer plays no part in the timings.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "base/file.h"
#include "bench/bench_table.h"
#include "bench/hybrid_bench.h"
#include "engine/engine.h"
#include "gguf/gguf.h"
#include "kv/cache.h"
#include "kv/snapshot.h"
#include "model/model.h"
#include "model/synthetic_model.h"
#include "server/server.h"
#include "tokenizer/tokenizer.h"

namespace llamay::bench {
namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// ---------------------------------------------------------------------------------------------------------
// Options

struct Options {
  std::vector<std::string> sections = {"restore", "trace", "bestof", "clients"};
  bool quick = false;
  int reps = 3;           // best-of and clients
  int prefill_reps = 1;   // cold prefills of the restore section (4096 tokens take most of a minute)
  int restore_reps = 15;  // restores are cheap: more repetitions
  int threads = 2;
  size_t chunk = 512;  // prefill tokens per forward call in the restore section
  std::vector<size_t> restore_sizes = {128, 512, 2048, 4096};
  // Agent trace.
  int agents = 4, turns = 10;
  size_t system_tokens = 2000, turn_tokens = 250;
  int trace_gen = 8;
  std::vector<std::string> trace_modes = {"on", "off"};
  int trace_reps = 1;  // runs of the trace with reuse on (40 requests each)
  // Reuse off replays the prompts of the reuse-on run (greedy: identical) for these turns only, one agent per
  // turn (agent = turn mod agents): without reuse a request's time depends on its prompt length alone, and
  // replaying all 40 whole prompts would take most of an hour on 2 cores. "all": every request.
  std::string trace_off_turns = "0,3,6,9";
  // Best-of-N.
  size_t bestof_prefix = 512;
  int bestof_n = 8, bestof_tokens = 128;
  // HTTP clients.
  int clients = 8, client_requests = 4;
  size_t client_prompt = 200;
  int client_tokens = 64;
  std::string dir;  // snapshot files; empty: a fresh temporary directory
  // --hybrid: the hybrid benchmarks (hybrid_bench.h) instead of the sections above.
  bool hybrid = false;
  HybridOptions hy;
};

[[noreturn]] void Usage(const char* msg, int exit_code = 2) {
  std::fprintf(exit_code == 0 ? stdout : stderr,
               "engine_bench: %s\n"
               "usage: engine_bench [--section restore,trace,bestof,clients|all] [--quick] [--reps R]\n"
               "  [--prefill-reps R] [--restore-reps R] [--threads T] [--chunk N] [--sizes 128,512,...]\n"
               "  [--agents A] [--turns T] [--system N] [--turn-tokens N] [--trace-gen N] [--trace-modes on,off]\n"
               "  [--trace-reps R] [--trace-off-turns 0,3,6,9|all]\n"
               "  [--bestof-prefix N] [--bestof-n N] [--bestof-tokens N] [--clients N] [--client-requests K]\n"
               "  [--client-prompt N] [--client-tokens N] [--dir DIR]\n"
               "   or: engine_bench --hybrid [--quick] [--threads T] [--hybrid-history 2048,4096,8192]\n"
               "  [--hybrid-reps R] [--hybrid-system N] [--hybrid-turn-tokens N] [--hybrid-gen N]\n"
               "  [--hybrid-fork-tokens N] [--hybrid-branches 1,4,16] [--hybrid-fork-reps R]\n",
               msg);
  std::exit(exit_code);
}

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= s.size()) {
    const size_t comma = s.find(',', at);
    const size_t end = comma == std::string::npos ? s.size() : comma;
    if (end > at) out.push_back(s.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

Options ParseOptions(int argc, char** argv) {
  Options o;
  // --quick first: explicit flags override its sizes wherever they appear.
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--quick") {
      o.quick = true;
      o.reps = 1;
      o.restore_reps = 5;
      o.restore_sizes = {128, 512};
      o.agents = 2;
      o.turns = 3;
      o.trace_off_turns = "all";
      o.system_tokens = 256;
      o.turn_tokens = 64;
      o.trace_gen = 4;
      o.bestof_prefix = 128;
      o.bestof_tokens = 16;
      o.clients = 4;
      o.client_requests = 2;
      o.client_prompt = 64;
      o.client_tokens = 16;
    }
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--hybrid") {
      o.hybrid = true;
      if (o.quick) {  // a smoke run: about a minute
        o.hy.history = {512, 1024};
        o.hy.reps = 2;
        o.hy.system_tokens = 200;
        o.hy.turn_tokens = 100;
        o.hy.fork_tokens = 512;
        o.hy.fork_reps = 2;
      }
    }
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick" || a == "--hybrid") continue;
    if (a == "--help" || a == "-h") {
      Usage("engine-level benchmarks (docs/benchmarks.md, \"Engine\")", 0);
    }
    if (i + 1 >= argc) Usage(("missing value after " + a).c_str());
    const std::string v = argv[++i];
    auto num = [&]() -> long {
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (end == v.c_str() || *end != '\0' || n < 0) Usage(("bad number for " + a + ": " + v).c_str());
      return n;
    };
    if (a == "--section") {
      o.sections = v == "all" ? Options().sections : SplitList(v);
      for (const auto& s : o.sections)
        if (s != "restore" && s != "trace" && s != "bestof" && s != "clients") Usage(("unknown section " + s).c_str());
    } else if (a == "--reps") {
      o.reps = static_cast<int>(std::max(1L, num()));
    } else if (a == "--prefill-reps") {
      o.prefill_reps = static_cast<int>(std::max(1L, num()));
    } else if (a == "--restore-reps") {
      o.restore_reps = static_cast<int>(std::max(1L, num()));
    } else if (a == "--threads") {
      o.threads = static_cast<int>(num());
    } else if (a == "--chunk") {
      o.chunk = static_cast<size_t>(std::max(1L, num()));
    } else if (a == "--sizes") {
      o.restore_sizes.clear();
      for (const auto& s : SplitList(v)) o.restore_sizes.push_back(std::stoul(s));
    } else if (a == "--agents") {
      o.agents = static_cast<int>(std::max(1L, num()));
    } else if (a == "--turns") {
      o.turns = static_cast<int>(std::max(1L, num()));
    } else if (a == "--system") {
      o.system_tokens = static_cast<size_t>(num());
    } else if (a == "--turn-tokens") {
      o.turn_tokens = static_cast<size_t>(std::max(1L, num()));
    } else if (a == "--trace-gen") {
      o.trace_gen = static_cast<int>(std::max(1L, num()));
    } else if (a == "--trace-modes") {
      o.trace_modes = SplitList(v);
      for (const auto& m : o.trace_modes)
        if (m != "on" && m != "off") Usage(("unknown trace mode " + m).c_str());
    } else if (a == "--trace-reps") {
      o.trace_reps = static_cast<int>(std::max(1L, num()));
    } else if (a == "--trace-off-turns") {
      o.trace_off_turns = v;
      if (v != "all")
        for (const auto& t : SplitList(v))
          if (t.empty() || t.find_first_not_of("0123456789") != std::string::npos) Usage(("bad turn " + t).c_str());
    } else if (a == "--bestof-prefix") {
      o.bestof_prefix = static_cast<size_t>(std::max(2L, num()));
    } else if (a == "--bestof-n") {
      o.bestof_n = static_cast<int>(std::max(1L, num()));
    } else if (a == "--bestof-tokens") {
      o.bestof_tokens = static_cast<int>(std::max(1L, num()));
    } else if (a == "--clients") {
      o.clients = static_cast<int>(std::max(1L, num()));
    } else if (a == "--client-requests") {
      o.client_requests = static_cast<int>(std::max(1L, num()));
    } else if (a == "--client-prompt") {
      o.client_prompt = static_cast<size_t>(std::max(1L, num()));
    } else if (a == "--client-tokens") {
      o.client_tokens = static_cast<int>(std::max(1L, num()));
    } else if (a == "--hybrid-history") {
      o.hy.history.clear();
      for (const auto& s : SplitList(v)) o.hy.history.push_back(std::stoul(s));
      if (o.hy.history.empty()) Usage("--hybrid-history needs a length");
    } else if (a == "--hybrid-reps") {
      o.hy.reps = static_cast<int>(std::max(1L, num()));
    } else if (a == "--hybrid-system") {
      o.hy.system_tokens = static_cast<size_t>(std::max(1L, num()));
    } else if (a == "--hybrid-turn-tokens") {
      o.hy.turn_tokens = static_cast<size_t>(std::max(1L, num()));
    } else if (a == "--hybrid-gen") {
      o.hy.gen = static_cast<int>(std::max(1L, num()));
    } else if (a == "--hybrid-fork-tokens") {
      o.hy.fork_tokens = static_cast<size_t>(std::max(1L, num()));
    } else if (a == "--hybrid-branches") {
      o.hy.branches.clear();
      for (const auto& s : SplitList(v)) o.hy.branches.push_back(std::max(1, std::stoi(s)));
    } else if (a == "--hybrid-fork-reps") {
      o.hy.fork_reps = static_cast<int>(std::max(1L, num()));
    } else if (a == "--dir") {
      o.dir = v;
    } else {
      Usage(("unknown flag " + a).c_str());
    }
  }
  return o;
}

// ---------------------------------------------------------------------------------------------------------
// Helpers

int g_failures = 0;

void Check(bool ok, const std::string& what) {
  if (ok) return;
  ++g_failures;
  std::fprintf(stderr, "CHECK FAILED: %s\n", what.c_str());
}

[[noreturn]] void Die(const Status& s, const std::string& what) {
  std::fprintf(stderr, "engine_bench: %s: %s\n", what.c_str(), s.ToString().c_str());
  std::exit(1);
}

template <typename T>
T Must(Result<T> r, const std::string& what) {
  if (!r.ok()) Die(r.status(), what);
  return std::move(*r);
}

void Must(const Status& s, const std::string& what) {
  if (!s.ok()) Die(s, what);
}

// Nearest-rank percentile, p in (0, 100].
double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

void WarmUp(engine::Engine& e);

// The synthetic peer-shape model: built once, each engine gets its own copy of the GGUF bytes.
struct ModelSource {
  std::vector<uint8_t> gguf;
  int threads = 2;

  std::unique_ptr<model::Model> NewModel() const {
    auto f = Must(gguf::File::FromBuffer(std::vector<uint8_t>(gguf)), "parse the synthetic model");
    return Must(model::Model::FromFile(std::move(f), threads), "load the synthetic model");
  }
  std::unique_ptr<engine::Engine> NewEngine(engine::EngineOptions eo = {}) const {
    auto m = NewModel();
    auto tok = Must(tokenizer::Tokenizer::FromGguf(m->file()), "tokenizer of the synthetic model");
    eo.kv_precision = kv::KvPrecision::kF16;
    auto e = Must(engine::Engine::Create(std::move(m), std::move(tok), eo), "create the engine");
    WarmUp(*e);
    return e;
  }
};

// One engine request followed to its end: tokens, usage and the times of submit, first token and finish.
struct Outcome {
  std::vector<int32_t> tokens;
  engine::Usage usage;
  engine::FinishReason reason = engine::FinishReason::kNone;
  Status error;
  Clock::time_point submit, first, end;
  bool have_first = false;
  double ttft_ms() const { return have_first ? Ms(first - submit) : NAN; }
};

class Pending {
 public:
  Pending(engine::Engine& e, engine::Request r) {
    auto st = state_;
    st->out.submit = Clock::now();
    auto id = e.Submit(std::move(r), [st](engine::Event& ev) {
      const auto now = Clock::now();
      std::lock_guard l(st->mu);
      if (ev.token >= 0) {
        if (!st->out.have_first) {
          st->out.first = now;
          st->out.have_first = true;
        }
        st->out.tokens.push_back(ev.token);
      }
      if (ev.finished) {
        st->out.end = now;
        st->out.usage = ev.usage;
        st->out.reason = ev.reason;
        st->out.error = ev.error;
        st->done = true;
        st->cv.notify_all();
      }
      return true;
    });
    if (!id.ok()) Die(id.status(), "submit");  // a full queue: no section here queues more than 8
  }
  Outcome Wait() {
    std::unique_lock l(state_->mu);
    state_->cv.wait(l, [&] { return state_->done; });
    return state_->out;
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    Outcome out;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

Outcome RunRequest(engine::Engine& e, engine::Request r) { return Pending(e, std::move(r)).Wait(); }

// One small request through a new engine so that first-use costs (scratch buffers, page faults) stay out of
// the measurements. retain=false: the prefix tree stays empty.
void WarmUp(engine::Engine& e) {
  engine::Request r;
  r.prompt = RandomTokens(32, 1, e.model().hparams().n_vocab);
  r.max_tokens = 2;
  r.sampling.temperature = 0;
  r.retain = false;
  const Outcome out = RunRequest(e, std::move(r));
  if (!out.error.ok()) Die(out.error, "warm-up request");
}

// The tokens a finished request's retained context holds: the prompt, then every emitted token that went
// through the model (all but the last when it stopped on length; all of them when it stopped on EOS).
std::vector<int32_t> RetainedTokens(const std::vector<int32_t>& prompt, const Outcome& o) {
  std::vector<int32_t> t = prompt;
  size_t n = o.tokens.size();
  if (o.reason == engine::FinishReason::kLength && n > 0) --n;
  t.insert(t.end(), o.tokens.begin(), o.tokens.begin() + static_cast<long>(n));
  return t;
}

size_t CommonPrefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

// ---------------------------------------------------------------------------------------------------------
// 1. Restore against re-prefill

// Peer figures (../shared/ref/README.md, "Peer state figures"): tokens, cold prefill ms, restore ms (page
// cache), restore ms (evicted).
struct PeerState {
  size_t tokens;
  double prefill_ms, restore_ms, evicted_ms;
};
constexpr PeerState kPeerState[] = {{128, 265, 0.72, 2.9}, {512, 1097, 2.03, 7.7}, {2048, 5479, 6.67, 22.7},
                                    {4096, 14407, 13.4, 76.9}};

// Drops the file's pages from the page cache; returns the fraction still resident afterwards (NaN when
// it cannot tell).
double EvictFromPageCache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NAN;
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  struct stat st;
  double resident = NAN;
  if (::fstat(fd, &st) == 0 && st.st_size > 0) {
    void* map = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
    if (map != MAP_FAILED) {
      const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
      const size_t pages = (static_cast<size_t>(st.st_size) + page - 1) / page;
      std::vector<unsigned char> vec(pages);
      if (::mincore(map, static_cast<size_t>(st.st_size), vec.data()) == 0) {
        size_t in = 0;
        for (unsigned char c : vec) in += c & 1;
        resident = static_cast<double>(in) / static_cast<double>(pages);
      }
      ::munmap(map, static_cast<size_t>(st.st_size));
    }
  }
  ::close(fd);
  return resident;
}

// Prefills `tokens` into a new context of `cache` in chunks of `chunk` tokens per forward call.
kv::Context Prefill(const model::Model& m, kv::Cache& cache, std::span<const int32_t> tokens, size_t chunk) {
  kv::Context ctx = cache.NewContext();
  std::vector<float> logits;
  for (size_t at = 0; at < tokens.size(); at += chunk) {
    const size_t n = std::min(chunk, tokens.size() - at);
    model::SeqInput in{&ctx, tokens.subspan(at, n), false};
    logits.clear();
    Must(m.Forward(std::span(&in, 1), &logits), "prefill");
  }
  return ctx;
}

// The logits of one more token after `ctx` (which is consumed).
std::vector<float> NextLogits(const model::Model& m, kv::Context ctx, int32_t token) {
  std::vector<float> logits;
  model::SeqInput in{&ctx, std::span(&token, 1), false};
  Must(m.Forward(std::span(&in, 1), &logits), "forward one token");
  return logits;
}

void RestoreSection(const Options& o, const ModelSource& src, const std::string& dir) {
  std::printf("\n### Restore against re-prefill\n\n");
  auto model = src.NewModel();
  const model::Model& m = *model;
  const uint32_t vocab = m.hparams().n_vocab;
  kv::CacheOptions co;
  co.layout = m.KvLayoutFor(kv::kDefaultPageTokens, kv::KvPrecision::kF16);
  auto cache = Must(kv::Cache::Create(co), "cache");
  kv::SnapshotOptions so;
  so.native_precision = true;  // the cache's own f16 on disk: a byte copy on restore
  std::printf("Synthetic Q8_0 peer-shape model, KV f16 in %u-token pages, %d threads; prefill in chunks of %zu "
              "tokens per forward call; snapshots saved with native_precision (f16 on disk). Medians of %d "
              "prefills and %d restores.\n\n",
              co.layout.page_tokens, m.n_threads(), o.chunk, o.prefill_reps, o.restore_reps);
  {  // warm-up: first-touch of weights and scratch buffers
    kv::Context w = Prefill(m, *cache, RandomTokens(std::min<size_t>(o.chunk, 256), 99, vocab), o.chunk);
  }
  Header({"tokens", "cold prefill ms", "restore ms (file, page cache)", "restore ms (file, new cache)",
          "restore ms (bytes in memory)", "restore ms (file evicted)", "save ms (with fsync)", "file MiB",
          "prefill / restore", "peer restore ms", "peer ratio", "restored logits"});
  struct Breakdown {
    size_t tokens;
    double read_ms, inspect_ms, from_bytes_ms, file_ms, memcpy_ms;
  };
  std::vector<Breakdown> breakdowns;
  for (size_t n : o.restore_sizes) {
    const std::vector<int32_t> tokens = RandomTokens(n, 1000 + static_cast<uint32_t>(n), vocab);
    std::vector<double> prefill;
    kv::Context orig;
    for (int r = 0; r < o.prefill_reps; ++r) {
      orig.Close();
      const auto t0 = Clock::now();
      orig = Prefill(m, *cache, tokens, o.chunk);
      prefill.push_back(Ms(Clock::now() - t0));
    }
    const std::string path = dir + "/ctx-" + std::to_string(n) + ".llamayctx";
    std::vector<double> save;
    for (int r = 0; r < 3; ++r) {
      const auto t0 = Clock::now();
      Must(kv::SaveSnapshot(orig, m.weight_digest(), path, so), "save snapshot");
      save.push_back(Ms(Clock::now() - t0));
    }
    const auto file_bytes = std::filesystem::file_size(path);
    const auto info = Must(kv::InspectSnapshot(Must(ReadFile(path), "read snapshot")), "inspect");
    Check(info.precision == kv::KvPrecision::kF16, "snapshot on disk is not f16");
    // Restore into the long-lived cache (pages recycled, like a running server's), file in the page cache.
    std::vector<double> warm, fresh, mem, evicted;
    (void)Must(kv::LoadSnapshot(*cache, path, m.weight_digest()), "load snapshot");  // warm the page cache
    for (int r = 0; r < o.restore_reps; ++r) {
      const auto t0 = Clock::now();
      kv::Context c = Must(kv::LoadSnapshot(*cache, path, m.weight_digest()), "load snapshot");
      warm.push_back(Ms(Clock::now() - t0));
    }
    // Into a brand-new cache: every page is first-touched (page faults) during the restore.
    for (int r = 0; r < std::min(o.restore_reps, 5); ++r) {
      auto c2 = Must(kv::Cache::Create(co), "cache");
      const auto t0 = Clock::now();
      kv::Context c = Must(kv::LoadSnapshot(*c2, path, m.weight_digest()), "load snapshot");
      fresh.push_back(Ms(Clock::now() - t0));
    }
    const std::vector<uint8_t> bytes = Must(ReadFile(path), "read snapshot");
    for (int r = 0; r < o.restore_reps; ++r) {
      const auto t0 = Clock::now();
      kv::Context c = Must(kv::RestoreSnapshot(*cache, bytes, m.weight_digest()), "restore snapshot");
      mem.push_back(Ms(Clock::now() - t0));
    }
    double resident = 0;
    for (int r = 0; r < std::min(o.restore_reps, 5); ++r) {
      resident = std::max(resident, EvictFromPageCache(path));
      const auto t0 = Clock::now();
      kv::Context c = Must(kv::LoadSnapshot(*cache, path, m.weight_digest()), "load snapshot");
      evicted.push_back(Ms(Clock::now() - t0));
    }
    // Breakdown of a file restore: read, parse + CRC, copy into pages; a memcpy of the same bytes.
    Breakdown b{n, 0, 0, 0, 0, 0};
    {
      std::vector<double> rd, insp, cp;
      std::vector<uint8_t> dst(bytes.size());
      for (int r = 0; r < o.restore_reps; ++r) {
        auto t0 = Clock::now();
        auto v = Must(ReadFile(path), "read");
        rd.push_back(Ms(Clock::now() - t0));
        t0 = Clock::now();
        (void)Must(kv::InspectSnapshot(v), "inspect");
        insp.push_back(Ms(Clock::now() - t0));
        t0 = Clock::now();
        std::memcpy(dst.data(), bytes.data(), bytes.size());
        cp.push_back(Ms(Clock::now() - t0));
      }
      b.read_ms = Median(rd);
      b.inspect_ms = Median(insp);
      b.memcpy_ms = Median(cp);
      b.from_bytes_ms = Median(mem);
      b.file_ms = Median(warm);
    }
    breakdowns.push_back(b);
    // Exactness: the next token's logits after the restored context equal those after the original.
    kv::Context restored = Must(kv::LoadSnapshot(*cache, path, m.weight_digest()), "load snapshot");
    Check(restored.tokens() == orig.tokens(), "restored tokens differ at " + std::to_string(n));
    const int32_t next = RandomTokens(1, 7, vocab)[0];
    const std::vector<float> a = NextLogits(m, orig.Fork(), next);
    const std::vector<float> bl = NextLogits(m, std::move(restored), next);
    const bool identical = a.size() == bl.size() && std::memcmp(a.data(), bl.data(), a.size() * 4) == 0;
    Check(identical, "restored logits differ from the original's at " + std::to_string(n) + " tokens");

    const double pre = Median(prefill), rest = Median(warm);
    std::string peer_restore = "-", peer_ratio = "-";
    for (const auto& p : kPeerState)
      if (p.tokens == n) {
        peer_restore = Fmt("%.2f", p.restore_ms);
        peer_ratio = Fmt("%.0fx", p.prefill_ms / p.restore_ms);
      }
    std::string ev = Fmt("%.2f", Median(evicted));
    if (resident > 0.05) ev += Fmt(" (%.0f%% stayed cached)", 100 * resident);
    Row({std::to_string(n), Fmt("%.1f", pre), Fmt("%.2f", rest), Fmt("%.2f", Median(fresh)), Fmt("%.2f", Median(mem)),
         ev, Fmt("%.1f", Median(save)), Fmt("%.2f", static_cast<double>(file_bytes) / (1 << 20)),
         Fmt("%.0fx", pre / rest), peer_restore, peer_ratio, identical ? "bit-identical" : "DIFFER"});
  }
  std::printf("\nWhere a file restore's time goes (medians; the same bytes):\n\n");
  Header({"tokens", "ReadFile ms", "InspectSnapshot ms (parse + CRC)", "RestoreSnapshot from bytes ms",
          "LoadSnapshot ms", "memcpy of the file ms"});
  for (const auto& b : breakdowns)
    Row({std::to_string(b.tokens), Fmt("%.2f", b.read_ms), Fmt("%.2f", b.inspect_ms), Fmt("%.2f", b.from_bytes_ms),
         Fmt("%.2f", b.file_ms), Fmt("%.2f", b.memcpy_ms)});
}

// ---------------------------------------------------------------------------------------------------------
// 2. Agent trace

struct TraceRequest {
  int agent = 0, turn = 0;
  std::vector<int32_t> prompt;
  size_t cached = 0, expected_cached = 0;
  double ttft_ms = 0;
  std::vector<int32_t> generated;
};

struct TraceRun {
  std::vector<TraceRequest> requests;
  double total_ms = 0;
  size_t tree_entries = 0;
};

// Agents share a system prompt; turn by turn, round-robin, each resends system + its whole conversation
// (earlier user text and generated tokens) + new user text. One request at a time.
TraceRun RunTrace(const Options& o, const ModelSource& src, bool reuse) {
  auto eng = src.NewEngine();
  const uint32_t vocab = eng->model().hparams().n_vocab;
  const std::vector<int32_t> system = RandomTokens(o.system_tokens, 42, vocab);
  std::vector<std::vector<int32_t>> conv(static_cast<size_t>(o.agents));
  std::vector<std::vector<int32_t>> retained;  // token sequences the prefix tree holds (reuse on)
  TraceRun run;
  const auto t0 = Clock::now();
  for (int turn = 0; turn < o.turns; ++turn) {
    for (int a = 0; a < o.agents; ++a) {
      auto& c = conv[static_cast<size_t>(a)];
      const auto user = RandomTokens(o.turn_tokens, 5000 + static_cast<uint32_t>(a * 1000 + turn), vocab);
      c.insert(c.end(), user.begin(), user.end());
      TraceRequest tr;
      tr.agent = a;
      tr.turn = turn;
      tr.prompt = system;
      tr.prompt.insert(tr.prompt.end(), c.begin(), c.end());
      if (reuse) {  // the engine matches all but the last prompt token
        const std::span<const int32_t> q(tr.prompt.data(), tr.prompt.size() - 1);
        for (const auto& s : retained) tr.expected_cached = std::max(tr.expected_cached, CommonPrefix(s, q));
      }
      engine::Request r;
      r.prompt = tr.prompt;
      r.sampling.temperature = 0;
      r.max_tokens = o.trace_gen;
      r.retain = reuse;
      const Outcome out = RunRequest(*eng, std::move(r));
      if (!out.error.ok()) Die(out.error, "trace request");
      tr.cached = out.usage.cached_tokens;
      tr.ttft_ms = out.ttft_ms();
      tr.generated = out.tokens;
      c.insert(c.end(), out.tokens.begin(), out.tokens.end());
      if (reuse) retained.push_back(RetainedTokens(tr.prompt, out));
      std::fprintf(stderr, "  trace reuse %s: agent %d turn %d: %zu prompt tokens, %zu cached, TTFT %.0f ms\n",
                   reuse ? "on" : "off", a, turn, tr.prompt.size(), tr.cached, tr.ttft_ms);
      run.requests.push_back(std::move(tr));
    }
  }
  run.total_ms = Ms(Clock::now() - t0);
  run.tree_entries = eng->cache().Stats().tree_entries;
  return run;
}

// Reuse off by replay: the given requests' prompts, one at a time, retain=false, on a fresh engine.
TraceRun ReplayWithoutReuse(const ModelSource& src, const std::vector<TraceRequest>& picks, int gen) {
  auto eng = src.NewEngine();
  TraceRun run;
  const auto t0 = Clock::now();
  for (const auto& q : picks) {
    engine::Request r;
    r.prompt = q.prompt;
    r.sampling.temperature = 0;
    r.max_tokens = gen;
    r.retain = false;
    const Outcome out = RunRequest(*eng, std::move(r));
    if (!out.error.ok()) Die(out.error, "trace replay");
    TraceRequest tr = q;
    tr.cached = out.usage.cached_tokens;
    tr.ttft_ms = out.ttft_ms();
    tr.generated = out.tokens;
    std::fprintf(stderr, "  trace reuse off: agent %d turn %d: %zu prompt tokens, %zu cached, TTFT %.0f ms\n",
                 tr.agent, tr.turn, tr.prompt.size(), tr.cached, tr.ttft_ms);
    run.requests.push_back(std::move(tr));
  }
  run.total_ms = Ms(Clock::now() - t0);
  run.tree_entries = eng->cache().Stats().tree_entries;
  return run;
}

void TraceSection(const Options& o, const ModelSource& src) {
  std::printf("\n### Agent trace\n\n");
  const bool want_on = std::find(o.trace_modes.begin(), o.trace_modes.end(), "on") != o.trace_modes.end();
  const bool want_off = std::find(o.trace_modes.begin(), o.trace_modes.end(), "off") != o.trace_modes.end();
  std::vector<int> off_turns;  // empty: all
  if (o.trace_off_turns != "all")
    for (const auto& t : SplitList(o.trace_off_turns))
      if (std::stoi(t) < o.turns) off_turns.push_back(std::stoi(t));
  const bool sampled = want_on && !off_turns.empty();
  std::printf("%d agents share a %zu-token system prompt; %d turns each, round-robin, one request at a time; each "
              "turn appends %zu new tokens and generates %d at temperature 0; every prompt is system + the whole "
              "conversation so far (user tokens and generated tokens). TTFT = Submit to the first token event. "
              "Reuse on: the engine's default (prefix-tree Match, and Retain of every finished request). Reuse "
              "off: retain=false on every request, so the tree stays empty and Match finds nothing: each prompt "
              "is prefilled whole",
              o.agents, o.system_tokens, o.turns, o.turn_tokens, o.trace_gen);
  if (sampled) {
    std::printf("; replayed on a fresh engine for turns %s only, one agent per turn (agent = turn mod %d), with "
                "the exact prompts of the reuse-on run (greedy outputs are the same either way, checked below), "
                "since without reuse a request's time depends only on its prompt's length",
                o.trace_off_turns.c_str(), o.agents);
  }
  std::printf(".\n\n");
  Header({"prefix reuse", "runs", "requests", "TTFT median ms", "TTFT p90 ms", "TTFT max ms",
          "cached tokens / request (median)", "prefilled tokens / request (median)", "total s (median)"});
  auto summarize = [&](const std::string& label, const std::vector<TraceRun>& runs, bool on, bool partial) {
    std::vector<double> ttft, cached, prefilled, totals;
    for (const auto& run : runs) {
      totals.push_back(run.total_ms / 1000);
      for (const auto& q : run.requests) {
        ttft.push_back(q.ttft_ms);
        cached.push_back(static_cast<double>(q.cached));
        prefilled.push_back(static_cast<double>(q.prompt.size() - q.cached));
        Check(q.generated.size() == static_cast<size_t>(o.trace_gen),
              "trace: a request generated " + std::to_string(q.generated.size()) + " tokens (EOS?)");
        if (on) {
          Check(q.cached == q.expected_cached, "trace (reuse on): agent " + std::to_string(q.agent) + " turn " +
                                                   std::to_string(q.turn) + " cached " + std::to_string(q.cached) +
                                                   ", expected " + std::to_string(q.expected_cached));
        } else {
          Check(q.cached == 0, "trace (reuse off): a request reused " + std::to_string(q.cached) + " tokens");
        }
      }
      if (!on) Check(run.tree_entries == 0, "trace (reuse off): the prefix tree holds entries");
    }
    Row({label, std::to_string(runs.size()), std::to_string(runs.empty() ? 0 : runs[0].requests.size()),
         Fmt("%.0f", Median(ttft)), Fmt("%.0f", Percentile(ttft, 90)), Fmt("%.0f", Percentile(ttft, 100)),
         Fmt("%.0f", Median(cached)), Fmt("%.0f", Median(prefilled)),
         partial ? std::string("- (sampled)") : Fmt("%.1f", Median(totals))});
  };
  std::vector<TraceRun> on_runs, off_runs;
  if (want_on) {
    for (int r = 0; r < o.trace_reps; ++r) on_runs.push_back(RunTrace(o, src, true));
    summarize("on (Match + Retain)", on_runs, true, false);
  }
  if (want_off) {
    if (sampled) {
      std::vector<TraceRequest> picks;
      for (int t : off_turns)
        for (const auto& q : on_runs[0].requests)
          if (q.turn == t && q.agent == t % o.agents) picks.push_back(q);
      off_runs.push_back(ReplayWithoutReuse(src, picks, o.trace_gen));
    } else if (want_on) {
      off_runs.push_back(ReplayWithoutReuse(src, on_runs[0].requests, o.trace_gen));
    } else {
      off_runs.push_back(RunTrace(o, src, false));
    }
    summarize(sampled ? "off (retain=false), turns " + o.trace_off_turns : std::string("off (retain=false)"), off_runs,
              false, sampled);
  }
  // Greedy outputs depend only on the tokens: both modes must generate the same.
  if (!on_runs.empty() && !off_runs.empty()) {
    bool same = true;
    for (const auto& q : off_runs[0].requests)
      for (const auto& p : on_runs[0].requests)
        if (p.agent == q.agent && p.turn == q.turn) same = same && p.generated == q.generated;
    Check(same, "trace: reuse on and off generated different tokens");
    std::printf("\nGenerated tokens identical with reuse on and off (%zu requests compared): %s.\n",
                off_runs[0].requests.size(), same ? "yes" : "NO");
  }
  // TTFT by turn (median over the agents), first run of each mode.
  std::printf("\nTTFT by turn (ms; median over the agents that ran it; first run of each mode):\n\n");
  std::vector<std::string> head = {"turn", "prompt tokens"};
  if (!on_runs.empty()) head.push_back("reuse on");
  if (!off_runs.empty()) head.push_back("reuse off");
  Header(head);
  for (int t = 0; t < o.turns; ++t) {
    std::vector<std::string> row = {std::to_string(t)};
    std::vector<double> prompt;
    const auto& any = on_runs.empty() ? off_runs[0] : on_runs[0];
    for (const auto& q : any.requests)
      if (q.turn == t) prompt.push_back(static_cast<double>(q.prompt.size()));
    row.push_back(Fmt("%.0f", Median(prompt)));
    for (const auto* runs : {&on_runs, &off_runs}) {
      if (runs->empty()) continue;
      std::vector<double> v;
      for (const auto& q : (*runs)[0].requests)
        if (q.turn == t) v.push_back(q.ttft_ms);
      row.push_back(v.empty() ? "-" : Fmt("%.0f", Median(v)));
    }
    Row(row);
  }
}

// ---------------------------------------------------------------------------------------------------------
// 3. Best-of-N

void BestOfSection(const Options& o, const ModelSource& src) {
  std::printf("\n### Best-of-%d\n\n", o.bestof_n);
  auto eng = src.NewEngine();
  const uint32_t vocab = eng->model().hparams().n_vocab;
  const std::vector<int32_t> prefix = RandomTokens(o.bestof_prefix, 77, vocab);
  // Prefill once, retained in the prefix tree.
  engine::Request pre;
  pre.prompt = prefix;
  pre.max_tokens = 0;
  pre.sampling.temperature = 0;
  const Outcome p = RunRequest(*eng, std::move(pre));
  if (!p.error.ok()) Die(p.error, "best-of prefill");
  std::printf("One %zu-token prompt prefilled once (a max_tokens=0 request, retained in the prefix tree: %.0f ms), "
              "then %d requests with the same prompt, %d tokens each at temperature 0.8 with seeds 1..%d, submitted "
              "together and decoded in the same steps; against one request of the same kind alone. Every "
              "request reuses the first %zu prompt tokens from the tree (the engine computes the last one). "
              "Medians of %d.\n\n",
              prefix.size(), Ms(p.end - p.submit), o.bestof_n, o.bestof_tokens, o.bestof_n, prefix.size() - 1,
              o.reps);
  auto request = [&](uint64_t seed) {
    engine::Request r;
    r.prompt = prefix;
    r.max_tokens = o.bestof_tokens;
    r.sampling.temperature = 0.8f;
    r.sampling.seed = seed;
    r.sampling.has_seed = true;
    r.retain = false;
    return r;
  };
  std::vector<double> single_tps, multi_tps, single_ms, multi_ms;
  std::vector<std::vector<int32_t>> branches;
  std::vector<int32_t> alone;
  for (int rep = 0; rep < o.reps; ++rep) {
    {
      const auto t0 = Clock::now();
      const Outcome one = RunRequest(*eng, request(1));
      const double ms = Ms(Clock::now() - t0);
      if (!one.error.ok()) Die(one.error, "best-of single");
      Check(one.usage.cached_tokens == prefix.size() - 1,
            "best-of: a single stream cached " + std::to_string(one.usage.cached_tokens));
      single_ms.push_back(ms);
      single_tps.push_back(static_cast<double>(one.tokens.size()) / ms * 1000);
      alone = one.tokens;
    }
    {
      const auto t0 = Clock::now();
      std::vector<std::unique_ptr<Pending>> pend;
      for (int i = 0; i < o.bestof_n; ++i)
        pend.push_back(std::make_unique<Pending>(*eng, request(static_cast<uint64_t>(i + 1))));
      size_t total = 0;
      branches.clear();
      for (auto& q : pend) {
        const Outcome out = q->Wait();
        if (!out.error.ok()) Die(out.error, "best-of branch");
        Check(out.usage.cached_tokens == prefix.size() - 1,
              "best-of: a branch cached " + std::to_string(out.usage.cached_tokens) + ", expected " +
                  std::to_string(prefix.size() - 1));
        total += out.tokens.size();
        branches.push_back(out.tokens);
      }
      const double ms = Ms(Clock::now() - t0);
      multi_ms.push_back(ms);
      multi_tps.push_back(static_cast<double>(total) / ms * 1000);
    }
  }
  // Seed 1 gives the same tokens alone and among the others (batch composition never changes a result).
  Check(!branches.empty() && branches[0] == alone, "best-of: seed 1 generated differently alone and in the batch");
  size_t distinct = 0;
  for (size_t i = 0; i < branches.size(); ++i) {
    bool seen = false;
    for (size_t j = 0; j < i; ++j) seen = seen || branches[j] == branches[i];
    distinct += !seen;
  }
  if (o.bestof_n > 1) Check(distinct > 1, "best-of: every branch generated the same tokens");
  Header({"run", "streams", "generated tokens", "wall ms", "aggregate generated tokens/s", "vs one stream"});
  const double base = Median(single_tps);
  Row({"one stream", "1", std::to_string(alone.size()), Fmt("%.0f", Median(single_ms)), Fmt("%.1f", base), "1.00x"});
  size_t total = 0;
  for (const auto& b : branches) total += b.size();
  Row({"best-of-" + std::to_string(o.bestof_n), std::to_string(o.bestof_n), std::to_string(total),
       Fmt("%.0f", Median(multi_ms)), Fmt("%.1f", Median(multi_tps)), Fmt("%.2fx", Median(multi_tps) / base)});
  std::printf("\nDistinct branch outputs: %zu of %zu; seed 1 alone = seed 1 among %d: %s.\n", distinct, branches.size(),
              o.bestof_n, !branches.empty() && branches[0] == alone ? "yes" : "NO");
}

// ---------------------------------------------------------------------------------------------------------
// 4. Concurrent HTTP clients

struct ClientResult {
  double latency_ms = 0, ttft_ms = NAN;
  size_t completion_tokens = 0, prompt_tokens = 0, cached_tokens = 0;
  std::string text;
  bool ok = false;
  std::string error;
};

ClientResult StreamCompletion(int port, const std::vector<int32_t>& prompt, int max_tokens) {
  ClientResult out;
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(600, 0);
  cli.set_write_timeout(60, 0);
  json body = {{"prompt", prompt},
               {"max_tokens", max_tokens},
               {"temperature", 0},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.headers = {{"Content-Type", "application/json"}};
  req.body = body.dump();
  std::string buf;
  bool done = false;
  const auto t0 = Clock::now();
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    if (std::isnan(out.ttft_ms)) out.ttft_ms = Ms(Clock::now() - t0);
    buf.append(data, len);
    size_t end;
    while ((end = buf.find("\n\n")) != std::string::npos) {
      std::string ev = buf.substr(0, end);
      buf.erase(0, end + 2);
      if (ev.rfind("data: ", 0) != 0) continue;
      ev.erase(0, 6);
      if (ev == "[DONE]") {
        done = true;
        continue;
      }
      json j = json::parse(ev, nullptr, false);
      if (j.is_discarded()) continue;
      if (j.contains("error")) out.error = j["error"].dump();
      if (j.contains("choices"))
        for (const auto& c : j["choices"])
          if (c.contains("text") && c["text"].is_string()) out.text += c["text"].get<std::string>();
      if (j.contains("usage") && j["usage"].is_object()) {
        out.completion_tokens = j["usage"].value("completion_tokens", size_t{0});
        out.prompt_tokens = j["usage"].value("prompt_tokens", size_t{0});
        out.cached_tokens = j["usage"]["prompt_tokens_details"].value("cached_tokens", size_t{0});
      }
    }
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool sent = cli.send(req, res, err);
  out.latency_ms = Ms(Clock::now() - t0);
  if (!sent) {
    out.error = "http error " + httplib::to_string(err);
  } else if (res.status != 200) {
    out.error = "status " + std::to_string(res.status) + ": " + buf;
  } else if (!done) {
    out.error = "stream ended without [DONE]";
  }
  out.ok = out.error.empty();
  return out;
}

struct ClientsRun {
  std::vector<ClientResult> results;  // [client * K + k]
  double wall_ms = 0;
};

ClientsRun RunClients(const Options& o, const ModelSource& src, int n_clients) {
  auto eng = src.NewEngine();
  const uint32_t vocab = eng->model().hparams().n_vocab;
  server::ServerOptions so;
  so.port = 0;
  so.model_name = "peer-160m-q8_0-synthetic";
  server::Server srv(eng.get(), so);
  Must(srv.Start(), "start the server");
  ClientsRun run;
  run.results.resize(static_cast<size_t>(n_clients * o.client_requests));
  std::vector<std::thread> threads;
  const auto t0 = Clock::now();
  for (int c = 0; c < n_clients; ++c)
    threads.emplace_back([&, c] {
      for (int k = 0; k < o.client_requests; ++k) {
        const auto prompt = RandomTokens(o.client_prompt, 9000 + static_cast<uint32_t>(c * 100 + k), vocab);
        run.results[static_cast<size_t>(c * o.client_requests + k)] =
            StreamCompletion(srv.port(), prompt, o.client_tokens);
      }
    });
  for (auto& t : threads) t.join();
  run.wall_ms = Ms(Clock::now() - t0);
  srv.Stop();
  return run;
}

void ClientsSection(const Options& o, const ModelSource& src) {
  std::printf("\n### Concurrent HTTP clients\n\n");
  std::printf("The server in-process on 127.0.0.1 (port 0), N client threads (cpp-httplib), each sending %d "
              "/v1/completions requests one after another: a distinct %zu-token prompt as a token-id array, "
              "max_tokens %d, temperature 0, stream: true (TTFT = request sent to the first SSE chunk). A fresh "
              "engine per row. Medians of %d runs for the rates; latencies over every request of every run.\n\n",
              o.client_requests, o.client_prompt, o.client_tokens, o.reps);
  Header({"clients", "requests", "generated tokens/s", "vs 1 client", "latency p50 ms", "latency p99 ms",
          "TTFT p50 ms", "TTFT p99 ms", "wall s (median)"});
  std::vector<int> counts = {1};
  if (o.clients > 1) counts.push_back(o.clients);
  double base = 0;
  std::vector<std::string> texts_one;  // client 0's outputs with one client
  for (int n : counts) {
    std::vector<double> tps, walls, lat, ttft;
    size_t requests = 0;
    for (int r = 0; r < o.reps; ++r) {
      ClientsRun run = RunClients(o, src, n);
      size_t tokens = 0;
      std::vector<std::string> texts0;
      for (size_t i = 0; i < run.results.size(); ++i) {
        const auto& q = run.results[i];
        Check(q.ok, "clients: a request failed: " + q.error);
        Check(q.prompt_tokens == o.client_prompt, "clients: prompt_tokens " + std::to_string(q.prompt_tokens));
        Check(q.completion_tokens == static_cast<size_t>(o.client_tokens),
              "clients: completion_tokens " + std::to_string(q.completion_tokens));
        Check(q.cached_tokens == 0, "clients: distinct prompts reused " + std::to_string(q.cached_tokens) + " tokens");
        tokens += q.completion_tokens;
        lat.push_back(q.latency_ms);
        ttft.push_back(q.ttft_ms);
        if (i < static_cast<size_t>(o.client_requests)) texts0.push_back(q.text);
      }
      requests = run.results.size();
      tps.push_back(static_cast<double>(tokens) / run.wall_ms * 1000);
      walls.push_back(run.wall_ms / 1000);
      if (n == 1 && r == 0) texts_one = texts0;
      if (n != 1) Check(texts0 == texts_one, "clients: client 0's greedy outputs differ with other clients running");
    }
    if (n == 1) base = Median(tps);
    Row({std::to_string(n), std::to_string(requests), Fmt("%.1f", Median(tps)), Fmt("%.2fx", Median(tps) / base),
         Fmt("%.0f", Percentile(lat, 50)), Fmt("%.0f", Percentile(lat, 99)), Fmt("%.0f", Percentile(ttft, 50)),
         Fmt("%.0f", Percentile(ttft, 99)), Fmt("%.1f", Median(walls))});
  }
}

// ---------------------------------------------------------------------------------------------------------

std::string LoadAverage() {
  double l[3];
  if (::getloadavg(l, 3) != 3) return "?";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f %.2f %.2f", l[0], l[1], l[2]);
  return buf;
}

int Main(int argc, char** argv) {
  Options o = ParseOptions(argc, argv);
  const auto start = Clock::now();
  if (o.hybrid) {
    o.hy.threads = o.threads;
    std::fprintf(stderr, "engine_bench: load average %s\n", LoadAverage().c_str());
    const int failures = RunHybridBench(o.hy);
    std::printf("\nTotal %.1f s; load average at the end %s; checks failed: %d\n", Ms(Clock::now() - start) / 1000,
                LoadAverage().c_str(), failures);
    if (failures > 0) std::fprintf(stderr, "engine_bench: %d check(s) failed\n", failures);
    return failures > 0 ? 1 : 0;
  }
  std::fprintf(stderr, "engine_bench: load average %s; building the synthetic Q8_0 peer-shape model...\n",
               LoadAverage().c_str());
  ModelSource src;
  src.threads = o.threads;
  src.gguf = Must(model::BuildSyntheticModel(model::PeerShape(TensorType::kQ8_0)), "build the synthetic model");
  std::string dir = o.dir;
  bool remove_dir = false;
  if (dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/engine_bench.XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) Die(IoError("mkdtemp " + tmpl), "temporary directory");
    dir = tmpl;
    remove_dir = true;
  }
  std::printf("## engine_bench%s: synthetic peer-shape model (vocab 32000, dim 1024, 8 layers, 16/8 heads, ffn 2816), "
              "Q8_0 weights, KV f16, %d threads\n",
              o.quick ? " --quick" : "", o.threads);
  auto has = [&](const char* s) { return std::find(o.sections.begin(), o.sections.end(), s) != o.sections.end(); };
  if (has("restore")) RestoreSection(o, src, dir);
  if (has("trace")) TraceSection(o, src);
  if (has("bestof")) BestOfSection(o, src);
  if (has("clients")) ClientsSection(o, src);
  if (remove_dir) std::filesystem::remove_all(dir);
  std::printf("\nTotal %.1f s; load average at the end %s; checks failed: %d\n", Ms(Clock::now() - start) / 1000,
              LoadAverage().c_str(), g_failures);
  if (g_failures > 0) std::fprintf(stderr, "engine_bench: %d check(s) failed\n", g_failures);
  return g_failures > 0 ? 1 : 0;
}

}  // namespace
}  // namespace llamay::bench

int main(int argc, char** argv) { return llamay::bench::Main(argc, argv); }
