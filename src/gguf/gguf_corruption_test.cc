// Hostile and damaged GGUF files: every truncation, targeted corruptions refused with a message naming the
// problem, and single-byte and random corruptions that must never crash (run under the asan preset too).
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <random>

#include "base/file.h"
#include "gguf/gguf.h"
#include "gguf/gguf_test_util.h"

namespace llamay::gguf {
namespace {

using testing::FindBytes;
using testing::PutAt;
using testing::SampleWriter;
using testing::WalkAll;

// Where things sit in SampleWriter()'s file.
size_t TypeAt(const std::vector<uint8_t>& b, const std::string& key) {
  return FindBytes(b, key) + key.size();
}
// A tensor info: name, u32 n_dims, i64 dims[n_dims], u32 type, u64 offset.
size_t NDimsAt(const std::vector<uint8_t>& b, const std::string& name) {
  return FindBytes(b, name) + name.size();
}

TEST(GgufCorruption, EveryTruncationOfASmallFileIsRefused) {
  const auto good = SampleWriter().Finish();
  ASSERT_TRUE(File::FromBuffer(good).ok());
  for (size_t n = 0; n < good.size(); ++n) {
    auto f = File::FromBuffer(std::vector<uint8_t>(good.begin(), good.begin() + static_cast<long>(n)));
    ASSERT_FALSE(f.ok()) << "a file cut to " << n << " of " << good.size() << " bytes was accepted";
    EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(f.status().message().rfind("gguf: ", 0), 0u) << f.status().message();
  }
}

TEST(GgufCorruption, EveryTruncationOfARealHeaderIsRefused) {
  const std::string path = std::string(LLAMAY_SHARED_DIR) + "/ref/models/stories260K.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent (shared reference files)";
  auto bytes = ReadFile(path);
  ASSERT_TRUE(bytes.ok());
  // The header (metadata with 512 tokens, 48 tensor infos) ends at 14176; then a few cuts in the data.
  std::vector<size_t> cuts;
  for (size_t n = 0; n <= 14200; ++n) cuts.push_back(n);
  for (size_t n = 14200; n < bytes->size(); n += 4099) cuts.push_back(n);
  cuts.push_back(bytes->size() - 1);
  for (size_t n : cuts) {
    auto f = File::FromBuffer(std::vector<uint8_t>(bytes->begin(), bytes->begin() + static_cast<long>(n)));
    ASSERT_FALSE(f.ok()) << "stories260K cut to " << n << " bytes was accepted";
  }
}

struct Corruption {
  std::string what;
  std::function<void(std::vector<uint8_t>&)> edit;
  std::string fragment;  // expected in the message
};

TEST(GgufCorruption, TargetedCorruptionsAreRefusedByName) {
  const auto good = SampleWriter().Finish();
  const size_t alpha = NDimsAt(good, "weight.alpha");  // F32 [4]
  const size_t beta = NDimsAt(good, "weight.beta");    // F16 [32, 3]
  const size_t gamma = NDimsAt(good, "weight.gamma");  // Q8_0 [64, 2]
  const size_t alpha_type = alpha + 4 + 8, alpha_offset = alpha_type + 4;
  auto parsed = File::FromBuffer(good);
  ASSERT_TRUE(parsed.ok());
  const uint64_t data_start = static_cast<uint64_t>(parsed->tensors()[0].data - parsed->bytes().data());
  const std::vector<Corruption> cases = {
      {"bad magic", [](auto& b) { b[0] = 'X'; }, "not a GGUF file (bad magic)"},
      {"version 1", [](auto& b) { PutAt<uint32_t>(b, 4, 1); }, "GGUF version 1 is not supported"},
      {"version 99", [](auto& b) { PutAt<uint32_t>(b, 4, 99); }, "unsupported GGUF version 99"},
      {"version 0", [](auto& b) { PutAt<uint32_t>(b, 4, 0); }, "unsupported GGUF version 0"},
      {"huge kv count", [](auto& b) { PutAt<uint64_t>(b, 16, uint64_t{1} << 60); },
       "header declares 1152921504606846976 metadata keys"},
      {"kv count just too big", [&](auto& b) { PutAt<uint64_t>(b, 16, (good.size() - 24) / 13 + 1); },
       "metadata keys; the"},
      {"huge tensor count", [](auto& b) { PutAt<uint64_t>(b, 8, uint64_t{1} << 60); },
       "header declares 1152921504606846976 tensors"},
      {"tensor count beyond metadata", [&](auto& b) { PutAt<uint64_t>(b, 8, (good.size() - 24) / 33); },
       "bytes after the metadata cannot hold them"},
      {"huge key length", [](auto& b) { PutAt<uint64_t>(b, 24, uint64_t{1} << 40); },
       "metadata key 0: key name: string of 1099511627776 bytes runs past the end of the file"},
      {"huge string value", [](auto& b) { PutAt<uint64_t>(b, TypeAt(b, "general.name") + 4, ~uint64_t{0}); },
       "key 'general.name': string of 18446744073709551615 bytes runs past the end"},
      {"unknown value type", [](auto& b) { PutAt<uint32_t>(b, TypeAt(b, "general.architecture"), 77); },
       "metadata key 0: key 'general.architecture': unknown value type 77"},
      {"value type 13", [](auto& b) { PutAt<uint32_t>(b, TypeAt(b, "llama.signed"), 13); },
       "key 'llama.signed': unknown value type 13"},
      {"unknown array element type",
       [](auto& b) { PutAt<uint32_t>(b, TypeAt(b, "tokenizer.ggml.scores") + 4, 200); },
       "key 'tokenizer.ggml.scores': unknown array element type 200"},
      {"nested array", [](auto& b) { PutAt<uint32_t>(b, TypeAt(b, "tokenizer.ggml.scores") + 4, 9); },
       "key 'tokenizer.ggml.scores': nested arrays are not supported"},
      {"huge array count",
       [](auto& b) { PutAt<uint64_t>(b, TypeAt(b, "tokenizer.ggml.scores") + 8, uint64_t{1} << 62); },
       "array of 4611686018427387904 f32 elements runs past the end of the file"},
      {"huge string array count",
       [](auto& b) { PutAt<uint64_t>(b, TypeAt(b, "tokenizer.ggml.tokens") + 8, uint64_t{1} << 40); },
       "array of 1099511627776 strings runs past the end of the file"},
      {"string element too long",
       [](auto& b) { PutAt<uint64_t>(b, TypeAt(b, "tokenizer.ggml.tokens") + 16, 1000000); },
       "key 'tokenizer.ggml.tokens' element 0: string of 1000000 bytes runs past"},
      {"unknown tensor type", [&](auto& b) { PutAt<uint32_t>(b, alpha_type, 1234); },
       "tensor 0: tensor 'weight.alpha': unknown tensor type 1234"},
      {"retired tensor type 4", [&](auto& b) { PutAt<uint32_t>(b, alpha_type, 4); }, "unknown tensor type 4"},
      {"misaligned offset", [&](auto& b) { PutAt<uint64_t>(b, alpha_offset, 3); },
       "tensor 'weight.alpha': data offset 3 is not aligned to 32"},
      {"out of bounds", [&](auto& b) { PutAt<uint64_t>(b, alpha_offset, 1 << 20); },
       "gguf: tensor 'weight.alpha' data [" + std::to_string(data_start + (1 << 20)) + ".." +
           std::to_string(data_start + (1 << 20) + 16) + ") beyond end of file (size " +
           std::to_string(good.size()) + ")"},
      {"offset near 2^64", [&](auto& b) { PutAt<uint64_t>(b, alpha_offset, ~uint64_t{31}); },
       "beyond end of file"},
      {"overlap", [&](auto& b) { PutAt<uint64_t>(b, alpha_offset, 32); },
       "data at offset 32 overlaps tensor 'weight.alpha'"},
      {"5 dims", [&](auto& b) { PutAt<uint32_t>(b, alpha, 5); }, "tensor 'weight.alpha': 5 dimensions (1..4"},
      {"0 dims", [&](auto& b) { PutAt<uint32_t>(b, alpha, 0); }, "tensor 'weight.alpha': 0 dimensions"},
      {"dim 0", [&](auto& b) { PutAt<int64_t>(b, alpha + 4, 0); }, "tensor 'weight.alpha': dimension 0 is 0"},
      {"negative dim", [&](auto& b) { PutAt<int64_t>(b, beta + 12, -3); },
       "'weight.beta': dimension 1 is -3"},
      {"element count overflow",
       [&](auto& b) {
         PutAt<int64_t>(b, beta + 4, int64_t{1} << 32);
         PutAt<int64_t>(b, beta + 12, int64_t{1} << 32);
       },
       "tensor 'weight.beta': element count overflows"},
      {"byte size overflow", [&](auto& b) { PutAt<int64_t>(b, alpha + 4, int64_t{1} << 62); },
       "tensor 'weight.alpha': byte size overflows"},
      {"row not a multiple of the block", [&](auto& b) { PutAt<int64_t>(b, gamma + 4, 48); },
       "tensor 'weight.gamma': row of 48 is not a multiple of the q8_0 block size 32"},
      {"empty tensor name", [&](auto& b) { PutAt<uint64_t>(b, FindBytes(b, "weight.alpha") - 8, 0); },
       "tensor name of 0 bytes"},
  };
  for (const Corruption& c : cases) {
    SCOPED_TRACE(c.what);
    auto b = good;
    c.edit(b);
    auto f = File::FromBuffer(std::move(b));
    ASSERT_FALSE(f.ok()) << "accepted; wanted: " << c.fragment;
    EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(f.status().message().find(c.fragment), std::string::npos) << f.status().message();
  }
}

void ExpectRefused(const std::vector<uint8_t>& bytes, const std::string& fragment) {
  auto f = File::FromBuffer(bytes);
  ASSERT_FALSE(f.ok()) << "accepted; wanted: " << fragment;
  EXPECT_NE(f.status().message().find(fragment), std::string::npos) << f.status().message();
}

TEST(GgufCorruption, DuplicatesAndBadAlignmentAreRefused) {
  Writer keys;
  keys.SetUint32("k", 1);
  keys.SetUint32("k", 2);
  ExpectRefused(keys.Finish(), "duplicate metadata key 'k'");
  Writer tensors;
  ASSERT_TRUE(tensors.AddTensor("t", {1}, TensorType::kF32, testing::F32Bytes({1})).ok());
  ASSERT_TRUE(tensors.AddTensor("t", {1}, TensorType::kF32, testing::F32Bytes({2})).ok());
  ExpectRefused(tensors.Finish(), "duplicate tensor name 't'");
  // general.alignment is written first when it is not 32 (a u32 value right after the 17-byte key).
  const auto aligned = SampleWriter(64).Finish();
  const size_t value = TypeAt(aligned, "general.alignment") + 4;
  for (uint32_t bad : {0u, 48u, 3u, 1u << 25}) {
    auto b = aligned;
    PutAt<uint32_t>(b, value, bad);
    ExpectRefused(b, "general.alignment " + std::to_string(bad) + " is not a power of two");
  }
  ExpectRefused(testing::RawGguf().String("general.alignment", "32").Finish(),
                "general.alignment holds string, not an integer");
  auto one = aligned;  // alignment 1 is valid: offsets stay multiples of 64, so the file still reads
  PutAt<uint32_t>(one, value, 1);
  EXPECT_TRUE(File::FromBuffer(one).ok());
}

// Every byte of the sample, set to a few values: refused or accepted, never a crash; what is accepted reads.
TEST(GgufCorruption, EverySingleByteCorruptionIsSafe) {
  const auto good = SampleWriter().Finish();
  size_t refused = 0, total = 0;
  for (size_t i = 0; i < good.size(); ++i) {
    for (int k = 0; k < 4; ++k) {
      auto b = good;
      const uint8_t v[4] = {0x00, 0xFF, static_cast<uint8_t>(good[i] ^ 0x01),
                            static_cast<uint8_t>(good[i] ^ 0x80)};
      if (v[k] == good[i]) continue;
      b[i] = v[k];
      ++total;
      auto f = File::FromBuffer(std::move(b));
      if (!f.ok()) {
        ++refused;
        continue;
      }
      (void)WalkAll(*f);
    }
  }
  // The header is ~40% of the file and most header bytes matter; tensor data bytes are all accepted.
  EXPECT_GT(refused, total / 5);
  EXPECT_LT(refused, total);
}

TEST(GgufCorruption, RandomCorruptionsNeverCrash) {
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
    (void)WalkAll(*f);
  }
  EXPECT_GT(refused, 1000);
}

}  // namespace
}  // namespace llamay::gguf
