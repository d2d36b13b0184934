// Parity with llama.cpp (../shared/ref/llama.cpp/*.json) and the determinism contract.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kv/cache.h"
#include "kv/snapshot.h"
#include "model/demo_model.h"
#include "kernels/dequant.h"
#include "model/model.h"
#include "model/model_test_util.h"
#include "model/synthetic_model.h"

namespace llamay::model {
namespace {

const std::string kRef = std::string(LLAMAY_SHARED_DIR) + "/ref/";

bool HaveRef() { return std::filesystem::exists(kRef + "llama.cpp/tiny-llama-f32.json"); }

nlohmann::json LoadJson(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

std::unique_ptr<kv::Cache> CacheFor(const Model& m, uint32_t page_tokens = 64,
                                    kv::KvPrecision p = kv::KvPrecision::kF32) {
  kv::CacheOptions o;
  o.layout = m.KvLayoutFor(page_tokens, p);
  auto c = kv::Cache::Create(o);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return std::move(*c);
}

// Logits for every position of `tokens`, computed in one prefill.
std::vector<float> Prefill(const Model& m, kv::Context& ctx, const std::vector<int32_t>& tokens) {
  std::vector<float> logits;
  SeqInput in{&ctx, tokens, true};
  Status s = m.Forward(std::span(&in, 1), &logits);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return logits;
}

std::vector<float> Step(const Model& m, kv::Context& ctx, int32_t token) {
  std::vector<float> logits;
  SeqInput in{&ctx, std::span(&token, 1), false};
  Status s = m.Forward(std::span(&in, 1), &logits);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return logits;
}

int32_t Argmax(const float* v, size_t n) {
  size_t best = 0;
  for (size_t i = 1; i < n; ++i)
    if (v[i] > v[best]) best = i;
  return static_cast<int32_t>(best);
}

// Top-1 minus top-2 of a reference logit row.
float Margin(const std::vector<float>& v) {
  float a = -INFINITY, b = -INFINITY;
  for (float x : v) {
    if (x > a) {
      b = a;
      a = x;
    } else if (x > b) {
      b = x;
    }
  }
  return a - b;
}

struct ParityCase {
  const char* model;
  float tol;  // max |logit - reference| allowed
};

class Parity : public testing::TestWithParam<ParityCase> {};

TEST_P(Parity, MatchesLlamaCpp) {
  if (!HaveRef()) GTEST_SKIP() << "../shared/ref is absent";
  const ParityCase pc = GetParam();
  auto model = Model::Load(kRef + "models/" + pc.model + ".gguf");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const Model& m = **model;
  const nlohmann::json ref = LoadJson(kRef + "llama.cpp/" + pc.model + ".json");
  const size_t V = m.hparams().n_vocab;
  for (const auto& c : ref["cases"]) {
    const std::vector<int32_t> tokens = c["tokens"];
    SCOPED_TRACE(std::string(pc.model) + ", prompt of " + std::to_string(tokens.size()) + " tokens");
    auto cache = CacheFor(m);
    kv::Context ctx = cache->NewContext();
    const std::vector<float> logits = Prefill(m, ctx, tokens);
    ASSERT_EQ(logits.size(), tokens.size() * V);
    // Logits at the dumped positions, within the tolerance; argmax where the reference margin allows.
    float worst = 0.0f;
    for (const auto& row : c["logits"]) {
      const size_t pos = row["pos"];
      const std::vector<float> want = row["values"];
      for (size_t i = 0; i < V; ++i) worst = std::max(worst, std::fabs(logits[pos * V + i] - want[i]));
    }
    EXPECT_LE(worst, pc.tol) << "largest logit difference";
    std::printf("  %s, %zu tokens: max |logit - llama.cpp| = %.3g\n", pc.model, tokens.size(), worst);
    const std::vector<int32_t> argmax = c["argmax"];
    int checked = 0;
    for (size_t p = 0; p < tokens.size(); ++p) {
      const int32_t got = Argmax(&logits[p * V], V);
      if (got == argmax[p]) {
        ++checked;
        continue;
      }
      // A disagreement is allowed only where our own top two are within the tolerance of each other.
      std::vector<float> mine(logits.begin() + static_cast<long>(p * V), logits.begin() + static_cast<long>((p + 1) * V));
      EXPECT_LE(Margin(mine), 2 * pc.tol) << "argmax differs at position " << p;
    }
    EXPECT_GE(checked, static_cast<int>(tokens.size()) * 9 / 10);
    // Greedy continuation, one token at a time, until the first near-tie.
    const std::vector<int32_t> greedy = c["greedy"];
    std::vector<float> last(logits.end() - static_cast<long>(V), logits.end());
    size_t equal = 0;
    for (size_t i = 0; i < greedy.size(); ++i, ++equal) {
      const int32_t got = Argmax(last.data(), V);
      if (got != greedy[i]) {
        EXPECT_LE(Margin(last), 2 * pc.tol) << "greedy token " << i << ": " << got << " vs " << greedy[i];
        break;
      }
      last = Step(m, ctx, got);
    }
    std::printf("  %s, %zu tokens: greedy %zu of %zu equal\n", pc.model, tokens.size(), equal, greedy.size());
  }
}

INSTANTIATE_TEST_SUITE_P(Models, Parity,
                         testing::Values(ParityCase{"tiny-llama-f32", 2e-3f}, ParityCase{"tiny-qwen2-f32", 2e-3f},
                                         ParityCase{"tiny-qwen3-f32", 2e-3f}, ParityCase{"stories260K", 2e-3f},
                                         // Quantised weights: activations are rounded (to f16, or to Q8_0 blocks)
                                         // as llama.cpp rounds them, and 5-token prompts agree to 1e-6; over
                                         // longer prompts the largest differences measured are 0.0045 (f16)
                                         // and 0.15 (q8_0, q4_0) on logits of std ~3. Bounds: about 2x that.
                                         // (Measured again after the block-sum order of vec_dot.h: 0.15, 0.14.)
                                         ParityCase{"tiny-llama-f16", 0.01f}, ParityCase{"tiny-llama-q8_0", 0.25f},
                                         ParityCase{"tiny-llama-q4_0", 0.3f}, ParityCase{"tiny-qwen2-q8_0", 0.25f},
                                         ParityCase{"tiny-qwen3-q8_0", 0.25f},
                                         // Recurrent models: f32 agrees to ~7e-6; q8_0 differs by the same
                                         // activation rounding (largest measured 0.11 mamba2, 0.14 granite).
                                         ParityCase{"tiny-mamba2-f32", 1e-3f}, ParityCase{"tiny-mamba2-q8_0", 0.25f},
                                         ParityCase{"tiny-granitehybrid-f32", 1e-3f},
                                         ParityCase{"tiny-granitehybrid-q8_0", 0.25f},
                                         // qwen35: f32 agrees to 2e-5. q8_0 agrees to 1.4e-6 at position 0
                                         // and by up to 0.32 later: an activation quantised to Q8_0 absorbs a
                                         // small f32 difference (ggml's FMA/SIMD sums and expf in the delta
                                         // rule vs the kernels' sequential sums and RefExp: zero at position
                                         // 0, where the state is zero) unless it moves a value across a
                                         // rounding boundary, and this model turns such a flip into a jump of
                                         // 0.1-0.45 in the logits. Measured by nudging our own delta-rule
                                         // outputs by 1-2 ulp (an f32 logit change of 1e-5 to 3e-5, the size
                                         // of the f32 difference from llama.cpp): the q8_0 logits moved by 0
                                         // or by 0.11 to 0.44. Bound: 0.6. Since the block-sum order of
                                         // vec_dot.h (docs/models.md) position 0 differs by 0.24 (it was
                                         // 1.4e-6: the old lane order was llama.cpp's) and the largest is 0.58.
                                         ParityCase{"tiny-qwen35-f32", 1e-3f}, ParityCase{"tiny-qwen35-q8_0", 0.6f},
                                         // gemma3: llama.cpp evaluates GeGLU through an f16 table (gelu's
                                         // input and output rounded to f16: ~5e-4 relative per activation);
                                         // llamay computes the tanh GELU exactly. Measured over the three
                                         // prompts: f32 4.6e-3 (logits of std ~3), q8_0 0.22. Emulating the
                                         // table (a measurement, not shipped) brings f32 to 1.7e-3 (left:
                                         // table entries flipped by 1e-7 differences in the f32 sums that
                                         // feed it) and q8_0 to 1.4e-6 at positions 0..65 of the 85-token
                                         // prompt (the window in use from 32 on), 0.16 elsewhere (Q8_0
                                         // rounding flips, as above): the table is the cause. Bounds: about
                                         // 2x the measured (f32) and 1.6x (q8_0, as for the llama family).
                                         ParityCase{"tiny-gemma3-f32", 0.01f},
                                         ParityCase{"tiny-gemma3-q8_0", 0.35f}),
                         [](const auto& info) {
                           std::string n = info.param.model;
                           for (char& ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

TEST(Stories260K, GreedyReproducesTheReferenceStory) {
  if (!HaveRef()) GTEST_SKIP() << "../shared/ref is absent";
  auto model = Model::Load(kRef + "models/stories260K.gguf");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const nlohmann::json ref = LoadJson(kRef + "llama.cpp/stories260K.json");
  const auto& c = ref["cases"][0];
  ASSERT_EQ(c["prompt"], "Once upon a time");
  const std::vector<int32_t> tokens = c["tokens"], want = c["greedy"];
  auto cache = CacheFor(**model);
  kv::Context ctx = cache->NewContext();
  std::vector<float> logits = Prefill(**model, ctx, tokens);
  const size_t V = (*model)->hparams().n_vocab;
  std::vector<int32_t> got;
  std::vector<float> last(logits.end() - static_cast<long>(V), logits.end());
  for (size_t i = 0; i < want.size(); ++i) {
    got.push_back(Argmax(last.data(), V));
    last = Step(**model, ctx, got.back());
  }
  EXPECT_EQ(got, want);
}

// --- Determinism contract: bit-identical logits ---------------------------------------------------

bool Same(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

// The models the contract is checked on: the demo model (llama) and three small mixtures of experts in Q8_0
// (whose prefill groups a step's tokens by expert; qwen2moe's has a gated shared expert; gpt-oss's has
// sinks, biases, YaRN and a sliding window on alternate layers).
std::vector<uint8_t> ContractModel(const std::string& name) {
  if (name == "demo") return BuildDemoModel();
  const SyntheticArch arch = name == "qwen2moe_q8_0"  ? SyntheticArch::kQwen2Moe
                             : name == "gpt_oss_q8_0" ? SyntheticArch::kGptOss
                                                      : SyntheticArch::kQwen3Moe;
  auto bytes = BuildSyntheticModel(test_util::TinyMoeSpec(TensorType::kQ8_0, arch));
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  return bytes.ok() ? std::move(*bytes) : std::vector<uint8_t>{};
}

class Determinism : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto f = gguf::File::FromBuffer(ContractModel(GetParam()));
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    auto m = Model::FromFile(std::move(*f));
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::move(*m);
    for (int i = 0; i < 150; ++i) prompt_.push_back(3 + (i * 37) % 96);
  }
  std::unique_ptr<Model> model_;
  std::vector<int32_t> prompt_;
};

TEST_P(Determinism, IndependentOfPageSizeAndChunking) {
  auto c64 = CacheFor(*model_, 64), c7 = CacheFor(*model_, 7), c128 = CacheFor(*model_, 128);
  kv::Context a = c64->NewContext(), b = c7->NewContext(), c = c128->NewContext();
  const auto la = Prefill(*model_, a, prompt_);
  EXPECT_TRUE(Same(la, Prefill(*model_, b, prompt_)));
  // Chunks of 50 instead of one prefill of 150.
  std::vector<float> chunked;
  for (size_t i = 0; i < prompt_.size(); i += 50) {
    std::vector<int32_t> part(prompt_.begin() + static_cast<long>(i), prompt_.begin() + static_cast<long>(i + 50));
    auto l = Prefill(*model_, c, part);
    chunked.insert(chunked.end(), l.begin(), l.end());
  }
  EXPECT_TRUE(Same(la, chunked));
}

TEST_P(Determinism, IndependentOfThreadCount) {
  auto cache = CacheFor(*model_);
  kv::Context a = cache->NewContext();
  const auto want = Prefill(*model_, a, prompt_);  // one thread per core
  for (int threads : {1, 3}) {
    auto f = gguf::File::FromBuffer(ContractModel(GetParam()));
    ASSERT_TRUE(f.ok());
    auto m = Model::FromFile(std::move(*f), threads);
    ASSERT_TRUE(m.ok());
    EXPECT_EQ((*m)->n_threads(), threads);
    kv::Context b = cache->NewContext();
    EXPECT_TRUE(Same(want, Prefill(**m, b, prompt_))) << threads << " threads";
  }
}

TEST_P(Determinism, IndependentOfBatchComposition) {
  auto cache = CacheFor(*model_);
  kv::Context alone = cache->NewContext(), x = cache->NewContext(), y = cache->NewContext();
  const auto want = Prefill(*model_, alone, prompt_);
  std::vector<int32_t> other(prompt_.rbegin(), prompt_.rend());
  std::vector<float> logits;
  SeqInput in[2] = {{&y, other, true}, {&x, prompt_, true}};
  ASSERT_TRUE(model_->Forward(in, &logits).ok());
  std::vector<float> mine(logits.begin() + static_cast<long>(other.size() * model_->hparams().n_vocab), logits.end());
  EXPECT_TRUE(Same(want, mine));
}

TEST_P(Determinism, ForkAndSnapshotContinueExactly) {
  for (kv::KvPrecision p : {kv::KvPrecision::kF32, kv::KvPrecision::kF16, kv::KvPrecision::kQ8_0}) {
    auto cache = CacheFor(*model_, 64, p);
    kv::Context parent = cache->NewContext();
    Prefill(*model_, parent, prompt_);
    kv::Context branch = parent.Fork();
    auto bytes = kv::SnapshotToBytes(parent, model_->weight_digest(), {.native_precision = true});
    ASSERT_TRUE(bytes.ok());
    auto other = CacheFor(*model_, 128, p);
    auto restored = kv::RestoreSnapshot(*other, *bytes, model_->weight_digest());
    ASSERT_TRUE(restored.ok()) << restored.status().ToString();
    for (int32_t tok : {65, 66, 67}) {
      const auto want = Step(*model_, parent, tok);
      EXPECT_TRUE(Same(want, Step(*model_, branch, tok))) << "fork drifted";
      EXPECT_TRUE(Same(want, Step(*model_, *restored, tok))) << "restore drifted";
    }
  }
}

// Forked streams decoding in one batch (attention reads the pages they share once), next to a context of
// another page size and precision, get the logits each gets alone.
TEST_P(Determinism, ForksDecodedTogetherMatchEachAlone) {
  for (kv::KvPrecision p : {kv::KvPrecision::kF32, kv::KvPrecision::kF16, kv::KvPrecision::kQ8_0}) {
    auto cache = CacheFor(*model_, 64, p), other = CacheFor(*model_, 7, kv::KvPrecision::kF16);
    kv::Context parent = cache->NewContext();
    Prefill(*model_, parent, prompt_);
    std::vector<kv::Context> together, alone;
    for (int i = 0; i < 4; ++i) {
      together.push_back(parent.Fork());
      alone.push_back(parent.Fork());
    }
    kv::Context odd = other->NewContext(), odd_alone = other->NewContext();
    Prefill(*model_, odd, {5, 6, 7});
    Prefill(*model_, odd_alone, {5, 6, 7});
    const size_t V = model_->hparams().n_vocab;
    for (int32_t step = 0; step < 3; ++step) {
      std::vector<std::vector<int32_t>> tokens;
      std::vector<SeqInput> in;
      for (int32_t i = 0; i < 5; ++i) tokens.push_back({10 + 7 * i + step});
      for (size_t i = 0; i < 4; ++i) in.push_back({&together[i], tokens[i], false});
      in.push_back({&odd, tokens[4], false});
      std::vector<float> logits;
      ASSERT_TRUE(model_->Forward(in, &logits).ok());
      ASSERT_EQ(logits.size(), 5 * V);
      for (size_t i = 0; i < 5; ++i) {
        const auto want = Step(*model_, i < 4 ? alone[i] : odd_alone, tokens[i][0]);
        const std::vector<float> got(logits.begin() + static_cast<long>(i * V),
                                     logits.begin() + static_cast<long>((i + 1) * V));
        EXPECT_TRUE(Same(want, got)) << "stream " << i << ", step " << step;
      }
    }
  }
}

TEST_P(Determinism, BadInputLeavesContextsIntact) {
  auto cache = CacheFor(*model_);
  kv::Context ctx = cache->NewContext();
  Prefill(*model_, ctx, {1, 2, 3});
  std::vector<int32_t> bad = {5, 100000};
  std::vector<float> logits;
  SeqInput in{&ctx, bad, false};
  EXPECT_EQ(model_->Forward(std::span(&in, 1), &logits).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ctx.size(), 3u);
  EXPECT_TRUE(logits.empty());
}

INSTANTIATE_TEST_SUITE_P(Models, Determinism, testing::Values("demo", "qwen3moe_q8_0", "qwen2moe_q8_0", "gpt_oss_q8_0"));

}  // namespace
}  // namespace llamay::model

namespace llamay::model {
namespace {

// Every supported weight type runs through the whole model: a synthetic model quantised to the type is
// compared with the same model whose matrices are those quantised weights dequantised to f32. What
// remains is the activation rounding each type's dot product uses, bounded here.
TEST(WeightTypes, EverySupportedTypeComputesWhatItsDequantisedWeightsCompute) {
  struct Case {
    TensorType type;
    float tol;
  };
  for (Case c : {Case{TensorType::kF16, 0.02f}, Case{TensorType::kBF16, 0.1f}, Case{TensorType::kQ8_0, 0.3f},
                 Case{TensorType::kQ4_0, 0.3f}, Case{TensorType::kQ4_1, 0.3f}, Case{TensorType::kQ5_0, 0.3f},
                 Case{TensorType::kQ5_1, 0.3f}, Case{TensorType::kQ4_K, 0.4f}, Case{TensorType::kQ5_K, 0.4f},
                 Case{TensorType::kQ6_K, 0.4f}, Case{TensorType::kIQ4_NL, 0.3f}, Case{TensorType::kMXFP4, 0.3f},
                 Case{TensorType::kIQ4_XS, 0.4f}}) {
    SCOPED_TRACE(std::string(TensorTypeName(c.type)));
    SyntheticSpec spec;
    spec.n_vocab = 300;
    spec.n_embd = 256;
    spec.n_layer = 2;
    spec.n_head = 4;
    spec.n_head_kv = 2;
    spec.n_ff = 512;
    spec.type = c.type;
    auto bytes = BuildSyntheticModel(spec);
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    auto quant_file = gguf::File::FromBuffer(*bytes);
    ASSERT_TRUE(quant_file.ok());
    // The same file with every matrix dequantised to f32.
    gguf::Writer w;
    for (auto key : quant_file->Keys()) {
      const std::string k(key);
      switch (*quant_file->TypeOf(key)) {
        case gguf::ValueType::kString: w.SetString(k, *quant_file->GetString(key)); break;
        case gguf::ValueType::kFloat32: w.SetFloat32(k, static_cast<float>(*quant_file->GetFloat(key))); break;
        case gguf::ValueType::kBool: w.SetBool(k, *quant_file->GetBool(key)); break;
        case gguf::ValueType::kArray:
          if (*quant_file->ArrayElementType(key) == gguf::ValueType::kString) {
            auto v = *quant_file->GetStringArray(key);
            w.SetStringArray(k, std::vector<std::string>(v.begin(), v.end()));
          } else if (*quant_file->ArrayElementType(key) == gguf::ValueType::kFloat32) {
            w.SetFloat32Array(k, *quant_file->GetFloatArray(key));
          } else {
            auto v = *quant_file->GetIntArray(key);
            w.SetInt32Array(k, std::vector<int32_t>(v.begin(), v.end()));
          }
          break;
        default: w.SetUint32(k, static_cast<uint32_t>(*quant_file->GetInt(key))); break;
      }
    }
    for (const auto& t : quant_file->tensors()) {
      std::vector<float> f(t.n_elements);
      const int64_t cols = t.dims[0];
      const size_t row_bytes = kernels::TypeRowBytes(t.type, cols);
      for (int64_t r = 0; r < t.rows(); ++r)
        kernels::DequantizeRow(t.type, t.data + r * row_bytes, f.data() + r * cols, cols);
      std::vector<uint8_t> raw(f.size() * 4);
      std::memcpy(raw.data(), f.data(), raw.size());
      ASSERT_TRUE(w.AddTensor(t.name, t.dims, TensorType::kF32, raw).ok());
    }
    auto f32_file = gguf::File::FromBuffer(w.Finish());
    ASSERT_TRUE(f32_file.ok());
    auto quant = Model::FromFile(std::move(*quant_file));
    auto exact = Model::FromFile(std::move(*f32_file));
    ASSERT_TRUE(quant.ok() && exact.ok());
    std::vector<int32_t> prompt;
    for (int i = 0; i < 40; ++i) prompt.push_back(3 + (i * 53) % 290);
    auto cq = CacheFor(**quant), ce = CacheFor(**exact);
    kv::Context a = cq->NewContext(), b = ce->NewContext();
    const auto lq = Prefill(**quant, a, prompt), le = Prefill(**exact, b, prompt);
    ASSERT_EQ(lq.size(), le.size());
    float worst = 0.0f, spread = 0.0f;
    for (size_t i = 0; i < lq.size(); ++i) {
      worst = std::max(worst, std::fabs(lq[i] - le[i]));
      spread = std::max(spread, std::fabs(le[i]));
    }
    std::printf("  %s: max |logit diff| = %.3g (largest |logit| %.2f)\n", std::string(TensorTypeName(c.type)).c_str(),
                worst, spread);
    EXPECT_LE(worst, c.tol);
    EXPECT_GT(spread, 1.0f);  // the comparison is not between near-zero vectors
  }
}

}  // namespace
}  // namespace llamay::model

namespace llamay::model {
namespace {

TEST(Load, UnsupportedArchitecturesAndMissingFilesAreClearErrors) {
  if (!HaveRef()) GTEST_SKIP() << "../shared/ref is absent";
  gguf::Writer w;
  w.SetString("general.architecture", "nonesuch");
  auto file = gguf::File::FromBuffer(w.Finish());
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto unknown = Model::FromFile(std::move(*file));
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(unknown.status().message().find("'nonesuch'"), std::string::npos) << unknown.status().message();
  EXPECT_EQ(Model::Load(kRef + "models/none.gguf").status().code(), StatusCode::kNotFound);
  auto vocab_only = Model::Load(kRef + "vocab/ggml-vocab-gpt-2.gguf");
  EXPECT_FALSE(vocab_only.ok());
}

}  // namespace
}  // namespace llamay::model
