// libFuzzer target: GGUF parsing and every accessor on whatever the parser accepts.
// Build: cmake --preset fuzz && cmake --build build/fuzz --target gguf_fuzz
// Run:   build/fuzz/fuzz/gguf_fuzz fuzz/corpus/gguf -max_total_time=600   (see docs/fuzzing.md)
#include <cstddef>
#include <cstdint>
#include <vector>

#include "gguf/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = llamay::gguf::File::FromBuffer(std::vector<uint8_t>(data, data + size));
  if (!f.ok()) return 0;
  for (auto key : f->Keys()) {
    (void)f->TypeOf(key);
    (void)f->GetString(key);
    (void)f->GetInt(key);
    (void)f->GetFloat(key);
    (void)f->GetBool(key);
    (void)f->GetStringArray(key);
    (void)f->GetFloatArray(key);
    (void)f->GetIntArray(key);
  }
  uint64_t sum = 0;
  for (const auto& t : f->tensors()) {
    if (t.n_bytes > 0) sum += t.data[0] + t.data[t.n_bytes - 1];
    sum += static_cast<uint64_t>(t.rows());
  }
  (void)f->WeightDigest();
  return static_cast<int>(sum & 0);
}
