#include "server/contexts.h"

#include "kv/snapshot.h"
#include "server/chat_prompt.h"
#include "server/completions.h"
#include "server/connection_watch.h"
#include "server/http_util.h"

namespace llamay::server {
namespace {

json Describe(const std::string& id, const kv::Context& c) {
  return {{"id", id}, {"tokens", c.size()}, {"pages", c.n_pages()}};
}

int SnapshotHttpStatus(kv::SnapshotError e) {
  switch (e) {
    case kv::SnapshotError::kWrongModel:
    case kv::SnapshotError::kGeometry: return 409;
    default: return 400;
  }
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
    auto t = ChatPromptTokens(server, body["messages"], false);
    if (!t.ok()) return SendStatus(res, t.status());
    tokens = std::move(*t);
  } else if (body.contains("prompt")) {
    if (!body["prompt"].is_string()) return SendError(res, 400, "'prompt' must be a string");
    auto t = engine.tokenizer().Encode(body["prompt"].get<std::string>(), true, false);
    if (!t.ok()) return SendStatus(res, t.status());
    tokens = std::move(*t);
  }
  kv::Context ctx;
  std::vector<int32_t> tail;
  if (tokens.empty()) {
    ctx = engine.cache().NewContext();
  } else {
    // Prefill all but the last token; the last one waits as the context's tail, so the first request on
    // it computes its logits (nothing is lost, nothing is computed twice).
    engine::Request r;
    r.prompt.assign(tokens.begin(), tokens.end() - 1);
    tail = {tokens.back()};
    r.max_tokens = 0;
    r.sampling.temperature = 0;
    r.pin_prefix = pin_prefix;
    if (r.prompt.empty()) {
      ctx = engine.cache().NewContext();
    } else {
      // A client that leaves during a long prefill cancels it (within a chunk or so).
      auto c = engine.Generate(std::move(r), /*keep_context=*/true, GoneProbe(WatchConnection(req)));
      if (!c.ok()) return SendStatus(res, c.status());
      if (c->reason == engine::FinishReason::kCancelled) return SendStatus(res, CancelledStatus());
      ctx = std::move(c->context);
    }
  }
  const std::string id = server.NewContextId();
  json out = Describe(id, ctx);
  out["tokens"] = ctx.size() + tail.size();
  server.PutContext(id, HeldContext{std::move(ctx), std::move(tail), false, {}});
  SendJson(res, out);
}

void List(Server& server, httplib::Response& res) {
  json list = json::array();
  std::lock_guard l(server.contexts_mu());
  for (auto& [id, h] : server.contexts()) {
    json d = h.busy ? json{{"id", id}, {"busy", true}} : Describe(id, h.context);
    if (!h.busy) d["tokens"] = h.context.size() + h.tail.size();
    list.push_back(d);
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
    for (long i = 0; i < n; ++i) made.push_back({"", HeldContext{it->second.context.Fork(), it->second.tail, false, it->second.logits}});
  }
  json branches = json::array();
  for (auto& [bid, h] : made) {
    bid = server.NewContextId();
    json d = Describe(bid, h.context);
    d["tokens"] = h.context.size() + h.tail.size();
    branches.push_back(d);
    server.PutContext(bid, std::move(h));
  }
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
  struct Download {
    kv::Context fork;
    std::vector<float> logits;
    kv::SnapshotOptions options;
  };
  auto d = std::make_shared<Download>();
  d->fork = held->context.Fork();
  d->logits = held->logits;
  d->options = SessionSnapshotOptions(*held, f32);
  d->options.logits = d->logits;
  server.ReturnContext(id, std::move(*held));
  const Digest digest = server.engine().model().weight_digest();
  res.set_header("Content-Disposition", "attachment; filename=\"" + id + ".llamayctx\"");
  res.set_chunked_content_provider("application/octet-stream", [d, digest](size_t, httplib::DataSink& sink) {
    struct Out : ByteSink {
      httplib::DataSink* sink;
      Status Append(const void* data, size_t n) override {
        if (sink->write(static_cast<const char*>(data), n)) return Status::Ok();
        return UnavailableError("the client stopped reading the snapshot");
      }
    } out;
    out.sink = &sink;
    if (!kv::WriteSnapshot(d->fork, digest, out, d->options).ok()) return false;  // the connection closes
    sink.done();
    return true;
  });
}

// The upload streams into the cache as it arrives (kv::SnapshotReceiver): no copy of the file is held
// when it is this model's, and the context appears only once every byte has been checked.
void Restore(Server& server, const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
  engine::Engine& engine = server.engine();
  kv::SnapshotReceiver receiver(engine.cache(), engine.model().weight_digest());
  Status fed;
  const bool read = ReadBodyPieces(req, res, reader, server.options().max_body_bytes, [&](const char* data, size_t n) {
    fed = receiver.Feed(std::span(reinterpret_cast<const uint8_t*>(data), n));
    return fed.ok();
  });
  if (!read) return;  // 413 sent
  std::vector<float> logits;
  auto ctx = receiver.Finish(&logits);
  if (!ctx.ok()) {
    const kv::SnapshotError e = kv::SnapshotErrorOf(ctx.status());
    if (e == kv::SnapshotError::kNone) return SendStatus(res, ctx.status());
    return SendError(res, SnapshotHttpStatus(e), ctx.status().message(), std::string("snapshot_") + std::string(kv::SnapshotErrorName(e)));
  }
  const std::string id = server.NewContextId();
  json out = Describe(id, *ctx);
  out["logits"] = !logits.empty();
  server.PutContext(id, HeldContext{std::move(*ctx), {}, false, std::move(logits)});
  SendJson(res, out);
}

void Delete(Server& server, httplib::Response& res, const std::string& id) {
  std::lock_guard l(server.contexts_mu());
  auto it = server.contexts().find(id);
  if (it == server.contexts().end()) return SendError(res, 404, "no context '" + id + "'");
  if (it->second.busy) return SendError(res, 409, "context '" + id + "' is in use by a running request");
  server.contexts().erase(it);
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
  // Fork takes no body (curl -X POST sends none, not even a Content-Length).
  http.Post(R"(/v1/contexts/([^/]+)/fork)",
            [s](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader&) {
              Fork(*s, req, res, req.matches[1]);
            });
  http.Get(R"(/v1/contexts/([^/]+)/snapshot)", [s](const httplib::Request& req, httplib::Response& res) {
    Snapshot(*s, req, res, req.matches[1]);
  });
  http.Delete(R"(/v1/contexts/([^/]+))", [s](const httplib::Request& req, httplib::Response& res) {
    Delete(*s, res, req.matches[1]);
  });
}

}  // namespace llamay::server
