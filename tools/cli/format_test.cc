#include "format.h"

#include <gtest/gtest.h>

namespace llamay::cli {
namespace {

TEST(Format, Bytes) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(128 * 1024), "128.00 KiB");
  EXPECT_EQ(FormatBytes(1024 * 1024), "1.00 MiB");
  EXPECT_EQ(FormatBytes(3ull << 30), "3.00 GiB");
}

TEST(Format, Duration) {
  EXPECT_EQ(FormatDuration(19e-6), "19µs");
  EXPECT_EQ(FormatDuration(2.4e-6), "2µs");
  EXPECT_EQ(FormatDuration(0.00152), "1.52 ms");
  EXPECT_EQ(FormatDuration(2.5), "2.50 s");
}

}  // namespace
}  // namespace llamay::cli
