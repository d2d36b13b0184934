// The server test fixture: the demo model's engine behind a server on a loopback port, and a client.
#ifndef LLAMAY_SERVER_SERVER_TEST_UTIL_H_
#define LLAMAY_SERVER_SERVER_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <httplib.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "model/demo_model.h"
#include "server/server.h"

namespace llamay::server {

using json = nlohmann::json;

// The test clients' read timeout.
inline constexpr int kClientTimeoutSeconds = 300;

// POSTs `body` as JSON and returns the parsed answer, recording a failure unless its status is `want`.
inline json PostJson(httplib::Client& client, const std::string& path, const json& body, int want = 200) {
  auto r = client.Post(path.c_str(), body.dump(), "application/json");
  EXPECT_TRUE(r) << path;
  if (!r) return {};
  EXPECT_EQ(r->status, want) << path << ": " << r->body;
  return json::parse(r->body, nullptr, false);
}

// The "event: NAME\ndata: JSON" pairs of a streamed answer (Messages, Responses).
inline std::vector<std::pair<std::string, json>> SseEvents(const std::string& body) {
  std::vector<std::pair<std::string, json>> out;
  size_t at = 0;
  while ((at = body.find("event: ", at)) != std::string::npos) {
    const size_t nl = body.find('\n', at);
    const std::string name = body.substr(at + 7, nl - at - 7);
    const size_t data = body.find("data: ", nl);
    const size_t end = body.find("\n\n", data);
    out.emplace_back(name, json::parse(body.substr(data + 6, end - data - 6)));
    at = end;
  }
  return out;
}

inline std::unique_ptr<engine::Engine> DemoEngine(engine::EngineOptions o = {}) {
  auto m = model::Model::FromFile(std::move(*gguf::File::FromBuffer(model::BuildDemoModel())));
  EXPECT_TRUE(m.ok());
  auto tok = tokenizer::Tokenizer::FromGguf((*m)->file());
  EXPECT_TRUE(tok.ok());
  auto e = engine::Engine::Create(std::move(*m), std::move(*tok), o);
  EXPECT_TRUE(e.ok());
  return std::move(*e);
}

class ServerTest : public testing::Test {
 protected:
  void SetUp() override { Start(); }
  void Start(ServerOptions o = {}, engine::EngineOptions eo = {}) {
    server_.reset();
    engine_ = DemoEngine(eo);
    o.port = 0;
    o.max_body_bytes = 1 << 20;
    server_ = std::make_unique<Server>(engine_.get(), o);
    ASSERT_TRUE(server_->Start().ok());
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    // Generous: a sanitizer build on a loaded 2-core machine prefills a few thousand tokens in tens of
    // seconds. A server that hangs still fails, at ctest's timeout.
    client_->set_read_timeout(kClientTimeoutSeconds, 0);
    // A first request from this thread, before a test starts its own client threads: httplib is not built
    // with TSan, so the function-local statics it initialises on a first request (the response-line regex)
    // are published in a way TSan cannot see, and two threads making their first requests at once were
    // reported as a race inside the library (CI, StateTest.ShutdownEndsOpenEventStreamsPromptly).
    auto health = client_->Get("/health");
    ASSERT_TRUE(health);
    ASSERT_EQ(health->status, 200);
  }
  void TearDown() override {
    server_.reset();
    engine_.reset();
  }
  json Post(const std::string& path, const json& body, int want = 200) { return PostJson(*client_, path, body, want); }
  // The text, and with "logprobs" the log probabilities too: the demo model's greedy text soon repeats one
  // letter, so exactness checks compare the logprobs (floats through JSON, compared exactly) as well.
  std::string Completion(const json& body) {
    json c = Post("/v1/completions", body)["choices"][0];
    return body.contains("logprobs") ? c["text"].get<std::string>() + c["logprobs"].dump() : c["text"].get<std::string>();
  }

  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<httplib::Client> client_;
};

}  // namespace llamay::server

#endif  // LLAMAY_SERVER_SERVER_TEST_UTIL_H_
