// Parity with the reference engine (llama.cpp) on its own test data, read from the shared reference folder:
// - every vocabulary in ref/vocab/ with a .gguf, a supported model and llama.cpp's test cases (X.gguf.inp /
//   X.gguf.out, the format of its test-tokenizer-0: no BOS/EOS, special tokens not parsed, inputs split on
//   "\n__ggml_vocab_test__\n" exactly, so an input keeps any newline of its own);
// - the prompts of ref/llama.cpp/*.json (BOS added) with the models in ref/models/, and the greedy
//   continuations streamed back to text.
// Each suite prints "cases passed / total" per vocabulary. Skipped when the shared folder is absent.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace llamay::tokenizer {
namespace {

namespace fs = std::filesystem;

fs::path SharedDir() { return fs::path(LLAMAY_SHARED_DIR); }

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct TestCase {
  std::string input;
  std::vector<int32_t> expected;
};

// llama.cpp's reading of X.inp / X.out.
std::vector<TestCase> ReadCases(const fs::path& inp, const fs::path& out) {
  const std::string raw = ReadFile(inp);
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  for (size_t pos = 0; pos < raw.size();) {
    const size_t next = raw.find(sep, pos);
    if (next == std::string::npos) {
      inputs.push_back(raw.substr(pos));
      break;
    }
    inputs.push_back(raw.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::vector<TestCase> cases;
  std::istringstream lines(ReadFile(out));
  std::string line;
  for (size_t i = 0; std::getline(lines, line); ++i) {
    if (i >= inputs.size()) return {};  // mismatched files: the caller fails on the count
    TestCase c{inputs[i], {}};
    std::istringstream ids(line);
    for (int32_t id; ids >> id;) c.expected.push_back(id);
    cases.push_back(std::move(c));
  }
  return cases.size() == inputs.size() ? cases : std::vector<TestCase>{};
}

std::string Show(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

// Whether llama.cpp's own decode gives the input back: BPE vocabularies with space clean-up rewrite " ,",
// " .", " ?", " !" and " '" sequences.
bool RoundTripHolds(const Tokenizer& tok, const std::string& input) {
  if (!tok.vocab().clean_spaces) return true;
  for (const char* s : {" ,", " .", " ?", " !", " '"}) {
    if (input.find(s) != std::string::npos) return false;
  }
  return true;
}

class VocabParityTest : public ::testing::TestWithParam<const char*> {};

TEST_P(VocabParityTest, MatchesReferenceTokens) {
  const fs::path gguf_path =
      SharedDir() / "ref" / "vocab" / (std::string("ggml-vocab-") + GetParam() + ".gguf");
  if (!fs::exists(gguf_path)) GTEST_SKIP() << "reference data absent: " << gguf_path;
  auto file = gguf::File::Open(gguf_path.string());
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto tok = Tokenizer::FromGguf(*file);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  (*tok)->vocab().CheckInvariants();

  const fs::path inp = gguf_path.string() + ".inp";
  if (!fs::exists(inp)) {
    std::cout << "[ vocab ] " << GetParam() << ": loads; no reference cases shipped\n";
    return;
  }
  const std::vector<TestCase> cases = ReadCases(inp, gguf_path.string() + ".out");
  ASSERT_FALSE(cases.empty()) << "no cases read (or .inp/.out counts differ) for " << GetParam();
  int passed = 0, round_trips = 0, round_trip_cases = 0;
  for (const TestCase& c : cases) {
    auto ids = (*tok)->Encode(c.input, /*add_special=*/false, /*parse_special=*/false);
    ASSERT_TRUE(ids.ok()) << ids.status().ToString();
    EXPECT_EQ(*ids, c.expected) << GetParam() << " input '" << c.input << "'\n  got:      " << Show(*ids)
                                << "\n  expected: " << Show(c.expected);
    passed += *ids == c.expected;
    if (RoundTripHolds(**tok, c.input)) {
      ++round_trip_cases;
      const std::string text = (*tok)->Decode(*ids);
      EXPECT_EQ(text, c.input) << GetParam() << ": Decode(Encode(x)) != x";
      round_trips += text == c.input;
    }
  }
  std::cout << "[ vocab ] " << GetParam() << ": " << passed << "/" << cases.size()
            << " cases passed, round trip " << round_trips << "/" << round_trip_cases << "\n";
}

INSTANTIATE_TEST_SUITE_P(Vocabs, VocabParityTest,
                         ::testing::Values("llama-spm", "phi-3", "baichuan", "gpt-2", "gpt-neox", "falcon",
                                           "mpt", "starcoder", "refact", "deepseek-coder", "deepseek-llm"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return name;
                         });

TEST(VocabParityTest, WordPieceIsRefusedByName) {
  const fs::path path = SharedDir() / "ref" / "vocab" / "ggml-vocab-bert-bge.gguf";
  if (!fs::exists(path)) GTEST_SKIP() << "reference data absent: " << path;
  auto file = gguf::File::Open(path.string());
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto tok = Tokenizer::FromGguf(*file);
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(tok.status().message().find("'bert'"), std::string::npos) << tok.status().message();
}

// The hex form llama.cpp's reference uses for text that is not valid UTF-8.
std::string FromHex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

class ModelParityTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ModelParityTest, PromptTokensAndGreedyText) {
  const fs::path json_path = SharedDir() / "ref" / "llama.cpp" / (std::string(GetParam()) + ".json");
  if (!fs::exists(json_path)) GTEST_SKIP() << "reference data absent: " << json_path;
  const nlohmann::json ref = nlohmann::json::parse(ReadFile(json_path));
  const fs::path model = SharedDir() / "ref" / "models" / ref.at("model").get<std::string>();
  auto file = gguf::File::Open(model.string());
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto tok = Tokenizer::FromGguf(*file);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ((*tok)->n_vocab(), ref.at("n_vocab").get<int32_t>());
  int passed = 0, total = 0;
  for (const auto& c : ref.at("cases")) {
    ++total;
    const std::string prompt = c.at("prompt").get<std::string>();
    const auto expected = c.at("tokens").get<std::vector<int32_t>>();
    auto ids = (*tok)->Encode(prompt, /*add_special=*/true, /*parse_special=*/false);
    ASSERT_TRUE(ids.ok()) << ids.status().ToString();
    EXPECT_EQ(*ids, expected) << GetParam() << " prompt '" << prompt << "'";
    passed += *ids == expected;
    // The greedy continuation, detokenised one token at a time, gives the reference's text byte for byte.
    StreamingDetokenizer stream(**tok);
    std::string text;
    for (int32_t id : c.at("greedy").get<std::vector<int32_t>>()) text += stream.Push(id);
    text += stream.Flush();
    const std::string want = c.contains("greedy_text_hex")
                                 ? FromHex(c.at("greedy_text_hex").get<std::string>())
                                 : c.at("greedy_text").get<std::string>();
    EXPECT_EQ(text, want) << GetParam() << ": greedy text of prompt '" << prompt << "'";
  }
  std::cout << "[ model ] " << GetParam() << ": " << passed << "/" << total
            << " prompts tokenised identically\n";
}

// stories260K and tiny-llama are the required ones; the other tiny models share their vocabulary, and their
// random-weight continuations exercise byte tokens and <unk> in the streamed text.
INSTANTIATE_TEST_SUITE_P(Models, ModelParityTest,
                         ::testing::Values("stories260K", "tiny-llama-f32", "tiny-llama-f16",
                                           "tiny-llama-q8_0", "tiny-llama-q4_0", "tiny-qwen2-f32",
                                           "tiny-qwen3-f32", "tiny-qwen35-f32", "tiny-gemma3-f32",
                                           "tiny-mamba2-f32", "tiny-granitehybrid-f32"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return name;
                         });

}  // namespace
}  // namespace llamay::tokenizer
