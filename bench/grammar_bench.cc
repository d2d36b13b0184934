// Constrained decoding cost (docs/grammar.md, "Cost"): the per-step token mask against vocabulary size at
// typical JSON states, plus the one-off costs (vocabulary trie, schema compilation), and what a request's
// grammar costs to build (issue 23; docs/benchmarks.md, "Grammar builds"): a 2,000-tool request (refused),
// 400 tools (too large: the costliest relaxed), a 100,000-value string enum, and a typical agent tool list
// built, then found in the cache on the next turn.
//
//   build/release/bench/grammar_bench --benchmark_filter=Mask
//   build/release/bench/grammar_bench --benchmark_filter='Build|Cache' --benchmark_repetitions=5
//
// Vocabularies are synthetic (grammar/synthetic_vocab.h): every byte, JSON punctuation and merges, numbers,
// English subwords, UTF-8 fragments, then random-ish tokens. The mask target is 10% of a 160M model's
// decode step (~8-10 ms here), i.e. under 0.8 ms for 32k tokens.
#include <benchmark/benchmark.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "grammar/grammar_cache.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/synthetic_vocab.h"
#include "toolcall/toolcall.h"

namespace {

using llamay::grammar::AnyJson;
using llamay::grammar::FromJsonSchemaText;
using llamay::grammar::Grammar;
using llamay::grammar::Matcher;
using llamay::grammar::SyntheticVocabulary;
using llamay::grammar::TokenMask;
using llamay::grammar::Vocabulary;

constexpr const char* kSchema = R"({"type":"object","properties":{
  "name":{"type":"string","minLength":1,"maxLength":200},"age":{"type":"integer","minimum":0,"maximum":150},
  "email":{"type":"string","format":"email"},"tags":{"type":"array","items":{"type":"string"}},
  "address":{"type":"object","properties":{"city":{"type":"string"},"zip":{"type":"string","pattern":"^[0-9]{5}$"}},
             "required":["city"],"additionalProperties":false}},
  "required":["name","age","tags"],"additionalProperties":false})";

std::shared_ptr<const Vocabulary> Vocab(int32_t size) {
  static std::map<int32_t, std::shared_ptr<const Vocabulary>> cache;
  auto& v = cache[size];
  if (!v) v = SyntheticVocabulary(size);
  return v;
}

std::shared_ptr<const Grammar> Schema() {
  static const std::shared_ptr<const Grammar> g = *FromJsonSchemaText(kSchema);
  return g;
}

struct State {
  const char* name;
  bool schema;         // the schema above, else any JSON value
  const char* prefix;  // the bytes generated so far
};

const State kStates[] = {
    {"json_object_start", false, "{"},              // a key, '}' or whitespace
    {"json_value_start", false, "{\"a\": ["},       // any value
    {"json_in_string", false, "{\"a\": \"Jo"},      // almost every token
    {"json_in_number", false, "{\"a\": 12"},        // digits, '.', 'e', ',' or '}'
    {"schema_object_start", true, "{"},             // only "name"
    {"schema_in_string", true, "{\"name\": \"Jo"},  // a string with maxLength 200
    {"schema_in_number", true, "{\"name\": \"Jo\", \"age\": 1"},
    {"schema_after_value", true, "{\"name\": \"Jo\", \"age\": 12, \"tags\": []"},
};

void BM_Mask(benchmark::State& bench) {
  const int32_t vocab_size = static_cast<int32_t>(bench.range(0));
  const State& s = kStates[bench.range(1)];
  const bool cache = bench.range(2) != 0;
  Matcher m(s.schema ? Schema() : AnyJson(), Vocab(vocab_size));
  m.set_mask_cache(cache);
  if (!m.AcceptBytes(s.prefix).ok()) {
    bench.SkipWithError("prefix rejected");
    return;
  }
  TokenMask mask;
  for (auto _ : bench) {
    m.FillMask(&mask);
    benchmark::DoNotOptimize(mask.words().data());
  }
  bench.SetLabel(std::string(s.name) + (cache ? "" : " (full walk)"));
  bench.counters["allowed"] = mask.Count();
  bench.counters["tokens/s"] = benchmark::Counter(vocab_size, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Mask)
    ->ArgsProduct({{1024, 8192, 32768, 131072}, {0, 1, 2, 3, 4, 5, 6, 7}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);

void BM_VocabularyBuild(benchmark::State& bench) {
  const int32_t size = static_cast<int32_t>(bench.range(0));
  const auto tokens = llamay::grammar::SyntheticTokens(size);
  for (auto _ : bench) {
    auto v = Vocabulary::Build(tokens, {size - 1});
    benchmark::DoNotOptimize(v);
  }
  bench.counters["trie_nodes"] = Vocab(size)->trie().size();
}
BENCHMARK(BM_VocabularyBuild)->Arg(32768)->Arg(131072)->Unit(benchmark::kMillisecond);

void BM_CompileSchema(benchmark::State& bench) {
  for (auto _ : bench) {
    auto g = FromJsonSchemaText(kSchema);
    benchmark::DoNotOptimize(g);
  }
  bench.counters["states"] = Schema()->num_states();
}
BENCHMARK(BM_CompileSchema)->Unit(benchmark::kMillisecond);

void BM_AcceptToken(benchmark::State& bench) {
  const auto vocab = Vocab(32768);
  Matcher start(Schema(), vocab);
  (void)start.AcceptBytes("{\"name\": \"");
  const int32_t token = [&] {
    for (int32_t t = 0; t < vocab->size(); ++t) {
      if (vocab->token_bytes(t) == " the") return t;
    }
    return 0;
  }();
  for (auto _ : bench) {
    Matcher m = start;
    benchmark::DoNotOptimize(m.Accept(token).ok());
  }
}
BENCHMARK(BM_AcceptToken)->Unit(benchmark::kNanosecond);

// ---- Grammar builds (issue 23) ----------------------------------------------------------------------------

using Json = nlohmann::ordered_json;
namespace toolcall = llamay::toolcall;

// Tool i of a long generated list: five parameters (a string, a bounded integer, a string enum, an array of
// strings, a boolean), one required; each tool's property names differ, as real tools' do.
Json GeneratedTool(int i) {
  const std::string n = std::to_string(i);
  Json props = Json::object();
  props["path" + n] = {{"type", "string"}, {"description", "The file to read"}};
  props["limit" + n] = {{"type", "integer"}, {"minimum", 1}, {"maximum", 1000}};
  props["mode" + n] = {{"type", "string"}, {"enum", {"read", "write", "append"}}};
  props["tags" + n] = {{"type", "array"}, {"items", {{"type", "string"}}}};
  props["recursive" + n] = {{"type", "boolean"}};
  return {{"type", "function"},
          {"function", {{"name", "tool_" + n}, {"description", "Does things."},
                        {"parameters", {{"type", "object"}, {"properties", props}, {"required", {"path" + n}},
                                        {"additionalProperties", false}}}}}};
}

std::vector<toolcall::ToolSpec> GeneratedTools(int n) {
  Json tools = Json::array();
  for (int i = 0; i < n; ++i) tools.push_back(GeneratedTool(i));
  return *toolcall::ParseTools(tools);
}

// An agent's tool list shaped like Claude Code's: files, shell, search, edits, a todo list, the web.
const std::vector<toolcall::ToolSpec>& TypicalTools() {
  static const std::vector<toolcall::ToolSpec> kTools = *toolcall::ParseTools(Json::parse(R"([
    {"type": "function", "function": {"name": "Read", "parameters": {"type": "object", "properties": {
      "file_path": {"type": "string"}, "offset": {"type": "integer"}, "limit": {"type": "integer"}},
      "required": ["file_path"], "additionalProperties": false}}},
    {"type": "function", "function": {"name": "Write", "parameters": {"type": "object", "properties": {
      "file_path": {"type": "string"}, "content": {"type": "string"}}, "required": ["file_path", "content"],
      "additionalProperties": false}}},
    {"type": "function", "function": {"name": "Edit", "parameters": {"type": "object", "properties": {
      "file_path": {"type": "string"}, "old_string": {"type": "string"}, "new_string": {"type": "string"},
      "replace_all": {"type": "boolean", "default": false}}, "required": ["file_path", "old_string", "new_string"],
      "additionalProperties": false}}},
    {"type": "function", "function": {"name": "MultiEdit", "parameters": {"type": "object", "properties": {
      "file_path": {"type": "string"}, "edits": {"type": "array", "minItems": 1, "items": {"type": "object",
      "properties": {"old_string": {"type": "string"}, "new_string": {"type": "string"},
      "replace_all": {"type": "boolean"}}, "required": ["old_string", "new_string"], "additionalProperties": false}}},
      "required": ["file_path", "edits"], "additionalProperties": false}}},
    {"type": "function", "function": {"name": "Bash", "parameters": {"type": "object", "properties": {
      "command": {"type": "string"}, "timeout": {"type": "number"}, "description": {"type": "string"},
      "run_in_background": {"type": "boolean"}}, "required": ["command"], "additionalProperties": false}}},
    {"type": "function", "function": {"name": "Glob", "parameters": {"type": "object", "properties": {
      "pattern": {"type": "string"}, "path": {"type": "string"}}, "required": ["pattern"],
      "additionalProperties": false}}},
    {"type": "function", "function": {"name": "Grep", "parameters": {"type": "object", "properties": {
      "pattern": {"type": "string"}, "path": {"type": "string"}, "glob": {"type": "string"},
      "output_mode": {"type": "string", "enum": ["content", "files_with_matches", "count"]},
      "-i": {"type": "boolean"}, "-n": {"type": "boolean"}, "-A": {"type": "number"}, "-B": {"type": "number"},
      "head_limit": {"type": "number"}, "multiline": {"type": "boolean"}}, "required": ["pattern"],
      "additionalProperties": false}}},
    {"type": "function", "function": {"name": "LS", "parameters": {"type": "object", "properties": {
      "path": {"type": "string"}, "ignore": {"type": "array", "items": {"type": "string"}}}, "required": ["path"],
      "additionalProperties": false}}},
    {"type": "function", "function": {"name": "TodoWrite", "parameters": {"type": "object", "properties": {
      "todos": {"type": "array", "items": {"type": "object", "properties": {
      "content": {"type": "string", "minLength": 1},
      "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
      "id": {"type": "string"}}, "required": ["content", "status", "id"], "additionalProperties": false}}},
      "required": ["todos"], "additionalProperties": false}}},
    {"type": "function", "function": {"name": "WebFetch", "parameters": {"type": "object", "properties": {
      "url": {"type": "string"}, "prompt": {"type": "string"}}, "required": ["url", "prompt"],
      "additionalProperties": false}}},
    {"type": "function", "function": {"name": "WebSearch", "parameters": {"type": "object", "properties": {
      "query": {"type": "string", "minLength": 2}, "allowed_domains": {"type": "array", "items": {"type": "string"}},
      "blocked_domains": {"type": "array", "items": {"type": "string"}}}, "required": ["query"],
      "additionalProperties": false}}},
    {"type": "function", "function": {"name": "Task", "parameters": {"type": "object", "properties": {
      "description": {"type": "string"}, "prompt": {"type": "string"}, "subagent_type": {"type": "string"}},
      "required": ["description", "prompt", "subagent_type"], "additionalProperties": false}}}
  ])"));
  return kTools;
}

// A JSON Schema whose one property is a string enum of 100,000 values: product codes (long shared
// prefixes) or random lowercase words (5 to 12 letters; little to share, beyond the automaton's limits).
Json EnumSchema(bool words) {
  std::mt19937 rng(1);
  Json values = Json::array();
  for (int i = 0; i < 100000; ++i) {
    if (!words) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "SKU-%06d", i * 7 % 1000000);
      values.push_back(buf);
    } else {
      std::string w;
      const int len = 5 + static_cast<int>(rng() % 8);
      for (int j = 0; j < len; ++j) w += static_cast<char>('a' + rng() % 26);
      values.push_back(w);
    }
  }
  return {{"type", "object"},
          {"properties", {{"code", {{"type", "string"}, {"enum", values}}}}},
          {"required", {"code"}},
          {"additionalProperties", false}};
}

const toolcall::ToolChoice kAuto{toolcall::ToolChoice::Mode::kAuto, ""};

// A tool list's first build, as a server does it (ToolCallGrammar: refused, or relaxed until it builds).
// Arg: the number of generated tools. Label: what came out.
void BM_BuildToolList(benchmark::State& bench) {
  const auto tools = GeneratedTools(static_cast<int>(bench.range(0)));
  std::string outcome;
  for (auto _ : bench) {
    std::vector<std::string> relaxed;
    auto g = toolcall::ToolCallGrammar(toolcall::ToolFormat::kHermes, tools, kAuto, true, nullptr, &relaxed);
    outcome = g.ok() ? std::to_string((*g)->num_states()) + " states, " + std::to_string(relaxed.size()) +
                           " tools relaxed"
                     : g.status().message().substr(0, 60);
    benchmark::DoNotOptimize(g);
  }
  bench.SetLabel(outcome);
}
BENCHMARK(BM_BuildToolList)->Arg(2000)->Arg(400)->Iterations(1)->Unit(benchmark::kMillisecond);

// The 100,000-value enum: schema to grammar. Arg 0: product codes (builds), 1: random words (refused).
void BM_BuildEnum100k(benchmark::State& bench) {
  const Json schema = EnumSchema(bench.range(0) != 0);
  std::string outcome;
  for (auto _ : bench) {
    auto g = llamay::grammar::FromJsonSchema(schema);
    outcome = g.ok() ? std::to_string((*g)->num_states()) + " states" : g.status().message().substr(0, 60);
    benchmark::DoNotOptimize(g);
  }
  bench.SetLabel(std::string(bench.range(0) ? "words: " : "codes: ") + outcome);
}
BENCHMARK(BM_BuildEnum100k)->Arg(0)->Arg(1)->Iterations(1)->Unit(benchmark::kMillisecond);

// The typical tool list built from scratch (what every turn cost before the cache).
void BM_BuildTypicalToolList(benchmark::State& bench) {
  for (auto _ : bench) {
    auto g = toolcall::ToolCallGrammar(toolcall::ToolFormat::kHermes, TypicalTools(), kAuto, true);
    if (!g.ok()) bench.SkipWithError(g.status().ToString().c_str());
    benchmark::DoNotOptimize(g);
  }
}
BENCHMARK(BM_BuildTypicalToolList)->Unit(benchmark::kMillisecond);

// The next turn: the same tool list found in a GrammarCache, key included (what the server does per request).
void BM_CacheHitTypicalToolList(benchmark::State& bench) {
  llamay::grammar::GrammarCache cache(64, size_t{256} << 20);
  auto build = [] { return toolcall::ToolCallGrammar(toolcall::ToolFormat::kHermes, TypicalTools(), kAuto, true); };
  (void)cache.GetOrBuild(toolcall::ToolCallGrammarKey(toolcall::ToolFormat::kHermes, TypicalTools(), kAuto, true),
                         build);
  for (auto _ : bench) {
    const std::string key =
        toolcall::ToolCallGrammarKey(toolcall::ToolFormat::kHermes, TypicalTools(), kAuto, true);
    auto g = cache.GetOrBuild(key, build);
    benchmark::DoNotOptimize(g);
  }
  if (cache.stats().misses != 1) bench.SkipWithError("the cache built again");
}
BENCHMARK(BM_CacheHitTypicalToolList)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
