// The XML-like formats (kQwen3Coder, kGlm45): detection, parsing with values typed by the tools' schemas,
// and streaming that adds up to the parse however the output is split. toolcall_xml_grammar_test.cc has
// the grammar and the prompts; toolcall_template_test.cc checks all this against the real templates.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "toolcall/toolcall.h"
#include "toolcall/toolcall_stream_test_util.h"
#include "toolcall/toolcall_xml_test_util.h"

namespace llamay::toolcall {
namespace {

using Json = nlohmann::ordered_json;
using testing::Glm;
using testing::kGlm;
using testing::kQwen;
using testing::Params;
using testing::Qwen;
using testing::Tools;

struct Expected {
  std::string name;
  std::string arguments;
};

void ExpectParse(ToolFormat f, const std::string& text, const std::string& content,
                 const std::vector<Expected>& calls, const std::vector<ToolSpec>* tools) {
  SCOPED_TRACE(std::string(ToolFormatName(f)) + ": " + text);
  const ParsedAnswer a = ParseToolCalls(f, text, RandomToolCallIds(1), tools);
  EXPECT_EQ(a.content, content);
  ASSERT_EQ(a.calls.size(), calls.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(a.calls[i].name, calls[i].name) << i;
    EXPECT_EQ(a.calls[i].arguments, calls[i].arguments) << i;
    EXPECT_EQ(a.calls[i].id.size(), 29u);
  }
}

TEST(XmlFormats, NamesTriggersDetection) {
  EXPECT_EQ(ToolFormatName(kQwen), "qwen3_coder");
  EXPECT_EQ(ToolFormatName(kGlm), "glm45");
  for (ToolFormat f : {kQwen, kGlm}) {
    ASSERT_EQ(ToolCallTriggers(f).size(), 1u);
    EXPECT_EQ(ToolCallTriggers(f)[0].text, "<tool_call>");
    EXPECT_FALSE(ToolCallTriggers(f)[0].at_start);
  }
  auto vocab = [](std::set<std::string> tokens) {
    return [tokens = std::move(tokens)](std::string_view t) { return tokens.count(std::string(t)) > 0; };
  };
  const auto none = vocab({});
  EXPECT_EQ(DetectToolFormat("<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>", none), kQwen);
  EXPECT_EQ(DetectToolFormat("{{ '<tool_call>\\n<function=' + name }}", none), kQwen);
  EXPECT_EQ(DetectToolFormat("<tool_call>{name}\n<arg_key>k</arg_key>", none), kGlm);
  // A Llama-style template that teaches <function=...> without <tool_call> is not Qwen3-Coder's.
  EXPECT_EQ(DetectToolFormat("<|python_tag|> or <function=name>{...}</function>", none), ToolFormat::kLlama3);
  EXPECT_EQ(DetectToolFormat("<tool_call>\n{\"name\": ...}\n</tool_call>", none), ToolFormat::kHermes);
  EXPECT_EQ(DetectToolFormat("", vocab({"<tool_call>", "<arg_key>", "<arg_value>"})), kGlm);
  EXPECT_EQ(DetectToolFormat("", vocab({"<tool_call>", "</tool_call>"})), ToolFormat::kHermes);
}

TEST(XmlParse, QwenValuesTypedBySchema) {
  const auto tools = Tools();
  ExpectParse(kQwen, Qwen("get_weather", {{"city", "Paris"}, {"days", "3"}}), "",
              {{"get_weather", R"({"city":"Paris","days":3})"}}, &tools);
  // Strings: exactly one newline off each end; quotes, backslashes and newlines escaped; numbers stay text.
  ExpectParse(kQwen, Qwen("get_weather", {{"city", "\nLine 1\n\"2\" \\ \t\n"}, {"unit", "c"}}), "",
              {{"get_weather", R"({"city":"\nLine 1\n\"2\" \\ \t\n","unit":"c"})"}}, &tools);
  ExpectParse(kQwen, Qwen("get_weather", {{"city", "42"}, {"detailed", "True"}}), "",
              {{"get_weather", R"({"city":"42","detailed":true})"}}, &tools);
  ExpectParse(kQwen, Qwen("get_weather", {{"city", " x "}, {"detailed", " false "}, {"days", "three"}}), "",
              {{"get_weather", R"({"city":" x ","detailed":false,"days":"three"})"}}, &tools);
  // JSON-typed values as written, compacted; what does not parse as the schema's type is a string.
  ExpectParse(
      kQwen,
      Qwen("search", {{"query", "llamas"},
                      {"filters", "{\"site\": \"x.org\",\n \"n\": [1, 2]}"},
                      {"tags", "[\"a\", \"b c\"]"},
                      {"limit", "None"},
                      {"ratio", "0.5"}}),
      "",
      {{"search",
        R"({"query":"llamas","filters":{"site":"x.org","n":[1,2]},"tags":["a","b c"],"limit":null,"ratio":0.5})"}},
      &tools);
  ExpectParse(kQwen, Qwen("search", {{"filters", "not json"}, {"limit", "7"}, {"ratio", "true"}}), "",
              {{"search", R"({"filters":"not json","limit":7,"ratio":"true"})"}}, &tools);
  // A string with a format takes its value's JSON form (what the grammar writes), or the text.
  ExpectParse(kQwen, Qwen("search", {{"when", "\"2024-02-29\""}, {"query", "\"q\""}}), "",
              {{"search", R"({"when":"2024-02-29","query":"\"q\""})"}}, &tools);
  ExpectParse(kQwen, Qwen("search", {{"when", "2024-02-29"}}), "", {{"search", R"({"when":"2024-02-29"})"}},
              &tools);
  // Unknown parameters, functions or no tools: JSON unless it is a string.
  const std::string unknown = Qwen("get_weather", {{"extra", "12"},
                                                   {"obj", "{\"a\": 1}"},
                                                   {"word", "hello"},
                                                   {"quoted", "\"hi\""},
                                                   {"flag", "True"},
                                                   {"nothing", "null"}});
  const std::string typed =
      R"({"extra":12,"obj":{"a":1},"word":"hello","quoted":"\"hi\"","flag":"True","nothing":null})";
  ExpectParse(kQwen, unknown, "", {{"get_weather", typed}}, &tools);
  ExpectParse(kQwen, unknown, "", {{"get_weather", typed}}, nullptr);
  ExpectParse(kQwen, Qwen("get_weather", {{"city", "Paris"}, {"days", "3"}}), "",
              {{"get_weather", R"({"city":"Paris","days":3})"}}, nullptr);
  ExpectParse(kQwen, Qwen("nope", {{"days", "3"}}), "", {{"nope", R"({"days":3})"}}, &tools);
  // A value may hold any text but its closing tag, tags of the format included.
  ExpectParse(kQwen, Qwen("f", {{"code", "<div>\n</function>\n</tool_call><parameter=x>\n</parameter"}}), "",
              {{"f", R"({"code":"<div>\n</function>\n</tool_call><parameter=x>\n</parameter"})"}}, nullptr);
  ExpectParse(kQwen, Qwen("get_weather", {{"city", ""}}), "", {{"get_weather", R"({"city":""})"}}, &tools);
  ExpectParse(kQwen, Qwen("ping", {}), "", {{"ping", "{}"}}, &tools);
}

TEST(XmlParse, QwenCallsAndText) {
  const auto tools = Tools();
  const std::string w = Qwen("get_weather", {{"city", "Paris"}});
  const Expected ew = {"get_weather", R"({"city":"Paris"})"};
  ExpectParse(kQwen, w + "\n" + w, "", {ew, ew}, &tools);
  ExpectParse(kQwen, w + w, "", {ew, ew}, &tools);
  ExpectParse(kQwen, "I'll check both.\n\n" + w + "\n" + w + "\n", "I'll check both.", {ew, ew}, &tools);
  ExpectParse(kQwen, "A\n" + w + "\nB", "A\nB", {ew}, &tools);
  // Lenient: no newlines, spaces between tags, no </function>, no </tool_call>.
  ExpectParse(kQwen, "<tool_call><function=f><parameter=a>1</parameter></function></tool_call>", "",
              {{"f", R"({"a":1})"}}, nullptr);
  ExpectParse(kQwen, "<tool_call> <function=f>  <parameter=a>\n1\n</parameter> </function> </tool_call>", "",
              {{"f", R"({"a":1})"}}, nullptr);
  ExpectParse(kQwen, "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</tool_call>\nok", "ok",
              {{"f", R"({"a":1})"}}, nullptr);
  ExpectParse(kQwen, "<tool_call>\n<function=f>\n</function>", "", {{"f", "{}"}}, nullptr);
  // Cut off: the call stays, its arguments closed (a cut-off tag dropped, a cut-off value as it stands).
  const std::string head = "<tool_call>\n<function=get_weather>\n";
  ExpectParse(kQwen, head, "", {{"get_weather", "{}"}}, &tools);
  ExpectParse(kQwen, head + "<parameter=city>\nPar", "", {{"get_weather", R"({"city":"Par"})"}}, &tools);
  ExpectParse(kQwen, head + "<parameter=city>\nParis\n</param", "", {{"get_weather", R"({"city":"Paris"})"}},
              &tools);
  ExpectParse(kQwen, head + "<parameter=city>\nParis\n</parameter>\n<param", "",
              {{"get_weather", R"({"city":"Paris"})"}}, &tools);
  ExpectParse(kQwen, head + "<parameter=city>\nParis\n</parameter>\n<parameter=days>\n1", "",
              {{"get_weather", R"({"city":"Paris","days":1})"}}, &tools);
  ExpectParse(kQwen, head + "<parameter=days>\n", "", {{"get_weather", R"({"days":""})"}}, &tools);
  // Not calls: stay content.
  for (const std::string text : {"<tool_call>hello</tool_call>", "<tool_call>\n<function=bad name>\n",
                                 "<tool_call>\n<function=get_wea", "<tool_call>\n{\"name\": \"f\"}"}) {
    ExpectParse(kQwen, text, text, {}, &tools);
  }
  // kHermes's JSON in the block is understood (models fall back to it), in both formats.
  for (ToolFormat f : {kQwen, kGlm}) {
    ExpectParse(f, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>\nok", "ok",
                {{"f", R"({"a":1})"}}, &tools);
  }
  // Text inside the body ends the arguments; it stays content.
  ExpectParse(kQwen, "<tool_call>\n<function=f>\nsome text\n</function>\n</tool_call>",
              "some text\n</function>\n</tool_call>", {{"f", "{}"}}, nullptr);
  ExpectParse(kQwen, "<tool_call>\n<function=f>\n<parameter=a\nb>\n", "<parameter=a\nb>\n", {{"f", "{}"}},
              nullptr);
}

TEST(XmlParse, Glm) {
  const auto tools = Tools();
  const Expected ew = {"get_weather", R"({"city":"Paris","days":3})"};
  // GLM-4.5/4.6 write newlines between the tags, GLM-4.7 none.
  ExpectParse(kGlm, Glm("get_weather", {{"city", "Paris"}, {"days", "3"}}), "", {ew}, &tools);
  ExpectParse(kGlm, Glm("get_weather", {{"city", "Paris"}, {"days", "3"}}, false), "", {ew}, &tools);
  ExpectParse(kGlm,
              "Sure.\n" + Glm("get_weather", {{"city", "Paris"}, {"days", "3"}}) + "\n" +
                  Glm("ping", {}, false) + "\nDone.",
              "Sure.\nDone.", {ew, {"ping", "{}"}}, &tools);
  // Values are the text between the tags exactly (the templates write no newlines around them).
  ExpectParse(kGlm, Glm("get_weather", {{"city", "\nNew York\n"}, {"detailed", "true"}}), "",
              {{"get_weather", R"({"city":"\nNew York\n","detailed":true})"}}, &tools);
  ExpectParse(kGlm, Glm("search", {{"filters", "{\"site\": \"a\"}"}, {"limit", "null"}, {"tags", "[]"}}), "",
              {{"search", R"({"filters":{"site":"a"},"limit":null,"tags":[]})"}}, &tools);
  ExpectParse(kGlm, Glm("f", {{" key ", "1"}, {"s", "</arg_key><arg_value>"}}), "",
              {{"f", R"({"key":1,"s":"</arg_key><arg_value>"})"}}, nullptr);
  ExpectParse(kGlm, "<tool_call>ping</tool_call>", "", {{"ping", "{}"}}, &tools);
  // Cut off.
  ExpectParse(kGlm, "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Pa", "",
              {{"get_weather", R"({"city":"Pa"})"}}, &tools);
  ExpectParse(kGlm, "<tool_call>get_weather\n<arg_key>ci", "", {{"get_weather", "{}"}}, &tools);
  ExpectParse(kGlm, "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>", "",
              {{"get_weather", R"({"city":"Paris"})"}}, &tools);
  // Not calls: a name must be followed by <arg_key> or </tool_call>.
  for (const std::string text : {"<tool_call>some words</tool_call>", "<tool_call>get_weather",
                                 "<tool_call>\n{\"name\": 1}\n</tool_call>", "<tool_call></tool_call>"}) {
    ExpectParse(kGlm, text, text, {}, &tools);
  }
  ExpectParse(kGlm, "<tool_call>f\n<arg_key>a</arg_key> text", "<arg_key>a</arg_key> text", {{"f", "{}"}},
              nullptr);
}

// ---- Streaming ------------------------------------------------------------------------------------------

using testing::ExpectSame;
using testing::StreamPieces;

TEST(XmlStream, ArgumentsStreamAsTheyCome) {
  const auto tools = Tools();
  ToolCallStream s(kQwen, RandomToolCallIds(1), &tools);
  ToolDelta d = s.Push("Let me look.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nPar");
  EXPECT_EQ(d.content, "Let me look.");
  ASSERT_EQ(d.calls.size(), 2u);
  EXPECT_EQ(d.calls[0].name, "get_weather");
  EXPECT_EQ(d.calls[0].id.substr(0, 5), "call_");
  EXPECT_EQ(d.calls[1].arguments, R"({"city":"Par)");
  d = s.Push("is\n</param");  // the newline may be the one the template writes before the tag: held
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].arguments, "is");
  d = s.Push("eter>\n<parameter=days>\n3");  // a number waits for its closing tag
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].arguments, R"(","days":)");
  d = s.Push("\n</parameter>\n</function>\n</tool_call>");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].arguments, "3}");
  EXPECT_TRUE(s.Finish().empty());

  ToolCallStream g(kGlm, RandomToolCallIds(1), &tools);
  d = g.Push("<tool_call>get_weather");
  EXPECT_TRUE(d.empty());  // a name alone may still be text
  d = g.Push("\n<arg_key>city</arg_key>\n<arg_value>Ly");
  ASSERT_EQ(d.calls.size(), 2u);
  EXPECT_EQ(d.calls[1].arguments, R"({"city":"Ly)");
  d = g.Push("on</arg_value>\n</tool_call> ok");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].arguments, R"(on"})");
  EXPECT_EQ(d.content, "ok");
}

// Outputs mixing text, near-triggers, calls with awkward values, broken calls and cut-offs.
std::vector<std::string> RandomOutputs(ToolFormat f, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  const char* texts[] = {"Hello",
                         " ",
                         "\n",
                         "\n\n",
                         "<",
                         "<tool",
                         "<tool_call>",
                         "<tool_call>\n<function=",
                         "<tool_call>get_weather",
                         "</parameter>",
                         "<arg_key>",
                         "Sure, I'll check.",
                         ">",
                         "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": [1]}}</tool_call>"};
  const char* values[] = {"Paris",
                          "",
                          "\n",
                          "3",
                          "  7 ",
                          "True",
                          "null",
                          "[1, 2]",
                          "{\"site\": \"a<b\"}",
                          "<",
                          "</param",
                          "</parameter",
                          "</arg_value",
                          "a\nb\n\n",
                          "\"q\"",
                          "caf\xc3\xa9 \\"};
  const char* keys[] = {"city", "days", "detailed", "filters", "limit", "query", "extra", "unit"};
  const char* names[] = {"get_weather", "search", "ping", "other"};
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    std::string s;
    const int parts = 1 + rng() % 4;
    for (int p = 0; p < parts; ++p) {
      if (rng() % 2) {
        Params params;
        for (int k = rng() % 4; k > 0; --k) params.push_back({keys[rng() % 8], values[rng() % 16]});
        const std::string name = names[rng() % 4];
        s += f == kQwen ? Qwen(name, params) : Glm(name, params, rng() % 2);
      } else {
        s += texts[rng() % (sizeof(texts) / sizeof(texts[0]))];
      }
    }
    if (rng() % 4 == 0) s.resize(rng() % (s.size() + 1));
    out.push_back(s);
  }
  return out;
}

TEST(XmlStream, AnySplitAddsUpToTheWholeParse) {
  const auto tools = Tools();
  int checked = 0, with_calls = 0, with_content = 0;
  for (ToolFormat f : {kQwen, kGlm}) {
    std::mt19937 rng(static_cast<uint32_t>(f) + 7);
    for (const std::vector<ToolSpec>* t : {&tools, static_cast<const std::vector<ToolSpec>*>(nullptr)}) {
      for (const std::string& text : RandomOutputs(f, 200, static_cast<uint32_t>(f) * 3 + (t != nullptr))) {
        const ParsedAnswer whole = ParseToolCalls(f, text, RandomToolCallIds(9), t);
        with_calls += !whole.calls.empty();
        with_content += !whole.content.empty();
        for (const ToolCall& c : whole.calls) {  // closed even when cut off ("f" is kHermes's JSON: not so)
          if (c.name == "f") continue;
          EXPECT_TRUE(Json::parse(c.arguments, nullptr, false).is_object()) << c.arguments << "\n" << text;
        }
        const std::string what = std::string(ToolFormatName(f)) + ": " + text;
        if (text.size() <= 200) {
          for (size_t cut = 0; cut <= text.size(); ++cut) {
            ExpectSame(StreamPieces(f, {text.substr(0, cut), text.substr(cut)}, t), whole,
                       what + " @" + std::to_string(cut));
          }
          std::vector<std::string> bytes;
          for (char c : text) bytes.push_back(std::string(1, c));
          ExpectSame(StreamPieces(f, bytes, t), whole, what + " bytewise");
        }
        for (int trial = 0; trial < 10; ++trial) {
          std::vector<std::string> pieces;
          for (size_t pos = 0; pos < text.size();) {
            const size_t len = 1 + rng() % 9;
            pieces.push_back(text.substr(pos, len));
            pos += len;
          }
          ExpectSame(StreamPieces(f, pieces, t), whole, what);
        }
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 800);
  EXPECT_GT(with_calls, 300);
  EXPECT_GT(with_content, 200);
}

// A long string value streams (nothing held back but a partial closing tag); a parameter tag that stays
// undecided past 16 KiB is not one, however the text is split.
TEST(XmlStream, LongOutputs) {
  const std::string big(40000, 'x');
  const std::string long_value = Qwen("f", {{"s", big}});
  const std::string long_key =
      "<tool_call>\n<function=f>\n<parameter=" + big + ">\n1\n</parameter>\n</function>";
  const auto tools = ParseTools(Json::parse(
      R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"s": {"type": "string"}}}}}])"));
  ASSERT_TRUE(tools.ok());
  const ParsedAnswer a = ParseToolCalls(kQwen, long_value, nullptr, &*tools);
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].arguments, "{\"s\":\"" + big + "\"}");
  const ParsedAnswer b = ParseToolCalls(kQwen, long_key, nullptr, &*tools);
  ASSERT_EQ(b.calls.size(), 1u);
  EXPECT_EQ(b.calls[0].arguments, "{}");
  EXPECT_EQ(b.content.substr(0, 12), "<parameter=x");
  std::mt19937 rng(3);
  for (const std::string& text : {long_value, long_key}) {
    const ParsedAnswer whole = ParseToolCalls(kQwen, text, RandomToolCallIds(9), &*tools);
    for (int trial = 0; trial < 3; ++trial) {
      std::vector<std::string> pieces;
      for (size_t pos = 0; pos < text.size();) {
        const size_t len = 1 + rng() % 64;
        pieces.push_back(text.substr(pos, len));
        pos += len;
      }
      ExpectSame(StreamPieces(kQwen, pieces, &*tools), whole, text.substr(0, 40));
    }
  }
  // The value came out while it was being written, not at its end.
  ToolCallStream s(kQwen, RandomToolCallIds(9), &*tools);
  s.Push("<tool_call>\n<function=f>\n<parameter=s>\n");
  std::string streamed;
  for (size_t i = 0; i < 100; ++i) {
    for (const ToolCallDelta& d : s.Push(big.substr(0, 100)).calls) streamed += d.arguments;
  }
  EXPECT_EQ(streamed, std::string(10000, 'x'));
}

}  // namespace
}  // namespace llamay::toolcall
