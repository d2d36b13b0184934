// The project's constrained-decoding property: whatever the model picks, a constrained generation ends,
// and its output parses as JSON and validates against its schema.
//
// Random models (random preferences and noise, now and then a uniformly random allowed token) generate
// over a realistic vocabulary until they pick an end token; past a length budget they steer to the end
// (the allowed token that leaves the fewest bytes to completion; single bytes always make progress). The
// outputs are parsed here with nlohmann::json; with LLAMAY_GRAMMAR_DUMP=path they are also written, with
// their schemas, for testdata/validate_ajv.mjs (ctest grammar_ajv) to validate with ajv.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>

#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/synthetic_vocab.h"

namespace llamay::grammar {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

constexpr int kSeedsPerSchema = 12;
constexpr int kFreeSteps = 40;   // tokens chosen freely before steering to the end
constexpr int kMaxSteps = 2000;  // a generation that has not ended by now is a failure

struct Model {
  std::mt19937_64 rng;
  std::vector<float> preference;  // [vocab]: this model's fixed taste
};

int32_t ChooseFree(Model& model, const TokenMask& mask, const std::vector<int32_t>& allowed) {
  if (model.rng() % 4 == 0) return allowed[model.rng() % allowed.size()];
  std::normal_distribution<float> noise(0.0f, 1.0f);
  int32_t best = allowed[0];
  float best_logit = -std::numeric_limits<float>::infinity();
  for (int32_t t : allowed) {
    const float logit = model.preference[t] + noise(model.rng);
    if (logit > best_logit) {
      best_logit = logit;
      best = t;
    }
  }
  (void)mask;
  return best;
}

// The allowed token (among the single bytes and a sample) after which the fewest bytes complete the grammar.
int32_t ChooseToEnd(Model& model, const Matcher& m, const std::vector<int32_t>& allowed) {
  const Vocabulary& vocab = m.vocabulary();
  int32_t best = -1;
  int64_t best_left = std::numeric_limits<int64_t>::max();
  for (int32_t t : allowed) {
    if (vocab.is_end_token(t)) return t;
  }
  for (size_t i = 0; i < allowed.size(); ++i) {
    const int32_t t = allowed[i];
    if (vocab.token_bytes(t).size() != 1 && model.rng() % 16 != 0) continue;
    Matcher copy = m;
    if (!copy.Accept(t).ok()) continue;
    const int64_t left = copy.MinBytesToEnd();
    if (left < best_left) {
      best_left = left;
      best = t;
    }
  }
  return best;
}

std::string Generate(const std::shared_ptr<const Grammar>& g, const std::shared_ptr<const Vocabulary>& vocab,
                     uint64_t seed) {
  Model model{std::mt19937_64(seed), std::vector<float>(vocab->size())};
  std::normal_distribution<float> taste(0.0f, 2.0f);
  for (float& p : model.preference) p = taste(model.rng);
  Matcher m(g, vocab);
  TokenMask mask;
  std::string out;
  for (int step = 0; !m.IsTerminated(); ++step) {
    if (step >= kMaxSteps) {
      ADD_FAILURE() << "no end after " << kMaxSteps << " tokens: " << out;
      return out;
    }
    m.FillMask(&mask);
    std::vector<int32_t> allowed;
    for (int32_t t = 0; t < mask.size(); ++t) {
      if (mask.allowed(t)) allowed.push_back(t);
    }
    if (allowed.empty()) {
      ADD_FAILURE() << "no token allowed after: " << out;  // the grammar must always permit finishing
      return out;
    }
    if (step % 8 == 3) {  // the mask agrees with Accept, on a sample of every token
      for (int k = 0; k < 64; ++k) {
        const int32_t t = static_cast<int32_t>(model.rng() % vocab->size());
        Matcher copy = m;
        EXPECT_EQ(mask.allowed(t), copy.Accept(t).ok())
            << "token '" << vocab->token_bytes(t) << "' after " << out;
      }
    }
    const int32_t t = step < kFreeSteps ? ChooseFree(model, mask, allowed) : ChooseToEnd(model, m, allowed);
    if (t < 0) {
      ADD_FAILURE() << "cannot steer to the end after: " << out;
      return out;
    }
    const Status s = m.Accept(t);
    if (!s.ok()) {
      ADD_FAILURE() << s.ToString();
      return out;
    }
    if (!vocab->is_end_token(t)) out += vocab->token_bytes(t);
  }
  return out;
}

TEST(GrammarProperty, RandomModelsProduceValidJson) {
  const auto vocab = SyntheticVocabulary(8192, 2);
  std::vector<std::pair<Json, std::shared_ptr<const Grammar>>> cases = {
      {Json::object(), AnyJson()}, {Json{{"type", "object"}}, AnyJsonObject()}};
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(fs::path(LLAMAY_SOURCE_DIR) / "src/grammar/testdata/schemas")) {
    files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& file : files) {
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    Json schema = Json::parse(text.str())["schema"];
    auto g = FromJsonSchema(schema);
    ASSERT_TRUE(g.ok()) << file << ": " << g.status().ToString();
    cases.emplace_back(std::move(schema), *g);
  }
  Json dump = Json::array();
  uint64_t seed = 1;
  for (const auto& [schema, grammar] : cases) {
    for (int i = 0; i < kSeedsPerSchema; ++i, ++seed) {
      const std::string out = Generate(grammar, vocab, seed);
      const Json parsed = Json::parse(out, nullptr, /*allow_exceptions=*/false);
      EXPECT_FALSE(parsed.is_discarded()) << "not JSON: " << out << "\nschema: " << schema.dump();
      dump.push_back(Json{{"schema", schema}, {"output", out}, {"seed", seed}});
    }
  }
  if (const char* path = std::getenv("LLAMAY_GRAMMAR_DUMP")) {
    std::ofstream(path) << dump.dump(1, ' ', false, Json::error_handler_t::replace);
  }
}

}  // namespace
}  // namespace llamay::grammar
