#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "base/numeric.h"
#include "gguf/gguf.h"

namespace llamay::gguf {
namespace {

const std::string kModels = std::string(LLAMAY_SHARED_DIR) + "/ref/models/";

std::vector<uint8_t> F32Bytes(std::vector<float> v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// A small file with every value type and three tensors.
Writer SampleWriter(uint64_t alignment = 32) {
  Writer w(alignment);
  w.SetString("general.architecture", "llama");
  w.SetString("general.name", "sample");
  w.SetUint32("llama.block_count", 4);
  w.SetInt32("llama.signed", -7);
  w.SetUint64("llama.big", 1ull << 40);
  w.SetFloat32("llama.rope.freq_base", 10000.0f);
  w.SetBool("tokenizer.ggml.add_bos_token", true);
  w.SetStringArray("tokenizer.ggml.tokens", {"a", "", "héllo"});
  w.SetFloat32Array("tokenizer.ggml.scores", {0.5f, -1.0f, 2.0f});
  w.SetInt32Array("tokenizer.ggml.token_type", {1, 3, 6});
  EXPECT_TRUE(w.AddTensor("weight.alpha", {4}, TensorType::kF32, F32Bytes({1, 2, 3, 4})).ok());
  std::vector<uint8_t> half(2 * 32 * 3, 0x11);
  EXPECT_TRUE(w.AddTensor("weight.beta", {32, 3}, TensorType::kF16, half).ok());
  std::vector<uint8_t> q8(34 * 2, 0x22);
  EXPECT_TRUE(w.AddTensor("weight.gamma", {64}, TensorType::kQ8_0, q8).ok());
  return w;
}

TEST(Gguf, WriterRoundTripsEveryValueType) {
  for (uint64_t alignment : {32u, 64u}) {
    auto f = File::FromBuffer(SampleWriter(alignment).Finish());
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ(f->version(), 3u);
    EXPECT_EQ(f->alignment(), alignment);
    EXPECT_EQ(*f->GetString("general.architecture"), "llama");
    EXPECT_EQ(*f->GetInt("llama.block_count"), 4);
    EXPECT_EQ(*f->GetInt("llama.signed"), -7);
    EXPECT_EQ(*f->GetInt("llama.big"), int64_t{1} << 40);
    EXPECT_EQ(*f->GetFloat("llama.rope.freq_base"), 10000.0);
    EXPECT_EQ(*f->GetFloat("llama.block_count"), 4.0);  // integers read as floats
    EXPECT_TRUE(*f->GetBool("tokenizer.ggml.add_bos_token"));
    EXPECT_EQ(*f->GetStringArray("tokenizer.ggml.tokens"), (std::vector<std::string_view>{"a", "", "héllo"}));
    EXPECT_EQ(*f->GetFloatArray("tokenizer.ggml.scores"), (std::vector<float>{0.5f, -1.0f, 2.0f}));
    EXPECT_EQ(*f->GetIntArray("tokenizer.ggml.token_type"), (std::vector<int64_t>{1, 3, 6}));
    EXPECT_EQ(*f->ArrayLength("tokenizer.ggml.tokens"), 3u);
    EXPECT_EQ(*f->ArrayElementType("tokenizer.ggml.scores"), ValueType::kFloat32);
    EXPECT_EQ(*f->TypeOf("llama.big"), ValueType::kUint64);
    // Wrong types and missing keys are errors that name the key.
    auto wrong = f->GetInt("general.name");
    EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(wrong.status().message().find("general.name"), std::string::npos);
    EXPECT_EQ(f->GetString("nope").status().code(), StatusCode::kNotFound);
    EXPECT_EQ(f->GetIntOr("nope", 9), 9);
    ASSERT_EQ(f->tensors().size(), 3u);
    const TensorInfo* a = f->FindTensor("weight.alpha");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->n_bytes, 16u);
    float v[4];
    std::memcpy(v, a->data, 16);
    EXPECT_EQ(v[3], 4.0f);
    const TensorInfo* b = f->FindTensor("weight.beta");
    EXPECT_EQ(b->dims, (std::vector<int64_t>{32, 3}));
    EXPECT_EQ(b->rows(), 3);
    for (const TensorInfo& t : f->tensors())
      EXPECT_EQ(static_cast<size_t>(t.data - f->bytes().data()) % alignment, 0u) << t.name;
    EXPECT_EQ(f->FindTensor("weight.gamma")->type, TensorType::kQ8_0);
    EXPECT_EQ(f->FindTensor("zzz"), nullptr);
  }
  Writer w;
  EXPECT_FALSE(w.AddTensor("bad", {33}, TensorType::kQ8_0, std::vector<uint8_t>(34)).ok());
  EXPECT_FALSE(w.AddTensor("bad", {4}, TensorType::kF32, std::vector<uint8_t>(15)).ok());
}

TEST(Gguf, ReadsRealModels) {
  if (!std::filesystem::exists(kModels)) GTEST_SKIP() << "../shared/ref/models is absent";
  auto f = File::Open(kModels + "tiny-llama-f32.gguf");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(*f->GetString("general.architecture"), "llama");
  EXPECT_EQ(*f->GetInt("llama.embedding_length"), 256);
  EXPECT_EQ(*f->GetInt("llama.block_count"), 4);
  EXPECT_EQ(*f->GetInt("llama.attention.head_count_kv"), 4);
  EXPECT_EQ(f->tensors().size(), 3u + 9u * 4u);
  EXPECT_EQ(*f->ArrayLength("tokenizer.ggml.tokens"), 512u);
  EXPECT_EQ(f->FindTensor("blk.0.attn_q.weight")->type, TensorType::kF32);
  auto q4 = File::Open(kModels + "tiny-llama-q4_0.gguf");
  ASSERT_TRUE(q4.ok()) << q4.status().ToString();
  EXPECT_EQ(q4->FindTensor("blk.0.attn_q.weight")->type, TensorType::kQ4_0);
  EXPECT_EQ(q4->FindTensor("blk.0.attn_norm.weight")->type, TensorType::kF32);
  auto stories = File::Open(kModels + "stories260K.gguf");
  ASSERT_TRUE(stories.ok()) << stories.status().ToString();
  EXPECT_EQ(*stories->GetInt("llama.embedding_length"), 64);
  auto vocab = File::Open(std::string(LLAMAY_SHARED_DIR) + "/ref/vocab/ggml-vocab-gpt-2.gguf");
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  EXPECT_EQ(*vocab->GetString("tokenizer.ggml.model"), "gpt2");
  EXPECT_GT(*vocab->ArrayLength("tokenizer.ggml.merges"), 40000u);
  EXPECT_EQ(File::Open(kModels + "missing.gguf").status().code(), StatusCode::kNotFound);
}

TEST(Gguf, EveryTruncationIsRefused) {
  const auto good = SampleWriter().Finish();
  for (size_t n = 0; n < good.size(); ++n) {
    auto f = File::FromBuffer(std::vector<uint8_t>(good.begin(), good.begin() + static_cast<long>(n)));
    ASSERT_FALSE(f.ok()) << "a file cut to " << n << " bytes was accepted";
  }
}

// Patches bytes of a valid file and expects a refusal mentioning `fragment`.
void ExpectRefused(std::vector<uint8_t> b, const std::string& fragment) {
  auto f = File::FromBuffer(std::move(b));
  ASSERT_FALSE(f.ok()) << "accepted; wanted: " << fragment;
  EXPECT_NE(f.status().message().find(fragment), std::string::npos) << f.status().message();
}

template <typename T>
void PutAt(std::vector<uint8_t>& b, size_t off, T v) {
  std::memcpy(b.data() + off, &v, sizeof v);
}

size_t Find(const std::vector<uint8_t>& b, const std::string& s) {
  auto it = std::search(b.begin(), b.end(), s.begin(), s.end());
  EXPECT_NE(it, b.end()) << s;
  return static_cast<size_t>(it - b.begin());
}

TEST(Gguf, TargetedCorruptionsAreRefusedByName) {
  const auto good = SampleWriter().Finish();
  auto b = good;
  b[0] = 'X';
  ExpectRefused(b, "bad magic");
  b = good;
  PutAt<uint32_t>(b, 4, 1);
  ExpectRefused(b, "version 1");
  PutAt<uint32_t>(b, 4, 99);
  ExpectRefused(b, "unsupported GGUF version 99");
  b = good;
  PutAt<uint64_t>(b, 16, uint64_t{1} << 60);
  ExpectRefused(b, "metadata keys");
  b = good;
  PutAt<uint64_t>(b, 8, uint64_t{1} << 60);
  ExpectRefused(b, "tensors");
  // The first key's length prefix sits at 24.
  b = good;
  PutAt<uint64_t>(b, 24, uint64_t{1} << 40);
  ExpectRefused(b, "runs past the end");
  // general.architecture's type field follows its 20-byte key.
  b = good;
  PutAt<uint32_t>(b, 24 + 8 + 20, 77);
  ExpectRefused(b, "unknown value type 77");
  // Tensor "a": name, n_dims, dims, type, offset.
  const size_t ta = Find(good, "weight.alpha") + 12;
  b = good;
  PutAt<uint32_t>(b, ta + 4 + 8, 1234);
  ExpectRefused(b, "unknown tensor type 1234");
  b = good;
  PutAt<uint64_t>(b, ta + 4 + 8 + 4, 3);
  ExpectRefused(b, "not aligned");
  b = good;
  PutAt<uint64_t>(b, ta + 4 + 8 + 4, 1 << 20);
  ExpectRefused(b, "beyond the end of the file");
  b = good;
  PutAt<uint64_t>(b, ta + 4 + 8 + 4, 32);  // onto tensor "weight.beta"
  ExpectRefused(b, "overlaps");
  b = good;
  PutAt<uint32_t>(b, ta, 5);
  ExpectRefused(b, "5 dimensions");
  b = good;
  PutAt<uint64_t>(b, ta + 4, 0);
  ExpectRefused(b, "dimension 0");
  // Duplicate key: rename "llama.signed" to "llama.bigxxx"... simpler: a writer with the same key twice.
  Writer w;
  w.SetUint32("k", 1);
  w.SetUint32("k", 2);
  ExpectRefused(w.Finish(), "duplicate metadata key 'k'");
  Writer w2;
  ASSERT_TRUE(w2.AddTensor("t", {1}, TensorType::kF32, F32Bytes({1})).ok());
  ASSERT_TRUE(w2.AddTensor("t", {1}, TensorType::kF32, F32Bytes({2})).ok());
  ExpectRefused(w2.Finish(), "duplicate tensor name 't'");
  Writer w3;
  ASSERT_TRUE(w3.AddTensor("q", {32}, TensorType::kQ8_0, std::vector<uint8_t>(34)).ok());
  auto b3 = w3.Finish();
  PutAt<uint64_t>(b3, Find(b3, std::string("\x01\0\0\0\0\0\0\0q", 9)) + 9 + 4, 33);
  ExpectRefused(b3, "not a multiple of the q8_0 block size");
}

TEST(Gguf, RandomCorruptionsNeverCrash) {
  const auto good = SampleWriter().Finish();
  std::mt19937 rng(11);
  int refused = 0;
  for (int i = 0; i < 20000; ++i) {
    auto b = good;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int j = 0; j < flips; ++j) b[rng() % b.size()] = static_cast<uint8_t>(rng());
    auto f = File::FromBuffer(std::move(b));
    if (!f.ok()) {
      ++refused;
      continue;
    }
    // Whatever was accepted must be safe to walk.
    for (auto key : f->Keys()) {
      (void)f->GetStringArray(key);
      (void)f->GetFloatArray(key);
      (void)f->GetIntArray(key);
      (void)f->GetString(key);
      (void)f->GetFloat(key);
    }
    for (const TensorInfo& t : f->tensors()) {
      volatile uint8_t sink = t.n_bytes ? t.data[t.n_bytes - 1] : 0;
      (void)sink;
    }
  }
  EXPECT_GT(refused, 1000);
}

TEST(Gguf, WeightDigestTracksWhatTheWeightsCompute) {
  auto base = File::FromBuffer(SampleWriter().Finish());
  ASSERT_TRUE(base.ok());
  const Digest d = base->WeightDigest();
  EXPECT_EQ(d, File::FromBuffer(SampleWriter().Finish())->WeightDigest());
  // A tensor byte.
  auto b = SampleWriter().Finish();
  const size_t a_off = static_cast<size_t>(base->FindTensor("weight.alpha")->data - base->bytes().data());
  b[a_off] ^= 1;
  EXPECT_NE(File::FromBuffer(b)->WeightDigest(), d);
  // A hyperparameter.
  Writer w = SampleWriter();
  w.SetUint32("llama.extra", 1);
  EXPECT_NE(File::FromBuffer(w.Finish())->WeightDigest(), d);
  // Descriptive and tokenizer keys do not count.
  Writer w2 = SampleWriter();
  w2.SetString("general.description", "renamed");
  w2.SetString("tokenizer.chat_template", "{{ x }}");
  EXPECT_EQ(File::FromBuffer(w2.Finish())->WeightDigest(), d);
}

}  // namespace
}  // namespace llamay::gguf
