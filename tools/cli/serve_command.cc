#include "serve_command.h"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <map>
#include <memory>
#include <string>

#include "base/file.h"
#include "ctx_commands.h"
#include "format.h"
#include "kernels/cpu.h"
#include "server/chat_prompt.h"
#include "server/server.h"

namespace llamay::cli {
namespace {

struct ServeOptions {
  std::string model;
  std::string host = "127.0.0.1";
  int port = 11435;
  std::string api_key;
  size_t kv_memory_mib = 1024;
  uint32_t page_tokens = 64;
  std::string kv_precision = "f16";
  std::string state_dir;
  std::string store;  // --store: a directory or s3://bucket/prefix
  size_t ctx_size = 0;  // 0: the model's trained context
  bool share_sessions = false;
  int threads = 0;
  size_t max_body_mib = 256;
  size_t max_active = 16;
  size_t max_queue = 256;
  double drain_seconds = 5;
  std::string chat_template_file;  // a template instead of the model's
  int reasoning_budget = -1;
  bool no_webui = false;   // no built-in page at /
  std::string webui_dir;   // the page's files from here instead of the embedded copy
  std::string speculative = "auto";
  std::string checkpoint_retention = "value";
};

// The options as the page's server info shows them (GET /v1/state): strings, the API key only as "set".
std::map<std::string, std::string> FlagsOf(const ServeOptions& o) {
  auto num = [](auto v) { return std::to_string(v); };
  std::map<std::string, std::string> f = {
      {"model", o.model.empty() ? "(demo)" : o.model},
      {"host", o.host},
      {"port", num(o.port)},
      {"api_key", o.api_key.empty() ? "none" : "set"},
      {"kv_memory_mib", num(o.kv_memory_mib)},
      {"page_tokens", num(o.page_tokens)},
      {"kv_precision", o.kv_precision},
      {"ctx_size", num(o.ctx_size)},
      {"threads", num(o.threads)},
      {"max_active", num(o.max_active)},
      {"max_queue", num(o.max_queue)},
      {"max_body_mib", num(o.max_body_mib)},
      {"reasoning_budget", num(o.reasoning_budget)},
      {"share_sessions", o.share_sessions ? "true" : "false"},
      {"webui", o.no_webui ? "off" : o.webui_dir.empty() ? "embedded" : "dir"},
      {"speculative", o.speculative},
      {"checkpoint_retention", o.checkpoint_retention},
  };
  if (!o.state_dir.empty()) f["state_dir"] = o.state_dir;
  if (!o.store.empty()) f["store"] = o.store;
  if (!o.chat_template_file.empty()) f["chat_template_file"] = o.chat_template_file;
  if (!o.webui_dir.empty()) f["webui_dir"] = o.webui_dir;
  return f;
}

// Waits in its own thread for a second SIGINT/SIGTERM during the shutdown and exits at once.
void ExitOnSecondSignal(sigset_t signals) {
  std::thread([signals] {
    int sig = 0;
    sigwait(&signals, &sig);
    std::fprintf(stderr, "llamay: second %s: exiting now\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    std::fflush(stderr);
    std::_Exit(128 + sig);
  }).detach();
}

int RunServe(const ServeOptions& o) {
  // SIGINT/SIGTERM are taken by sigwait below; block them before any thread starts so every thread
  // inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  if (o.model.empty()) PrintDemoModelNote();
  auto m = engine::LoadModelOrDemo(o.model, o.threads);
  if (!m.ok()) return Fail(m.status(), kExitBadInput);
  auto precision = kv::ParseKvPrecision(o.kv_precision);
  if (!precision.ok()) return Fail(precision.status(), kExitBadInput);
  engine::EngineOptions eo;
  eo.page_tokens = o.page_tokens;
  eo.kv_precision = *precision;
  eo.kv_memory_bytes = o.kv_memory_mib << 20;
  eo.max_active = o.max_active;
  eo.max_queue = o.max_queue;
  eo.max_context = o.ctx_size != 0 ? o.ctx_size : m->model->hparams().n_ctx_train;
  auto speculative = engine::ParseSpeculative(o.speculative);
  if (!speculative.ok()) return Fail(speculative.status(), kExitBadInput);
  eo.speculative = *speculative;
  eo.checkpoint_retention =
      o.checkpoint_retention == "last-use" ? kv::CheckpointRetention::kLastUse : kv::CheckpointRetention::kValue;
  auto engine = engine::Engine::Create(std::move(m->model), std::move(m->tokenizer), eo);
  if (!engine.ok()) return Fail(engine.status(), kExitBadInput);
  std::unique_ptr<engine::SnapshotStore> snapshot_store;
  if (!o.store.empty()) {
    auto opened = store::OpenStore(o.store);
    if (!opened.ok()) return Fail(opened.status(), kExitBadInput);
    snapshot_store = std::make_unique<engine::SnapshotStore>(std::move(*opened));
  }
  server::ServerOptions so;
  so.store = snapshot_store.get();
  so.share_sessions = o.share_sessions;
  if (o.share_sessions && !snapshot_store)
    return Fail(InvalidArgumentError("--share-sessions needs --store"), kExitBadInput);
  so.host = o.host;
  so.port = o.port;
  so.api_key = o.api_key;
  so.max_body_bytes = o.max_body_mib << 20;
  so.reasoning_budget = o.reasoning_budget;
  so.webui = !o.no_webui;
  so.webui_dir = o.webui_dir;
  so.flags = FlagsOf(o);
  if (!o.chat_template_file.empty()) {
    auto bytes = ReadFile(o.chat_template_file);
    if (!bytes.ok()) return Fail(bytes.status().WithContext("--chat-template-file"), kExitBadInput);
    so.chat_template.assign(bytes->begin(), bytes->end());
  }
  server::Server srv(engine->get(), so);
  if (!o.state_dir.empty()) {
    std::vector<std::string> warnings;
    if (Status s = srv.LoadContexts(o.state_dir, &warnings); !s.ok()) return Fail(s, kExitFailure);
    for (const auto& w : warnings) std::fprintf(stderr, "llamay: skipped a saved context: %s\n", w.c_str());
  }
  if (!srv.chat_prompt().problem().ok())
    std::fprintf(stderr,
                 "llamay: warning: %s; chat requests (/v1/chat/completions, messages in /v1/contexts) will be answered "
                 "500 chat_template_error, prompts are served\n",
                 srv.chat_prompt().problem().message().c_str());
  if (Status s = srv.Start(); !s.ok()) return Fail(s, kExitFailure);
  std::fprintf(stderr, "llamay: serving %s on http://%s:%d (KV budget %s, %s, %u-token pages; %s kernels)\n",
               (*engine)->model().file().GetStringOr("general.name", "model").c_str(), o.host.c_str(), srv.port(),
               FormatBytes(eo.kv_memory_bytes).c_str(), o.kv_precision.c_str(), o.page_tokens,
               std::string(kernels::IsaName(kernels::DetectIsa())).c_str());
  if (so.webui) std::fprintf(stderr, "llamay: the built-in page: http://%s:%d/\n", o.host.c_str(), srv.port());
  int sig = 0;
  sigwait(&signals, &sig);
  // Shutdown: stop listening and cancel what runs at once; let handlers end within the drain; save the
  // held contexts; exit. A second signal exits at once.
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(o.drain_seconds * 1000));
  std::fprintf(stderr, "llamay: %s: shutting down (requests in flight are cancelled; drain %.1f s; a second signal exits at once)\n",
               sig == SIGINT ? "SIGINT" : "SIGTERM", o.drain_seconds);
  ExitOnSecondSignal(signals);
  srv.BeginShutdown();
  auto left = [&] {
    return std::max(std::chrono::milliseconds(0),
                    std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
  };
  const bool drained = srv.WaitStopped(left());
  if (!drained) std::fprintf(stderr, "llamay: requests still running after the %.1f s drain: not waiting for them\n", o.drain_seconds);
  int rc = kExitOk;
  if (!o.state_dir.empty()) {
    // At least a moment to compute the pending last token of each held context, even when the drain is over.
    const auto wait = std::max(left(), std::chrono::milliseconds(2000));
    if (Status s = srv.SaveContexts(o.state_dir, wait); !s.ok()) {
      rc = Fail(s, kExitFailure);
    } else {
      std::fprintf(stderr, "llamay: held contexts saved to %s\n", o.state_dir.c_str());
    }
  }
  if (!drained) {  // handlers that did not end would block the destructors: leave without them
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(rc);
  }
  return rc;
}

}  // namespace

void AddServeCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* s = app.add_subcommand("serve", "OpenAI-compatible HTTP server with the /v1/contexts routes");
  s->add_option("-m,--model", o->model, "GGUF model (default: the built-in demo model)");
  s->add_option("--host", o->host, "Address to listen on")->capture_default_str();
  s->add_option("--port", o->port, "Port")->capture_default_str();
  s->add_option("--api-key", o->api_key, "Require Authorization: Bearer KEY");
  s->add_option("--kv-memory", o->kv_memory_mib, "KV cache budget in MiB")->capture_default_str();
  s->add_option("--page-tokens", o->page_tokens, "KV positions per page")->capture_default_str();
  s->add_option("--kv-precision", o->kv_precision, "KV precision: f32, f16, q8_0")->capture_default_str();
  s->add_option("--state-dir", o->state_dir, "Save held contexts here on shutdown and restore them on start");
  s->add_option("--chat-template-file", o->chat_template_file,
                "A Jinja chat template to use instead of the model's (e.g. one of its family's published templates)");
  s->add_option("--reasoning-budget", o->reasoning_budget,
                "Reasoning tokens a request of a thinking model may spend when it does not say (-1: no limit); "
                "then the close marker is forced")
      ->check(CLI::Range(-1, 1 << 20));
  s->add_option("-c,--ctx-size", o->ctx_size,
                "Positions a context may hold, prompt and output together (0: the model's trained context); "
                "a longer request gets 400 context_length_exceeded")
      ->capture_default_str();
  s->add_flag("--share-sessions", o->share_sessions,
              "With --store: sessions continue on any instance sharing the store (each change is written "
              "through; docs/deploy.md)");
  s->add_option("--store", o->store,
                "Snapshot store for /v1/contexts/{id}/push and restore by name: a directory or s3://bucket/prefix "
                "(credentials from the AWS environment; docs/store.md)");
  s->add_option("-t,--threads", o->threads, "Compute threads (0: one per core)")->capture_default_str();
  s->add_option("--speculative", o->speculative,
                "auto: decode drafts tokens from text already seen and verifies them in one step, the output "
                "unchanged (per request: llamay_speculative); off: never")
      ->check(CLI::IsMember({"auto", "off"}))
      ->capture_default_str();
  s->add_option("--checkpoint-retention", o->checkpoint_retention,
                "Hybrid models: which recurrent checkpoints the prefix tree keeps under memory pressure. value: "
                "by the prefill each saves per byte of state and how often it is resumed (docs/server.md); "
                "last-use: least recently used first")
      ->check(CLI::IsMember({"value", "last-use"}))
      ->capture_default_str();
  s->add_option("--max-body", o->max_body_mib, "Largest request body in MiB")->capture_default_str();
  s->add_option("--max-active", o->max_active, "Requests run at once (continuous batching)")->capture_default_str();
  s->add_option("--max-queue", o->max_queue, "Requests that may wait; beyond it, 429")->capture_default_str();
  s->add_flag("--no-webui", o->no_webui, "No built-in page at / (the API routes are unchanged)");
  s->add_option("--webui-dir", o->webui_dir,
                "Serve the built-in page's files from DIR (read at each request, for developing the page) "
                "instead of the copy built into the binary")
      ->check(CLI::ExistingDirectory);
  s->add_option("--drain-seconds", o->drain_seconds,
                "On SIGINT/SIGTERM, how long cancelled requests may take to end before the process exits")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  s->callback([o, exit_code] { *exit_code = RunServe(*o); });
}

}  // namespace llamay::cli
