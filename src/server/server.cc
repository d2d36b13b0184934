#include "server/server.h"

#include <cstdio>
#include <cstring>
#include <random>

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "base/check.h"
#include "server/chat_prompt.h"
#include "server/chat_completions.h"
#include "server/completions.h"
#include "server/contexts.h"
#include "server/events.h"
#include "server/http_util.h"
#include "server/messages.h"
#include "server/ollama.h"
#include "server/responses.h"
#include "server/state_view.h"
#include "server/webui.h"
#include "store/store.h"

namespace llamay::server {

namespace {
// The request this handler thread is answering: when it arrived (set by the pre-routing handler; unset
// on threads that answer none), and whether the pre-routing handler saw it (the HTTP library answers a
// malformed request line or an oversized URI itself, without routing it).
thread_local std::chrono::steady_clock::time_point t_arrival{};
thread_local bool t_routed = false;
// The status of a refusal sent on to have its body read (Refused), 0 otherwise: the library may set another
// (a 400 for a multipart body it cannot parse) while it reads the body, and the refusal is what is answered.
thread_local int t_refused = 0;
}  // namespace

std::chrono::steady_clock::time_point Server::RequestArrival() {
  return t_arrival != std::chrono::steady_clock::time_point{} ? t_arrival : std::chrono::steady_clock::now();
}

void Server::CountAnswer(int status) {
  if (!t_routed) ++metrics_.requests;  // an answer the library gave without routing: received all the same
  t_routed = false;
  t_arrival = {};
  if (status >= 400) ++metrics_.errors;
  if (status >= 100 && status < static_cast<int>(metrics_.by_status.size())) ++metrics_.by_status[status];
}

int64_t UnixMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Server::Server(engine::Engine* engine, ServerOptions options)
    : engine_(engine),
      options_(std::move(options)),
      chat_prompt_(std::make_unique<ChatPrompt>(*engine, options_.chat_template)),
      http_(std::make_unique<httplib::Server>()),
      events_(std::make_shared<EventHub>()) {
  if (options_.model_name.empty())
    options_.model_name = engine_->model().file().GetStringOr("general.name", "llamay");
}

Server::~Server() { Stop(); }

std::string Server::NewContextId() {
  if (sharing_sessions()) {
    // Ids must be unique across every instance that shares the store.
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    char buf[24];
    std::snprintf(buf, sizeof buf, "ctx_%016llx", static_cast<unsigned long long>(rng()));
    return buf;
  }
  std::lock_guard l(ctx_mu_);
  return "ctx_" + std::to_string(next_ctx_++);
}

size_t Server::ContextLength() const {
  if (engine_->options().max_context > 0) return engine_->options().max_context;
  const auto& file = engine_->model().file();
  const int64_t n = file.GetIntOr(file.GetStringOr("general.architecture", "llama") + ".context_length", 0);
  return n > 0 ? static_cast<size_t>(n) : 0;
}

void Server::PutContext(const std::string& id, HeldContext held) {
  std::lock_guard l(ctx_mu_);
  contexts_[id] = std::move(held);
}

size_t Server::HeldTokens(const std::string& id) {
  std::lock_guard l(ctx_mu_);
  auto it = contexts_.find(id);
  if (it == contexts_.end()) return 0;
  return it->second.busy ? 1 : it->second.tokens();
}

Result<HeldContext> Server::TakeContext(const std::string& id) {
  std::lock_guard l(ctx_mu_);
  auto it = contexts_.find(id);
  if (it == contexts_.end()) return NotFoundError("no context '" + id + "'");
  if (it->second.busy) return FailedPreconditionError("context '" + id + "' is in use by a running request");
  it->second.lent_tokens = it->second.tokens();
  HeldContext out = Held({std::move(it->second.context), std::move(it->second.tail), std::move(it->second.logits)});
  out.generation = it->second.generation;
  it->second.busy = true;
  return out;
}

Status Server::FetchSession(const std::string& id) {
  if (!sharing_sessions() || !engine::SnapshotStore::ValidName(id)) return Status::Ok();
  const Digest& weights = engine_->model().weight_digest();
  uint64_t held = 0;
  bool have = false;
  {
    std::lock_guard l(ctx_mu_);
    if (auto it = contexts_.find(id); it != contexts_.end()) {
      if (it->second.busy) return Status::Ok();  // TakeContext answers for it
      have = true;
      held = it->second.generation;
    }
  }
  // A store that fails here is the store's error, not a busy server's (kDetailStoreError: 502).
  auto store_error = [](const Status& s) { return Status(s.code(), s.message(), kDetailStoreError); };
  Result<std::optional<engine::SessionRecord>> found = options_.store->LatestSession(weights, id);
  if (!found.ok()) return store_error(found.status());
  const std::optional<engine::SessionRecord>& latest = *found;
  if (!latest || (have && latest->generation <= held)) return Status::Ok();
  engine::SessionReceiver receiver(*engine_);
  Status pulled = options_.store->Pull(weights, latest->snapshot, [&](std::span<const uint8_t> piece) {
    return receiver.Feed(piece);
  });
  if (!pulled.ok()) return store_error(pulled);
  LLAMAY_ASSIGN_OR_RETURN(engine::Session session, receiver.Finish());
  std::lock_guard l(ctx_mu_);
  auto it = contexts_.find(id);
  if (it != contexts_.end() && (it->second.busy || it->second.generation >= latest->generation))
    return Status::Ok();  // another request got here first
  // The stored tail runs first (after the snapshot's last token, when the file has no logits and it went
  // back to the tail): stored logits would be the wrong position's.
  session.tail.insert(session.tail.end(), latest->tail.begin(), latest->tail.end());
  if (!session.tail.empty()) session.logits.clear();
  HeldContext& fetched = contexts_[id] = Held(std::move(session));
  fetched.generation = latest->generation;
  return Status::Ok();
}

Status Server::CommitSession(const std::string& id) {
  if (!sharing_sessions()) return Status::Ok();
  auto held = TakeContext(id);
  if (!held.ok()) return Status::Ok();  // deleted, or busy with a newer request that will commit itself
  auto bytes = held->SnapshotBytes(*engine_);
  Status s = bytes.status();
  const uint64_t next = held->generation + 1;
  if (s.ok()) s = options_.store->CommitSession(id, next, *bytes, held->tail);
  if (s.ok()) held->generation = next;
  if (s.detail() == engine::kDetailSessionConflict) {
    std::lock_guard l(ctx_mu_);
    contexts_.erase(id);  // a fork no other instance sees: the store's generation is the session now
    return s;
  }
  ReturnContext(id, std::move(*held));
  return s;
}

void Server::ReturnContext(const std::string& id, HeldContext held) {
  std::unique_lock l(ctx_mu_);
  auto it = contexts_.find(id);
  if (it == contexts_.end()) return;  // deleted meanwhile: the context closes here
  LLAMAY_CHECK(held.context.valid());  // the engine hands a session's context back with every final event
  held.busy = false;
  held.generation = std::max(held.generation, it->second.generation);
  // Who it was forked from and when it was made stay; it was used now. A session that grew (a chat turn)
  // is an event for the page (this may run on the engine's thread: publishing never waits).
  held.parent = std::move(it->second.parent);
  held.created_ms = it->second.created_ms;
  held.last_used_ms = UnixMillis();
  const size_t tokens = held.tokens();
  const bool grew = tokens != it->second.lent_tokens;
  held.lent_tokens = tokens;
  // What the map's entry keeps while its context is lent: a stored response's body, and its place in the
  // eviction order, now the newest (it was just used: a prompt_cache_key's context continued).
  held.response_body = std::move(it->second.response_body);
  held.stored_seq = it->second.stored_seq != 0 ? next_stored_seq_++ : 0;
  it->second = std::move(held);
  l.unlock();
  if (grew) events_->Publish("context.updated", {{"id", id}, {"tokens", tokens}});
}

Result<HeldContext> Server::ForkContext(const std::string& id) {
  std::lock_guard l(ctx_mu_);
  auto it = contexts_.find(id);
  if (it == contexts_.end()) return NotFoundError("no context '" + id + "'");
  if (it->second.busy) return FailedPreconditionError("context '" + id + "' is in use by a running request");
  it->second.last_used_ms = UnixMillis();
  return Held(std::move(it->second.Fork(1)[0]), id);
}

void Server::HoldResponse(const std::string& id, HeldContext held) {
  std::vector<std::string> evicted;
  const size_t tokens = held.context.valid() ? held.tokens() : 0, pages = held.context.valid() ? held.pages() : 0;
  bool replaced;
  {
    std::lock_guard l(ctx_mu_);
    replaced = contexts_.count(id) > 0;
    HoldResponseLocked(id, std::move(held), &evicted);
  }
  // (This runs on the engine's thread when a response finishes: publishing never waits.)
  if (replaced) {
    events_->Publish("context.updated", {{"id", id}, {"tokens", tokens}});
  } else {
    events_->Publish("context.created", {{"id", id}, {"tokens", tokens}, {"pages", pages}});
  }
  for (const std::string& e : evicted) events_->Publish("context.deleted", {{"id", e}});
}

void Server::HoldResponseLocked(const std::string& id, HeldContext held, std::vector<std::string>* evicted) {
  held.stored_seq = next_stored_seq_++;
  contexts_[id] = std::move(held);
  // Their pages are in the prefix tree too (a finished context is retained there), but the tree cannot free
  // a page a held context keeps: the memory they hold is counted from their own bytes, each context's whole
  // (shared pages once per context that holds them, so a chain of continued responses counts more than it
  // holds: older branch points go sooner than they must, never the memory later requests need).
  const size_t budget = engine_->cache().options().max_bytes;
  for (;;) {
    std::string oldest;
    uint64_t oldest_seq = UINT64_MAX;
    size_t stored = 0, bytes = 0;
    for (const auto& [key, h] : contexts_) {
      if ((key.rfind("resp_", 0) != 0 && key.rfind("pck_", 0) != 0) || h.busy) continue;
      ++stored;
      bytes += h.context.valid() ? h.context.bytes() : 0;
      if (key != id && h.stored_seq < oldest_seq) oldest = key, oldest_seq = h.stored_seq;
    }
    if (oldest.empty()) return;
    const bool over = stored > options_.max_stored_responses || (budget > 0 && bytes > budget / 2);
    if (!over) return;
    contexts_.erase(oldest);
    evicted->push_back(oldest);
  }
}

Status Server::SettleTail(HeldContext& held, const std::function<bool()>& stop) {
  Status s = held.Settle(*engine_, stop);
  return s.detail() == engine::kDetailSessionCancelled ? CancelledStatus() : s;
}

bool Server::Authorized(const httplib::Request& req, httplib::Response& res) {
  if (options_.api_key.empty()) return true;
  // OpenAI's clients send a bearer token, Anthropic's an x-api-key header; either carries the key.
  if (req.get_header_value("Authorization") == "Bearer " + options_.api_key) return true;
  if (req.get_header_value("x-api-key") == options_.api_key) return true;
  if (req.path.rfind("/v1/messages", 0) == 0)
    return SendAnthropicError(res, 401, "missing or wrong API key (x-api-key or Authorization: Bearer ...)"), false;
  SendError(res, 401, "missing or wrong API key (Authorization: Bearer ...)", "invalid_api_key");
  return false;
}

namespace {

// See Refused: a path no route of the API has (a NUL in it).
const std::string kRefusedPath = std::string("/\0refused", 9);

bool HasBody(const httplib::Request& req) {
  return req.has_header("Transfer-Encoding") ||
         (req.has_header("Content-Length") && req.get_header_value("Content-Length") != "0");
}

// A refusal written by the pre-routing handler (shutdown, Origin, API key) ends the request before the HTTP
// library reads its body, and httplib keeps the connection: the unread body would be parsed as the
// connection's next request, one that never passed these checks (a page elsewhere could have a browser
// POST a body that is itself a DELETE; found by fuzz/route_fuzz.cc). So a refused request that has a body is
// routed, its refusal already in the response, to a route that lets the library read the body (and drop
// it) first; one without a body ends here.
httplib::Server::HandlerResponse Refused(const httplib::Request& req, const httplib::Response& res) {
  if (!HasBody(req)) return httplib::Server::HandlerResponse::Handled;
  t_refused = res.status;
  // The request object is the library's own (not const there); only its path changes, before routing, and
  // a DELETE's method: httplib reads a DELETE's body only with a Content-Length, a POST's chunked too.
  auto& r = const_cast<httplib::Request&>(req);
  r.path = kRefusedPath;
  if (r.method == "DELETE") r.method = "POST";
  return httplib::Server::HandlerResponse::Unhandled;
}

}  // namespace

void Server::Routes() {
  httplib::Server& h = *http_;
  h.set_payload_max_length(options_.max_body_bytes);
  // Without it a response's separate writes (headers, body) meet the client's delayed ACK on a kept-alive
  // connection: every request after a connection's first took 40 ms more (Nagle).
  h.set_tcp_nodelay(true);
  h.new_task_queue = [n = options_.http_threads] { return new httplib::ThreadPool(static_cast<size_t>(n)); };
  h.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    ++metrics_.requests;
    t_arrival = std::chrono::steady_clock::now();
    t_routed = true;
    t_refused = 0;
    if (shutting_down_) {  // a request on a connection that was open when the shutdown began
      res.set_header("Connection", "close");
      SendError(res, 503, "the server is shutting down", "server_shutting_down");
      return Refused(req, res);
    }
    // A browser sends Origin with every cross-site POST and DELETE, and a page elsewhere must not drive
    // this one (clients that are not browsers send no Origin).
    if (!OriginAllowed(req, options_.host, port_)) {
      SendError(res, 403,
                "cross-origin request refused: Origin " + req.get_header_value("Origin") + " is not this server",
                "forbidden_origin");
      return Refused(req, res);
    }
    // httplib would leave a chunked DELETE's body unread (see Refused); no route takes a body there.
    if (req.method == "DELETE" && req.has_header("Transfer-Encoding")) {
      SendError(res, 400, "a DELETE request's body must come with a Content-Length (no route reads one)");
      return Refused(req, res);
    }
    // The page's own files load without the key (the page asks for it, and sends it on its API calls).
    if (req.path == "/health" || IsWebUiFile(*this, req)) return httplib::Server::HandlerResponse::Unhandled;
    return Authorized(req, res) ? httplib::Server::HandlerResponse::Unhandled : Refused(req, res);
  });
  // Where a refused request with a body goes to have its body read (see Refused), its refusal already in
  // the response. (A client that names this path itself, percent-encoded, gets a 404.)
  auto keep_refusal = [](const httplib::Request&, httplib::Response& res) {
    if (res.status < 400) SendError(res, 404, "no route");
  };
  h.Post(kRefusedPath, keep_refusal);
  h.Put(kRefusedPath, keep_refusal);
  h.Patch(kRefusedPath, keep_refusal);
  h.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (t_refused != 0) {  // the refusal stands, whatever reading its body did
      res.status = t_refused;
      return;
    }
    if (!res.body.empty()) return;  // a handler already wrote an error object
    if (res.status == 404) return SendError(res, 404, "no route " + req.method + " " + req.path);
    if (res.status == 413) return SendError(res, 413, "the request body exceeds the limit of " + std::to_string(options_.max_body_bytes) + " bytes");
    SendError(res, res.status, "request failed");
  });
  // Every answer passes here once, after the route, the error handler or the library wrote it and before
  // it goes out: the one place that counts errors (a client that has its answer finds it counted).
  h.set_post_routing_handler([this](const httplib::Request&, httplib::Response& res) {
    CountAnswer(res.status);
    // After the error handler: a request the library answers without routing it (a malformed one) on this
    // thread next must not find this one's refusal.
    t_refused = 0;
  });
  h.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    SendError(res, 500, what);
  });
  h.Get("/health", [](const httplib::Request&, httplib::Response& res) { SendJson(res, {{"status", "ok"}}); });
  h.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    // The context length under the names clients read it by (vLLM's max_model_len, LM Studio's
    // context_length), and Anthropic's fields, so that either SDK's models.list() reads the entry.
    SendJson(res, {{"object", "list"},
                   {"data", json::array({{{"id", options_.model_name}, {"object", "model"}, {"created", 0},
                                          {"owned_by", "llamay"}, {"context_length", ContextLength()},
                                          {"max_model_len", ContextLength()}, {"type", "model"},
                                          {"display_name", options_.model_name},
                                          {"created_at", "1970-01-01T00:00:00Z"}}})},
                   {"has_more", false}, {"first_id", options_.model_name}, {"last_id", options_.model_name}});
  });
  PostWithBody(h, "/v1/completions", options_.max_body_bytes,
               [this](const httplib::Request& req, httplib::Response& res, const std::string& body) {
                 HandleCompletion(*this, req, body, res);
               });
  PostWithBody(h, "/v1/chat/completions", options_.max_body_bytes,
               [this](const httplib::Request& req, httplib::Response& res, const std::string& body) {
                 HandleChatCompletion(*this, req, body, res);
               });
  PostWithBody(h, "/v1/messages", options_.max_body_bytes,
               [this](const httplib::Request& req, httplib::Response& res, const std::string& body) {
                 HandleMessages(*this, req, body, res);
               });
  PostWithBody(h, "/v1/messages/count_tokens", options_.max_body_bytes,
               [this](const httplib::Request&, httplib::Response& res, const std::string& body) {
                 HandleCountTokens(*this, body, res);
               });
  PostWithBody(h, "/v1/responses", options_.max_body_bytes,
               [this](const httplib::Request& req, httplib::Response& res, const std::string& body) {
                 HandleResponses(*this, req, body, res);
               });
  PostWithBody(h, "/v1/responses/input_tokens", options_.max_body_bytes,
               [this](const httplib::Request&, httplib::Response& res, const std::string& body) {
                 HandleInputTokens(*this, body, res);
               });
  h.Get(R"(/v1/responses/([A-Za-z0-9_]+))", [this](const httplib::Request& req, httplib::Response& res) {
    HandleGetResponse(*this, req.matches[1], res);
  });
  h.Delete(R"(/v1/responses/([A-Za-z0-9_]+))", [this](const httplib::Request& req, httplib::Response& res) {
    HandleDeleteResponse(*this, req.matches[1], res);
  });
  // Claude Code probes the base URL with HEAD / before its first request: the page answers it, or without
  // the page this.
  if (!options_.webui)
    h.Get("/", [](const httplib::Request&, httplib::Response& res) { SendJson(res, {{"status", "ok"}}); });
  h.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    const auto s = engine_->cache().Stats();
    size_t held;
    {
      std::lock_guard l(ctx_mu_);
      held = contexts_.size();
    }
    std::string out;
    auto metric = [&](const char* name, const char* type, double v, const char* help) {
      out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " +
             std::to_string(v) + "\n";
    };
    metric("llamay_requests_total", "counter", metrics_.requests.load(), "HTTP requests received");
    metric("llamay_request_errors_total", "counter", metrics_.errors.load(),
           "HTTP requests answered with a status of 400 or more");
    out.append("# HELP llamay_requests_by_status_total HTTP requests answered, by status code\n"
               "# TYPE llamay_requests_by_status_total counter\n");
    // The statuses llamay answers with are always present, 0 until one is answered: a series that
    // appears at its first increment hides that increment from rate().
    static constexpr size_t kAlwaysShown[] = {200, 304, 400, 401, 403, 404, 409, 413, 429, 500, 502, 503};
    for (size_t code = 100; code < metrics_.by_status.size(); ++code) {
      const uint64_t n = metrics_.by_status[code].load();
      const bool shown =
          std::find(std::begin(kAlwaysShown), std::end(kAlwaysShown), code) != std::end(kAlwaysShown);
      if (n == 0 && !shown) continue;
      out.append("llamay_requests_by_status_total{code=\"").append(std::to_string(code)).append("\"} ");
      out.append(std::to_string(n)).append("\n");
    }
    metric("llamay_prompt_tokens_total", "counter", metrics_.prompt_tokens.load(), "Prompt tokens of completions");
    metric("llamay_cached_prompt_tokens_total", "counter", metrics_.cached_tokens.load(), "Prompt tokens served from cache");
    metric("llamay_completion_tokens_total", "counter", metrics_.completion_tokens.load(), "Generated tokens");
    metric("llamay_kv_pages_live", "gauge", s.pages_live, "KV pages in use");
    metric("llamay_kv_pages_shared", "gauge", s.pages_shared,
           "KV pages with more than one holder (contexts, prefix-tree entries, checkpoints); /v1/state's "
           "pool.pages.shared counts only those a context holds");
    metric("llamay_kv_pages_free", "gauge", s.page_bytes ? s.max_bytes / s.page_bytes - std::min(s.pages_live, s.max_bytes / s.page_bytes) : 0,
           "KV pages the budget still allows");
    metric("llamay_kv_bytes_live", "gauge", s.bytes_live, "Bytes of live KV pages, recurrent states and checkpoints");
    metric("llamay_kv_recurrent_states_live", "gauge", s.states_live,
           "Recurrent states held (live slots and checkpoints; hybrid models)");
    metric("llamay_prefix_tree_checkpoints", "gauge", s.tree_checkpoints,
           "Recurrent checkpoints owned by prefix-tree nodes (hybrid models)");
    metric("llamay_kv_bytes_budget", "gauge", s.max_bytes, "KV memory budget in bytes");
    metric("llamay_prefix_tree_entries", "gauge", s.tree_entries, "Prefix tree entries");
    metric("llamay_prefix_tree_evictions_total", "counter", s.tree_evictions, "Prefix tree evictions");
    metric("llamay_contexts_held", "gauge", held, "Contexts held by /v1/contexts");
    metric("llamay_context_forks_total", "counter", metrics_.forks.load(), "Branches made by /v1/contexts/{id}/fork");
    metric("llamay_context_snapshots_total", "counter", metrics_.snapshots.load(),
           "Snapshots downloaded whole from /v1/contexts/{id}/snapshot");
    metric("llamay_context_restores_total", "counter", metrics_.restores.load(),
           "Contexts restored from snapshots by /v1/contexts/restore");
    metrics_.ttft.Render("llamay_time_to_first_token_seconds",
                         "Seconds from a completion request's arrival to its first generated token", &out);
    metrics_.tpot.Render("llamay_time_per_output_token_seconds",
                         "Seconds per generated token after the first, per completion of 2 tokens or more",
                         &out);
    metrics_.duration.Render("llamay_request_duration_seconds",
                             "Seconds from a completion request's arrival to the end of its generation",
                             &out);
    metric("llamay_queue_depth", "gauge", engine_->queue_depth(), "Requests waiting for the scheduler");
    metric("llamay_requests_active", "gauge", engine_->active(), "Requests the scheduler is running");
    const engine::EngineStats es = engine_->stats();
    metric("llamay_requests_preempted_total", "counter", es.preempted, "Requests that gave back their KV memory and resumed");
    metric("llamay_requests_rejected_total", "counter", es.rejected, "Requests refused with 429 (queue full)");
    metric("llamay_prefix_pins_released_total", "counter", es.unpinned, "Pinned prefixes released to stay within their share");
    metric("llamay_speculative_steps_total", "counter", es.draft_steps, "Decode steps that verified a draft");
    metric("llamay_draft_tokens_total", "counter", es.draft_tokens, "Drafted tokens verified (speculative decoding)");
    metric("llamay_accepted_draft_tokens_total", "counter", es.accepted_draft_tokens,
           "Drafted tokens accepted: generated without a decode step of their own");
    res.set_content(out, "text/plain; version=0.0.4");
  });
  RegisterStateRoutes(*this, h);  // before the context routes: /v1/contexts/{id}/pages
  RegisterContextRoutes(*this, h);
  RegisterOllamaRoutes(*this, h);
  RegisterWebUi(*this, h);  // last: its files answer GETs that no route above took
}

Status Server::Start() {
  Routes();
  if (options_.port == 0) {
    port_ = http_->bind_to_any_port(options_.host);
    if (port_ <= 0) return IoError("cannot bind " + options_.host);
  } else {
    if (!http_->bind_to_port(options_.host, options_.port))
      return IoError("cannot listen on " + options_.host + ":" + std::to_string(options_.port) + " (in use?)");
    port_ = options_.port;
  }
  auto exited = listener_exited_;
  thread_ = std::thread([this, exited] {
    http_->listen_after_bind();
    *exited = true;
  });
  // Until the listener runs, stop() would not reach it and Stop() would wait forever in join.
  while (!http_->is_running() && !*exited) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (*exited) {
    thread_.join();
    return IoError("the HTTP listener on " + options_.host + " stopped at once");
  }
  watcher_ = std::make_unique<StateWatcher>(*this);
  return Status::Ok();
}

void Server::Stop() {
  events_->Close();  // open event streams end now rather than at their next poll
  watcher_.reset();
  if (http_) http_->stop();
  if (thread_.joinable()) thread_.join();
}

void Server::BeginShutdown() {
  shutting_down_ = true;
  events_->Close();
  if (http_) http_->stop();  // closes the listening socket; handlers still running finish below
  engine_->StopAccepting();  // a handler still preparing its request (tokenizing) gets no engine time
  engine_->CancelAll();
}

bool Server::WaitStopped(std::chrono::milliseconds wait) {
  // The listener thread ends after the HTTP library has joined its handler threads.
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (thread_.joinable() && !*listener_exited_) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (thread_.joinable()) thread_.join();
  return true;
}

// --state-dir is a directory snapshot store (docs/store.md): each held context is a snapshot named by its
// id, cut into chunks shared with the others (forks of one context share most of theirs). After a save the
// store holds exactly the contexts held at shutdown. Files of the earlier layout (<id>.llamayctx) still
// load, and are removed once their context is saved again.
Status Server::SaveContexts(const std::string& dir, std::chrono::milliseconds wait) {
  // The shutdown refused new engine work; settling held contexts' tails is the saver's own work.
  engine_->StartAccepting();
  auto opened = store::OpenStore(dir);
  if (!opened.ok()) return opened.status().WithContext("--state-dir");
  engine::SnapshotStore saved(std::move(*opened));
  const Digest& weights = engine_->model().weight_digest();
  // Contexts lent to running requests come back when those finish.
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    {
      std::lock_guard l(ctx_mu_);
      if (std::none_of(contexts_.begin(), contexts_.end(), [](auto& kv) { return kv.second.busy; })) break;
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::vector<std::string> ids;
  {
    std::lock_guard l(ctx_mu_);
    for (auto& [id, h] : contexts_) ids.push_back(id);
  }
  std::string failed;
  auto past_deadline = [deadline] { return std::chrono::steady_clock::now() >= deadline; };
  for (const std::string& id : ids) {
    auto held = TakeContext(id);
    Status s = held.status();
    if (held.ok()) {
      // The snapshot holds every token, so a restored session continues exactly. A long tail (a cancelled
      // prefill's) that cannot be computed before the deadline leaves the context unsaved, and says so.
      s = SettleTail(*held, past_deadline);
      std::vector<uint8_t> bytes;
      if (s.ok()) {
        auto b = held->SnapshotBytes(*engine_);
        s = b.status();
        if (b.ok()) bytes = std::move(*b);
      }
      ReturnContext(id, std::move(*held));
      if (s.ok()) s = saved.Push(id, bytes).status();
      if (s.ok()) std::filesystem::remove(dir + "/" + id + ".llamayctx");  // the earlier layout's file, if any
    }
    if (!s.ok()) failed += (failed.empty() ? "" : "; ") + id + ": " + s.message();
  }
  // Contexts deleted since they were saved or loaded do not come back.
  if (auto listed = saved.List(weights); listed.ok()) {
    for (const auto& stored : *listed)
      if (std::find(ids.begin(), ids.end(), stored.name) == ids.end()) (void)saved.Delete(weights, stored.name);
  }
  if (!failed.empty()) return IoError("not saved: " + failed);
  return Status::Ok();
}

Status Server::LoadContexts(const std::string& dir, std::vector<std::string>* warnings) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return Status::Ok();
  const Digest& weights = engine_->model().weight_digest();
  auto hold = [&](const std::string& id, engine::Session session) {
    std::lock_guard l(ctx_mu_);
    contexts_[id] = Held(std::move(session));
    // Ids continue after the loaded ones (stored responses take theirs from the same counter).
    for (const char* prefix : {"ctx_", "resp_"}) {
      const size_t len = std::strlen(prefix);
      if (id.rfind(prefix, 0) != 0) continue;
      const uint64_t n = std::strtoull(id.c_str() + len, nullptr, 10);
      next_ctx_ = std::max(next_ctx_, n + 1);
    }
  };
  // The earlier layout: one file per context.
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const std::string suffix = ".llamayctx";
    if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    auto session = engine::LoadSession(*engine_, e.path().string());
    if (!session.ok()) {
      warnings->push_back(session.status().message());
      continue;
    }
    hold(name.substr(0, name.size() - suffix.size()), std::move(*session));
  }
  // The store: this model's snapshots (another model's stay where they are).
  auto opened = store::OpenStore(dir);
  if (!opened.ok()) return opened.status().WithContext("--state-dir");
  engine::SnapshotStore saved(std::move(*opened));
  auto listed = saved.List(weights);
  if (!listed.ok()) return listed.status().WithContext("--state-dir");
  for (const auto& stored : *listed) {
    engine::SessionReceiver receiver(*engine_);
    Status pulled = saved.Pull(weights, stored.name, [&](std::span<const uint8_t> piece) { return receiver.Feed(piece); });
    Result<engine::Session> session = pulled.ok() ? receiver.Finish() : Result<engine::Session>(pulled);
    if (!session.ok()) {
      warnings->push_back(stored.name + ": " + session.status().message());
      continue;
    }
    hold(stored.name, std::move(*session));
  }
  return Status::Ok();
}

}  // namespace llamay::server
