// Tool calls through a chat template that renders tools (Hermes/Qwen style, written here): the format is
// detected from the template, the tools reach the prompt through the template's own `tools` variable, a
// forced call parses into tool_calls whose arguments follow the schema, and the next turn (the call and
// its result rendered by the template) reuses the whole previous prompt from the prefix tree.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/chat_prompt.h"
#include "server/template_test_util.h"

namespace llamay::server {
namespace {

using json = nlohmann::json;

// A template in the Hermes style: tools listed in a system block, calls as <tool_call> JSON, results as
// <tool_response> in a user turn.
const char* kHermesStyle = R"TPL({%- if tools %}<|im_start|>system
You may call functions. <tools>
{%- for t in tools %}
{{ t | tojson }}
{%- endfor %}
</tools>
Call one as <tool_call>{"name": ..., "arguments": ...}</tool_call><|im_end|>
{% endif %}
{%- for m in messages %}
{%- if m.role == 'tool' %}<|im_start|>user
<tool_response>{{ m.content }}</tool_response><|im_end|>
{% elif m.role == 'assistant' and m.tool_calls %}<|im_start|>assistant
{% for c in m.tool_calls %}<tool_call>
{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments | tojson }}}
</tool_call>{% endfor %}<|im_end|>
{% else %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %})TPL";

json Tools() {
  return json::parse(R"([{"type": "function", "function": {"name": "lookup", "description": "Look a word up",
      "parameters": {"type": "object", "properties": {"word": {"type": "string", "minLength": 1, "maxLength": 8},
      "lang": {"enum": ["en", "fr"]}}, "required": ["word", "lang"], "additionalProperties": false}}}])");
}

json PostOk(Served& s, const json& body) {
  auto r = s.client->Post("/v1/chat/completions", body.dump(), "application/json");
  EXPECT_TRUE(r);
  if (!r) return {};
  EXPECT_EQ(r->status, 200) << r->body;
  return json::parse(r->body, nullptr, false);
}

TEST(ServerTools, ATemplateThatRendersToolsGetsThemAndItsCallsParse) {
  Served s = Serve(kHermesStyle);
  EXPECT_EQ(s.server->chat_prompt().tool_format(), toolcall::ToolFormat::kHermes);
  const json messages = json::array({{{"role", "user"}, {"content", "define cat"}}});
  const json plain = PostOk(s, {{"messages", messages}, {"max_tokens", 1}});
  const json first = PostOk(s, {{"messages", messages}, {"tools", Tools()}, {"tool_choice", "required"},
                                {"max_tokens", 300}, {"temperature", 0.8}, {"seed", 7}});
  // The tools went through the template: the prompt grew by the rendered system block.
  EXPECT_GT(first["usage"]["prompt_tokens"].get<int>(), plain["usage"]["prompt_tokens"].get<int>() + 100);
  const json& c = first["choices"][0];
  ASSERT_EQ(c["finish_reason"], "tool_calls") << first.dump();
  ASSERT_EQ(c["message"]["tool_calls"].size(), 1u);
  const json& call = c["message"]["tool_calls"][0];
  EXPECT_EQ(call["function"]["name"], "lookup");
  const json args = json::parse(call["function"]["arguments"].get<std::string>());
  EXPECT_TRUE(args["lang"] == "en" || args["lang"] == "fr") << args;
  const std::string word = args["word"];
  EXPECT_TRUE(!word.empty() && word.size() <= 8) << args;
  EXPECT_EQ(args.size(), 2u);

  // The next turn: the call (arguments as OpenAI's JSON string) and its result, rendered by the template.
  json next = messages;
  next.push_back(c["message"]);
  next.push_back({{"role", "tool"}, {"tool_call_id", call["id"]}, {"content", "a small animal"}});
  const json second = PostOk(s, {{"messages", next}, {"tools", Tools()}, {"tool_choice", "none"}, {"max_tokens", 4}});
  EXPECT_GE(second["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), first["usage"]["prompt_tokens"].get<int>());
  EXPECT_EQ(second["choices"][0]["message"].count("tool_calls"), 0u);
}

TEST(ServerTools, TheDefaultTemplateIsTheGenericFormatWithToolsInASystemMessage) {
  Served s = Serve("");  // no template in the file: ChatML, which knows nothing of tools
  EXPECT_EQ(s.server->chat_prompt().tool_format(), toolcall::ToolFormat::kGeneric);
  const json r = PostOk(s, {{"messages", json::array({{{"role", "user"}, {"content", "x"}}})}, {"tools", Tools()},
                            {"tool_choice", {{"type", "function"}, {"function", {{"name", "lookup"}}}}},
                            {"max_tokens", 300}, {"temperature", 1.0}, {"seed", 1}});
  EXPECT_EQ(r["choices"][0]["finish_reason"], "tool_calls") << r.dump();
  EXPECT_EQ(r["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "lookup");
}

TEST(ServerTools, ASessionsNextTurnPrefillsOnlyItsNewMessages) {
  Served s = Serve("");  // the generic format: tools described in a system message
  auto created = s.client->Post("/v1/contexts", "{}", "application/json");
  ASSERT_TRUE(created && created->status == 200);
  const std::string id = json::parse(created->body)["id"];
  const json first = PostOk(s, {{"messages", json::array({{{"role", "user"}, {"content", "define dog"}}})},
                                {"tools", Tools()}, {"tool_choice", "required"}, {"max_tokens", 300},
                                {"temperature", 0.8}, {"seed", 3}, {"llamay_session", id}});
  ASSERT_EQ(first["choices"][0]["finish_reason"], "tool_calls") << first.dump();
  const json call = first["choices"][0]["message"]["tool_calls"][0];
  const std::string result = "a loyal animal";
  const json second = PostOk(s, {{"messages", json::array({{{"role", "tool"}, {"tool_call_id", call["id"]}, {"content", result}}})},
                                 {"tools", Tools()}, {"tool_choice", "none"}, {"max_tokens", 2}, {"llamay_session", id}});
  // Only the tool result in its user turn's framing (about 100 bytes of ChatML, a token per byte in the
  // demo vocabulary) and the pending token: not the tools' description again, which is most of the first
  // turn's prompt.
  const int prefilled = second["usage"]["prompt_tokens"].get<int>() - second["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
  const std::string framed = "<|im_start|>user\n<tool_response>\n" + result + "\n</tool_response><|im_end|>\n<|im_start|>assistant\n";
  EXPECT_LE(prefilled, static_cast<int>(framed.size()) + 8) << second.dump();
  EXPECT_GT(first["usage"]["prompt_tokens"].get<int>(), 1000);
  EXPECT_EQ(second["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(),
            first["usage"]["prompt_tokens"].get<int>() + first["usage"]["completion_tokens"].get<int>());
}

}  // namespace
}  // namespace llamay::server
