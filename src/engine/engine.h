// Engine: model + KV cache + samplers behind a scheduler that runs many requests at once.
//
// Every request goes through the prefix tree: its prompt's longest computed prefix is reused (only the
// suffix is prefilled), and a finished request's context is retained so the next turn of a conversation
// hits. One scheduler thread runs forward steps that mix prefill chunks and decode tokens of several
// requests (continuous batching): decode is memory-bound, so N streams cost far less than N steps, and
// long prefills are chunked so running streams keep flowing.
//
// Determinism: a request's tokens depend only on the model, its tokens, its sampling parameters and seed
// and the KV precision, never on which other requests shared its steps (DESIGN.md section 3).
//
// Memory: the cache is bounded by EngineOptions::kv_memory_bytes. Under pressure the cache evicts prefix
// tree entries first; when that is not enough the most recently admitted request is preempted: its pages
// go back to the cache (its computed prefix stays in the tree while memory allows) and it waits at the
// front of the queue, with its sampler and history intact, until a running request finishes; it then
// resumes exactly where it was (re-prefill is bit-identical). A request that does not fit even alone fails
// with ResourceExhausted; no other request is touched.
//
// Overload: at most max_active requests run and at most max_queue wait; Submit refuses more with
// kUnavailable and leaves the request (and its session context) with the caller.
//
// One decode loop for every surface: a request carries its sampling parameters, a chain of logits
// processors (logits_processor.h: a grammar constraint, for one) applied before the sampler, and its stop
// sequences. The engine detokenizes what it generates: events carry text that is whole UTF-8 characters,
// with any stop sequence and what follows it cut off.
//
// Thread-safety: Submit/Cancel/Generate are thread-safe. Sinks run on the scheduler thread and must not
// block; a sink returning false cancels its request.
#ifndef LLAMAY_ENGINE_ENGINE_H_
#define LLAMAY_ENGINE_ENGINE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "engine/draft.h"
#include "engine/logits_processor.h"
#include "grammar/vocabulary.h"
#include "kv/cache.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace llamay::engine {

struct EngineOptions {
  uint32_t page_tokens = kv::kDefaultPageTokens;
  kv::KvPrecision kv_precision = kv::KvPrecision::kF16;
  size_t kv_memory_bytes = size_t{1} << 30;
  size_t tree_max_bytes = 0;      // 0: bounded by kv_memory_bytes only
  // How the prefix tree weighs the recurrent checkpoints it keeps against its KV (kv/cache.h; --checkpoint-
  // retention): by what each saves per byte and how often it is resumed, or by last use alone.
  kv::CheckpointRetention checkpoint_retention = kv::CheckpointRetention::kValue;
  size_t max_batch_tokens = 512;  // tokens per forward step, all requests together
  size_t prefill_chunk = 256;     // prefill tokens per request per step
  size_t max_active = 16;         // requests in flight; the rest wait in the queue
  size_t max_queue = 256;         // requests waiting; Submit refuses more (kUnavailable)
  // Pinned prefixes (Request::pin_prefix) hold at most this share of the KV budget; past it the oldest pin
  // is released (its entry stays in the tree, evictable). Pins can then never starve other requests.
  double max_pinned_share = 0.5;
  // Positions one context may hold, prompt and generated together (the server's --ctx-size, by default the
  // model's trained context); 0: no limit. A request whose context would start beyond it fails
  // (kInvalidArgument, detail kDetailContextLength); generation that reaches it ends (kLength).
  size_t max_context = 0;
  // Speculative decoding (draft.h): a decoding request drafts tokens from text already seen and verifies
  // them in one step, keeping those its own sampling picks; output is identical either way (DESIGN.md
  // section 3 makes a verified token's logits those of plain decode). kAuto: on, and each request falls
  // back to plain decode while its drafts are not accepted. Recurrent layers take rejected tokens back out
  // of their chunked scans' pending tokens, so their drafts stop short of a chunk's end.
  enum class Speculative { kAuto, kOff };
  Speculative speculative = Speculative::kAuto;
  size_t max_draft = 16;               // drafted tokens one step verifies, at most
  size_t draft_index_tokens = 1 << 20;  // tokens of finished requests indexed for drafts (0: none)
  // What one more token costs in a decode step, as a share of a one-token step: < 0 measured as decode
  // runs (draft.h, StepCost); >= 0 fixed (tests and benchmarks that must draft whatever the machine's timing).
  double draft_token_cost = -1;
};

// "auto" or "off" (--speculative); InvalidArgument naming the value otherwise.
Result<EngineOptions::Speculative> ParseSpeculative(std::string_view name);

// Status::detail() of a request refused for its length (EngineOptions::max_context).
inline constexpr int kDetailContextLength = 3001;

// A model and its tokenizer, as every surface loads them: the GGUF at `path`, or the built-in demo model
// when `path` is empty. threads: compute threads (0: one per core). The loaders' errors (missing file,
// malformed GGUF, unsupported architecture or vocabulary) come back as they are.
struct LoadedModel {
  std::unique_ptr<model::Model> model;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
};
Result<LoadedModel> LoadModelOrDemo(const std::string& path, int threads = 0);

struct EngineStats {
  uint64_t preempted = 0;  // requests that gave their memory back and resumed later
  uint64_t rejected = 0;   // Submit calls refused because the queue was full
  uint64_t unpinned = 0;   // pinned prefixes released to keep pins within max_pinned_share
  uint64_t draft_steps = 0;            // steps that verified a draft
  uint64_t draft_tokens = 0;           // tokens drafted and verified
  uint64_t accepted_draft_tokens = 0;  // of them, tokens the request's sampling picked
};

enum class FinishReason { kNone, kStop, kLength, kCancelled, kError };
const char* FinishReasonName(FinishReason r);

struct Request {
  // Tokens to process: the whole prompt, or only the new tokens when `context` continues a session.
  std::vector<int32_t> prompt;
  // A held context to continue (llamay_session); empty: start from the prefix tree. It is handed back in
  // the final event.
  kv::Context context;
  sampling::SamplingParams sampling;
  int max_tokens = 128;  // 0: only prefill (the final event then carries the context)
  bool retain = true;        // retain the finished context in the prefix tree
  bool pin_prefix = false;   // pin the prompt's prefix in the tree (llamay_retain_prefix)
  int top_logprobs = -1;     // >= 0: report the chosen token's log probability and this many alternatives
  bool ignore_eos = false;   // end-of-generation tokens do not end it (benchmarks; vLLM's ignore_eos)
  // >= 0 (echo): report each prompt token's log probability given the tokens before it, with this many
  // alternatives, from the prefill's own logits (no second pass). Entries cover prompt[1..]: prompt[0]'s
  // preceding position is not computed by this request. The prefix tree holds KV, not logits, so such a
  // request reuses nothing from the tree (it computes prompt[0..] itself; its context is retained as usual).
  int prompt_logprobs = -1;
  // A session whose context's next-token logits are known (a restored snapshot that carries them): with no
  // prompt tokens, the first token is sampled from these, without a forward pass. n_vocab values.
  std::vector<float> context_logits;
  // max_tokens == 0: the final event carries the next-token logits of the last position processed (what
  // a snapshot stores so that its restore can sample without a forward pass).
  bool return_logits = false;
  // Applied in order to every step's logits before sampling (logits_processor.h). Logprobs still report
  // the model's own logits (before processors, as before penalties and filters).
  std::vector<std::unique_ptr<LogitsProcessor>> processors;
  // Generation ends (kStop) where the text first contains one of these; the text is cut before it. The
  // token that completed it is in the context (a session's tail) and counted, as llama.cpp and vLLM do.
  std::vector<std::string> stop;
  // Progress events during the prefill (a progress bar): after each chunk, an event (token -1, not final)
  // whose `prefilled` says how many of the request's new tokens have been processed.
  bool report_progress = false;
  // The final event carries the context (and its tail) even when the request did not come with one: a
  // new session's first turn, which starts from the prefix tree. Not after an error.
  bool return_context = false;
  // Recurrent layouts: positions in `prompt` (0 < p < prompt.size()) after which the prefill takes a
  // checkpoint of the recurrent state, besides the layout's grid and the prompt's end: where a chat
  // template ends a message, which is where agents' next requests diverge. The engine adds the position
  // before the prompt's last token itself, so that the same prompt sent again resumes with one token to
  // run (a match keeps at least one token to compute logits from). Ignored for other layouts.
  std::vector<size_t> checkpoints;
  // false: this request never drafts (llamay_speculative: false); its output is the same either way.
  bool speculative = true;
  // Benchmarks only: drafts come from this known continuation, at the request's generated offset, and from
  // no other source; `draft_length` > 0 fixes their length (else it adapts to what is accepted).
  std::vector<int32_t> draft_oracle;
  size_t draft_length = 0;
};

// One prompt token's log probability given the tokens before it (Request::prompt_logprobs).
struct PromptLogprob {
  int32_t token = -1;
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top_logprobs;  // most probable first
};

struct Usage {
  size_t prompt_tokens = 0;
  size_t cached_tokens = 0;  // prompt tokens taken from the prefix tree or the session, not prefilled
  size_t completion_tokens = 0;
  size_t draft_tokens = 0;           // tokens drafted and verified (speculative decoding)
  size_t accepted_draft_tokens = 0;  // of them, tokens the sampling picked: generated without a step of their own
};

struct Event {
  int32_t token = -1;  // a generated token; -1 in a final event without one
  // Generated text now ready: whole UTF-8 characters, none of a stop sequence. Text that might still
  // begin a stop sequence (or an incomplete character) is held back until it cannot, or until the final
  // event, which carries the rest. The texts of all events together are the answer.
  std::string text;
  // A generated token's place in the text: the code points generated before it (OpenAI's text_offset).
  size_t text_offset = 0;
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top_logprobs;
  // Request::prompt_logprobs: one event (token -1, not final) when the prefill ends, before any token;
  // entry i is prompt[i + 1]'s.
  std::vector<PromptLogprob> prompt_logprobs;
  // Request::report_progress: new tokens processed so far, of usage.prompt_tokens - usage.cached_tokens.
  size_t prefilled = 0;
  bool finished = false;
  FinishReason reason = FinishReason::kNone;
  Usage usage;          // final events
  Status error;         // reason kError
  // Final events with reason kStop: the stop sequence (Request::stop) that ended the text; empty when an
  // end-of-generation token did.
  std::string stop_sequence;
  // Final events: the request's context (sessions, always, even after an error; or max_tokens == 0).
  // After an error a session's context is as it came.
  kv::Context context;
  // Final events with a context, except errors: the tokens the context does not hold yet (the last sampled
  // token, an end-of-generation token too; or what a cancelled request had not processed). A session
  // prepends them to its next request's tokens.
  std::vector<int32_t> tail;
  // Request::return_logits, when the prompt was processed to its end: the next token's logits.
  std::vector<float> logits;
};

using Sink = std::function<bool(Event&)>;

struct Completion {
  std::vector<int32_t> tokens;
  std::string text;  // the events' texts together
  FinishReason reason = FinishReason::kNone;
  Usage usage;
  kv::Context context;
  std::vector<int32_t> tail;  // see Event::tail
  std::vector<PromptLogprob> prompt_logprobs;  // see Event::prompt_logprobs
  std::vector<float> logits;                   // see Event::logits
};

class Engine {
 public:
  // The tokenizer decides which tokens end generation.
  static Result<std::unique_ptr<Engine>> Create(std::unique_ptr<model::Model> model,
                                                std::unique_ptr<tokenizer::Tokenizer> tokenizer,
                                                const EngineOptions& options);
  ~Engine();  // cancels what is running and joins the scheduler
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request; `sink` receives its events. Returns the request id, or kUnavailable when the queue
  // is full: then `request` is left as it was (a session's context stays with the caller) and `sink` is
  // never called.
  Result<uint64_t> Submit(Request&& request, Sink sink);
  // Cancels a request: a running one ends (FinishReason::kCancelled) before its next step, so a long
  // prefill stops within one chunk; a queued one when it is admitted.
  void Cancel(uint64_t id);
  // Cancels every request queued or running now (shutdown). Later submissions are not affected.
  void CancelAll();
  // From now on Submit refuses every request (Unavailable): a shutdown, so that a request whose handler
  // was still preparing it (tokenizing a long prompt) when CancelAll ran does not start afterwards.
  void StopAccepting();
  // Undoes StopAccepting (a shutdown's own last work: settling what --state-dir saves).
  void StartAccepting();
  // Submits and waits. `keep_context`: the context comes back in the result instead of being closed.
  // `stop` (optional) is polled every 50 ms while waiting; once it returns true the request is cancelled
  // and the result has reason kCancelled (a departed client, a shutdown).
  Result<Completion> Generate(Request request, bool keep_context = false, const std::function<bool()>& stop = {});

  const model::Model& model() const { return *model_; }
  const tokenizer::Tokenizer& tokenizer() const { return *tokenizer_; }
  // The vocabulary as grammars see it (grammar/vocabulary.h), built on first use and shared: each token's
  // bytes, end-of-generation tokens as end tokens, control tokens empty (never allowed), except those whose
  // text is in `special_texts` (a tool-call format's markers, such as <|python_tag|>), which keep it.
  Result<std::shared_ptr<const grammar::Vocabulary>> GrammarVocabulary(const std::vector<std::string>& special_texts = {});
  kv::Cache& cache() { return *cache_; }
  const kv::Cache& cache() const { return *cache_; }
  const EngineOptions& options() const { return options_; }
  size_t queue_depth() const;
  size_t active() const;
  EngineStats stats() const;

 private:
  struct Seq;
  Engine(std::unique_ptr<model::Model> model, std::unique_ptr<tokenizer::Tokenizer> tokenizer,
         std::unique_ptr<kv::Cache> cache, const EngineOptions& options);
  void Loop();
  void Admit(std::unique_ptr<Seq> s);
  void Step();
  // How many of n pending tokens a context of `size` positions runs this step: a prefill chunk is cut at
  // the next checkpoint boundary of a recurrent layout.
  size_t ChunkEnd(size_t size, size_t n) const;
  // ChunkEnd, also cut at the next of the request's checkpoint positions while it prefills.
  size_t StepTokens(const Seq& s, size_t n) const;
  // Whether any position of a context can be rolled back to (full attention only).
  bool CanRollBack() const;
  // Puts a session back as it came (after an error, or before a preempted request waits).
  void ReturnSession(Seq& s);
  void Emit(Seq& s, int32_t token, std::span<const float> logits);
  // Speculative decoding: fills s.verify with the last sampled token and a draft of at most `room` tokens;
  // false when there is none (the request decodes one token).
  bool Drafted(Seq& s, size_t room);
  // Samples through a verified draft's rows (one per token of s.verify) as plain decode would, emitting
  // each token, until the sampling departs from the draft; the context keeps what plain decode would hold.
  void Verify(Seq& s, std::span<const float> rows);
  // Takes the context back to the `keep` positions of a verification (the rejected tokens go).
  void SettleDraft(Seq& s);
  // Detokenizes `token` into s's text; the part ready to send, and whether a stop sequence ended it.
  std::string TextOf(Seq& s, int32_t token, bool* stopped);
  // Records the prompt logprobs that a prefill chunk's rows (one per position from `start`) give.
  void CapturePromptLogprobs(Seq& s, size_t start, std::span<const float> rows);
  void Finish(Seq& s, FinishReason reason, Status error = Status::Ok());
  void Preempt(Seq& s);
  void Pin(const kv::Context& ctx);
  void Resume(Seq& s);

  // Runs the processors (on a copy) and the sampler on a step's logits: the token, or -1 after finishing
  // the request with the error.
  int32_t SampleNext(Seq& s, std::span<const float> logits);

  std::unique_ptr<model::Model> model_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  std::mutex vocab_mu_;
  std::map<std::vector<std::string>, std::shared_ptr<const grammar::Vocabulary>> vocabs_;  // GUARDED_BY(vocab_mu_)
  std::unique_ptr<kv::Cache> cache_;
  const EngineOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Seq>> queue_;  // GUARDED_BY(mu_)
  std::vector<uint64_t> cancelled_;         // GUARDED_BY(mu_)
  uint64_t cancel_all_below_ = 1;           // GUARDED_BY(mu_): ids below it were cancelled by CancelAll
  bool stopping_ = false;                   // GUARDED_BY(mu_)
  bool refusing_ = false;                   // GUARDED_BY(mu_): StopAccepting was called
  uint64_t next_id_ = 1;                    // GUARDED_BY(mu_)
  EngineStats stats_;                       // GUARDED_BY(mu_)
  std::vector<std::unique_ptr<Seq>> active_;  // scheduler thread only
  std::atomic<size_t> active_count_{0};
  // Set by a preemption: the queue waits until a running request finishes (scheduler thread only).
  bool hold_admission_ = false;
  // Prefixes this engine pinned, oldest first, and their positions (scheduler thread only).
  std::deque<std::vector<int32_t>> pinned_;
  size_t pinned_positions_ = 0;
  size_t max_pinned_positions_ = 0;
  // Finished requests' tokens, a source of drafts (scheduler thread only).
  std::unique_ptr<SuffixIndex> drafts_;
  StepCost step_cost_;  // decode steps' time against their tokens: what a drafted token costs
  std::thread thread_;
};

}  // namespace llamay::engine

#endif  // LLAMAY_ENGINE_ENGINE_H_
