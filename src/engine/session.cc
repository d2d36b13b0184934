#include "engine/session.h"

namespace llamay::engine {

Result<Request> Session::Continue(std::span<const int32_t> tokens, Request base) {
  if (lent()) return FailedPreconditionError("the session's context is lent to a running request");
  base.prompt = tail;
  base.prompt.insert(base.prompt.end(), tokens.begin(), tokens.end());
  // No new tokens: the stored next-token logits (a restored snapshot's) give the first token.
  if (base.prompt.empty()) {
    if (logits.empty())
      return InvalidArgumentError("nothing to continue the session from: send a prompt (the session holds no "
                                  "next-token logits)");
    base.context_logits = logits;
  }
  base.context = std::move(context);
  return base;
}

void Session::Return(Event& final) {
  context = std::move(final.context);
  if (final.reason == FinishReason::kError) return;  // as it came: the old tail and logits still hold
  tail = std::move(final.tail);
  logits = std::move(final.logits);
}

void Session::Return(Request& refused) { context = std::move(refused.context); }

std::vector<Session> Session::Fork(size_t n) const {
  std::vector<Session> out;
  std::vector<kv::Context> branches = context.Fork(n);
  for (kv::Context& b : branches) out.push_back(Session{std::move(b), tail, logits});
  return out;
}

Status Session::Settle(Engine& engine, const std::function<bool()>& stop) {
  if (tail.empty()) return Status::Ok();
  Request r;
  r.context = context.Fork();
  r.prompt = tail;
  r.max_tokens = 0;
  r.sampling.temperature = 0;
  r.return_logits = true;
  LLAMAY_ASSIGN_OR_RETURN(Completion c, engine.Generate(std::move(r), /*keep_context=*/true, stop));
  if (c.reason == FinishReason::kCancelled)
    return Status(StatusCode::kUnavailable, "settling the session was cancelled", kDetailSettleCancelled);
  context = std::move(c.context);
  tail.clear();
  logits = std::move(c.logits);
  return Status::Ok();
}

kv::SnapshotOptions Session::SnapshotOptions(bool f32) const {
  kv::SnapshotOptions o;
  o.native_precision = !f32;
  o.checkpoints = true;   // a hybrid session keeps the points it can roll back to
  o.kv_checksums = true;  // an upload of it is checked chunk by chunk as it arrives
  if (tail.empty()) o.logits = logits;
  return o;
}

}  // namespace llamay::engine
