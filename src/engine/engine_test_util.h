// Test helper shared by the engine's tests that build requests from text.
#ifndef LLAMAY_ENGINE_ENGINE_TEST_UTIL_H_
#define LLAMAY_ENGINE_ENGINE_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "engine/engine.h"

namespace llamay::engine::test_util {

// A request for `text` (BOS added, special tokens not parsed) with `max_tokens`, seeded sampling at
// `temperature` (0: greedy) and no repetition penalty.
inline Request TextRequest(const Engine& e, const std::string& text, int max_tokens, float temperature = 0,
                           uint64_t seed = 1) {
  Request r;
  auto p = e.tokenizer().Encode(text, true, false);
  EXPECT_TRUE(p.ok());
  if (p.ok()) r.prompt = *p;
  r.sampling.temperature = temperature;
  r.sampling.repeat_penalty = 1.0f;
  r.sampling.seed = seed;
  r.sampling.has_seed = true;
  r.max_tokens = max_tokens;
  return r;
}

}  // namespace llamay::engine::test_util

#endif  // LLAMAY_ENGINE_ENGINE_TEST_UTIL_H_
