// The HTTP server end to end on loopback, over the demo model.
#include "server/server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <future>
#include <thread>

#include "base/file.h"
#include "model/demo_model.h"
#include "server/http_util.h"
#include "server/server_test_util.h"
#include "store/store.h"

namespace llamay::server {
namespace {

using json = nlohmann::json;

TEST_F(ServerTest, HealthModelsAndMetrics) {
  auto h = client_->Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(json::parse(h->body)["status"], "ok");
  auto m = client_->Get("/v1/models");
  ASSERT_TRUE(m);
  EXPECT_EQ(json::parse(m->body)["data"][0]["id"], model::kDemoModelName);
  auto metrics = client_->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("llamay_kv_pages_live"), std::string::npos);
}

TEST_F(ServerTest, CompletionsAreGreedyExactAndReportCachedTokens) {
  json req = {{"prompt", "The quick brown fox"}, {"max_tokens", 12}, {"temperature", 0}};
  json a = Post("/v1/completions", req);
  EXPECT_EQ(a["object"], "text_completion");
  EXPECT_EQ(a["choices"][0]["text"].get<std::string>().size() > 0, true);
  EXPECT_EQ(a["usage"]["completion_tokens"], 12);
  EXPECT_EQ(a["usage"]["llamay_cached_prompt_tokens"], 0);
  json b = Post("/v1/completions", req);
  EXPECT_EQ(b["choices"][0]["text"], a["choices"][0]["text"]);
  EXPECT_EQ(b["usage"]["prompt_tokens_details"]["cached_tokens"], a["usage"]["prompt_tokens"].get<int>() - 1);
}

TEST_F(ServerTest, StreamingDeliversTheSameTextAndEndsWithDone) {
  json req = {{"messages", {{{"role", "user"}, {"content", "hello"}}}}, {"max_tokens", 10}, {"temperature", 0}};
  json whole = Post("/v1/chat/completions", req);
  EXPECT_EQ(whole["object"], "chat.completion");
  req["stream"] = true;
  req["stream_options"] = {{"include_usage", true}};
  auto r = client_->Post("/v1/chat/completions", req.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  std::string text;
  bool usage = false;
  size_t pos = 0;
  std::string last;
  while ((pos = r->body.find("data: ", pos)) != std::string::npos) {
    const size_t end = r->body.find("\n\n", pos);
    last = r->body.substr(pos + 6, end - pos - 6);
    pos = end;
    if (last == "[DONE]") break;
    json chunk = json::parse(last);
    if (chunk.contains("usage")) usage = true;
    for (const auto& c : chunk["choices"])
      if (c["delta"].contains("content")) text += c["delta"]["content"].get<std::string>();
  }
  EXPECT_EQ(last, "[DONE]");
  EXPECT_TRUE(usage);
  EXPECT_EQ(text, whole["choices"][0]["message"]["content"]);
}

TEST_F(ServerTest, NChoicesShareOnePrefill) {
  json r = Post("/v1/completions", {{"prompt", "abcdefgh"}, {"max_tokens", 6}, {"temperature", 0}, {"n", 3}});
  ASSERT_EQ(r["choices"].size(), 3u);
  EXPECT_EQ(r["choices"][0]["text"], r["choices"][1]["text"]);  // greedy: identical branches
  EXPECT_EQ(r["choices"][1]["text"], r["choices"][2]["text"]);
  EXPECT_EQ(r["usage"]["completion_tokens"], 18);
}

TEST_F(ServerTest, ContextsForkAndContinueExactly) {
  json ctx = Post("/v1/contexts", {{"prompt", "a long shared system prompt"}});
  const std::string id = ctx["id"];
  EXPECT_EQ(id, "ctx_1");
  EXPECT_GT(ctx["tokens"].get<int>(), 10);
  json fork = Post("/v1/contexts/" + id + "/fork?n=4", json::object());
  ASSERT_EQ(fork["branches"].size(), 4u);
  const std::vector<int32_t> more = {70, 71, 72};  // continuation tokens (prompts may be token arrays)
  std::vector<std::string> texts;
  for (const auto& b : fork["branches"]) {
    EXPECT_EQ(b["tokens"], ctx["tokens"]);
    texts.push_back(Completion({{"prompt", more}, {"max_tokens", 8}, {"temperature", 0}, {"logprobs", 3}, {"llamay_session", b["id"]}}));
  }
  const std::string parent =
      Completion({{"prompt", more}, {"max_tokens", 8}, {"temperature", 0}, {"logprobs", 3}, {"llamay_session", id}});
  for (const auto& t : texts) EXPECT_EQ(t, parent);
  // Without a session, the same tokens from scratch give the same continuation.
  auto full = *engine_->tokenizer().Encode("a long shared system prompt", true, false);
  full.insert(full.end(), more.begin(), more.end());
  EXPECT_EQ(Completion({{"prompt", full}, {"max_tokens", 8}, {"temperature", 0}, {"logprobs", 3}}), parent);
  auto list = client_->Get("/v1/contexts");
  ASSERT_TRUE(list);
  EXPECT_EQ(json::parse(list->body)["data"].size(), 5u);
  auto del = client_->Delete(("/v1/contexts/" + id).c_str());
  ASSERT_TRUE(del);
  EXPECT_EQ(del->status, 200);
}

TEST_F(ServerTest, SnapshotRestoresOnAFreshServerAndContinuesExactly) {
  json ctx = Post("/v1/contexts", {{"prompt", "remember this context"}});
  const std::string id = ctx["id"];
  auto snap = client_->Get(("/v1/contexts/" + id + "/snapshot").c_str());
  ASSERT_TRUE(snap);
  ASSERT_EQ(snap->status, 200);
  const std::vector<int32_t> next = {80, 81};
  const std::string want =
      Completion({{"prompt", next}, {"max_tokens", 10}, {"temperature", 0}, {"logprobs", 3}, {"llamay_session", id}});
  // A fresh server, with 128-token pages.
  server_.reset();
  engine_.reset();
  engine::EngineOptions eo;
  eo.page_tokens = 128;
  engine_ = DemoEngine(eo);
  ServerOptions so;
  so.port = 0;
  server_ = std::make_unique<Server>(engine_.get(), so);
  ASSERT_TRUE(server_->Start().ok());
  client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
  auto r = client_->Post("/v1/contexts/restore", snap->body, "application/octet-stream");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const std::string rid = json::parse(r->body)["id"];
  EXPECT_EQ(Completion({{"prompt", next}, {"max_tokens", 10}, {"temperature", 0}, {"logprobs", 3}, {"llamay_session", rid}}),
            want);
  // Damaged and foreign snapshots are refused distinctly.
  std::string bad = snap->body;
  bad[bad.size() / 2] ^= 1;
  auto damaged = client_->Post("/v1/contexts/restore", bad, "application/octet-stream");
  ASSERT_TRUE(damaged);
  EXPECT_EQ(damaged->status, 400);
  EXPECT_EQ(json::parse(damaged->body)["error"]["code"], "snapshot_checksum_mismatch");
  auto cut = client_->Post("/v1/contexts/restore", snap->body.substr(0, 100), "application/octet-stream");
  EXPECT_EQ(json::parse(cut->body)["error"]["code"], "snapshot_truncated");
}

// A snapshot carries the next token's logits: a restored session continues with an empty prompt, with
// no forward pass, exactly as the original continues. It is written at the cache's precision unless
// ?precision=f32 asks for the portable one, and a restored context says whether it holds logits.
TEST_F(ServerTest, RestoredSnapshotsSampleTheirFirstTokenFromStoredLogits) {
  json ctx = Post("/v1/contexts", {{"prompt", "an agent's long system prompt"}});
  const std::string id = ctx["id"];
  auto snap = client_->Get(("/v1/contexts/" + id + "/snapshot").c_str());
  ASSERT_TRUE(snap);
  ASSERT_EQ(snap->status, 200);
  auto f32 = client_->Get(("/v1/contexts/" + id + "/snapshot?precision=f32").c_str());
  ASSERT_TRUE(f32);
  ASSERT_EQ(f32->status, 200);
  auto native = kv::InspectSnapshot(std::span(reinterpret_cast<const uint8_t*>(snap->body.data()), snap->body.size()));
  auto portable = kv::InspectSnapshot(std::span(reinterpret_cast<const uint8_t*>(f32->body.data()), f32->body.size()));
  ASSERT_TRUE(native.ok() && portable.ok());
  EXPECT_EQ(native->precision, kv::KvPrecision::kF16);
  EXPECT_EQ(portable->precision, kv::KvPrecision::kF32);
  EXPECT_EQ(native->n_logits, engine_->model().hparams().n_vocab);
  EXPECT_LT(snap->body.size(), f32->body.size());
  auto bad = client_->Get(("/v1/contexts/" + id + "/snapshot?precision=bf12").c_str());
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  // The original continues from its pending last token; each restore from the stored logits.
  const json go = {{"max_tokens", 10}, {"temperature", 0}, {"logprobs", 3}};
  json a = go, b = go, c = go;
  a["prompt"] = "";
  a["llamay_session"] = id;
  const std::string want = Completion(a);
  for (const auto* body : {&snap->body, &f32->body}) {
    auto r = client_->Post("/v1/contexts/restore", *body, "application/octet-stream");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json restored = json::parse(r->body);
    EXPECT_EQ(restored["logits"], true);
    b["prompt"] = "";
    b["llamay_session"] = restored["id"];
    EXPECT_EQ(Completion(b), want);
  }
  // A context restored without logits (none stored) runs its last stored token again: the same continuation.
  auto plain = kv::SnapshotToBytes(*kv::RestoreSnapshot(engine_->cache(),
                                                         std::span(reinterpret_cast<const uint8_t*>(snap->body.data()), snap->body.size()),
                                                         engine_->model().weight_digest()),
                                   engine_->model().weight_digest());
  ASSERT_TRUE(plain.ok());
  auto r = client_->Post("/v1/contexts/restore", std::string(plain->begin(), plain->end()), "application/octet-stream");
  ASSERT_TRUE(r);
  const json restored = json::parse(r->body);
  EXPECT_EQ(restored["logits"], false);
  c["prompt"] = "";
  c["llamay_session"] = restored["id"];
  EXPECT_EQ(restored["tokens"], ctx["tokens"]);
  EXPECT_EQ(Completion(c), want);
}

// Push to a directory store and restore by name: the restored session continues exactly (empty prompt, from
// the stored logits); a fork's push sends only the chunks the store lacks; every failure is a clear error
// that leaves the held context as it was.
TEST_F(ServerTest, PushAndRestoreByNameThroughAStore) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("llamay_server_store_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto opened = store::OpenStore(dir.string());
  ASSERT_TRUE(opened.ok());
  engine::SnapshotStore snapshots(std::move(*opened));
  // Without a store: a clear 400.
  json none = Post("/v1/contexts", {{"prompt", "x"}});
  EXPECT_EQ(Post("/v1/contexts/" + none["id"].get<std::string>() + "/push", json::object(), 400)["error"]["code"], "no_store");
  ServerOptions so;
  so.store = &snapshots;
  Start(so);
  std::string long_prompt;
  for (int i = 0; i < 80; ++i) long_prompt += "an agent's tool output, line " + std::to_string(i) + "\n";
  json ctx = Post("/v1/contexts", {{"prompt", long_prompt}});
  const std::string id = ctx["id"];
  json pushed = Post("/v1/contexts/" + id + "/push", {{"name", "base"}});
  EXPECT_EQ(pushed["name"], "base");
  EXPECT_GT(pushed["chunks"].get<int>(), 1);
  EXPECT_EQ(pushed["chunks_sent"], pushed["chunks"]);
  // The same again sends no chunk.
  EXPECT_EQ(Post("/v1/contexts/" + id + "/push", {{"name", "base"}})["chunks_sent"], 0);
  const json go = {{"prompt", ""}, {"max_tokens", 8}, {"temperature", 0}, {"logprobs", 3}};
  json a = go;
  a["llamay_session"] = id;
  const std::string want = Completion(a);
  json restored = Post("/v1/contexts/restore", {{"name", "base"}});
  EXPECT_EQ(restored["logits"], true);
  EXPECT_EQ(restored["tokens"], ctx["tokens"]);
  json b = go;
  b["llamay_session"] = restored["id"];
  EXPECT_EQ(Completion(b), want);
  // A fork that grew: only the chunks past the shared prefix are new.
  json fork = Post("/v1/contexts/" + id + "/fork", json::object());
  const std::string branch = fork["branches"][0]["id"];
  json more = go;
  more["prompt"] = " and then the next turn";
  more["llamay_session"] = branch;
  Completion(more);
  json pb = Post("/v1/contexts/" + branch + "/push", {{"name", "branch"}});
  EXPECT_LT(pb["chunks_sent"].get<int>(), pb["chunks"].get<int>());
  EXPECT_GE(pb["chunks_sent"].get<int>(), 1);
  auto list = client_->Get("/v1/store/snapshots");
  ASSERT_TRUE(list);
  EXPECT_EQ(json::parse(list->body)["data"].size(), 2u);
  // Failures.
  EXPECT_EQ(Post("/v1/contexts/restore", {{"name", "missing"}}, 404)["error"]["code"], "snapshot_not_found");
  EXPECT_EQ(Post("/v1/contexts/restore", {{"name", "../x"}}, 400)["error"]["param"], "name");
  EXPECT_EQ(Post("/v1/contexts/" + id + "/push", {{"name", "a/b"}}, 400)["error"]["param"], "name");
  Post("/v1/contexts/nope/push", {{"name", "n"}}, 404);
  for (auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file() || e.path().string().find("/chunks/") == std::string::npos) continue;
    std::filesystem::resize_file(e.path(), std::filesystem::file_size(e.path()) - 1);  // damage every chunk
  }
  EXPECT_EQ(Post("/v1/contexts/restore", {{"name", "base"}}, 502)["error"]["code"], "store_object_damaged");
  // The held context is untouched by all of it.
  json d = go;
  d["prompt"] = json::array({70});
  d["llamay_session"] = id;
  EXPECT_EQ(Post("/v1/completions", d)["choices"][0]["finish_reason"], "length");
  std::filesystem::remove_all(dir);
}

// Issue 11, found by trying the server as a new user would: content as an array of parts, lone UTF-16
// surrogates in JSON strings, and a context-size limit.
TEST_F(ServerTest, ContentPartsAreJoinedAndOtherPartTypesRefused) {
  const json plain = {{"messages", {{{"role", "user"}, {"content", "hello\nworld"}}}}, {"max_tokens", 6},
                      {"temperature", 0}, {"logprobs", true}, {"top_logprobs", 2}};
  json parts = plain;
  parts["messages"][0]["content"] = json::array({{{"type", "text"}, {"text", "hello"}}, {{"type", "text"}, {"text", "world"}}});
  const json a = Post("/v1/chat/completions", plain), b = Post("/v1/chat/completions", parts);
  EXPECT_EQ(a["choices"][0]["logprobs"], b["choices"][0]["logprobs"]);
  EXPECT_EQ(a["usage"]["prompt_tokens"], b["usage"]["prompt_tokens"]);
  json image = plain;
  image["messages"][0]["content"] = json::array({{{"type", "image_url"}, {"image_url", {{"url", "data:"}}}}});
  EXPECT_NE(Post("/v1/chat/completions", image, 400)["error"]["message"].get<std::string>().find("'image_url'"),
            std::string::npos);
  json bad = plain;
  bad["messages"][0]["content"] = json::array({{{"text", "no type"}}});
  Post("/v1/chat/completions", bad, 400);
}

TEST_F(ServerTest, LoneSurrogatesInJsonReadAsReplacementCharacters) {
  // Raw bodies: a lone high surrogate, a lone low one, a valid pair, and an escaped backslash before 'u'.
  auto post = [&](const std::string& prompt_json) {
    auto r = client_->Post("/v1/completions",
                           "{\"prompt\": " + prompt_json + ", \"max_tokens\": 2, \"temperature\": 0, \"echo\": true}",
                           "application/json");
    EXPECT_TRUE(r);
    return r ? std::make_pair(r->status, json::parse(r->body, nullptr, false)) : std::make_pair(0, json());
  };
  for (const char* p : {R"("a\ud800b")", R"("a\udc00b")", R"("x\ud800")"}) {
    auto [status, body] = post(p);
    EXPECT_EQ(status, 200) << p << ": " << body.dump();
    EXPECT_NE(body["choices"][0]["text"].get<std::string>().find("\xEF\xBF\xBD"), std::string::npos) << p;
  }
  auto [pair_status, pair] = post(R"("\ud83d\ude00")");
  EXPECT_EQ(pair_status, 200);
  EXPECT_EQ(pair["choices"][0]["text"].get<std::string>().rfind("\xF0\x9F\x98\x80", 0), 0u);
  auto [esc_status, esc] = post(R"("\\ud800")");  // a backslash, then the letters "ud800"
  EXPECT_EQ(esc_status, 200);
  EXPECT_EQ(esc["choices"][0]["text"].get<std::string>().rfind("\\ud800", 0), 0u);
  EXPECT_EQ(post(R"("broken)").first, 400);
  EXPECT_EQ(ReplaceLoneSurrogates(R"({"a":"\uD800\uDC00","b":"\uDBFF","c":"\\uD800"})"),
            R"({"a":"\uD800\uDC00","b":"\uFFFD","c":"\\uD800"})");
}

TEST_F(ServerTest, RequestsBeyondTheContextSizeAreRefusedAndGenerationStopsAtIt) {
  engine::EngineOptions eo;
  eo.max_context = 64;
  Start({}, eo);
  std::vector<int32_t> long_prompt(80, 70);
  json r = Post("/v1/completions", {{"prompt", long_prompt}, {"max_tokens", 4}}, 400);
  EXPECT_EQ(r["error"]["code"], "context_length_exceeded");
  EXPECT_NE(r["error"]["message"].get<std::string>().find("context size of 64"), std::string::npos);
  // Generation that reaches the limit ends with "length".
  std::vector<int32_t> prompt(60, 71);
  json ok = Post("/v1/completions", {{"prompt", prompt}, {"max_tokens", 50}, {"temperature", 0}, {"ignore_eos", true}});
  EXPECT_EQ(ok["choices"][0]["finish_reason"], "length");
  EXPECT_LE(ok["usage"]["completion_tokens"].get<int>(), 5);
  // A session that would grow past it: refused, and left as it was.
  json ctx = Post("/v1/contexts", {{"prompt", std::string(40, 'a')}});
  std::vector<int32_t> more(30, 72);
  json refused = Post("/v1/completions", {{"prompt", more}, {"max_tokens", 2}, {"llamay_session", ctx["id"]}}, 400);
  EXPECT_EQ(refused["error"]["code"], "context_length_exceeded");
  Post("/v1/completions", {{"prompt", std::vector<int32_t>{73}}, {"max_tokens", 2}, {"llamay_session", ctx["id"]}});
}

// Two instances sharing one store (--share-sessions): a session alternating between them continues exactly
// as on one instance; a commit that loses to another instance's is detected, not silently forked.
TEST(SharedSessions, ASessionAlternatingBetweenInstancesContinuesExactly) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("llamay_shared_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto opened = store::OpenStore(dir.string());
  ASSERT_TRUE(opened.ok());
  engine::SnapshotStore snapshots(std::move(*opened));
  struct Instance {
    std::unique_ptr<engine::Engine> engine;
    std::unique_ptr<Server> server;
    std::unique_ptr<httplib::Client> client;
  };
  auto start = [&](bool shared) {
    Instance i;
    i.engine = DemoEngine();
    ServerOptions o;
    o.port = 0;
    if (shared) {
      o.store = &snapshots;
      o.share_sessions = true;
    }
    i.server = std::make_unique<Server>(i.engine.get(), o);
    EXPECT_TRUE(i.server->Start().ok());
    i.client = std::make_unique<httplib::Client>("127.0.0.1", i.server->port());
    i.client->set_read_timeout(kClientTimeoutSeconds, 0);
    return i;
  };
  auto post = [](Instance& i, const std::string& path, const json& body) {
    auto r = i.client->Post(path.c_str(), body.dump(), "application/json");
    EXPECT_TRUE(r);
    EXPECT_EQ(r ? r->status : 0, 200) << path << ": " << (r ? r->body : "");
    return r ? json::parse(r->body, nullptr, false) : json();
  };
  Instance a = start(true), b = start(true), single = start(false);
  const std::vector<std::string> turns = {" first tool result", " second tool result", " third", " fourth"};
  auto run = [&](std::vector<Instance*> route) {
    json ctx = post(*route[0], "/v1/contexts", {{"prompt", "an agent's system prompt"}});
    std::string out;
    for (size_t t = 0; t < turns.size(); ++t) {
      json c = post(*route[(t + 1) % route.size()], "/v1/completions",
                    {{"prompt", turns[t]}, {"max_tokens", 6}, {"temperature", 0}, {"logprobs", 2},
                     {"llamay_session", ctx["id"]}});
      EXPECT_FALSE(c.contains("error")) << c.dump();
      out += c["choices"][0]["text"].get<std::string>() + c["choices"][0]["logprobs"].dump();
    }
    return std::make_pair(ctx["id"].get<std::string>(), out);
  };
  const auto [alone_id, alone] = run({&single});
  const auto [id, alternating] = run({&a, &b});
  EXPECT_EQ(alternating, alone);
  EXPECT_EQ(alone_id, "ctx_1");
  EXPECT_EQ(id.size(), 4u + 16u) << id;  // ctx_ and 16 hex digits: unique across instances
  auto latest = snapshots.LatestSession(a.engine->model().weight_digest(), id);
  ASSERT_TRUE(latest.ok() && latest->has_value());
  EXPECT_EQ((*latest)->generation, 1u + turns.size());
  // A lost race: another instance commits the next generation first; this one's commit is refused and its
  // copy dropped, and the next request here continues from the store's generation.
  // a ran the last turn (generation 5); b fetches it, and both continue generation 5 at once: b's copy
  // grows a token while a commits 6 first.
  ASSERT_TRUE(b.server->FetchSession(id).ok());
  auto held = b.server->TakeContext(id);
  ASSERT_TRUE(held.ok());
  held->tail.push_back(70);
  b.server->ReturnContext(id, std::move(*held));
  ASSERT_TRUE(a.server->CommitSession(id).ok());
  Status lost = b.server->CommitSession(id);
  EXPECT_EQ(lost.detail(), engine::kDetailSessionConflict) << lost.ToString();
  EXPECT_FALSE(b.server->TakeContext(id).ok()) << "the losing copy should be dropped";
  json next = post(b, "/v1/completions", {{"prompt", " after"}, {"max_tokens", 2}, {"llamay_session", id}});
  EXPECT_FALSE(next.contains("error")) << next.dump();
  std::filesystem::remove_all(dir);
}

TEST_F(ServerTest, BadInputGetsErrorObjectsAndLeavesTheServerUp) {
  auto r = client_->Post("/v1/completions", "{not json", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(json::parse(r->body)["error"]["type"], "invalid_request_error");
  Post("/v1/completions", {{"prompt", 5}}, 400);
  // null means "unset", as OpenAI clients send it; a wrong type is a 400, never a 500.
  Post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}, {"temperature", nullptr}, {"stop", nullptr}});
  Post("/v1/completions", {{"prompt", "x"}, {"temperature", "hot"}}, 400);
  Post("/v1/completions", {{"prompt", "x"}, {"max_tokens", -1}}, 400);
  Post("/v1/completions", {{"prompt", "x"}, {"temperature", -2}}, 400);
  // Wrong types and ranges are named, never ignored.
  Post("/v1/completions", {{"prompt", "x"}, {"n", 0}}, 400);  // 0 arrives as an unsigned JSON number
  Post("/v1/completions", {{"prompt", "x"}, {"n", 65}}, 400);
  Post("/v1/completions", {{"prompt", "x"}, {"max_tokens", UINT64_MAX}}, 400);
  Post("/v1/completions", {{"prompt", "x"}, {"max_completion_tokens", 1.5}}, 400);
  Post("/v1/completions", {{"prompt", "x"}, {"seed", "x"}}, 400);
  Post("/v1/completions", {{"prompt", "x"}, {"logprobs", "x"}}, 400);
  Post("/v1/completions", {{"prompt", "x"}, {"logprobs", -1}}, 400);
  Post("/v1/completions", {{"prompt", "x"}, {"logprobs", 21}}, 400);
  Post("/v1/completions", {{"prompt", "x"}, {"stream_options", 5}}, 400);
  Post("/v1/completions", {{"prompt", "x"}, {"top_k", 1e20}}, 400);
  Post("/v1/completions", {{"prompt", "x"}, {"top_k", 2.5}}, 400);
  Post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"logprobs", true}, {"top_logprobs", -3}},
       400);
  json neg_seed = Post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}, {"seed", -1}, {"top_k", 5}});
  EXPECT_EQ(neg_seed["usage"]["completion_tokens"], 2);
  Post("/v1/chat/completions", {{"messages", json::array()}}, 400);
  Post("/v1/completions", {{"prompt", "x"}, {"llamay_session", "ctx_404"}}, 404);
  Post("/v1/contexts/ctx_9/fork?n=2", json::object(), 404);
  json c = Post("/v1/contexts", {{"prompt", "x"}});
  Post("/v1/contexts/" + c["id"].get<std::string>() + "/fork?n=0", json::object(), 400);
  Post("/v1/contexts/" + c["id"].get<std::string>() + "/fork?n=100000", json::object(), 400);
  auto nf = client_->Get("/v1/nothing");
  ASSERT_TRUE(nf);
  EXPECT_EQ(nf->status, 404);
  auto big = client_->Post("/v1/completions", std::string(2 << 20, 'x'), "application/json");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  // Still serving.
  // Greedy: a sampled answer may end at the end-of-text token after one.
  const json ok = {{"prompt", "ok"}, {"max_tokens", 2}, {"temperature", 0}};
  EXPECT_EQ(Post("/v1/completions", ok)["usage"]["completion_tokens"], 2);
  EXPECT_EQ(client_->Get("/health")->status, 200);
}

TEST_F(ServerTest, AFullQueueAnswers429AndLeavesASessionIntact) {
  engine::EngineOptions eo;
  eo.max_active = 1;
  eo.max_queue = 1;
  Start({}, eo);
  json ctx = Post("/v1/contexts", {{"prompt", "a session that must survive"}});
  const std::string id = ctx["id"];
  // Occupy the only running slot: this request's sink holds the scheduler until released.
  std::promise<void> entered, release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> blocker_done;
  bool first = true;
  engine::Request blocker;
  blocker.prompt = {1, 40, 41, 42};
  blocker.max_tokens = 3;
  ASSERT_TRUE(engine_->Submit(std::move(blocker), [&](engine::Event& e) {
                 if (first) {
                   first = false;
                   entered.set_value();
                   released.wait();
                 }
                 if (e.finished) blocker_done.set_value();
                 return true;
               }).ok());
  entered.get_future().wait();
  // One request waits in the queue...
  std::thread queued([this] {
    httplib::Client c("127.0.0.1", server_->port());
    auto r = c.Post("/v1/completions", json({{"prompt", "queued"}, {"max_tokens", 2}}).dump(), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
  });
  while (engine_->queue_depth() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  // ...so the next is refused with 429, a session one included, and the session is untouched.
  auto busy = client_->Post("/v1/completions", json({{"prompt", "x"}, {"max_tokens", 2}}).dump(), "application/json");
  ASSERT_TRUE(busy);
  EXPECT_EQ(busy->status, 429);
  EXPECT_EQ(busy->get_header_value("Retry-After"), "1");
  EXPECT_EQ(json::parse(busy->body)["error"]["type"], "rate_limit_error");
  const json on_session = {{"prompt", std::vector<int32_t>{50, 51}}, {"max_tokens", 6}, {"temperature", 0},
                           {"logprobs", 3}, {"llamay_session", id}};
  Post("/v1/completions", on_session, 429);
  auto list = client_->Get("/v1/contexts");
  ASSERT_TRUE(list);
  const json held = json::parse(list->body)["data"][0];
  EXPECT_EQ(held["id"], id);
  EXPECT_FALSE(held.contains("busy"));
  EXPECT_EQ(held["tokens"], ctx["tokens"]);
  release.set_value();
  blocker_done.get_future().wait();
  queued.join();
  // With room again the session continues exactly as a fork of it made before does.
  json fork = Post("/v1/contexts/" + id + "/fork?n=1", json::object());
  const std::string twin = fork["branches"][0]["id"];
  const std::string text = Completion(on_session);
  json again = on_session;
  again["llamay_session"] = twin;
  EXPECT_EQ(Completion(again), text);
  auto metrics = client_->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("llamay_requests_rejected_total 2"), std::string::npos) << metrics->body;
}

TEST_F(ServerTest, AClientThatLeavesANonStreamingRequestCancelsIt) {
  // A raw connection sends a generation that would run for minutes, waits until it runs, and closes.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(server_->port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string body = json({{"prompt", "go on"}, {"max_tokens", 1 << 20}, {"ignore_eos", true}}).dump();
  const std::string request = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                              "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(::send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (engine_->active() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(engine_->active(), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_EQ(engine_->active(), 1u) << "the generation ended by itself: the test proves nothing";
  ::close(fd);
  deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (engine_->active() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(engine_->active(), 0u) << "the request kept running after its client left";
  // Greedy: a sampled answer may end at the end-of-text token after one.
  const json ok = {{"prompt", "ok"}, {"max_tokens", 2}, {"temperature", 0}};
  EXPECT_EQ(Post("/v1/completions", ok)["usage"]["completion_tokens"], 2);
}

TEST_F(ServerTest, StateDirKeepsSessionsWithTheirPendingTokens) {
  const std::string dir = testing::TempDir() + "/llamay_state_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  json ctx = Post("/v1/contexts", {{"prompt", "resume me after a restart"}});
  const std::string id = ctx["id"];
  // A session that has generated: its last sampled token is pending, not yet in its KV.
  // Sampled, not greedy: the demo model's greedy text repeats one letter, which would hide a lost token.
  const json turn = {{"prompt", std::vector<int32_t>{60, 61}}, {"max_tokens", 12}, {"temperature", 1.0},
                     {"seed", 11}, {"llamay_session", id}};
  Completion(turn);
  json twin = Post("/v1/contexts/" + id + "/fork?n=1", json::object());
  const std::string twin_id = twin["branches"][0]["id"];
  ASSERT_TRUE(server_->SaveContexts(dir).ok());
  json next = turn;
  next["llamay_session"] = twin_id;
  const std::string want = Completion(next);  // continued on the running server
  Start();                                    // a fresh engine and server
  std::vector<std::string> warnings;
  ASSERT_TRUE(server_->LoadContexts(dir, &warnings).ok());
  EXPECT_TRUE(warnings.empty());
  next["llamay_session"] = id;
  EXPECT_EQ(Completion(next), want);
  // The directory is a snapshot store holding exactly what was held: a context deleted before the next
  // save does not come back.
  auto del = client_->Delete(("/v1/contexts/" + twin_id).c_str());
  ASSERT_TRUE(del && del->status == 200);
  ASSERT_TRUE(server_->SaveContexts(dir).ok());
  Start();
  ASSERT_TRUE(server_->LoadContexts(dir, &warnings).ok());
  EXPECT_TRUE(warnings.empty()) << testing::PrintToString(warnings);
  auto list = client_->Get("/v1/contexts");
  ASSERT_TRUE(list);
  std::vector<std::string> ids;
  const json listed = json::parse(list->body);
  for (const auto& c : listed["data"]) ids.push_back(c["id"]);
  EXPECT_EQ(ids, std::vector<std::string>{id});
  std::filesystem::remove_all(dir);
}

// A --state-dir of the earlier layout (one <id>.llamayctx file per context) still loads; the next save
// moves it into the store.
TEST_F(ServerTest, StateDirFilesOfTheEarlierLayoutStillLoad) {
  const std::string dir = testing::TempDir() + "/llamay_state_old_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  json ctx = Post("/v1/contexts", {{"prompt", "saved by an older llamay"}});
  auto snap = client_->Get(("/v1/contexts/" + ctx["id"].get<std::string>() + "/snapshot?precision=f32").c_str());
  ASSERT_TRUE(snap && snap->status == 200);
  ASSERT_TRUE(WriteFileAtomic(dir + "/ctx_7.llamayctx",
                              std::span(reinterpret_cast<const uint8_t*>(snap->body.data()), snap->body.size()))
                  .ok());
  Start();
  std::vector<std::string> warnings;
  ASSERT_TRUE(server_->LoadContexts(dir, &warnings).ok());
  EXPECT_TRUE(warnings.empty());
  const json go = {{"prompt", ""}, {"max_tokens", 4}, {"temperature", 0}, {"llamay_session", "ctx_7"}};
  Completion(go);
  ASSERT_TRUE(server_->SaveContexts(dir).ok());
  EXPECT_FALSE(std::filesystem::exists(dir + "/ctx_7.llamayctx"));
  Start();
  ASSERT_TRUE(server_->LoadContexts(dir, &warnings).ok());
  EXPECT_EQ(Post("/v1/contexts", {{"prompt", "a new one"}})["id"], "ctx_8");  // ids continue after the loaded
  std::filesystem::remove_all(dir);
}

TEST(ServerSpm, ASessionContinuedWithTextGetsNoExtraSpace) {
  const std::string path = std::string(LLAMAY_SHARED_DIR) + "/ref/models/tiny-llama-f32.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent";
  auto m = model::Model::Load(path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto tok = tokenizer::Tokenizer::FromGguf((*m)->file());
  ASSERT_TRUE(tok.ok());
  auto engine = engine::Engine::Create(std::move(*m), std::move(*tok), {});
  ASSERT_TRUE(engine.ok());
  ServerOptions so;
  so.port = 0;
  Server server(engine->get(), so);
  ASSERT_TRUE(server.Start().ok());
  httplib::Client client("127.0.0.1", server.port());
  auto post = [&](const std::string& path, const json& body) {
    auto r = client.Post(path.c_str(), body.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 200) << (r ? std::to_string(r->status) + " " + r->body : "no answer: " + path);
    return r ? json::parse(r->body) : json();
  };
  // SentencePiece puts a space before a new run of text; a session's next text continues the old run.
  json ctx = post("/v1/contexts", {{"prompt", "Once upon a time"}});
  json cont = post("/v1/completions", {{"prompt", " there was"}, {"max_tokens", 6}, {"temperature", 0}, {"logprobs", 3},
                                       {"llamay_session", ctx["id"]}});
  json whole = post("/v1/completions", {{"prompt", "Once upon a time there was"}, {"max_tokens", 6}, {"temperature", 0},
                                        {"logprobs", 3}});
  EXPECT_EQ(cont["usage"]["prompt_tokens"], whole["usage"]["prompt_tokens"]);
  EXPECT_EQ(cont["choices"][0], whole["choices"][0]);
}

}  // namespace
}  // namespace llamay::server

namespace llamay::server {
namespace {

double Metric(const std::string& body, const std::string& name) {
  const size_t at = body.find("\n" + name + " ");
  EXPECT_NE(at, std::string::npos) << name;
  return at == std::string::npos ? -1 : std::stod(body.substr(at + name.size() + 2));
}

// A sliding-window model's long context holds the pages of its global layer and only the window of its
// local layers, and /metrics shows it (tiny-gemma3: 5 local layers with a window of 32, 1 global layer).
TEST(WindowedServer, ALongContextHoldsItsWindowAndMetricsShowIt) {
  const std::string path = std::string(LLAMAY_SHARED_DIR) + "/ref/models/tiny-gemma3-f32.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent";
  auto m = model::Model::Load(path);
  ASSERT_TRUE(m.ok());
  auto tok = tokenizer::Tokenizer::FromGguf((*m)->file());
  ASSERT_TRUE(tok.ok());
  auto e = engine::Engine::Create(std::move(*m), std::move(*tok), {});
  ASSERT_TRUE(e.ok());
  ServerOptions o;
  o.port = 0;
  Server server(e->get(), o);
  ASSERT_TRUE(server.Start().ok());
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(120, 0);
  std::string text;
  for (int i = 0; i < 70; ++i) text += "Once upon a time there was a little girl who loved to play in the park. ";
  auto r = client.Post("/v1/contexts", json{{"prompt", text}}.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const size_t tokens = json::parse(r->body)["tokens"].get<size_t>();
  ASSERT_GE(tokens, 1000u);
  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  const kv::KvLayout& l = (*e)->cache().layout();
  const size_t P = l.page_tokens, row = l.row_bytes();
  const size_t global_pages = (tokens + P - 1) / P;  // every position of the global layer
  const size_t window_pages = 2;                     // 32 positions span at most two 64-token pages
  // Whatever else holds them (the prefix tree shares the context's pages), no more pages are live.
  EXPECT_LE(Metric(metrics->body, "llamay_kv_pages_live"), static_cast<double>(global_pages + window_pages));
  EXPECT_LE(Metric(metrics->body, "llamay_kv_bytes_live"),
            static_cast<double>(global_pages * 1 * 2 * P * row + window_pages * 5 * 2 * P * row));
  // Without the windows the five local layers would hold every position too.
  EXPECT_LT(Metric(metrics->body, "llamay_kv_bytes_live"), static_cast<double>(global_pages * 6 * 2 * P * row) / 3);
}

}  // namespace
}  // namespace llamay::server
