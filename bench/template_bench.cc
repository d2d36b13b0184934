// Chat template render cost (issue 13, item 5): hostile templates against the render budget, and real
// templates of src/template/testdata for scale. docs/benchmarks.md, "Chat template render budget".
#include <benchmark/benchmark.h>

#include <fstream>
#include <sstream>
#include <string>

#include "template/chat_template.h"

namespace {

using llamay::chat::ChatTemplate;
using llamay::chat::RenderMessages;

const char* const kHostile[] = {
    "{% for i in range(10000) %}{% for j in range(10000) %}{% for k in range(10000) %}{% endfor %}{% endfor %}"
    "{% endfor %}",
    "{% for i in range(1000) %}{% set x = 'a' * 30000000 %}{% endfor %}",
    "{% set ns = namespace(s='x') %}{% for i in range(100000) %}{% set ns.s = ns.s ~ "
    "'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' %}{% endfor %}",
    "{% for i in range(1000) %}{{ ('x' * 1000000)|length }}{% endfor %}",
    "{% for i in range(3000) %}{{ ('ab' * 1000000).replace('a', 'cc')|length }}{% endfor %}",
    "{% macro f(n) %}{{ f(n + 1) }}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
};

const nlohmann::json& Messages(int n) {
  static nlohmann::json m[2];
  nlohmann::json& out = m[n == 2 ? 0 : 1];
  if (out.is_null()) {
    out = nlohmann::json::array();
    for (int i = 0; i < n; ++i) out.push_back({{"role", i % 2 == 0 ? "user" : "assistant"}, {"content", "Hello there."}});
  }
  return out;
}

// Arg: the index in kHostile. Every render fails with ResourceExhausted (the budget).
void BM_HostileTemplate(benchmark::State& state) {
  auto tmpl = ChatTemplate::Parse(kHostile[state.range(0)]);
  for (auto _ : state) {
    auto out = RenderMessages(*tmpl, Messages(2), true, "<s>", "</s>");
    if (out.ok()) state.SkipWithError("a hostile template rendered");
  }
}
BENCHMARK(BM_HostileTemplate)->DenseRange(0, 5)->Unit(benchmark::kMillisecond);

// A real template (qwen3, the costliest in testdata) on 2 and 200 messages.
void BM_RealTemplate(benchmark::State& state) {
  std::ifstream in(std::string(LLAMAY_SOURCE_DIR) + "/src/template/testdata/qwen3.jinja");
  std::stringstream ss;
  ss << in.rdbuf();
  auto tmpl = ChatTemplate::Parse(ss.str());
  const nlohmann::json& messages = Messages(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    auto out = RenderMessages(*tmpl, messages, true, "<s>", "</s>");
    if (!out.ok()) state.SkipWithError(out.status().ToString().c_str());
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_RealTemplate)->Arg(2)->Arg(200)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
