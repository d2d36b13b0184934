// The harmony format (harmony.h): hand-written gpt-oss outputs, malformed and cut-off ones, the stream's
// deltas and the split property (however an output is cut into pushes, the deltas add up to ParseHarmony's
// answer), and the real gpt-oss template (testdata/openai-gpt-oss-120b.jinja) rendered by llamay's own
// template engine: the prompt is what the model expects, and the calls it writes parse back.
#include "toolcall/harmony.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "template/chat_template.h"
#include "toolcall/toolcall_stream_test_util.h"

namespace llamay::toolcall {
namespace {

using Json = nlohmann::ordered_json;

// ---- Whole outputs --------------------------------------------------------------------------------------

TEST(ParseHarmony, ReasoningThenFinal) {
  for (const char* end : {"<|return|>", ""}) {  // the engine usually stops before <|return|>
    const HarmonyAnswer a =
        ParseHarmony(std::string("<|channel|>analysis<|message|>User says hi. Reply.<|end|>"
                                 "<|start|>assistant<|channel|>final<|message|>Hello! How can I help?") +
                     end);
    EXPECT_EQ(a.reasoning, "User says hi. Reply.");
    EXPECT_EQ(a.content, "Hello! How can I help?");
    EXPECT_TRUE(a.calls.empty());
  }
}

TEST(ParseHarmony, ToolCallWithRecipientAfterTheChannel) {
  const HarmonyAnswer a = ParseHarmony(
      "<|channel|>analysis<|message|>Need the weather.<|end|>"
      "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
      "{\"city\": \"Paris\", \"days\": [1, 2]}<|call|>",
      RandomToolCallIds(3));
  EXPECT_EQ(a.reasoning, "Need the weather.");
  EXPECT_EQ(a.content, "");
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].id, RandomToolCallIds(3)());
  EXPECT_EQ(a.calls[0].name, "get_weather");
  EXPECT_EQ(a.calls[0].arguments, R"({"city":"Paris","days":[1,2]})");
}

TEST(ParseHarmony, ToolCallWithRecipientInTheRoleHeader) {
  // As the template renders past calls, after reasoning...
  HarmonyAnswer a = ParseHarmony(
      "<|channel|>analysis<|message|>Call it.<|end|>"
      "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\":\"Oslo\"}");
  EXPECT_EQ(a.reasoning, "Call it.");
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].name, "get_weather");
  EXPECT_EQ(a.calls[0].arguments, R"({"city":"Oslo"})");
  // ...and as the output's first message, whose `<|start|>assistant` the prompt wrote.
  a = ParseHarmony(" to=functions.ping<|channel|>commentary <|constrain|>json<|message|>{}<|call|>");
  EXPECT_EQ(a.reasoning, "");
  EXPECT_EQ(a.content, "");
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].name, "ping");
  EXPECT_EQ(a.calls[0].arguments, "{}");
}

TEST(ParseHarmony, SeveralMessages) {
  const HarmonyAnswer a = ParseHarmony(
      "<|channel|>analysis<|message|>First thought.<|end|>"
      "<|start|>assistant<|channel|>commentary<|message|>Let me look that up.<|end|>"
      "<|start|>assistant<|channel|>analysis<|message|>Second thought.<|end|>"
      "<|start|>assistant<|channel|>commentary to=functions.search json<|message|>{\"q\": \"a b\"}<|call|>"
      "<|start|>assistant to=functions.get_weather<|channel|>commentary<|message|>{\"city\": "
      "\"Rome\"}<|call|>",
      RandomToolCallIds(1));
  EXPECT_EQ(a.reasoning, "First thought.\n\nSecond thought.");
  EXPECT_EQ(a.content, "Let me look that up.");
  ASSERT_EQ(a.calls.size(), 2u);
  EXPECT_EQ(a.calls[0].name, "search");
  EXPECT_EQ(a.calls[0].arguments, R"({"q":"a b"})");
  EXPECT_EQ(a.calls[1].name, "get_weather");
  EXPECT_EQ(a.calls[1].arguments, R"({"city":"Rome"})");
  EXPECT_NE(a.calls[0].id, a.calls[1].id);
  const auto ids = RandomToolCallIds(1);
  EXPECT_EQ(a.calls[0].id, ids());
  EXPECT_EQ(a.calls[1].id, ids());
}

TEST(ParseHarmony, PreambleAndFinalAreContent) {
  const HarmonyAnswer a = ParseHarmony(
      "<|channel|>commentary<|message|>Checking now.<|end|>"
      "<|start|>assistant<|channel|>final<|message|>It is sunny.<|return|>");
  EXPECT_EQ(a.reasoning, "");
  EXPECT_EQ(a.content, "Checking now.\n\nIt is sunny.");
  EXPECT_TRUE(a.calls.empty());
}

TEST(ParseHarmony, BodiesAreTakenAsTheyAre) {
  const HarmonyAnswer a = ParseHarmony(
      "<|channel|>analysis<|message|>  line 1\n<not a marker> <| nor this\n\n<|end|>"
      "<|start|>assistant<|channel|>final<|message|>\n```\ncode <|x|>\n```\n");
  EXPECT_EQ(a.reasoning, "  line 1\n<not a marker> <| nor this\n\n");
  EXPECT_EQ(a.content, "\n```\ncode <|x|>\n```\n");
}

TEST(ParseHarmony, CutOffOutputs) {
  // Inside the reasoning: all of it is reasoning.
  HarmonyAnswer a = ParseHarmony("<|channel|>analysis<|message|>The user wants");
  EXPECT_EQ(a.reasoning, "The user wants");
  EXPECT_EQ(a.content, "");
  // Inside a marker: the marker's beginning is text.
  a = ParseHarmony("<|channel|>analysis<|message|>Done.<|en");
  EXPECT_EQ(a.reasoning, "Done.<|en");
  // Inside a header: the header is dropped.
  for (const char* header : {"<|start|>assistant<|channel|>fin", "<|start|>",
                             "<|start|>assistant to=functions.f", "<|start|>assistant<|channel|>final"}) {
    a = ParseHarmony(std::string("<|channel|>analysis<|message|>Done.<|end|>") + header);
    EXPECT_EQ(a.reasoning, "Done.") << header;
    EXPECT_EQ(a.content, "") << header;
    EXPECT_TRUE(a.calls.empty()) << header;
  }
  // Inside a call's arguments: a call with what was written (finish_reason "length").
  a = ParseHarmony(
      "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Pa");
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].arguments, R"({"city":"Pa)");
  // Right after the call's header: no arguments yet, so none.
  a = ParseHarmony("<|channel|>commentary to=functions.ping <|constrain|>json<|message|>");
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].arguments, "{}");
  // The very start of a first-header recipient is text until it is one.
  EXPECT_EQ(ParseHarmony(" to").content, " to");
  EXPECT_EQ(ParseHarmony(" to=functions.f").content, "");
}

TEST(ParseHarmony, NoMarkersIsAllContent) {
  for (const char* text :
       {"Hello, world.", "  Hello\n\n", " to the moon", "a <| b |> c <|nope|>", "<|chan"}) {
    const HarmonyAnswer a = ParseHarmony(text);
    EXPECT_EQ(a.content, text);
    EXPECT_EQ(a.reasoning, "");
    EXPECT_TRUE(a.calls.empty());
  }
  EXPECT_EQ(ParseHarmony("").content, "");
  EXPECT_EQ(ParseHarmony(" \n ").content, "");  // only whitespace: nothing to show
}

TEST(ParseHarmony, MalformedOutputsDegrade) {
  // An unknown channel, or none: content.
  EXPECT_EQ(ParseHarmony("<|channel|>thoughts<|message|>Hm.<|end|>").content, "Hm.");
  EXPECT_EQ(ParseHarmony("<|message|>Plain.<|end|>").content, "Plain.");
  // A message to a built-in tool is the model's own work: reasoning.
  HarmonyAnswer a = ParseHarmony("<|channel|>analysis to=python code<|message|>print(1)<|call|>");
  EXPECT_EQ(a.reasoning, "print(1)");
  EXPECT_TRUE(a.calls.empty());
  // gpt-oss-20b's stray commentary before the real channel.
  a = ParseHarmony("<|channel|>commentary to=assistant<|channel|>analysis<|message|>Think.<|end|>");
  EXPECT_EQ(a.reasoning, "Think.");
  EXPECT_EQ(a.content, "");
  // A header broken by a newline is text; text between messages is content; whitespace there is not.
  a = ParseHarmony(
      "<|channel|>final\nHello<|end|>\n\n<|start|>assistant<|channel|>final<|message|>Hi<|end|>");
  EXPECT_EQ(a.content, "<|channel|>final\nHello\n\nHi");
  a = ParseHarmony("Sure.<|channel|>final<|message|>Answer.");
  EXPECT_EQ(a.content, "Sure.\n\nAnswer.");
  // A body that runs into the next header without <|end|>.
  a = ParseHarmony("<|channel|>analysis<|message|>Think.<|start|>assistant<|channel|>final<|message|>Done.");
  EXPECT_EQ(a.reasoning, "Think.");
  EXPECT_EQ(a.content, "Done.");
  a = ParseHarmony("<|channel|>analysis<|message|>Think.<|channel|>final<|message|>Done.");
  EXPECT_EQ(a.reasoning, "Think.");
  EXPECT_EQ(a.content, "Done.");
  // Lone ends are dropped.
  EXPECT_EQ(ParseHarmony("<|end|><|return|>Text<|call|>").content, "Text");
  // A header too long to be one is text.
  const std::string long_header = "<|channel|>" + std::string(600, 'x') + "<|message|>body";
  a = ParseHarmony(long_header);
  EXPECT_EQ(a.content, "<|channel|>" + std::string(600, 'x') + "\n\nbody");
  // An empty function name is no call.
  EXPECT_TRUE(ParseHarmony("<|channel|>commentary to=functions.<|message|>{}").calls.empty());
}

TEST(ParseHarmony, ArgumentsThatAreNotJsonAreKept) {
  HarmonyAnswer a = ParseHarmony("<|channel|>commentary to=functions.run<|message|>  ls -la /tmp\n<|call|>");
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].arguments, "ls -la /tmp\n");
  // Broken JSON stays what was written, less the whitespace outside strings.
  a = ParseHarmony("<|channel|>commentary to=functions.f<|message|>{\"a\": 1,, \"b\" }} tail<|call|>");
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].arguments, R"({"a":1,,"b"}}tail)");
  // Whitespace only: none.
  a = ParseHarmony("<|channel|>commentary to=functions.f<|message|> \n <|call|>");
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].arguments, "{}");
}

TEST(IsHarmonyTemplate, LooksForTheChannelMarker) {
  EXPECT_TRUE(IsHarmonyTemplate("{{- '<|start|>assistant<|channel|>final<|message|>' }}"));
  EXPECT_FALSE(IsHarmonyTemplate("{{- '<|im_start|>assistant\\n' }}"));
}

// ---- Streaming ------------------------------------------------------------------------------------------

// The deltas of a stream added up (Collector checks the calls' shape), reasoning beside.
struct Streamed {
  std::string reasoning;
  ParsedAnswer answer;
};

void Take(const HarmonyDelta& d, std::string* reasoning, testing::Collector* c) {
  *reasoning += d.reasoning;
  c->Take(ToolDelta{d.content, d.calls});
}

Streamed StreamPieces(const std::vector<std::string>& pieces) {
  HarmonyStream stream(RandomToolCallIds(9));
  Streamed s;
  testing::Collector c;
  for (const std::string& p : pieces) Take(stream.Push(p), &s.reasoning, &c);
  Take(stream.Finish(), &s.reasoning, &c);
  EXPECT_EQ(stream.num_calls(), static_cast<int>(c.answer.calls.size()));
  s.answer = std::move(c.answer);
  return s;
}

void ExpectSame(const Streamed& streamed, const HarmonyAnswer& whole, const std::string& what) {
  ASSERT_EQ(streamed.reasoning, whole.reasoning) << what;
  testing::ExpectSame(streamed.answer, ParsedAnswer{whole.content, whole.calls}, what);
}

TEST(HarmonyStream, HoldsBackOnlyWhatMayBeAMarker) {
  HarmonyStream s;
  EXPECT_TRUE(s.Push("<|channel|>analysis<|mess").empty());  // a header waits for its <|message|>
  HarmonyDelta d = s.Push("age|>Thinking <|");
  EXPECT_EQ(d.reasoning, "Thinking ");
  d = s.Push("en");
  EXPECT_TRUE(d.empty());
  d = s.Push("try|> more<|end|>");  // not <|end|>
  EXPECT_EQ(d.reasoning, "<|entry|> more");
  EXPECT_TRUE(s.Push("<|start|>assistant<|channel|>final").empty());
  d = s.Push("<|message|>Hi");
  EXPECT_EQ(d.content, "Hi");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_TRUE(s.Push("<|ret").empty());
  EXPECT_TRUE(s.Push("urn|>").empty());
  EXPECT_TRUE(s.Finish().empty());

  HarmonyStream plain;  // no markers: content at once, but for a possible first-header recipient
  EXPECT_TRUE(plain.Push(" t").empty());
  EXPECT_EQ(plain.Push("he answer").content, " the answer");
  EXPECT_EQ(plain.Push(" is <").content, " is ");
  EXPECT_EQ(plain.Push("b>").content, "<b>");
}

TEST(HarmonyStream, CallsStreamAsTheyCome) {
  HarmonyStream s(RandomToolCallIds(1));
  HarmonyDelta d =
      s.Push("<|channel|>analysis<|message|>Weather.<|end|><|start|>assistant to=functions.get_weather");
  EXPECT_EQ(d.reasoning, "Weather.");
  EXPECT_TRUE(d.calls.empty());
  d = s.Push("<|channel|>commentary json<|message|>{\"city\": \"Pa");
  ASSERT_EQ(d.calls.size(), 2u);
  EXPECT_EQ(d.calls[0].index, 0);
  EXPECT_EQ(d.calls[0].id, RandomToolCallIds(1)());
  EXPECT_EQ(d.calls[0].name, "get_weather");
  EXPECT_EQ(d.calls[0].arguments, "");
  EXPECT_EQ(d.calls[1].arguments, R"({"city":"Pa)");
  EXPECT_TRUE(d.calls[1].id.empty());
  d = s.Push("ris\"}<|ca");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].arguments, R"(ris"})");
  EXPECT_TRUE(s.Push("ll|>").empty());
  EXPECT_TRUE(s.Finish().empty());
  EXPECT_EQ(s.num_calls(), 1);
}

// Outputs mixing every kind of message, both recipient placements, near-markers, broken headers, text
// outside messages and cut-offs.
std::vector<std::string> RandomOutputs(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  const char* headers[] = {
      "<|channel|>analysis<|message|>",
      "<|start|>assistant<|channel|>analysis<|message|>",
      "<|start|>assistant<|channel|>final<|message|>",
      "<|start|>assistant<|channel|>commentary<|message|>",
      "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>",
      "<|start|>assistant to=functions.f<|channel|>commentary json<|message|>",
      " to=functions.search<|channel|>commentary<|message|>",
      "<|channel|>commentary to=assistant<|channel|>analysis<|message|>",
      "<|start|>assistant<|channel|>analysis to=python<|message|>",
      "<|channel|>mystery<|message|>",
      "<|channel|>final\n",
      "<|message|>"};
  const char* bodies[] = {"Thinking about it.",
                          "{\"city\": \"Paris\"}",
                          "{\n  \"a\": [1, 2],\n  \"s\": \"x y\"\n}",
                          "{}",
                          "  text with\nlines  ",
                          "",
                          " ",
                          "<|",
                          "<|chan",
                          "a <|x|> b",
                          "\n\n"};
  const char* ends[] = {"<|end|>", "<|return|>", "<|call|>", "", "<|en", "\n"};
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    std::string s;
    if (rng() % 6 == 0) s += "Plain start ";
    const int messages = 1 + rng() % 4;
    for (int m = 0; m < messages; ++m) {
      s += headers[rng() % (sizeof(headers) / sizeof(headers[0]))];
      s += bodies[rng() % (sizeof(bodies) / sizeof(bodies[0]))];
      s += ends[rng() % (sizeof(ends) / sizeof(ends[0]))];
    }
    if (rng() % 3 == 0) s.resize(rng() % (s.size() + 1));  // cut off anywhere
    out.push_back(s);
  }
  return out;
}

// Every split point (and byte by byte) of the outputs, and random splits.
TEST(HarmonyStream, AnySplitAddsUpToTheWholeParse) {
  std::mt19937 rng(100);
  int checked = 0;
  for (const std::string& text : RandomOutputs(400, 7)) {
    const HarmonyAnswer whole = ParseHarmony(text, RandomToolCallIds(9));
    for (size_t cut = 0; cut <= text.size(); ++cut) {
      ExpectSame(StreamPieces({text.substr(0, cut), text.substr(cut)}), whole,
                 text + " @" + std::to_string(cut));
    }
    std::vector<std::string> bytes;
    for (char c : text) bytes.push_back(std::string(1, c));
    ExpectSame(StreamPieces(bytes), whole, text + " bytewise");
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<std::string> pieces;
      for (size_t pos = 0; pos < text.size();) {
        const size_t len = 1 + rng() % 12;
        pieces.push_back(text.substr(pos, len));
        pos += len;
      }
      ExpectSame(StreamPieces(pieces), whole, text);
    }
    ++checked;
  }
  EXPECT_EQ(checked, 400);
}

// The random outputs exercise every part.
TEST(HarmonyStream, RandomOutputsHaveEveryPart) {
  int with_reasoning = 0, with_content = 0, with_calls = 0;
  for (const std::string& text : RandomOutputs(400, 7)) {
    const HarmonyAnswer a = ParseHarmony(text);
    with_reasoning += !a.reasoning.empty();
    with_content += !a.content.empty();
    with_calls += !a.calls.empty();
  }
  EXPECT_GT(with_reasoning, 100);
  EXPECT_GT(with_content, 100);
  EXPECT_GT(with_calls, 100);
}

// A header refused for its length, and long bodies, the same however they are split.
TEST(HarmonyStream, LongOutputs) {
  const std::string big(3000, 'x');
  const std::vector<std::string> texts = {
      "<|channel|>" + std::string(501, 'y') + "<|message|>body<|end|>",  // 512 bytes: within the limit
      "<|channel|>" + std::string(502, 'y') + "<|message|>body<|end|>",  // 513: over it
      "<|channel|>analysis<|message|>" + big + "<|end|><|start|>assistant<|channel|>final<|message|>" + big,
      "<|channel|>commentary to=functions.f<|message|>{\"s\": \"" + big + "\"}<|call|>"};
  EXPECT_EQ(ParseHarmony(texts[0]).content, "body");
  EXPECT_EQ(ParseHarmony(texts[1]).content, "<|channel|>" + std::string(502, 'y') + "\n\nbody");
  std::mt19937 rng(5);
  for (const std::string& text : texts) {
    const HarmonyAnswer whole = ParseHarmony(text, RandomToolCallIds(9));
    for (size_t cut = 0; cut <= 600 && cut <= text.size(); ++cut) {
      ExpectSame(StreamPieces({text.substr(0, cut), text.substr(cut)}), whole, text.substr(0, 40));
    }
    for (int trial = 0; trial < 5; ++trial) {
      std::vector<std::string> pieces;
      for (size_t pos = 0; pos < text.size();) {
        const size_t len = 1 + rng() % 64;
        pieces.push_back(text.substr(pos, len));
        pos += len;
      }
      ExpectSame(StreamPieces(pieces), whole, text.substr(0, 40));
    }
  }
}

// ---- The real template ---------------------------------------------------------------------------------

namespace fs = std::filesystem;

std::string ReadTemplate() {
  const fs::path path =
      fs::path(LLAMAY_SOURCE_DIR) / "src" / "toolcall" / "testdata" / "openai-gpt-oss-120b.jinja";
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<ToolSpec> Tools() {
  auto tools = ParseTools(Json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
      "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city"},
        "days": {"type": "integer"},
        "unit": {"type": "string", "enum": ["c", "f"]}},
      "required": ["city"]}}},
    {"type": "function", "function": {"name": "ping", "description": "Checks the connection"}}])"));
  EXPECT_TRUE(tools.ok()) << tools.status().ToString();
  return tools.ok() ? *tools : std::vector<ToolSpec>();
}

Result<std::string> Render(const Json& messages) {
  auto tmpl = chat::ChatTemplate::Parse(ReadTemplate());
  if (!tmpl.ok()) return tmpl.status();
  return chat::RenderMessages(*tmpl, MessagesForHarmonyTemplate(messages), ToolsJson(Tools()),
                              /*add_generation_prompt=*/true, "", "");
}

TEST(HarmonyTemplate, IsDetected) {
  const std::string source = ReadTemplate();
  ASSERT_FALSE(source.empty());
  EXPECT_TRUE(IsHarmonyTemplate(source));
  EXPECT_TRUE(chat::TemplateReadsVariable(source, "tools"));
}

// A conversation with tools, a past call with its reasoning, and the call's result: the prompt has what
// the model was trained on, and the past turn parses back into the reasoning and the call.
TEST(HarmonyTemplate, RendersToolsCallsAndResults) {
  const Json messages = Json::parse(R"([
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": null, "reasoning_content": "Need the weather tool.",
     "tool_calls": [{"id": "call_1", "type": "function",
       "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": 3}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "Sunny, 25C"}])");
  auto text = Render(messages);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  const std::string& p = *text;
  // The generation prompt: the model writes its first header right after this.
  const std::string_view gen = "<|start|>assistant";
  ASSERT_GE(p.size(), gen.size());
  EXPECT_EQ(p.substr(p.size() - gen.size()), gen) << p;
  // The system and developer messages: channels, the instructions, the tools' namespace.
  EXPECT_NE(
      p.find("# Valid channels: analysis, commentary, final. Channel must be included for every message."),
      std::string::npos)
      << p;
  EXPECT_NE(p.find("Calls to these tools must go to the commentary channel: 'functions'."),
            std::string::npos);
  EXPECT_NE(p.find("<|start|>developer<|message|># Instructions\n\nYou are helpful.\n\n# Tools\n\n"
                   "## functions\n\nnamespace functions {\n\n"),
            std::string::npos)
      << p;
  EXPECT_NE(
      p.find("// Weather in a city\ntype get_weather = (_: {\n// The city\ncity: string,\ndays?: number,\n"
             "unit?: \"c\" | \"f\",\n}) => any;\n\n"),
      std::string::npos)
      << p;
  EXPECT_NE(p.find("// Checks the connection\ntype ping = () => any;\n\n} // namespace functions<|end|>"),
            std::string::npos)
      << p;
  // The past turn: its reasoning (kept, since no final answer followed), the call, the result.
  const std::string turn =
      "<|start|>assistant<|channel|>analysis<|message|>Need the weather tool.<|end|>"
      "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>"
      "{\"city\": \"Paris\", \"days\": 3}<|call|>";
  const size_t at = p.find(turn);
  ASSERT_NE(at, std::string::npos) << p;
  EXPECT_NE(
      p.find(
          "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>\"Sunny, 25C\"<|end|>",
          at + turn.size()),
      std::string::npos)
      << p;
  // What the model wrote then parses back (less the `<|start|>assistant` the prompt writes).
  const HarmonyAnswer a = ParseHarmony(std::string_view(turn).substr(gen.size()));
  EXPECT_EQ(a.reasoning, "Need the weather tool.");
  EXPECT_EQ(a.content, "");
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].name, "get_weather");
  EXPECT_EQ(a.calls[0].arguments, R"({"city":"Paris","days":3})");
}

// Several calls in one message: the template renders only a message's first call and names each result
// after the latest call, so each call goes with its own result.
TEST(HarmonyTemplate, SeveralCallsEachWithItsResult) {
  const Json messages = Json::parse(R"([
    {"role": "user", "content": "Weather in Paris, and ping?"},
    {"role": "assistant", "content": "", "tool_calls": [
      {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
      {"id": "call_2", "type": "function", "function": {"name": "ping", "arguments": ""}}]},
    {"role": "tool", "tool_call_id": "call_2", "content": "pong"},
    {"role": "tool", "tool_call_id": "call_1", "content": "Sunny"},
    {"role": "assistant", "content": "Sunny, and pong."},
    {"role": "user", "content": "Thanks"}])");
  auto text = Render(messages);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_NE(
      text->find("<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>"
                 "{\"city\": \"Paris\"}<|call|>"
                 "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>\"Sunny\"<|end|>"
                 "<|start|>assistant to=functions.ping<|channel|>commentary json<|message|>{}<|call|>"
                 "<|start|>functions.ping to=assistant<|channel|>commentary<|message|>\"pong\"<|end|>"
                 "<|start|>assistant<|channel|>final<|message|>Sunny, and pong.<|end|>"
                 "<|start|>user<|message|>Thanks<|end|><|start|>assistant"),
      std::string::npos)
      << *text;
  // The conversion itself: one call per message, reasoning in `thinking`, content beside it dropped.
  const Json converted = MessagesForHarmonyTemplate(Json::parse(R"([
    {"role": "assistant", "content": "Checking.", "reasoning_content": "Think.",
     "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{\"x\": 1}"}},
                    {"id": "b", "function": {"name": "g", "arguments": null}}]}])"));
  ASSERT_EQ(converted.size(), 2u) << converted.dump();
  EXPECT_EQ(converted[0]["thinking"], "Think.");
  EXPECT_FALSE(converted[0].contains("content"));
  EXPECT_EQ(converted[0]["tool_calls"][0]["function"]["arguments"], Json::parse(R"({"x": 1})"));
  EXPECT_FALSE(converted[1].contains("thinking"));
  EXPECT_EQ(converted[1]["tool_calls"][0]["function"]["arguments"], Json::object());
}

}  // namespace
}  // namespace llamay::toolcall
