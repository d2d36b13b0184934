#include "engine/session.h"

namespace llamay::engine {
namespace {

// Runs `prompt` through the model and nothing more (no token sampled), keeping the context: how a session
// takes tokens in. `what` names the work in the status of a cancellation.
Result<Completion> TakeIn(Engine& engine, Request r, const std::function<bool()>& stop, const char* what) {
  r.max_tokens = 0;
  r.sampling.temperature = 0;
  LLAMAY_ASSIGN_OR_RETURN(Completion c, engine.Generate(std::move(r), /*keep_context=*/true, stop));
  if (c.reason == FinishReason::kCancelled)
    return Status(StatusCode::kUnavailable, std::string(what) + " was cancelled", kDetailSessionCancelled);
  return c;
}

}  // namespace

Result<Session> Session::Start(Engine& engine, std::span<const int32_t> tokens, bool pin_prefix,
                               const std::function<bool()>& stop, size_t* cached_tokens) {
  if (cached_tokens != nullptr) *cached_tokens = 0;
  if (tokens.size() <= 1) return Session{engine.cache().NewContext(), {tokens.begin(), tokens.end()}, {}};
  Request r;
  r.prompt.assign(tokens.begin(), tokens.end() - 1);
  r.pin_prefix = pin_prefix;
  LLAMAY_ASSIGN_OR_RETURN(Completion c, TakeIn(engine, std::move(r), stop, "starting the session"));
  if (cached_tokens != nullptr) *cached_tokens = c.usage.cached_tokens;
  return Session{std::move(c.context), {tokens.back()}, {}};
}

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
  r.return_logits = true;
  LLAMAY_ASSIGN_OR_RETURN(Completion c, TakeIn(engine, std::move(r), stop, "settling the session"));
  context = std::move(c.context);
  tail.clear();
  logits = std::move(c.logits);
  return Status::Ok();
}

Status Session::WriteSnapshot(const Engine& engine, ByteSink& out, bool f32) const {
  return kv::WriteSnapshot(context, engine.model().weight_digest(), out, SnapshotOptions(f32));
}

Result<std::vector<uint8_t>> Session::SnapshotBytes(const Engine& engine, bool f32) const {
  return kv::SnapshotToBytes(context, engine.model().weight_digest(), SnapshotOptions(f32));
}

Status Session::SaveSnapshot(const Engine& engine, const std::string& path, bool f32) const {
  return kv::SaveSnapshot(context, engine.model().weight_digest(), path, SnapshotOptions(f32));
}

kv::SnapshotOptions Session::SnapshotOptions(bool f32) const {
  kv::SnapshotOptions o;
  o.native_precision = !f32;
  o.checkpoints = true;   // a hybrid session keeps the points it can roll back to
  o.kv_checksums = true;  // an upload of it is checked chunk by chunk as it arrives
  if (tail.empty()) o.logits = logits;
  return o;
}

namespace {

// A restored context as a session: with its stored logits, or with its last token as the tail when the
// file has none and the context can step back over it.
Session Restored(kv::Context ctx, std::vector<float> logits) {
  Session s{std::move(ctx), {}, std::move(logits)};
  if (s.logits.empty() && s.context.size() > 0) {
    const int32_t last = s.context.tokens().back();
    if (s.context.Rollback(s.context.size() - 1).ok()) s.tail = {last};
  }
  return s;
}

}  // namespace

SessionReceiver::SessionReceiver(Engine& engine) : receiver_(engine.cache(), engine.model().weight_digest()) {}

Result<Session> SessionReceiver::Finish() {
  std::vector<float> logits;
  LLAMAY_ASSIGN_OR_RETURN(kv::Context ctx, receiver_.Finish(&logits));
  return Restored(std::move(ctx), std::move(logits));
}

Result<Session> LoadSession(Engine& engine, const std::string& path) {
  std::vector<float> logits;
  LLAMAY_ASSIGN_OR_RETURN(kv::Context ctx,
                          kv::LoadSnapshot(engine.cache(), path, engine.model().weight_digest(), &logits));
  return Restored(std::move(ctx), std::move(logits));
}

}  // namespace llamay::engine
