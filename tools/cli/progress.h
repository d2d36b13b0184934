// Long CLI work (a prefill, a generation) shows progress and stops on Ctrl-C. `run` and `ctx build|restore`
// share these, through the public API's progress and text callbacks.
// Thread-safety: functions only; the interrupt flag is set by a signal handler.
#ifndef LLAMAY_TOOLS_CLI_PROGRESS_H_
#define LLAMAY_TOOLS_CLI_PROGRESS_H_

#include <cstddef>
#include <functional>

#include "base/status.h"

namespace llamay::cli {

inline constexpr size_t kPrefillChunk = 256;  // prompt tokens per forward step, unless -b says otherwise

// "\rprefill [##########..........]  512/1024 tokens" on stderr.
void DrawProgress(size_t done, size_t total);

// The public API's prefill callback for a command: a bar on stderr when it is a terminal and the prompt
// takes more than one chunk (*bar then says that a line was drawn), and false (cancel) once Ctrl-C came.
std::function<bool(size_t, size_t)> PrefillProgress(size_t chunk, bool* bar);

// Ctrl-C for `run` and `ctx build|restore`: the first SIGINT or SIGTERM sets a flag that the commands'
// callbacks check between chunks and tokens (returning false, which cancels the work), so the command stops
// within one chunk and reports it; a second signal ends the process at once (the default action is
// restored).
void InstallInterruptHandler();
bool InterruptRequested();
// The status an interrupted command reports; `Fail(s, ExitCodeFor(s))` exits 130 for it.
Status Interrupted();
int ExitCodeFor(const Status& s, int otherwise);

}  // namespace llamay::cli

#endif  // LLAMAY_TOOLS_CLI_PROGRESS_H_
