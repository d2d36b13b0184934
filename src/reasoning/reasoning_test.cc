// Reasoning: markers from real templates, prompts that open the reasoning, the one-shot split, and the
// split property of the streaming splitter: however an output is cut into pushes, the pieces add up to
// SplitReasoning's answer.
#include "reasoning/reasoning.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace llamay::reasoning {
namespace {

std::string ReadTestdata(const std::string& name) {
  std::ifstream in(std::string(LLAMAY_SOURCE_DIR) + "/src/template/testdata/" + name, std::ios::binary);
  EXPECT_TRUE(in.good()) << name;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

const ReasoningMarkers kThink;

TEST(DetectReasoning, RealTemplates) {
  for (const char* name : {"qwen3.jinja", "qwq.jinja"}) {
    const std::optional<ReasoningMarkers> m = DetectReasoning(ReadTestdata(name));
    ASSERT_TRUE(m.has_value()) << name;
    EXPECT_EQ(m->open, "<think>") << name;
    EXPECT_EQ(m->close, "</think>") << name;
  }
  // chatml knows nothing of reasoning; this seed_oss.jinja is a version without <seed:think>.
  for (const char* name : {"chatml.jinja", "qwen2.jinja", "llama3.jinja", "seed_oss.jinja"})
    EXPECT_FALSE(DetectReasoning(ReadTestdata(name)).has_value()) << name;
}

TEST(DetectReasoning, CloseMarkerAloneAndSeedMarkers) {
  // DeepSeek-R1's templates strip the reasoning from past answers and may never write <think>.
  const auto r1 = DetectReasoning("{% set content = content.split('</think>')[-1] %}");
  ASSERT_TRUE(r1.has_value());
  EXPECT_EQ(r1->open, "<think>");
  EXPECT_EQ(r1->close, "</think>");
  const auto seed = DetectReasoning("{{ '<seed:think>' + m.reasoning_content + '</seed:think>' }}");
  ASSERT_TRUE(seed.has_value());
  EXPECT_EQ(seed->open, "<seed:think>");
  EXPECT_EQ(seed->close, "</seed:think>");
  EXPECT_FALSE(DetectReasoning("{{ 'thinking' }} <thinking>").has_value());
}

TEST(PromptOpensReasoning, RenderedPrompts) {
  EXPECT_TRUE(
      PromptOpensReasoning("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n", kThink));
  EXPECT_TRUE(PromptOpensReasoning("<|im_start|>assistant\n<think>", kThink));
  EXPECT_FALSE(PromptOpensReasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n", kThink));
  EXPECT_FALSE(PromptOpensReasoning("<|im_start|>assistant\n", kThink));
  // An earlier turn's reasoning, closed; and an open marker that text follows.
  EXPECT_FALSE(
      PromptOpensReasoning("<think>\nold\n</think>\n\nanswer<|im_end|>\n<|im_start|>assistant\n", kThink));
  EXPECT_FALSE(PromptOpensReasoning("<|im_start|>assistant\n<think>\nI already began", kThink));
  EXPECT_TRUE(PromptOpensReasoning("<think>a</think>b<|im_start|>assistant\n<think>\n", kThink));
  // The real renderings: QwQ's generation prompt opens it, Qwen3's (thinking on by default) does not.
  EXPECT_TRUE(PromptOpensReasoning(ReadTestdata("qwq.basic.gen.expected"), kThink));
  EXPECT_FALSE(PromptOpensReasoning(ReadTestdata("qwen3.basic.gen.expected"), kThink));
  EXPECT_FALSE(PromptOpensReasoning(ReadTestdata("qwq.basic.nogen.expected"), kThink));
}

void ExpectSplit(std::string_view text, bool starts_inside, const std::string& reasoning,
                 const std::string& content) {
  const Split s = SplitReasoning(text, kThink, starts_inside);
  EXPECT_EQ(s.reasoning, reasoning) << text;
  EXPECT_EQ(s.content, content) << text;
}

TEST(SplitReasoning, Cases) {
  ExpectSplit("<think>\nLet me think.\n</think>\n\nThe answer is 4.", false, "Let me think.",
              "The answer is 4.");
  ExpectSplit("  \n<think>a\n\nb  </think>c ", false, "a\n\nb", "c ");
  // The prompt opened the block; a repeated open marker at the start is dropped.
  ExpectSplit("Let me think.\n</think>\n\nFour.", true, "Let me think.", "Four.");
  ExpectSplit("<think>\nx</think>y", true, "x", "y");
  // Cut off inside the reasoning.
  ExpectSplit("<think>\nStill thinking  ", false, "Still thinking", "");
  ExpectSplit("abc </thi", true, "abc </thi", "");
  ExpectSplit("", true, "", "");
  // No block: all content, whitespace included.
  ExpectSplit("Hello <b>world</b>", false, "", "Hello <b>world</b>");
  ExpectSplit("\n Hi </think> x", false, "", "\n Hi </think> x");
  ExpectSplit("", false, "", "");
  // Only the first block, and only at the start.
  ExpectSplit("Sure. <think>x</think> ok", false, "", "Sure. <think>x</think> ok");
  ExpectSplit("<think>a</think>b <think>c</think>", false, "a", "b <think>c</think>");
  ExpectSplit("a</think>b<think>c</think>d", true, "a", "b<think>c</think>d");
  // Empty reasoning (Qwen3 with enable_thinking=false writes this into the prompt; some models do too).
  ExpectSplit("<think>\n\n</think>\n\nHi", false, "", "Hi");
  ExpectSplit("</think>\n\nHi", true, "", "Hi");
}

TEST(SplitReasoning, OtherMarkers) {
  const ReasoningMarkers seed{"<seed:think>", "</seed:think>"};
  const Split s = SplitReasoning("<seed:think>plan</think></seed:think>\nok", seed, false);
  EXPECT_EQ(s.reasoning, "plan</think>");
  EXPECT_EQ(s.content, "ok");
}

// The pieces of a stream added up.
Split StreamPieces(const std::vector<std::string>& pieces, bool starts_inside,
                   const ReasoningMarkers& m = kThink) {
  ReasoningSplitter splitter(m, starts_inside);
  Split total;
  for (const std::string& p : pieces) {
    const Split d = splitter.Push(p);
    total.reasoning += d.reasoning;
    total.content += d.content;
  }
  const Split d = splitter.Finish();
  total.reasoning += d.reasoning;
  total.content += d.content;
  return total;
}

std::vector<std::string> Bytes(std::string_view text) {
  std::vector<std::string> out;
  for (char c : text) out.push_back(std::string(1, c));
  return out;
}

TEST(ReasoningSplitter, MarkersSplitByteByByte) {
  ReasoningSplitter s(kThink, false);
  std::vector<std::pair<std::string, std::string>> got;  // (reasoning, content) per push
  for (const std::string& b : Bytes("<think>hm </think>\nok")) {
    const Split d = s.Push(b);
    got.push_back({d.reasoning, d.content});
  }
  const std::vector<std::pair<std::string, std::string>> want = {
      {"", ""},  {"", ""},  {"", ""}, {"", ""}, {"", ""}, {"", ""}, {"", ""},  // <think>
      {"h", ""}, {"m", ""},                                                    // the reasoning at once
      {"", ""},                                                                // a space: may be trimmed
      {"", ""},  {"", ""},  {"", ""}, {"", ""}, {"", ""}, {"", ""}, {"", ""}, {"", ""},  // </think>
      {"", ""},                                                                          // \n: dropped
      {"", "o"}, {"", "k"}};
  EXPECT_EQ(got, want);
  EXPECT_FALSE(s.inside());
  EXPECT_TRUE(s.Finish().empty());
}

TEST(ReasoningSplitter, HoldsBackOnlyWhatIsUndecided) {
  ReasoningSplitter plain(kThink, false);  // no markers: content at once, but a possible marker waits
  EXPECT_FALSE(plain.inside());
  EXPECT_EQ(plain.Push("Hello").content, "Hello");
  EXPECT_EQ(plain.Push(" <think> is").content, " <think> is");
  EXPECT_TRUE(plain.Finish().empty());

  ReasoningSplitter maybe(kThink, false);
  EXPECT_TRUE(maybe.Push("\n <th").empty());
  EXPECT_EQ(maybe.Push("ese").content, "\n <these");

  ReasoningSplitter opened(kThink, false);
  EXPECT_TRUE(opened.Push(" <think>").empty());
  EXPECT_TRUE(opened.inside());
  EXPECT_EQ(opened.Push("\nStep 1.\n").reasoning, "Step 1.");
  EXPECT_EQ(opened.Push("Step 2. </").reasoning, "\nStep 2.");
  EXPECT_EQ(opened.Push("b> ").reasoning, " </b>");
  Split d = opened.Push("</think>\n\n");
  EXPECT_TRUE(d.empty());
  EXPECT_FALSE(opened.inside());
  d = opened.Push("Answer <think>");
  EXPECT_EQ(d.content, "Answer <think>");
  EXPECT_TRUE(opened.Finish().empty());

  ReasoningSplitter inside(kThink, true);  // the prompt opened it
  EXPECT_TRUE(inside.inside());
  EXPECT_EQ(inside.Push("Hmm").reasoning, "Hmm");
  EXPECT_EQ(inside.Push(", ok. ").reasoning, ", ok.");
  const Split cut = inside.Finish();  // cut off: all of it is reasoning
  EXPECT_EQ(cut.reasoning, "");
  EXPECT_EQ(cut.content, "");
  EXPECT_TRUE(inside.inside());
}

TEST(ReasoningSplitter, FinishReleasesWhatWasHeld) {
  ReasoningSplitter a(kThink, false);
  EXPECT_TRUE(a.Push("  <thin").empty());
  Split d = a.Finish();
  EXPECT_EQ(d.content, "  <thin");
  EXPECT_EQ(d.reasoning, "");

  ReasoningSplitter b(kThink, true);
  EXPECT_TRUE(b.Push("  <thin").empty());
  d = b.Finish();
  EXPECT_EQ(d.reasoning, "<thin");

  ReasoningSplitter c(kThink, false);
  EXPECT_EQ(c.Push("<think>idea </thi").reasoning, "idea");
  d = c.Finish();
  EXPECT_EQ(d.reasoning, " </thi");
  EXPECT_EQ(d.content, "");

  ReasoningSplitter e(kThink, false);
  EXPECT_TRUE(e.Push("<think>\n\n</think>\n\n").empty());
  d = e.Push("Hi");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "Hi");
}

// Outputs made of markers, pieces of markers, whitespace and words, some cut off anywhere.
std::vector<std::string> RandomOutputs(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  const char* parts[] = {"<think>", "</think>", "<", "</",  "<th",    "</thin",  "think>", ">",   " ", "\n",
                         "\n\n",    "Hello",    "x", "a b", "<think", "</think", "\t",     "<b>", "é"};
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    std::string s;
    const int count = 1 + static_cast<int>(rng() % 9);
    for (int p = 0; p < count; ++p) s += parts[rng() % (sizeof(parts) / sizeof(parts[0]))];
    if (rng() % 4 == 0) s.resize(rng() % (s.size() + 1));
    out.push_back(s);
  }
  return out;
}

// Every split point, byte by byte, and random splits into many pushes, both ways of starting.
TEST(ReasoningSplitter, AnySplitAddsUpToTheWholeSplit) {
  std::mt19937 rng(7);
  int with_reasoning = 0, with_content = 0, checked = 0;
  std::vector<std::string> texts = RandomOutputs(1500, 3);
  for (const char* fixed : {"<think>\nLet me think.\n</think>\n\nThe answer is 4.",
                            "<think>\n\n</think>\n\nHi", "Hello", "  ", "</think>", "<think>"})
    texts.push_back(fixed);
  for (const std::string& text : texts) {
    for (bool inside : {false, true}) {
      const Split whole = SplitReasoning(text, kThink, inside);
      with_reasoning += !whole.reasoning.empty();
      with_content += !whole.content.empty();
      const std::string what = std::string(inside ? "inside: " : "outside: ") + "\"" + text + "\"";
      for (size_t cut = 0; cut <= text.size(); ++cut) {
        const Split s = StreamPieces({text.substr(0, cut), text.substr(cut)}, inside);
        ASSERT_EQ(s.reasoning, whole.reasoning) << what << " @" << cut;
        ASSERT_EQ(s.content, whole.content) << what << " @" << cut;
      }
      const Split bytes = StreamPieces(Bytes(text), inside);
      ASSERT_EQ(bytes.reasoning, whole.reasoning) << what << " bytewise";
      ASSERT_EQ(bytes.content, whole.content) << what << " bytewise";
      for (int trial = 0; trial < 10; ++trial) {
        std::vector<std::string> pieces;
        for (size_t pos = 0; pos < text.size();) {
          const size_t len = rng() % 6;  // empty pushes too
          pieces.push_back(text.substr(pos, len));
          pos += len;
        }
        const Split s = StreamPieces(pieces, inside);
        ASSERT_EQ(s.reasoning, whole.reasoning) << what;
        ASSERT_EQ(s.content, whole.content) << what;
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2 * 1506);
  // The random outputs do exercise both parts.
  EXPECT_GT(with_reasoning, 500);
  EXPECT_GT(with_content, 500);
}

TEST(ReasoningSplitter, SeedMarkersStream) {
  const ReasoningMarkers seed{"<seed:think>", "</seed:think>"};
  const std::string text = "<seed:think>plan</think></seed:think>\nok";
  const Split s = StreamPieces(Bytes(text), false, seed);
  EXPECT_EQ(s.reasoning, "plan</think>");
  EXPECT_EQ(s.content, "ok");
}

}  // namespace
}  // namespace llamay::reasoning
