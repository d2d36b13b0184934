// The lookup-table types (IQ4_NL, MXFP4, IQ4_XS) end to end: a small synthetic llama model whose matrices
// (and token embeddings) are of one of them, against llama.cpp's next-token distributions on the same bytes
// (testdata/iq_ref_*.json, written by testdata/make_iq_ref.py). The embedding rows go through the
// dequantiser, every matrix through the dot products (IQ4_NL and MXFP4 against Q8_0 activations, IQ4_XS
// against Q8_K), so a wrong grid, nibble order or scale convention (MXFP4's halved E8M0 exponent, IQ4_XS's
// split 6-bit scales) moves the log-probabilities by far more than the tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>

#include "kv/cache.h"
#include "model/model.h"
#include "model/model_test_util.h"
#include "model/synthetic_model.h"

namespace llamay::model {
namespace {

using test_util::Fnv1a;
using test_util::NewCache;
using test_util::Steps;

// `llamay model synth` with the flags of testdata/make_iq_ref.py: llama, vocab 512, dim 256, 2 layers,
// 4 / 2 heads, ffn 512.
SyntheticSpec TinyIqSpec(TensorType type) {
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

struct IqCase {
  TensorType type;
  int tight_prompts;  // prompts that must agree within kTight at every step
};
void PrintTo(const IqCase& c, std::ostream* os) { *os << TensorTypeName(c.type); }

class IqParity : public testing::TestWithParam<IqCase> {};

// As MoeParity: three prompts (6, 40 and 100 tokens), four continuation steps, llama.cpp's top 16 tokens and
// its most probable one. Measured against llama.cpp's avx2 build: MXFP4 and IQ4_XS within 2e-6 at every
// step of every prompt. IQ4_NL: the 6- and 100-token prompts within 1.4e-6, the 40-token one by up to 0.073
// from its first step, because llama.cpp's avx2 build repacks IQ4_NL weights (as Q4_0 and MXFP4 ones) and
// quantises their activations with its repacking kernels' Q8_0 routine (1 / d computed as 127 / amax, ties
// to even), which puts an activation now and then one Q8_0 step away from ggml's reference rule that llamay
// follows (1 / (amax / 127), ties away from zero); with that one rule swapped in, llamay matches that prompt
// within 2e-6 too (MXFP4's prompts happen to have no such activation). So: every step within kLoose and the
// same most probable token, and the case's number of prompts within kTight at every step. A wrong grid
// value, nibble or scale moves every prompt by far more (one IQ4_XS sub-block scale off by one: 0.3).
TEST_P(IqParity, MatchesLlamaCpp) {
  constexpr double kTight = 1e-4, kLoose = 0.3;
  const std::string name(TensorTypeName(GetParam().type));
  std::ifstream in(std::string(LLAMAY_SOURCE_DIR) + "/src/model/testdata/iq_ref_" + name + ".json");
  ASSERT_TRUE(in.good());
  const nlohmann::json ref = nlohmann::json::parse(in);
  auto bytes = BuildSyntheticModel(TinyIqSpec(GetParam().type));
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  char fnv[17];
  std::snprintf(fnv, sizeof fnv, "%016llx", static_cast<unsigned long long>(Fnv1a(*bytes)));
  ASSERT_EQ(std::string(fnv), ref["model_fnv1a"].get<std::string>())
      << "the synthetic model's bytes changed: run src/model/testdata/make_iq_ref.py";
  auto f = gguf::File::FromBuffer(std::move(*bytes));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(f->FindTensor("blk.0.ffn_down.weight")->type, GetParam().type);
  ASSERT_EQ(f->FindTensor("token_embd.weight")->type, GetParam().type);
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
  EXPECT_GE(tight_prompts, GetParam().tight_prompts);
}

INSTANTIATE_TEST_SUITE_P(Type, IqParity,
                         testing::Values(IqCase{TensorType::kIQ4_NL, 2}, IqCase{TensorType::kMXFP4, 3},
                                         IqCase{TensorType::kIQ4_XS, 3}),
                         [](const auto& info) { return std::string(TensorTypeName(info.param.type)); });

}  // namespace
}  // namespace llamay::model
