// libFuzzer target: GGUF parsing, then every accessor on whatever the parser accepts.
//
// File::FromBuffer must refuse or accept any input without a crash, a leak or undefined behaviour; an
// accepted file must then be safe to walk completely: every key through every getter, every array element,
// every byte of every tensor's data, and the weight digest.
// Build: cmake --preset fuzz && cmake --build build/fuzz --target gguf_fuzz
// Run:   build/fuzz/fuzz/gguf_fuzz -max_total_time=600 fuzz/corpus/gguf   (see docs/fuzzing.md)
#include <cstddef>
#include <cstdint>
#include <vector>

#include "gguf/gguf.h"

namespace {

// Touches every byte an accepted file exposes; returns a checksum so nothing is optimised away.
uint64_t Walk(const llamay::gguf::File& f) {
  uint64_t sum = f.version() + f.alignment() + f.bytes().size();
  for (auto key : f.Keys()) {
    sum += f.Has(key);
    if (auto t = f.TypeOf(key); t.ok()) sum += static_cast<uint64_t>(*t);
    if (auto t = f.ArrayElementType(key); t.ok()) sum += static_cast<uint64_t>(*t);
    if (auto n = f.ArrayLength(key); n.ok()) sum += *n;
    if (auto s = f.GetString(key); s.ok()) sum += s->size();
    sum += static_cast<uint64_t>(f.GetIntOr(key, 0));
    sum += f.GetFloatOr(key, 0.0) > 0.0;
    sum += f.GetBoolOr(key, false);
    if (auto v = f.GetStringArray(key); v.ok())
      for (auto s : *v) sum += s.size() + (s.empty() ? 0 : static_cast<uint8_t>(s.back()));
    if (auto v = f.GetFloatArray(key); v.ok())
      for (float x : *v) sum += x > 0.0f;
    if (auto v = f.GetIntArray(key); v.ok())
      for (int64_t x : *v) sum += static_cast<uint64_t>(x);
  }
  for (const auto& t : f.tensors()) {
    for (uint64_t i = 0; i < t.n_bytes; ++i) sum += t.data[i];
    sum += static_cast<uint64_t>(t.rows()) + t.n_elements + t.dims.size();
    if (f.FindTensor(t.name) != &t) __builtin_trap();  // names are unique and indexed
  }
  sum += f.WeightDigest()[0];
  return sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = llamay::gguf::File::FromBuffer(std::vector<uint8_t>(data, data + size));
  if (!f.ok()) {
    if (f.status().message().empty()) __builtin_trap();  // every refusal says why
    return 0;
  }
  volatile uint64_t sink = Walk(*f);
  (void)sink;
  return 0;
}
