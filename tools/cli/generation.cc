#include "generation.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>

#include "format.h"
#include "tokenizer/detokenizer.h"

namespace llamay::cli {
namespace {

volatile std::sig_atomic_t g_interrupted = 0;
constexpr int kInterruptedDetail = 130;  // Status::detail() of Interrupted()

extern "C" void OnInterrupt(int sig) {
  g_interrupted = 1;
  std::signal(sig, SIG_DFL);  // a second one ends the process
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

void InstallInterruptHandler() {
  std::signal(SIGINT, OnInterrupt);
  std::signal(SIGTERM, OnInterrupt);
}

bool InterruptRequested() { return g_interrupted != 0; }

Status Interrupted() { return Status(StatusCode::kUnavailable, "interrupted", kInterruptedDetail); }

int ExitCodeFor(const Status& s, int otherwise) {
  return s.code() == StatusCode::kUnavailable && s.detail() == kInterruptedDetail ? 130 : otherwise;
}

Result<std::vector<float>> Prefill(const model::Model& m, kv::Context& ctx, std::span<const int32_t> tokens,
                                   size_t chunk) {
  if (tokens.empty() || chunk == 0) return InvalidArgumentError("prefill: no tokens or a zero chunk size");
  const bool progress = tokens.size() > chunk && ::isatty(STDERR_FILENO);
  std::vector<float> last;
  for (size_t i = 0; i < tokens.size(); i += chunk) {
    if (InterruptRequested()) {
      if (progress) std::fprintf(stderr, "\n");
      return Interrupted();
    }
    const size_t n = std::min(chunk, tokens.size() - i);
    model::SeqInput in{&ctx, tokens.subspan(i, n), false};
    last.clear();
    Status s = m.Forward(std::span(&in, 1), &last);
    if (!s.ok()) {
      if (progress) std::fprintf(stderr, "\n");
      return s;
    }
    if (progress) DrawProgress(i + n, tokens.size());
  }
  if (progress) std::fprintf(stderr, "\n");
  return last;
}

Result<DecodeStats> Decode(const model::Model& m, const tokenizer::Tokenizer& tok, sampling::Sampler& sampler,
                           kv::Context& ctx, std::vector<float> logits, std::vector<int32_t> history,
                           int n_predict, const std::function<void(const std::string&)>& on_text) {
  const auto t0 = std::chrono::steady_clock::now();
  tokenizer::StreamingDetokenizer detok(tok);
  DecodeStats st;
  for (; st.generated < n_predict; ++st.generated) {
    if (InterruptRequested()) return Interrupted();
    const int32_t next = sampler.Sample(logits, history);
    history.push_back(next);
    if (tok.IsEog(next)) break;
    st.tokens.push_back(next);
    on_text(detok.Push(next));
    logits.clear();
    model::SeqInput in{&ctx, std::span(&next, 1), false};
    LLAMAY_RETURN_IF_ERROR(m.Forward(std::span(&in, 1), &logits));
  }
  on_text(detok.Flush());
  st.seconds = SecondsSince(t0);
  return st;
}

Result<sampling::Sampler> MakeSampler(sampling::SamplingParams params, int64_t seed) {
  if (seed >= 0) {
    params.seed = static_cast<uint64_t>(seed);
    params.has_seed = true;
  }
  return sampling::Sampler::Create(std::move(params));
}

}  // namespace llamay::cli
