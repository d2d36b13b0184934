#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <limits>

#include "model/demo_model.h"
#include "sampling/logprobs.h"
#include "tokenizer/detokenizer.h"

namespace llamay::engine {
namespace {

// Drafts: the request's own history is searched for its last 4 tokens, else 3, else 2; the index of
// finished requests for the last 3. Shorter matches draft too often from coincidences.
constexpr size_t kLookupMinNgram = 2, kLookupMaxNgram = 4, kIndexNgram = 3;
// A request's acceptance starts at the prior 0.6 (1.2 of 2 trials); its counts halve past 64 trials so that
// they follow the text. Until decode steps of several sizes have been timed, one more token is assumed to
// cost a tenth of a step. A draft must promise 5% more tokens per unit of time than plain decode; when none
// does, the request decodes plainly for 16 tokens, then 32, and so on up to 512, then probes again.
constexpr double kPriorHits = 1.2, kPriorTrials = 2, kMaxTrials = 64, kAssumedShare = 0.1, kMinGain = 1.05;
constexpr size_t kMinPause = 16, kMaxPause = 512;

}  // namespace

Result<LoadedModel> LoadModelOrDemo(const std::string& path, int threads) {
  LoadedModel out;
  if (path.empty()) {
    LLAMAY_ASSIGN_OR_RETURN(gguf::File f, gguf::File::FromBuffer(model::BuildDemoModel()));
    LLAMAY_ASSIGN_OR_RETURN(out.model, model::Model::FromFile(std::move(f), threads));
  } else {
    LLAMAY_ASSIGN_OR_RETURN(out.model, model::Model::Load(path, threads));
  }
  LLAMAY_ASSIGN_OR_RETURN(out.tokenizer, tokenizer::Tokenizer::FromGguf(out.model->file()));
  return out;
}

Result<EngineOptions::Speculative> ParseSpeculative(std::string_view name) {
  if (name == "auto") return EngineOptions::Speculative::kAuto;
  if (name == "off") return EngineOptions::Speculative::kOff;
  std::string msg = "speculative decoding must be \"auto\" or \"off\", not \"";
  msg.append(name).append("\"");
  return InvalidArgumentError(msg);
}

const char* FinishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::kNone: return "none";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
  }
  return "unknown";
}

struct Engine::Seq {
  uint64_t id = 0;
  Request req;
  Sink sink;
  kv::Context ctx;
  std::vector<int32_t> pending;  // tokens still to run through the model
  std::vector<int32_t> history;  // every token of the context and generated, for penalties
  std::unique_ptr<sampling::Sampler> sampler;
  Usage usage;
  bool session = false;     // the context came with the request and goes back with the final event
  size_t session_base = 0;  // a session's size when it came: an error rolls it back to this
  // Layouts that cannot roll back anywhere (a recurrent state, windows released behind the position): a
  // fork of the session as it came, which an error or a preemption returns to instead.
  kv::Context session_fork;
  bool preempted = false;   // waiting in the queue to resume; `pending` holds every token to recompute
  int32_t last = -1;        // the last sampled token, not yet run through the model
  bool prefilled = false;   // the prompt has been processed
  bool done = false;
  // Request::prompt_logprobs: entry i is prompt[i + 1]'s, filled as the prefill computes the position
  // before it; the prompt starts at context position `prompt_base`, and its positions [0, lp_next) have
  // been captured (so a resumed prefill may reuse them from the tree, and no more).
  std::vector<PromptLogprob> prompt_lps;
  std::vector<float> final_logits;  // Request::return_logits
  // Generated text: the detokenizer, the text not yet in an event (it might begin a stop sequence), the
  // longest stop sequence, and whether a stop sequence ended the text (nothing after it is sent).
  std::unique_ptr<tokenizer::StreamingDetokenizer> detok;
  std::string unsent;
  size_t max_stop = 0;
  bool text_closed = false;
  std::string stop_sequence;  // the stop sequence that closed the text, if one did
  size_t code_points = 0;  // in the detokenizer's output so far
  std::vector<float> scratch;  // the processors' copy of a step's logits
  size_t prompt_base = 0;
  size_t lp_next = 0;
  // Recurrent layouts: context positions (ascending) where the prefill takes a checkpoint
  // (Request::checkpoints, and the position before the prompt's last token).
  std::vector<size_t> cut_at;
  // Speculative decoding: this step's input when it verifies a draft (the last sampled token, then the
  // draft; empty otherwise), and while its rows are sampled, the positions the context keeps if the token
  // being emitted is the last one (what plain decode would hold then; 0: not verifying).
  std::vector<int32_t> verify;
  size_t keep = 0;
  model::RecurrentUndo undo;  // recurrent layers: what the verification step did, to take back its rejects
  // Drafted tokens taken, of those tried (a rejected one counts as a trial; those after it do not): the
  // chance the next drafted token is taken. And the fallback: no drafts before completion_tokens reaches
  // pause_until; each fallback doubles the next one's length.
  double hits = kPriorHits, trials = kPriorTrials;
  size_t pause_until = 0;
  size_t pause = kMinPause;
  // The positions the context holds as plain decode would: while a draft is verified, the context holds
  // the whole draft, of which only `keep` positions count.
  size_t held() const { return keep ? keep : ctx.size(); }
  bool wants_prompt_logprobs() const { return req.prompt_logprobs >= 0 && !prefilled; }
};

Engine::Engine(std::unique_ptr<model::Model> model, std::unique_ptr<tokenizer::Tokenizer> tokenizer,
               std::unique_ptr<kv::Cache> cache, const EngineOptions& options)
    : model_(std::move(model)), tokenizer_(std::move(tokenizer)), cache_(std::move(cache)), options_(options) {
  const kv::KvLayout& l = cache_->layout();
  // A model without attention layers keeps no pages: its memory does not grow with positions.
  const double budget_positions =
      l.page_bytes() == 0 ? static_cast<double>(kv::kMaxPositions)
                          : static_cast<double>(options_.kv_memory_bytes / l.page_bytes()) * static_cast<double>(l.page_tokens);
  max_pinned_positions_ = static_cast<size_t>(budget_positions * std::clamp(options_.max_pinned_share, 0.0, 1.0));
  if (options_.speculative != EngineOptions::Speculative::kOff && options_.draft_index_tokens > 0)
    drafts_ = std::make_unique<SuffixIndex>(options_.draft_index_tokens, kIndexNgram);
  thread_ = std::thread([this] { Loop(); });
}

Result<std::unique_ptr<Engine>> Engine::Create(std::unique_ptr<model::Model> model,
                                               std::unique_ptr<tokenizer::Tokenizer> tokenizer,
                                               const EngineOptions& options) {
  if (!model || !tokenizer) return InvalidArgumentError("engine: a model and a tokenizer are required");
  if (options.max_batch_tokens == 0 || options.prefill_chunk == 0 || options.max_active == 0)
    return InvalidArgumentError("engine: batch sizes must be positive");
  kv::CacheOptions co;
  co.layout = model->KvLayoutFor(options.page_tokens, options.kv_precision);
  co.max_bytes = options.kv_memory_bytes;
  co.tree_max_bytes = options.tree_max_bytes;
  co.checkpoint_retention = options.checkpoint_retention;
  LLAMAY_ASSIGN_OR_RETURN(std::unique_ptr<kv::Cache> cache, kv::Cache::Create(co));
  return std::unique_ptr<Engine>(new Engine(std::move(model), std::move(tokenizer), std::move(cache), options));
}

Engine::~Engine() {
  {
    std::lock_guard l(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

Result<uint64_t> Engine::Submit(Request&& request, Sink sink) {
  auto s = std::make_unique<Seq>();
  uint64_t id;
  {
    std::lock_guard l(mu_);
    if (refusing_) return UnavailableError("engine: shutting down; no new requests are accepted");
    if (queue_.size() >= options_.max_queue) {
      ++stats_.rejected;
      return UnavailableError("engine: " + std::to_string(queue_.size()) + " requests are already waiting (" +
                              std::to_string(active_count_.load()) + " running); retry later");
    }
    s->req = std::move(request);
    s->sink = std::move(sink);
    id = s->id = next_id_++;
    queue_.push_back(std::move(s));
  }
  cv_.notify_all();
  return id;
}

void Engine::Cancel(uint64_t id) {
  {
    std::lock_guard l(mu_);
    cancelled_.push_back(id);
  }
  cv_.notify_all();
}

void Engine::StopAccepting() {
  std::lock_guard l(mu_);
  refusing_ = true;
}

void Engine::StartAccepting() {
  std::lock_guard l(mu_);
  refusing_ = false;
}

void Engine::CancelAll() {
  {
    std::lock_guard l(mu_);
    // Every id issued so far: the scheduler finishes those running; those queued end when admitted.
    cancel_all_below_ = next_id_;
  }
  cv_.notify_all();
}

Result<std::shared_ptr<const grammar::Vocabulary>> Engine::GrammarVocabulary(
    const std::vector<std::string>& special_texts) {
  std::lock_guard l(vocab_mu_);
  if (auto it = vocabs_.find(special_texts); it != vocabs_.end()) return it->second;
  const int32_t n = static_cast<int32_t>(model_->hparams().n_vocab);
  std::vector<std::string> bytes(static_cast<size_t>(n));
  std::vector<int32_t> ends;
  for (int32_t id = 0; id < n; ++id) {
    if (tokenizer_->IsEog(id)) {
      ends.push_back(id);
    } else if (tokenizer_->IsControl(id)) {
      const std::string& text = tokenizer_->TokenText(id);
      if (std::find(special_texts.begin(), special_texts.end(), text) != special_texts.end()) bytes[id] = text;
    } else {
      bytes[id] = tokenizer_->TokenToPiece(id);
    }
  }
  LLAMAY_ASSIGN_OR_RETURN(std::shared_ptr<const grammar::Vocabulary> v,
                          grammar::Vocabulary::Build(std::move(bytes), std::move(ends)));
  vocabs_.emplace(special_texts, v);
  return v;
}

size_t Engine::queue_depth() const {
  std::lock_guard l(mu_);
  return queue_.size();
}

size_t Engine::active() const { return active_count_.load(); }

EngineStats Engine::stats() const {
  std::lock_guard l(mu_);
  return stats_;
}

Result<Completion> Engine::Generate(Request request, bool keep_context, const std::function<bool()>& stop) {
  auto done = std::make_shared<std::promise<Result<Completion>>>();
  auto result = std::make_shared<Completion>();
  Result<uint64_t> id = Submit(std::move(request), [done, result, keep_context](Event& e) {
    if (e.token >= 0) result->tokens.push_back(e.token);
    result->text += e.text;
    if (!e.prompt_logprobs.empty()) result->prompt_logprobs = std::move(e.prompt_logprobs);
    if (!e.logits.empty()) result->logits = std::move(e.logits);
    if (!e.finished) return true;
    if (e.reason == FinishReason::kError) {
      done->set_value(e.error);
      return true;
    }
    result->reason = e.reason;
    result->usage = e.usage;
    if (keep_context) {
      result->context = std::move(e.context);
      result->tail = std::move(e.tail);
    }
    done->set_value(std::move(*result));
    return true;
  });
  if (!id.ok()) return id.status();
  std::future<Result<Completion>> f = done->get_future();
  if (stop) {
    while (f.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
      if (stop()) {
        Cancel(*id);
        break;
      }
    }
  }
  return f.get();
}

void Engine::Loop() {
  for (;;) {
    std::vector<std::unique_ptr<Seq>> incoming;
    std::vector<uint64_t> cancelled;
    uint64_t cancel_below = 0;
    {
      std::unique_lock l(mu_);
      cv_.wait(l, [&] { return stopping_ || !queue_.empty() || !active_.empty(); });
      if (stopping_) {
        for (auto& s : queue_) active_.push_back(std::move(s));
        queue_.clear();
        break;
      }
      // After a preemption nothing new starts until a running request finishes and frees memory.
      while (!queue_.empty() && active_.size() + incoming.size() < options_.max_active &&
             !(hold_admission_ && !active_.empty())) {
        incoming.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      cancelled.swap(cancelled_);
      cancel_below = cancel_all_below_;
    }
    for (auto& s : incoming) Admit(std::move(s));
    for (auto& s : active_)
      if (!s->done &&
          (s->id < cancel_below || std::find(cancelled.begin(), cancelled.end(), s->id) != cancelled.end()))
        Finish(*s, FinishReason::kCancelled);
    if (!cancelled.empty()) {  // ids still queued are cancelled when they are admitted
      std::lock_guard l(mu_);
      for (uint64_t id : cancelled)
        if (std::any_of(queue_.begin(), queue_.end(), [&](auto& q) { return q->id == id; }))
          cancelled_.push_back(id);
    }
    Step();
    std::erase_if(active_, [](const std::unique_ptr<Seq>& s) { return s->done; });
    active_count_ = active_.size();
  }
  for (auto& s : active_)
    if (!s->done) Finish(*s, FinishReason::kCancelled);
  active_.clear();
}

void Engine::Admit(std::unique_ptr<Seq> sp) {
  Seq& s = *sp;
  active_.push_back(std::move(sp));
  if (s.preempted) return Resume(s);
  Request& r = s.req;
  if (r.context.valid()) {  // a session: from here on its context goes back with the final event, always
    s.session = true;
    s.ctx = std::move(r.context);
    s.session_base = s.ctx.size();
  }
  auto sampler = sampling::Sampler::Create(r.sampling);
  if (!sampler.ok()) return Finish(s, FinishReason::kError, sampler.status());
  s.sampler = std::make_unique<sampling::Sampler>(std::move(*sampler));
  s.detok = std::make_unique<tokenizer::StreamingDetokenizer>(*tokenizer_);
  for (const std::string& stop : r.stop) {
    if (stop.empty()) return Finish(s, FinishReason::kError, InvalidArgumentError("a stop sequence is empty"));
    s.max_stop = std::max(s.max_stop, stop.size());
  }
  for (const auto& p : r.processors)
    if (!p) return Finish(s, FinishReason::kError, InvalidArgumentError("a logits processor is null"));
  for (int32_t t : r.prompt)
    if (t < 0 || static_cast<uint32_t>(t) >= model_->hparams().n_vocab)
      return Finish(s, FinishReason::kError,
                    InvalidArgumentError("token id " + std::to_string(t) + " outside the vocabulary"));
  if (r.max_tokens < 0) return Finish(s, FinishReason::kError, InvalidArgumentError("max_tokens must be >= 0"));
  if (s.session) {
    if (s.ctx.cache() != cache_.get())
      return Finish(s, FinishReason::kError, InvalidArgumentError("the session's context belongs to another engine"));
    s.history = s.ctx.tokens();
    s.usage.cached_tokens = s.ctx.size();
    s.pending = r.prompt;
    if (!CanRollBack()) s.session_fork = s.ctx.Fork();
  } else {
    if (r.prompt.empty()) return Finish(s, FinishReason::kError, InvalidArgumentError("empty prompt"));
    // Reuse the longest computed prefix, keeping at least one token to compute logits from; prompt
    // logprobs need the logits of every position from the first, which the tree does not keep.
    kv::MatchResult m = r.prompt_logprobs >= 0 ? kv::MatchResult{cache_->NewContext(), 0}
                                               : cache_->Match(std::span(r.prompt.data(), r.prompt.size() - 1));
    s.ctx = std::move(m.context);
    s.usage.cached_tokens = m.matched;
    s.pending.assign(r.prompt.begin() + static_cast<long>(m.matched), r.prompt.end());
  }
  s.history.insert(s.history.end(), r.prompt.begin(), r.prompt.end());
  s.usage.prompt_tokens = s.usage.cached_tokens + s.pending.size();
  if (options_.max_context != 0 && s.usage.prompt_tokens > options_.max_context) {
    const size_t held = s.session ? s.session_base : 0;
    return Finish(s, FinishReason::kError,
                  Status(StatusCode::kInvalidArgument,
                         "the request is " + std::to_string(s.usage.prompt_tokens) + " tokens" +
                             (held ? " (" + std::to_string(held) + " of them already in the session)" : "") +
                             ", more than the context size of " + std::to_string(options_.max_context) +
                             " (--ctx-size)",
                         kDetailContextLength));
  }
  s.prompt_base = s.session ? s.session_base : 0;
  if (cache_->groups().has_recurrent() && !r.prompt.empty()) {
    for (size_t p : r.checkpoints)
      if (p > 0 && p < r.prompt.size()) s.cut_at.push_back(s.prompt_base + p);
    s.cut_at.push_back(s.prompt_base + r.prompt.size() - 1);
    std::sort(s.cut_at.begin(), s.cut_at.end());
    s.cut_at.erase(std::unique(s.cut_at.begin(), s.cut_at.end()), s.cut_at.end());
  }
  if (r.prompt_logprobs >= 0 && !r.prompt.empty()) s.prompt_lps.resize(r.prompt.size() - 1);
  if (s.pending.empty()) {  // a session continued with no new tokens
    if (r.max_tokens == 0) return Finish(s, FinishReason::kLength);
    if (r.context_logits.empty())
      return Finish(s, FinishReason::kError,
                    InvalidArgumentError("no new tokens to continue from (this session holds no next-token logits)"));
    if (r.context_logits.size() != model_->hparams().n_vocab)
      return Finish(s, FinishReason::kError,
                    InvalidArgumentError("the session's logits have " + std::to_string(r.context_logits.size()) +
                                         " values; the vocabulary has " + std::to_string(model_->hparams().n_vocab)));
    // The stored logits are what a forward pass over the context's last position gave: sample from them.
    s.prefilled = true;
    const std::vector<float> logits = std::move(r.context_logits);
    const int32_t t = SampleNext(s, logits);
    if (t >= 0) Emit(s, t, logits);
  }
}

void Engine::Step() {
  // 1. Compose the step: each running request contributes a prefill chunk or its one decode token.
  std::vector<Seq*> seqs;
  std::vector<model::SeqInput> inputs;
  size_t budget = options_.max_batch_tokens;
  bool decode_only = true;  // every input a decode token or a verification: a sample for step_cost_
  for (auto& sp : active_) {
    Seq& s = *sp;
    s.verify.clear();
    if (s.done || s.pending.empty() || budget == 0) continue;
    if (s.prefilled && s.pending.size() == 1 && budget > 1 && Drafted(s, budget - 1)) {
      seqs.push_back(&s);
      inputs.push_back({&s.ctx, std::span(s.verify), /*all_logits=*/true, /*keep_windows=*/true,
                        cache_->groups().has_recurrent() ? &s.undo : nullptr});
      budget -= s.verify.size();
      continue;
    }
    const size_t n = StepTokens(s, std::min({s.pending.size(), options_.prefill_chunk, budget}));
    decode_only = decode_only && s.prefilled && n == 1;
    seqs.push_back(&s);
    inputs.push_back({&s.ctx, std::span(s.pending.data(), n), s.wants_prompt_logprobs()});
    budget -= n;
  }
  if (seqs.empty()) return;
  // 2. One forward step for all of them.
  std::vector<float> logits;
  const auto started = std::chrono::steady_clock::now();
  Status st = model_->Forward(inputs, &logits);
  if (st.ok() && decode_only && options_.speculative != EngineOptions::Speculative::kOff) {
    size_t tokens = 0;
    for (const model::SeqInput& in : inputs) tokens += in.tokens.size();
    step_cost_.Add(static_cast<double>(tokens),
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  }
  if (!st.ok()) {
    // A failed forward changes no context. Memory: the newest running request gives way (preempted, or
    // failed when it runs alone); the others retry next step. Anything else fails the step's requests.
    if (st.code() != StatusCode::kResourceExhausted) {
      for (Seq* s : seqs) Finish(*s, FinishReason::kError, st);
      return;
    }
    // Drafts need pages plain decode does not: before anyone is preempted for memory, the step is retried
    // without them (and those requests draft nothing for a while).
    bool drafted = false;
    for (Seq* s : seqs) {
      if (s->verify.empty()) continue;
      drafted = true;
      s->pause_until = s->usage.completion_tokens + kMinPause;
    }
    if (drafted) return;
    Seq* newest = nullptr;
    size_t running = 0;
    for (auto& sp : active_) {
      if (sp->done) continue;
      ++running;
      if (!newest || sp->id > newest->id) newest = sp.get();
    }
    if (running > 1) return Preempt(*newest);
    const kv::CacheStats cs = cache_->Stats();
    Finish(*seqs.back(), FinishReason::kError,
           ResourceExhaustedError(st.message() + " (the request needs more KV memory than is free even when it runs "
                                  "alone; " + std::to_string(cs.pages_live) + " pages are held)"));
    return;
  }
  // 3. Sample where a request's pending tokens are all processed. A request that asked for every
  // position's logits (prompt logprobs) has one row per token, the last one its next token's.
  const size_t V = model_->hparams().n_vocab;
  size_t row = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    Seq& s = *seqs[i];
    const size_t n = inputs[i].tokens.size();
    const size_t rows = inputs[i].all_logits ? n : 1;
    const std::span<const float> mine(logits.data() + row * V, rows * V);
    row += rows;
    if (!s.verify.empty()) {
      Verify(s, mine);
      continue;
    }
    if (inputs[i].all_logits) CapturePromptLogprobs(s, s.ctx.size() - n, mine);
    const std::span<const float> last = mine.subspan((rows - 1) * V);
    s.pending.erase(s.pending.begin(), s.pending.begin() + static_cast<long>(n));
    // A message boundary (or the position before the prompt's last token): a checkpoint there.
    if (!s.prefilled && std::binary_search(s.cut_at.begin(), s.cut_at.end(), s.ctx.size())) (void)s.ctx.Checkpoint();
    if (!s.pending.empty()) {  // prefill continues next step
      if (s.req.report_progress && !s.prefilled) {
        Event e;
        e.usage = s.usage;
        const size_t todo = s.usage.prompt_tokens - s.usage.cached_tokens;
        e.prefilled = todo - std::min(todo, s.pending.size());  // (a resumed request recomputes more)
        if (!s.sink(e)) Finish(s, FinishReason::kCancelled);
      }
      continue;
    }
    if (!s.prefilled) {
      s.prefilled = true;
      if (s.req.prompt_logprobs >= 0) {
        Event e;
        e.prompt_logprobs = std::move(s.prompt_lps);
        if (!s.sink(e)) {
          Finish(s, FinishReason::kCancelled);
          continue;
        }
      }
      // The prompt's end is where the next turn of an agent resumes: a checkpoint of the recurrent
      // state there (donated to the prefix tree with the context when it is retained).
      if (cache_->groups().has_recurrent()) (void)s.ctx.Checkpoint();
      if (s.req.pin_prefix) Pin(s.ctx);
      if (s.req.max_tokens == 0) {
        if (s.req.return_logits) s.final_logits.assign(last.begin(), last.end());
        Finish(s, FinishReason::kLength);
        continue;
      }
    }
    const int32_t t = SampleNext(s, last);
    if (t >= 0) Emit(s, t, last);
  }
}

int32_t Engine::SampleNext(Seq& s, std::span<const float> raw) {
  if (s.req.processors.empty()) return s.sampler->Sample(raw, s.history);
  std::vector<float>& logits = s.scratch;
  logits.assign(raw.begin(), raw.end());
  for (auto& p : s.req.processors) {
    Status st = p->Process(logits);
    if (!st.ok()) {
      Finish(s, FinishReason::kError, st);
      return -1;
    }
  }
  if (std::none_of(logits.begin(), logits.end(), [](float v) { return v != -std::numeric_limits<float>::infinity(); })) {
    Finish(s, FinishReason::kError, FailedPreconditionError("the logits processors allow no token at all"));
    return -1;
  }
  const int32_t token = s.sampler->Sample(logits, s.history);
  for (auto& p : s.req.processors) {
    Status st = p->Accept(token);
    if (!st.ok()) {
      Finish(s, FinishReason::kError, st);
      return -1;
    }
  }
  return token;
}

std::string Engine::TextOf(Seq& s, int32_t token, bool* stopped) {
  *stopped = false;
  if (s.text_closed) return "";
  const std::string piece = s.detok->Push(token);
  for (const char c : piece) s.code_points += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
  s.unsent += piece;
  size_t cut = std::string::npos;
  for (const std::string& stop : s.req.stop) {
    const size_t at = s.unsent.find(stop);
    if (at < cut) {
      cut = at;
      s.stop_sequence = stop;
    }
  }
  if (cut != std::string::npos) {
    *stopped = true;
    s.text_closed = true;
    std::string out = s.unsent.substr(0, cut);
    s.unsent.clear();
    return out;
  }
  // Hold back what could still become a stop sequence, and never split a character.
  size_t ready = s.unsent.size() - std::min(s.unsent.size(), s.max_stop > 0 ? s.max_stop - 1 : 0);
  while (ready > 0 && ready < s.unsent.size() && (static_cast<uint8_t>(s.unsent[ready]) & 0xC0) == 0x80) --ready;
  std::string out = s.unsent.substr(0, ready);
  s.unsent.erase(0, ready);
  return out;
}

void Engine::CapturePromptLogprobs(Seq& s, size_t start, std::span<const float> rows) {
  const size_t V = model_->hparams().n_vocab;
  for (size_t r = 0; r * V < rows.size(); ++r) {
    const size_t pos = start + r - s.prompt_base;  // the prompt position whose logits this row holds
    if (pos + 1 >= s.req.prompt.size()) break;     // the last prompt position predicts a new token
    const std::span<const float> l = rows.subspan(r * V, V);
    PromptLogprob& p = s.prompt_lps[pos];
    p.token = s.req.prompt[pos + 1];
    p.logprob = sampling::TokenLogprob(l, p.token);
    p.top_logprobs = sampling::TopLogprobs(l, s.req.prompt_logprobs);
    s.lp_next = std::max(s.lp_next, pos + 1);
  }
}

bool Engine::CanRollBack() const {
  const kv::StateGroups& g = cache_->groups();
  return !g.has_recurrent() && std::none_of(g.attention.begin(), g.attention.end(),
                                            [](const kv::LayerGroup& a) { return a.window != 0; });
}

void Engine::ReturnSession(Seq& s) {
  if (!s.session_fork.valid()) {
    const Status st = s.ctx.Rollback(s.session_base);
    LLAMAY_CHECK(st.ok()) << "a full-attention session rolls back anywhere: " << st.ToString();
    return;
  }
  s.ctx = s.session_fork.Fork();  // keep the fork: a preempted request can come back to it again
}

size_t Engine::ChunkEnd(size_t size, size_t n) const {
  // Recurrent layouts: a prefill step never crosses a checkpoint boundary, so the model takes the
  // checkpoint at the step's end (Model::Forward) and a later prompt can resume there.
  const size_t every = cache_->layout().checkpoint_tokens;
  if (every == 0 || n <= 1) return n;
  const size_t next = (size / every + 1) * every;
  return std::min(n, next - size);
}

size_t Engine::StepTokens(const Seq& s, size_t n) const {
  n = ChunkEnd(s.ctx.size(), n);
  if (s.prefilled || n <= 1) return n;
  const auto next = std::upper_bound(s.cut_at.begin(), s.cut_at.end(), s.ctx.size());
  if (next != s.cut_at.end() && *next < s.ctx.size() + n) n = *next - s.ctx.size();
  return n;
}

bool Engine::Drafted(Seq& s, size_t room) {
  const Request& r = s.req;
  if (options_.speculative == EngineOptions::Speculative::kOff || !r.speculative || s.last < 0) return false;
  if (s.usage.completion_tokens < s.pause_until) return false;
  // Recurrent layers take a step back only when no chunk of their scans folded inside it.
  const size_t rewindable = model_->RewindableTokens(s.ctx.size());
  if (rewindable < 2) return false;
  // The length that pays best, given this request's acceptance and what a token costs in a step.
  size_t want = r.draft_length;
  if (want == 0) {
    const double share =
        options_.draft_token_cost >= 0 ? options_.draft_token_cost : step_cost_.ExtraTokenShare(kAssumedShare);
    want = BestDraftLength(s.hits / s.trials, share, options_.max_draft, kMinGain);
    if (want == 0) {
      // Drafting does not pay for this request now: plain decode for a while, then a probe, from counts
      // moved halfway back to the prior.
      s.pause_until = s.usage.completion_tokens + s.pause;
      s.pause = std::min(2 * s.pause, kMaxPause);
      s.hits = (s.hits + kPriorHits) / 2;
      s.trials = (s.trials + kPriorTrials) / 2;
      return false;
    }
  }
  // Tokens worth drafting: the step after this one must still be allowed (max_tokens), and every drafted
  // position must fit the context.
  size_t max = std::min({room, rewindable - 1, options_.max_draft, want,
                         static_cast<size_t>(r.max_tokens) - std::min(static_cast<size_t>(r.max_tokens), s.usage.completion_tokens + 1)});
  if (options_.max_context != 0) max = std::min(max, options_.max_context - std::min(options_.max_context, s.ctx.size() + 1));
  if (max == 0) return false;
  Draft d;
  if (!r.draft_oracle.empty()) {
    const size_t at = std::min(s.usage.completion_tokens, r.draft_oracle.size());
    d.tokens.assign(r.draft_oracle.begin() + static_cast<long>(at),
                    r.draft_oracle.begin() + static_cast<long>(std::min(r.draft_oracle.size(), at + max)));
  } else {
    d = LookupDraft(s.history, max, kLookupMinNgram, kLookupMaxNgram);
    if (d.tokens.empty() && drafts_) d = drafts_->Lookup(s.history, max);
  }
  if (d.tokens.empty()) return false;
  s.verify.assign(1, s.pending[0]);
  s.verify.insert(s.verify.end(), d.tokens.begin(), d.tokens.end());
  return true;
}

void Engine::SettleDraft(Seq& s) {
  if (s.ctx.valid() && s.ctx.size() > s.keep) {
    // Attention layers truncate; recurrent layers take the rejected tokens back out of their chunk state;
    // windowed layers kept their pages through the step and release them now.
    const Status st = cache_->groups().has_recurrent() ? model_->RewindRecurrent(s.ctx, s.keep, s.undo)
                                                       : s.ctx.Rollback(s.keep);
    LLAMAY_CHECK(st.ok()) << "a verified draft rolls back: " << st.ToString();
  }
  if (s.ctx.valid()) s.ctx.TrimWindows();
  s.keep = 0;
}

void Engine::Verify(Seq& s, std::span<const float> rows) {
  const size_t V = model_->hparams().n_vocab;
  const size_t k = s.verify.size() - 1;
  const size_t base = s.ctx.size() - s.verify.size();
  size_t accepted = 0;
  s.usage.draft_tokens += k;
  for (size_t j = 0; j <= k; ++j) {
    // Row j holds the logits after verify[0..j]: plain decode's logits for the next token once the tokens
    // before it were accepted. Sampling them in order draws the same random numbers plain decode draws.
    const std::span<const float> row = rows.subspan(j * V, V);
    s.keep = base + j + 1;
    s.pending.clear();  // processed; Emit sets the next one (a request finishing now has none left over)
    const int32_t t = SampleNext(s, row);
    if (t < 0) break;  // finished with the processors' error
    const bool taken = j < k && t == s.verify[j + 1];
    accepted += taken;
    s.usage.accepted_draft_tokens += taken;  // before Emit: a final event carries the count
    Emit(s, t, row);
    if (s.done || !taken) break;
  }
  if (!s.done) SettleDraft(s);  // (Finish settled it already)
  s.verify.clear();
  // What the next draft expects of this request: its acceptance so far (recent text weighing more).
  s.hits += static_cast<double>(accepted);
  s.trials += static_cast<double>(accepted + (accepted < k ? 1 : 0));
  if (s.trials > kMaxTrials) {
    s.hits /= 2;
    s.trials /= 2;
  }
  if (accepted > 0) s.pause = kMinPause;
  std::lock_guard l(mu_);
  ++stats_.draft_steps;
  stats_.draft_tokens += k;
  stats_.accepted_draft_tokens += accepted;
}

void Engine::Emit(Seq& s, int32_t token, std::span<const float> logits) {
  s.last = token;
  if (!s.req.ignore_eos && tokenizer_->IsEog(token)) return Finish(s, FinishReason::kStop);
  s.history.push_back(token);
  ++s.usage.completion_tokens;
  Event e;
  e.token = token;
  e.text_offset = s.code_points;
  bool stopped = false;
  e.text = TextOf(s, token, &stopped);
  if (s.req.top_logprobs >= 0) {
    e.logprob = sampling::TokenLogprob(logits, token);
    e.top_logprobs = sampling::TopLogprobs(logits, s.req.top_logprobs);
  }
  if (!s.sink(e)) return Finish(s, FinishReason::kCancelled);
  if (stopped) return Finish(s, FinishReason::kStop);
  if (s.usage.completion_tokens >= static_cast<size_t>(s.req.max_tokens)) return Finish(s, FinishReason::kLength);
  s.pending.assign(1, token);
  // The context is full: the token is emitted, but cannot be run through the model (it stays the tail).
  if (options_.max_context != 0 && s.held() + 1 > options_.max_context) return Finish(s, FinishReason::kLength);
}

void Engine::Preempt(Seq& s) {
  // Everything the request has computed is recomputed on resume. A session keeps the part it came with
  // (its owner held that memory before the request); the rest goes back to the cache.
  std::vector<int32_t> tokens = s.ctx.tokens();
  const size_t keep = s.session ? s.session_base : 0;
  tokens.erase(tokens.begin(), tokens.begin() + static_cast<long>(keep));
  tokens.insert(tokens.end(), s.pending.begin(), s.pending.end());
  s.pending = std::move(tokens);
  if (s.session) {
    ReturnSession(s);
  } else {
    if (s.req.retain && s.ctx.size() > 0) (void)cache_->Retain(s.ctx);  // evictable, maybe reused on resume
    s.ctx.Close();
  }
  s.preempted = true;
  hold_admission_ = true;
  auto it = std::find_if(active_.begin(), active_.end(), [&](auto& p) { return p.get() == &s; });
  std::unique_ptr<Seq> owned = std::move(*it);
  active_.erase(it);
  std::lock_guard l(mu_);
  ++stats_.preempted;
  queue_.push_front(std::move(owned));
}

void Engine::Pin(const kv::Context& ctx) {
  if (ctx.size() == 0 || ctx.size() > max_pinned_positions_) return;  // a prefix that big is not pinned
  if (!cache_->Retain(ctx, /*pin=*/true).ok()) return;
  // Counted in whole pages and without sharing: a conservative bound on what pins hold.
  const size_t page = cache_->layout().page_tokens;
  auto positions = [page](const std::vector<int32_t>& t) { return (t.size() + page - 1) / page * page; };
  std::vector<int32_t> tokens = ctx.tokens();
  auto same = std::find(pinned_.begin(), pinned_.end(), tokens);
  if (same != pinned_.end()) {  // pinned again: it becomes the newest
    pinned_positions_ -= positions(*same);
    pinned_.erase(same);
  }
  pinned_positions_ += positions(tokens);
  pinned_.push_back(std::move(tokens));
  while (pinned_positions_ > max_pinned_positions_) {
    (void)cache_->SetPinned(pinned_.front(), false);
    pinned_positions_ -= positions(pinned_.front());
    pinned_.pop_front();
    std::lock_guard l(mu_);
    ++stats_.unpinned;
  }
}

void Engine::Resume(Seq& s) {
  s.preempted = false;
  if (s.session) return;  // its context holds its base; `pending` holds the rest
  // Reuse what the tree still has of it, keeping at least one token to compute logits from (and, for
  // prompt logprobs, only positions whose logits were captured before).
  const size_t reusable = s.wants_prompt_logprobs() ? std::min(s.lp_next, s.pending.size() - 1) : s.pending.size() - 1;
  kv::MatchResult m =
      reusable == 0 ? kv::MatchResult{cache_->NewContext(), 0} : cache_->Match(std::span(s.pending.data(), reusable));
  s.ctx = std::move(m.context);
  s.pending.erase(s.pending.begin(), s.pending.begin() + static_cast<long>(m.matched));
}

void Engine::Finish(Seq& s, FinishReason reason, Status error) {
  if (s.done) return;
  s.done = true;
  hold_admission_ = false;
  if (s.keep) SettleDraft(s);  // inside a verified draft: back to what plain decode would hold now
  if (s.session && reason == FinishReason::kError) ReturnSession(s);
  s.session_fork.Close();
  if (s.ctx.valid() && s.req.retain && s.ctx.size() > 0 &&
      (reason == FinishReason::kStop || reason == FinishReason::kLength)) {
    (void)cache_->Retain(s.ctx);
    if (drafts_) drafts_->Add(s.history);
  }
  Event e;
  e.finished = true;
  e.reason = reason;
  e.usage = s.usage;
  e.error = std::move(error);
  if (reason == FinishReason::kStop) e.stop_sequence = s.stop_sequence;
  if (reason != FinishReason::kError && s.detok && !s.text_closed) e.text = std::move(s.unsent) + s.detok->Flush();
  if (reason == FinishReason::kLength) e.logits = std::move(s.final_logits);
  if (s.session || s.req.max_tokens == 0 || (s.req.return_context && reason != FinishReason::kError)) {
    e.context = std::move(s.ctx);
    // Tokens the context does not hold yet, which the owner runs first next time: what was still
    // pending (a cancelled prefill, or a preempted request), else the last sampled token (an
    // end-of-generation token too). After an error the session is as it came; its owner keeps its tail.
    if (reason != FinishReason::kError) {
      if (!s.pending.empty()) {
        e.tail = std::move(s.pending);
      } else if (s.last >= 0) {
        e.tail = {s.last};
      }
    }
  } else {
    s.ctx.Close();
  }
  s.sink(e);
}

}  // namespace llamay::engine
