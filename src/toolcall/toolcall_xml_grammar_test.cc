// The XML-like formats' grammar (valid calls in; wrong names, missing or mistyped parameters out;
// generations under it parse back into valid calls) and the calls and prompts written for them.
#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "grammar/matcher.h"
#include "grammar/synthetic_vocab.h"
#include "grammar/test_util.h"
#include "toolcall/toolcall.h"
#include "toolcall/toolcall_xml_test_util.h"

namespace llamay::toolcall {
namespace {

using Json = nlohmann::ordered_json;
using grammar::testing::Matches;
using testing::Glm;
using testing::kGlm;
using testing::kQwen;
using testing::Params;
using testing::Qwen;
using testing::Tools;
using testing::Write;

// ---- Grammar --------------------------------------------------------------------------------------------

std::shared_ptr<const grammar::Grammar> Compile(ToolFormat f, const std::vector<ToolSpec>& tools,
                                                const ToolChoice& choice, bool parallel,
                                                const Json* answer = nullptr) {
  auto gbnf = ToolCallGbnf(f, tools, choice, parallel, answer);
  EXPECT_TRUE(gbnf.ok()) << gbnf.status().ToString();
  if (!gbnf.ok()) return nullptr;
  auto g = grammar::ParseGbnf(*gbnf);
  EXPECT_TRUE(g.ok()) << g.status().ToString() << "\n" << *gbnf;
  return g.ok() ? *g : nullptr;
}

// Whether `args` validates against the test tools' schemas (written out for these schemas).
bool Valid(const std::string& name, const std::string& args) {
  const Json a = Json::parse(args, nullptr, false);
  if (!a.is_object()) return false;
  if (name == "ping") return true;
  auto is_date = [](const Json& v) {
    if (!v.is_string()) return false;
    const std::string s = v.get<std::string>();
    return s.size() == 10 && s[4] == '-' && s[7] == '-';
  };
  if (name == "get_weather") {
    if (!a.contains("city") || !a["city"].is_string()) return false;
    for (const auto& [k, v] : a.items()) {
      const bool ok = k == "city" || (k == "days" && v.is_number_integer() && v >= 1 && v <= 14) ||
                      (k == "unit" && (v == "c" || v == "f")) || (k == "detailed" && v.is_boolean());
      if (!ok) return false;
    }
    return true;
  }
  if (name != "search" || !a.contains("query") || !a.contains("limit")) return false;
  for (const auto& [k, v] : a.items()) {
    bool ok = false;
    if (k == "query") {  // at most 12 code points
      size_t points = 0;
      if (v.is_string()) {
        for (char c : v.get<std::string>()) points += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
      }
      ok = v.is_string() && points <= 12;
    }
    if (k == "filters") {
      ok = v.is_object();
      for (const auto& [fk, fv] : v.items()) ok = ok && fk == "site" && fv.is_string();
    }
    if (k == "tags") {
      ok = v.is_array();
      for (const Json& t : v) ok = ok && t.is_string();
    }
    if (k == "limit") ok = v.is_null() || v.is_number_integer();
    if (k == "ratio") ok = v.is_number();
    if (k == "when") ok = is_date(v);
    if (!ok) return false;
  }
  return true;
}

struct GrammarCase {
  std::string name;
  Params params;
  std::string arguments;  // what it parses to
};

const std::vector<GrammarCase> kValid = {
    {"get_weather", {{"city", "Paris"}}, R"({"city":"Paris"})"},
    {"get_weather",
     {{"city", "New\nYork </param"}, {"days", "14"}, {"unit", "f"}, {"detailed", "false"}},
     R"({"city":"New\nYork </param","days":14,"unit":"f","detailed":false})"},
    {"get_weather", {{"city", ""}, {"detailed", "true"}}, R"({"city":"","detailed":true})"},
    {"search", {{"query", "llamas"}, {"limit", "null"}}, R"({"query":"llamas","limit":null})"},
    {"search",
     {{"query", "a b"},
      {"filters", "{\"site\": \"x.org\"}"},
      {"tags", "[\"t\"]"},
      {"limit", "-3"},
      {"ratio", "2.5e3"},
      {"when", "\"2024-02-29\""}},
     R"({"query":"a b","filters":{"site":"x.org"},"tags":["t"],"limit":-3,"ratio":2.5e3,"when":"2024-02-29"})"},
    {"ping", {}, "{}"},
};

const std::vector<GrammarCase> kInvalid = {
    {"nope", {}, ""},                                                     // unknown function
    {"Get_weather", {{"city", "Paris"}}, ""},                             // names are exact
    {"get_weather", {}, ""},                                              // required parameter missing
    {"get_weather", {{"days", "3"}}, ""},                                 // required parameter missing
    {"get_weather", {{"city", "Paris"}, {"days", "3.5"}}, ""},            // not an integer
    {"get_weather", {{"city", "Paris"}, {"days", "three"}}, ""},          // not an integer
    {"get_weather", {{"city", "Paris"}, {"days", "15"}}, ""},             // above the maximum
    {"get_weather", {{"city", "Paris"}, {"unit", "k"}}, ""},              // not in the enum
    {"get_weather", {{"days", "3"}, {"city", "Paris"}}, ""},              // the schema's order
    {"get_weather", {{"city", "Paris"}, {"extra", "1"}}, ""},             // not a parameter
    {"get_weather", {{"city", "Paris"}, {"city", "Lyon"}}, ""},           // twice
    {"search", {{"query", "a query far too long"}, {"limit", "1"}}, ""},  // maxLength
    {"search", {{"query", "<b>"}, {"limit", "1"}}, ""},                   // '<' in a counted string
    {"search", {{"query", "q"}}, ""},                                     // required limit missing
    {"search", {{"query", "q"}, {"filters", "{\"x\": 1}"}, {"limit", "1"}}, ""},   // additionalProperties
    {"search", {{"query", "q"}, {"limit", "1"}, {"when", "2024-02-29"}}, ""},      // a format string is JSON
    {"search", {{"query", "q"}, {"limit", "1"}, {"when", "\"2023-02-29\""}}, ""},  // not a date
};

TEST(XmlGrammar, AcceptsValidCallsOnly) {
  const auto tools = Tools();
  for (ToolFormat f : {kQwen, kGlm}) {
    SCOPED_TRACE(ToolFormatName(f));
    for (bool parallel : {false, true}) {
      auto g = Compile(f, tools, {ToolChoice::Mode::kRequired, ""}, parallel);
      ASSERT_NE(g, nullptr);
      for (const GrammarCase& c : kValid) {
        const std::string text = Write(f, c.name, c.params);
        EXPECT_TRUE(Matches(g, text)) << text;
        const ParsedAnswer a = ParseToolCalls(f, text, nullptr, &tools);
        EXPECT_EQ(a.content, "");
        ASSERT_EQ(a.calls.size(), 1u) << text;
        EXPECT_EQ(a.calls[0].name, c.name);
        EXPECT_EQ(a.calls[0].arguments, c.arguments) << text;
        EXPECT_TRUE(Valid(c.name, a.calls[0].arguments)) << a.calls[0].arguments;
        EXPECT_FALSE(Matches(g, "Sure. " + text));
        EXPECT_FALSE(Matches(g, text + " Done."));
      }
      for (const GrammarCase& c : kInvalid) {
        const std::string text = Write(f, c.name, c.params);
        EXPECT_FALSE(Matches(g, text)) << text;
      }
      const std::string two =
          Write(f, kValid[0].name, kValid[0].params) + "\n" + Write(f, kValid[3].name, kValid[3].params);
      EXPECT_EQ(Matches(g, two), parallel) << two;
      EXPECT_FALSE(Matches(g, ""));
      EXPECT_FALSE(Matches(g, "Hello"));
    }
  }
  // GLM-4.7's layout (no newlines) is GLM's too. Booleans: Qwen's templates write Python's, GLM's JSON.
  auto g = Compile(kGlm, tools, {ToolChoice::Mode::kRequired, ""}, false);
  EXPECT_TRUE(Matches(g, Glm("get_weather", {{"city", "Paris"}, {"days", "2"}}, false)));
  EXPECT_FALSE(Matches(g, Glm("get_weather", {{"city", "Paris"}, {"detailed", "True"}})));
  // Qwen's layout is the templates': the value between newlines.
  auto q = Compile(kQwen, tools, {ToolChoice::Mode::kRequired, ""}, false);
  EXPECT_FALSE(Matches(
      q,
      "<tool_call>\n<function=get_weather>\n<parameter=city>Paris</parameter>\n</function>\n</tool_call>"));
  EXPECT_FALSE(Matches(q, Qwen("get_weather", {{"city", "a</parameter>b"}})));
  EXPECT_TRUE(Matches(q, Qwen("get_weather", {{"city", "Paris"}, {"detailed", "True"}})));
  EXPECT_FALSE(Matches(q, Qwen("get_weather", {{"city", "Paris"}, {"detailed", "TRUE"}})));
  EXPECT_FALSE(Matches(q, Qwen("get_weather", {{"city", "Paris"}, {"detailed", "1"}})));
}

TEST(XmlGrammar, NamedTriggersAnswerSchemaErrors) {
  const auto tools = Tools();
  const Json answer = Json::parse(R"({"type": "object", "properties": {"summary": {"type": "string"}},
      "required": ["summary"], "additionalProperties": false})");
  for (ToolFormat f : {kQwen, kGlm}) {
    SCOPED_TRACE(ToolFormatName(f));
    auto named = Compile(f, tools, {ToolChoice::Mode::kNamed, "ping"}, false);
    EXPECT_TRUE(Matches(named, Write(f, "ping", {})));
    EXPECT_FALSE(Matches(named, Write(f, "get_weather", {{"city", "Paris"}})));
    // A named function is called once even when parallel calls are allowed (they are, for "required").
    const std::string twice = Write(f, "ping", {}) + "\n" + Write(f, "ping", {});
    EXPECT_TRUE(Matches(Compile(f, tools, {ToolChoice::Mode::kRequired, ""}, true), twice));
    auto named_parallel = Compile(f, tools, {ToolChoice::Mode::kNamed, "ping"}, true);
    EXPECT_TRUE(Matches(named_parallel, Write(f, "ping", {})));
    EXPECT_FALSE(Matches(named_parallel, twice));

    auto lazy = Compile(f, tools, {ToolChoice::Mode::kAuto, ""}, true);
    grammar::Matcher m(lazy, grammar::testing::ByteVocab());
    EXPECT_TRUE(m.AcceptBytes(ToolCallTriggers(f)[0].text).ok());

    auto either = Compile(f, tools, {ToolChoice::Mode::kAuto, ""}, true, &answer);
    EXPECT_TRUE(Matches(either, Write(f, "get_weather", {{"city", "Paris"}})));
    EXPECT_TRUE(Matches(either, R"({"summary": "sunny"})"));
    EXPECT_FALSE(Matches(either, R"({"summary": 1})"));
    EXPECT_FALSE(Matches(either, "It is sunny."));

    auto unknown = ToolCallGbnf(f, tools, {ToolChoice::Mode::kNamed, "nope"}, true);
    EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
    auto bad_name = ParseTools(Json::parse(R"([{"type": "function", "function": {"name": "f", "parameters":
        {"type": "object", "properties": {"a<b": {"type": "string"}}}}}])"));
    ASSERT_TRUE(bad_name.ok());
    auto refused = ToolCallGbnf(f, *bad_name, {ToolChoice::Mode::kRequired, ""}, false);
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(refused.status().message().find("\"a<b\""), std::string::npos) << refused.status().message();
  }
}

// Random models generate under the grammar (steered to the end after a while): every output parses into
// calls with valid arguments and nothing else.
TEST(XmlGrammar, GenerationsParseIntoValidCalls) {
  const auto tools = Tools();
  const auto vocab = grammar::SyntheticVocabulary(4096);
  int calls = 0;
  for (ToolFormat f : {kQwen, kGlm}) {
    auto g = Compile(f, tools, {ToolChoice::Mode::kRequired, ""}, /*parallel=*/true);
    ASSERT_NE(g, nullptr);
    for (uint64_t seed = 0; seed < 12; ++seed) {
      std::mt19937_64 rng(seed * 17 + static_cast<uint64_t>(f));
      grammar::Matcher m(g, vocab);
      grammar::TokenMask mask;
      std::string text;
      for (int step = 0; !m.IsTerminated(); ++step) {
        ASSERT_LT(step, 4000) << text;
        m.FillMask(&mask);
        std::vector<int32_t> allowed;
        for (int32_t t = 0; t < vocab->size(); ++t) {
          if (mask.allowed(t)) allowed.push_back(t);
        }
        ASSERT_FALSE(allowed.empty()) << text;
        int32_t pick = allowed[rng() % allowed.size()];
        if (step >= 80) {
          int64_t best = INT64_MAX;
          for (int32_t t : allowed) {
            if (vocab->is_end_token(t)) {
              pick = t;
              break;
            }
            if (vocab->token_bytes(t).size() != 1) continue;
            grammar::Matcher copy = m;
            ASSERT_TRUE(copy.Accept(t).ok());
            if (copy.MinBytesToEnd() < best) {
              best = copy.MinBytesToEnd();
              pick = t;
            }
          }
        }
        if (!vocab->is_end_token(pick)) text += vocab->token_bytes(pick);
        ASSERT_TRUE(m.Accept(pick).ok());
      }
      const ParsedAnswer a = ParseToolCalls(f, text, nullptr, &tools);
      EXPECT_EQ(a.content, "") << text;
      ASSERT_FALSE(a.calls.empty()) << text;
      for (const ToolCall& c : a.calls) {
        EXPECT_TRUE(Valid(c.name, c.arguments)) << c.name << " " << c.arguments << "\n" << text;
        ++calls;
      }
    }
  }
  EXPECT_GE(calls, 24);
}

// ---- Prompts --------------------------------------------------------------------------------------------

TEST(XmlPrompts, FormatToolCallsRoundTrips) {
  const auto tools = Tools();
  const Json calls = Json::parse(R"([
    {"id": "call_1", "type": "function", "function": {"name": "get_weather",
      "arguments": "{\"city\": \"Paris\", \"days\": 3, \"detailed\": true}"}},
    {"id": "call_2", "type": "function", "function": {"name": "search",
      "arguments": {"query": "q", "filters": {"site": "é.org"}, "limit": null}}}])");
  EXPECT_EQ(
      FormatToolCalls(kQwen, calls),
      "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n"
      "</parameter>\n<parameter=detailed>\nTrue\n</parameter>\n</function>\n</tool_call>\n"
      "<tool_call>\n<function=search>\n<parameter=query>\nq\n</parameter>\n<parameter=filters>\n"
      "{\"site\": "
      "\"é.org\"}\n</parameter>\n<parameter=limit>\nNone\n</parameter>\n</function>\n</tool_call>");
  EXPECT_EQ(
      FormatToolCalls(kGlm, calls),
      "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>days</"
      "arg_key>\n"
      "<arg_value>3</arg_value>\n<arg_key>detailed</arg_key>\n<arg_value>true</arg_value>\n</tool_call>\n"
      "<tool_call>search\n<arg_key>query</arg_key>\n<arg_value>q</arg_value>\n<arg_key>filters</arg_key>\n"
      "<arg_value>{\"site\": \"é.org\"}</arg_value>\n<arg_key>limit</arg_key>\n<arg_value>null</arg_value>\n"
      "</tool_call>");
  for (ToolFormat f : {kQwen, kGlm}) {
    const ParsedAnswer a = ParseToolCalls(f, FormatToolCalls(f, calls), nullptr, &tools);
    EXPECT_EQ(a.content, "");
    ASSERT_EQ(a.calls.size(), 2u);
    EXPECT_EQ(a.calls[0].arguments, R"({"city":"Paris","days":3,"detailed":true})");
    EXPECT_EQ(a.calls[1].arguments, R"({"query":"q","filters":{"site":"é.org"},"limit":null})");
  }
  // No arguments; arguments that are not an object are kept as they are.
  EXPECT_EQ(FormatToolCalls(kQwen, Json::parse(R"([{"function": {"name": "ping", "arguments": "{}"}}])")),
            "<tool_call>\n<function=ping>\n</function>\n</tool_call>");
  EXPECT_EQ(FormatToolCalls(kGlm, Json::parse(R"([{"function": {"name": "ping"}}])")),
            "<tool_call>ping\n</tool_call>");
  EXPECT_EQ(FormatToolCalls(kQwen, Json::parse(R"([{"function": {"name": "f", "arguments": "oops"}}])")),
            "<tool_call>\n<function=f>\noops\n</function>\n</tool_call>");
}

TEST(XmlPrompts, SystemPromptAndTemplateMessages) {
  const auto tools = Tools();
  const std::string qwen = ToolSystemPrompt(kQwen, tools);
  EXPECT_NE(qwen.find("<tool_call>\n<function=<function-name>>\n<parameter=<parameter-name>>\n<value>\n"
                      "</parameter>\n</function>\n</tool_call>"),
            std::string::npos)
      << qwen;
  EXPECT_EQ(qwen.find("arguments being a JSON object"), std::string::npos);
  const std::string glm = ToolSystemPrompt(kGlm, tools);
  EXPECT_NE(glm.find("<tool_call><function-name>\n<arg_key><parameter-name></arg_key>\n<arg_value><value>"
                     "</arg_value>\n</tool_call>"),
            std::string::npos)
      << glm;
  // Arguments become objects (the templates iterate them); none is {}.
  const Json messages = Json::parse(R"([{"role": "assistant", "content": "", "tool_calls": [
      {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}},
      {"id": "b", "type": "function", "function": {"name": "g", "arguments": ""}},
      {"id": "c", "type": "function", "function": {"name": "h", "arguments": null}},
      {"id": "d", "type": "function", "function": {"name": "k", "arguments": "[1]"}}]}])");
  for (ToolFormat f : {kQwen, kGlm}) {
    const Json out = MessagesForToolTemplate(f, messages);
    const Json& calls = out[0]["tool_calls"];
    EXPECT_EQ(calls[0]["function"]["arguments"], Json::parse(R"({"x": 1})"));
    EXPECT_EQ(calls[1]["function"]["arguments"], Json::object());
    EXPECT_EQ(calls[2]["function"]["arguments"], Json::object());
    EXPECT_EQ(calls[3]["function"]["arguments"], "[1]");
    EXPECT_EQ(calls[0]["id"], "a");
  }
  // The JSON formats keep what they had.
  EXPECT_EQ(
      MessagesForToolTemplate(ToolFormat::kHermes, messages)[0]["tool_calls"][1]["function"]["arguments"],
      "");
}

}  // namespace
}  // namespace llamay::toolcall
