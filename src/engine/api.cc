// The public API (include/llamay/llamay.h) over the engine: Engine wraps engine::Engine with its model
// and tokenizer; Session wraps engine::Session with the session's constraint.
#include <chrono>
#include <future>
#include <optional>

#include "engine/engine.h"
#include "engine/grammar_constraint.h"
#include "engine/session.h"
#include "grammar/json_schema.h"
#include "llamay/llamay.h"
#include "model/demo_model.h"

namespace llamay {

struct Engine::Impl {
  std::unique_ptr<engine::Engine> engine;
  std::string name;
};

struct Session::Impl {
  engine::Engine* engine = nullptr;
  engine::Session session;
  std::optional<engine::GrammarConstraint> constraint;
};

namespace {

// A processor the request does not own (the session's constraint, or the caller's): the request advances
// its owner's own state.
class Lent : public LogitsProcessor {
 public:
  explicit Lent(LogitsProcessor* p) : p_(p) {}
  Status Process(std::span<float> logits) override { return p_->Process(logits); }
  Status Accept(int32_t token) override { return p_->Accept(token); }
  std::unique_ptr<LogitsProcessor> Clone() const override { return p_->Clone(); }

 private:
  LogitsProcessor* p_;
};

sampling::SamplingParams ParamsFor(const SamplingOptions& in) {
  sampling::SamplingParams sp;
  sp.temperature = in.temperature;
  sp.top_k = in.top_k;
  sp.top_p = in.top_p;
  sp.min_p = in.min_p;
  sp.repeat_penalty = in.repeat_penalty;
  sp.repeat_last_n = in.repeat_last_n;
  sp.frequency_penalty = in.frequency_penalty;
  sp.presence_penalty = in.presence_penalty;
  sp.has_seed = in.seed >= 0;
  sp.seed = sp.has_seed ? static_cast<uint64_t>(in.seed) : 0;
  return sp;
}

Result<engine::Request> RequestFor(const GenerateOptions& o) {
  engine::Request r;
  r.sampling = ParamsFor(o.sampling);
  LLAMAY_RETURN_IF_ERROR(r.sampling.Validate());
  if (o.max_tokens < 0) return InvalidArgumentError("max_tokens must be >= 0");
  r.max_tokens = o.max_tokens;
  r.stop = o.stop;
  r.report_progress = static_cast<bool>(o.on_prefill_progress);
  r.return_logits = o.max_tokens == 0;  // the session keeps them: a snapshot stores them
  return r;
}

}  // namespace

Status SamplingOptions::Validate() const { return ParamsFor(*this).Validate(); }

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

Result<std::unique_ptr<Engine>> Engine::Open(const Options& o) {
  LLAMAY_ASSIGN_OR_RETURN(engine::LoadedModel loaded, engine::LoadModelOrDemo(o.model_path, o.threads));
  std::unique_ptr<model::Model>& m = loaded.model;
  LLAMAY_ASSIGN_OR_RETURN(kv::KvPrecision precision, kv::ParseKvPrecision(o.kv_precision));
  LLAMAY_ASSIGN_OR_RETURN(engine::EngineOptions::Speculative speculative, engine::ParseSpeculative(o.speculative));
  auto impl = std::make_unique<Impl>();
  impl->name = m->file().GetStringOr("general.name", o.model_path.empty() ? model::kDemoModelName : o.model_path);
  engine::EngineOptions eo;
  eo.page_tokens = o.page_tokens;
  eo.kv_precision = precision;
  eo.kv_memory_bytes = o.kv_memory_bytes;
  eo.max_context = o.max_context != 0 ? o.max_context : m->hparams().n_ctx_train;
  eo.prefill_chunk = eo.max_batch_tokens = std::max<size_t>(o.prefill_chunk, 1);
  eo.speculative = speculative;
  LLAMAY_ASSIGN_OR_RETURN(impl->engine, engine::Engine::Create(std::move(m), std::move(loaded.tokenizer), eo));
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

const std::string& Engine::model_name() const { return impl_->name; }

Result<std::vector<int32_t>> Engine::Tokenize(std::string_view text, bool add_bos) const {
  return impl_->engine->tokenizer().Encode(text, add_bos, /*parse_special=*/false);
}

std::string Engine::Detokenize(std::span<const int32_t> tokens) const {
  return impl_->engine->tokenizer().Decode(tokens);
}

size_t Engine::max_context() const { return impl_->engine->options().max_context; }

MemoryStats Engine::Memory() const {
  const kv::CacheStats s = impl_->engine->cache().Stats();
  return MemoryStats{s.page_bytes, s.pages_live, s.pages_allocated_total, s.max_bytes};
}

std::string_view SnapshotRefusal(const Status& s) {
  const engine::SnapshotError e = engine::SnapshotErrorOf(s);
  return e == engine::SnapshotError::kNone ? std::string_view() : engine::SnapshotErrorName(e);
}

std::unique_ptr<Session> Engine::NewSession() {
  auto impl = std::make_unique<Session::Impl>();
  impl->engine = impl_->engine.get();
  return std::unique_ptr<Session>(new Session(std::move(impl)));
}

Result<std::unique_ptr<Session>> Engine::Restore(const std::string& path) {
  LLAMAY_ASSIGN_OR_RETURN(engine::Session restored, engine::LoadSession(*impl_->engine, path));
  std::unique_ptr<Session> s = NewSession();
  s->impl_->session = std::move(restored);
  return s;
}

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::~Session() = default;

Result<Output> Session::Generate(std::string_view text, const GenerateOptions& options,
                                 const std::function<bool(std::string_view)>& on_text) {
  const bool first = tokens() == 0;
  LLAMAY_ASSIGN_OR_RETURN(std::vector<int32_t> ids, impl_->engine->tokenizer().Encode(
                                                        text, /*add_special=*/first, /*parse_special=*/false,
                                                        /*continuation=*/!first));
  return Generate(std::span<const int32_t>(ids), options, on_text);
}

Result<Output> Session::Generate(std::span<const int32_t> tokens, const GenerateOptions& options,
                                 const std::function<bool(std::string_view)>& on_text) {
  Impl& s = *impl_;
  LLAMAY_ASSIGN_OR_RETURN(engine::Request r, RequestFor(options));
  const std::optional<engine::GrammarConstraint> before = s.constraint;  // an error puts it back
  if (s.constraint) r.processors.push_back(std::make_unique<Lent>(&*s.constraint));
  for (LogitsProcessor* p : options.processors) {
    if (p == nullptr) return InvalidArgumentError("GenerateOptions::processors holds a null processor");
    r.processors.push_back(std::make_unique<Lent>(p));
  }
  const bool fresh = !s.session.context.valid() && s.session.tail.empty();
  if (fresh) {  // the first turn starts from the prefix tree
    if (tokens.empty()) return InvalidArgumentError("a new session needs input to start from");
    r.prompt.assign(tokens.begin(), tokens.end());
    r.return_context = true;
  } else {
    LLAMAY_ASSIGN_OR_RETURN(r, s.session.Continue(tokens, std::move(r)));
  }
  using Clock = std::chrono::steady_clock;
  auto out = std::make_shared<Output>();
  auto done = std::make_shared<std::promise<engine::Event>>();
  const auto& progress = options.on_prefill_progress;
  const Clock::time_point start = Clock::now();
  auto first = std::make_shared<std::optional<Clock::time_point>>();  // the first token's arrival
  Result<uint64_t> id = s.engine->Submit(std::move(r), [out, done, first, &on_text, &progress](engine::Event& e) {
    if (e.prefilled > 0 && e.token < 0 && !e.finished)
      return progress(e.prefilled, e.usage.prompt_tokens - e.usage.cached_tokens);
    if ((e.token >= 0 || e.finished) && !*first) *first = Clock::now();
    if (e.token >= 0) out->tokens.push_back(e.token);
    out->text += e.text;
    const bool go_on = e.text.empty() || !on_text || on_text(e.text);
    if (e.finished) done->set_value(std::move(e));
    return go_on;
  });
  if (!id.ok()) {
    if (!fresh) s.session.Return(r);
    s.constraint = before;
    return id.status();
  }
  engine::Event end = done->get_future().get();
  const Clock::time_point finished = Clock::now();
  if (fresh) {
    if (end.reason != engine::FinishReason::kError) {
      s.session.context = std::move(end.context);
      s.session.tail = std::move(end.tail);
      s.session.logits = std::move(end.logits);
    }
  } else {
    s.session.Return(end);
  }
  if (end.reason == engine::FinishReason::kError) {
    s.constraint = before;
    return end.error;
  }
  out->finish_reason = engine::FinishReasonName(end.reason);  // stop, length or cancelled here
  out->prompt_tokens = end.usage.prompt_tokens;
  out->cached_tokens = end.usage.cached_tokens;
  out->draft_tokens = end.usage.draft_tokens;
  out->accepted_draft_tokens = end.usage.accepted_draft_tokens;
  out->prefill_seconds = std::chrono::duration<double>(first->value_or(finished) - start).count();
  out->generate_seconds = std::chrono::duration<double>(finished - first->value_or(finished)).count();
  return std::move(*out);
}

Status Session::ConstrainToJsonSchema(std::string_view schema_json) {
  LLAMAY_ASSIGN_OR_RETURN(auto g, grammar::FromJsonSchemaText(schema_json));
  LLAMAY_ASSIGN_OR_RETURN(auto vocab, impl_->engine->GrammarVocabulary());
  impl_->constraint.emplace(std::move(g), std::move(vocab));
  return Status::Ok();
}

Status Session::ConstrainToGrammar(std::string_view gbnf) {
  LLAMAY_ASSIGN_OR_RETURN(auto g, grammar::ParseGbnf(gbnf));
  LLAMAY_ASSIGN_OR_RETURN(auto vocab, impl_->engine->GrammarVocabulary());
  impl_->constraint.emplace(std::move(g), std::move(vocab));
  return Status::Ok();
}

void Session::ClearConstraint() { impl_->constraint.reset(); }

std::vector<std::unique_ptr<Session>> Session::Fork(size_t n) {
  std::vector<std::unique_ptr<Session>> out;
  std::vector<engine::Session> branches =
      impl_->session.context.valid() ? impl_->session.Fork(n) : std::vector<engine::Session>(n);
  for (engine::Session& b : branches) {
    auto impl = std::make_unique<Impl>();
    impl->engine = impl_->engine;
    impl->session = std::move(b);
    impl->constraint = impl_->constraint;
    out.push_back(std::unique_ptr<Session>(new Session(std::move(impl))));
  }
  return out;
}

Status Session::Snapshot(const std::string& path, const SnapshotOptions& options) {
  engine::Session& s = impl_->session;
  if (!s.context.valid()) return FailedPreconditionError("the session is empty: nothing to snapshot");
  LLAMAY_RETURN_IF_ERROR(s.Settle(*impl_->engine));
  return s.SaveSnapshot(*impl_->engine, path, options.f32);
}

size_t Session::tokens() const {
  const engine::Session& s = impl_->session;
  return s.context.valid() ? s.tokens() : s.tail.size();  // a new session holds no context yet
}

SessionStats Session::Stats() const {
  const engine::Session& s = impl_->session;
  if (!s.context.valid()) return SessionStats{tokens(), 0, 0};
  return SessionStats{tokens(), s.pages(), s.context.bytes()};
}

}  // namespace llamay
