// The Anthropic Messages surface (/v1/messages, /v1/messages/count_tokens) on the demo model.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "server/chat_prompt.h"
#include "server/server_test_util.h"
#include "toolcall/toolcall.h"

namespace llamay::server {
namespace {

json Request(const std::string& system, const std::string& user, int max_tokens = 12) {
  return {{"model", "m"}, {"max_tokens", max_tokens}, {"temperature", 0}, {"system", system},
          {"messages", json::array({{{"role", "user"}, {"content", user}}})}};
}

TEST_F(ServerTest, MessagesAnswersAsChatCompletionsDoesForTheSameConversation) {
  const json m = Post("/v1/messages", Request("be brief", "hello there"));
  EXPECT_EQ(m["type"], "message");
  EXPECT_EQ(m["role"], "assistant");
  ASSERT_EQ(m["content"].size(), 1u) << m.dump();
  EXPECT_EQ(m["content"][0]["type"], "text");
  const json chat = Post("/v1/chat/completions",
                         {{"max_tokens", 12}, {"temperature", 0},
                          {"messages", json::array({{{"role", "system"}, {"content", "be brief"}},
                                                    {{"role", "user"}, {"content", "hello there"}}})}});
  EXPECT_EQ(m["content"][0]["text"], chat["choices"][0]["message"]["content"]);
  const std::string finish = chat["choices"][0]["finish_reason"];
  EXPECT_EQ(m["stop_reason"], finish == "length" ? "max_tokens" : "end_turn");
  // input_tokens + cache_read_input_tokens is the prompt, which count_tokens measures.
  const json count = Post("/v1/messages/count_tokens", Request("be brief", "hello there"));
  EXPECT_EQ(m["usage"]["input_tokens"].get<int>() + m["usage"]["cache_read_input_tokens"].get<int>(),
            count["input_tokens"].get<int>());
  EXPECT_EQ(count["input_tokens"], chat["usage"]["prompt_tokens"]);
  EXPECT_EQ(m["usage"]["output_tokens"], chat["usage"]["completion_tokens"]);
}

TEST_F(ServerTest, MessagesStreamsTheSameTextAsContentBlockEvents) {
  const json whole = Post("/v1/messages", Request("s", "stream me", 16));
  json req = Request("s", "stream me", 16);
  req["stream"] = true;
  auto r = client_->Post("/v1/messages", req.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const auto events = SseEvents(r->body);
  ASSERT_GE(events.size(), 5u) << r->body;
  EXPECT_EQ(events.front().first, "message_start");
  EXPECT_EQ(events.back().first, "message_stop");
  std::string text;
  int starts = 0, stops = 0;
  json delta;
  for (const auto& [name, data] : events) {
    EXPECT_EQ(data["type"], name);
    if (name == "content_block_start") ++starts;
    if (name == "content_block_stop") ++stops;
    if (name == "content_block_delta" && data["delta"]["type"] == "text_delta") text += data["delta"]["text"].get<std::string>();
    if (name == "message_delta") delta = data;
  }
  EXPECT_EQ(starts, 1);
  EXPECT_EQ(stops, 1);
  EXPECT_EQ(text, whole["content"][0]["text"]);
  EXPECT_EQ(delta["delta"]["stop_reason"], whole["stop_reason"]);
  EXPECT_EQ(delta["usage"]["output_tokens"], whole["usage"]["output_tokens"]);
}

// Claude Code's billing line changes on every request: it must not change the prompt, so the second
// request reads everything but its last token from the prefix tree.
TEST_F(ServerTest, MessagesIgnoresClaudeCodesBillingHeaderSoTheCacheServesTheNextTurn) {
  auto req = [](const std::string& cch) {
    json r = Request("", "what is in this directory?", 4);
    r["system"] = json::array({{{"type", "text"}, {"text", "x-anthropic-billing-header: cc_version=2.1; cch=" + cch + ";"}},
                               {{"type", "text"}, {"text", std::string(300, 'a') + " you are a coding agent"},
                                {"cache_control", {{"type", "ephemeral"}}}}});
    return r;
  };
  const json count1 = Post("/v1/messages/count_tokens", req("11111"));
  const json count2 = Post("/v1/messages/count_tokens", req("9f2c7"));
  EXPECT_EQ(count1, count2);
  Post("/v1/messages", req("11111"));
  const json second = Post("/v1/messages", req("9f2c7"));
  const int cached = second["usage"]["cache_read_input_tokens"].get<int>();
  EXPECT_GE(cached, count1["input_tokens"].get<int>() - 1) << second.dump();
}

TEST_F(ServerTest, MessagesToolUseRoundTrip) {
  const json tools = json::array({{{"name", "read_file"}, {"description", "reads a file"},
                                   {"input_schema", {{"type", "object"},
                                                     {"properties", {{"path", {{"type", "string"}, {"maxLength", 6}}}}},
                                                     {"required", {"path"}}}}}});
  json req = Request("agent", "read it", 200);
  req["tools"] = tools;
  req["tool_choice"] = {{"type", "any"}};
  const json first = Post("/v1/messages", req);
  EXPECT_EQ(first["stop_reason"], "tool_use") << first.dump();
  json use;
  for (const json& b : first["content"])
    if (b["type"] == "tool_use") use = b;
  ASSERT_TRUE(use.is_object()) << first.dump();
  EXPECT_EQ(use["name"], "read_file");
  EXPECT_EQ(use["id"].get<std::string>().rfind("toolu_", 0), 0u);
  ASSERT_TRUE(use["input"].is_object());
  EXPECT_TRUE(use["input"]["path"].is_string()) << use.dump();
  // The next turn sends the call back with its result.
  json next = req;
  next["tool_choice"] = {{"type", "none"}};
  next["max_tokens"] = 4;
  next["messages"].push_back({{"role", "assistant"}, {"content", first["content"]}});
  next["messages"].push_back({{"role", "user"}, {"content", json::array({{{"type", "tool_result"}, {"tool_use_id", use["id"]},
                                                                          {"content", "hello"}},
                                                                         {{"type", "text"}, {"text", "and now?"}}})}});
  const json second = Post("/v1/messages", next);
  EXPECT_NE(second["stop_reason"], "tool_use");
  EXPECT_GT(second["usage"]["cache_read_input_tokens"].get<int>(), 0);
}

TEST_F(ServerTest, MessagesErrorsAreAnthropicErrorObjects) {
  json image = Request("s", "x");
  image["messages"][0]["content"] = json::array({{{"type", "image"}, {"source", {{"type", "base64"}, {"data", ""}}}}});
  for (const json& bad : {image, json{{"max_tokens", 4}}, json{{"messages", "nope"}}}) {
    auto r = client_->Post("/v1/messages", bad.dump(), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << bad.dump();
    const json e = json::parse(r->body);
    EXPECT_EQ(e["type"], "error") << r->body;
    EXPECT_EQ(e["error"]["type"], "invalid_request_error") << r->body;
    EXPECT_TRUE(e["error"]["message"].is_string());
  }
  auto r = client_->Post("/v1/messages", "{not json", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(json::parse(r->body)["type"], "error");
}

TEST_F(ServerTest, MessagesTakesAnXApiKeyAndHeadOfTheRootAnswers) {
  ServerOptions o;
  o.api_key = "sekret";
  Start(o);
  auto denied = client_->Post("/v1/messages", Request("s", "x").dump(), "application/json");
  ASSERT_TRUE(denied);
  EXPECT_EQ(denied->status, 401);
  EXPECT_EQ(json::parse(denied->body)["error"]["type"], "authentication_error");
  httplib::Headers h = {{"x-api-key", "sekret"}};
  auto ok = client_->Post("/v1/messages", h, Request("s", "x", 2).dump(), "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  auto head = client_->Head("/", h);
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
}

// Claude Code sends system reminders as messages between turns: they join the user turn before them, so
// the conversation's first tokens (and the prefix tree's reuse) do not change.
TEST_F(ServerTest, MessagesTakesSystemMessagesBetweenTurnsAsPartOfTheUserTurn) {
  json mid = Request("sys", "first part");
  mid["messages"].push_back({{"role", "system"}, {"content", "a reminder"}});
  json joined = Request("sys", "first part\n\na reminder");
  EXPECT_EQ(Post("/v1/messages/count_tokens", mid), Post("/v1/messages/count_tokens", joined));
  const json a = Post("/v1/messages", mid), b = Post("/v1/messages", joined);
  EXPECT_EQ(a["content"], b["content"]);
}

// A schema keyword the grammar engine lacks is dropped from an agent's tool (Claude Code cannot change its
// tools) where the OpenAI route names it and refuses.
TEST_F(ServerTest, MessagesDropsUnsupportedSchemaKeywordsFromTools) {
  const json schema = {{"type", "object"},
                       {"properties", {{"metadata", {{"type", "object"}, {"propertyNames", {{"pattern", "^[a-z]+$"}}}}},
                                       {"name", {{"type", "string"}, {"maxLength", 4}}}}},
                       {"required", {"name"}}};
  json req = Request("agent", "go", 60);
  req["tools"] = json::array({{{"name", "t"}, {"input_schema", schema}}});
  req["tool_choice"] = {{"type", "any"}};
  const json m = Post("/v1/messages", req);
  int uses = 0;
  for (const json& b : m["content"]) uses += b["type"] == "tool_use" && b["name"] == "t";
  EXPECT_EQ(uses, 1) << m.dump();
  const json chat = Post("/v1/chat/completions",
                         {{"messages", json::array({{{"role", "user"}, {"content", "go"}}})},
                          {"tools", json::array({{{"type", "function"}, {"function", {{"name", "t"}, {"parameters", schema}}}}})}},
                         400);
  EXPECT_NE(chat["error"]["message"].get<std::string>().find("propertyNames"), std::string::npos) << chat.dump();
}

// A tool list whose grammar is too large (long bounded arrays of bounded strings, as agents' tools have)
// is still served: the widest tools' arguments become any JSON object, the call syntax stays forced.
TEST_F(ServerTest, AToolListTooLargeForTheGrammarIsServedWithItsWidestToolsRelaxed) {
  nlohmann::ordered_json props = nlohmann::ordered_json::object();
  for (const char* name : {"method", "project", "path", "plan", "name", "dir"})
    props[name] = {{"type", "string"}, {"minLength", 1}};
  for (const char* name : {"writes", "deletes", "files", "paths", "assets", "counts"})
    props[name] = {{"type", "array"}, {"maxItems", 256}, {"items", {{"type", "string"}, {"minLength", 1}, {"maxLength", 256}}}};
  const nlohmann::ordered_json big = {{"type", "object"}, {"properties", props}};
  const nlohmann::ordered_json small = {{"type", "object"}, {"properties", {{"x", {{"type", "integer"}}}}}, {"required", {"x"}}};
  const nlohmann::ordered_json tools = nlohmann::ordered_json::array(
      {{{"type", "function"}, {"function", {{"name", "sync"}, {"parameters", big}}}},
       {{"type", "function"}, {"function", {{"name", "small"}, {"parameters", small}}}}});
  // The premise: the full grammar does not build.
  auto specs = toolcall::ParseTools(tools);
  ASSERT_TRUE(specs.ok());
  auto gbnf = toolcall::ToolCallGbnf(server_->chat_prompt().tool_format(), *specs, {toolcall::ToolChoice::Mode::kRequired, ""}, true);
  ASSERT_TRUE(gbnf.ok());
  auto g = grammar::ParseGbnf(*gbnf);
  ASSERT_FALSE(g.ok()) << "this tool list's grammar builds: the test needs a larger one";
  ASSERT_NE(g.status().message().find("grammar too large"), std::string::npos) << g.status().ToString();
  const json r = Post("/v1/chat/completions",
                      {{"messages", json::array({{{"role", "user"}, {"content", "go"}}})}, {"tools", json::parse(tools.dump())},
                       {"tool_choice", {{"type", "function"}, {"function", {{"name", "small"}}}}}, {"max_tokens", 300},
                       {"temperature", 0}});
  ASSERT_EQ(r["choices"][0]["finish_reason"], "tool_calls") << r.dump();
  const json& call = r["choices"][0]["message"]["tool_calls"][0];
  EXPECT_EQ(call["function"]["name"], "small") << r.dump();
  // The tool that kept its schema is still constrained by it.
  EXPECT_TRUE(json::parse(call["function"]["arguments"].get<std::string>())["x"].is_number_integer()) << r.dump();
}

// A tool list longer than one grammar takes is refused before any grammar is built: a 400 that names the
// limit (toolcall::kMaxGrammarTools), on every turn it is sent again.
TEST_F(ServerTest, TooManyToolsForTheGrammarAreA400NamingTheLimit) {
  json tools = json::array();
  const json params = json::parse(R"({"type": "object", "properties": {"x": {"type": "integer"}}})");
  for (size_t i = 0; i <= toolcall::kMaxGrammarTools; ++i) {
    json fn = {{"name", std::string("t").append(std::to_string(i))}, {"parameters", params}};
    tools.push_back({{"type", "function"}, {"function", fn}});
  }
  const json req = {{"messages", json::array({{{"role", "user"}, {"content", "go"}}})}, {"tools", tools},
                    {"tool_choice", "required"}, {"max_tokens", 4}};
  for (int turn = 0; turn < 2; ++turn) {
    const json r = Post("/v1/chat/completions", req, 400);
    const std::string message = r["error"]["message"].get<std::string>();
    EXPECT_NE(message.find("grammar too large"), std::string::npos) << message;
    EXPECT_NE(message.find(std::string("at most ").append(std::to_string(toolcall::kMaxGrammarTools)).append(" tools")),
              std::string::npos)
        << message;
  }
}

}  // namespace
}  // namespace llamay::server
