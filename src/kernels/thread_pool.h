// ThreadPool: persistent worker threads that run the kernels' parallel loops.
//
// ParallelFor(n_tasks, fn) runs fn(task, thread) once for every task in [0, n_tasks) and returns when all
// have finished. The calling thread takes part (it is thread 0; workers are 1..num_threads()-1). Tasks are
// handed out dynamically, so which thread runs a task varies from call to call: kernels therefore give each
// task whole output elements and reduce each element in a fixed order, which makes results independent of
// the thread count and of scheduling (the determinism contract, DESIGN.md section 3).
//
// Idle workers spin briefly (a decode step issues many small loops back to back) and then sleep on a
// condition variable.
//
// Thread-safety: ParallelFor may be called from any thread; concurrent calls are serialised. A call made
// from inside a task runs inline on the calling thread (no deadlock, no extra parallelism).
#ifndef LLAMAY_KERNELS_THREAD_POOL_H_
#define LLAMAY_KERNELS_THREAD_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace llamay::kernels {

// A non-owning reference to a callable `void(int64_t task, int thread)`; valid while the callable lives.
class TaskFn {
 public:
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, TaskFn>>>
  TaskFn(F&& f)  // NOLINT: implicit by design, like std::function
      : obj_(const_cast<void*>(static_cast<const void*>(&f))), call_([](void* o, int64_t task, int thread) {
          (*static_cast<std::remove_reference_t<F>*>(o))(task, thread);
        }) {}
  void operator()(int64_t task, int thread) const { call_(obj_, task, thread); }

 private:
  void* obj_;
  void (*call_)(void*, int64_t, int);
};

// Work below which a parallel loop is not worth handing out: about a microsecond of one core (multiply-adds
// of a matrix product, or of an attention's scores and sums). Waking the workers and waiting for the last of
// them costs about that much, so a model whose every loop is this small (stories260K, the demo model) runs
// faster on one thread. Callers that know their work run such loops inline; the results are the same either
// way (they never depend on the thread count).
inline constexpr int64_t kMinParallelWork = int64_t{1} << 16;

class ThreadPool {
 public:
  // n_threads <= 0: std::thread::hardware_concurrency() (at least 1).
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  void ParallelFor(int64_t n_tasks, TaskFn fn);

 private:
  // state_ packs the job generation (high 32 bits), a closed flag and the number of workers that joined the
  // current job (low 31 bits). A worker joins with a compare-and-swap that fails once the caller has closed
  // the job, so the caller waits only for workers that actually joined, never for one that is asleep or
  // descheduled (which matters when the machine is oversubscribed).
  static constexpr uint64_t kClosed = uint64_t{1} << 31;
  static constexpr uint64_t kJoinedMask = kClosed - 1;

  void WorkerLoop(int thread);
  void RunTasks(int thread);

  std::vector<std::thread> workers_;
  std::mutex call_mu_;       // serialises ParallelFor callers
  uint32_t generation_ = 0;  // guarded by call_mu_

  // The current job: written by the caller before state_ opens it (release), read by workers that joined.
  const TaskFn* job_fn_ = nullptr;
  int64_t job_tasks_ = 0;
  alignas(64) std::atomic<uint64_t> state_{0};
  alignas(64) std::atomic<int64_t> next_task_{0};
  alignas(64) std::atomic<int64_t> done_tasks_{0};

  std::mutex mu_;  // pairs with the condition variables for threads that stopped spinning
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  std::atomic<bool> stop_{false};
};

}  // namespace llamay::kernels

#endif  // LLAMAY_KERNELS_THREAD_POOL_H_
