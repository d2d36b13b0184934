// llamay's public C++ API: an engine over one model, and sessions: contexts a program holds, continues,
// forks, snapshots and restores. The CLI runs through it; the same engine (its decode loop, prefix tree,
// batching and constraints) serves the HTTP server.
//
//   auto engine = llamay::Engine::Open({.model_path = "model.gguf"});   // empty path: the demo model
//   auto session = (*engine)->NewSession();
//   llamay::GenerateOptions g;
//   g.max_tokens = 64;
//   auto out = session->Generate("Once upon a time", g, [](std::string_view piece) {
//     std::fwrite(piece.data(), 1, piece.size(), stdout);
//     return true;                                    // false: stop now
//   });
//   auto branches = session->Fork(4);                 // 4 sessions sharing every page, nothing copied
//   session->Snapshot("story.llamayctx");             // restore later with engine->Restore(path)
//
// Sessions: a session holds its context (every token so far), the tokens not yet run through the model (the
// last one generated), the next token's logits when known, and optionally a constraint (a JSON Schema or a
// GBNF grammar) whose state carries from one Generate to the next and into forks. A session's first
// Generate reuses whatever the prefix tree holds of its prompt; later ones prefill only the new text.
// Exactness: a forked or restored session continues with logits bit-identical to the original's.
//
// Errors: Status / Result<T> (status.h); nothing throws. Thread-safety: an Engine is thread-safe and runs
// many sessions' requests together (continuous batching); a Session is used by one thread at a time. The
// Engine must outlive its sessions.
#ifndef LLAMAY_LLAMAY_H_
#define LLAMAY_LLAMAY_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "llamay/logits_processor.h"
#include "llamay/status.h"

namespace llamay {

struct Options {
  std::string model_path;          // a GGUF file; empty: the built-in demo model (meaningless text)
  int threads = 0;                 // compute threads; 0: one per core
  uint32_t page_tokens = 64;       // KV positions per page
  std::string kv_precision = "f16";  // "f32", "f16" or "q8_0"
  size_t kv_memory_bytes = size_t{1} << 30;  // every page of every session and of the prefix tree
  size_t max_context = 0;          // positions per session; 0: the model's trained context
  size_t prefill_chunk = 256;      // prompt tokens per forward step
  // "auto": speculative decoding drafts from text already seen and verifies the drafts in one step where
  // they are taken (output identical either way); "off": one token per step.
  std::string speculative = "auto";
};

struct SamplingOptions {
  float temperature = 0.8f;  // 0: greedy
  int top_k = 40;            // 0: off
  float top_p = 0.95f;       // 1: off
  float min_p = 0.05f;       // 0: off
  float repeat_penalty = 1.0f;
  int repeat_last_n = 64;
  float frequency_penalty = 0, presence_penalty = 0;
  int64_t seed = -1;  // -1: random

  // OK, or InvalidArgument naming the first bad field, its allowed range and the value given (what
  // Generate answers for them).
  Status Validate() const;
};

struct GenerateOptions {
  SamplingOptions sampling;
  int max_tokens = 128;            // 0: only take in the input
  std::vector<std::string> stop;   // the text ends before the first of these
  // Filters on each step's logits, run in order after the session's constraint and before sampling
  // (logits_processor.h). Not owned: each must outlive the call. Their state is theirs to keep between
  // calls (a session's constraint, by contrast, carries itself).
  std::vector<LogitsProcessor*> processors;
  // Called after each chunk of a long prompt: tokens computed so far, of `total`. Return false to stop.
  std::function<bool(size_t done, size_t total)> on_prefill_progress;
};

struct Output {
  std::string text;               // what was generated (cut at a stop sequence)
  std::vector<int32_t> tokens;    // the generated tokens
  std::string finish_reason;      // "stop" (end of generation or a stop sequence), "length", "cancelled"
  size_t prompt_tokens = 0;       // the session's tokens before generation, input included
  size_t cached_tokens = 0;       // of those, reused rather than computed
  size_t draft_tokens = 0;        // speculative decoding: drafted tokens verified
  size_t accepted_draft_tokens = 0;  // of them, tokens generated without a step of their own
  double prefill_seconds = 0;     // from the call until the input was taken in (the first token's wait)
  double generate_seconds = 0;    // from then until the end
};

struct SnapshotOptions {
  // The positions as f32 (portable to a cache of any precision) instead of the cache's own precision
  // (exact, and half the bytes of f32 for an f16 cache).
  bool f32 = false;
};

// What a session holds.
struct SessionStats {
  size_t tokens = 0;  // as Session::tokens()
  size_t pages = 0;   // KV pages, shared ones too
  size_t bytes = 0;   // those pages and a hybrid model's recurrent state
};

// The engine's memory: every session's pages and the prefix tree's.
struct MemoryStats {
  size_t page_bytes = 0;              // one page
  size_t pages_live = 0;              // pages held now
  uint64_t pages_allocated_total = 0; // pages ever allocated (a fork allocates none)
  size_t bytes_limit = 0;             // Options::kv_memory_bytes
};

// Why Engine::Restore refused a snapshot: "wrong_model" (an intact file computed by another model's
// weights), "bad_magic", "unsupported_version", "truncated", "checksum_mismatch", "bad_length" or
// "geometry_mismatch"; empty when `s` is not such a refusal.
std::string_view SnapshotRefusal(const Status& s);

class Session;

class Engine {
 public:
  // Loads the model (Options::model_path) and starts the scheduler. InvalidArgument for a bad option;
  // the model loader's errors for a missing, malformed or unsupported file.
  static Result<std::unique_ptr<Engine>> Open(const Options& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // The model's name (general.name, else the file name) and its vocabulary.
  const std::string& model_name() const;
  Result<std::vector<int32_t>> Tokenize(std::string_view text, bool add_bos = true) const;
  std::string Detokenize(std::span<const int32_t> tokens) const;
  // Positions a session may hold.
  size_t max_context() const;
  MemoryStats Memory() const;

  // A new, empty session.
  std::unique_ptr<Session> NewSession();
  // A session from a snapshot file (Session::Snapshot, the server's GET /v1/contexts/{id}/snapshot, or
  // `llamay ctx build`): it continues exactly where the snapshot was taken (from the stored
  // next-token logits; a file without them runs its last token again). The snapshot's own errors
  // (another model's weights, damage, truncation) come back as they are: SnapshotRefusal names them.
  Result<std::unique_ptr<Session>> Restore(const std::string& path);

  struct Impl;

 private:
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class Session {
 public:
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Appends `text` (the first call adds BOS) or `tokens` to the session and generates up to
  // options.max_tokens tokens; `on_text` (optional) gets the text as it becomes whole characters and
  // returning false ends generation ("cancelled"). Blocks until done. After an error the session is as it
  // was before the call. With max_tokens 0 the input is only taken in, and the session keeps the next
  // token's logits (a Snapshot stores them; the next Generate samples from them without a forward pass).
  Result<Output> Generate(std::string_view text, const GenerateOptions& options,
                          const std::function<bool(std::string_view)>& on_text = {});
  Result<Output> Generate(std::span<const int32_t> tokens, const GenerateOptions& options,
                          const std::function<bool(std::string_view)>& on_text = {});

  // Constrains every later Generate: the output must follow the JSON Schema / the GBNF grammar (root rule
  // `root`). The constraint's state carries across Generate calls (an answer cut by max_tokens continues
  // where it stopped) and into forks. InvalidArgument naming what is unsupported or malformed; the
  // session's constraint is then unchanged.
  Status ConstrainToJsonSchema(std::string_view schema_json);
  Status ConstrainToGrammar(std::string_view gbnf);
  void ClearConstraint();

  // n sessions that continue from exactly here, sharing every page (nothing is copied until one of them
  // writes a shared page).
  std::vector<std::unique_ptr<Session>> Fork(size_t n);
  // Writes the session to `path` (a temporary file renamed into place): its positions, the weights'
  // digest and the next token's logits. Runs any pending token through the model first.
  Status Snapshot(const std::string& path, const SnapshotOptions& options = {});

  // Tokens in the session (those run through the model and the pending one).
  size_t tokens() const;
  SessionStats Stats() const;

  struct Impl;

 private:
  friend class Engine;
  explicit Session(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace llamay

#endif  // LLAMAY_LLAMAY_H_
