// libFuzzer target: every HTTP route of the real server, in process. At start-up the demo model's engine
// (small limits: 128 positions per context, which bounds every generation, 16-token pages, a 32 MiB KV
// budget, at most 4 requests running and 4 queued, so that a request's `n` choices past about 8 are a 429)
// runs behind a llamay::server::Server (4 tokens per completion unless a request says otherwise, 512 KiB
// bodies, 8 stored responses) on a loopback port, and each input is one request sent to it through an
// httplib::Client (a loopback round trip: the server's code runs in this process, instrumented, on its HTTP
// threads). An input takes well under a second, up to about 2 s on a loaded machine for a generation that
// runs to the end of the context (a Responses request without max_output_tokens).
//
// Input: byte 0 picks the route (modulo the table below: the fixed routes first, so that seeds keep their
// meaning, then an arbitrary path, then one GET per file of the built-in page). Byte 1: bits 0-1 the
// {id} of the path (0: live context A, 1: live context B, a fork of A, 2: a stored response, 3: EXTRA),
// bits 2-4 the Content-Type (0 application/json, 1 none (httplib then sends text/plain), 2 text/plain,
// 3 application/x-www-form-urlencoded, 4 multipart/form-data, 5 application/octet-stream,
// 6 application/json; charset=utf-8, 7 EXTRA), bit 5 Accept: text/event-stream, bit 6 Last-Event-ID: EXTRA,
// bit 7 a chunked body (POST and PUT only). Byte 2: bits 0-2 the method (0-2: the route's own, 3 GET, 4 POST,
// 5 DELETE, 6 HEAD, 7 PUT), bits 3-4 Origin (0 none, 1 this server's, 2 a foreign one, 3 EXTRA), bit 5
// Accept-Encoding: gzip, bit 6 If-None-Match (EXTRA, or * when EXTRA is empty), bit 7 the body padded with
// spaces past the server's body limit (a 413). Then EXTRA, a NUL, the query string, a NUL and the body (the
// rest, NULs included); with fewer than two NULs the rest is the body and EXTRA and the query are empty. A
// GET or HEAD goes without its body (the HTTP library does not read one: its bytes would be the next
// request), and a chunked body only with POST or PUT.
// In EXTRA, the query and the body, "$0", "$1" and "$R" become the live ids (A, B, the stored response), so
// a seed can name them: {"llamay_session": "$0"}, {"previous_response_id": "$R"}. The path's id and an
// arbitrary path are percent-encoded whole (what the server decodes is EXTRA); the query keeps = & % +.
// Route "restore edited" posts a snapshot of A, taken at start-up, with the body applied as edits: two
// bytes (big-endian) scaled to a length to cut it to (0: whole), then per 3 bytes a position (16 bits,
// scaled to the file) and a byte to XOR there.
//
// Properties (each broken one traps with a message naming the request and the answer):
//  - an answer comes within 8 s (streams included; /v1/events is read to its first chunk), and GET /health
//    answers 200 after every input;
//  - no 5xx but 503 for KV memory ("kv cache memory exhausted") and 503 too_many_event_streams on
//    /v1/events: a 500 is always a bug, and without a store or a shutdown 502 and the other 503s cannot be;
//  - every error (status >= 400, HEAD aside) has a JSON body in its surface's shape with a non-empty
//    message: OpenAI {"error": {"message"}} (chat, completions, responses, contexts, state...), Anthropic
//    {"type": "error", "error": {"type", "message"}} (/v1/messages, count_tokens), Ollama {"error": "..."}
//    (/api/chat, /api/generate); answers written before the route's handler runs (403 Origin, 413 body
//    limit, a 400 "request failed" of the HTTP library) are OpenAI-shaped on every route;
//  - an application/json body parses (leading whitespace allowed: a long answer keeps its connection alive
//    with spaces), and a late failure inside a 200 has the surface's error shape, never Anthropic's
//    api_error nor a Responses server_error other than KV memory; every server-sent event's data is JSON (or
//    [DONE]); Chat Completions and Completions streams end with [DONE], Messages streams with message_stop
//    or error, Responses streams with response.completed, .incomplete or .failed, Ollama's NDJSON with a
//    line that is done or an error; /metrics is Prometheus text; a page file is its embedded bytes;
//  - a 200 snapshot (native precision) restores with a 200;
//  - after each input, with the engine idle: the cache's page counts (Stats) equal its pool view's
//    (unique + shared + prefix-tree-only + states, pages and bytes). Every 256 inputs, and whenever more
//    than 48 contexts are held, every held context is DELETEd through the route; then /v1/state says no page
//    is unique or shared (the prefix tree holds every live page), /metrics' llamay_kv_pages_live equals
//    /v1/state's pool, and kv::Cache::CheckInvariants passes. The live contexts are then made again.
// The live ids are restored after any input that deleted or changed them (a session that grew).
// A refused request's body (Origin, API key) is read before the next request on its connection (route_fuzz
// finding 1, fixed): the harness keeps its connection across them.
//
// Build: cmake --preset fuzz && cmake --build build/fuzz --target route_fuzz
// Run:   fuzz/run 600 route_fuzz   (or build/fuzz/fuzz/route_fuzz -max_len=8192 CORPUS_DIR; docs/fuzzing.md)
// ROUTE_FUZZ_VERBOSE=1 prints each request and its status.
#include <httplib.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "gguf/gguf.h"
#include "kv/cache.h"
#include "kv/inspect.h"
#include "model/demo_model.h"
#include "model/model.h"
#include "server/events.h"
#include "server/server.h"
#include "server/web_assets.h"
#include "tokenizer/tokenizer.h"

namespace {

using json = nlohmann::json;
namespace server = llamay::server;
namespace engine = llamay::engine;
namespace kv = llamay::kv;
using Clock = std::chrono::steady_clock;

// Limits that keep an input cheap: a completion holds at most kContext positions (its prompt included),
// whatever max_tokens says, and 64 choices of it fit the KV budget.
constexpr size_t kContext = 128;
constexpr size_t kMaxBody = 512 * 1024;  // above a kContext-token snapshot in f32 (4 layers x 2 KiB x 2)
constexpr int kReadTimeoutS = 8;
constexpr size_t kMaxHeld = 48;
constexpr uint64_t kResetEvery = 256;
constexpr const char* kPromptA = "Pages, forks and the prefix tree: the state engine.";

enum class Kind { kPlain, kEvents, kRestoreEdited, kAnyPath, kWebFile };
enum class Family { kOpenAi, kAnthropic, kOllama };

struct Route {
  const char* method;
  std::string path;  // "{id}" is replaced by the input's id
  Kind kind = Kind::kPlain;
  size_t asset = 0;  // kWebFile: its index in server::kWebAssets
};

// The fixed routes: their indexes are byte 0 of the seeds (fuzz/text_seeds.py), so entries are only added
// at the end.
std::vector<Route> FixedRoutes() {
  return {
      {"GET", "/health"},                                      // 0
      {"GET", "/v1/models"},                                   // 1
      {"POST", "/v1/completions"},                             // 2
      {"POST", "/v1/chat/completions"},                        // 3
      {"POST", "/v1/messages"},                                // 4
      {"POST", "/v1/messages/count_tokens"},                   // 5
      {"POST", "/v1/responses"},                               // 6
      {"POST", "/v1/responses/input_tokens"},                  // 7
      {"GET", "/v1/responses/{id}"},                           // 8
      {"DELETE", "/v1/responses/{id}"},                        // 9
      {"GET", "/metrics"},                                     // 10
      {"GET", "/v1/state"},                                    // 11
      {"GET", "/v1/contexts/{id}/pages"},                      // 12
      {"GET", "/v1/events", Kind::kEvents},                    // 13
      {"POST", "/v1/contexts"},                                // 14
      {"GET", "/v1/contexts"},                                 // 15
      {"POST", "/v1/contexts/restore"},                        // 16
      {"POST", "/v1/contexts/{id}/fork"},                      // 17
      {"POST", "/v1/contexts/{id}/push"},                      // 18
      {"GET", "/v1/store/snapshots"},                          // 19
      {"GET", "/v1/contexts/{id}/snapshot"},                   // 20
      {"DELETE", "/v1/contexts/{id}"},                         // 21
      {"GET", "/api/version"},                                 // 22
      {"GET", "/api/tags"},                                    // 23
      {"GET", "/api/ps"},                                      // 24
      {"POST", "/api/show"},                                   // 25
      {"POST", "/api/chat"},                                   // 26
      {"POST", "/api/generate"},                               // 27
      {"POST", "/v1/contexts/restore", Kind::kRestoreEdited},  // 28
      {"GET", "/"},                                            // 29
      {"GET", "", Kind::kAnyPath},                             // 30: the path is EXTRA
  };
}

Family FamilyOf(const std::string& method, const std::string& path) {
  if (method != "POST") return Family::kOpenAi;
  if (path == "/v1/messages" || path == "/v1/messages/count_tokens") return Family::kAnthropic;
  if (path == "/api/chat" || path == "/api/generate") return Family::kOllama;
  return Family::kOpenAi;
}

// Percent-encodes every byte but the unreserved ones and those in `keep`.
std::string Encode(std::string_view s, std::string_view keep) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' ||
        keep.find(static_cast<char>(c)) != std::string_view::npos) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

// A header value: control bytes (which would end the header or the request) become '?'.
std::string HeaderValue(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return out;
}

void ReplaceAll(std::string* s, std::string_view from, const std::string& to) {
  for (size_t at = 0; (at = s->find(from, at)) != std::string::npos; at += to.size())
    s->replace(at, from.size(), to);
}

bool StartsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// One request as sent, for the checks and the failure report.
struct Sent {
  size_t route = 0;
  Kind kind = Kind::kPlain;
  std::string method, path, target;  // path: as the server decodes it; target: path and query as sent
  httplib::Headers headers;
  std::string content_type;  // empty: none
  std::string body;
  bool chunked = false;
};

struct Answer {
  bool ok = false;
  httplib::Error error = httplib::Error::Success;
  int status = 0;
  httplib::Headers headers;
  std::string body;
  double seconds = 0;
  std::string header(const char* name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

std::string Printable(std::string_view s, size_t max = 1500) {
  std::string out;
  for (unsigned char c : s.substr(0, max)) {
    if (c == '\n')
      out += "\\n";
    else if (c < 0x20 || c >= 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else
      out += static_cast<char>(c);
  }
  if (s.size() > max) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

[[noreturn]] void Fail(const std::string& what, const Sent* s = nullptr, const Answer* a = nullptr) {
  std::fprintf(stderr, "route_fuzz: property failed: %s\n", what.c_str());
  if (s != nullptr) {
    std::fprintf(stderr, "  request (route %zu): %s %s%s\n", s->route, s->method.c_str(), s->target.c_str(),
                 s->chunked ? " (chunked body)" : "");
    for (const auto& [k, v] : s->headers)
      std::fprintf(stderr, "    %s: %s\n", k.c_str(), Printable(v, 200).c_str());
    if (!s->content_type.empty())
      std::fprintf(stderr, "    Content-Type: %s\n", Printable(s->content_type, 200).c_str());
    std::fprintf(stderr, "  body: %s\n", Printable(s->body).c_str());
  }
  if (a != nullptr) {
    std::fprintf(stderr, "  answer: %s, status %d, %.2f s, Content-Type %s\n  %s\n",
                 a->ok ? "received" : httplib::to_string(a->error).c_str(), a->status, a->seconds,
                 a->header("Content-Type").c_str(), Printable(a->body).c_str());
  }
  __builtin_trap();
}

bool NonEmptyString(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() && !j[key].get<std::string>().empty();
}
bool OpenAiError(const json& j) {
  return j.is_object() && j.contains("error") && NonEmptyString(j["error"], "message");
}
bool AnthropicError(const json& j) {
  return j.is_object() && j.value("type", json()) == "error" && j.contains("error") &&
         NonEmptyString(j["error"], "type") && NonEmptyString(j["error"], "message");
}
bool OllamaError(const json& j) { return NonEmptyString(j, "error"); }
bool KvMemoryMessage(const std::string& m) {
  return m.find("kv cache memory exhausted") != std::string::npos;
}

std::string ErrorMessage(const json& j) {
  if (!j.is_object() || !j.contains("error")) return "";
  if (j["error"].is_string()) return j["error"];
  if (j["error"].is_object() && j["error"].contains("message") && j["error"]["message"].is_string())
    return j["error"]["message"];
  return "";
}

class Harness {
 public:
  Harness() {
    // The engine as the server tests build it (server_test_util.h: DemoEngine), with small limits.
    auto file = llamay::gguf::File::FromBuffer(llamay::model::BuildDemoModel());
    if (!file.ok()) Fail("demo model: " + file.status().ToString());
    auto model = llamay::model::Model::FromFile(std::move(*file));
    if (!model.ok()) Fail("demo model: " + model.status().ToString());
    auto tok = llamay::tokenizer::Tokenizer::FromGguf((*model)->file());
    if (!tok.ok()) Fail("demo tokenizer: " + tok.status().ToString());
    engine::EngineOptions eo;
    eo.max_context = kContext;
    eo.page_tokens = 16;
    eo.kv_memory_bytes = size_t{32} << 20;
    // At most 8 requests in the engine: a request's choices are requests of their own, so a larger `n` is
    // refused (429) or cancelled as a full queue refuses it, and one input generates at most about
    // 8 x kContext tokens.
    eo.max_active = 4;
    eo.max_queue = 4;
    auto e = engine::Engine::Create(std::move(*model), std::move(*tok), eo);
    if (!e.ok()) Fail("engine: " + e.status().ToString());
    engine_ = std::move(*e);
    server::ServerOptions so;
    so.port = 0;
    so.max_body_bytes = kMaxBody;
    so.default_max_tokens = 4;
    so.max_stored_responses = 8;
    server_ = std::make_unique<server::Server>(engine_.get(), so);
    if (llamay::Status s = server_->Start(); !s.ok()) Fail("server: " + s.ToString());
    Connect();

    routes_ = FixedRoutes();
    for (size_t i = 0; i < server::kWebAssetCount; ++i)
      if (server::kWebAssets[i].path != nullptr)
        routes_.push_back({"GET", server::kWebAssets[i].path, Kind::kWebFile, i});
    EnsureLive();
    // The snapshot "restore edited" starts from.
    Answer a = Call("GET", "/v1/contexts/" + live_[0] + "/snapshot");
    if (a.status != 200 || a.body.empty()) Fail("a snapshot of the live context at start-up", nullptr, &a);
    snapshot_ = a.body;
    verbose_ = std::getenv("ROUTE_FUZZ_VERBOSE") != nullptr;
    std::atexit([] { Summary(); });
  }

  void RunOne(const uint8_t* data, size_t size) {
    ++inputs_;
    Sent s = Build(data, size);
    Answer a = Send(s);
    if (verbose_)
      std::fprintf(stderr, "route_fuzz: %s %s -> %d (%.3f s)\n", s.method.c_str(),
                   Printable(s.target, 200).c_str(), a.status, a.seconds);
    Record(s, a);
    Check(s, a);
    // The server still answers.
    Answer h = Call("GET", "/health");
    if (h.status != 200 || json::parse(h.body, nullptr, false) != json{{"status", "ok"}})
      Fail("GET /health answers 200 {\"status\": \"ok\"} after the input", &s, &h);
    CheckPages(s);
    size_t held;
    {
      std::lock_guard l(server_->contexts_mu());
      held = server_->contexts().size();
    }
    if (held > kMaxHeld || inputs_ % kResetEvery == 0) Reset();
    EnsureLive();
  }

 private:
  // ---- sending -------------------------------------------------------------------------------------

  void Connect() {
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    client_->set_keep_alive(true);
    client_->set_url_encode(false);  // targets are encoded here
    client_->set_connection_timeout(2, 0);
    client_->set_read_timeout(kReadTimeoutS, 0);
    client_->set_write_timeout(kReadTimeoutS, 0);
  }

  // A request of the harness's own (live contexts, checks): JSON body, own method.
  Answer Call(const std::string& method, const std::string& target, const std::string& body = "") {
    Sent s;
    s.method = method;
    s.path = s.target = target;
    s.body = body;
    if (!body.empty()) s.content_type = "application/json";
    return Send(s);
  }

  Answer SendOnce(const Sent& s) {
    Answer a;
    const auto t0 = Clock::now();
    httplib::Response res;
    if (s.chunked) {
      const std::string body = s.body;
      auto provider = [body](size_t offset, httplib::DataSink& sink) {
        const size_t n = std::min<size_t>(997, body.size() - offset);
        if (n > 0) sink.write(body.data() + offset, n);
        if (offset + n >= body.size()) sink.done();
        return true;
      };
      httplib::Result r = s.method == "PUT"
                              ? client_->Put(s.target.c_str(), s.headers, provider, s.content_type.c_str())
                              : client_->Post(s.target.c_str(), s.headers, provider, s.content_type.c_str());
      a.ok = static_cast<bool>(r);
      a.error = r.error();
      if (r) res = *r;
    } else {
      httplib::Request req;
      req.method = s.method;
      req.path = s.target;
      req.headers = s.headers;
      if (!s.content_type.empty()) req.headers.emplace("Content-Type", s.content_type);
      req.body = s.body;
      if (s.kind == Kind::kEvents) {
        // An endless stream: its headers, then its first chunk (an error body is read whole).
        int status = 0;
        std::string first;
        req.response_handler = [&status](const httplib::Response& r) {
          status = r.status;
          return true;
        };
        req.content_receiver = [&](const char* d, size_t n, uint64_t, uint64_t) {
          first.append(d, n);
          return status != 200;
        };
        a.ok = client_->send(req, res, a.error);
        if (!a.ok && a.error == httplib::Error::Canceled && status == 200) a.ok = true;
        res.body = std::move(first);
        if (a.ok) a.status = status;
      } else {
        a.ok = client_->send(req, res, a.error);
      }
    }
    a.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    if (a.ok) {
      if (a.status == 0) a.status = res.status;
      a.headers = res.headers;
      a.body = std::move(res.body);
    }
    return a;
  }

  Answer Send(const Sent& s) {
    Answer a = SendOnce(s);
    // A connection the server closed as it was reused (keep-alive) fails at once: once more on a new one.
    if (!a.ok && a.seconds < 1.0) {
      Connect();
      a = SendOnce(s);
    }
    if (!a.ok)
      Fail(a.seconds >= kReadTimeoutS - 1 ? "an answer within " + std::to_string(kReadTimeoutS) + " s"
                                          : "the server answers",
           &s, &a);
    return a;
  }

  // ---- the input -----------------------------------------------------------------------------------

  Sent Build(const uint8_t* data, size_t size) {
    Sent s;
    std::string rest;
    uint8_t b0 = 0, b1 = 0, b2 = 0;
    if (size > 0) b0 = data[0];
    if (size > 1) b1 = data[1];
    if (size > 2) b2 = data[2];
    if (size > 3) rest.assign(reinterpret_cast<const char*>(data) + 3, size - 3);
    std::string extra, query, body;
    const size_t nul1 = rest.find('\0');
    const size_t nul2 = nul1 == std::string::npos ? std::string::npos : rest.find('\0', nul1 + 1);
    if (nul2 != std::string::npos) {
      extra = rest.substr(0, nul1);
      query = rest.substr(nul1 + 1, nul2 - nul1 - 1);
      body = rest.substr(nul2 + 1);
    } else {
      body = std::move(rest);
    }
    for (std::string* t : {&extra, &query, &body}) {
      ReplaceAll(t, "$0", live_[0]);
      ReplaceAll(t, "$1", live_[1]);
      ReplaceAll(t, "$R", live_[2]);
    }

    s.route = b0 % routes_.size();
    const Route& r = routes_[s.route];
    s.kind = r.kind;
    // The path.
    const std::string id = (b1 & 3) == 3 ? extra : live_[b1 & 3];
    if (r.kind == Kind::kAnyPath) {
      s.path = "/" + extra;
      s.target = "/" + Encode(extra, "/");
    } else {
      s.path = s.target = r.path;
      if (const size_t at = r.path.find("{id}"); at != std::string::npos) {
        s.path = r.path.substr(0, at) + id + r.path.substr(at + 4);
        s.target = r.path.substr(0, at) + Encode(id, "") + r.path.substr(at + 4);
      }
    }
    if (!query.empty()) s.target += "?" + Encode(query, "=&%+");
    // The method.
    static const char* kMethods[] = {nullptr, nullptr, nullptr, "GET", "POST", "DELETE", "HEAD", "PUT"};
    s.method = kMethods[b2 & 7] != nullptr ? kMethods[b2 & 7] : r.method;
    // Headers.
    static const char* kTypes[] = {"application/json",
                                   "",
                                   "text/plain",
                                   "application/x-www-form-urlencoded",
                                   "multipart/form-data; boundary=llamay",
                                   "application/octet-stream",
                                   "application/json; charset=utf-8",
                                   nullptr};
    const char* type = kTypes[(b1 >> 2) & 7];
    s.content_type = type != nullptr ? type : HeaderValue(extra);
    if (b1 & 0x20) s.headers.emplace("Accept", "text/event-stream");
    if (b1 & 0x40) s.headers.emplace("Last-Event-ID", HeaderValue(extra));
    switch ((b2 >> 3) & 3) {
      case 1:
        s.headers.emplace("Origin", "http://127.0.0.1:" + std::to_string(server_->port()));
        break;
      case 2:
        s.headers.emplace("Origin", "http://evil.example");
        break;
      case 3:
        s.headers.emplace("Origin", HeaderValue(extra));
        break;
      default:
        break;
    }
    if (b2 & 0x20) s.headers.emplace("Accept-Encoding", "gzip");
    if (b2 & 0x40) s.headers.emplace("If-None-Match", extra.empty() ? "*" : HeaderValue(extra));
    // The body.
    s.body = r.kind == Kind::kRestoreEdited ? Edited(body) : body;
    if (b2 & 0x80) s.body.append(kMaxBody + 1 - std::min(kMaxBody, s.body.size()), ' ');
    s.chunked = (b1 & 0x80) && (s.method == "POST" || s.method == "PUT");
    // The HTTP library reads no body of a GET or HEAD: its bytes would be read as the next request.
    if (s.method == "GET" || s.method == "HEAD") s.body.clear();
    if (s.body.empty() && !s.chunked && s.method != "POST" && s.method != "PUT") s.content_type.clear();
    return s;
  }

  // The start-up snapshot of A, cut and XOR-edited as the body says.
  std::string Edited(const std::string& edits) const {
    std::string out = snapshot_;
    if (edits.size() >= 2) {
      const size_t cut = (static_cast<uint8_t>(edits[0]) << 8) | static_cast<uint8_t>(edits[1]);
      if (cut != 0) out.resize(cut * out.size() / 65536);
    }
    for (size_t i = 2; i + 3 <= edits.size() && !out.empty(); i += 3) {
      const size_t at =
          ((static_cast<uint8_t>(edits[i]) << 8) | static_cast<uint8_t>(edits[i + 1])) * out.size() / 65536;
      out[at] = static_cast<char>(out[at] ^ edits[i + 2]);
    }
    return out;
  }

  // ---- the checks ----------------------------------------------------------------------------------

  void Check(const Sent& s, const Answer& a) {
    const bool head = s.method == "HEAD";
    const std::string type = a.header("Content-Type");
    const Family family = FamilyOf(s.method, s.path);
    if (a.status >= 500) {
      const json j = json::parse(a.body, nullptr, false);
      const bool events_full = s.kind == Kind::kEvents && a.status == 503 &&
                               (head || (j.is_object() && j["error"].is_object() &&
                                         j["error"].value("code", json()) == "too_many_event_streams"));
      const bool kv_memory = a.status == 503 && (head || KvMemoryMessage(ErrorMessage(j)));
      if (!events_full && !kv_memory) Fail("no 5xx but 503 for KV memory or too many event streams", &s, &a);
    }
    if (a.status >= 400 && !head) {
      const json j = json::parse(a.body, nullptr, false);
      if (!StartsWith(type, "application/json")) Fail("an error is application/json", &s, &a);
      // Answers written before the route's handler runs are OpenAI's whatever the route: the Origin check
      // (403), the body limit (413, ReadBody or the HTTP library) and the error handler's own.
      const std::string message = ErrorMessage(j);
      const bool before_handler = a.status == 403 || a.status == 413 || message == "request failed" ||
                                  message.rfind("no route ", 0) == 0;
      bool shaped = false;
      switch (family) {
        case Family::kOpenAi:
          shaped = OpenAiError(j);
          break;
        case Family::kAnthropic:
          shaped = AnthropicError(j) || (before_handler && OpenAiError(j));
          break;
        case Family::kOllama:
          shaped = OllamaError(j) || (before_handler && OpenAiError(j));
          break;
      }
      if (!shaped) Fail("an error has its surface's shape and a message", &s, &a);
      return;
    }
    if (head || a.status == 304 || a.status == 204) return;
    if (StartsWith(type, "application/json"))
      CheckJsonAnswer(s, a, family);
    else if (StartsWith(type, "text/event-stream"))
      CheckSse(s, a);
    else if (StartsWith(type, "application/x-ndjson"))
      CheckNdjson(s, a);
    else if (StartsWith(type, "text/plain") && s.path == "/metrics")
      CheckMetrics(s, a);
    if (s.kind == Kind::kWebFile && a.status == 200) {
      const server::WebAsset& asset = server::kWebAssets[routes_[s.route].asset];
      if (a.body != std::string_view(reinterpret_cast<const char*>(asset.data), asset.size))
        Fail("a page file is its embedded bytes", &s, &a);
    }
    if (s.route == 20 && s.kind == Kind::kPlain && s.method == "GET" && a.status == 200 &&
        s.target.find('?') == std::string::npos)
      CheckRestores(s, a);
  }

  void CheckJsonAnswer(const Sent& s, const Answer& a, Family family) {
    const json j = json::parse(a.body, nullptr, false);
    if (j.is_discarded()) Fail("an application/json body parses", &s, &a);
    if (!j.is_object() || !j.contains("error") || j["error"].is_null()) return;
    // A failure after the 200 went out (Respond: the surface's ErrorBody).
    bool shaped = false;
    switch (family) {
      case Family::kOpenAi:
        shaped = OpenAiError(j);
        break;
      case Family::kAnthropic:
        shaped = AnthropicError(j) && j["error"]["type"] != "api_error";
        break;
      case Family::kOllama:
        shaped = OllamaError(j);
        break;
    }
    if (!shaped) Fail("a late failure has its surface's error shape (and is not a 500)", &s, &a);
  }

  void CheckSse(const Sent& s, const Answer& a) {
    if (s.kind == Kind::kEvents) {
      if (!StartsWith(a.body, "retry: ")) Fail("/v1/events begins with retry:", &s, &a);
      return;
    }
    std::string last_data, last_event;
    size_t at = 0;
    while (at < a.body.size()) {
      size_t nl = a.body.find('\n', at);
      if (nl == std::string::npos) nl = a.body.size();
      const std::string_view line(a.body.data() + at, nl - at);
      at = nl + 1;
      if (line.empty() || line[0] == ':' || StartsWith(line, "id: ") || StartsWith(line, "retry: ")) continue;
      if (StartsWith(line, "event: ")) {
        last_event = line.substr(7);
        continue;
      }
      if (!StartsWith(line, "data: "))
        Fail("a server-sent event's line is data, event, id, retry or a comment", &s, &a);
      last_data = line.substr(6);
      if (last_data == "[DONE]") continue;
      const json j = json::parse(last_data, nullptr, false);
      if (j.is_discarded()) Fail("every server-sent event's data is JSON", &s, &a);
      if (j.is_object() && j.contains("error") && !j["error"].is_null()) {
        const bool anthropic = j.value("type", json()) == "error";
        if (anthropic ? !AnthropicError(j) || j["error"]["type"] == "api_error" : !OpenAiError(j))
          Fail("a streamed error has its surface's shape (and is not a 500)", &s, &a);
      }
      if (j.is_object() && j.value("type", json()) == "response.failed") {
        if (!j.contains("response") || !j["response"].is_object() || !j["response"].contains("error"))
          Fail("response.failed carries the response and its error", &s, &a);
        const json& e = j["response"]["error"];
        if (!NonEmptyString(e, "message") ||
            (e.value("code", json()) == "server_error" && !KvMemoryMessage(e["message"])))
          Fail("a failed response says why, and is a server_error only for KV memory", &s, &a);
      }
    }
    const std::string& p = s.path;
    if (p == "/v1/chat/completions" || p == "/v1/completions") {
      if (last_data != "[DONE]") Fail("a Chat Completions or Completions stream ends with [DONE]", &s, &a);
    } else if (p == "/v1/messages") {
      if (last_event != "message_stop" && last_event != "error")
        Fail("a Messages stream ends with message_stop", &s, &a);
    } else if (p == "/v1/responses") {
      if (last_event != "response.completed" && last_event != "response.incomplete" &&
          last_event != "response.failed")
        Fail("a Responses stream ends with response.completed, .incomplete or .failed", &s, &a);
    }
  }

  void CheckNdjson(const Sent& s, const Answer& a) {
    json last;
    size_t at = 0;
    while (at < a.body.size()) {
      size_t nl = a.body.find('\n', at);
      if (nl == std::string::npos) nl = a.body.size();
      const std::string line = a.body.substr(at, nl - at);
      at = nl + 1;
      if (line.empty()) continue;
      last = json::parse(line, nullptr, false);
      if (last.is_discarded()) Fail("every NDJSON line is JSON", &s, &a);
    }
    if (!last.is_object() || (last.value("done", false) != true && !OllamaError(last)))
      Fail("an Ollama stream ends with a line that is done or an error", &s, &a);
  }

  void CheckMetrics(const Sent& s, const Answer& a) {
    size_t at = 0;
    while (at < a.body.size()) {
      size_t nl = a.body.find('\n', at);
      if (nl == std::string::npos) nl = a.body.size();
      const std::string line = a.body.substr(at, nl - at);
      at = nl + 1;
      if (line.empty() || line[0] == '#') continue;
      const size_t sp = line.rfind(' ');
      char* end = nullptr;
      const std::string value = sp == std::string::npos ? "" : line.substr(sp + 1);
      std::strtod(value.c_str(), &end);
      const bool named = sp != std::string::npos && sp > 0 &&
                         (std::isalpha(static_cast<unsigned char>(line[0])) || line[0] == '_');
      if (!named || value.empty() || *end != '\0') Fail("/metrics is Prometheus text: " + line, &s, &a);
    }
  }

  // A snapshot restores, then the restored context goes.
  void CheckRestores(const Sent& s, const Answer& a) {
    Sent r;
    r.method = "POST";
    r.path = r.target = "/v1/contexts/restore";
    r.content_type = "application/octet-stream";
    r.body = a.body;
    Answer got = Send(r);
    if (got.status == 503 && KvMemoryMessage(ErrorMessage(json::parse(got.body, nullptr, false)))) return;
    if (got.status != 200)
      Fail("a snapshot the server wrote restores (" + std::to_string(got.status) + ")", &s, &got);
    const json j = json::parse(got.body, nullptr, false);
    if (!NonEmptyString(j, "id")) Fail("a restore names its context", &s, &got);
    Answer d = Call("DELETE", "/v1/contexts/" + Encode(j["id"].get<std::string>(), ""));
    if (d.status != 200) Fail("a restored context deletes", &s, &d);
  }

  // Waits until no request runs or waits in the engine and no held context is lent.
  bool Idle(std::chrono::milliseconds wait) {
    const auto deadline = Clock::now() + wait;
    for (;;) {
      bool busy = engine_->active() != 0 || engine_->queue_depth() != 0;
      if (!busy) {
        std::lock_guard l(server_->contexts_mu());
        for (const auto& [id, h] : server_->contexts()) busy = busy || h.busy;
      }
      if (!busy) return true;
      if (Clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }

  // The cache's counts and its pool view agree (a page being released is briefly in one and not the other:
  // retried for up to 2 s).
  void CheckPages(const Sent& s) {
    if (!Idle(std::chrono::seconds(3))) Fail("the engine is idle within 3 s of the answer", &s);
    const kv::Cache& cache = engine_->cache();
    std::string why;
    for (int attempt = 0; attempt < 200; ++attempt) {
      const kv::CacheStats st = cache.Stats();
      const kv::PoolView p = cache.InspectPool();
      const size_t pages = p.unique.pages + p.shared.pages + p.prefix_only.pages + p.states;
      const size_t bytes = p.unique.bytes + p.shared.bytes + p.prefix_only.bytes;
      if (st.pages_live == pages && st.bytes_live == p.bytes_live && bytes == p.bytes_live) return;
      why = "pages live " + std::to_string(st.pages_live) + " vs pool " + std::to_string(pages) +
            ", bytes live " + std::to_string(st.bytes_live) + " vs pool " + std::to_string(p.bytes_live) +
            " (summed " + std::to_string(bytes) + ")";
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    Fail("every live page is counted once: " + why, &s);
  }

  // Deletes every held context through the route, then checks that the prefix tree holds every live page.
  void Reset() {
    std::vector<std::string> ids;
    {
      std::lock_guard l(server_->contexts_mu());
      for (const auto& [id, h] : server_->contexts()) ids.push_back(id);
    }
    for (const std::string& id : ids) {
      Answer d = Call("DELETE", "/v1/contexts/" + Encode(id, ""));
      if (d.status != 200 && d.status != 404)
        Fail("DELETE /v1/contexts/" + id + " of a held context", nullptr, &d);
    }
    live_ = {};
    if (!Idle(std::chrono::seconds(3))) Fail("the engine is idle within 3 s of the reset");
    std::string why;
    for (int attempt = 0; attempt < 100; ++attempt) {
      Answer st = Call("GET", "/v1/state");
      Answer me = Call("GET", "/metrics");
      const json j = json::parse(st.body, nullptr, false);
      if (st.status != 200 || !j.is_object() || !j.contains("pool") || !j["pool"].is_object() ||
          !j["pool"].contains("pages") || !j["pool"]["pages"].is_object() || !j.contains("contexts"))
        Fail("GET /v1/state has pool.pages and contexts", nullptr, &st);
      const json& pages = j["pool"]["pages"];
      const size_t unique = pages.value("unique", size_t{1}), shared = pages.value("shared", size_t{1}),
                   prefix = pages.value("prefix_only", size_t{0});
      long live = -1;
      if (const size_t at = me.body.find("\nllamay_kv_pages_live "); at != std::string::npos)
        live = std::atol(me.body.c_str() + at + 22);
      if (unique == 0 && shared == 0 && live == static_cast<long>(prefix) && j["contexts"].empty()) {
        why.clear();
        break;
      }
      why = "unique " + std::to_string(unique) + ", shared " + std::to_string(shared) + ", prefix_only " +
            std::to_string(prefix) + ", /metrics live " + std::to_string(live) + ", contexts " +
            std::to_string(j["contexts"].size());
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!why.empty()) Fail("with no context held, the prefix tree holds every live page: " + why);
    // No request runs and the last event stream closes within 250 ms: nothing else uses the cache.
    for (int i = 0; i < 200 && server_->events().streams() > 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ++resets_;
    if (server_->events().streams() == 0) {
      if (llamay::Status c = engine_->cache().CheckInvariants(); !c.ok())
        Fail("kv::Cache::CheckInvariants: " + c.ToString());
      ++invariant_checks_;
    }
  }

  // The live ids: A (a context of kPromptA), B (a fork of A) and R (a stored response), made again when an
  // input deleted one or changed it (a session continued).
  void EnsureLive() {
    auto held = [this](const std::string& id) { return id.empty() ? 0 : server_->HeldTokens(id); };
    auto drop = [this](const std::string& id) {
      if (!id.empty() && server_->HeldTokens(id) > 0) Call("DELETE", "/v1/contexts/" + Encode(id, ""));
    };
    if (held(live_[0]) == 0 || held(live_[0]) != tokens_[0]) {
      drop(live_[0]);
      Answer a = Call("POST", "/v1/contexts", json{{"prompt", kPromptA}}.dump());
      const json j = json::parse(a.body, nullptr, false);
      if (a.status != 200 || !NonEmptyString(j, "id"))
        Fail("POST /v1/contexts of the live context", nullptr, &a);
      live_[0] = j["id"];
      tokens_[0] = held(live_[0]);
    }
    if (held(live_[1]) == 0 || held(live_[1]) != tokens_[1]) {
      drop(live_[1]);
      Answer a = Call("POST", "/v1/contexts/" + Encode(live_[0], "") + "/fork");
      const json j = json::parse(a.body, nullptr, false);
      if (a.status != 200 || !j.contains("branches") || !j["branches"].is_array() || j["branches"].empty())
        Fail("POST /v1/contexts/{id}/fork of the live context", nullptr, &a);
      live_[1] = j["branches"][0]["id"];
      tokens_[1] = held(live_[1]);
    }
    if (held(live_[2]) == 0 || held(live_[2]) != tokens_[2]) {
      drop(live_[2]);
      Answer a = Call("POST", "/v1/responses", json{{"input", "Hello"}, {"max_output_tokens", 2}}.dump());
      const json j = json::parse(a.body, nullptr, false);
      if (a.status != 200 || !NonEmptyString(j, "id"))
        Fail("POST /v1/responses of the live response", nullptr, &a);
      live_[2] = j["id"];
      tokens_[2] = held(live_[2]);
    }
  }

  // ---- statistics (printed at exit) ----------------------------------------------------------------

  void Record(const Sent& s, const Answer& a) {
    Counts& c = counts_[s.route];
    ++c.n;
    ++c.by_class[std::min(5, std::max(2, a.status / 100))];
  }

  static void Summary();

  struct Counts {
    uint64_t n = 0;
    std::array<uint64_t, 6> by_class{};
  };

  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<server::Server> server_;
  std::unique_ptr<httplib::Client> client_;
  std::vector<Route> routes_;
  std::array<std::string, 3> live_;
  std::array<size_t, 3> tokens_{};
  std::string snapshot_;
  std::map<size_t, Counts> counts_;
  uint64_t inputs_ = 0, resets_ = 0, invariant_checks_ = 0;
  bool verbose_ = false;

  friend Harness& Get();
};

Harness& Get() {
  // Never destroyed: the server's threads outlive the fuzzing loop, and exit() ends them.
  static Harness& h = *new Harness();
  return h;
}

void Harness::Summary() {
  Harness& h = Get();
  // The client first: its kept-alive connection would hold a server thread until it timed out.
  h.client_.reset();
  h.server_->Stop();
  std::fprintf(stderr,
               "route_fuzz: %llu inputs, %llu resets (%llu with CheckInvariants); by route: requests (2xx "
               "3xx 4xx 5xx)\n",
               static_cast<unsigned long long>(h.inputs_), static_cast<unsigned long long>(h.resets_),
               static_cast<unsigned long long>(h.invariant_checks_));
  for (const auto& [route, c] : h.counts_) {
    const Route& r = h.routes_[route];
    std::fprintf(
        stderr, "  %3zu %-7s %-34s %8llu (%llu %llu %llu %llu)\n", route, r.method,
        r.kind == Kind::kAnyPath         ? "(any path)"
        : r.kind == Kind::kRestoreEdited ? "(restore edited)"
                                         : r.path.c_str(),
        static_cast<unsigned long long>(c.n), static_cast<unsigned long long>(c.by_class[2]),
        static_cast<unsigned long long>(c.by_class[3]), static_cast<unsigned long long>(c.by_class[4]),
        static_cast<unsigned long long>(c.by_class[5]));
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  Get();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Get().RunOne(data, size);
  return 0;
}
