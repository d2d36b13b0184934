// GGUF reader/writer: round trips, every value type, the real reference files, Open's failure modes and the
// weight digest. Corrupt and truncated files are in gguf_corruption_test.cc.
#include "gguf/gguf.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "base/file.h"
#include "gguf/gguf_test_util.h"

namespace llamay::gguf {
namespace {

using testing::F32Bytes;
using testing::PatternBytes;
using testing::RawGguf;
using testing::SampleWriter;

const std::string kShared = LLAMAY_SHARED_DIR;
const std::string kModels = kShared + "/ref/models/";

TEST(GgufWriter, RoundTripsValuesAndTensorsAtEveryAlignment) {
  for (uint64_t alignment : {32u, 64u, 256u}) {
    SCOPED_TRACE(alignment);
    auto f = File::FromBuffer(SampleWriter(alignment).Finish());
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ(f->version(), 3u);
    EXPECT_EQ(f->alignment(), alignment);
    EXPECT_EQ(f->path(), "");
    EXPECT_EQ(f->Has("general.alignment"), alignment != 32);
    EXPECT_EQ(*f->GetString("general.architecture"), "llama");
    EXPECT_EQ(*f->GetInt("llama.block_count"), 4);
    EXPECT_EQ(*f->GetInt("llama.signed"), -7);
    EXPECT_EQ(*f->GetInt("llama.big"), int64_t{1} << 40);
    EXPECT_EQ(*f->GetFloat("llama.rope.freq_base"), 10000.0);
    EXPECT_EQ(*f->GetFloat("llama.block_count"), 4.0);  // integers read as floats
    EXPECT_TRUE(*f->GetBool("tokenizer.ggml.add_bos_token"));
    EXPECT_EQ(*f->GetStringArray("tokenizer.ggml.tokens"),
              (std::vector<std::string_view>{"a", "", "h\xc3\xa9llo"}));
    EXPECT_EQ(*f->GetFloatArray("tokenizer.ggml.scores"), (std::vector<float>{0.5f, -1.0f, 2.0f}));
    EXPECT_EQ(*f->GetIntArray("tokenizer.ggml.token_type"), (std::vector<int64_t>{1, 3, 6}));
    EXPECT_EQ(*f->ArrayLength("tokenizer.ggml.tokens"), 3u);
    EXPECT_EQ(*f->ArrayElementType("tokenizer.ggml.scores"), ValueType::kFloat32);
    EXPECT_EQ(*f->TypeOf("llama.big"), ValueType::kUint64);
    EXPECT_EQ(*f->TypeOf("tokenizer.ggml.tokens"), ValueType::kArray);
    const std::vector<std::string_view> first = {"general.architecture", "general.name", "llama.block_count"};
    const auto keys = f->Keys();
    ASSERT_EQ(keys.size(), alignment == 32 ? 10u : 11u);
    const size_t skip = alignment == 32 ? 0 : 1;  // general.alignment comes first when set
    EXPECT_EQ(std::vector<std::string_view>(keys.begin() + skip, keys.begin() + skip + 3), first);

    ASSERT_EQ(f->tensors().size(), 3u);
    struct Want {
      const char* name;
      TensorType type;
      std::vector<int64_t> dims;
      uint64_t n_elements, n_bytes;
      std::vector<uint8_t> data;
    };
    const Want want[] = {
        {"weight.alpha", TensorType::kF32, {4}, 4, 16, F32Bytes({1, 2, 3, 4})},
        {"weight.beta", TensorType::kF16, {32, 3}, 96, 192, PatternBytes(192, 1)},
        {"weight.gamma", TensorType::kQ8_0, {64, 2}, 128, 136, PatternBytes(136, 2)},
    };
    for (size_t i = 0; i < 3; ++i) {
      const TensorInfo& t = f->tensors()[i];
      EXPECT_EQ(t.name, want[i].name);
      EXPECT_EQ(t.type, want[i].type);
      EXPECT_EQ(t.dims, want[i].dims);
      EXPECT_EQ(t.n_elements, want[i].n_elements);
      EXPECT_EQ(t.n_bytes, want[i].n_bytes);
      EXPECT_EQ(t.rows(), want[i].dims.size() > 1 ? want[i].dims[1] : 1);
      EXPECT_EQ(t.offset % alignment, 0u) << t.name;
      EXPECT_EQ(static_cast<size_t>(t.data - f->bytes().data()) % alignment, 0u) << t.name;
      EXPECT_EQ(std::vector<uint8_t>(t.data, t.data + t.n_bytes), want[i].data) << t.name;
      EXPECT_EQ(f->FindTensor(want[i].name), &t);
    }
    EXPECT_EQ(f->FindTensor("weight"), nullptr);
    // The file ends with the last tensor's data.
    const TensorInfo& last = f->tensors().back();
    EXPECT_EQ(last.data + last.n_bytes, f->bytes().data() + f->bytes().size());
  }
}

TEST(GgufWriter, AddTensorChecksBytesAgainstTypeAndDims) {
  Writer w;
  EXPECT_TRUE(w.AddTensor("ok", {32, 2}, TensorType::kQ8_0, std::vector<uint8_t>(68)).ok());
  EXPECT_TRUE(w.AddTensor("q4k", {256}, TensorType::kQ4_K, std::vector<uint8_t>(144)).ok());
  auto refused = [&](std::vector<int64_t> dims, TensorType type, size_t n, const std::string& fragment) {
    Status s = w.AddTensor("bad", std::move(dims), type, std::vector<uint8_t>(n));
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << fragment;
    EXPECT_NE(s.message().find(fragment), std::string::npos) << s.message();
  };
  refused({33}, TensorType::kQ8_0, 34, "not a multiple of the q8_0 block size 32");
  refused({4}, TensorType::kF32, 15, "needs 16 bytes, got 15");
  refused({32, 2}, TensorType::kQ8_0, 34, "needs 68 bytes, got 34");
  refused({0}, TensorType::kF32, 0, "dimension 0");
  refused({4, -1}, TensorType::kF32, 0, "dimension -1");
  refused({}, TensorType::kF32, 0, "1..4 dims");
  refused({1, 1, 1, 1, 1}, TensorType::kF32, 4, "1..4 dims");
  refused({int64_t{1} << 40, int64_t{1} << 40}, TensorType::kF32, 0, "overflows");
  refused({4}, static_cast<TensorType>(4), 0, "unknown tensor type 4");
  EXPECT_EQ(File::FromBuffer(w.Finish())->tensors().size(), 2u);
}

TEST(GgufReader, ReadsEveryValueTypeInVersion2And3) {
  for (uint32_t version : {2u, 3u}) {
    SCOPED_TRACE(version);
    RawGguf raw(version);
    raw.Scalar<uint8_t>("u8", ValueType::kUint8, 200)
        .Scalar<int8_t>("i8", ValueType::kInt8, -5)
        .Scalar<uint16_t>("u16", ValueType::kUint16, 60000)
        .Scalar<int16_t>("i16", ValueType::kInt16, -300)
        .Scalar<uint32_t>("u32", ValueType::kUint32, 4000000000u)
        .Scalar<int32_t>("i32", ValueType::kInt32, -2000000000)
        .Scalar<float>("f32", ValueType::kFloat32, 1.5f)
        .Scalar<uint8_t>("bool", ValueType::kBool, 1)
        .String("string", std::string("x\0y", 3))
        .Scalar<uint64_t>("u64", ValueType::kUint64, uint64_t{1} << 63)
        .Scalar<int64_t>("i64", ValueType::kInt64, -(int64_t{1} << 40))
        .Scalar<double>("f64", ValueType::kFloat64, 2.25)
        .Array<uint8_t>("a.u8", ValueType::kUint8, {1, 255})
        .Array<int8_t>("a.i8", ValueType::kInt8, {-1, 127})
        .Array<uint16_t>("a.u16", ValueType::kUint16, {65535})
        .Array<int16_t>("a.i16", ValueType::kInt16, {-32768})
        .Array<uint32_t>("a.u32", ValueType::kUint32, {4294967295u})
        .Array<int32_t>("a.i32", ValueType::kInt32, {-7, 7})
        .Array<float>("a.f32", ValueType::kFloat32, {0.25f})
        .Array<uint8_t>("a.bool", ValueType::kBool, {0, 1, 2})
        .StringArray("a.string", {"", "two"})
        .Array<uint64_t>("a.u64", ValueType::kUint64, {5, uint64_t{1} << 62})
        .Array<int64_t>("a.i64", ValueType::kInt64, {-(int64_t{1} << 62)})
        .Array<double>("a.f64", ValueType::kFloat64, {-0.5, 3.0})
        .Array<uint32_t>("a.empty", ValueType::kUint32, {});
    auto f = File::FromBuffer(raw.Finish());
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ(f->version(), version);
    EXPECT_EQ(f->alignment(), 32u);
    EXPECT_EQ(f->Keys().size(), 25u);
    EXPECT_EQ(*f->GetInt("u8"), 200);
    EXPECT_EQ(*f->GetInt("i8"), -5);
    EXPECT_EQ(*f->GetInt("u16"), 60000);
    EXPECT_EQ(*f->GetInt("i16"), -300);
    EXPECT_EQ(*f->GetInt("u32"), 4000000000);
    EXPECT_EQ(*f->GetInt("i32"), -2000000000);
    EXPECT_EQ(*f->GetFloat("f32"), 1.5);
    EXPECT_TRUE(*f->GetBool("bool"));
    EXPECT_EQ(*f->GetString("string"), std::string("x\0y", 3));
    EXPECT_EQ(*f->GetFloat("u64"), std::ldexp(1.0, 63));
    auto too_big = f->GetInt("u64");
    EXPECT_EQ(too_big.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(too_big.status().message().find("'u64' holds a u64 above INT64_MAX"), std::string::npos);
    EXPECT_EQ(*f->GetInt("i64"), -(int64_t{1} << 40));
    EXPECT_EQ(*f->GetFloat("f64"), 2.25);
    EXPECT_EQ(*f->GetIntArray("a.u8"), (std::vector<int64_t>{1, 255}));
    EXPECT_EQ(*f->GetIntArray("a.i8"), (std::vector<int64_t>{-1, 127}));
    EXPECT_EQ(*f->GetIntArray("a.u16"), (std::vector<int64_t>{65535}));
    EXPECT_EQ(*f->GetIntArray("a.i16"), (std::vector<int64_t>{-32768}));
    EXPECT_EQ(*f->GetIntArray("a.u32"), (std::vector<int64_t>{4294967295}));
    EXPECT_EQ(*f->GetIntArray("a.i32"), (std::vector<int64_t>{-7, 7}));
    EXPECT_EQ(*f->GetFloatArray("a.f32"), (std::vector<float>{0.25f}));
    EXPECT_EQ(*f->GetIntArray("a.bool"), (std::vector<int64_t>{0, 1, 1}));
    EXPECT_EQ(*f->GetStringArray("a.string"), (std::vector<std::string_view>{"", "two"}));
    EXPECT_EQ(*f->GetIntArray("a.u64"), (std::vector<int64_t>{5, int64_t{1} << 62}));
    EXPECT_EQ(*f->GetIntArray("a.i64"), (std::vector<int64_t>{-(int64_t{1} << 62)}));
    EXPECT_EQ(*f->GetFloatArray("a.f64"), (std::vector<float>{-0.5f, 3.0f}));
    EXPECT_TRUE(f->GetIntArray("a.empty")->empty());
    EXPECT_EQ(*f->ArrayElementType("a.u64"), ValueType::kUint64);
    EXPECT_EQ(*f->ArrayLength("a.string"), 2u);
    EXPECT_TRUE(f->tensors().empty());
  }
}

TEST(GgufReader, TypeMismatchesAndMissingKeysNameTheKey) {
  auto f = File::FromBuffer(SampleWriter().Finish());
  ASSERT_TRUE(f.ok());
  auto expect = [](const Status& s, StatusCode code, const std::string& message) {
    EXPECT_EQ(s.code(), code) << s.ToString();
    EXPECT_EQ(s.message(), message);
  };
  expect(f->GetInt("general.name").status(), StatusCode::kInvalidArgument,
         "gguf: key 'general.name' holds string, expected an integer");
  expect(f->GetString("llama.block_count").status(), StatusCode::kInvalidArgument,
         "gguf: key 'llama.block_count' holds u32, expected string");
  expect(f->GetFloatArray("tokenizer.ggml.token_type").status(), StatusCode::kInvalidArgument,
         "gguf: key 'tokenizer.ggml.token_type' holds array of i32, expected array of f32 or f64");
  expect(f->GetBool("llama.block_count").status(), StatusCode::kInvalidArgument,
         "gguf: key 'llama.block_count' holds u32, expected bool");
  expect(f->ArrayLength("general.name").status(), StatusCode::kInvalidArgument,
         "gguf: key 'general.name' holds string, expected array");
  expect(f->GetString("nope").status(), StatusCode::kNotFound, "gguf: no metadata key 'nope'");
  expect(f->TypeOf("nope").status(), StatusCode::kNotFound, "gguf: no metadata key 'nope'");
  EXPECT_FALSE(f->Has("nope"));
  EXPECT_EQ(f->GetIntOr("nope", 9), 9);
  EXPECT_EQ(f->GetIntOr("general.name", 9), 9);
  EXPECT_EQ(f->GetFloatOr("nope", 0.5), 0.5);
  EXPECT_EQ(f->GetStringOr("llama.block_count", "fb"), "fb");
  EXPECT_FALSE(f->GetBoolOr("nope", false));
  EXPECT_EQ(f->GetStringOr("general.name", "fb"), "sample");
}

// Facts about the shared reference files, read independently (file headers as listed by gguf-py).
struct RealFile {
  std::string path;
  std::string arch;
  size_t n_tensors;
  uint64_t n_tokens;
  int64_t embedding_length;
  int64_t block_count;
};

TEST(GgufReader, ReadsTheReferenceFiles) {
  const RealFile files[] = {
      {kModels + "tiny-llama-f32.gguf", "llama", 39, 512, 256, 4},
      {kModels + "tiny-llama-q4_0.gguf", "llama", 39, 512, 256, 4},
      {kModels + "stories260K.gguf", "llama", 48, 512, 64, 5},
      {kShared + "/ref/vocab/ggml-vocab-gpt-2.gguf", "gpt2", 0, 50257, 768, 12},
  };
  for (const RealFile& rf : files) {
    if (!std::filesystem::exists(rf.path)) GTEST_SKIP() << rf.path << " is absent (shared reference files)";
    SCOPED_TRACE(rf.path);
    auto f = File::Open(rf.path);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ(f->path(), rf.path);
    EXPECT_EQ(f->version(), 3u);
    EXPECT_EQ(f->alignment(), 32u);
    EXPECT_EQ(f->bytes().size(), std::filesystem::file_size(rf.path));
    EXPECT_EQ(*f->GetString("general.architecture"), rf.arch);
    EXPECT_EQ(*f->GetInt(rf.arch + ".embedding_length"), rf.embedding_length);
    EXPECT_EQ(*f->GetInt(rf.arch + ".block_count"), rf.block_count);
    EXPECT_EQ(f->tensors().size(), rf.n_tensors);
    EXPECT_EQ(*f->ArrayLength("tokenizer.ggml.tokens"), rf.n_tokens);
    EXPECT_EQ(f->GetStringArray("tokenizer.ggml.tokens")->size(), rf.n_tokens);
    // The mmap and the in-memory buffer read the same.
    auto bytes = ReadFile(rf.path);
    ASSERT_TRUE(bytes.ok());
    auto g = File::FromBuffer(std::move(*bytes));
    ASSERT_TRUE(g.ok());
    EXPECT_EQ(g->Keys(), f->Keys());
    EXPECT_EQ(g->WeightDigest(), f->WeightDigest());
  }
  auto f32 = File::Open(kModels + "tiny-llama-f32.gguf");
  auto q4 = File::Open(kModels + "tiny-llama-q4_0.gguf");
  auto stories = File::Open(kModels + "stories260K.gguf");
  auto gpt2 = File::Open(kShared + "/ref/vocab/ggml-vocab-gpt-2.gguf");
  EXPECT_EQ(*f32->GetInt("llama.attention.head_count"), 8);
  EXPECT_EQ(*f32->GetInt("llama.attention.head_count_kv"), 4);
  EXPECT_EQ(*f32->GetInt("llama.feed_forward_length"), 768);
  EXPECT_FLOAT_EQ(static_cast<float>(*f32->GetFloat("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
  EXPECT_EQ(*f32->GetFloat("llama.rope.freq_base"), 10000.0);
  EXPECT_EQ(*f32->GetString("tokenizer.ggml.model"), "llama");
  EXPECT_TRUE(*f32->GetBool("tokenizer.ggml.add_bos_token"));
  for (const TensorInfo& t : f32->tensors()) EXPECT_EQ(t.type, TensorType::kF32) << t.name;
  const TensorInfo* embd = f32->FindTensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->dims, (std::vector<int64_t>{256, 512}));
  EXPECT_EQ(embd->n_bytes, 256u * 512u * 4u);
  // q4_0: 2-D weights quantised, norms kept in f32; 30 + 9 tensors.
  size_t n_q4 = 0;
  for (const TensorInfo& t : q4->tensors()) n_q4 += t.type == TensorType::kQ4_0;
  EXPECT_EQ(n_q4, 30u);
  EXPECT_EQ(q4->FindTensor("blk.0.attn_q.weight")->type, TensorType::kQ4_0);
  EXPECT_EQ(q4->FindTensor("blk.0.attn_q.weight")->n_bytes, 256u * 256u / 32u * 18u);
  EXPECT_EQ(q4->FindTensor("blk.0.attn_norm.weight")->type, TensorType::kF32);
  EXPECT_EQ(q4->FindTensor("token_embd.weight")->n_bytes, 73728u);
  EXPECT_NE(q4->WeightDigest(), f32->WeightDigest());
  EXPECT_EQ(*stories->GetInt("llama.feed_forward_length"), 172);
  EXPECT_EQ(*stories->GetInt("tokenizer.ggml.padding_token_id"), 4294967295);
  EXPECT_EQ(stories->FindTensor("output.weight")->dims, (std::vector<int64_t>{64, 512}));
  EXPECT_EQ(*gpt2->GetString("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(*gpt2->ArrayLength("tokenizer.ggml.merges"), 50000u);
  EXPECT_EQ((*gpt2->GetStringArray("tokenizer.ggml.tokens"))[50256], "<|endoftext|>");
}

std::string TempPath(const std::string& name) { return ::testing::TempDir() + "/llamay_gguf_" + name; }

TEST(GgufReader, OpenRefusesWhatIsNotAFile) {
  EXPECT_EQ(File::Open(TempPath("missing.gguf")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(File::Open(::testing::TempDir()).status().code(), StatusCode::kInvalidArgument);
  const std::string empty = TempPath("empty.gguf");
  { std::ofstream(empty, std::ios::trunc); }
  auto e = File::Open(empty);
  EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(e.status().message().find("is empty"), std::string::npos);
  const std::string bad = TempPath("bad.gguf");
  { std::ofstream(bad, std::ios::trunc) << "GGUF\x01"; }
  auto b = File::Open(bad);
  EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(b.status().message().find(bad), std::string::npos) << "the path names the file";
  std::filesystem::remove(empty);
  std::filesystem::remove(bad);
}

TEST(GgufWriter, WriteFileThenOpenAndMoveKeepViewsValid) {
  const std::string path = TempPath("written.gguf");
  ASSERT_TRUE(SampleWriter(64).WriteFile(path).ok());
  auto f = File::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(std::vector<uint8_t>(f->bytes().begin(), f->bytes().end()), SampleWriter(64).Finish());
  const auto tokens = *f->GetStringArray("tokenizer.ggml.tokens");
  const uint8_t* alpha = f->FindTensor("weight.alpha")->data;
  File moved = std::move(*f);
  File assigned = std::move(moved);
  EXPECT_EQ(tokens[2], "h\xc3\xa9llo");  // views into the mapping survive moves of the File
  EXPECT_EQ(assigned.FindTensor("weight.alpha")->data, alpha);
  float v[4];
  std::memcpy(v, alpha, sizeof v);
  EXPECT_EQ(v[3], 4.0f);
  std::filesystem::remove(path);
}

// --- Weight digest ---------------------------------------------------------------------------------------

Digest DigestOf(const std::vector<uint8_t>& bytes) {
  auto f = File::FromBuffer(bytes);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return f.ok() ? f->WeightDigest() : Digest{};
}

TEST(GgufDigest, TracksWhatTheWeightsCompute) {
  const Digest base = DigestOf(SampleWriter().Finish());
  EXPECT_EQ(DigestOf(SampleWriter().Finish()), base) << "two identical files";
  // Pinned: snapshots store this value, so the encoding may not drift (see digest.cc).
  EXPECT_EQ(DigestHex(base), "4da8a4cf78a3e242bea4cdfd6692a32bb8221a9722f7f5b4a077d24a59612e75");

  // One tensor byte.
  auto bytes = SampleWriter().Finish();
  auto f = File::FromBuffer(bytes);
  const size_t last = bytes.size() - 1;  // the Q8_0 tensor's last byte
  ASSERT_EQ(f->tensors().back().data + f->tensors().back().n_bytes - 1, f->bytes().data() + last);
  bytes[last] ^= 1;
  EXPECT_NE(DigestOf(bytes), base);
  // A hyperparameter's value, a new hyperparameter, the architecture.
  auto with = [](auto edit) {
    Writer w(32);
    edit(w);
    return DigestOf(w.Finish());
  };
  auto sample_with = [&](const std::string& arch, uint32_t blocks, const std::string& name,
                         std::vector<std::string> tokens, bool extra) {
    return with([&](Writer& w) {
      w.SetString("general.architecture", arch);
      w.SetString("general.name", name);
      w.SetUint32("llama.block_count", blocks);
      w.SetStringArray("tokenizer.ggml.tokens", std::move(tokens));
      if (extra) w.SetFloat32("llama.rope.freq_scale", 0.5f);
      EXPECT_TRUE(w.AddTensor("w", {4}, TensorType::kF32, F32Bytes({1, 2, 3, 4})).ok());
    });
  };
  const Digest small = sample_with("llama", 4, "a", {"x", "y"}, false);
  EXPECT_NE(sample_with("llama", 5, "a", {"x", "y"}, false), small) << "hparam value";
  EXPECT_NE(sample_with("llama", 4, "a", {"x", "y"}, true), small) << "new hparam";
  EXPECT_NE(sample_with("qwen2", 4, "a", {"x", "y"}, false), small) << "architecture";
  EXPECT_EQ(sample_with("llama", 4, "renamed", {"x", "y"}, false), small) << "general.name";
  EXPECT_EQ(sample_with("llama", 4, "a", {"x", "z", "w"}, false), small) << "tokenizer.ggml.tokens";
  // Descriptive general.* and tokenizer.* keys added do not count.
  Writer w2 = SampleWriter();
  w2.SetString("general.description", "renamed");
  w2.SetString("tokenizer.chat_template", "{{ x }}");
  EXPECT_EQ(DigestOf(w2.Finish()), base);
  // Same bytes under another name or shape, or another alignment (general.alignment counts).
  EXPECT_NE(with([](Writer& w) {
              (void)w.AddTensor("v", {4}, TensorType::kF32, F32Bytes({1, 2, 3, 4}));
            }),
            with([](Writer& w) {
              (void)w.AddTensor("w", {4}, TensorType::kF32, F32Bytes({1, 2, 3, 4}));
            }));
  EXPECT_NE(with([](Writer& w) {
              (void)w.AddTensor("w", {2, 2}, TensorType::kF32, F32Bytes({1, 2, 3, 4}));
            }),
            with([](Writer& w) {
              (void)w.AddTensor("w", {4}, TensorType::kF32, F32Bytes({1, 2, 3, 4}));
            }));
  EXPECT_NE(DigestOf(SampleWriter(64).Finish()), base);
}

TEST(GgufDigest, ComputedOnceAndThreadSafe) {
  auto f = File::FromBuffer(SampleWriter().Finish());
  ASSERT_TRUE(f.ok());
  std::vector<const Digest*> seen(8);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < seen.size(); ++i) threads.emplace_back([&, i] { seen[i] = &f->WeightDigest(); });
  for (auto& t : threads) t.join();
  for (const Digest* d : seen) EXPECT_EQ(d, &f->WeightDigest());
  EXPECT_EQ(*seen[0], DigestOf(SampleWriter().Finish()));
}

}  // namespace
}  // namespace llamay::gguf
