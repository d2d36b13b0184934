// The prompt text a conversation with tool calls and reasoning makes under real chat templates: an
// assistant turn that only calls tools (content null, as OpenAI's and Anthropic's clients send it) renders
// under templates written for "" (Qwen3's) and under one that drops tool turns (Granite 3.0's: they are
// written as text), a template that handles null itself still gets null, and reasoning sent back with the
// history is rendered where the template puts it. Through the server, the
// same conversations are answered on Chat Completions and Messages.
#include "server/chat_prompt.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "server/http_util.h"
#include "server/server_test_util.h"
#include "server/template_test_util.h"

namespace llamay::server {
namespace {

using json = nlohmann::json;

std::string ReadSource(const std::string& relative) {
  std::ifstream in(std::filesystem::path(LLAMAY_SOURCE_DIR) / relative, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  EXPECT_FALSE(ss.str().empty()) << relative;
  return ss.str();
}

std::vector<toolcall::ToolSpec> WeatherTool() {
  toolcall::ToolSpec t;
  t.name = "get_weather";
  t.description = "The weather in a city";
  t.parameters = nlohmann::ordered_json::parse(R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]})");
  return {t};
}

// user asks; the assistant reasons and calls a tool with no text (content null); the tool answers.
std::vector<Message> ToolTurn(const std::string& reasoning) {
  Message user;
  user.content = "What is the weather in Paris?";
  Message call;
  call.role = Message::Role::kAssistant;
  call.reasoning = reasoning;
  call.tool_calls.push_back({"call_1", "get_weather", R"({"city":"Paris"})"});
  Message result;
  result.role = Message::Role::kTool;
  result.tool_call_id = "call_1";
  result.content = "sunny, 21 C";
  return {user, call, result};
}

class ChatPromptTest : public ::testing::Test {
 protected:
  void SetUp() override { engine_ = DemoEngine(); }
  std::unique_ptr<engine::Engine> engine_;
};

TEST_F(ChatPromptTest, AToolCallOnlyTurnRendersUnderQwen3WithTheReasoningSentBack) {
  const ChatPrompt prompt(*engine_, ReadSource("src/template/testdata/qwen3.jinja"));
  ASSERT_TRUE(prompt.problem().ok()) << prompt.problem().message();
  auto text = prompt.Text(ToolTurn("The user wants Paris; call the tool."), WeatherTool());
  ASSERT_TRUE(text.ok()) << text.status().message();
  // The turn after the last user query keeps its reasoning, then the call; content "" adds no newline.
  EXPECT_NE(text->find("<|im_start|>assistant\n<think>\nThe user wants Paris; call the tool.\n</think>\n\n"
                       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n"),
            std::string::npos)
      << *text;
  EXPECT_NE(text->find("<tool_response>\nsunny, 21 C\n</tool_response>"), std::string::npos) << *text;
  // Without reasoning sent back the same turn renders an empty block (Qwen3's template's own choice).
  auto plain = prompt.Text(ToolTurn(""), WeatherTool());
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(plain->find("call the tool"), std::string::npos);
  EXPECT_NE(plain->find("<tool_call>\n{\"name\": \"get_weather\""), std::string::npos) << *plain;
}

TEST_F(ChatPromptTest, AToolCallOnlyTurnRendersUnderEveryToolTemplate) {
  for (const char* path :
       {"src/template/testdata/qwen3.jinja", "src/template/testdata/qwq.jinja", "src/template/testdata/qwen2.jinja",
        "src/template/testdata/llama31.jinja", "src/template/testdata/llama32.jinja",
        "src/template/testdata/mistral_nemo.jinja", "src/template/testdata/granite3.jinja",
        "src/template/testdata/seed_oss.jinja", "src/toolcall/testdata/Qwen3-Coder.jinja",
        "src/toolcall/testdata/Qwen3.5-4B.jinja", "src/toolcall/testdata/GLM-4.6.jinja",
        "src/toolcall/testdata/GLM-4.7-Flash.jinja", "src/toolcall/testdata/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja",
        "src/toolcall/testdata/Qwen-Qwen2.5-7B-Instruct.jinja", "src/toolcall/testdata/openai-gpt-oss-120b.jinja"}) {
    SCOPED_TRACE(path);
    const ChatPrompt prompt(*engine_, ReadSource(path));
    ASSERT_TRUE(prompt.problem().ok()) << prompt.problem().message();
    auto text = prompt.Text(ToolTurn("thinking it over"), WeatherTool());
    ASSERT_TRUE(text.ok()) << text.status().message();
    EXPECT_NE(text->find("get_weather"), std::string::npos) << *text;
    EXPECT_NE(text->find("Paris"), std::string::npos) << *text;
    EXPECT_NE(text->find("sunny, 21 C"), std::string::npos) << *text;
    EXPECT_EQ(text->find("None"), std::string::npos) << "null printed as Python's None: " << *text;
  }
}

TEST_F(ChatPromptTest, ATemplateThatHandlesNullGetsNullAndOneThatFailsOnItGetsEmpty) {
  // A Hermes-style template that renders calls itself and writes null content as its own marker.
  const ChatPrompt prompt(*engine_,
                          "{% for t in tools or [] %}{% endfor %}{% for m in messages %}"
                          "{% if m.content is none %}[null]{% else %}[{{ m.content }}]{% endif %}"
                          "{% for c in m.tool_calls or [] %}<tool_call>{{ c.function.name }} "
                          "{{ c.function.arguments | tojson }}</tool_call>{% endfor %}{% endfor %}");
  ASSERT_TRUE(prompt.problem().ok()) << prompt.problem().message();
  ASSERT_EQ(prompt.tool_format(), toolcall::ToolFormat::kHermes);
  auto text = prompt.Text(ToolTurn(""), WeatherTool());
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_EQ(*text, "[What is the weather in Paris?][null]<tool_call>get_weather {\"city\": \"Paris\"}</tool_call>[sunny, 21 C]");
  // The same template failing on null gets "" instead.
  const ChatPrompt strict(*engine_,
                          "{% for t in tools or [] %}{% endfor %}{% for m in messages %}"
                          "[{{ m.content.strip() }}]"
                          "{% for c in m.tool_calls or [] %}<tool_call>{{ c.function.name }} "
                          "{{ c.function.arguments | tojson }}</tool_call>{% endfor %}{% endfor %}");
  text = strict.Text(ToolTurn(""), WeatherTool());
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_EQ(*text, "[What is the weather in Paris?][]<tool_call>get_weather {\"city\": \"Paris\"}</tool_call>[sunny, 21 C]");
}

// The conversations the issue reported (400 chat_template_rejected), through both routes, on Qwen3.
TEST(ChatPromptServed, ToolCallHistoryIsAnsweredOnChatCompletionsAndMessages) {
  Served s = Serve(ReadSource("src/template/testdata/qwen3.jinja"));
  const json tools = json::array({{{"type", "function"},
                                   {"function", {{"name", "get_weather"},
                                                 {"parameters", {{"type", "object"},
                                                                 {"properties", {{"city", {{"type", "string"}}}}}}}}}}});
  const json chat = {
      {"max_tokens", 4},
      {"tools", tools},
      {"messages",
       json::array({{{"role", "user"}, {"content", "Weather in Paris?"}},
                    {{"role", "assistant"},
                     {"content", nullptr},
                     {"reasoning_content", "call the tool"},
                     {"tool_calls", json::array({{{"id", "call_1"},
                                                  {"type", "function"},
                                                  {"function", {{"name", "get_weather"}, {"arguments", "{\"city\":\"Paris\"}"}}}}})}},
                    {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "sunny"}}})}};
  auto r = s.client->Post("/v1/chat/completions", chat.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  const json messages = {
      {"max_tokens", 4},
      {"tools", json::array({{{"name", "get_weather"},
                              {"input_schema", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}}})},
      {"messages",
       json::array({{{"role", "user"}, {"content", "Weather in Paris?"}},
                    {{"role", "assistant"},
                     {"content", json::array({{{"type", "thinking"}, {"thinking", "call the tool"}, {"signature", ""}},
                                              {{"type", "tool_use"},
                                               {"id", "toolu_1"},
                                               {"name", "get_weather"},
                                               {"input", {{"city", "Paris"}}}}})}},
                    {{"role", "user"},
                     {"content", json::array({{{"type", "tool_result"}, {"tool_use_id", "toolu_1"}, {"content", "sunny"}}})}}})}};
  r = s.client->Post("/v1/messages", messages.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

}  // namespace
}  // namespace llamay::server
