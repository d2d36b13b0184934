// Session: a context its owner holds across requests (a conversation, an agent's branch), with the tokens
// the context does not hold yet (the last sampled token, or the rest of a cancelled prefill) and, when
// they are known, the next token's logits. The one implementation of "continue a session" for every
// surface: the server keeps sessions by id, the public API (include/llamay/llamay.h) hands them to
// programs, the CLI restores them from files.
//
// Lifecycle of one turn: Continue() builds the request and lends it the context (the session then holds no
// context, but keeps its tail and logits); the request's final event goes to Return(), which takes the
// context back: after success with its new tail, after an error as it came (the engine rolls the context
// back; the tail and logits were never touched).
//
// Thread-safety: a value; one owner at a time.
#ifndef LLAMAY_ENGINE_SESSION_H_
#define LLAMAY_ENGINE_SESSION_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "base/file.h"
#include "base/status.h"
#include "engine/engine.h"
#include "kv/snapshot.h"

namespace llamay::engine {

// Status::detail() of Session::Start and Session::Settle when `stop` cancelled them.
inline constexpr int kDetailSessionCancelled = 3004;

// Why a restore was refused (another model's weights, a damaged or truncated file, ...): the snapshot
// format's own classification, which the surfaces map to their answers.
using kv::SnapshotError;
using kv::SnapshotErrorName;
using kv::SnapshotErrorOf;

struct Session {
  kv::Context context;
  std::vector<int32_t> tail;   // tokens to run before anything new, oldest first
  std::vector<float> logits;   // [n_vocab] the next token's, when `tail` is empty and they are known

  // A session that holds `tokens` (none: an empty one): all but the last computed (reusing what the prefix
  // tree holds of them; pin_prefix as Request::pin_prefix), the last one waiting as the tail, so that the
  // first request on the session computes its logits and nothing is computed twice. `stop` as for
  // Engine::Generate: once it returns true the prefill ends with detail kDetailSessionCancelled.
  // `cached_tokens` (optional) receives how many of the computed tokens were reused rather than prefilled.
  static Result<Session> Start(Engine& engine, std::span<const int32_t> tokens, bool pin_prefix = false,
                               const std::function<bool()>& stop = {}, size_t* cached_tokens = nullptr);

  bool lent() const { return !context.valid(); }
  // Positions held plus the tail.
  size_t tokens() const { return context.size() + tail.size(); }
  // KV pages the context holds (shared ones too).
  size_t pages() const { return context.n_pages(); }

  // `base` (sampling, limits, processors, stop) made to continue this session with `tokens`: the tail
  // first, then `tokens`; with neither, the first token is sampled from the stored logits. Lends the
  // context to the request. InvalidArgument, the session unchanged, when there is nothing to continue
  // from (no tokens and no logits); FailedPrecondition when the context is already lent.
  Result<Request> Continue(std::span<const int32_t> tokens, Request base);
  // Takes back what Continue lent: `final` is the request's final event (reason kError too), or the
  // request itself when Submit refused it.
  void Return(Event& final);
  void Return(Request& refused);

  // n sessions that share every page of this one (a fork: no page is copied) with its tail and logits.
  // REQUIRES: not lent.
  std::vector<Session> Fork(size_t n) const;

  // Runs the tail through the model so the context holds every token and the next token's logits are
  // known (what a snapshot stores). The work runs on a fork: on failure the session is unchanged. `stop`
  // as for Engine::Generate; once it returns true the work ends with detail kDetailSessionCancelled.
  Status Settle(Engine& engine, const std::function<bool()>& stop = {});

  // The session as a snapshot file (kv/snapshot.h): its positions at the cache's own precision (exact)
  // unless `f32`, its recurrent checkpoints, chunk checksums, and its next-token logits when the tail is
  // empty. A snapshot holds computed positions only: Settle first, or the tail is lost.
  // SaveSnapshot writes a temporary file and renames it over `path`.
  Status WriteSnapshot(const Engine& engine, ByteSink& out, bool f32 = false) const;
  Result<std::vector<uint8_t>> SnapshotBytes(const Engine& engine, bool f32 = false) const;
  Status SaveSnapshot(const Engine& engine, const std::string& path, bool f32 = false) const;

 private:
  kv::SnapshotOptions SnapshotOptions(bool f32) const;
};

// A session restored from a snapshot whose bytes arrive in pieces (an upload, a store's chunks), streamed
// into the cache (kv::SnapshotReceiver). Finish gives the session once every byte has been checked; a
// refusal carries its SnapshotError (another model's: kWrongModel). A restored session continues exactly
// where the snapshot was taken: from the stored next-token logits, or, for a file without them, by
// running its last token again (the context rolls back one position; where it cannot, only new input
// continues it).
// Thread-safety: one thread at a time; the engine may be used by others meanwhile.
class SessionReceiver {
 public:
  explicit SessionReceiver(Engine& engine);
  Status Feed(std::span<const uint8_t> bytes) { return receiver_.Feed(bytes); }
  Result<Session> Finish();

 private:
  kv::SnapshotReceiver receiver_;
};

// The same from a file.
Result<Session> LoadSession(Engine& engine, const std::string& path);

}  // namespace llamay::engine

#endif  // LLAMAY_ENGINE_SESSION_H_
