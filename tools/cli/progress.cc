#include "progress.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <string>

namespace llamay::cli {
namespace {

// Set by the handler, read by the engine's worker threads through the commands' callbacks: an atomic (a
// lock-free one is safe in a signal handler), not a volatile sig_atomic_t, which is only safe for the thread
// the signal interrupted.
std::atomic<bool> g_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free);
constexpr int kInterruptedDetail = 130;  // Status::detail() of Interrupted()

extern "C" void OnInterrupt(int sig) {
  const int saved_errno = errno;  // the interrupted code may be between a call and its errno check
  g_interrupted.store(true, std::memory_order_relaxed);
  std::signal(sig, SIG_DFL);  // a second one ends the process
  errno = saved_errno;
}

}  // namespace

// "\rprefill [##########..........]  512/1024 tokens" on stderr.
void DrawProgress(size_t done, size_t total) {
  constexpr size_t kWidth = 30;
  const size_t filled = total == 0 ? kWidth : done * kWidth / total;
  std::string bar(filled, '#');
  bar.resize(kWidth, '.');
  std::fprintf(stderr, "\rprefill [%s] %zu/%zu tokens", bar.c_str(), done, total);
  std::fflush(stderr);
}

std::function<bool(size_t, size_t)> PrefillProgress(size_t chunk, bool* bar) {
  const bool tty = ::isatty(STDERR_FILENO);
  return [tty, chunk, bar](size_t done, size_t total) {
    if (tty && total > chunk) {
      *bar = true;
      DrawProgress(done, total);
    }
    return !InterruptRequested();
  };
}

void InstallInterruptHandler() {
  std::signal(SIGINT, OnInterrupt);
  std::signal(SIGTERM, OnInterrupt);
}

bool InterruptRequested() { return g_interrupted.load(std::memory_order_relaxed); }

Status Interrupted() { return Status(StatusCode::kUnavailable, "interrupted", kInterruptedDetail); }

int ExitCodeFor(const Status& s, int otherwise) {
  return s.code() == StatusCode::kUnavailable && s.detail() == kInterruptedDetail ? 130 : otherwise;
}

}  // namespace llamay::cli
