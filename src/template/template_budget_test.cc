// The render budget (RenderLimits::max_steps with what a render builds charged to it): hostile templates
// stop at once with kLimit, real templates render long conversations under RenderLimitsFor.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "template/chat_template.h"

namespace llamay::chat {
namespace {

namespace fs = std::filesystem;

Status Render(std::string_view source) {
  auto tmpl = ChatTemplate::Parse(source);
  if (!tmpl.ok()) return tmpl.status();
  nlohmann::json ctx = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  return tmpl->Render(ctx).status();
}

TEST(TemplateBudget, HostileTemplatesSpendTheBudgetAndStop) {
  const char* hostile[] = {
      // A loop nest of 10^12 iterations.
      "{% for i in range(10000) %}{% for j in range(10000) %}{% for k in range(10000) %}{% endfor %}{% endfor %}"
      "{% endfor %}",
      // 30 MB strings built a thousand times (each under the 32 MiB string limit).
      "{% for i in range(1000) %}{% set x = 'a' * 30000000 %}{% endfor %}",
      "{% for i in range(1000) %}{{ ('x' * 1000000)|length }}{% endfor %}",
      // A string that grows by 80 bytes 100,000 times (quadratic copying).
      "{% set ns = namespace(s='x') %}{% for i in range(100000) %}{% set ns.s = ns.s ~ "
      "'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' %}{% endfor %}",
      // Cheap-looking operations on a big value, repeated.
      "{% set big = 'x' * 1000000 %}{% for i in range(100000) %}{{ big.find('z') }}{% endfor %}",
      "{% set l = range(100000) %}{% for i in range(40000) %}{{ l|first }}{% endfor %}",
      "{{ ('x' * 3000000)|list|length }}",
      "{% for i in range(100000) %}{{ ['xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'] * 200000 }}{% endfor %}",
      // A branching recursive macro.
      "{% macro f(n) %}{{ f(n + 1) }}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
  };
  for (const char* h : hostile) {
    SCOPED_TRACE(h);
    const Status s = Render(h);
    EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
    EXPECT_EQ(s.detail(), static_cast<int>(TemplateErrorDetail::kLimit));
  }
}

TEST(TemplateBudget, TheBudgetGrowsWithTheInput) {
  const RenderLimits base;
  const RenderLimits big = RenderLimitsFor(100, 400000);
  EXPECT_EQ(big.max_steps, base.max_steps + 100 * 2000 + 100000);
  EXPECT_GE(big.max_output_bytes, base.max_output_bytes);
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every real template renders a long conversation (400 messages of 2 KB) within its scaled budget: the
// budget never refuses what a real template does.
TEST(TemplateBudget, RealTemplatesRenderLongConversations) {
  nlohmann::json messages = nlohmann::json::array();
  messages.push_back({{"role", "system"}, {"content", "You are helpful."}});
  for (int i = 0; i < 400; ++i)
    messages.push_back({{"role", i % 2 == 0 ? "user" : "assistant"}, {"content", std::string(2000, 'a' + i % 26)}});
  int rendered = 0;
  for (const auto& e : fs::directory_iterator(fs::path(LLAMAY_SOURCE_DIR) / "src/template/testdata")) {
    if (e.path().extension() != ".jinja") continue;
    SCOPED_TRACE(e.path().filename().string());
    auto out = ApplyChatTemplate(ReadFile(e.path()), messages, true, "<s>", "</s>");
    // A template may refuse a system message (raise_exception); never for its budget.
    if (!out.ok()) {
      EXPECT_NE(out.status().detail(), static_cast<int>(TemplateErrorDetail::kLimit)) << out.status().ToString();
      continue;
    }
    EXPECT_GT(out->size(), 400u * 2000u);
    ++rendered;
  }
  EXPECT_GE(rendered, 25);
}

}  // namespace
}  // namespace llamay::chat
