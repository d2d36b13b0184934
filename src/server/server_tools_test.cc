// Tool calls through a chat template that renders tools (Hermes/Qwen style, written here): the format is
// detected from the template, the tools reach the prompt through the template's own `tools` variable, a
// forced call parses into tool_calls whose arguments follow the schema, and the next turn (the call and
// its result rendered by the template) reuses the whole previous prompt from the prefix tree.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

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

// A named tool choice gives exactly one call, as OpenAI and vLLM do, with parallel_tool_calls unset (true):
// a model that would go on calling (stories260K, which made call after call until max_tokens and cut the
// last one off) stops after the first.
TEST(ServerTools, ANamedToolChoiceGivesOneCall) {
  const std::string stories = std::string(LLAMAY_SHARED_DIR) + "/ref/models/stories260K.gguf";
  if (!std::filesystem::exists(stories)) GTEST_SKIP() << stories << " is absent";
  for (int which = 0; which < 3; ++which) {
    Served s;
    if (which < 2) {
      s = Serve(which == 0 ? kHermesStyle : "");
    } else {
      auto model = model::Model::Load(stories);
      ASSERT_TRUE(model.ok()) << model.status().ToString();
      s = Serve(std::move(*model));
    }
    for (int seed = 1; seed <= 4; ++seed) {
      const json r = PostOk(s, {{"messages", json::array({{{"role", "user"}, {"content", "define cat"}}})},
                                {"tools", Tools()},
                                {"tool_choice", {{"type", "function"}, {"function", {{"name", "lookup"}}}}},
                                {"max_tokens", 400}, {"temperature", 1.0}, {"seed", seed}});
      const json& c = r["choices"][0];
      EXPECT_EQ(c["finish_reason"], "tool_calls") << "seed " << seed << ": " << r.dump();
      ASSERT_EQ(c["message"]["tool_calls"].size(), 1u) << "seed " << seed << ": " << r.dump();
      EXPECT_TRUE(json::parse(c["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>(), nullptr,
                              false).is_object());
    }
  }
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

std::string ToolcallTemplate(const std::string& name) {
  std::ifstream in(std::filesystem::path(LLAMAY_SOURCE_DIR) / "src/toolcall/testdata" / name, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The request streamed: the name and the concatenated arguments of its one call, from the deltas.
std::pair<std::string, std::string> StreamedCall(Served& s, json body) {
  body["stream"] = true;
  auto r = s.client->Post("/v1/chat/completions", body.dump(), "application/json");
  EXPECT_TRUE(r);
  std::string name, arguments;
  if (!r) return {name, arguments};
  for (size_t at = 0; (at = r->body.find("data: {", at)) != std::string::npos; ++at) {
    const json chunk = json::parse(r->body.substr(at + 6, r->body.find("\n\n", at) - at - 6));
    if (chunk["choices"].empty()) continue;
    for (const json& d : chunk["choices"][0]["delta"].value("tool_calls", json::array())) {
      if (d.contains("id")) name = d["function"]["name"];
      arguments += d["function"].value("arguments", "");
    }
  }
  return {name, arguments};
}

// The XML-like formats through the server, on the models' real templates: detected, forced by the grammar
// for a required tool (Qwen3.5's template thinks too: the call comes after a budgeted reasoning block),
// parsed into tool_calls whose arguments are typed by the schema, streamed as the same deltas, and the
// next turn (the call and its result rendered by the template) reuses the previous prompt.
TEST(ServerTools, TheXmlFormatsOfQwen3CoderQwen35AndGlmAreForcedParsedAndRendered) {
  const std::vector<std::pair<std::string, toolcall::ToolFormat>> cases = {
      {"Qwen3-Coder.jinja", toolcall::ToolFormat::kQwen3Coder},
      {"Qwen3.5-4B.jinja", toolcall::ToolFormat::kQwen3Coder},
      {"GLM-4.6.jinja", toolcall::ToolFormat::kGlm45}};
  for (const auto& [file, format] : cases) {
    SCOPED_TRACE(file);
    const std::string tmpl = ToolcallTemplate(file);
    ASSERT_FALSE(tmpl.empty());
    Served s = Serve(tmpl);
    EXPECT_EQ(s.server->chat_prompt().tool_format(), format);
    const json messages = json::array({{{"role", "user"}, {"content", "define cat"}}});
    json body = {{"messages", messages}, {"tools", Tools()}, {"tool_choice", "required"}, {"max_tokens", 300},
                 {"temperature", 0.8}, {"seed", 5}, {"parallel_tool_calls", false}, {"thinking_budget_tokens", 4}};
    const json first = PostOk(s, body);
    const json& c = first["choices"][0];
    ASSERT_EQ(c["finish_reason"], "tool_calls") << first.dump();
    ASSERT_EQ(c["message"]["tool_calls"].size(), 1u);
    const json& call = c["message"]["tool_calls"][0];
    EXPECT_EQ(call["function"]["name"], "lookup");
    const json args = json::parse(call["function"]["arguments"].get<std::string>());
    EXPECT_TRUE(args["lang"] == "en" || args["lang"] == "fr") << args;
    EXPECT_TRUE(args["word"].is_string() && !args["word"].get<std::string>().empty()) << args;
    // Streamed: the same call, assembled from its deltas.
    const auto [name, arguments] = StreamedCall(s, body);
    EXPECT_EQ(name, "lookup");
    EXPECT_EQ(arguments, call["function"]["arguments"]);
    json next = messages;
    next.push_back(c["message"]);
    next.push_back({{"role", "tool"}, {"tool_call_id", call["id"]}, {"content", "a small animal"}});
    const json second = PostOk(s, {{"messages", next}, {"tools", Tools()}, {"tool_choice", "none"}, {"max_tokens", 4},
                                   {"thinking_budget_tokens", 0}});
    EXPECT_GT(second["usage"]["prompt_tokens"].get<int>(), first["usage"]["prompt_tokens"].get<int>());
    EXPECT_GT(second["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);
  }
}

// gpt-oss's harmony format through the server, on its real template: detected; a forced call (required,
// and a named function) written by the grammar as `<|channel|>commentary to=functions.NAME ...`, parsed
// into tool_calls with no marker left in the content, streamed as the same deltas, on Chat Completions and
// Responses; the next turn renders the call and its result through the template and reuses the previous
// prompt. (Reasoning is off in these requests, so the grammar writes the call first: the demo model, whose
// vocabulary spells the markers out of bytes, would otherwise reason until max_tokens.)
TEST(ServerTools, GptOssHarmonyCallsAreForcedParsedAndRendered) {
  const std::string tmpl = ToolcallTemplate("openai-gpt-oss-120b.jinja");
  ASSERT_FALSE(tmpl.empty());
  Served s = Serve(tmpl);
  ASSERT_TRUE(s.server->chat_prompt().harmony());
  const json messages = json::array({{{"role", "user"}, {"content", "define cat"}}});
  for (const json& choice : {json("required"), json{{"type", "function"}, {"function", {{"name", "lookup"}}}}}) {
    SCOPED_TRACE(choice.dump());
    json body = {{"messages", messages}, {"tools", Tools()}, {"tool_choice", choice}, {"max_tokens", 300},
                 {"temperature", 0.8}, {"seed", 5}, {"reasoning_effort", "none"}};
    const json first = PostOk(s, body);
    const json& c = first["choices"][0];
    ASSERT_EQ(c["finish_reason"], "tool_calls") << first.dump();
    ASSERT_EQ(c["message"]["tool_calls"].size(), 1u);
    const json& call = c["message"]["tool_calls"][0];
    EXPECT_EQ(call["function"]["name"], "lookup");
    const json args = json::parse(call["function"]["arguments"].get<std::string>());
    EXPECT_TRUE(args["lang"] == "en" || args["lang"] == "fr") << args;
    EXPECT_TRUE(args["word"].is_string() && !args["word"].get<std::string>().empty()) << args;
    EXPECT_FALSE(c["message"].contains("reasoning_content")) << first.dump();
    const std::string content = c["message"]["content"].is_string() ? c["message"]["content"].get<std::string>() : "";
    EXPECT_EQ(content.find("<|"), std::string::npos) << content;
    // What the model wrote (its tokens, through logprobs) was harmony's call, not another format's.
    json with_logprobs = body;
    with_logprobs["logprobs"] = true;
    const json raw = PostOk(s, with_logprobs);
    std::string written;
    for (const json& t : raw["choices"][0]["logprobs"]["content"]) written += t["token"].get<std::string>();
    EXPECT_EQ(written.rfind("<|channel|>commentary to=functions.lookup <|constrain|>json<|message|>{", 0), 0u)
        << written;
    EXPECT_EQ(raw["choices"][0]["message"]["tool_calls"][0]["function"], call["function"]);  // ids are random
    // Streamed: the same call, assembled from its deltas.
    const auto [name, arguments] = StreamedCall(s, body);
    EXPECT_EQ(name, "lookup");
    EXPECT_EQ(arguments, call["function"]["arguments"]);
    // The next turn: the template writes the call (`to=functions.lookup`) and its result; the prompt grows
    // and the previous turn's prefix is reused.
    json next = messages;
    next.push_back(c["message"]);
    next.push_back({{"role", "tool"}, {"tool_call_id", call["id"]}, {"content", "a small animal"}});
    const json second = PostOk(s, {{"messages", next}, {"tools", Tools()}, {"tool_choice", "none"}, {"max_tokens", 4}});
    EXPECT_GT(second["usage"]["prompt_tokens"].get<int>(), first["usage"]["prompt_tokens"].get<int>());
    EXPECT_GT(second["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);
  }
  // Responses: the forced call is a function_call item (a tool without a description, which the template
  // would otherwise fail on).
  auto r = s.client->Post("/v1/responses",
                          json{{"input", "define cat"}, {"tools", json::array({{{"type", "function"}, {"name", "lookup"},
                                {"parameters", Tools()[0]["function"]["parameters"]}}})},
                               {"tool_choice", "required"}, {"max_output_tokens", 300}, {"temperature", 0.8},
                               {"seed", 5}, {"reasoning", {{"effort", "none"}}}, {"store", false}}
                              .dump(),
                          "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json resp = json::parse(r->body);
  bool called = false;
  for (const json& item : resp["output"]) {
    if (item["type"] != "function_call") continue;
    called = true;
    EXPECT_EQ(item["name"], "lookup");
    EXPECT_TRUE(json::parse(item["arguments"].get<std::string>())["word"].is_string());
  }
  EXPECT_TRUE(called) << resp.dump();
}

// Without a forced call the harmony parser still splits what a model writes: text with no markers (the
// demo model's) is all answer, none of it reasoning, and a `grammar` given with a harmony template applies
// to the final answer only (after `<|channel|>final<|message|>`), so the reasoning before it is free: here
// the model never opens a final channel, so generation runs to max_tokens unconstrained.
TEST(ServerTools, GptOssHarmonyWithoutMarkersIsAllAnswer) {
  Served s = Serve(ToolcallTemplate("openai-gpt-oss-120b.jinja"));
  const json r = PostOk(s, {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}, {"max_tokens", 12},
                            {"temperature", 0.8}, {"seed", 3}});
  const json& m = r["choices"][0]["message"];
  EXPECT_FALSE(m.contains("reasoning_content")) << r.dump();
  EXPECT_FALSE(m["content"].get<std::string>().empty()) << r.dump();
  const json g = PostOk(s, {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}, {"max_tokens", 12},
                            {"temperature", 0.8}, {"seed", 3}, {"grammar", "root ::= \"yes\""}});
  EXPECT_EQ(g["choices"][0]["message"]["content"], m["content"]) << g.dump();
  EXPECT_EQ(g["choices"][0]["finish_reason"], "length");
}

// A hybrid model resumes where agents diverge (issue 23): a new conversation with the same system message
// reuses the whole system message (a checkpoint where the template ends it), and the same request sent
// again reuses all but its last token. Before, reuse fell to the 256-token grid: nothing at these sizes.
TEST(ServerTools, AHybridModelResumesAtMessageBoundaries) {
  const std::string path = std::string(LLAMAY_SHARED_DIR) + "/ref/models/tiny-qwen35-f32.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent";
  auto m = model::Model::Load(path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  Served s = Serve(std::move(*m));
  std::string system = "You are a careful assistant for a small shop.";
  for (int i = 0; i < 12; ++i) system += " Rule " + std::to_string(i) + ": answer briefly and politely.";
  auto ask = [&](const std::string& user) {
    return PostOk(s, {{"messages", json::array({{{"role", "system"}, {"content", system}},
                                                 {{"role", "user"}, {"content", user}}})},
                      {"max_tokens", 3}, {"temperature", 0}});
  };
  const json a = ask("What are the opening hours?");
  const json b = ask("Do you sell umbrellas, and how much are they?");
  const json c = ask("Hi");
  const int b_cached = b["usage"]["prompt_tokens_details"]["cached_tokens"];
  EXPECT_GT(b_cached, 0) << b.dump();
  EXPECT_LT(b_cached, b["usage"]["prompt_tokens"].get<int>() - 5) << b.dump();  // the user message is new
  EXPECT_EQ(c["usage"]["prompt_tokens_details"]["cached_tokens"], b_cached);   // the same boundary
  // The system message's end: the conversations agree up to there and no further.
  const json again = ask("What are the opening hours?");
  EXPECT_EQ(again["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(),
            a["usage"]["prompt_tokens"].get<int>() - 1);
  EXPECT_EQ(again["choices"][0]["message"]["content"], a["choices"][0]["message"]["content"]);
}

}  // namespace
}  // namespace llamay::server
