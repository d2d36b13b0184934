#include "kernels/thread_pool.h"

#include <chrono>

#include "base/check.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace llamay::kernels {
namespace {

// Set while a thread runs tasks of some pool: a nested ParallelFor then runs inline.
thread_local bool tls_in_pool = false;

// How long an idle thread spins before sleeping. Long enough to bridge the gap between the many small
// parallel loops of one decode step, short enough not to burn a shared core.
constexpr auto kSpin = std::chrono::microseconds(50);

inline void CpuRelax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

// Spins until pred() holds or kSpin elapses; returns pred().
template <typename Pred>
bool SpinUntil(Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0;; ++i) {
    if (pred()) return true;
    CpuRelax();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > deadline) return pred();
  }
}

// Spins, then sleeps on cv (under mu) until pred() holds.
template <typename Pred>
void WaitFor(std::mutex& mu, std::condition_variable& cv, Pred pred) {
  if (SpinUntil(pred)) return;
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, pred);
}

uint32_t GenerationOf(uint64_t state) { return static_cast<uint32_t>(state >> 32); }

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::thread::hardware_concurrency());
  if (n_threads <= 0) n_threads = 1;
  state_.store(kClosed, std::memory_order_relaxed);  // generation 0, closed: nothing to join
  workers_.reserve(n_threads - 1);
  for (int t = 1; t < n_threads; ++t) workers_.emplace_back([this, t] { WorkerLoop(t); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true, std::memory_order_relaxed);
    state_.store((static_cast<uint64_t>(generation_ + 1) << 32) | kClosed, std::memory_order_release);
  }
  work_cv_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::ParallelFor(int64_t n_tasks, TaskFn fn) {
  if (n_tasks <= 0) return;
  if (tls_in_pool) {  // nested: run inline on this thread
    for (int64_t t = 0; t < n_tasks; ++t) fn(t, 0);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mu_);
  tls_in_pool = true;
  if (workers_.empty() || n_tasks == 1) {
    for (int64_t t = 0; t < n_tasks; ++t) fn(t, 0);
    tls_in_pool = false;
    return;
  }
  // 1. Publish the job (no worker is inside: the previous job is closed with nobody joined).
  job_fn_ = &fn;
  job_tasks_ = n_tasks;
  next_task_.store(0, std::memory_order_relaxed);
  done_tasks_.store(0, std::memory_order_relaxed);
  ++generation_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    state_.store(static_cast<uint64_t>(generation_) << 32, std::memory_order_release);
  }
  work_cv_.notify_all();
  // 2. Work alongside the workers, then wait for tasks others still run.
  RunTasks(0);
  WaitFor(mu_, done_cv_, [&] { return done_tasks_.load(std::memory_order_acquire) == n_tasks; });
  // 3. Close the job to late joiners and wait for the joined workers to leave it.
  state_.fetch_or(kClosed, std::memory_order_acq_rel);
  WaitFor(mu_, done_cv_, [&] { return (state_.load(std::memory_order_acquire) & kJoinedMask) == 0; });
  job_fn_ = nullptr;
  tls_in_pool = false;
}

void ThreadPool::RunTasks(int thread) {
  for (;;) {
    const int64_t t = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (t >= job_tasks_) return;
    (*job_fn_)(t, thread);
    if (done_tasks_.fetch_add(1, std::memory_order_acq_rel) + 1 == job_tasks_) {
      std::lock_guard<std::mutex> lock(mu_);
      done_cv_.notify_all();
    }
  }
}

void ThreadPool::WorkerLoop(int thread) {
  tls_in_pool = true;
  uint32_t seen = 0;
  for (;;) {
    uint64_t s = 0;
    WaitFor(mu_, work_cv_, [&] {
      s = state_.load(std::memory_order_acquire);
      return GenerationOf(s) != seen;
    });
    if (stop_.load(std::memory_order_relaxed)) return;
    seen = GenerationOf(s);
    // Join unless the caller already closed this job (then it needs no help and may be gone).
    bool joined = false;
    while ((s & kClosed) == 0 && GenerationOf(s) == seen) {
      if (state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
        joined = true;
        break;
      }
    }
    if (!joined) continue;
    RunTasks(thread);
    const uint64_t prev = state_.fetch_sub(1, std::memory_order_acq_rel);
    if ((prev & kClosed) != 0 && (prev & kJoinedMask) == 1) {
      std::lock_guard<std::mutex> lock(mu_);
      done_cv_.notify_all();
    }
  }
}

}  // namespace llamay::kernels
