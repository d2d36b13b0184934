// Format detection from small templates in each family's style, request parsing and its errors, the
// system prompt for templates without tools, and messages prepared for templates.
#include "toolcall/toolcall.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace llamay::toolcall {
namespace {

using Json = nlohmann::ordered_json;

// Templates written for these tests, each in the style of its family (not the models' own templates).
constexpr std::string_view kChatMl =
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
constexpr std::string_view kQwenStyle =
    "{%- if tools %}<|im_start|>system\nYou may call functions.\n<tools>\n{%- for t in tools %}\n{{ t | "
    "tojson }}"
    "{%- endfor %}\n</tools>\nCall them as <tool_call>\n{\"name\": ..., \"arguments\": "
    "...}\n</tool_call><|im_end|>\n"
    "{%- endif %}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}";
constexpr std::string_view kLlamaStyle =
    "{{- bos_token }}{%- if tools is not none %}{%- set tools_text = tools | tojson %}{%- endif %}"
    "{%- for m in messages %}{%- if m.role == 'ipython' or m.role == 'tool' %}<|start_header_id|>ipython"
    "<|end_header_id|>\n\n{{ m.content }}<|eot_id|>{%- else %}<|start_header_id|>{{ m.role "
    "}}<|end_header_id|>"
    "\n\n{{ m.content | trim }}<|eot_id|>{%- endif %}{%- endfor %}";
constexpr std::string_view kMistralStyle =
    "{{ bos_token }}{% for m in messages %}{% if m.role == 'user' %}{% if loop.last and tools %}"
    "[AVAILABLE_TOOLS]{{ tools | tojson }}[/AVAILABLE_TOOLS]{% endif %}[INST]{{ m.content }}[/INST]"
    "{% elif m.tool_calls %}[TOOL_CALLS]{{ m.tool_calls | tojson }}{{ eos_token }}"
    "{% else %}{{ m.content }}{{ eos_token }}{% endif %}{% endfor %}";
constexpr std::string_view kGraniteStyle =
    "{%- if tools %}<|start_of_role|>available_tools<|end_of_role|>{{ tools | tojson(indent=4) }}"
    "<|end_of_text|>\n{%- endif %}{%- for m in messages %}<|start_of_role|>{{ m.role }}<|end_of_role|>"
    "{%- if m.tool_calls %}<|tool_call|>{{ m.tool_calls | tojson }}{%- else %}{{ m.content }}{%- endif %}"
    "<|end_of_text|>\n{%- endfor %}";

std::function<bool(std::string_view)> Vocab(std::set<std::string> tokens) {
  return [tokens = std::move(tokens)](std::string_view t) { return tokens.count(std::string(t)) > 0; };
}

TEST(DetectToolFormat, FromTemplateMarkers) {
  const auto none = Vocab({});
  EXPECT_EQ(DetectToolFormat(kQwenStyle, none), ToolFormat::kHermes);
  EXPECT_EQ(DetectToolFormat(kLlamaStyle, none), ToolFormat::kLlama3);
  EXPECT_EQ(DetectToolFormat(kMistralStyle, none), ToolFormat::kMistral);
  EXPECT_EQ(DetectToolFormat(kGraniteStyle, none), ToolFormat::kGranite);
  EXPECT_EQ(DetectToolFormat(kChatMl, none), ToolFormat::kGeneric);
  EXPECT_EQ(DetectToolFormat("", nullptr), ToolFormat::kGeneric);
  // The template's word beats the vocabulary's.
  EXPECT_EQ(DetectToolFormat(kGraniteStyle, Vocab({"<tool_call>"})), ToolFormat::kGranite);
}

TEST(DetectToolFormat, FromVocabularyWhenTheTemplateIsSilent) {
  EXPECT_EQ(DetectToolFormat(kChatMl, Vocab({"<tool_call>", "</tool_call>"})), ToolFormat::kHermes);
  EXPECT_EQ(DetectToolFormat(kChatMl, Vocab({"[TOOL_CALLS]"})), ToolFormat::kMistral);
  EXPECT_EQ(DetectToolFormat(kChatMl, Vocab({"<|tool_call|>"})), ToolFormat::kGranite);
  EXPECT_EQ(DetectToolFormat(kChatMl, Vocab({"<|python_tag|>", "<|eot_id|>"})), ToolFormat::kLlama3);
  EXPECT_EQ(DetectToolFormat(kChatMl, Vocab({"<|im_start|>", "<|im_end|>"})), ToolFormat::kGeneric);
}

TEST(ToolFormat, NamesAndTriggers) {
  EXPECT_EQ(ToolFormatName(ToolFormat::kHermes), "hermes");
  EXPECT_EQ(ToolFormatName(ToolFormat::kLlama3), "llama3");
  EXPECT_EQ(ToolFormatName(ToolFormat::kMistral), "mistral");
  EXPECT_EQ(ToolFormatName(ToolFormat::kGranite), "granite");
  EXPECT_EQ(ToolFormatName(ToolFormat::kGeneric), "generic");
  EXPECT_EQ(ToolCallTriggers(ToolFormat::kHermes).at(0).text, "<tool_call>");
  EXPECT_EQ(ToolCallTriggers(ToolFormat::kMistral).at(0).text, "[TOOL_CALLS]");
  EXPECT_EQ(ToolCallTriggers(ToolFormat::kGranite).at(0).text, "<|tool_call|>");
  EXPECT_EQ(ToolCallTriggers(ToolFormat::kLlama3).size(), 2u);
}

TEST(UseToolSystemPrompt, ForGenericAndTemplatesThatDoNotReadTools) {
  EXPECT_TRUE(UseToolSystemPrompt(ToolFormat::kGeneric, true));
  EXPECT_TRUE(UseToolSystemPrompt(ToolFormat::kHermes, false));
  EXPECT_FALSE(UseToolSystemPrompt(ToolFormat::kHermes, true));
}

// The error message of ParseTools for `tools` (JSON text); "" when it succeeds.
std::string ToolsError(const std::string& tools) {
  auto r = ParseTools(Json::parse(tools));
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  return r.status().message();
}

TEST(ParseTools, ValidTools) {
  auto tools = ParseTools(Json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "description": "Weather", "strict": true,
     "parameters": {"type": "object", "properties": {"z": {"type": "string"}, "a": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "no-params_2"}},
    {"type": "function", "function": {"name": "untyped", "parameters": {"properties": {"x": {}}}}}])"));
  ASSERT_TRUE(tools.ok()) << tools.status().ToString();
  ASSERT_EQ(tools->size(), 3u);
  EXPECT_EQ((*tools)[0].name, "get_weather");
  EXPECT_EQ((*tools)[0].description, "Weather");
  EXPECT_TRUE((*tools)[0].strict);
  EXPECT_EQ((*tools)[0].parameters["properties"].begin().key(), "z");  // the request's order is kept
  EXPECT_EQ((*tools)[1].parameters, Json::parse(R"({"type": "object", "properties": {}})"));
  EXPECT_EQ((*tools)[2].parameters["type"], "object");
  EXPECT_TRUE(ParseTools(Json()).ok());
  EXPECT_TRUE(ParseTools(Json())->empty());
  const Json round = ToolsJson(*tools);
  EXPECT_EQ(round[0]["function"]["name"], "get_weather");
  EXPECT_FALSE(round[1]["function"].contains("description"));
}

TEST(ParseTools, ErrorsNameTheField) {
  EXPECT_EQ(ToolsError(R"({"type": "function"})"), "tools must be an array");
  EXPECT_EQ(ToolsError(R"([5])"), "tools[0] must be an object");
  EXPECT_EQ(ToolsError(R"([{"type": "retrieval"}])"),
            "tools[0].type must be \"function\" (the only kind of tool supported)");
  EXPECT_EQ(ToolsError(R"([{"type": "function"}])"), "tools[0].function must be an object");
  EXPECT_EQ(ToolsError(R"([{"type": "function", "function": {"name": "a"}},
                           {"type": "function", "function": {"name": 7}}])"),
            "tools[1].function.name must be a string");
  EXPECT_EQ(ToolsError(R"([{"type": "function", "function": {"name": "a b"}}])"),
            "tools[0].function.name \"a b\" must be 1 to 64 letters, digits, underscores or dashes");
  EXPECT_EQ(
      ToolsError("[{\"type\": \"function\", \"function\": {\"name\": \"" + std::string(65, 'x') + "\"}}]"),
      "tools[0].function.name \"" + std::string(65, 'x') +
          "\" must be 1 to 64 letters, digits, underscores or dashes");
  EXPECT_EQ(ToolsError(R"([{"type": "function", "function": {"name": "a"}},
                           {"type": "function", "function": {"name": "a"}}])"),
            "tools[1].function.name \"a\" is already the name of tools[0]");
  EXPECT_EQ(ToolsError(R"([{"type": "function", "function": {"name": "a", "description": 1}}])"),
            "tools[0].function.description must be a string");
  EXPECT_EQ(ToolsError(R"([{"type": "function", "function": {"name": "a", "strict": "yes"}}])"),
            "tools[0].function.strict must be a boolean");
  EXPECT_EQ(ToolsError(R"([{"type": "function", "function": {"name": "a", "parameters": []}}])"),
            "tools[0].function.parameters must be a JSON Schema object");
  EXPECT_EQ(
      ToolsError(R"([{"type": "function", "function": {"name": "a", "parameters": {"type": "string"}}}])"),
      "tools[0].function.parameters must describe an object (\"type\": \"object\"), not \"string\"");
  EXPECT_EQ(
      ToolsError(R"([{"type": "function", "function": {"name": "a", "parameters": {"anyOf": []}}}])"),
      "tools[0].function.parameters must describe an object (\"type\": \"object\"); \"anyOf\" at the top "
      "is not supported");
  EXPECT_EQ(ToolsError(R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
                           "properties": {"a": {"type": "string", "patternProperties": {}}}}}}])"),
            "tools[0].function.parameters (function \"f\"): unsupported JSON Schema keyword "
            "\"patternProperties\" at /properties/a");
}

TEST(ParseToolChoice, Modes) {
  auto tools = ParseTools(Json::parse(R"([{"type": "function", "function": {"name": "f"}}])"));
  ASSERT_TRUE(tools.ok());
  using Mode = ToolChoice::Mode;
  EXPECT_EQ(ParseToolChoice(Json(), *tools)->mode, Mode::kAuto);
  EXPECT_EQ(ParseToolChoice(Json(), {})->mode, Mode::kNone);
  EXPECT_EQ(ParseToolChoice("auto", *tools)->mode, Mode::kAuto);
  EXPECT_EQ(ParseToolChoice("auto", {})->mode, Mode::kNone);
  EXPECT_EQ(ParseToolChoice("none", *tools)->mode, Mode::kNone);
  EXPECT_EQ(ParseToolChoice("required", *tools)->mode, Mode::kRequired);
  auto named = ParseToolChoice(Json::parse(R"({"type": "function", "function": {"name": "f"}})"), *tools);
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(named->mode, Mode::kNamed);
  EXPECT_EQ(named->name, "f");

  auto error = [&](const Json& choice, const std::vector<ToolSpec>& t) {
    auto r = ParseToolChoice(choice, t);
    EXPECT_FALSE(r.ok()) << choice.dump();
    return r.ok() ? std::string() : r.status().message();
  };
  EXPECT_EQ(error(Json::parse(R"({"type": "function", "function": {"name": "g"}})"), *tools),
            "tool_choice names the function \"g\", which is not in tools");
  EXPECT_EQ(error("required", {}), "tool_choice \"required\" needs tools");
  EXPECT_EQ(error(Json::parse(R"({"type": "function", "function": {}})"), *tools),
            "tool_choice.function.name must be a string");
  EXPECT_NE(error("sometimes", *tools).find("tool_choice must be"), std::string::npos);
  EXPECT_NE(error(3, *tools).find("tool_choice must be"), std::string::npos);
}

TEST(ToolSystemPrompt, ListsToolsAndTheSyntax) {
  auto tools = ParseTools(Json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "description": "Current weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])"));
  ASSERT_TRUE(tools.ok());
  const std::string hermes = ToolSystemPrompt(ToolFormat::kGeneric, *tools);
  EXPECT_NE(hermes.find("\"name\": \"get_weather\""), std::string::npos) << hermes;
  EXPECT_NE(hermes.find("Current weather"), std::string::npos);
  EXPECT_NE(hermes.find(R"("properties": {"city": {"type": "string"}})"), std::string::npos) << hermes;
  EXPECT_NE(hermes.find("<tool_call>\n{\"name\": <function-name>, \"arguments\":"), std::string::npos);
  EXPECT_NE(ToolSystemPrompt(ToolFormat::kLlama3, *tools).find("\"parameters\": <arguments"),
            std::string::npos);
  EXPECT_NE(ToolSystemPrompt(ToolFormat::kMistral, *tools).find("[TOOL_CALLS][{"), std::string::npos);
  EXPECT_NE(ToolSystemPrompt(ToolFormat::kGranite, *tools).find("<|tool_call|>[{"), std::string::npos);
  EXPECT_EQ(ToolSystemPrompt(ToolFormat::kHermes, {}), "");
}

const char* kConversation = R"([
  {"role": "system", "content": "Be brief."},
  {"role": "user", "content": "Weather in Paris and Rome?"},
  {"role": "assistant", "content": null, "tool_calls": [
    {"id": "call_abc", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
    {"id": "call_def", "type": "function", "function": {"name": "get_weather", "arguments": "not json"}}]},
  {"role": "tool", "tool_call_id": "call_abc", "content": "18C"},
  {"role": "tool", "tool_call_id": "call_def", "content": "21C"},
  {"role": "assistant", "content": "Paris 18C, Rome 21C."}])";

TEST(Messages, ForTemplatesThatRenderTools) {
  const Json in = Json::parse(kConversation);
  const Json out = MessagesForToolTemplate(ToolFormat::kHermes, in);
  EXPECT_EQ(out[2]["tool_calls"][0]["function"]["arguments"], Json::parse(R"({"city": "Paris"})"));
  EXPECT_EQ(out[2]["tool_calls"][1]["function"]["arguments"], "not json");  // left as it was
  EXPECT_EQ(out[2]["tool_calls"][0]["id"], "call_abc");
  EXPECT_EQ(out.size(), in.size());

  const Json mistral = MessagesForToolTemplate(ToolFormat::kMistral, in);
  const std::string id = mistral[2]["tool_calls"][0]["id"];
  EXPECT_EQ(id.size(), 9u);
  EXPECT_EQ(mistral[3]["tool_call_id"], id);  // the result still points at its call
  EXPECT_NE(mistral[4]["tool_call_id"], id);
  const Json already = Json::parse(R"([{"role": "tool", "tool_call_id": "abcDEF123", "content": "x"}])");
  EXPECT_EQ(MessagesForToolTemplate(ToolFormat::kMistral, already)[0]["tool_call_id"], "abcDEF123");
}

TEST(Messages, ForTemplatesThatKnowNothingOfTools) {
  auto tools = ParseTools(Json::parse(R"([{"type": "function", "function": {"name": "get_weather"}}])"));
  ASSERT_TRUE(tools.ok());
  const Json out = MessagesWithToolPrompt(ToolFormat::kGeneric, Json::parse(kConversation), *tools);
  ASSERT_EQ(out.size(), 5u) << out.dump(1);
  EXPECT_EQ(out[0]["role"], "system");
  const std::string system = out[0]["content"];
  EXPECT_EQ(system.rfind("Be brief.\n\n# Tools", 0), 0u) << system;
  EXPECT_EQ(out[2]["role"], "assistant");
  EXPECT_FALSE(out[2].contains("tool_calls"));
  EXPECT_EQ(out[2]["content"],
            "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
            "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": \"not json\"}\n</tool_call>");
  EXPECT_EQ(out[3]["role"], "user");
  EXPECT_EQ(out[3]["content"],
            "<tool_response>\n18C\n</tool_response>\n<tool_response>\n21C\n</tool_response>");
  EXPECT_EQ(out[4]["content"], "Paris 18C, Rome 21C.");
  // What the model is shown parses back into the calls.
  const ParsedAnswer back = ParseToolCalls(ToolFormat::kGeneric, out[2]["content"].get<std::string>());
  ASSERT_EQ(back.calls.size(), 1u);  // the second call's arguments were not JSON: it stays text
  EXPECT_EQ(back.calls[0].arguments, R"({"city":"Paris"})");

  // No system message: one is prepended; results before a user message join it.
  const Json in2 = Json::parse(R"([{"role": "user", "content": "Hi"},
      {"role": "assistant", "content": "Checking.", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]},
      {"role": "tool", "content": [{"type": "text", "text": "ok"}]}, {"role": "user", "content": "And?"}])");
  const Json out2 = MessagesWithToolPrompt(ToolFormat::kMistral, in2, *tools);
  ASSERT_EQ(out2.size(), 4u) << out2.dump(1);
  EXPECT_EQ(out2[0]["role"], "system");
  EXPECT_EQ(out2[2]["content"], "Checking.\n[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}]");
  EXPECT_EQ(out2[3]["content"], "<tool_response>\nok\n</tool_response>\n\nAnd?");
  // For templates that refuse a system role: the prompt opens the first user message.
  const Json no_system = MessagesWithToolPrompt(ToolFormat::kHermes, in2, *tools, /*system_role=*/false);
  ASSERT_EQ(no_system.size(), 3u);
  EXPECT_EQ(no_system[0]["role"], "user");
  const std::string first = no_system[0]["content"];
  EXPECT_EQ(first.rfind("# Tools", 0), 0u) << first;
  EXPECT_EQ(first.substr(first.size() - 4), "\n\nHi");
  // Without tools the history is still converted, and no prompt is added.
  EXPECT_EQ(MessagesWithToolPrompt(ToolFormat::kMistral, in2, {}).size(), 3u);
}

TEST(FormatToolCalls, EachFormat) {
  const Json calls = Json::parse(R"([{"function": {"name": "a", "arguments": "{\"x\":1}"}},
                                     {"function": {"name": "b", "arguments": {}}}])");
  EXPECT_EQ(FormatToolCalls(ToolFormat::kLlama3, calls),
            R"({"name": "a", "parameters": {"x": 1}}; {"name": "b", "parameters": {}})");
  EXPECT_EQ(FormatToolCalls(ToolFormat::kGranite, calls),
            R"(<|tool_call|>[{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {}}])");
  for (ToolFormat f :
       {ToolFormat::kHermes, ToolFormat::kLlama3, ToolFormat::kMistral, ToolFormat::kGranite}) {
    const ParsedAnswer back = ParseToolCalls(f, FormatToolCalls(f, calls));
    ASSERT_EQ(back.calls.size(), 2u) << ToolFormatName(f);
    EXPECT_EQ(back.calls[0].arguments, R"({"x":1})");
    EXPECT_EQ(back.content, "");
  }
  EXPECT_EQ(FormatToolCalls(ToolFormat::kHermes, Json::array()), "");
}

}  // namespace
}  // namespace llamay::toolcall
