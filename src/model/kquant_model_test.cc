// Q3_K and Q2_K end to end: a small synthetic llama model whose matrices (and token embeddings) are Q3_K or
// Q2_K, against llama.cpp's next-token distributions on the same bytes (testdata/kquant_ref_*.json, written
// by testdata/make_kquant_ref.py). The embedding rows go through the dequantiser, every matrix through the
// dot products against Q8_K activations, so a wrong bit position, scale unpacking or min term moves the
// log-probabilities by far more than the tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kv/cache.h"
#include "model/model.h"
#include "model/model_test_util.h"
#include "model/synthetic_model.h"

namespace llamay::model {
namespace {

using test_util::Fnv1a;
using test_util::NewCache;
using test_util::Steps;

// `llamay model synth` with the flags of testdata/make_kquant_ref.py: llama, vocab 512, dim 256, 2 layers,
// 4 / 2 heads, ffn 512.
SyntheticSpec TinyKQuantSpec(TensorType type) {
  SyntheticSpec s = PeerShape(type);
  s.name = "tiny-" + std::string(TensorTypeName(type));
  s.n_vocab = 512;
  s.n_embd = 256;
  s.n_layer = 2;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.n_ff = 512;
  return s;
}

// log-softmax in double: what llama.cpp's top_logprobs are.
std::vector<double> LogProbs(const float* logits, size_t n) {
  const double mx = *std::max_element(logits, logits + n);
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  const double lse = mx + std::log(sum);
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = logits[i] - lse;
  return out;
}

class KQuantParity : public testing::TestWithParam<TensorType> {};

// As MoeParity: three prompts (6, 40 and 100 tokens), four continuation steps, llama.cpp's top 16 tokens and
// its most probable one. The two compute the same exact integer sums but round the f32 work around them
// differently (llama.cpp: fused multiply-adds, eight lane sums), so an activation now and then lands one
// Q8_K step apart, and this small model is sensitive to that: scaling every Q8_K scale by 1 + 3e-6 moves
// its log-probabilities by 0.1 at almost every step. Measured against llama.cpp's avx2 build: two of the
// three prompts within 2.2e-6 at every step for each type (as Q4_K and Q6_K, all three, on the same shape);
// the third from one step on (Q3_K: prompt 100, step 1; Q2_K: prompt 40, step 0, where llama.cpp's own avx2
// and avx512 builds differ by as much, and llamay matches the avx512 one within 1.7e-6) by up to 0.11; with
// only the f32 steps of llamay's Q3_K dots put in ggml's order (eight lanes of fused multiply-adds), prompt
// 40 moves by 0.08 too. So:
// every step within kLoose and the same most probable token, and at least two prompts within kTight at
// every step. A wrong bit position, scale or min moves every prompt by far more.
TEST_P(KQuantParity, MatchesLlamaCpp) {
  constexpr double kTight = 1e-4, kLoose = 0.3;
  const std::string name(TensorTypeName(GetParam()));
  std::ifstream in(std::string(LLAMAY_SOURCE_DIR) + "/src/model/testdata/kquant_ref_" + name + ".json");
  ASSERT_TRUE(in.good());
  const nlohmann::json ref = nlohmann::json::parse(in);
  auto bytes = BuildSyntheticModel(TinyKQuantSpec(GetParam()));
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  char fnv[17];
  std::snprintf(fnv, sizeof fnv, "%016llx", static_cast<unsigned long long>(Fnv1a(*bytes)));
  ASSERT_EQ(std::string(fnv), ref["model_fnv1a"].get<std::string>())
      << "the synthetic model's bytes changed: run src/model/testdata/make_kquant_ref.py";
  auto f = gguf::File::FromBuffer(std::move(*bytes));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(f->FindTensor("blk.0.ffn_down.weight")->type, GetParam());
  ASSERT_EQ(f->FindTensor("token_embd.weight")->type, GetParam());
  auto m = Model::FromFile(std::move(*f));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const size_t V = (*m)->hparams().n_vocab;
  int tight_prompts = 0;
  for (const auto& c : ref["cases"]) {
    auto cache = NewCache(**m, 64);
    kv::Context ctx = cache->NewContext();
    std::vector<int32_t> tokens = c["prompt"].get<std::vector<int32_t>>();
    const auto next = c["continuation"].get<std::vector<int32_t>>();
    std::vector<float> logits = Steps(**m, ctx, tokens, false);
    double worst = 0;
    for (size_t step = 0; step < c["top_logprobs"].size(); ++step) {
      ASSERT_EQ(logits.size(), V);
      const std::vector<double> lp = LogProbs(logits.data(), V);
      const auto& top = c["top_logprobs"][step];
      EXPECT_EQ(std::max_element(lp.begin(), lp.end()) - lp.begin(), top[0][0].get<int>())
          << "prompt of " << c["prompt"].size() << ", step " << step;
      for (const auto& t : top) {
        const double d = std::abs(lp[t[0].get<size_t>()] - t[1].get<double>());
        worst = std::max(worst, d);
        EXPECT_LT(d, kLoose) << "token " << t[0] << ", prompt of " << c["prompt"].size() << ", step " << step;
      }
      if (step < next.size()) logits = Steps(**m, ctx, std::span(&next[step], 1), false);
    }
    tight_prompts += worst < kTight;
    std::printf("%s, prompt of %zu: max |logprob - llama.cpp| = %.2e\n", name.c_str(), c["prompt"].size(),
                worst);
  }
  EXPECT_GE(tight_prompts, 2);
}

INSTANTIATE_TEST_SUITE_P(Type, KQuantParity, testing::Values(TensorType::kQ3_K, TensorType::kQ2_K),
                         [](const auto& info) { return std::string(TensorTypeName(info.param)); });

}  // namespace
}  // namespace llamay::model
