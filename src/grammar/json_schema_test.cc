// JSON Schema tests: the corpus in testdata/schemas (valid instances accepted byte by byte and token by
// token, invalid ones rejected or left incomplete), unsupported keywords named with their pointer, integer
// ranges checked exhaustively, and patterns checked against std::regex.
#include "grammar/json_schema.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "grammar/json_schema_internal.h"
#include "grammar/synthetic_vocab.h"
#include "grammar/test_util.h"

namespace llamay::grammar {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
using testing::Feed;
using testing::Outcome;

const fs::path kTestdata = fs::path(LLAMAY_SOURCE_DIR) / "src/grammar/testdata";

Json ReadJson(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  Json j = Json::parse(text.str(), nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << path;
  return j;
}

std::vector<fs::path> CorpusFiles() {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(kTestdata / "schemas")) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

// Greedy longest-match tokenization over a vocabulary (no end tokens, no empty tokens).
std::vector<int32_t> Tokenize(const Vocabulary& vocab, std::string_view text) {
  const TokenTrie& trie = vocab.trie();
  std::vector<int32_t> out;
  size_t pos = 0;
  while (pos < text.size()) {
    int32_t node = 0, best = -1;
    size_t best_len = 0;
    for (size_t len = 1; pos + len <= text.size(); ++len) {
      // Find the child of `node` with the next byte (children are contiguous in preorder).
      int32_t child = -1;
      for (int32_t c = node + 1; c < trie.subtree_end[node]; c = trie.subtree_end[c]) {
        if (trie.byte[c] == static_cast<uint8_t>(text[pos + len - 1])) {
          child = c;
          break;
        }
      }
      if (child < 0) break;
      node = child;
      if (trie.token_begin[node] < trie.token_begin[node + 1]) {
        best = trie.tokens[trie.token_begin[node]];
        best_len = len;
      }
    }
    EXPECT_GE(best, 0);
    if (best < 0) return out;
    out.push_back(best);
    pos += best_len;
  }
  return out;
}

TEST(JsonSchema, Corpus) {
  const auto vocab = SyntheticVocabulary(4096);
  int cases = 0;
  for (const fs::path& file : CorpusFiles()) {
    SCOPED_TRACE(file.filename().string());
    const Json c = ReadJson(file);
    auto g = FromJsonSchema(c["schema"]);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    std::vector<std::string> accept, reject;
    for (const Json& v : c.value("valid", Json::array())) {
      accept.push_back(v.dump());
      if (!c.value("compact_only", false)) {
        accept.push_back(v.dump(2));
        accept.push_back(v.dump(1, '\t'));
      }
    }
    for (const Json& t : c.value("valid_text", Json::array())) accept.push_back(t.get<std::string>());
    for (const char* key : {"invalid", "stricter"}) {
      for (const Json& v : c.value(key, Json::array())) reject.push_back(v.dump());
    }
    for (const Json& t : c.value("invalid_text", Json::array())) reject.push_back(t.get<std::string>());
    for (const std::string& text : accept) {
      EXPECT_EQ(Feed(*g, text), Outcome::kComplete) << text << "\n" << (*g)->gbnf();
      // Token by token over a realistic vocabulary: every token must be in the mask when it comes.
      Matcher m(*g, vocab);
      TokenMask mask;
      for (int32_t t : Tokenize(*vocab, text)) {
        m.FillMask(&mask);
        ASSERT_TRUE(mask.allowed(t)) << text << ": token '" << vocab->token_bytes(t) << "'";
        ASSERT_TRUE(m.Accept(t).ok());
      }
      m.FillMask(&mask);
      EXPECT_TRUE(mask.allowed(vocab->size() - 1)) << text << ": end token not allowed at the end";
      ++cases;
    }
    for (const std::string& text : reject) {
      EXPECT_NE(Feed(*g, text), Outcome::kComplete) << text << "\n" << (*g)->gbnf();
      ++cases;
    }
  }
  EXPECT_GT(cases, 150);
}

TEST(JsonSchema, UnsupportedKeywordsAreNamed) {
  const Json cases = ReadJson(kTestdata / "unsupported.json");
  ASSERT_GT(cases.size(), 20u);
  for (const Json& c : cases) {
    auto g = FromJsonSchema(c["schema"]);
    ASSERT_FALSE(g.ok()) << c["schema"].dump();
    EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(g.status().message(), c["error"].get<std::string>()) << c["schema"].dump();
  }
}

// A maximum beyond what a GBNF repetition takes is no maximum (looser, never stricter); a minimum beyond
// it is still refused.
TEST(JsonSchema, MaximaBeyondTheRepetitionLimitAreUnbounded) {
  auto s = FromJsonSchemaText(R"({"type":"string","maxLength":524288})");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE(testing::Matches(*s, R"("abc")"));
  EXPECT_FALSE(testing::Matches(*s, "abc"));
  auto a = FromJsonSchemaText(R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":600000})");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(testing::Matches(*a, "[1,2,3]"));
  EXPECT_FALSE(testing::Matches(*a, "[]"));
  auto bounded = FromJsonSchemaText(R"({"type":"string","maxLength":2})");
  ASSERT_TRUE(bounded.ok());
  EXPECT_FALSE(testing::Matches(*bounded, R"("abc")"));
  EXPECT_FALSE(FromJsonSchemaText(R"({"type":"string","minLength":200000})").ok());
}

TEST(JsonSchema, PropertyOrderFollowsTheSchema) {
  auto g = FromJsonSchemaText(
      R"({"type":"object","properties":{"zeta":{"type":"integer"},"alpha":{"type":"integer"}},
                                  "required":["alpha","zeta"]})");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_TRUE(testing::Matches(*g, R"({"zeta":1,"alpha":2})"));
  EXPECT_FALSE(testing::Matches(*g, R"({"alpha":2,"zeta":1})"));
  EXPECT_FALSE(FromJsonSchemaText("{not json").ok());
}

TEST(JsonSchema, BuiltInJson) {
  auto any = AnyJson();
  for (const char* ok :
       {"0", "-0.5e-7", "\"\"", "[]", "{}", "[1,[2,{\"a\":null}]]", "true", "\"\\u20AC\\/\""}) {
    EXPECT_TRUE(testing::Matches(any, ok)) << ok;
  }
  for (const char* bad : {"", "01", "[1,]", "{\"a\"}", "\"\\x\"", "nul", "'a'", "\"\x1f\"", "1.5e+123"}) {
    EXPECT_FALSE(testing::Matches(any, bad)) << bad;
  }
  auto object = AnyJsonObject();
  EXPECT_TRUE(testing::Matches(object, "{ \"a\": [ 1 ] }"));
  EXPECT_FALSE(testing::Matches(object, "[]"));
  EXPECT_FALSE(testing::Matches(object, "\"s\""));
}

// Every integer in a window: matched exactly when it lies in [lo, hi].
TEST(JsonSchema, IntegerRangesExhaustive) {
  const std::vector<std::pair<int64_t, int64_t>> ranges = {
      {0, 0},     {0, 9},    {1, 10},      {-5, 5},      {-1000, -7}, {7, 1000},
      {10, 99},   {19, 91},  {123, 987},   {-123, 4567}, {-1, 0},     {99, 100},
      {100, 199}, {0, 1000}, {-999, -100}, {5, 5005},    {901, 1099}, {-1200, 1200}};
  for (auto [lo, hi] : ranges) {
    auto g = testing::MustParse("root ::= " + internal::IntRangeGbnf(lo, hi));
    ASSERT_NE(g, nullptr);
    for (int64_t n = -1300; n <= 1300; ++n) {
      ASSERT_EQ(testing::Matches(g, std::to_string(n)), n >= lo && n <= hi)
          << n << " in [" << lo << ", " << hi << "]";
    }
    EXPECT_FALSE(testing::Matches(g, "-0"));
    EXPECT_FALSE(testing::Matches(g, "00"));
  }
  auto wide = testing::MustParse("root ::= " + internal::IntRangeGbnf(-internal::kMaxInt, internal::kMaxInt));
  EXPECT_TRUE(testing::Matches(wide, "9999999999999999"));
  EXPECT_TRUE(testing::Matches(wide, "-9999999999999999"));
  EXPECT_FALSE(testing::Matches(wide, "10000000000000000"));
  auto huge = FromJsonSchemaText(R"({"type":"integer","minimum":-1e300,"maximum":1e300})");
  ASSERT_TRUE(huge.ok()) << huge.status().ToString();
  EXPECT_TRUE(testing::Matches(*huge, "-9999999999999999"));
  EXPECT_FALSE(testing::Matches(*huge, "10000000000000000"));
  auto big = testing::MustParse("root ::= " + internal::IntRangeGbnf(987654321, 12345678901));
  EXPECT_TRUE(testing::Matches(big, "987654321"));
  EXPECT_TRUE(testing::Matches(big, "12345678901"));
  EXPECT_TRUE(testing::Matches(big, "5000000000"));
  EXPECT_FALSE(testing::Matches(big, "987654320"));
  EXPECT_FALSE(testing::Matches(big, "12345678902"));
}

// Decimal numbers against float bounds: whatever the grammar accepts lies within them.
TEST(JsonSchema, NumberRangesAreSound) {
  std::mt19937 rng(7);
  const std::vector<std::string> schemas = {
      R"({"type":"number","minimum":-2.5,"maximum":3.5})", R"({"type":"number","exclusiveMinimum":0})",
      R"({"type":"number","exclusiveMinimum":-1,"exclusiveMaximum":1})", R"({"type":"number","maximum":-3})",
      R"({"type":"number","minimum":10,"exclusiveMaximum":12})"};
  for (const std::string& text : schemas) {
    const Json schema = Json::parse(text);
    auto g = FromJsonSchema(schema);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    const double lo = schema.value("minimum", schema.value("exclusiveMinimum", -1e300));
    const double hi = schema.value("maximum", schema.value("exclusiveMaximum", 1e300));
    int matched = 0;
    for (int i = 0; i < 3000; ++i) {
      std::string s = rng() % 2 ? "-" : "";
      s += std::to_string(rng() % 15);
      if (rng() % 2) {
        s += '.';
        s += std::to_string(rng() % 100);
      }
      if (!testing::Matches(*g, s)) continue;
      ++matched;
      const double v = std::stod(s);
      EXPECT_TRUE(schema.contains("minimum") ? v >= lo : v > lo) << s << " " << text;
      EXPECT_TRUE(schema.contains("maximum") ? v <= hi : v < hi) << s << " " << text;
    }
    EXPECT_GT(matched, 50) << text;
  }
}

// Patterns against std::regex (ECMAScript) on random strings: same verdict, through JSON encoding.
TEST(JsonSchema, PatternsAgreeWithStdRegex) {
  const std::vector<std::string> patterns = {"ab+c",
                                             "^a|b$",
                                             "^(a|b)*$",
                                             "^[^a]{2}",
                                             "\\d{2,}$",
                                             "^a?b?$",
                                             "^(?:ab|a)(?:c|bc)$",
                                             "^\\w+ \\S$",
                                             "[\"\\\\]",
                                             "^\\.\\-$",
                                             "^.{2,3}$",
                                             "^[a-c\\d]+-?$",
                                             "^(a(b(c)?)?)+$",
                                             "^\\n\\t*$",
                                             "x*"};
  std::mt19937 rng(11);
  const std::string alphabet = "abc01 .-\"\\\n\tx";
  for (const std::string& pattern : patterns) {
    SCOPED_TRACE(pattern);
    auto g = FromJsonSchema(Json{{"type", "string"}, {"pattern", pattern}});
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    const std::regex re(pattern, std::regex::ECMAScript);
    for (int i = 0; i < 400; ++i) {
      std::string s;
      const int len = static_cast<int>(rng() % 6);
      for (int k = 0; k < len; ++k) s += alphabet[rng() % alphabet.size()];
      const std::string encoded = Json(s).dump();
      ASSERT_EQ(testing::Matches(*g, encoded), std::regex_search(s, re)) << encoded;
    }
  }
}

TEST(JsonSchema, GeneratedGbnfIsReadable) {
  auto gbnf = JsonSchemaToGbnf(Json::parse(R"({"type":"object","properties":{"a b":{"type":"string"}},
                                                "required":["a b"],"additionalProperties":false})"));
  ASSERT_TRUE(gbnf.ok());
  EXPECT_NE(gbnf->find("root ::= "), std::string::npos) << *gbnf;
  EXPECT_NE(gbnf->find(R"("\"a b\":")"), std::string::npos) << *gbnf;
}

// An enum is written as a trie (each shared prefix once) and matches exactly its values: not a prefix of a
// value that is not itself one, not a value with more after it, not two values run together.
TEST(JsonSchema, EnumTrieMatchesExactlyItsValues) {
  const Json values = Json::parse(R"(["a", "ab", "abc", "abd", "b", "prefix-one", "prefix-two", "prefix-",
      "caf\u00e9", "caf\u00e8", "\u00e9t\u00e9", "\u00e8", "q\"uote", "back\\slash", "", 1, 12, 1.5,
      null, true, {"k": [1, "v"]}, [], "a"])");
  const Json schema = {{"enum", values}};
  auto gbnf = JsonSchemaToGbnf(schema);
  ASSERT_TRUE(gbnf.ok()) << gbnf.status().ToString();
  // The shared prefix "prefix-" is written once.
  EXPECT_EQ(gbnf->find("prefix-"), gbnf->rfind("prefix-")) << *gbnf;
  auto g = FromJsonSchema(schema);
  ASSERT_TRUE(g.ok()) << g.status().ToString() << "\n" << *gbnf;
  for (const Json& v : values) EXPECT_EQ(Feed(*g, v.dump()), Outcome::kComplete) << v.dump();
  for (const char* text : {R"("ab")", R"("abc")", R"("prefix-")", R"("è")", R"("")", "12", "1.5"}) {
    EXPECT_EQ(Feed(*g, text), Outcome::kComplete) << text;
  }
  for (const char* text : {R"("abcd")", R"("a")" "x", R"("abe")", R"("prefix")", R"("prefix-o")",
                           R"("prefix-onex")", R"("caf")", R"("cafe")", R"("é")", "123", "1.", "2",
                           R"("ab""ab")", R"({"k":[1,"v"]})" "1", R"("ac")", R"("q")"}) {
    EXPECT_NE(Feed(*g, text), Outcome::kComplete) << text;
  }
  // Prefixes of values that are not values are incomplete, not complete.
  EXPECT_EQ(Feed(*g, R"("prefix-t)"), Outcome::kIncomplete);
  EXPECT_EQ(Feed(*g, R"("caf)"), Outcome::kIncomplete);
  EXPECT_EQ(Feed(*g, "\"caf\xC3"), Outcome::kIncomplete);  // inside é or è
}

// Random enums against a set: every value complete, every other string of the same alphabet not.
TEST(JsonSchema, LargeRandomEnumsMatchExactlyTheirValues) {
  // é and è share their first byte: the trie must branch on whole characters.
  const char* const kAlphabet[] = {"a", "b", "c", "\xC3\xA9", "\xC3\xA8"};
  std::mt19937 rng(7);
  for (int round = 0; round < 3; ++round) {
    std::set<std::string> set;
    Json values = Json::array();
    for (int i = 0; i < 3000; ++i) {
      std::string v;
      const int len = static_cast<int>(rng() % 7);
      for (int j = 0; j < len; ++j) v += kAlphabet[rng() % 5];
      set.insert(v);
      values.push_back(v);
    }
    auto g = FromJsonSchema({{"type", "string"}, {"enum", values}});
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    for (const std::string& v : set) EXPECT_EQ(Feed(*g, Json(v).dump()), Outcome::kComplete) << v;
    for (int i = 0; i < 3000; ++i) {
      std::string v;
      const int len = static_cast<int>(rng() % 9);
      for (int j = 0; j < len; ++j) v += kAlphabet[rng() % 5];
      if (set.count(v) == 0) {
        EXPECT_NE(Feed(*g, Json(v).dump()), Outcome::kComplete) << v;
      }
    }
  }
  // Integers: one value's text is often a prefix of another's (1, 12, 123), so the trie has values that
  // end where others go on.
  std::set<int> ints;
  Json values = Json::array();
  for (int i = 0; i < 400; ++i) {
    const int v = static_cast<int>(rng() % 2000);
    ints.insert(v);
    values.push_back(v);
  }
  auto g = FromJsonSchema({{"type", "integer"}, {"enum", values}});
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  for (int v = 0; v < 2200; ++v) {
    EXPECT_EQ(Feed(*g, std::to_string(v)) == Outcome::kComplete, ints.count(v) == 1) << v;
  }
}

// Values that extend one another nest once per value in a trie; past a depth the rest is listed whole, so
// the grammar's nesting stays bounded and the language stays the same.
TEST(JsonSchema, EnumChainsOfPrefixesStayShallow) {
  Json values = Json::array();
  for (int n = 1; n <= 300; ++n) values.push_back(std::string(n, 'a'));
  auto gbnf = JsonSchemaToGbnf({{"enum", values}});
  ASSERT_TRUE(gbnf.ok());
  int depth = 0, deepest = 0;
  for (char c : *gbnf) {
    depth += c == '(' ? 1 : c == ')' ? -1 : 0;
    deepest = std::max(deepest, depth);
  }
  EXPECT_LE(deepest, 40);
  auto g = FromJsonSchema({{"enum", values}});
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  for (int n : {1, 2, 31, 32, 33, 34, 100, 299, 300}) {
    EXPECT_EQ(Feed(*g, Json(std::string(n, 'a')).dump()), Outcome::kComplete) << n;
  }
  EXPECT_NE(Feed(*g, Json(std::string(301, 'a')).dump()), Outcome::kComplete);
  EXPECT_NE(Feed(*g, "\"\""), Outcome::kComplete);
}

// A large enum builds (its cost is measured in bench/grammar_bench.cc, not here).
TEST(JsonSchema, ManyThousandValueEnumsBuild) {
  Json values = Json::array();
  for (int i = 0; i < 20000; ++i) values.push_back(std::string("SKU-").append(std::to_string(100000 + i * 37)));
  auto g = FromJsonSchema({{"type", "string"}, {"enum", values}});
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(Feed(*g, "\"SKU-100037\""), Outcome::kComplete);
  EXPECT_NE(Feed(*g, "\"SKU-100038\""), Outcome::kComplete);
  EXPECT_EQ(Feed(*g, "\"SKU-1000"), Outcome::kIncomplete);
}

// Every corpus schema embedded in one grammar under its own prefix: each keeps exactly its own language
// (same-named $defs, formats and nested objects of different schemas must not collide).
TEST(JsonSchema, PrefixedRulesEmbedManySchemasInOneGrammar) {
  std::string gbnf, root = "root ::= (";
  std::vector<Json> cases;
  for (const fs::path& file : CorpusFiles()) cases.push_back(ReadJson(file));
  for (size_t i = 0; i < cases.size(); ++i) {
    std::string prefix = "s";
    prefix.append(std::to_string(i)).append("-");
    auto rules = JsonSchemaRulesGbnf(cases[i]["schema"], prefix);
    ASSERT_TRUE(rules.ok()) << rules.status().ToString();
    std::istringstream lines(*rules);
    for (std::string line; std::getline(lines, line);) {
      if (line.find(" ::= ") != std::string::npos) {
        EXPECT_EQ(line.rfind(prefix, 0), 0u) << line;
      }
    }
    gbnf += *rules;
    root.append(i ? " | \"" : " \"").append(std::to_string(i)).append(":\" ").append(prefix).append("root");
  }
  auto g = ParseGbnf(root + " )\n" + gbnf + JsonRulesGbnf());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  int checked = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string tag = std::to_string(i).append(":");
    for (const Json& v : cases[i].value("valid", Json::array())) {
      EXPECT_EQ(Feed(*g, tag + v.dump()), Outcome::kComplete) << tag << v.dump();
      ++checked;
    }
    for (const char* key : {"invalid", "stricter"}) {
      for (const Json& v : cases[i].value(key, Json::array())) {
        EXPECT_NE(Feed(*g, tag + v.dump()), Outcome::kComplete) << tag << v.dump();
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 100);
  EXPECT_FALSE(JsonSchemaRulesGbnf(Json::parse(R"({"type":"string"})"), "").ok());
  EXPECT_FALSE(JsonSchemaRulesGbnf(Json::parse(R"({"type":"string"})"), "a b").ok());
  EXPECT_FALSE(JsonSchemaRulesGbnf(Json::parse(R"({"not":{}})"), "p-").ok());
}

}  // namespace
}  // namespace llamay::grammar
