// Helpers the store tests share.
#ifndef LLAMAY_STORE_TEST_UTIL_H_
#define LLAMAY_STORE_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "store/store.h"

namespace llamay::store::testing_util {

inline std::vector<uint8_t> Bytes(std::string_view s) { return std::vector<uint8_t>(s.begin(), s.end()); }

// The value of `r`, or (after recording the failure) an empty one: a broken store fails a test rather
// than aborting the test binary.
template <typename T>
T Must(Result<T> r) {
  if (!r.ok()) {
    ADD_FAILURE() << r.status().ToString();
    return T{};
  }
  return std::move(r).value();
}

inline StoreError DetailOf(const Status& s) { return static_cast<StoreError>(s.detail()); }

}  // namespace llamay::store::testing_util

#endif  // LLAMAY_STORE_TEST_UTIL_H_
