// Helpers for the gguf tests: a sample file built by the Writer, a raw byte builder for headers the Writer
// cannot produce (every value type, version 2), byte patching and a walk over everything a File exposes.
// Test-only; single-threaded.
#ifndef LLAMAY_GGUF_GGUF_TEST_UTIL_H_
#define LLAMAY_GGUF_GGUF_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "gguf/gguf.h"

namespace llamay::gguf::testing {

inline std::vector<uint8_t> F32Bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// Deterministic non-trivial bytes.
inline std::vector<uint8_t> PatternBytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + 31 * i + (i >> 8));
  return b;
}

// Every value type the Writer can set and three tensors: F32 [4], F16 [32, 3], Q8_0 [64, 2].
inline Writer SampleWriter(uint64_t alignment = 32) {
  Writer w(alignment);
  w.SetString("general.architecture", "llama");
  w.SetString("general.name", "sample");
  w.SetUint32("llama.block_count", 4);
  w.SetInt32("llama.signed", -7);
  w.SetUint64("llama.big", uint64_t{1} << 40);
  w.SetFloat32("llama.rope.freq_base", 10000.0f);
  w.SetBool("tokenizer.ggml.add_bos_token", true);
  w.SetStringArray("tokenizer.ggml.tokens", {"a", "", "h\xc3\xa9llo"});
  w.SetFloat32Array("tokenizer.ggml.scores", {0.5f, -1.0f, 2.0f});
  w.SetInt32Array("tokenizer.ggml.token_type", {1, 3, 6});
  EXPECT_TRUE(w.AddTensor("weight.alpha", {4}, TensorType::kF32, F32Bytes({1, 2, 3, 4})).ok());
  EXPECT_TRUE(w.AddTensor("weight.beta", {32, 3}, TensorType::kF16, PatternBytes(2 * 32 * 3, 1)).ok());
  EXPECT_TRUE(w.AddTensor("weight.gamma", {64, 2}, TensorType::kQ8_0, PatternBytes(34 * 4, 2)).ok());
  return w;
}

// Raw GGUF bytes, metadata only, for value types and versions the Writer does not produce.
class RawGguf {
 public:
  explicit RawGguf(uint32_t version = 3) : version_(version) {}
  template <typename T>
  RawGguf& Scalar(const std::string& key, ValueType type, T v) {
    Key(key, type);
    Put(v);
    return *this;
  }
  RawGguf& String(const std::string& key, const std::string& v) {
    Key(key, ValueType::kString);
    PutString(v);
    return *this;
  }
  template <typename T>
  RawGguf& Array(const std::string& key, ValueType elem, const std::vector<T>& v) {
    Key(key, ValueType::kArray);
    Put(static_cast<uint32_t>(elem));
    Put<uint64_t>(v.size());
    for (const T& x : v) Put(x);
    return *this;
  }
  RawGguf& StringArray(const std::string& key, const std::vector<std::string>& v) {
    Key(key, ValueType::kArray);
    Put(static_cast<uint32_t>(ValueType::kString));
    Put<uint64_t>(v.size());
    for (const auto& s : v) PutString(s);
    return *this;
  }
  std::vector<uint8_t> Finish() const {
    // resize + memcpy: g++ 12 misreports inserts into a small vector (-Warray-bounds).
    std::vector<uint8_t> out(24 + body_.size());
    const uint32_t magic = 0x46554747u;
    const uint64_t n_tensors = 0;
    std::memcpy(out.data(), &magic, 4);
    std::memcpy(out.data() + 4, &version_, 4);
    std::memcpy(out.data() + 8, &n_tensors, 8);
    std::memcpy(out.data() + 16, &n_kv_, 8);
    if (!body_.empty()) std::memcpy(out.data() + 24, body_.data(), body_.size());
    return out;
  }

 private:
  template <typename T>
  void Put(T v) {
    const size_t at = body_.size();
    body_.resize(at + sizeof v);
    std::memcpy(body_.data() + at, &v, sizeof v);
  }
  void PutString(const std::string& s) {
    Put<uint64_t>(s.size());
    const size_t at = body_.size();
    body_.resize(at + s.size());
    if (!s.empty()) std::memcpy(body_.data() + at, s.data(), s.size());
  }
  void Key(const std::string& key, ValueType type) {
    PutString(key);
    Put(static_cast<uint32_t>(type));
    ++n_kv_;
  }
  uint32_t version_;
  uint64_t n_kv_ = 0;
  std::vector<uint8_t> body_;
};

template <typename T>
void PutAt(std::vector<uint8_t>& b, size_t off, T v) {
  ASSERT_LE(off + sizeof v, b.size());
  std::memcpy(b.data() + off, &v, sizeof v);
}

// Offset of the first occurrence of `s` in `b` (fails the test when absent).
inline size_t FindBytes(const std::vector<uint8_t>& b, const std::string& s) {
  auto it = std::search(b.begin(), b.end(), s.begin(), s.end());
  EXPECT_NE(it, b.end()) << "'" << s << "' not in the file";
  return static_cast<size_t>(it - b.begin());
}

// Reads everything an accepted file exposes (what a model loader would touch). Returns a checksum so the
// reads are not optimised away.
inline uint64_t WalkAll(const File& f) {
  uint64_t sum = 0;
  for (auto key : f.Keys()) {
    sum += f.Has(key);
    (void)f.TypeOf(key);
    (void)f.ArrayElementType(key);
    (void)f.ArrayLength(key);
    sum += f.GetString(key).ok();
    sum += static_cast<uint64_t>(f.GetIntOr(key, 0));
    sum += static_cast<uint64_t>(f.GetFloatOr(key, 0) != 0);
    sum += f.GetBoolOr(key, false);
    if (auto v = f.GetStringArray(key); v.ok())
      for (auto s : *v) sum += s.empty() ? 0 : static_cast<uint8_t>(s.back());
    if (auto v = f.GetFloatArray(key); v.ok()) sum += v->size();
    if (auto v = f.GetIntArray(key); v.ok())
      for (int64_t x : *v) sum += static_cast<uint64_t>(x);
  }
  for (const TensorInfo& t : f.tensors()) {
    for (uint64_t i = 0; i < t.n_bytes; ++i) sum += t.data[i];
    sum += static_cast<uint64_t>(t.rows());
    EXPECT_EQ(f.FindTensor(t.name), &t);
  }
  sum += f.WeightDigest()[0];
  return sum;
}

}  // namespace llamay::gguf::testing

#endif  // LLAMAY_GGUF_GGUF_TEST_UTIL_H_
