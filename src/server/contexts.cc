#include "server/contexts.h"

#include "server/chat_prompt.h"
#include "server/chat_completions.h"
#include "server/connection_watch.h"
#include "server/events.h"
#include "server/http_util.h"
#include "server/structured_output.h"

namespace llamay::server {
namespace {

// tokens: those held and the pending tail.
json Describe(const std::string& id, const engine::Session& s) {
  return {{"id", id}, {"tokens", s.tokens()}, {"pages", s.pages()}};
}

int SnapshotHttpStatus(engine::SnapshotError e) {
  switch (e) {
    case engine::SnapshotError::kWrongModel:
    case engine::SnapshotError::kGeometry: return 409;
    default: return 400;
  }
}

// With a store, a new or changed context is written through at once (another instance may get its next
// request). A failure leaves it held here and says so in the answer.
void CommitNew(Server& server, const std::string& id, json* out) {
  if (!server.sharing_sessions()) return;
  if (Status s = server.CommitSession(id); !s.ok()) (*out)["store_error"] = s.message();
}

void Create(Server& server, const httplib::Request& req, const std::string& raw, httplib::Response& res) {
  json body = json::object();
  if (!raw.empty() && !ParseBody(raw, res, &body)) return;
  engine::Engine& engine = server.engine();
  // Checked here: body.value() would throw on a wrong type (a 500). null means unset, as in completions.
  bool pin_prefix = false;
  if (auto it = body.find("llamay_retain_prefix"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) return SendError(res, 400, "'llamay_retain_prefix' must be a boolean", "", "llamay_retain_prefix");
    pin_prefix = it->get<bool>();
  }
  std::vector<int32_t> tokens;
  if (body.contains("messages")) {
    if (!body["messages"].is_array()) return SendError(res, 400, "'messages' must be an array");
    std::vector<toolcall::ToolSpec> tools;  // a conversation with tools starts with them described
    if (body.contains("tools") && !body["tools"].is_null()) {
      auto parsed = toolcall::ParseTools(OrderedBody(raw)["tools"]);
      if (!parsed.ok()) return SendStatus(res, parsed.status());
      tools = std::move(*parsed);
    }
    auto messages = ParseChatMessages(body["messages"]);
    if (!messages.ok()) return SendStatus(res, messages.status());
    auto t = server.chat_prompt().Tokens(*messages, false, tools);
    if (!t.ok()) return SendStatus(res, t.status());
    tokens = std::move(*t);
  } else if (body.contains("prompt")) {
    if (!body["prompt"].is_string()) return SendError(res, 400, "'prompt' must be a string");
    auto t = engine.tokenizer().Encode(body["prompt"].get<std::string>(), true, false);
    if (!t.ok()) return SendStatus(res, t.status());
    tokens = std::move(*t);
  }
  // All but the last token are prefilled; the last one waits as the session's tail, so the first request
  // on it computes its logits. A client that leaves during a long prefill cancels it (within a chunk or so).
  auto started = engine::Session::Start(engine, tokens, pin_prefix, GoneProbe(WatchConnection(req)));
  if (!started.ok())
    return SendStatus(res, started.status().detail() == engine::kDetailSessionCancelled ? CancelledStatus()
                                                                                           : started.status());
  const std::string id = server.NewContextId();
  json out = Describe(id, *started);
  server.PutContext(id, Held(std::move(*started)));
  CommitNew(server, id, &out);
  server.events().Publish("context.created", {{"id", id}, {"tokens", out["tokens"]}, {"pages", out["pages"]}});
  SendJson(res, out);
}

void List(Server& server, httplib::Response& res) {
  json list = json::array();
  std::lock_guard l(server.contexts_mu());
  for (auto& [id, h] : server.contexts()) {
    list.push_back(h.busy ? json{{"id", id}, {"busy", true}} : Describe(id, h));
  }
  SendJson(res, {{"object", "list"}, {"data", list}});
}

void Fork(Server& server, const httplib::Request& req, httplib::Response& res, const std::string& id) {
  long n = 1;
  if (req.has_param("n")) {
    const std::string v = req.get_param_value("n");
    char* end = nullptr;
    n = std::strtol(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || n < 1 || n > 256) return SendError(res, 400, "n must be an integer in [1, 256]", "", "n");
  }
  std::vector<std::pair<std::string, HeldContext>> made;
  {
    std::lock_guard l(server.contexts_mu());
    auto it = server.contexts().find(id);
    if (it == server.contexts().end()) return SendError(res, 404, "no context '" + id + "'");
    if (it->second.busy) return SendError(res, 409, "context '" + id + "' is in use by a running request");
    for (engine::Session& b : it->second.Fork(static_cast<size_t>(n))) made.push_back({"", Held(std::move(b), id)});
    it->second.last_used_ms = UnixMillis();
  }
  json branches = json::array();
  for (auto& [bid, h] : made) {
    bid = server.NewContextId();
    branches.push_back(Describe(bid, h));
    server.PutContext(bid, std::move(h));
  }
  for (auto& b : branches) CommitNew(server, b["id"].get<std::string>(), &b);
  server.metrics().forks += static_cast<uint64_t>(n);
  json children = json::array();
  for (const auto& b : branches) children.push_back(b["id"]);
  server.events().Publish("context.forked", {{"parent", id}, {"children", children}});
  SendJson(res, {{"parent", id}, {"branches", branches}});
}

void Snapshot(Server& server, const httplib::Request& req, httplib::Response& res, const std::string& id) {
  auto held = server.TakeContext(id);
  if (!held.ok()) return SendStatus(res, held.status());
  // A snapshot holds computed positions: the pending tail runs through the model first. The continuation
  // is unchanged (the next request simply starts after it).
  if (Status s = server.SettleTail(*held); !s.ok()) {
    server.ReturnContext(id, std::move(*held));
    return SendStatus(res, s);
  }
  // The file streams from a fork of the context (shared pages, nothing copied) while the session goes
  // back to its owner at once; the fork closes when the download ends.
  const bool f32 = req.get_param_value("precision") == "f32";
  if (req.has_param("precision") && !f32 && req.get_param_value("precision") != "native")
    return server.ReturnContext(id, std::move(*held)),
           SendError(res, 400, "precision must be native or f32", "", "precision");
  auto fork = std::make_shared<engine::Session>(std::move(held->Fork(1).front()));
  server.ReturnContext(id, std::move(*held));
  const engine::Engine* engine = &server.engine();
  Server* srv = &server;
  res.set_header("Content-Disposition", "attachment; filename=\"" + id + ".llamayctx\"");
  res.set_chunked_content_provider("application/octet-stream", [fork, engine, f32, srv, id](size_t, httplib::DataSink& sink) {
    struct Out : ByteSink {
      httplib::DataSink* sink;
      size_t bytes = 0;
      Status Append(const void* data, size_t n) override {
        bytes += n;
        if (sink->write(static_cast<const char*>(data), n)) return Status::Ok();
        return UnavailableError("the client stopped reading the snapshot");
      }
    } out;
    out.sink = &sink;
    if (!fork->WriteSnapshot(*engine, out, f32).ok()) return false;  // the connection closes
    // Before the last chunk: a client that has the whole file can count on the event being out.
    ++srv->metrics().snapshots;
    srv->events().Publish("context.snapshotted", {{"id", id}, {"bytes", out.bytes}});
    sink.done();
    return true;
  });
}

// A store's failure: what is not there 404, a bad name 400, anything else (unreachable, timed out, 5xx,
// refused credentials, a damaged object) 502 with the store's own message.
void SendStoreError(httplib::Response& res, const Status& s) {
  if (s.code() == StatusCode::kNotFound) return SendError(res, 404, s.message(), "snapshot_not_found");
  if (s.code() == StatusCode::kInvalidArgument) return SendError(res, 400, s.message(), "", "name");
  if (s.code() == StatusCode::kUnavailable) res.set_header("Retry-After", "1");
  SendError(res, 502, s.message(), s.code() == StatusCode::kDataLoss ? "store_object_damaged" : "store_error");
}

bool HaveStore(Server& server, httplib::Response& res) {
  if (server.store() != nullptr) return true;
  SendError(res, 400, "no snapshot store: start the server with --store DIR or --store s3://bucket/prefix", "no_store");
  return false;
}

void SendRestored(Server& server, httplib::Response& res, Result<engine::Session> restored) {
  if (!restored.ok()) {
    const engine::SnapshotError e = engine::SnapshotErrorOf(restored.status());
    if (e == engine::SnapshotError::kNone) return SendStatus(res, restored.status());
    return SendError(res, SnapshotHttpStatus(e), restored.status().message(),
                     std::string("snapshot_") + std::string(engine::SnapshotErrorName(e)));
  }
  const std::string id = server.NewContextId();
  json out = Describe(id, *restored);
  out["logits"] = !restored->logits.empty();
  server.PutContext(id, Held(std::move(*restored)));
  CommitNew(server, id, &out);
  ++server.metrics().restores;
  server.events().Publish("context.restored", {{"id", id}, {"tokens", out["tokens"]}, {"pages", out["pages"]}});
  SendJson(res, out);
}

// {"name": "..."}: the snapshot comes from the store, each chunk verified, streamed into the cache.
void RestoreByName(Server& server, const std::string& name, httplib::Response& res) {
  if (!HaveStore(server, res)) return;
  engine::Engine& engine = server.engine();
  engine::SessionReceiver receiver(engine);
  Status pulled = server.store()->Pull(engine.model().weight_digest(), name,
                                       [&](std::span<const uint8_t> piece) { return receiver.Feed(piece); });
  if (!pulled.ok() && engine::SnapshotErrorOf(pulled) == engine::SnapshotError::kNone)
    return SendStoreError(res, pulled);
  SendRestored(server, res, pulled.ok() ? receiver.Finish() : Result<engine::Session>(pulled));
}

// The upload streams into the cache as it arrives (engine::SessionReceiver): no copy of the file is held
// when it is this model's, and the context appears only once every byte has been checked. A JSON body
// {"name": "..."} restores by name from the store instead (any other body is read as a snapshot file,
// and refused as one).
void Restore(Server& server, const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
  engine::Engine& engine = server.engine();
  engine::SessionReceiver receiver(engine);
  if (req.get_header_value("Content-Type").rfind("application/json", 0) == 0) {
    std::string raw;
    if (!ReadBody(req, res, reader, size_t{1} << 20, &raw)) return;
    const json body = json::parse(raw, nullptr, /*allow_exceptions=*/false);
    if (body.is_object() && body.contains("name")) {
      if (!body["name"].is_string()) return SendError(res, 400, "'name' must be a string", "", "name");
      return RestoreByName(server, body["name"].get<std::string>(), res);
    }
    (void)receiver.Feed(std::span(reinterpret_cast<const uint8_t*>(raw.data()), raw.size()));
    return SendRestored(server, res, receiver.Finish());
  }
  Status fed;
  const bool read = ReadBodyPieces(req, res, reader, server.options().max_body_bytes, [&](const char* data, size_t n) {
    fed = receiver.Feed(std::span(reinterpret_cast<const uint8_t*>(data), n));
    return fed.ok();
  });
  if (!read) return;  // 413 sent
  SendRestored(server, res, receiver.Finish());
}

// Snapshots a held context into the store under {"name"} (default: its id). Only the chunks the store
// lacks are sent; the context is back with its owner before the first byte goes out, and a failed push
// changes nothing of it.
void Push(Server& server, const std::string& raw, httplib::Response& res, const std::string& id) {
  json body = json::object();
  if (!raw.empty() && !ParseBody(raw, res, &body)) return;
  std::string name = id;
  if (auto it = body.find("name"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) return SendError(res, 400, "'name' must be a string", "", "name");
    name = it->get<std::string>();
  }
  if (!engine::SnapshotStore::ValidName(name))
    return SendError(res, 400, "invalid snapshot name '" + name + "' (1 to 128 of A-Z a-z 0-9 . _ -)", "", "name");
  if (!HaveStore(server, res)) return;
  auto held = server.TakeContext(id);
  if (!held.ok()) return SendStatus(res, held.status());
  if (Status s = server.SettleTail(*held); !s.ok()) {
    server.ReturnContext(id, std::move(*held));
    return SendStatus(res, s);
  }
  auto bytes = held->SnapshotBytes(server.engine());
  server.ReturnContext(id, std::move(*held));
  if (!bytes.ok()) return SendStatus(res, bytes.status());
  auto pushed = server.store()->Push(name, *bytes);
  if (!pushed.ok()) return SendStoreError(res, pushed.status());
  SendJson(res, {{"id", id},
                 {"name", name},
                 {"store", server.store()->Describe()},
                 {"bytes", pushed->bytes},
                 {"chunks", pushed->chunks},
                 {"chunks_sent", pushed->chunks_sent},
                 {"bytes_sent", pushed->bytes_sent}});
}

void ListStored(Server& server, httplib::Response& res) {
  if (!HaveStore(server, res)) return;
  auto list = server.store()->List(server.engine().model().weight_digest());
  if (!list.ok()) return SendStoreError(res, list.status());
  json data = json::array();
  for (const auto& s : *list) data.push_back({{"name", s.name}, {"object", "snapshot"}});
  SendJson(res, {{"object", "list"}, {"store", server.store()->Describe()}, {"data", data}});
}

void Delete(Server& server, httplib::Response& res, const std::string& id) {
  std::lock_guard l(server.contexts_mu());
  auto it = server.contexts().find(id);
  if (it == server.contexts().end()) return SendError(res, 404, "no context '" + id + "'");
  if (it->second.busy) return SendError(res, 409, "context '" + id + "' is in use by a running request");
  server.contexts().erase(it);
  server.events().Publish("context.deleted", {{"id", id}});
  SendJson(res, {{"id", id}, {"object", "context"}, {"deleted", true}});
}

}  // namespace

void RegisterContextRoutes(Server& server, httplib::Server& http) {
  Server* s = &server;
  const size_t limit = server.options().max_body_bytes;
  PostWithBody(http, "/v1/contexts", limit, [s](const httplib::Request& req, httplib::Response& res, const std::string& body) {
    Create(*s, req, body, res);
  });
  http.Get("/v1/contexts", [s](const httplib::Request&, httplib::Response& res) { List(*s, res); });
  http.Post("/v1/contexts/restore", [s](const httplib::Request& req, httplib::Response& res,
                                         const httplib::ContentReader& reader) { Restore(*s, req, res, reader); });
  // Fork takes no body (curl -X POST sends none, not even a Content-Length); one that comes is read and
  // dropped: left unread, its bytes would be read as the connection's next request.
  http.Post(R"(/v1/contexts/([^/]+)/fork)",
            [s](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
              if (!ReadBodyPieces(req, res, reader, size_t{1} << 20, [](const char*, size_t) { return true; }))
                return;
              Fork(*s, req, res, req.matches[1]);
            });
  PostWithBody(http, R"(/v1/contexts/([^/]+)/push)", size_t{1} << 20,
               [s](const httplib::Request& req, httplib::Response& res, const std::string& body) {
                 Push(*s, body, res, req.matches[1]);
               });
  http.Get("/v1/store/snapshots", [s](const httplib::Request&, httplib::Response& res) { ListStored(*s, res); });
  http.Get(R"(/v1/contexts/([^/]+)/snapshot)", [s](const httplib::Request& req, httplib::Response& res) {
    Snapshot(*s, req, res, req.matches[1]);
  });
  http.Delete(R"(/v1/contexts/([^/]+))", [s](const httplib::Request& req, httplib::Response& res) {
    Delete(*s, res, req.matches[1]);
  });
}

}  // namespace llamay::server
