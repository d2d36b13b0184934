// The XML-like formats against the models' real chat templates (testdata/, copied verbatim; see
// testdata/README.md): each is detected as its format, renders a conversation with tools and an assistant
// tool call, and what it writes for that call parses back (ParseToolCalls) into the same call, so the
// parser reads what the model was trained on. FormatToolCalls writes what the templates write.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "template/chat_template.h"
#include "toolcall/toolcall.h"

namespace llamay::toolcall {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

std::string Read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

fs::path TestData() { return fs::path(LLAMAY_SOURCE_DIR) / "src" / "toolcall" / "testdata"; }

struct RealTemplate {
  const char* file;
  ToolFormat format;
  // Where the assistant's turn with the call begins and ends in the rendering.
  const char* turn_begin;
  const char* turn_end;
};

const RealTemplate kTemplates[] = {
    {"Qwen3-Coder.jinja", ToolFormat::kQwen3Coder, "<|im_start|>assistant", "<|im_end|>"},
    {"Qwen3.5-4B.jinja", ToolFormat::kQwen3Coder, "<|im_start|>assistant", "<|im_end|>"},
    {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", ToolFormat::kQwen3Coder, "<|im_start|>assistant",
     "<|im_end|>"},
    {"GLM-4.6.jinja", ToolFormat::kGlm45, "<|assistant|>", "<|observation|>"},
    {"GLM-4.7-Flash.jinja", ToolFormat::kGlm45, "<|assistant|>", "<|observation|>"},
};

std::vector<ToolSpec> Tools() {
  auto tools = ParseTools(Json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
      "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city"},
        "days": {"type": "integer"},
        "detailed": {"type": "boolean"},
        "options": {"type": "object"},
        "hours": {"type": "array", "items": {"type": "integer"}}},
      "required": ["city"]}}},
    {"type": "function", "function": {"name": "ping", "description": "Checks the connection"}}])"));
  EXPECT_TRUE(tools.ok()) << tools.status().ToString();
  return tools.ok() ? *tools : std::vector<ToolSpec>();
}

// The arguments of the assistant's call, as a client sends them (a JSON string).
constexpr const char* kArguments =
    R"({"city": "São Paulo", "days": 3, "detailed": true, "options": {"lang": "pt", "n": [1, 2]}, "hours": [6, 18]})";

Json Conversation() {
  return Json::parse(std::string(R"([
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "Weather in São Paulo, and ping?"},
    {"role": "assistant", "content": "", "tool_calls": [
      {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": )") +
                     Json(kArguments).dump() + R"(}},
      {"id": "call_2", "type": "function", "function": {"name": "ping", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "Sunny, 25C"},
    {"role": "tool", "tool_call_id": "call_2", "content": "pong"}])");
}

TEST(RealTemplates, DetectedAsTheirFormat) {
  for (const RealTemplate& t : kTemplates) {
    const std::string source = Read(TestData() / t.file);
    ASSERT_FALSE(source.empty()) << t.file;
    EXPECT_EQ(DetectToolFormat(source, nullptr), t.format) << t.file;
    EXPECT_TRUE(chat::TemplateReadsVariable(source, "tools")) << t.file;  // they render the tools themselves
  }
  // Qwen 2.5, Qwen 3 and QwQ write JSON in their <tool_call> blocks: still kHermes. (Qwen 2's template
  // knows nothing of tools.)
  const fs::path templates = fs::path(LLAMAY_SOURCE_DIR) / "src" / "template" / "testdata";
  for (const fs::path& hermes :
       {TestData() / "Qwen-Qwen2.5-7B-Instruct.jinja", templates / "qwen3.jinja", templates / "qwq.jinja"}) {
    const std::string source = Read(hermes);
    ASSERT_FALSE(source.empty()) << hermes;
    EXPECT_EQ(DetectToolFormat(source, nullptr), ToolFormat::kHermes) << hermes;
  }
  EXPECT_EQ(DetectToolFormat(Read(templates / "qwen2.jinja"), nullptr), ToolFormat::kGeneric);
}

TEST(RealTemplates, RenderedCallsParseBack) {
  const auto tools = Tools();
  const Json expected = Json::parse(kArguments);
  for (const RealTemplate& t : kTemplates) {
    SCOPED_TRACE(t.file);
    auto tmpl = chat::ChatTemplate::Parse(Read(TestData() / t.file));
    ASSERT_TRUE(tmpl.ok()) << tmpl.status().ToString();
    const Json messages = MessagesForToolTemplate(t.format, Conversation());
    auto text =
        chat::RenderMessages(*tmpl, messages, ToolsJson(tools), /*add_generation_prompt=*/true, "", "");
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    // The tools are in the prompt, and the call is written in the format's syntax.
    EXPECT_NE(text->find("get_weather"), std::string::npos);
    EXPECT_NE(text->find("Checks the connection"), std::string::npos);
    if (t.format == ToolFormat::kQwen3Coder) {
      EXPECT_NE(
          text->find("<tool_call>\n<function=get_weather>\n<parameter=city>\nSão Paulo\n</parameter>\n"),
          std::string::npos)
          << *text;
    } else {
      EXPECT_NE(text->find("<tool_call>get_weather"), std::string::npos) << *text;
      EXPECT_NE(text->find("<arg_key>city</arg_key>"), std::string::npos) << *text;
      EXPECT_NE(text->find("<arg_value>São Paulo</arg_value>"), std::string::npos) << *text;
    }
    // The assistant's turn parses back into the same two calls.
    const size_t begin = text->find(t.turn_begin, text->find("Weather in São Paulo, and ping?"));
    ASSERT_NE(begin, std::string::npos) << *text;
    const size_t end = text->find(t.turn_end, begin);
    ASSERT_NE(end, std::string::npos) << *text;
    const std::string turn = text->substr(begin + std::string_view(t.turn_begin).size(),
                                          end - begin - std::string_view(t.turn_begin).size());
    const ParsedAnswer a = ParseToolCalls(t.format, turn, nullptr, &tools);
    ASSERT_EQ(a.calls.size(), 2u) << turn;
    EXPECT_EQ(a.calls[0].name, "get_weather");
    EXPECT_EQ(Json::parse(a.calls[0].arguments), expected) << a.calls[0].arguments << "\n" << turn;
    EXPECT_EQ(a.calls[1].name, "ping");
    EXPECT_EQ(a.calls[1].arguments, "{}");
    // Only the templates' thinking markup is left around the calls.
    std::string rest = a.content;
    for (const char* markup : {"<think>", "</think>"}) {
      for (size_t at; (at = rest.find(markup)) != std::string::npos;)
        rest.erase(at, std::string_view(markup).size());
    }
    EXPECT_EQ(rest.find_first_not_of(" \n"), std::string::npos) << a.content;
  }
}

// FormatToolCalls (used when a template does not render tools) writes a call as the templates do.
TEST(RealTemplates, FormatToolCallsWritesWhatTheTemplatesWrite) {
  const auto tools = Tools();
  const Json calls = Json::parse(R"([{"id": "c", "type": "function", "function": {"name": "get_weather",
      "arguments": "{\"city\": \"Paris\", \"days\": 3, \"detailed\": false, \"options\": {\"a\": [1, null]}}"}}])");
  const Json messages = Json::array({{{"role", "user"}, {"content", "Hi"}},
                                     {{"role", "assistant"}, {"content", ""}, {"tool_calls", calls}},
                                     {{"role", "tool"}, {"tool_call_id", "c"}, {"content", "ok"}}});
  for (const char* file : {"Qwen3-Coder.jinja", "Qwen3.5-4B.jinja",
                           "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", "GLM-4.6.jinja"}) {
    SCOPED_TRACE(file);
    const std::string source = Read(TestData() / file);
    const ToolFormat format = DetectToolFormat(source, nullptr);
    auto tmpl = chat::ChatTemplate::Parse(source);
    ASSERT_TRUE(tmpl.ok()) << tmpl.status().ToString();
    auto text = chat::RenderMessages(*tmpl, MessagesForToolTemplate(format, messages), ToolsJson(tools),
                                     /*add_generation_prompt=*/false, "", "");
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    const std::string written = FormatToolCalls(format, calls);
    EXPECT_NE(text->find(written), std::string::npos) << written << "\n---\n" << *text;
  }
}

}  // namespace
}  // namespace llamay::toolcall
