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
#include <vector>

#include "base/status.h"
#include "engine/engine.h"
#include "kv/snapshot.h"

namespace llamay::engine {

// Status::detail() of Session::Settle when `stop` cancelled it.
inline constexpr int kDetailSettleCancelled = 3004;

struct Session {
  kv::Context context;
  std::vector<int32_t> tail;   // tokens to run before anything new, oldest first
  std::vector<float> logits;   // [n_vocab] the next token's, when `tail` is empty and they are known

  bool lent() const { return !context.valid(); }
  // Positions held plus the tail.
  size_t tokens() const { return context.size() + tail.size(); }

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
  // as for Engine::Generate; once it returns true the work ends with detail kDetailSettleCancelled.
  Status Settle(Engine& engine, const std::function<bool()>& stop = {});

  // How a session is snapshotted: the cache's own precision (exact) unless `f32`, its recurrent
  // checkpoints, chunk checksums, and its next-token logits when the tail is empty.
  kv::SnapshotOptions SnapshotOptions(bool f32 = false) const;
};

}  // namespace llamay::engine

#endif  // LLAMAY_ENGINE_SESSION_H_
