#include "kernels/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace llamay::kernels {
namespace {

TEST(ThreadPool, RunsEveryTaskOnceWithValidThreadIndex) {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.num_threads(), threads);
    for (int64_t n : {0, 1, 2, 3, 17, 1000}) {
      std::vector<std::atomic<int>> hits(n);
      std::atomic<bool> bad_thread{false};
      pool.ParallelFor(n, [&](int64_t task, int thread) {
        hits[task].fetch_add(1);
        if (thread < 0 || thread >= threads) bad_thread = true;
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "task " << i << " of " << n;
      EXPECT_FALSE(bad_thread);
    }
  }
}

TEST(ThreadPool, ManyBackToBackLoops) {
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  for (int round = 0; round < 2000; ++round) pool.ParallelFor(5, [&](int64_t task, int) { sum += task; });
  EXPECT_EQ(sum.load(), 2000 * 10);
}

TEST(ThreadPool, DefaultUsesHardwareConcurrency) {
  ThreadPool pool;
  EXPECT_GE(pool.num_threads(), 1);
}

TEST(ThreadPool, NestedCallRunsInline) {
  ThreadPool pool(2);
  std::atomic<int> inner{0};
  pool.ParallelFor(4, [&](int64_t, int) { pool.ParallelFor(3, [&](int64_t, int) { inner++; }); });
  EXPECT_EQ(inner.load(), 12);
}

TEST(ThreadPool, ConcurrentCallersAreSerialised) {
  ThreadPool pool(2);
  std::atomic<int> in_flight{0}, max_in_flight{0}, total{0};
  auto caller = [&] {
    for (int i = 0; i < 200; ++i) {
      pool.ParallelFor(4, [&](int64_t, int) {
        const int now = ++in_flight;
        int prev = max_in_flight.load();
        while (now > prev && !max_in_flight.compare_exchange_weak(prev, now)) {
        }
        total++;
        --in_flight;
      });
    }
  };
  std::thread a(caller), b(caller);
  a.join();
  b.join();
  EXPECT_EQ(total.load(), 2 * 200 * 4);
  EXPECT_LE(max_in_flight.load(), 2);  // never more tasks at once than the pool has threads
}

}  // namespace
}  // namespace llamay::kernels
