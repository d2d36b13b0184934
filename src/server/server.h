// The HTTP server: OpenAI-compatible routes and llamay's /v1/contexts routes over one Engine.
//
// Routes: GET /health, GET /metrics (Prometheus text), GET /v1/models, POST /v1/completions,
// POST /v1/chat/completions (both with stream: true as server-sent events ending in "data: [DONE]"),
// POST /v1/responses, GET and DELETE /v1/responses/{id}, POST /v1/responses/input_tokens (responses.h), POST /v1/messages and
// /v1/messages/count_tokens (messages.h), Ollama's /api/* (ollama.h), POST /v1/contexts, GET /v1/contexts,
// POST /v1/contexts/{id}/fork?n=, GET /v1/contexts/{id}/snapshot, POST /v1/contexts/restore,
// DELETE /v1/contexts/{id}; the built-in page at / (webui.h) and the state it shows: GET /v1/state,
// GET /v1/events, GET /v1/contexts/{id}/pages (state_view.h). Each surface is one file that translates
// its wire format to a Conversation and back (generation.h). Request extensions `llamay_session` and
// `llamay_retain_prefix`; usage reports `llamay_cached_prompt_tokens` and
// `prompt_tokens_details.cached_tokens`. Errors are OpenAI error objects with the matching HTTP status;
// bad input never yields a 500.
//
// Thread-safety: handlers run on the HTTP library's thread pool; held contexts are guarded by a mutex and
// a context lent to a running request is absent from the map until it comes back.
#ifndef LLAMAY_SERVER_SERVER_H_
#define LLAMAY_SERVER_SERVER_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <chrono>
#include <functional>

#include "base/status.h"
#include "engine/engine.h"
#include "engine/session.h"
#include "engine/snapshot_store.h"
#include "server/histogram.h"

namespace httplib {
class Server;
class Request;
class Response;
}  // namespace httplib

namespace llamay::server {

class ChatPrompt;
class EventHub;
class StateWatcher;

// Wall-clock milliseconds since the Unix epoch (the times /v1/state reports).
int64_t UnixMillis();

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 11435;             // 0: any free port (tests)
  std::string api_key;          // non-empty: require "Authorization: Bearer <key>"
  size_t max_body_bytes = 256u << 20;
  int http_threads = 16;        // each streaming response holds one
  std::string model_name;       // reported by /v1/models and in responses
  int default_max_tokens = 256; // chat completions without max_tokens
  // Where POST /v1/contexts/{id}/push and restore by name keep snapshots (--store); null: no store. Not
  // owned: it outlives the server.
  engine::SnapshotStore* store = nullptr;
  // With a store: sessions move between instances that share it (--share-sessions, docs/deploy.md):
  // context ids are unique across instances, every change to a held context is written through to the
  // store as its next generation, and a session this instance lacks (or holds at an older generation) is
  // pulled from it.
  bool share_sessions = false;
  // A chat template to use instead of the model's (--chat-template-file); empty: the model's.
  std::string chat_template;
  // Reasoning tokens a request may spend when it does not say (--reasoning-budget); -1: no limit.
  int reasoning_budget = -1;
  // Stored responses (the Responses API's store: true) held at most; see Server::HoldResponse.
  size_t max_stored_responses = 256;
  // The built-in page at / (webui.h): on unless --no-webui. webui_dir (--webui-dir) serves its files
  // from that directory, read at each request, instead of the copy embedded at build time.
  bool webui = true;
  std::string webui_dir;
  // The serve command's options as it was started, for the page's server info (GET /v1/state); never
  // the API key itself.
  std::map<std::string, std::string> flags;
};

// A held context: the engine's session (its context, the tokens it does not hold yet and the next token's
// logits when known) as the server keeps it.
struct HeldContext : engine::Session {
  bool busy = false;  // lent to a running request
  // With a store: the generation of the session this copy is (0: never committed). Kept by the server's
  // map across TakeContext/ReturnContext; see Server::CommitSession.
  uint64_t generation = 0;
  // A stored response's (Server::HoldResponse): when it was stored, for eviction oldest first; 0 for
  // other contexts (and responses loaded from --state-dir, evicted before any stored since).
  uint64_t stored_seq = 0;
  // A stored response's body (JSON) as it was answered, for GET /v1/responses/{id}; empty for other
  // contexts, and for responses this instance did not answer (restored from --state-dir or the store).
  std::string response_body;
  // For the built-in page (GET /v1/state): the context it was forked from (empty: none), when it was
  // made and last used (ms since the Unix epoch), and its tokens when it was last lent to a request.
  // Kept by the server's map across TakeContext/ReturnContext.
  std::string parent;
  int64_t created_ms = 0;
  int64_t last_used_ms = 0;
  size_t lent_tokens = 0;
};

// A held context of `session`, not busy and never committed, made now.
inline HeldContext Held(engine::Session session, std::string parent = {}) {
  const int64_t now = UnixMillis();
  return HeldContext{std::move(session), false, 0, 0, {}, std::move(parent), now, now, 0};
}

class Server {
 public:
  Server(engine::Engine* engine, ServerOptions options);
  ~Server();

  // Binds and serves on a background thread.
  Status Start();
  void Stop();
  // Shutdown, first step (SIGINT/SIGTERM): stops listening, answers requests that still arrive on open
  // connections 503 server_shutting_down, and cancels every request queued or running. Returns at once.
  void BeginShutdown();
  // Waits up to `wait` for the listener and every handler to end; true when they did (Stop() then
  // returns at once), false when some still run (the caller may exit without joining them).
  bool WaitStopped(std::chrono::milliseconds wait);
  bool shutting_down() const { return shutting_down_.load(); }
  int port() const { return port_; }

  // Held contexts, for the state directory (snapshot on shutdown, restore on start). Saving waits (up to
  // `wait`) for contexts lent to running requests to come back; one that does not, or whose pending tail
  // (the part of a cancelled request's prompt not computed yet) cannot be computed within `wait` either,
  // is reported in the returned error after every other context is saved.
  Status SaveContexts(const std::string& dir, std::chrono::milliseconds wait = std::chrono::seconds(10));
  Status LoadContexts(const std::string& dir, std::vector<std::string>* warnings);

  // Called by the route handlers (public for the handler files; not an API for others).
  engine::Engine& engine() { return *engine_; }
  engine::SnapshotStore* store() { return options_.store; }
  bool sharing_sessions() const { return options_.store != nullptr && options_.share_sessions; }
  const ServerOptions& options() const { return options_; }
  // Positions one context may hold: --ctx-size, else the model's trained context (0 when it says none).
  size_t ContextLength() const;
  // The model's chat template, parsed once (chat_prompt.h); problem() is what start-up reports.
  const ChatPrompt& chat_prompt() const { return *chat_prompt_; }
  std::string NewContextId();
  void PutContext(const std::string& id, HeldContext held);
  // Lends a held context to a request: NotFound, or FailedPrecondition when it is busy.
  Result<HeldContext> TakeContext(const std::string& id);
  // With a store (sessions that move between instances, docs/deploy.md):
  //  - FetchSession makes the held copy of `id` the store's newest generation: pulled when this instance
  //    does not hold it, or holds an older generation (another instance continued it meanwhile). Without a
  //    store, or when the store has no such session, it changes nothing.
  //  - CommitSession writes the held copy back as the next generation (write-through, after every change):
  //    FailedPrecondition kDetailSessionConflict when another instance committed that generation first,
  //    and this copy is dropped (it is a fork no one else can see).
  Status FetchSession(const std::string& id);
  Status CommitSession(const std::string& id);
  void ReturnContext(const std::string& id, HeldContext held);
  // A held context of its own sharing every page of context `id` (a fork; `id` stays as it was): NotFound,
  // or FailedPrecondition when `id` is lent to a running request.
  Result<HeldContext> ForkContext(const std::string& id);
  // Holds a stored response's context (or a prompt_cache_key's, "pck_...") as `id`, then keeps them
  // within their bounds, counted together: at most
  // ServerOptions::max_stored_responses of them, and (with a KV budget) their bytes (each context's, shared
  // pages counted once per context) within half of it. The oldest go first; the newest always stays. With --share-sessions every
  // one was written through to the store, so an evicted response comes back from there (FetchSession).
  void HoldResponse(const std::string& id, HeldContext held);
  // Runs a held context's tail through the model so that the context holds every token (a snapshot holds
  // computed positions only). The work runs on a fork: on failure `held` is unchanged. `stop` as for
  // Engine::Generate: once it returns true the work is cancelled (CancelledStatus()).
  Status SettleTail(HeldContext& held, const std::function<bool()>& stop = {});
  // Tokens held by context `id` (0 when there is none; a context lent to a request counts as holding some).
  size_t HeldTokens(const std::string& id);
  std::mutex& contexts_mu() { return ctx_mu_; }
  std::map<std::string, HeldContext>& contexts() { return contexts_; }

  struct Metrics {
    // requests: every request received; errors: every answer with an HTTP status >= 400, counted once
    // where each answer goes out (the post-routing handler), whoever wrote it.
    std::atomic<uint64_t> requests{0}, errors{0}, prompt_tokens{0}, cached_tokens{0}, completion_tokens{0};
    // The /v1/contexts routes' work, and generated tokens counted as they stream (for tokens/s).
    std::atomic<uint64_t> forks{0}, restores{0}, snapshots{0}, tokens_streamed{0};
    // Answers by HTTP status (index: the status, 100 to 599), counted with `errors`.
    std::array<std::atomic<uint64_t>, 600> by_status{};
    // Completion latency (generation.cc; every surface, streamed or not), in seconds:
    //  - ttft: from a request's arrival to its first generated token (requests that generate one);
    //  - tpot: per choice with at least 2 tokens, (its end - its first token) / (tokens - 1);
    //  - duration: from a request's arrival to the end of its last choice.
    Histogram ttft{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60};
    Histogram tpot{0.001, 0.0025, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2};
    Histogram duration{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300};
  };
  Metrics& metrics() { return metrics_; }
  // When the request this handler thread is answering arrived (its headers were read: the pre-routing
  // handler); now on a thread that is not answering one.
  static std::chrono::steady_clock::time_point RequestArrival();
  // The event log of GET /v1/events (events.h); shared with the streams that read it.
  EventHub& events() { return *events_; }
  const std::shared_ptr<EventHub>& events_ptr() { return events_; }

 private:
  void Routes();
  // Counts an answer about to go out (every one, whatever wrote it) by its status.
  void CountAnswer(int status);
  bool Authorized(const httplib::Request& req, httplib::Response& res);
  // HoldResponse's work under ctx_mu_; the ids it evicted go to *evicted.
  void HoldResponseLocked(const std::string& id, HeldContext held, std::vector<std::string>* evicted);

  engine::Engine* engine_;
  ServerOptions options_;
  std::unique_ptr<ChatPrompt> chat_prompt_;
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  std::shared_ptr<std::atomic<bool>> listener_exited_ = std::make_shared<std::atomic<bool>>(false);
  std::atomic<bool> shutting_down_{false};
  int port_ = 0;
  std::mutex ctx_mu_;
  std::map<std::string, HeldContext> contexts_;  // GUARDED_BY(ctx_mu_)
  uint64_t next_ctx_ = 1;                         // GUARDED_BY(ctx_mu_)
  uint64_t next_stored_seq_ = 1;                  // GUARDED_BY(ctx_mu_)
  Metrics metrics_;
  std::shared_ptr<EventHub> events_;
  std::unique_ptr<StateWatcher> watcher_;  // tree, pool and stats events (state_view.h), while serving
};

}  // namespace llamay::server

#endif  // LLAMAY_SERVER_SERVER_H_
