// Prefill and decode loops for the CLI. `run` and `ctx build|restore` share them, so a restored context
// continues token for token as `run` would on the whole prompt (DESIGN.md section 3: logits depend only on
// the model, the tokens and the KV precision, not on how the prompt was chunked, paged or restored).
// Thread-safety: functions only; the context passed in is the caller's.
#ifndef LLAMAY_TOOLS_CLI_GENERATION_H_
#define LLAMAY_TOOLS_CLI_GENERATION_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "kv/context.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace llamay::cli {

inline constexpr size_t kPrefillChunk = 256;  // tokens per Forward during prefill

// Appends `tokens` to ctx through the model, `chunk` tokens per Forward, and returns the logits of the last
// one ([n_vocab]). A progress bar goes to stderr only when stderr is a terminal and there is more than one
// chunk. REQUIRES: !tokens.empty(), chunk > 0.
Result<std::vector<float>> Prefill(const model::Model& m, kv::Context& ctx, std::span<const int32_t> tokens,
                                   size_t chunk = kPrefillChunk);

struct DecodeStats {
  int generated = 0;  // tokens emitted (an end-of-generation token is not counted)
  std::vector<int32_t> tokens;  // the emitted tokens
  double seconds = 0;
};

// Samples up to n_predict tokens, starting from `logits` (those after ctx's last position), running each
// emitted token through the model; stops early at an end-of-generation token. `history` holds ctx's tokens
// (for the penalties). `on_text` gets the text as it becomes whole UTF-8 characters, then the rest.
Result<DecodeStats> Decode(const model::Model& m, const tokenizer::Tokenizer& tok, sampling::Sampler& sampler,
                           kv::Context& ctx, std::vector<float> logits, std::vector<int32_t> history,
                           int n_predict, const std::function<void(const std::string&)>& on_text);

// "\rprefill [##########..........]  512/1024 tokens" on stderr.
void DrawProgress(size_t done, size_t total);

// Ctrl-C for `run` and `ctx build|restore`: the first SIGINT or SIGTERM sets a flag that Prefill and
// Decode check between chunks and tokens (they then fail with Interrupted()), so the command stops within
// one chunk and reports it; a second signal ends the process at once (the default action is restored).
void InstallInterruptHandler();
bool InterruptRequested();
// The status Prefill and Decode return when interrupted; `Fail(s, ExitCodeFor(s))` exits 130 for it.
Status Interrupted();
int ExitCodeFor(const Status& s, int otherwise);

// The sampler for --temp/--top-k/... and --seed (-1: a random seed).
Result<sampling::Sampler> MakeSampler(sampling::SamplingParams params, int64_t seed);

}  // namespace llamay::cli

#endif  // LLAMAY_TOOLS_CLI_GENERATION_H_
