// Writes the seed corpus for gguf_fuzz: small files from the Writer, a hand-built header with every value
// type, and the metadata of real models (shared reference files) with a few of their small tensors, each
// under 64 KiB. Usage: gguf_seeds OUT_DIR [SHARED_DIR]   (see docs/fuzzing.md)
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/file.h"
#include "gguf/gguf.h"

namespace {

using llamay::Status;
using llamay::TensorType;
using llamay::gguf::File;
using llamay::gguf::ValueType;
using llamay::gguf::Writer;

constexpr size_t kMaxSeed = 64 << 10;
constexpr size_t kMaxArray = 256;            // real vocabularies are cut to this many entries
constexpr size_t kTensorBudget = 20 << 10;  // small seeds fuzz faster; 20 KiB fits one q4_0 matrix

std::vector<uint8_t> Bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + 7 * i);
  return b;
}

Writer Sample(uint64_t alignment) {
  Writer w(alignment);
  w.SetString("general.architecture", "llama");
  w.SetUint32("llama.block_count", 2);
  w.SetInt32("llama.signed", -3);
  w.SetUint64("llama.big", 1ull << 40);
  w.SetFloat32("llama.rope.freq_base", 10000.0f);
  w.SetBool("tokenizer.ggml.add_bos_token", true);
  w.SetStringArray("tokenizer.ggml.tokens", {"<s>", "a", ""});
  w.SetFloat32Array("tokenizer.ggml.scores", {0.0f, -1.0f, 2.0f});
  w.SetInt32Array("tokenizer.ggml.token_type", {3, 1, 1});
  (void)w.AddTensor("a", {4}, TensorType::kF32, Bytes(16, 1));
  (void)w.AddTensor("b", {32, 2}, TensorType::kF16, Bytes(128, 2));
  (void)w.AddTensor("c", {32, 2}, TensorType::kQ8_0, Bytes(68, 3));
  (void)w.AddTensor("d", {32}, TensorType::kQ4_0, Bytes(18, 4));
  (void)w.AddTensor("e", {256}, TensorType::kQ6_K, Bytes(210, 5));
  return w;
}

// Every value type, written by hand (the Writer covers only some).
std::vector<uint8_t> AllValueTypes() {
  std::vector<uint8_t> b;
  auto put = [&](const void* p, size_t n) {
    const size_t at = b.size();
    b.resize(at + n);
    std::memcpy(b.data() + at, p, n);
  };
  auto u32 = [&](uint32_t v) { put(&v, 4); };
  auto u64 = [&](uint64_t v) { put(&v, 8); };
  auto str = [&](const std::string& s) {
    u64(s.size());
    put(s.data(), s.size());
  };
  u32(0x46554747u);
  u32(2);  // version 2
  u64(0);
  u64(13 + 12);  // 13 scalars (string and one flat array among them) + 12 arrays
  const uint64_t payload = 0x0123456789abcdefull;
  for (uint32_t t = 0; t <= 12; ++t) {
    str("k" + std::to_string(t));
    u32(t);
    if (t == 8) {
      str("value");
    } else if (t == 9) {
      u32(4);
      u64(2);
      u32(1);
      u32(2);
    } else {
      const size_t width = t <= 1 || t == 7 ? 1 : t <= 3 ? 2 : t <= 6 ? 4 : 8;
      put(&payload, width);
    }
  }
  for (uint32_t t = 0; t <= 12; ++t) {  // arrays of every element type but array
    if (t == 9) continue;
    str("a" + std::to_string(t));
    u32(9);
    u32(t);
    u64(2);
    if (t == 8) {
      str("x");
      str("");
    } else {
      const size_t width = t <= 1 || t == 7 ? 1 : t <= 3 ? 2 : t <= 6 ? 4 : 8;
      put(&payload, width);
      put(&payload, width);
    }
  }
  return b;
}

// A real model's metadata through the Writer (vocabulary cut to kMaxArray entries), plus the tensors that
// fit in the tensor budget (in file order).
Status FromModel(const std::string& path, std::vector<uint8_t>* out) {
  auto f = File::Open(path);
  if (!f.ok()) return f.status();
  Writer w(f->alignment());
  for (auto key_view : f->Keys()) {
    const std::string key(key_view);
    if (key == "general.alignment") continue;
    const ValueType t = *f->TypeOf(key);
    if (t == ValueType::kString) w.SetString(key, *f->GetString(key));
    if (t == ValueType::kUint32) w.SetUint32(key, static_cast<uint32_t>(*f->GetInt(key)));
    if (t == ValueType::kInt32) w.SetInt32(key, static_cast<int32_t>(*f->GetInt(key)));
    if (t == ValueType::kUint64) w.SetUint64(key, static_cast<uint64_t>(*f->GetInt(key)));
    if (t == ValueType::kFloat32) w.SetFloat32(key, static_cast<float>(*f->GetFloat(key)));
    if (t == ValueType::kBool) w.SetBool(key, *f->GetBool(key));
    if (t != ValueType::kArray) continue;
    const ValueType elem = *f->ArrayElementType(key);
    if (elem == ValueType::kString) {
      auto v = *f->GetStringArray(key);
      w.SetStringArray(key, std::vector<std::string>(v.begin(), v.begin() + std::min(v.size(), kMaxArray)));
    } else if (elem == ValueType::kFloat32) {
      auto v = *f->GetFloatArray(key);
      w.SetFloat32Array(key, std::vector<float>(v.begin(), v.begin() + std::min(v.size(), kMaxArray)));
    } else if (elem == ValueType::kInt32) {
      auto v = *f->GetIntArray(key);
      std::vector<int32_t> cut;
      for (size_t i = 0; i < v.size() && i < kMaxArray; ++i) cut.push_back(static_cast<int32_t>(v[i]));
      w.SetInt32Array(key, cut);
    }
  }
  size_t budget = kTensorBudget;
  for (const auto& t : f->tensors()) {
    if (t.n_bytes + 64 > budget) continue;
    budget -= t.n_bytes + 64;
    LLAMAY_RETURN_IF_ERROR(w.AddTensor(t.name, t.dims, t.type, {t.data, t.n_bytes}));
  }
  *out = w.Finish();
  return Status::Ok();
}

bool Save(const std::string& dir, const std::string& name, const std::vector<uint8_t>& bytes) {
  if (bytes.size() > kMaxSeed) {
    std::fprintf(stderr, "%s: %zu bytes, over the seed limit\n", name.c_str(), bytes.size());
    return false;
  }
  if (Status s = llamay::WriteFileAtomic(dir + "/" + name, bytes); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return false;
  }
  std::printf("%-28s %6zu bytes\n", name.c_str(), bytes.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR [SHARED_DIR]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  bool ok = Save(dir, "empty_v3.gguf", Writer().Finish());
  ok &= Save(dir, "sample_align32.gguf", Sample(32).Finish());
  ok &= Save(dir, "sample_align64.gguf", Sample(64).Finish());
  ok &= Save(dir, "all_value_types_v2.gguf", AllValueTypes());
  if (argc >= 3) {
    const std::string shared = argv[2];
    const char* models[][2] = {
        {"/ref/models/stories260K.gguf", "stories260K_meta.gguf"},
        {"/ref/models/tiny-llama-q4_0.gguf", "tiny_llama_q4_0_meta.gguf"},
        {"/ref/vocab/ggml-vocab-gpt-2.gguf", "gpt2_vocab_meta.gguf"},
    };
    for (const auto& m : models) {
      std::vector<uint8_t> bytes;
      if (Status s = FromModel(shared + m[0], &bytes); !s.ok()) {
        std::fprintf(stderr, "%s\n", s.ToString().c_str());
        ok = false;
        continue;
      }
      ok &= Save(dir, m[1], bytes);
    }
  }
  return ok ? 0 : 1;
}
