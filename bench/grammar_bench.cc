// Constrained decoding cost (docs/grammar.md, "Cost"): the per-step token mask against vocabulary size at
// typical JSON states, plus the one-off costs (vocabulary trie, schema compilation).
//
//   build/release/bench/grammar_bench --benchmark_filter=Mask
//
// Vocabularies are synthetic (grammar/synthetic_vocab.h): every byte, JSON punctuation and merges, numbers,
// English subwords, UTF-8 fragments, then random-ish tokens. The mask target is 10% of a 160M model's
// decode step (~8-10 ms here), i.e. under 0.8 ms for 32k tokens.
#include <benchmark/benchmark.h>

#include <map>
#include <string>

#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/synthetic_vocab.h"

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

}  // namespace

BENCHMARK_MAIN();
