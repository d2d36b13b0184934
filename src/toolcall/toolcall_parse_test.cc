// ParseToolCalls for every format: single and parallel calls, calls mixed with text, malformed calls
// (which stay content), truncated output, and lenient variants (whitespace, key order, extra members).
#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <vector>

#include "toolcall/toolcall.h"

namespace llamay::toolcall {
namespace {

struct Expected {
  std::string name;
  std::string arguments;
};

void ExpectParse(ToolFormat format, const std::string& text, const std::string& content,
                 const std::vector<Expected>& calls) {
  SCOPED_TRACE(std::string(ToolFormatName(format)) + ": " + text);
  const ParsedAnswer a = ParseToolCalls(format, text, RandomToolCallIds(1));
  EXPECT_EQ(a.content, content);
  ASSERT_EQ(a.calls.size(), calls.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(a.calls[i].name, calls[i].name) << i;
    EXPECT_EQ(a.calls[i].arguments, calls[i].arguments) << i;
  }
}

// Not a call: all of it stays content.
void ExpectNoCall(ToolFormat format, const std::string& text) { ExpectParse(format, text, text, {}); }

TEST(ParseToolCalls, Hermes) {
  for (ToolFormat f : {ToolFormat::kHermes, ToolFormat::kGeneric}) {
    const std::string weather =
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": "
        "\"c\"}}\n</tool_call>";
    const Expected w = {"get_weather", R"({"city":"Paris","unit":"c"})"};
    ExpectParse(f, weather, "", {w});
    ExpectParse(f, weather + "\n" + weather, "", {w, w});
    ExpectParse(f, weather + weather, "", {w, w});
    ExpectParse(f, "Let me check.\n\n" + weather, "Let me check.", {w});
    ExpectParse(f, weather + "\n\nDone.", "Done.", {w});
    ExpectParse(f, "A\n" + weather + "\nB\n", "A\nB\n", {w});
    ExpectParse(f, "\n" + weather + "\n", "", {w});
    // Lenient: no newlines, no closing tag at the end, arguments first, "parameters", extra members.
    ExpectParse(f, R"(<tool_call>{"name":"f","arguments":{}}</tool_call>)", "", {{"f", "{}"}});
    ExpectParse(f, R"(<tool_call>{"name": "f", "arguments": {"a": [1, 2]}})", "", {{"f", R"({"a":[1,2]})"}});
    ExpectParse(f, R"(<tool_call> {"arguments": {"a": 1}, "name": "f"} </tool_call>)", "",
                {{"f", R"({"a":1})"}});
    ExpectParse(
        f, R"(<tool_call>{"type": "function", "name": "f", "parameters": {"a": true}, "id": 3}</tool_call>)",
        "", {{"f", R"({"a":true})"}});
    // Strings keep their bytes; whitespace outside them goes.
    ExpectParse(
        f, "<tool_call>{\"name\": \"f\", \"arguments\": {\n  \"q\": \"a  b\\n\\\"c\\\" }\"\n}}</tool_call>",
        "", {{"f", R"({"q":"a  b\n\"c\" }"})"}});
    // Cut off inside the arguments: still the call (finish_reason "length"), arguments as far as they got.
    ExpectParse(f, R"(<tool_call>{"name": "f", "arguments": {"a": "hel)", "", {{"f", R"({"a":"hel)"}});
    // Malformed: content.
    ExpectNoCall(f, "<tool_call>\n{\"name\": 5, \"arguments\": {}}\n</tool_call>");
    ExpectNoCall(f, "<tool_call>\nnot json\n</tool_call>");
    ExpectNoCall(f, R"(<tool_call>{"name": "f", "arguments": "{}"}</tool_call>)");
    ExpectNoCall(f, R"(<tool_call>{"name": "f"}</tool_call>)");
    ExpectNoCall(f, R"(<tool_call>{"name": "", "arguments": {}}</tool_call>)");
    ExpectNoCall(f, R"(<tool_call>{"nam)");
    ExpectNoCall(f, "Use <tool_call> tags.");
    ExpectNoCall(f, "Plain answer.\n");
    ExpectNoCall(f, "<tool");
    // A broken call, then a good one.
    ExpectParse(f, "<tool_call>oops</tool_call>\n" + weather, "<tool_call>oops</tool_call>", {w});
  }
}

TEST(ParseToolCalls, Llama3) {
  const ToolFormat f = ToolFormat::kLlama3;
  const Expected call = {"get_weather", R"({"city":"Paris"})"};
  ExpectParse(f, R"({"name": "get_weather", "parameters": {"city": "Paris"}})", "", {call});
  ExpectParse(f, R"(<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}})", "", {call});
  ExpectParse(f, "\n\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n", "", {call});
  ExpectParse(f, R"({"name": "a", "parameters": {}}; {"name": "b", "parameters": {"x": 1}})", "",
              {{"a", "{}"}, {"b", R"({"x":1})"}});
  ExpectParse(f, "{\"name\": \"a\", \"parameters\": {}}\n{\"name\": \"b\", \"parameters\": {}}", "",
              {{"a", "{}"}, {"b", "{}"}});
  ExpectParse(f, "Checking.<|python_tag|>{\"name\": \"a\", \"parameters\": {}}", "Checking.", {{"a", "{}"}});
  // A JSON object in the middle of text is not a call; one at the start that is not a call is content.
  ExpectNoCall(f, R"(Write {"name": "f", "parameters": {}} to call.)");
  ExpectNoCall(f, R"({"a": 1})");
  ExpectNoCall(f, R"({"answer": "json", "name": "f", "parameters": {}})");
  ExpectNoCall(f, R"(<|python_tag|>brave_search.call(query="x"))");
  ExpectParse(f, "{\"name\": \"a\", \"parameters\": {}}\nThat was the call.", "That was the call.",
              {{"a", "{}"}});
}

TEST(ParseToolCalls, Mistral) {
  const ToolFormat f = ToolFormat::kMistral;
  ExpectParse(f, R"([TOOL_CALLS][{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {}}])", "",
              {{"a", R"({"x":1})"}, {"b", "{}"}});
  ExpectParse(f, R"([TOOL_CALLS] [ {"name": "a", "arguments": {"x": 1}} ])", "", {{"a", R"({"x":1})"}});
  ExpectParse(f, R"([TOOL_CALLS]a[ARGS]{"x": 1}[TOOL_CALLS]b[ARGS]{})", "",
              {{"a", R"({"x":1})"}, {"b", "{}"}});
  ExpectParse(f, R"([TOOL_CALLS]{"name": "a", "arguments": {}})", "", {{"a", "{}"}});
  ExpectParse(f, "Sure.\n[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {}}]", "Sure.", {{"a", "{}"}});
  ExpectNoCall(f, "[TOOL_CALLS][oops]");
  ExpectNoCall(f, "[TOOL_CALLS][]");
  ExpectNoCall(f, "[TOOL_CALLS]a[ARG]{}");
  ExpectNoCall(f, "[TOOL_CALLS]");
  // The second item is broken: the first call stands, the rest is content.
  ExpectParse(f, R"([TOOL_CALLS][{"name": "a", "arguments": {}}, oops])", ", oops]", {{"a", "{}"}});
}

TEST(ParseToolCalls, Granite) {
  const ToolFormat f = ToolFormat::kGranite;
  ExpectParse(f, R"(<|tool_call|>[{"name": "a", "arguments": {"x": [1, {"y": null}]}}])", "",
              {{"a", R"({"x":[1,{"y":null}]})"}});
  ExpectParse(f, R"(<|tool_call|>[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}])", "",
              {{"a", "{}"}, {"b", "{}"}});
  ExpectParse(f, "I will call.<|tool_call|>[{\"name\": \"a\", \"arguments\": {}}]", "I will call.",
              {{"a", "{}"}});
  ExpectParse(f, R"(<|tool_call|>{"name": "a", "arguments": {}})", "", {{"a", "{}"}});  // without the list
  ExpectNoCall(f, "<|tool_call|>[{\"name\": \"a\", \"argu");
  // Another format's syntax is just text.
  ExpectNoCall(f, "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>");
}

TEST(ParseToolCalls, IdsAreCallAnd24Alphanumerics) {
  const ParsedAnswer a =
      ParseToolCalls(ToolFormat::kGranite,
                     R"(<|tool_call|>[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}])");
  ASSERT_EQ(a.calls.size(), 2u);
  for (const ToolCall& c : a.calls) {
    ASSERT_EQ(c.id.size(), 29u) << c.id;
    EXPECT_EQ(c.id.substr(0, 5), "call_");
    for (char ch : c.id.substr(5)) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(ch))) << c.id;
  }
  EXPECT_NE(a.calls[0].id, a.calls[1].id);
  // Seeded generators repeat themselves.
  auto g1 = RandomToolCallIds(42), g2 = RandomToolCallIds(42);
  EXPECT_EQ(g1(), g2());
  EXPECT_NE(g1(), RandomToolCallIds(43)());
}

}  // namespace
}  // namespace llamay::toolcall
