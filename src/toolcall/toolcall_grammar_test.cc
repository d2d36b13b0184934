// ToolCallGbnf through grammar::Matcher: for every format and choice mode, well-formed calls are accepted,
// and wrong names, schema violations, extra calls and text around the calls are rejected; triggers start
// the grammar; and random generations under the grammar parse back into valid calls.
#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "grammar/matcher.h"
#include "grammar/synthetic_vocab.h"
#include "grammar/test_util.h"
#include "toolcall/toolcall.h"

namespace llamay::toolcall {
namespace {

using Json = nlohmann::ordered_json;
using grammar::testing::Matches;
using Call = std::pair<std::string, std::string>;  // name, arguments JSON text

const ToolFormat kFormats[] = {ToolFormat::kHermes, ToolFormat::kLlama3, ToolFormat::kMistral,
                               ToolFormat::kGranite, ToolFormat::kGeneric};

std::vector<ToolSpec> Tools() {
  auto tools = ParseTools(Json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
      "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                     "unit": {"enum": ["c", "f"]}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "add", "parameters": {"type": "object",
      "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"],
      "additionalProperties": false}}},
    {"type": "function", "function": {"name": "ping"}}])"));
  EXPECT_TRUE(tools.ok()) << tools.status().ToString();
  return tools.ok() ? *tools : std::vector<ToolSpec>();
}

std::shared_ptr<const grammar::Grammar> Compile(ToolFormat f, const std::vector<ToolSpec>& tools,
                                                const ToolChoice& choice, bool parallel) {
  auto gbnf = ToolCallGbnf(f, tools, choice, parallel);
  EXPECT_TRUE(gbnf.ok()) << gbnf.status().ToString();
  if (!gbnf.ok()) return nullptr;
  auto g = grammar::ParseGbnf(*gbnf);
  EXPECT_TRUE(g.ok()) << g.status().ToString() << "\n" << *gbnf;
  return g.ok() ? *g : nullptr;
}

// The calls as a model following `format` writes them.
std::string Render(ToolFormat f, const std::vector<Call>& calls) {
  std::string out;
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string key = f == ToolFormat::kLlama3 ? "parameters" : "arguments";
    const std::string obj =
        "{\"name\": \"" + calls[i].first + "\", \"" + key + "\": " + calls[i].second + "}";
    switch (f) {
      case ToolFormat::kHermes:
      case ToolFormat::kGeneric:
        out.append(i ? "\n" : "").append("<tool_call>\n").append(obj).append("\n</tool_call>");
        break;
      case ToolFormat::kLlama3:
        out.append(i ? "; " : "").append(obj);
        break;
      case ToolFormat::kMistral:
      case ToolFormat::kGranite:
        out.append(i ? ", " : "").append(obj);
        break;
      case ToolFormat::kQwen3Coder:
      case ToolFormat::kGlm45:
        break;  // toolcall_xml_test.cc
    }
  }
  if (f == ToolFormat::kMistral) return "[TOOL_CALLS][" + out + "]";
  if (f == ToolFormat::kGranite) return "<|tool_call|>[" + out + "]";
  return out;
}

const std::vector<Call> kValid = {{"get_weather", R"({"city": "Paris"})"},
                                  {"get_weather", R"({"city": "Zürich", "unit": "f"})"},
                                  {"add", R"({"a": 1, "b": -2})"},
                                  {"add", "{\n  \"a\": 0,\n  \"b\": 7\n}"},
                                  {"ping", "{}"}};
const std::vector<Call> kInvalid = {{"get_weather", R"({"city": 5})"},
                                    {"get_weather", R"({"unit": "c"})"},
                                    {"get_weather", R"({"city": "Paris", "unit": "k"})"},
                                    {"get_weather", R"({"city": "a very long city name indeed"})"},
                                    {"add", R"({"a": 1})"},
                                    {"add", R"({"a": 1, "b": 2, "c": 3})"},
                                    {"add", R"({"a": 1.5, "b": 2})"},
                                    {"add", R"({"b": 2, "a": 1})"},
                                    {"ping", "[]"},
                                    {"nope", "{}"},
                                    {"Add", R"({"a": 1, "b": 2})"}};

void ExpectParsesTo(ToolFormat f, const std::string& text, const std::vector<Call>& calls) {
  const ParsedAnswer a = ParseToolCalls(f, text);
  EXPECT_EQ(a.content, "") << text;
  ASSERT_EQ(a.calls.size(), calls.size()) << text;
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(a.calls[i].name, calls[i].first);
    EXPECT_EQ(Json::parse(a.calls[i].arguments), Json::parse(calls[i].second)) << text;
  }
}

TEST(ToolCallGbnf, RequiredAcceptsValidCallsOnly) {
  const auto tools = Tools();
  for (ToolFormat f : kFormats) {
    SCOPED_TRACE(ToolFormatName(f));
    for (bool parallel : {false, true}) {
      auto g = Compile(f, tools, {ToolChoice::Mode::kRequired, ""}, parallel);
      ASSERT_NE(g, nullptr);
      for (const Call& c : kValid) {
        const std::string text = Render(f, {c});
        EXPECT_TRUE(Matches(g, text)) << text;
        ExpectParsesTo(f, text, {c});
        EXPECT_FALSE(Matches(g, "Sure. " + text)) << "text before: " << text;
        EXPECT_FALSE(Matches(g, " " + text)) << "space before: " << text;
        EXPECT_FALSE(Matches(g, text + " Done.")) << "text after: " << text;
      }
      for (const Call& c : kInvalid) EXPECT_FALSE(Matches(g, Render(f, {c}))) << Render(f, {c});
      const std::vector<Call> two = {kValid[0], kValid[2]}, three = {kValid[4], kValid[1], kValid[3]};
      EXPECT_EQ(Matches(g, Render(f, two)), parallel) << Render(f, two);
      EXPECT_EQ(Matches(g, Render(f, three)), parallel) << Render(f, three);
      if (parallel) ExpectParsesTo(f, Render(f, three), three);
      EXPECT_FALSE(Matches(g, Render(f, {kValid[0], kInvalid[0]})));
      EXPECT_FALSE(Matches(g, ""));
      EXPECT_FALSE(Matches(g, "Hello"));
    }
  }
}

// "auto" with a response format's schema: the answer is the calls or JSON of that schema, from the first
// byte, and nothing else (no free text, no JSON of another shape, no calls followed by an answer).
TEST(ToolCallGbnf, AnAnswerSchemaIsTheOtherChoice) {
  const auto tools = Tools();
  const Json answer = Json::parse(R"({"type": "object", "properties": {"summary": {"type": "string",
      "maxLength": 10}, "done": {"type": "boolean"}}, "required": ["summary", "done"],
      "additionalProperties": false})");
  for (ToolFormat f : kFormats) {
    SCOPED_TRACE(ToolFormatName(f));
    auto gbnf = ToolCallGbnf(f, tools, {ToolChoice::Mode::kAuto, ""}, /*parallel=*/true, &answer);
    ASSERT_TRUE(gbnf.ok()) << gbnf.status().ToString();
    auto g = grammar::ParseGbnf(*gbnf);
    ASSERT_TRUE(g.ok()) << g.status().ToString() << "\n" << *gbnf;
    for (const Call& c : kValid) EXPECT_TRUE(Matches(*g, Render(f, {c}))) << Render(f, {c});
    for (const Call& c : kInvalid) EXPECT_FALSE(Matches(*g, Render(f, {c}))) << Render(f, {c});
    EXPECT_TRUE(Matches(*g, Render(f, {kValid[0], kValid[2]})));
    const std::string good = R"({"summary": "sunny", "done": true})";
    EXPECT_TRUE(Matches(*g, good));
    EXPECT_TRUE(Matches(*g, "{\n  \"summary\": \"\",\n  \"done\": false\n}"));
    EXPECT_FALSE(Matches(*g, R"({"summary": "far too long a summary", "done": true})"));
    EXPECT_FALSE(Matches(*g, R"({"done": true, "summary": "x"})"));  // properties in the schema's order
    EXPECT_FALSE(Matches(*g, R"({"summary": "x"})"));
    EXPECT_FALSE(Matches(*g, "It is sunny."));
    EXPECT_FALSE(Matches(*g, "Sure. " + good));
    EXPECT_FALSE(Matches(*g, Render(f, {kValid[0]}) + good));
    EXPECT_FALSE(Matches(*g, ""));
  }
  const Json bad = Json::parse(R"({"type": "object", "patternProperties": {}})");
  auto refused = ToolCallGbnf(ToolFormat::kHermes, tools, {ToolChoice::Mode::kAuto, ""}, true, &bad);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("response format"), std::string::npos);
}

// A named function is called exactly once, whatever `parallel` says.
TEST(ToolCallGbnf, NamedAllowsOnlyThatFunctionOnce) {
  const auto tools = Tools();
  for (ToolFormat f : kFormats) {
    SCOPED_TRACE(ToolFormatName(f));
    for (bool parallel : {false, true}) {
      auto g = Compile(f, tools, {ToolChoice::Mode::kNamed, "add"}, parallel);
      ASSERT_NE(g, nullptr);
      EXPECT_TRUE(Matches(g, Render(f, {{"add", R"({"a": 1, "b": 2})"}})));
      EXPECT_FALSE(Matches(g, Render(f, {{"add", R"({"a": 1, "b": 2})"}, {"add", R"({"a": 3, "b": 4})"}})));
      EXPECT_FALSE(Matches(g, Render(f, {{"get_weather", R"({"city": "Paris"})"}})));
      EXPECT_FALSE(Matches(g, Render(f, {{"ping", "{}"}})));
      EXPECT_FALSE(Matches(g, Render(f, {{"add", R"({"a": "1", "b": 2})"}})));
    }
  }
}

// "auto" uses the same grammar from the trigger on: every trigger is a way into it.
TEST(ToolCallGbnf, TriggersStartTheGrammar) {
  const auto tools = Tools();
  for (ToolFormat f : kFormats) {
    SCOPED_TRACE(ToolFormatName(f));
    auto g = Compile(f, tools, {ToolChoice::Mode::kAuto, ""}, /*parallel=*/true);
    ASSERT_NE(g, nullptr);
    const auto triggers = ToolCallTriggers(f);
    ASSERT_FALSE(triggers.empty());
    for (const ToolCallTrigger& t : triggers) {
      grammar::Matcher m(g, grammar::testing::ByteVocab());
      EXPECT_TRUE(m.AcceptBytes(t.text).ok()) << t.text;
      EXPECT_EQ(t.at_start, f == ToolFormat::kLlama3 && t.text == "{\"name\"");
    }
    EXPECT_TRUE(Matches(g, Render(f, kValid)));
  }
  EXPECT_TRUE(Matches(Compile(ToolFormat::kLlama3, tools, {ToolChoice::Mode::kAuto, ""}, false),
                      "<|python_tag|>" + Render(ToolFormat::kLlama3, {kValid[0]})));
}

TEST(ToolCallGbnf, Errors) {
  const auto tools = Tools();
  EXPECT_FALSE(ToolCallGbnf(ToolFormat::kHermes, tools, {ToolChoice::Mode::kNone, ""}, true).ok());
  EXPECT_FALSE(ToolCallGbnf(ToolFormat::kHermes, {}, {ToolChoice::Mode::kRequired, ""}, true).ok());
  auto unknown = ToolCallGbnf(ToolFormat::kHermes, tools, {ToolChoice::Mode::kNamed, "nope"}, true);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("\"nope\""), std::string::npos) << unknown.status().message();
}

// Twelve tools: the rule prefixes fn1- and fn10-, fn11- must not collide.
TEST(ToolCallGbnf, ManyToolsKeepTheirOwnSchemas) {
  Json list = Json::array();
  auto name = [](int i) { return std::string("t").append(std::to_string(i)); };
  auto args = [](int v, const char* more) {
    return std::string("{\"v\": ").append(std::to_string(v)).append(more).append("}");
  };
  for (int i = 0; i < 12; ++i) {
    list.push_back(
        {{"type", "function"},
         {"function",
          {{"name", name(i)},
           {"parameters",
            {{"type", "object"},
             {"properties", {{"v", {{"const", i}}}, {"s", {{"type", "string"}, {"format", "date"}}}}},
             {"required", {"v"}}}}}}});
  }
  auto tools = ParseTools(list);
  ASSERT_TRUE(tools.ok()) << tools.status().ToString();
  auto g = Compile(ToolFormat::kGranite, *tools, {ToolChoice::Mode::kRequired, ""}, true);
  ASSERT_NE(g, nullptr);
  for (int i = 0; i < 12; ++i) {
    EXPECT_TRUE(Matches(g, Render(ToolFormat::kGranite, {{name(i), args(i, "")}})));
    EXPECT_TRUE(Matches(g, Render(ToolFormat::kGranite, {{name(i), args(i, ", \"s\": \"2024-02-29\"")}})));
    EXPECT_FALSE(Matches(g, Render(ToolFormat::kGranite, {{name(i), args(i, ", \"s\": \"2023-02-29\"")}})));
    EXPECT_FALSE(Matches(g, Render(ToolFormat::kGranite, {{name(i), args(i + 1, "")}})));
  }
}

// Whether `args` (JSON text) validates against the test tools' schemas.
bool ValidArguments(const std::string& name, const std::string& args) {
  const Json a = Json::parse(args, nullptr, false);
  if (!a.is_object()) return false;
  if (name == "ping") return true;  // no parameters: {"type": "object", "properties": {}}, any object
  if (name == "add") {
    return a.size() == 2 && a.contains("a") && a["a"].is_number_integer() && a.contains("b") &&
           a["b"].is_number_integer();
  }
  if (name != "get_weather" || !a.contains("city") || !a["city"].is_string()) return false;
  for (const auto& [k, v] : a.items()) {
    if (k != "city" && !(k == "unit" && (v == "c" || v == "f"))) return false;
  }
  return true;
}

// Random models generate under the grammar (steering to the end after a while): every output parses into
// calls of known functions with valid arguments, and nothing else.
TEST(ToolCallGbnf, GenerationsParseIntoValidCalls) {
  const auto tools = Tools();
  const auto vocab = grammar::SyntheticVocabulary(4096);
  for (ToolFormat f : kFormats) {
    auto g = Compile(f, tools, {ToolChoice::Mode::kRequired, ""}, /*parallel=*/true);
    ASSERT_NE(g, nullptr);
    for (uint64_t seed = 0; seed < 8; ++seed) {
      std::mt19937_64 rng(seed * 31 + static_cast<uint64_t>(f));
      grammar::Matcher m(g, vocab);
      grammar::TokenMask mask;
      std::string text;
      for (int step = 0; !m.IsTerminated(); ++step) {
        ASSERT_LT(step, 3000) << text;
        m.FillMask(&mask);
        std::vector<int32_t> allowed;
        for (int32_t t = 0; t < vocab->size(); ++t) {
          if (mask.allowed(t)) allowed.push_back(t);
        }
        ASSERT_FALSE(allowed.empty()) << text;
        int32_t pick = allowed[rng() % allowed.size()];
        if (step >= 60) {  // steer: the end if allowed, else the byte that leaves the least to write
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
      const ParsedAnswer a = ParseToolCalls(f, text);
      EXPECT_EQ(a.content, "") << text;
      ASSERT_FALSE(a.calls.empty()) << text;
      for (const ToolCall& c : a.calls)
        EXPECT_TRUE(ValidArguments(c.name, c.arguments)) << c.name << " " << text;
    }
  }
}

// Tools whose arguments are `schema`, named t0, t1, ...
std::vector<ToolSpec> ManyTools(size_t n, const Json& schema) {
  std::vector<ToolSpec> tools(n);
  for (size_t i = 0; i < n; ++i) {
    tools[i].name = std::string("t").append(std::to_string(i));
    tools[i].parameters = schema;
  }
  return tools;
}

// More tools than one grammar takes are refused before any grammar is built, naming the limit.
TEST(ToolCallGrammar, TooManyToolsAreRefusedNamingTheLimit) {
  const Json schema = Json::parse(R"({"type": "object", "properties": {"x": {"type": "integer"}}})");
  auto g = ToolCallGrammar(ToolFormat::kHermes, ManyTools(kMaxGrammarTools + 1, schema),
                           {ToolChoice::Mode::kAuto, ""}, true);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(g.status().message().find("grammar too large"), std::string::npos) << g.status().ToString();
  EXPECT_NE(g.status().message().find("at most " + std::to_string(kMaxGrammarTools) + " tools"),
            std::string::npos)
      << g.status().ToString();
  EXPECT_NE(g.status().message().find(std::to_string(kMaxGrammarTools + 1)), std::string::npos);
  // A named function is one tool, whatever the list's length.
  auto named = ToolCallGrammar(ToolFormat::kHermes, ManyTools(kMaxGrammarTools + 1, schema),
                               {ToolChoice::Mode::kNamed, "t7"}, false);
  ASSERT_TRUE(named.ok()) << named.status().ToString();
  EXPECT_TRUE(Matches(*named, Render(ToolFormat::kHermes, {{"t7", R"({"x": 1})"}})));
  // At the limit it builds.
  auto at_limit = ToolCallGrammar(ToolFormat::kHermes, ManyTools(kMaxGrammarTools, Json::parse(R"({"type": "object"})")),
                                  {ToolChoice::Mode::kRequired, ""}, true);
  ASSERT_TRUE(at_limit.ok()) << at_limit.status().ToString();
}

// A list too large for the automaton is served with its costliest tools' arguments relaxed to any object;
// the others keep their schemas, and the names and the call syntax stay forced.
TEST(ToolCallGrammar, AListTooLargeRelaxesItsCostliestTools) {
  Json props = Json::object();
  for (const char* name : {"method", "project", "path", "plan", "name", "dir"})
    props[name] = {{"type", "string"}, {"minLength", 1}};
  for (const char* name : {"writes", "deletes", "files", "paths", "assets", "counts"})
    props[name] = {{"type", "array"}, {"maxItems", 256},
                   {"items", {{"type", "string"}, {"minLength", 1}, {"maxLength", 256}}}};
  std::vector<ToolSpec> tools(3);
  tools[0].name = "small";
  tools[0].parameters = Json::parse(R"({"type": "object", "properties": {"x": {"type": "integer"}},
                                        "required": ["x"], "additionalProperties": false})");
  tools[1].name = "sync";
  tools[1].parameters = {{"type", "object"}, {"properties", props}};
  tools[2].name = "other";
  tools[2].parameters = Json::parse(R"({"type": "object", "properties": {"s": {"enum": ["a", "b"]}},
                                        "required": ["s"], "additionalProperties": false})");
  const ToolChoice required{ToolChoice::Mode::kRequired, ""};
  // The premise: the full grammar does not build.
  auto full = grammar::ParseGbnf(*ToolCallGbnf(ToolFormat::kHermes, tools, required, true));
  ASSERT_FALSE(full.ok()) << "the test needs a larger tool";
  ASSERT_NE(full.status().message().find("grammar too large"), std::string::npos);
  std::vector<std::string> relaxed;
  auto g = ToolCallGrammar(ToolFormat::kHermes, tools, required, true, nullptr, &relaxed);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(relaxed, std::vector<std::string>{"sync"});
  EXPECT_TRUE(Matches(*g, Render(ToolFormat::kHermes, {{"small", R"({"x": 1})"}})));
  EXPECT_FALSE(Matches(*g, Render(ToolFormat::kHermes, {{"small", R"({"x": "1"})"}})));
  EXPECT_TRUE(Matches(*g, Render(ToolFormat::kHermes, {{"other", R"({"s": "b"})"}})));
  EXPECT_FALSE(Matches(*g, Render(ToolFormat::kHermes, {{"other", R"({"s": "c"})"}})));
  EXPECT_TRUE(Matches(*g, Render(ToolFormat::kHermes, {{"sync", R"({"anything": [1, {"y": null}]})"}})));
  EXPECT_FALSE(Matches(*g, Render(ToolFormat::kHermes, {{"unknown", R"({})"}})));
  // Not a relaxation: a schema error is an error.
  tools[0].parameters = Json::parse(R"({"type": "object", "properties": {"x": {"type": "integer",
                                        "minimum": 5, "maximum": 1}}})");
  EXPECT_FALSE(ToolCallGrammar(ToolFormat::kHermes, tools, required, true).ok());
}

// The cache key changes with everything the grammar reads, and only with that.
TEST(ToolCallGrammar, KeyCoversWhatTheGrammarReads) {
  const std::vector<ToolSpec> tools = Tools();
  const ToolChoice automatic{ToolChoice::Mode::kAuto, ""};
  const std::string key = ToolCallGrammarKey(ToolFormat::kHermes, tools, automatic, true);
  EXPECT_EQ(key, ToolCallGrammarKey(ToolFormat::kHermes, tools, automatic, true));
  std::vector<ToolSpec> described = tools;
  described[0].description = "another description";
  EXPECT_EQ(key, ToolCallGrammarKey(ToolFormat::kHermes, described, automatic, true));
  std::vector<ToolSpec> changed = tools;
  changed[1].parameters["required"] = Json::array({"a"});
  EXPECT_NE(key, ToolCallGrammarKey(ToolFormat::kHermes, changed, automatic, true));
  std::vector<ToolSpec> renamed = tools;
  renamed[2].name = "pong";
  EXPECT_NE(key, ToolCallGrammarKey(ToolFormat::kHermes, renamed, automatic, true));
  std::vector<ToolSpec> fewer(tools.begin(), tools.end() - 1);
  EXPECT_NE(key, ToolCallGrammarKey(ToolFormat::kHermes, fewer, automatic, true));
  EXPECT_NE(key, ToolCallGrammarKey(ToolFormat::kLlama3, tools, automatic, true));
  EXPECT_NE(key, ToolCallGrammarKey(ToolFormat::kHermes, tools, automatic, false));
  EXPECT_NE(key, ToolCallGrammarKey(ToolFormat::kHermes, tools, {ToolChoice::Mode::kRequired, ""}, true));
  EXPECT_NE(key, ToolCallGrammarKey(ToolFormat::kHermes, tools, {ToolChoice::Mode::kNamed, "add"}, true));
  EXPECT_NE(ToolCallGrammarKey(ToolFormat::kHermes, tools, {ToolChoice::Mode::kNamed, "add"}, true),
            ToolCallGrammarKey(ToolFormat::kHermes, tools, {ToolChoice::Mode::kNamed, "ping"}, true));
  const Json answer = Json::parse(R"({"type": "object"})");
  EXPECT_NE(key, ToolCallGrammarKey(ToolFormat::kHermes, tools, automatic, true, &answer));
}

}  // namespace
}  // namespace llamay::toolcall
