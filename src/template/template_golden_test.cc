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

}  // namespace
}  // namespace llamay::chat
