// Golden tests: real chat templates (testdata/*.jinja, copied from public model repositories) rendered
// for fixed conversations (testdata/conversations.json) must equal, byte for byte, what Jinja2 renders
// with HF transformers' settings (testdata/*.expected, *.error, written by testdata/generate.py).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "template/chat_template.h"

namespace llamay::chat {
namespace {

namespace fs = std::filesystem;

fs::path TestData() { return fs::path(LLAMAY_SOURCE_DIR) / "src" / "template" / "testdata"; }

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct GoldenCase {
  std::string template_name;
  std::string conversation;
  bool add_generation_prompt = false;
  fs::path path;
  bool is_error = false;
};

// All golden cases, from the file names <template>.<conversation>.<gen|nogen>.<expected|error>.
std::vector<GoldenCase> AllCases() {
  std::vector<GoldenCase> cases;
  for (const auto& entry : fs::directory_iterator(TestData())) {
    const std::string ext = entry.path().extension().string();
    if (ext != ".expected" && ext != ".error") continue;
    std::string stem = entry.path().stem().string();  // template.conversation.gen
    size_t d2 = stem.rfind('.');
    size_t d1 = stem.rfind('.', d2 - 1);
    GoldenCase c;
    c.template_name = stem.substr(0, d1);
    c.conversation = stem.substr(d1 + 1, d2 - d1 - 1);
    c.add_generation_prompt = stem.substr(d2 + 1) == "gen";
    c.path = entry.path();
    c.is_error = ext == ".error";
    cases.push_back(std::move(c));
  }
  std::sort(cases.begin(), cases.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  return cases;
}

// Insertion-ordered, as Python iterates the contexts generate.py rendered.
nlohmann::ordered_json Conversations() {
  return nlohmann::ordered_json::parse(ReadFile(TestData() / "conversations.json"));
}

TEST(ChatTemplateGolden, EveryTemplateHasGoldensAndEveryGoldenATemplate) {
  std::set<std::string> templates, covered;
  for (const auto& entry : fs::directory_iterator(TestData())) {
    if (entry.path().extension() == ".jinja") templates.insert(entry.path().stem().string());
  }
  for (const GoldenCase& c : AllCases()) covered.insert(c.template_name);
  EXPECT_GE(templates.size(), 30u);
  EXPECT_EQ(templates, covered);
  EXPECT_GE(AllCases().size(), 150u);
}

TEST(ChatTemplateGolden, MatchesJinja2ByteForByte) {
  const nlohmann::ordered_json conversations = Conversations();
  std::map<std::string, ChatTemplate> parsed;
  int checked = 0;
  for (const GoldenCase& c : AllCases()) {
    SCOPED_TRACE(c.path.filename().string());
    auto it = parsed.find(c.template_name);
    if (it == parsed.end()) {
      auto tmpl = ChatTemplate::Parse(ReadFile(TestData() / (c.template_name + ".jinja")));
      ASSERT_TRUE(tmpl.ok()) << tmpl.status().ToString();
      it = parsed.emplace(c.template_name, *tmpl).first;
    }
    ASSERT_TRUE(conversations.contains(c.conversation));
    nlohmann::ordered_json context = conversations[c.conversation];
    context["add_generation_prompt"] = c.add_generation_prompt;
    Result<std::string> out = it->second.Render(context);
    const std::string golden = ReadFile(c.path);
    if (!c.is_error) {
      if (!out.ok()) {
        ADD_FAILURE() << out.status().ToString();
        continue;
      }
      EXPECT_EQ(*out, golden);
    } else {
      if (out.ok()) {
        ADD_FAILURE() << "rendered instead of failing:\n" << *out;
        continue;
      }
      const size_t nl = golden.find('\n');
      if (golden.substr(0, nl) == "raise") {
        EXPECT_EQ(out.status().detail(), static_cast<int>(TemplateErrorDetail::kRaised))
            << out.status().ToString();
        EXPECT_NE(out.status().message().find(golden.substr(nl + 1)), std::string::npos)
            << out.status().ToString();
      }
    }
    ++checked;
  }
  EXPECT_GE(checked, 150);
}

// The built-in templates render like their family's reference template.
TEST(ChatTemplateGolden, BuiltinTemplatesMatchTheirReference) {
  const nlohmann::ordered_json conversations = Conversations();
  const std::pair<const char*, const char*> pairs[] = {
      {"chatml", "chatml"}, {"llama2", "llama2"}, {"llama3", "llama3"}, {"mistral", "mistral"},
      {"gemma", "gemma"},   {"phi3", "phi35"},    {"zephyr", "zephyr"},
  };
  for (const auto& [family, reference] : pairs) {
    for (const char* conv : {"basic", "system"}) {
      for (bool gen : {true, false}) {
        const fs::path golden =
            TestData() / (std::string(reference) + "." + conv + (gen ? ".gen" : ".nogen") + ".expected");
        if (!fs::exists(golden)) continue;  // the reference refuses this conversation
        SCOPED_TRACE(golden.filename().string());
        nlohmann::ordered_json context = conversations[conv];
        context["add_generation_prompt"] = gen;
        auto tmpl = ChatTemplate::Parse(BuiltinTemplate(family));
        ASSERT_TRUE(tmpl.ok()) << family << ": " << tmpl.status().ToString();
        auto out = tmpl->Render(context);
        ASSERT_TRUE(out.ok()) << out.status().ToString();
        EXPECT_EQ(*out, ReadFile(golden));
      }
    }
  }
}

TEST(ChatTemplateGolden, DetectsTheFamilyOfRealTemplates) {
  const std::pair<const char*, const char*> expected[] = {
      {"chatml", "chatml"},        {"qwen2", "chatml"},
      {"qwen3", "chatml"},         {"smollm2", "chatml"},
      {"llama2", "llama2"},        {"llama3", "llama3"},
      {"llama31", "llama3"},       {"llama32", "llama3"},
      {"mistral", "mistral"},      {"mistral_v1", "mistral"},
      {"mistral_nemo", "mistral"}, {"gemma", "gemma"},
      {"phi3_mini", "phi3"},       {"phi35", "phi3"},
      {"zephyr", "zephyr"},        {"command_r", "command-r"},
      {"openchat", "openchat"},    {"granite3", "granite"},
      {"chatglm3", "chatglm"},     {"deepseek_coder", "deepseek"},
  };
  for (const auto& [name, family] : expected) {
    EXPECT_EQ(DetectTemplateFamily(ReadFile(TestData() / (std::string(name) + ".jinja"))), family) << name;
  }
}

// chat_template_kwargs reach the template as variables: Qwen3's enable_thinking=false writes an empty
// think block into the generation prompt; the kwargs cannot replace the variables the renderer sets.
TEST(TemplateVariables, ReadsVariableOnlyInCode) {
  EXPECT_TRUE(TemplateReadsVariable(ReadFile(TestData() / "qwen3.jinja"), "tools"));
  EXPECT_TRUE(TemplateReadsVariable(ReadFile(TestData() / "qwen3.jinja"), "enable_thinking"));
  EXPECT_FALSE(TemplateReadsVariable(ReadFile(TestData() / "qwq.jinja"), "enable_thinking"));
  EXPECT_TRUE(TemplateReadsVariable(ReadFile(TestData() / "llama31.jinja"), "tools"));
  EXPECT_FALSE(TemplateReadsVariable(ReadFile(TestData() / "chatml.jinja"), "tools"));
  EXPECT_TRUE(TemplateReadsVariable("{%- if not enable_thinking %}x{% endif %}", "enable_thinking"));
  EXPECT_TRUE(TemplateReadsVariable("{{ tools|length }}", "tools"));
  EXPECT_TRUE(TemplateReadsVariable("{% for t in tools %}{% endfor %}", "tools"));
  EXPECT_FALSE(TemplateReadsVariable("You have tools. {{ messages[0].content }}", "tools"));  // text
  EXPECT_FALSE(TemplateReadsVariable("{{ 'tools' }}{{ \"use tools\" }}", "tools"));          // strings
  EXPECT_FALSE(TemplateReadsVariable("{{ message.tools }}{% set tools_x = 1 %}", "tools"));  // attribute, other name
  EXPECT_FALSE(TemplateReadsVariable("{# tools #}{{ x }}", "tools"));                        // comment
  EXPECT_FALSE(TemplateReadsVariable("{{ tools ", "tools"));                                 // does not lex
}

TEST(TemplateVariables, KwargsReachTheTemplateAndCannotReplaceItsInputs) {
  auto tmpl = ChatTemplate::Parse(ReadFile(TestData() / "qwen3.jinja"));
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().message();
  const nlohmann::ordered_json messages = nlohmann::ordered_json::array({{{"role", "user"}, {"content", "hi"}}});
  auto plain = RenderMessages(*tmpl, messages, nullptr, true, "", "<|im_end|>");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(*plain, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  auto off = RenderMessages(*tmpl, messages, nullptr, {{"enable_thinking", false}}, true, "", "<|im_end|>");
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(*off, *plain + "<think>\n\n</think>\n\n");
  auto on = RenderMessages(*tmpl, messages, nullptr, {{"enable_thinking", true}}, true, "", "<|im_end|>");
  ASSERT_TRUE(on.ok());
  EXPECT_EQ(*on, *plain);
  const nlohmann::ordered_json hijack = {{"messages", nlohmann::ordered_json::array()}, {"add_generation_prompt", false}};
  auto kept = RenderMessages(*tmpl, messages, nullptr, hijack, true, "", "<|im_end|>");
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(*kept, *plain);
}

}  // namespace
}  // namespace llamay::chat
