// ToolCallStream: deltas shaped as OpenAI streams them, text held back only while it may be a call, and
// the split property: however an output is cut into pushes, the deltas add up to ParseToolCalls's answer.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "toolcall/toolcall.h"
#include "toolcall/toolcall_stream_test_util.h"

namespace llamay::toolcall {
namespace {

const ToolFormat kFormats[] = {ToolFormat::kHermes, ToolFormat::kLlama3, ToolFormat::kMistral,
                               ToolFormat::kGranite, ToolFormat::kGeneric};

using testing::ExpectSame;
using testing::StreamPieces;

// A call in `format`'s syntax with randomly spaced JSON.
std::string RandomCall(ToolFormat format, std::mt19937& rng, bool first_in_list) {
  const char* names[] = {"get_weather", "add", "f", "search-web"};
  const char* args[] = {R"({})", R"({"city": "Paris"})", "{\n  \"a\": 1,\n  \"b\": [true, null, -2.5e3]\n}",
                        R"({"q": "say \"hi\" {not} [json] <tool_call>", "n": {"deep": {"x": []}}})",
                        R"({"text":"caf\u00e9 \\ é"})"};
  const std::string name = names[rng() % 4], arg = args[rng() % 5];
  const std::string key = format == ToolFormat::kLlama3 && rng() % 2 ? "parameters" : "arguments";
  const std::string sp = rng() % 2 ? " " : "";
  std::string obj = "{\"name\":" + sp + "\"" + name + "\"," + sp + "\"" + key + "\":" + sp + arg + "}";
  if (rng() % 5 == 0) obj = "{\"" + key + "\": " + arg + ", \"name\": \"" + name + "\"}";
  switch (format) {
    case ToolFormat::kHermes:
    case ToolFormat::kGeneric:
      return "<tool_call>\n" + obj + "\n</tool_call>";
    case ToolFormat::kLlama3:
      return (rng() % 2 ? "<|python_tag|>" : "") + obj;
    case ToolFormat::kMistral:
      if (rng() % 3 == 0) return "[TOOL_CALLS]" + name + "[ARGS]" + arg;
      return first_in_list ? "[TOOL_CALLS][" + obj + "]" : "[TOOL_CALLS][" + obj + ", " + obj + "]";
    case ToolFormat::kGranite:
      return first_in_list ? "<|tool_call|>[" + obj + "]" : "<|tool_call|>[" + obj + ",\n" + obj + "]";
    case ToolFormat::kQwen3Coder:
    case ToolFormat::kGlm45:
      break;  // toolcall_xml_test.cc
  }
  return "";
}

// Outputs mixing text (with near-triggers), calls, broken calls and cut-offs.
std::vector<std::string> RandomOutputs(ToolFormat format, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  const char* texts[] = {"Hello",
                         " ",
                         "\n",
                         "\n\n",
                         "<",
                         "<tool",
                         "<tool_call>",
                         "[TOOL",
                         "[TOOL_CALLS]",
                         "{",
                         "{\"name\"",
                         "<|python_tag|>",
                         "<|tool_call|>",
                         "Sure, I'll check.",
                         "}",
                         "]",
                         ";"};
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    std::string s;
    const int parts = 1 + rng() % 4;
    for (int p = 0; p < parts; ++p) {
      if (rng() % 2) {
        s += RandomCall(format, rng, rng() % 2);
      } else {
        s += texts[rng() % (sizeof(texts) / sizeof(texts[0]))];
      }
    }
    if (rng() % 4 == 0) s.resize(rng() % (s.size() + 1));  // cut off anywhere
    out.push_back(s);
  }
  return out;
}

TEST(ToolCallStream, ArgumentsStreamAsTheyCome) {
  ToolCallStream s(ToolFormat::kHermes, RandomToolCallIds(1));
  ToolDelta d = s.Push("Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par");
  EXPECT_EQ(d.content, "Checking.");
  ASSERT_EQ(d.calls.size(), 2u);
  EXPECT_EQ(d.calls[0].index, 0);
  EXPECT_EQ(d.calls[0].name, "get_weather");
  EXPECT_EQ(d.calls[0].id.substr(0, 5), "call_");
  EXPECT_EQ(d.calls[1].arguments, R"({"city":"Par)");
  d = s.Push("is\"}}\n</tool_call>");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].arguments, R"(is"})");
  EXPECT_TRUE(d.calls[0].id.empty());
  EXPECT_TRUE(s.Finish().empty());
}

TEST(ToolCallStream, HoldsBackOnlyWhatMayBeACall) {
  ToolCallStream s(ToolFormat::kHermes);
  EXPECT_EQ(s.Push("Hello <tool").content, "Hello");
  EXPECT_EQ(s.Push("box> is").content, " <toolbox> is");
  EXPECT_EQ(s.Push(" ").content, "");
  EXPECT_EQ(s.Finish().content, " ");

  ToolCallStream llama(ToolFormat::kLlama3);
  EXPECT_TRUE(llama.Push("  ").empty());
  EXPECT_TRUE(llama.Push("{\"na").empty());
  ToolDelta d = llama.Push("me\": \"f\", \"parameters\": {}}");
  ASSERT_EQ(d.calls.size(), 2u);
  EXPECT_EQ(d.calls[1].arguments, "{}");
  EXPECT_TRUE(d.content.empty());

  ToolCallStream json_answer(ToolFormat::kLlama3);  // JSON that is not a call is let go of early
  EXPECT_EQ(json_answer.Push("{\"answer\": 4").content, "{\"answer\": 4");

  ToolCallStream mistral(ToolFormat::kMistral);
  EXPECT_EQ(mistral.Push("x [TOOL_CALLS][").content, "x");
  EXPECT_EQ(mistral.Push("nope").content, " [TOOL_CALLS][nope");
}

// Every split point (and byte by byte) of small outputs, random splits of all of them, every format.
TEST(ToolCallStream, AnySplitAddsUpToTheWholeParse) {
  int checked = 0;
  for (ToolFormat f : kFormats) {
    std::mt19937 rng(static_cast<uint32_t>(f) + 100);
    for (const std::string& text : RandomOutputs(f, 300, static_cast<uint32_t>(f))) {
      const ParsedAnswer whole = ParseToolCalls(f, text, RandomToolCallIds(9));
      const std::string what = std::string(ToolFormatName(f)) + ": " + text;
      if (text.size() <= 160) {
        for (size_t cut = 0; cut <= text.size(); ++cut) {
          ExpectSame(StreamPieces(f, {text.substr(0, cut), text.substr(cut)}), whole,
                     what + " @" + std::to_string(cut));
        }
        std::vector<std::string> bytes;
        for (char c : text) bytes.push_back(std::string(1, c));
        ExpectSame(StreamPieces(f, bytes), whole, what + " bytewise");
      }
      for (int trial = 0; trial < 20; ++trial) {
        std::vector<std::string> pieces;
        for (size_t pos = 0; pos < text.size();) {
          const size_t len = 1 + rng() % 9;
          pieces.push_back(text.substr(pos, len));
          pos += len;
        }
        ExpectSame(StreamPieces(f, pieces), whole, what);
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 1500);
}

// The random outputs do exercise calls and content alike.
TEST(ToolCallStream, RandomOutputsHaveCallsAndText) {
  for (ToolFormat f : kFormats) {
    int with_calls = 0, with_content = 0;
    for (const std::string& text : RandomOutputs(f, 300, static_cast<uint32_t>(f))) {
      const ParsedAnswer a = ParseToolCalls(f, text);
      with_calls += !a.calls.empty();
      with_content += !a.content.empty();
    }
    EXPECT_GT(with_calls, 100) << ToolFormatName(f);
    EXPECT_GT(with_content, 100) << ToolFormatName(f);
  }
}

// Long calls: arguments of any size stream; syntax that stays undecided past kMaxPending bytes (a name or
// arguments-before-the-name that long) is not a call, the same way however the text is split.
TEST(ToolCallStream, LongOutputs) {
  const std::string big(40000, 'x');
  const std::string name_first =
      "<tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"" + big + "\"}}</tool_call>";
  const std::string args_first =
      "<tool_call>{\"arguments\": {\"s\": \"" + big + "\"}, \"name\": \"f\"}</tool_call>";
  const std::string long_name = "<tool_call>{\"name\": \"" + big + "\", \"arguments\": {}}</tool_call>";
  const ParsedAnswer a = ParseToolCalls(ToolFormat::kHermes, name_first);
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].arguments.size(), big.size() + 8);
  EXPECT_TRUE(ParseToolCalls(ToolFormat::kHermes, args_first).calls.empty());
  EXPECT_TRUE(ParseToolCalls(ToolFormat::kHermes, long_name).calls.empty());
  std::mt19937 rng(5);
  for (const std::string& text : {name_first, args_first, long_name}) {
    const ParsedAnswer whole = ParseToolCalls(ToolFormat::kHermes, text, RandomToolCallIds(9));
    for (int trial = 0; trial < 3; ++trial) {
      std::vector<std::string> pieces;
      for (size_t pos = 0; pos < text.size();) {
        const size_t len = 1 + rng() % 64;
        pieces.push_back(text.substr(pos, len));
        pos += len;
      }
      ExpectSame(StreamPieces(ToolFormat::kHermes, pieces), whole, text.substr(0, 40));
    }
  }
}

}  // namespace
}  // namespace llamay::toolcall
