// Helpers shared by the model tests that run the reference models of ../shared/ref/models: a cache for a
// model, one forward step, exact comparison, deterministic prompts, a GGUF copied with keys changed, the
// small synthetic models, and the comparison with llama.cpp's distributions (testdata/*_ref_*.json).
#ifndef LLAMAY_MODEL_MODEL_TEST_UTIL_H_
#define LLAMAY_MODEL_MODEL_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "kv/cache.h"
#include "model/model.h"
#include "model/synthetic_model.h"

namespace llamay::model::test_util {

inline const std::string kModels = std::string(LLAMAY_SHARED_DIR) + "/ref/models/";

inline std::unique_ptr<kv::Cache> NewCache(const Model& m, uint32_t page_tokens = 16,
                                           uint32_t checkpoint_tokens = 0, size_t max_bytes = 0,
                                           kv::KvPrecision p = kv::KvPrecision::kF32) {
  kv::CacheOptions o;
  o.layout = m.KvLayoutFor(page_tokens, p, checkpoint_tokens);
  o.max_bytes = max_bytes;
  auto c = kv::Cache::Create(o);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return std::move(*c);
}

// Logits for every token of `tokens` (all) or the last one, in one forward step.
inline std::vector<float> Steps(const Model& m, kv::Context& ctx, std::span<const int32_t> tokens,
                                bool all = true) {
  std::vector<float> logits;
  SeqInput in{&ctx, tokens, all};
  Status s = m.Forward(std::span(&in, 1), &logits);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return logits;
}

inline bool Same(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// FNV-1a of `bytes`: what pins a synthetic model's bytes in the tests (and in testdata/make_moe_ref.py).
inline uint64_t Fnv1a(const std::vector<uint8_t>& bytes) {
  uint64_t h = 1469598103934665603ull;
  for (uint8_t c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// BOS, then n - 1 pseudo-random ids of a 512-token vocabulary (no control tokens).
inline std::vector<int32_t> Prompt(size_t n, uint32_t seed) {
  std::vector<int32_t> p = {1};
  uint32_t x = seed;
  while (p.size() < n) {
    x = x * 1664525u + 1013904223u;
    p.push_back(static_cast<int32_t>(3 + (x >> 8) % 509));
  }
  return p;
}

inline SyntheticSpec TinyQwen35Spec(TensorType type);

// A small mixture of experts (3 layers of dim 128, 4 / 2 heads of 32, 16 experts of 64, 4 used, a 512-token
// vocabulary; qwen2moe: a shared expert of 96; granitehybrid: 4 layers, Mamba-2 of 256 but the last, and an
// ungated shared expert of 96; qwen35moe: TinyQwen35Spec's 6 layers with those experts and a gated shared
// expert of 96; gpt-oss: a window of 8): `llamay model synth --shape
// qwen3moe|qwen2moe|hybrid-moe|qwen35moe|olmoe|gpt-oss` with the flags of testdata/make_moe_ref.py.
inline SyntheticSpec TinyMoeSpec(TensorType type, SyntheticArch arch = SyntheticArch::kQwen3Moe) {
  if (arch == SyntheticArch::kQwen35Moe) {
    SyntheticSpec s = TinyQwen35Spec(type);
    s.arch = SyntheticArch::kQwen35Moe;
    s.name = "tiny-qwen35moe";
    s.n_ff = 0;
    s.n_expert = 16;
    s.n_expert_used = 4;
    s.n_ff_expert = 64;
    s.n_ff_shared = 96;
    return s;
  }
  if (arch == SyntheticArch::kGraniteHybrid) {
    SyntheticSpec s = HybridMoeShape(type);
    s.name = "tiny-granitemoe";
    s.n_vocab = 512;
    s.n_embd = 128;
    s.ssm_d_inner = 256;
    s.n_layer = 4;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.n_expert = 16;
    s.n_expert_used = 4;
    s.n_ff_expert = 64;
    s.n_ff_shared = 96;
    return s;
  }
  const bool qwen2 = arch == SyntheticArch::kQwen2Moe, gpt_oss = arch == SyntheticArch::kGptOss,
             olmoe = arch == SyntheticArch::kOlmoe;
  SyntheticSpec s = qwen2     ? Qwen2MoeShape(type, 3)
                    : gpt_oss ? GptOssShape(type, 3)
                    : olmoe   ? OlmoeShape(type, 3)
                              : Qwen3MoeShape(type, 3);
  s.name = qwen2 ? "tiny-qwen2moe" : gpt_oss ? "tiny-gpt-oss" : olmoe ? "tiny-olmoe" : "tiny-qwen3moe";
  if (gpt_oss) s.window = 8;  // layers 0 and 2 windowed; the test prompts reach past it
  if (qwen2) s.n_ff_shared = 96;
  s.n_vocab = 512;
  s.n_embd = 128;
  s.n_head = 4;
  s.n_head_kv = olmoe ? 4 : 2;  // OLMoE has no grouped-query attention
  s.head_dim = 32;
  s.n_expert = 16;
  s.n_expert_used = 4;
  s.n_ff_expert = 64;
  return s;
}

// A small Qwen3.5 (vocab 512, dim 128, 6 layers: delta nets but layers 2 and 5, gated attention of 4 / 2
// heads of 32 with 8 rotated dims; delta nets of 2 key heads and 4 value heads of 32, so that value heads
// share key heads; ffn 256).
inline SyntheticSpec TinyQwen35Spec(TensorType type) {
  SyntheticSpec s = Qwen35Shape(type, 6);
  s.name = "tiny-synthetic-qwen35";
  s.n_vocab = 512;
  s.n_embd = 128;
  s.attention_every = 3;  // not the default 4: the file's full_attention_interval must be read
  s.n_head = 4;
  s.n_head_kv = 2;
  s.head_dim = 32;
  s.n_ff = 256;
  s.ssm_d_inner = 4 * 32;
  s.ssm_d_state = 32;
  s.ssm_n_head = 4;
  s.ssm_n_group = 2;
  return s;
}

// A small llama of `type` (vocab 512, dim 256, 2 layers, 4 / 2 heads, ffn 512): `llamay model synth` with
// the flags of testdata/make_kquant_ref.py and make_iq_ref.py.
inline SyntheticSpec TinyLlamaSpec(TensorType type) {
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
inline std::vector<double> LogProbs(const float* logits, size_t n) {
  const double mx = *std::max_element(logits, logits + n);
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  const double lse = mx + std::log(sum);
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = logits[i] - lse;
  return out;
}

// A reference of src/model/testdata (`file`), after checking that `bytes` are the model it was made from
// (its FNV-1a hash; `script` remakes it). Null, with a failure recorded, when either check fails.
inline std::unique_ptr<nlohmann::json> ReadReference(const std::string& file,
                                                     const std::vector<uint8_t>& bytes,
                                                     const std::string& script) {
  std::ifstream in(std::string(LLAMAY_SOURCE_DIR) + "/src/model/testdata/" + file);
  EXPECT_TRUE(in.good()) << file;
  if (!in.good()) return nullptr;
  auto ref = std::make_unique<nlohmann::json>(nlohmann::json::parse(in));
  char fnv[17];
  std::snprintf(fnv, sizeof fnv, "%016llx", static_cast<unsigned long long>(Fnv1a(bytes)));
  EXPECT_EQ(std::string(fnv), (*ref)["model_fnv1a"].get<std::string>())
      << "the synthetic model's bytes changed: run src/model/testdata/" << script;
  if (std::string(fnv) != (*ref)["model_fnv1a"].get<std::string>()) return nullptr;
  return ref;
}

// llama.cpp's distributions (`ref`: for each prompt, the top tokens' log-probabilities at the prompt's end
// and after each step of its continuation) against the model's: at every step the same most probable token
// and each top token within `loose`. Returns how many prompts stayed within `tight` at every step (their
// worst differences printed).
inline int MatchesReference(const Model& m, const nlohmann::json& ref, double loose, double tight,
                            const std::string& name) {
  const size_t V = m.hparams().n_vocab;
  int tight_prompts = 0;
  for (const auto& c : ref["cases"]) {
    auto cache = NewCache(m, 64);
    kv::Context ctx = cache->NewContext();
    std::vector<int32_t> tokens = c["prompt"].get<std::vector<int32_t>>();
    const auto next = c["continuation"].get<std::vector<int32_t>>();
    std::vector<float> logits = Steps(m, ctx, tokens, false);
    double worst = 0;
    for (size_t step = 0; step < c["top_logprobs"].size(); ++step) {
      EXPECT_EQ(logits.size(), V);
      if (logits.size() != V) return tight_prompts;
      const std::vector<double> lp = LogProbs(logits.data(), V);
      const auto& top = c["top_logprobs"][step];
      EXPECT_EQ(std::max_element(lp.begin(), lp.end()) - lp.begin(), top[0][0].get<int>())
          << name << ", prompt of " << c["prompt"].size() << ", step " << step;
      for (const auto& t : top) {
        const double d = std::abs(lp[t[0].get<size_t>()] - t[1].get<double>());
        worst = std::max(worst, d);
        EXPECT_LT(d, loose) << name << ", token " << t[0] << ", prompt of " << c["prompt"].size() << ", step "
                            << step;
      }
      if (step < next.size()) logits = Steps(m, ctx, std::span(&next[step], 1), false);
    }
    tight_prompts += worst < tight;
    std::printf("%s, prompt of %zu: max |logprob - llama.cpp| = %.2e\n", name.c_str(), c["prompt"].size(),
                worst);
  }
  return tight_prompts;
}

// The GGUF `f` without the keys `dropped` (and the tensors `dropped_tensors`), with what `extra` sets, as a
// buffer.
inline std::vector<uint8_t> RewriteKeys(const gguf::File& f, const std::vector<std::string>& dropped,
                                        const std::function<void(gguf::Writer&)>& extra,
                                        const std::vector<std::string>& dropped_tensors = {}) {
  gguf::Writer w;
  for (auto key : f.Keys()) {
    const std::string k(key);
    if (std::find(dropped.begin(), dropped.end(), k) != dropped.end()) continue;
    switch (*f.TypeOf(key)) {
      case gguf::ValueType::kString:
        w.SetString(k, *f.GetString(key));
        break;
      case gguf::ValueType::kFloat32:
        w.SetFloat32(k, static_cast<float>(*f.GetFloat(key)));
        break;
      case gguf::ValueType::kBool:
        w.SetBool(k, *f.GetBool(key));
        break;
      case gguf::ValueType::kArray:
        if (*f.ArrayElementType(key) == gguf::ValueType::kString) {
          auto v = *f.GetStringArray(key);
          w.SetStringArray(k, std::vector<std::string>(v.begin(), v.end()));
        } else if (*f.ArrayElementType(key) == gguf::ValueType::kFloat32) {
          w.SetFloat32Array(k, *f.GetFloatArray(key));
        } else {
          auto v = *f.GetIntArray(key);
          w.SetInt32Array(k, std::vector<int32_t>(v.begin(), v.end()));
        }
        break;
      default:
        w.SetUint32(k, static_cast<uint32_t>(*f.GetInt(key)));
        break;
    }
  }
  extra(w);
  for (const auto& t : f.tensors()) {
    if (std::find(dropped_tensors.begin(), dropped_tensors.end(), t.name) != dropped_tensors.end()) continue;
    EXPECT_TRUE(w.AddTensor(t.name, t.dims, t.type, std::span(t.data, t.n_bytes)).ok());
  }
  return w.Finish();
}

// The same for the GGUF at `path`.
inline std::vector<uint8_t> RewriteKeys(const std::string& path, const std::vector<std::string>& dropped,
                                        const std::function<void(gguf::Writer&)>& extra) {
  auto f = gguf::File::Open(path);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return RewriteKeys(*f, dropped, extra);
}

}  // namespace llamay::model::test_util

#endif  // LLAMAY_MODEL_MODEL_TEST_UTIL_H_
