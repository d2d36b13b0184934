// Test helper shared by the engine and server logprob tests: the reference the engine's log
// probabilities are checked against, computed another way.
#ifndef LLAMAY_ENGINE_LOGPROBS_TEST_UTIL_H_
#define LLAMAY_ENGINE_LOGPROBS_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "kv/cache.h"
#include "model/model.h"

namespace llamay::engine::test_util {

// Row p: log-softmax (in double) of the logits at position p, the model fed one token per step, with an
// f16 KV cache (the engine's and the server's default precision).
inline std::vector<std::vector<double>> ReferenceLogSoftmax(const model::Model& m,
                                                            const std::vector<int32_t>& tokens) {
  kv::CacheOptions co;
  co.layout = m.KvLayoutFor(64, kv::KvPrecision::kF16);
  auto cache = std::move(*kv::Cache::Create(co));
  kv::Context ctx = cache->NewContext();
  std::vector<std::vector<double>> rows;
  for (const int32_t& t : tokens) {
    std::vector<float> logits;
    model::SeqInput in{&ctx, std::span(&t, 1), false};
    EXPECT_TRUE(m.Forward(std::span(&in, 1), &logits).ok());
    double max = -INFINITY, sum = 0;
    for (float l : logits) max = std::max(max, static_cast<double>(l));
    for (float l : logits) sum += std::exp(static_cast<double>(l) - max);
    std::vector<double> row;
    for (float l : logits) row.push_back(static_cast<double>(l) - max - std::log(sum));
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace llamay::engine::test_util

#endif  // LLAMAY_ENGINE_LOGPROBS_TEST_UTIL_H_
