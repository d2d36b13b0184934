// Ollama's API (/api/*) on the demo model: discovery, and chat and generate streamed as NDJSON.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/server_test_util.h"

namespace llamay::server {
namespace {

std::vector<json> NdjsonLines(const std::string& body) {
  std::vector<json> out;
  size_t at = 0;
  while (at < body.size()) {
    size_t nl = body.find('\n', at);
    if (nl == std::string::npos) nl = body.size();
    if (nl > at) out.push_back(json::parse(body.substr(at, nl - at)));
    at = nl + 1;
  }
  return out;
}

json Get(httplib::Client& client, const char* path) {
  auto r = client.Get(path);
  EXPECT_TRUE(r) << path;
  if (!r) return {};
  EXPECT_EQ(r->status, 200) << path << ": " << r->body;
  return json::parse(r->body);
}

TEST_F(ServerTest, OllamaDiscoveryDescribesTheModel) {
  const json version = Get(*client_, "/api/version");
  const std::string v = version["version"];
  EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(v[0]))) << v;
  const json tags = Get(*client_, "/api/tags");
  ASSERT_EQ(tags["models"].size(), 1u);
  EXPECT_EQ(tags["models"][0]["name"], server_->options().model_name);
  EXPECT_EQ(tags["models"][0]["details"]["format"], "gguf");
  EXPECT_GT(tags["models"][0]["size"].get<size_t>(), 0u);
  const json show = Post("/api/show", {{"model", server_->options().model_name}});
  const json caps = show["capabilities"];
  EXPECT_NE(std::find(caps.begin(), caps.end(), "completion"), caps.end());
  EXPECT_NE(std::find(caps.begin(), caps.end(), "tools"), caps.end());
  const std::string arch = show["model_info"]["general.architecture"];
  EXPECT_EQ(show["model_info"][arch + ".context_length"], server_->ContextLength());
  const json ps = Get(*client_, "/api/ps");
  EXPECT_EQ(ps["models"][0]["context_length"], server_->ContextLength());
  // /v1/models says the context length too.
  EXPECT_EQ(Get(*client_, "/v1/models")["data"][0]["context_length"], server_->ContextLength());
}

TEST_F(ServerTest, OllamaChatStreamsNdjsonWithTheSameTextAsChatCompletions) {
  const json messages = json::array({{{"role", "user"}, {"content", "hello"}}});
  const json whole = Post("/api/chat", {{"model", "m"}, {"messages", messages}, {"stream", false},
                                        {"options", {{"temperature", 0}, {"num_predict", 12}}}});
  EXPECT_EQ(whole["done"], true);
  EXPECT_EQ(whole["message"]["role"], "assistant");
  const json chat = Post("/v1/chat/completions", {{"messages", messages}, {"max_tokens", 12}, {"temperature", 0},
                                                  {"repetition_penalty", 1.1}, {"top_k", 40}, {"top_p", 0.9}});
  EXPECT_EQ(whole["message"]["content"], chat["choices"][0]["message"]["content"]);
  EXPECT_EQ(whole["eval_count"], chat["usage"]["completion_tokens"]);
  EXPECT_EQ(whole["done_reason"], chat["choices"][0]["finish_reason"] == "length" ? "length" : "stop");
  auto r = client_->Post("/api/chat", json{{"model", "m"}, {"messages", messages},
                                           {"options", {{"temperature", 0}, {"num_predict", 12}}}}.dump(),
                         "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/x-ndjson");
  const std::vector<json> lines = NdjsonLines(r->body);
  ASSERT_GE(lines.size(), 2u) << r->body;
  std::string text;
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i]["done"], i + 1 == lines.size()) << lines[i];
    text += lines[i]["message"]["content"].get<std::string>();
  }
  EXPECT_EQ(text, whole["message"]["content"]);
  EXPECT_EQ(lines.back()["eval_count"], whole["eval_count"]);
}

TEST_F(ServerTest, OllamaToolCallsCarryArgumentsAsObjects) {
  const json tools = {{{"type", "function"},
                       {"function", {{"name", "get_weather"},
                                     {"parameters", {{"type", "object"},
                                                     {"properties", {{"city", {{"type", "string"}, {"maxLength", 6}}}}},
                                                     {"required", {"city"}}}}}}}};
  // Ollama lets the model choose; OpenAI's tool_choice (an extension here) forces a call.
  const json called = Post("/api/chat", {{"model", "m"}, {"messages", json::array({{{"role", "user"}, {"content", "weather?"}}})},
                                         {"tools", tools}, {"tool_choice", "required"}, {"stream", false},
                                         {"options", {{"temperature", 0}, {"num_predict", 100}}}});
  ASSERT_EQ(called["message"]["tool_calls"].size(), 1u) << called.dump();
  const json& call = called["message"]["tool_calls"][0]["function"];
  EXPECT_EQ(call["name"], "get_weather");
  ASSERT_TRUE(call["arguments"].is_object()) << call;
  EXPECT_TRUE(call["arguments"]["city"].is_string()) << call;
  // Streamed, the call comes whole in one line before the last.
  auto s = client_->Post("/api/chat", json{{"model", "m"}, {"messages", json::array({{{"role", "user"}, {"content", "weather?"}}})},
                                           {"tools", tools}, {"tool_choice", "required"},
                                           {"options", {{"temperature", 0}, {"num_predict", 100}}}}.dump(),
                         "application/json");
  ASSERT_TRUE(s);
  const std::vector<json> lines = NdjsonLines(s->body);
  ASSERT_GE(lines.size(), 2u);
  // (Call ids are new on every request.)
  EXPECT_EQ(lines[lines.size() - 2]["message"]["tool_calls"][0]["function"], call);
  // The call sent back, its arguments an object, and the tool's result (by tool_name) are rendered.
  const json messages = json::array(
      {{{"role", "user"}, {"content", "weather?"}},
       {{"role", "assistant"}, {"content", ""}, {"tool_calls", called["message"]["tool_calls"]}},
       {{"role", "tool"}, {"tool_name", "get_weather"}, {"content", "21C"}}});
  const json r = Post("/api/chat", {{"model", "m"}, {"messages", messages}, {"tools", tools}, {"stream", false},
                                    {"options", {{"temperature", 0}, {"num_predict", 4}}}});
  EXPECT_EQ(r["done"], true);
  EXPECT_GT(r["prompt_eval_count"].get<int>(), 0);
  // format: a schema constrains the answer.
  const json f = Post("/api/chat", {{"model", "m"}, {"messages", json::array({{{"role", "user"}, {"content", "n?"}}})},
                                    {"stream", false}, {"options", {{"num_predict", 48}, {"seed", 1}}},
                                    {"format", {{"type", "object"}, {"properties", {{"n", {{"type", "integer"}}}}},
                                                {"required", {"n"}}}}});
  if (f["done_reason"] == "stop") {
    EXPECT_TRUE(json::parse(f["message"]["content"].get<std::string>())["n"].is_number_integer()) << f;
  }
}

TEST_F(ServerTest, OllamaGenerateAnswersAPromptAndLoadsOnAnEmptyOne) {
  const json whole = Post("/api/generate", {{"model", "m"}, {"prompt", "once upon"}, {"stream", false}, {"raw", true},
                                            {"options", {{"temperature", 0}, {"num_predict", 8}}}});
  const json completion = Post("/v1/completions", {{"prompt", "once upon"}, {"max_tokens", 8}, {"temperature", 0},
                                                   {"repetition_penalty", 1.1}, {"top_k", 40}, {"top_p", 0.9}});
  EXPECT_EQ(whole["response"], completion["choices"][0]["text"]);
  const json load = Post("/api/generate", {{"model", "m"}, {"prompt", ""}});
  EXPECT_EQ(load["done"], true);
  EXPECT_EQ(load["done_reason"], "load");
  const json bad = Post("/api/chat", {{"model", "m"}, {"messages", json::array({{{"role", "user"}, {"content", "x"},
                                                                                  {"images", {"aGk="}}}})}},
                        400);
  EXPECT_NE(bad["error"].get<std::string>().find("images"), std::string::npos);
  Post("/api/chat", {{"model", "m"}, {"messages", json::array({{{"role", "wizard"}, {"content", "x"}}})}}, 400);
}

}  // namespace
}  // namespace llamay::server
