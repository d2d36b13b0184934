#include "server/generation.h"

#include <cstdio>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>

#include "engine/grammar_constraint.h"
#include "engine/reasoning_budget.h"
#include "reasoning/reasoning.h"
#include "server/chat_prompt.h"
#include "toolcall/harmony.h"
#include "server/http_util.h"
#include "server/server.h"
#include "server/structured_output.h"
#include "tokenizer/detokenizer.h"

namespace llamay::server {
namespace {

using Clock = std::chrono::steady_clock;

// An engine event of one choice, and when the engine produced it (the latency metrics' clock: the handler
// may read it later, after writing the previous one to a slow client).
struct ChoiceEvent {
  size_t choice = 0;
  engine::Event event;
  Clock::time_point at;
};

// Events from the engine's scheduler thread to the handler thread.
struct Channel {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<ChoiceEvent> events;
  void Push(size_t choice, engine::Event e) {
    const Clock::time_point at = Clock::now();
    {
      std::lock_guard l(mu);
      events.push_back({choice, std::move(e), at});
    }
    cv.notify_all();
  }
  bool Pop(ChoiceEvent* out, std::chrono::milliseconds wait) {
    std::unique_lock l(mu);
    if (!cv.wait_for(l, wait, [&] { return !events.empty(); })) return false;
    *out = std::move(events.front());
    events.pop_front();
    return true;
  }
};

// One choice as it runs: its engine id, the text the engine has sent, and its parsers.
struct ChoiceState {
  uint64_t id = 0;
  std::string text;  // the echoed prompt, then what was generated so far (stop strings cut off)
  size_t sent = 0;   // bytes of text already passed on
  size_t logprobs_sent = 0;
  size_t echo_code_points = 0;  // of the echoed prompt that starts the text
  std::unique_ptr<toolcall::ToolCallStream> tools;
  std::unique_ptr<reasoning::ReasoningSplitter> splitter;  // a reasoning model's chat answer
  std::unique_ptr<toolcall::HarmonyStream> harmony;        // gpt-oss: reasoning, answer and calls at once
  std::shared_ptr<std::atomic<int>> reasoning_tokens;     // counted by the request's ReasoningBudget
  bool started = false;  // an event (a token or the end) has arrived
  std::optional<Clock::time_point> first_token;  // when its first generated token was produced
};

}  // namespace

struct Generation::Impl {
  std::shared_ptr<ConnectionWatch> watch;
  std::shared_ptr<Channel> channel = std::make_shared<Channel>();
  std::vector<ChoiceState> states;
  std::vector<int32_t> prompt;  // the request's tokens (the rendered conversation, or the prompt)
  std::vector<size_t> boundaries;  // hybrid models: where the prompt's messages end (checkpoints there)
  std::shared_ptr<const grammar::Grammar> grammar;        // null: unconstrained
  std::shared_ptr<const grammar::Vocabulary> vocabulary;  // with `grammar`
  std::vector<engine::GrammarConstraint::Trigger> triggers;  // lazy: the grammar starts at one of these
  toolcall::ToolFormat tool_format = toolcall::ToolFormat::kGeneric;
  // A reasoning model's chat request: the output starts inside the reasoning block (the prompt opened
  // it), the reasoning tokens it may spend (-1: no limit), and the marker after which the constraint
  // applies (empty: from the first token, or at the triggers).
  bool reasons = false;
  bool starts_inside = false;
  bool harmony = false;  // a chat request to a model whose template writes harmony (ChatPrompt::harmony)
  int reasoning_budget = -1;
  std::string constraint_after;
  size_t prefill_cached = 0;           // n > 1: what the shared prefill reused
  std::vector<size_t> prompt_offsets;  // echo: code points of the text before each prompt token
  Clock::time_point arrival;           // the HTTP request's (Server::RequestArrival), for the metrics
  bool ttft_counted = false;           // the request's first token (of any choice) has arrived
};

namespace {

using Impl = Generation::Impl;

// The grammar of the request's tool calls. tool_choice "auto" switches it on at the format's triggers,
// unless `answer` (a response format's schema) is given: then the answer is either calls or a JSON value
// of that schema, constrained from the first token.
//
// A tool list whose grammar is too large for the automaton (an agent's dozens of tools with arrays of
// bounded length: Claude Code's) is not refused: toolcall::ToolCallGrammar constrains the arguments of the
// costliest tools to any JSON object instead, as few as make it build. The call syntax and the tool names
// stay forced; the template still shows the model every schema in full. More than
// toolcall::kMaxGrammarTools tools are refused (400, "grammar too large: ...").
//
// Agents send the same tools on every turn: grammars are kept in a cache by everything they are built
// from (ToolCallGrammarKey), so a repeated list costs a lookup.
Status ToolGrammar(Server& server, const Conversation& c, const nlohmann::ordered_json* answer, Impl* g) {
  const std::string key = "tools:" + toolcall::ToolCallGrammarKey(g->tool_format, c.tools, c.tool_choice,
                                                                    c.parallel_tool_calls, answer);
  LLAMAY_ASSIGN_OR_RETURN(g->grammar, CompiledGrammars().GetOrBuild(key, [&] {
    return toolcall::ToolCallGrammar(g->tool_format, c.tools, c.tool_choice, c.parallel_tool_calls, answer);
  }));
  g->triggers.clear();
  std::vector<std::string> markers;
  for (const toolcall::ToolCallTrigger& t : toolcall::ToolCallTriggers(g->tool_format)) {
    markers.push_back(t.text);
    if (c.tool_choice.mode == toolcall::ToolChoice::Mode::kAuto && answer == nullptr)
      g->triggers.emplace_back(t.text, t.at_start);
  }
  // A format's markers may be control tokens (<|python_tag|>): the grammar may write those, and the
  // constraint sees the reasoning's markers (<think> is a control token in some vocabularies).
  if (const auto& r = server.chat_prompt().reasoning()) markers.insert(markers.end(), {r->open, r->close});
  LLAMAY_ASSIGN_OR_RETURN(g->vocabulary, server.engine().GrammarVocabulary(markers));
  return Status::Ok();
}

// The request's tokens: the conversation rendered by the model's template, or the prompt (those after its
// session's, when it continues one). `*starts_inside`: the rendered prompt leaves the model in its reasoning.
Status PromptTokens(Server& server, const Conversation& c, std::vector<int32_t>* prompt, bool* starts_inside,
                    std::vector<size_t>* boundaries = nullptr) {
  if (c.chat) {
    // A session that holds a conversation had its tools described when it began.
    const bool describe_tools = c.session.empty() || server.HeldTokens(c.session) == 0;
    LLAMAY_ASSIGN_OR_RETURN(*prompt, server.chat_prompt().Tokens(c.messages, !c.session.empty(), c.tools,
                                                                 describe_tools, &c.reasoning, starts_inside,
                                                                 boundaries));
    return Status::Ok();
  }
  if (!c.prompt_is_text) {
    *prompt = c.prompt_tokens;
    return Status::Ok();
  }
  LLAMAY_ASSIGN_OR_RETURN(*prompt, server.engine().tokenizer().Encode(c.prompt_text, c.session.empty(), false,
                                                                      /*continuation=*/!c.session.empty()));
  return Status::Ok();
}

// gpt-oss's constraint. A forced call (tool_choice "required" or a named function) is
// toolcall::HarmonyToolCallGbnf from the first token (its own optional reasoning first); "auto" leaves the
// calls free (no grammar switches on at a trigger: the model's channels say what it writes). A response
// format applies to the final answer, from the byte after `<|channel|>final<|message|>`, the reasoning
// before it free; with a forced call there is no answer in this turn to constrain.
Status HarmonyConstraint(Server& server, const Conversation& c, bool parse_tools, Impl* g) {
  const bool forced = parse_tools && c.tool_choice.mode != toolcall::ToolChoice::Mode::kAuto;
  if (forced) {
    // Reasoning off (or a budget of 0): the call comes first.
    const bool off = (c.reasoning.enabled.has_value() && !*c.reasoning.enabled) || c.reasoning.budget == 0;
    LLAMAY_ASSIGN_OR_RETURN(std::string gbnf, toolcall::HarmonyToolCallGbnf(c.tools, c.tool_choice, !off));
    auto parsed = CompiledGrammars().GetOrBuild("gbnf:" + gbnf, [&] { return grammar::ParseGbnf(gbnf); });
    if (!parsed.ok()) return parsed.status().WithContext("the tool-call grammar");
    g->grammar = *parsed;
  } else if (c.format.grammar) {
    if (parse_tools && c.format.schema.is_null())
      return InvalidArgumentError("'grammar' cannot be combined with tools (unless tool_choice is \"none\"); "
                                  "'response_format' and 'json_schema' can");
    g->grammar = c.format.grammar;
    g->constraint_after = std::string(toolcall::kHarmonyFinalMarker);
  }
  if (g->grammar) {
    LLAMAY_ASSIGN_OR_RETURN(g->vocabulary, server.engine().GrammarVocabulary(toolcall::HarmonyMarkers()));
  }
  return Status::Ok();
}

// The constraint on the output: the tool-call grammar, the response format, or both (see ToolCallGbnf).
Status Constraint(Server& server, const Conversation& c, bool parse_tools, Impl* g) {
  if (g->harmony) return HarmonyConstraint(server, c, parse_tools, g);
  if (parse_tools) {
    g->tool_format = server.chat_prompt().tool_format();
    LLAMAY_RETURN_IF_ERROR(ToolGrammar(server, c, nullptr, g));
  }
  if (!c.format.grammar) return Status::Ok();
  if (parse_tools) {
    // With tools: "auto" answers with calls or with JSON of the format; "required" or a named function
    // answers with calls only, so the format has nothing to constrain in this turn.
    if (c.format.schema.is_null())
      return InvalidArgumentError("'grammar' cannot be combined with tools (unless tool_choice is \"none\"); "
                                  "'response_format' and 'json_schema' can");
    if (c.tool_choice.mode == toolcall::ToolChoice::Mode::kAuto)
      LLAMAY_RETURN_IF_ERROR(ToolGrammar(server, c, &c.format.schema, g));
    return Status::Ok();
  }
  g->grammar = c.format.grammar;
  std::vector<std::string> markers;
  if (const auto& r = server.chat_prompt().reasoning()) markers = {r->open, r->close};
  LLAMAY_ASSIGN_OR_RETURN(g->vocabulary, server.engine().GrammarVocabulary(markers));
  return Status::Ok();
}

// A reasoning model's chat request: its budget, and where the output constraint begins. Reasoning off
// (reasoning_effort "none", thinking disabled) is a budget of 0, so the block closes as soon as it opens
// even where the template cannot be told. ChatPrompt opened the block in the prompt unless reasoning is
// off; a constraint then applies after its close marker.
void Reasoning(Server& server, const Conversation& c, Impl* g) {
  const ChatPrompt& prompt = server.chat_prompt();
  if (!c.chat || (!prompt.reasoning() && !(g->harmony && !prompt.close_tokens().empty()))) return;
  g->reasons = true;  // gpt-oss: its analysis message, whose budget forces `<|end|>`
  const bool off = c.reasoning.enabled.has_value() && !*c.reasoning.enabled;
  g->reasoning_budget = off ? 0 : c.reasoning.budget >= 0 ? c.reasoning.budget : server.options().reasoning_budget;
  if (g->grammar && g->starts_inside) g->constraint_after = prompt.reasoning()->close;
}

// The echoed prompt's entries (echo with logprobs): the first token has no logprob, entry i of `lps` is
// prompt[i + 1]'s.
void AddPromptLogprobs(const Impl& g, std::vector<engine::PromptLogprob>& lps, ChoiceResult* r) {
  for (size_t i = 0; i < g.prompt.size(); ++i) {
    LogprobEntry entry{g.prompt[i], std::nullopt, {}, g.prompt_offsets[i]};
    if (i > 0 && i - 1 < lps.size()) {
      entry.logprob = lps[i - 1].logprob;
      entry.top = std::move(lps[i - 1].top_logprobs);
    }
    r->logprobs.push_back(std::move(entry));
  }
}

// echo: each choice's text starts with the prompt's: the text as sent, or else the tokens' pieces. Sets
// prompt_offsets.
void StartEcho(const tokenizer::Tokenizer& tok, const Conversation& c, Impl* g) {
  std::vector<size_t> bytes;
  std::string echoed = c.prompt_text;
  if (!c.prompt_is_text) {
    tokenizer::StreamingDetokenizer detok(tok);
    for (const int32_t t : g->prompt) {
      bytes.push_back(echoed.size());
      echoed += detok.Push(t);
    }
    echoed += detok.Flush();
  }
  for (ChoiceState& s : g->states) {
    s.text = echoed;
    s.echo_code_points = CodePoints(echoed);
  }
  if (c.prompt_is_text) bytes = PromptByteOffsets(tok, g->prompt, echoed);
  size_t counted = 0, code_points = 0;  // offsets do not decrease: counted once
  for (const size_t b : bytes) {
    code_points += CodePoints(std::string_view(echoed).substr(counted, b - counted));
    counted = b;
    g->prompt_offsets.push_back(code_points);
  }
}

}  // namespace

const char* FinishName(Finish f) {
  switch (f) {
    case Finish::kStop: return "stop";
    case Finish::kLength: return "length";
    case Finish::kToolCalls: return "tool_calls";
  }
  return "stop";
}

Generation::Generation(Server& server) : server_(server), impl_(std::make_unique<Impl>()) {}
Generation::~Generation() = default;

const ChoiceResult& Generation::result(size_t i) const { return choices_[i]; }

bool Generation::AllStarted() const {
  return std::all_of(impl_->states.begin(), impl_->states.end(), [](const ChoiceState& s) { return s.started; });
}

bool Generation::AllDone() const {
  return std::all_of(choices_.begin(), choices_.end(), [](const ChoiceResult& r) { return r.done; });
}

void Generation::CancelAll() {
  for (size_t i = 0; i < choices_.size(); ++i)
    if (!choices_[i].done) server_.engine().Cancel(impl_->states[i].id);
}

std::function<bool()> Generation::client_gone() const { return GoneProbe(impl_->watch); }

size_t Generation::prompt_tokens() const { return impl_->prompt.size(); }

Result<size_t> CountPromptTokens(Server& server, const Conversation& c) {
  std::vector<int32_t> prompt;
  bool starts_inside = false;
  LLAMAY_RETURN_IF_ERROR(PromptTokens(server, c, &prompt, &starts_inside));
  return (c.session.empty() ? 0 : server.HeldTokens(c.session)) + prompt.size();
}

GenerationUsage Generation::usage() const {
  GenerationUsage u;
  for (const ChoiceResult& r : choices_) {
    u.completion_tokens += r.usage.completion_tokens;
    u.reasoning_tokens += r.reasoning_tokens;
    u.draft_tokens += r.usage.draft_tokens;
    u.accepted_draft_tokens += r.usage.accepted_draft_tokens;
  }
  u.prompt_tokens = choices_[0].usage.prompt_tokens;
  u.cached_tokens = choices_.size() > 1 ? impl_->prefill_cached : choices_[0].usage.cached_tokens;
  return u;
}

Result<std::shared_ptr<Generation>> Generation::Start(Server& server, Conversation c,
                                                      std::shared_ptr<ConnectionWatch> watch) {
  std::shared_ptr<Generation> gen(new Generation(server));
  Impl& g = *gen->impl_;
  g.arrival = Server::RequestArrival();
  g.watch = std::move(watch);
  if (!c.store_as.empty() && c.n != 1) return InvalidArgumentError("'n' > 1 cannot be stored");
  if (!c.session.empty() && c.n != 1) return InvalidArgumentError("'n' > 1 cannot continue a llamay_session");
  if (!c.session.empty() && c.echo) return InvalidArgumentError("'echo' cannot continue a llamay_session");
  gen->parse_tools_ = c.chat && !c.tools.empty() && c.tool_choice.mode != toolcall::ToolChoice::Mode::kNone;
  g.harmony = c.chat && server.chat_prompt().harmony();
  LLAMAY_RETURN_IF_ERROR(Constraint(server, c, gen->parse_tools_, &g));
  LLAMAY_RETURN_IF_ERROR(PromptTokens(server, c, &g.prompt, &g.starts_inside, &g.boundaries));
  Reasoning(server, c, &g);
  if (g.prompt.empty() && c.session.empty()) return InvalidArgumentError("the prompt is empty");
  gen->c_ = std::move(c);
  LLAMAY_RETURN_IF_ERROR(gen->Launch());
  return gen;
}

}  // namespace llamay::server

namespace llamay::server {

// Choice i's request without its prompt: sampling (a seed advanced per choice), limits, stop strings and
// the output constraint.
engine::Request Generation::BaseRequest(size_t i) {
  const Conversation& c = c_;
  engine::Request r;
  r.sampling = c.sampling;
  if (r.sampling.has_seed) r.sampling.seed += static_cast<uint64_t>(i);
  r.max_tokens = c.max_tokens;
  r.top_logprobs = c.top_logprobs;
  r.ignore_eos = c.ignore_eos;
  r.pin_prefix = c.retain_prefix;
  r.speculative = c.speculative;
  r.stop = c.stop;
  r.checkpoints = impl_->boundaries;
  Impl& g = *impl_;
  if (g.reasons) {
    // Counts the reasoning tokens (exactly, by token) and forces the close marker once the budget is spent.
    const ChatPrompt& prompt = server_.chat_prompt();
    auto budget = std::make_unique<engine::ReasoningBudget>(prompt.open_tokens(), prompt.close_tokens(),
                                                            g.starts_inside, g.reasoning_budget);
    g.states[i].reasoning_tokens = std::make_shared<std::atomic<int>>(0);
    budget->ReportTo(g.states[i].reasoning_tokens);
    r.processors.push_back(std::move(budget));
  }
  if (g.grammar)
    r.processors.push_back(
        std::make_unique<engine::GrammarConstraint>(g.grammar, g.vocabulary, g.triggers, g.constraint_after));
  return r;
}

// Starts every choice. n > 1: the prompt is prefilled once and forked, so no page is copied; with echo
// and logprobs that prefill computes the whole prompt's logprobs, and the choices take it from the tree.
Status Generation::Launch() {
  Impl& g = *impl_;
  Server& server = server_;
  engine::Engine& engine = server.engine();
  const Conversation& c = c_;
  // `held`: the session a request continues, lent to it until its final event.
  auto make_sink = [&](size_t ci, std::shared_ptr<HeldContext> held = nullptr) {
    std::shared_ptr<Channel> ch = g.channel;
    const std::string session = c.session;
    return [ch, ci, session, held, &server](engine::Event& e) {
      // A session's context goes back to the server here, on the engine's thread, so it is never lost
      // with a client that went away. After an error the context is as it came, and so are its tail and
      // logits.
      if (e.finished && held) {
        held->Return(e);
        server.ReturnContext(session, std::move(*held));
      }
      ch->Push(ci, std::move(e));
      return true;
    };
  };
  auto base = [this](size_t i) { return BaseRequest(i); };
  const size_t n = static_cast<size_t>(c.n);
  g.states.resize(n);
  choices_.resize(n);
  if (g.harmony)
    for (auto& s : g.states) s.harmony = std::make_unique<toolcall::HarmonyStream>();
  if (parse_tools_ && !g.harmony)
    for (auto& s : g.states) s.tools = std::make_unique<toolcall::ToolCallStream>(g.tool_format, nullptr, &c.tools);
  if (g.reasons && !g.harmony)
    for (auto& s : g.states)
      s.splitter = std::make_unique<reasoning::ReasoningSplitter>(*server.chat_prompt().reasoning(), g.starts_inside);
  if (c.echo) StartEcho(engine.tokenizer(), c, &g);
  const bool echo_logprobs = c.echo && c.top_logprobs >= 0;
  if (!c.store_as.empty() || c.fork_session) return LaunchForked();
  if (!c.cache_key.empty() && c.session.empty() && n == 1 && !c.echo) return LaunchKeyed();
  if (!c.session.empty()) {
    LLAMAY_RETURN_IF_ERROR(server.FetchSession(c.session));
    LLAMAY_ASSIGN_OR_RETURN(HeldContext taken, server.TakeContext(c.session));
    auto held = std::make_shared<HeldContext>(std::move(taken));
    Result<engine::Request> r = held->Continue(g.prompt, base(0));
    if (!r.ok()) {
      server.ReturnContext(c.session, std::move(*held));
      return r.status();
    }
    Result<uint64_t> id = engine.Submit(std::move(*r), make_sink(0, held));
    if (!id.ok()) {  // refused: the request, and the session's context in it, are untouched
      held->Return(*r);
      server.ReturnContext(c.session, std::move(*held));
      return id.status();
    }
    g.states[0].id = *id;
    return Status::Ok();
  }
  // Submits choice i; a refusal (full queue) cancels the choices already running.
  auto submit = [&](size_t i, engine::Request r) -> Status {
    Result<uint64_t> id = engine.Submit(std::move(r), make_sink(i));
    if (!id.ok()) {
      for (size_t k = 0; k < i; ++k) engine.Cancel(g.states[k].id);
      return id.status();
    }
    g.states[i].id = *id;
    return Status::Ok();
  };
  if (n == 1 || g.prompt.size() < 2) {
    for (size_t i = 0; i < n; ++i) {
      engine::Request r = base(i);
      r.prompt = g.prompt;
      if (echo_logprobs) r.prompt_logprobs = c.top_logprobs;
      LLAMAY_RETURN_IF_ERROR(submit(i, std::move(r)));
    }
    return Status::Ok();
  }
  if (echo_logprobs) {
    engine::Request pre;
    pre.prompt = g.prompt;
    pre.max_tokens = 0;
    pre.sampling.temperature = 0;
    pre.pin_prefix = c.retain_prefix;
    pre.prompt_logprobs = c.top_logprobs;
    LLAMAY_ASSIGN_OR_RETURN(engine::Completion done, engine.Generate(std::move(pre), false, GoneProbe(g.watch)));
    if (done.reason == engine::FinishReason::kCancelled) return CancelledStatus();
    g.prefill_cached = done.usage.cached_tokens;
    for (size_t i = 0; i < n; ++i) {
      std::vector<engine::PromptLogprob> lps = done.prompt_logprobs;
      AddPromptLogprobs(g, lps, &choices_[i]);
      engine::Request r = base(i);
      r.prompt = g.prompt;  // all but its last token from the tree, where the prefill left them
      LLAMAY_RETURN_IF_ERROR(submit(i, std::move(r)));
    }
    return Status::Ok();
  }
  // One prefill of all but the prompt's last token, forked n ways; each branch runs the last token itself.
  auto started = engine::Session::Start(engine, g.prompt, c.retain_prefix, GoneProbe(g.watch), &g.prefill_cached);
  if (!started.ok())
    return started.status().detail() == engine::kDetailSessionCancelled ? CancelledStatus() : started.status();
  std::vector<engine::Session> branches = started->Fork(n);
  for (size_t i = 0; i < n; ++i) {
    LLAMAY_ASSIGN_OR_RETURN(engine::Request r, branches[i].Continue({}, base(i)));
    LLAMAY_RETURN_IF_ERROR(submit(i, std::move(r)));
  }
  return Status::Ok();
}

// A turn that continues a fork of `session` (which stays as it was) or starts from the prefix tree, and
// whose context is kept as the new session `store_as` when it is set. The context is held when the final
// event arrives, on the engine's thread, so a client that leaves does not lose a turn that completed; a
// failed or cancelled turn stores nothing.
Status Generation::LaunchForked() {
  Impl& g = *impl_;
  Server& server = server_;
  const Conversation& c = c_;
  engine::Request r = BaseRequest(0);
  auto fork = std::make_shared<HeldContext>();
  if (!c.session.empty()) {
    LLAMAY_RETURN_IF_ERROR(server.FetchSession(c.session));
    LLAMAY_ASSIGN_OR_RETURN(*fork, server.ForkContext(c.session));
    LLAMAY_ASSIGN_OR_RETURN(r, fork->Continue(g.prompt, std::move(r)));
  } else {
    r.prompt = g.prompt;
    r.return_context = !c.store_as.empty();
  }
  std::shared_ptr<Channel> ch = g.channel;
  const std::string id = c.store_as;
  const bool forked = !c.session.empty();
  auto sink = [ch, fork, forked, id, &server](engine::Event& e) {
    if (e.finished && !id.empty() && e.reason != engine::FinishReason::kError &&
        e.reason != engine::FinishReason::kCancelled) {
      if (forked) {
        fork->Return(e);
      } else {
        *fork = Held(engine::Session{std::move(e.context), std::move(e.tail), std::move(e.logits)});
      }
      if (fork->context.valid()) server.HoldResponse(id, std::move(*fork));
    }
    ch->Push(0, std::move(e));
    return true;
  };
  LLAMAY_ASSIGN_OR_RETURN(g.states[0].id, server.engine().Submit(std::move(r), std::move(sink)));
  return Status::Ok();
}

// prompt_cache_key: the key's held context continues when the prompt begins with every token it holds
// (the client sent the conversation whole, and it renders to the same tokens), so the turn computes only
// what is new and the key's conversation stays whole in memory whatever the prefix tree evicts. Otherwise
// (a first turn, a history that changed, a re-rendered answer) the turn starts from the prefix tree, and
// its context becomes the key's. A key whose context is busy (the same key twice at once) runs statelessly.
Status Generation::LaunchKeyed() {
  Impl& g = *impl_;
  Server& server = server_;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(std::hash<std::string>{}(c_.cache_key)));
  const std::string id = std::string("pck_") + hex;
  engine::Request r = BaseRequest(0);
  std::shared_ptr<Channel> ch = g.channel;
  Result<HeldContext> taken = server.TakeContext(id);
  if (taken.ok()) {
    std::vector<int32_t> held = taken->context.tokens();
    held.insert(held.end(), taken->tail.begin(), taken->tail.end());
    if (held.size() < g.prompt.size() && std::equal(held.begin(), held.end(), g.prompt.begin())) {
      auto ctx = std::make_shared<HeldContext>(std::move(*taken));
      const std::span<const int32_t> rest(g.prompt.data() + held.size(), g.prompt.size() - held.size());
      LLAMAY_ASSIGN_OR_RETURN(r, ctx->Continue(rest, std::move(r)));
      auto sink = [ch, ctx, id, &server](engine::Event& e) {
        if (e.finished) {
          ctx->Return(e);
          server.ReturnContext(id, std::move(*ctx));
        }
        ch->Push(0, std::move(e));
        return true;
      };
      Result<uint64_t> sub = server.engine().Submit(std::move(r), std::move(sink));
      if (!sub.ok()) {  // refused: the request, and the key's context in it, are untouched
        ctx->Return(r);
        server.ReturnContext(id, std::move(*ctx));
        return sub.status();
      }
      g.states[0].id = *sub;
      return Status::Ok();
    }
    server.ReturnContext(id, std::move(*taken));
  }
  const bool keep = taken.ok() || taken.status().code() == StatusCode::kNotFound;
  r.prompt = g.prompt;
  r.return_context = keep;
  auto sink = [ch, keep, id, &server](engine::Event& e) {
    if (e.finished && keep && e.context.valid() && e.reason != engine::FinishReason::kError &&
        e.reason != engine::FinishReason::kCancelled)
      server.HoldResponse(id, Held(engine::Session{std::move(e.context), std::move(e.tail), std::move(e.logits)}));
    ch->Push(0, std::move(e));
    return true;
  };
  LLAMAY_ASSIGN_OR_RETURN(g.states[0].id, server.engine().Submit(std::move(r), std::move(sink)));
  return Status::Ok();
}

std::optional<ChoiceUpdate> Generation::Next(std::chrono::milliseconds wait) {
  ChoiceEvent ev;
  if (!impl_->channel->Pop(&ev, wait)) return std::nullopt;
  CountLatency(ev.choice, ev.event, ev.at);
  return Apply(ev.choice, ev.event);
}

// TTFT once per request, at its first token; TPOT per choice of 2 tokens or more, and the request's
// duration, at the end (a choice's final event comes once; events after it are not counted).
void Generation::CountLatency(size_t ci, const engine::Event& e, std::chrono::steady_clock::time_point at) {
  Impl& g = *impl_;
  ChoiceState& s = g.states[ci];
  Server::Metrics& m = server_.metrics();
  if (e.token >= 0) ++m.tokens_streamed;  // the page's tokens/s (/v1/events stats)
  if (choices_[ci].done) return;
  auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  if (e.token >= 0) {
    if (!s.first_token) s.first_token = at;
    if (!g.ttft_counted) m.ttft.Observe(seconds(at - g.arrival));
    g.ttft_counted = true;
  }
  if (!e.finished) return;
  const size_t tokens = e.usage.completion_tokens;
  if (s.first_token && tokens >= 2)
    m.tpot.Observe(seconds(at - *s.first_token) / static_cast<double>(tokens - 1));
  // The last choice to end (this one is not marked done yet).
  size_t running = 0;
  for (const ChoiceResult& c : choices_) running += c.done ? 0 : 1;
  if (running == 1) m.duration.Observe(seconds(at - g.arrival));
}

ChoiceUpdate Generation::Apply(size_t ci, engine::Event& e) {
  ChoiceState& s = impl_->states[ci];
  ChoiceResult& r = choices_[ci];
  ChoiceUpdate u;
  u.choice = ci;
  u.first = !s.started;
  s.started = true;
  if (r.done) return u;
  if (e.token < 0 && !e.finished && c_.echo && c_.top_logprobs >= 0)  // the prefill's prompt logprobs
    AddPromptLogprobs(*impl_, e.prompt_logprobs, &r);
  if (e.token >= 0 && c_.top_logprobs >= 0)
    r.logprobs.push_back({e.token, e.logprob, std::move(e.top_logprobs), s.echo_code_points + e.text_offset});
  // Entries not passed on yet: an echoed prompt's (set at launch, or from the prefill's event), then this
  // token's.
  u.logprobs.assign(r.logprobs.begin() + static_cast<long>(s.logprobs_sent), r.logprobs.end());
  s.logprobs_sent = r.logprobs.size();
  // The engine cut the text at any stop sequence and holds back what might begin one.
  s.text += e.text;
  std::string delta = s.text.substr(std::min(s.sent, s.text.size()));
  s.sent = s.text.size();
  if (e.finished) {
    r.usage = e.usage;
    r.done = true;
    u.finished = true;
    r.finish = e.reason == engine::FinishReason::kLength ? Finish::kLength : Finish::kStop;
    r.stop_sequence = e.stop_sequence;
    if (e.reason == engine::FinishReason::kError) {
      u.failed = true;
      if (error_.ok()) error_ = e.error;
    }
    // The server is shutting down.
    if (e.reason == engine::FinishReason::kCancelled && error_.ok()) error_ = CancelledStatus();
  }
  // The reasoning first (the tool-call parser never reads inside it), then the answer's text, through the
  // tool-call parser when the request has tools.
  std::vector<OutputEvent>& out = u.events;
  auto add_calls = [&](std::vector<toolcall::ToolCallDelta>& calls) {
    for (toolcall::ToolCallDelta& d : calls) {
      if (!d.id.empty()) {
        r.calls.push_back({d.id, d.name, ""});
        OutputEvent start{OutputEvent::Kind::kToolCall, "", d.index, d.id, d.name};
        out.push_back(std::move(start));
      }
      if (!d.arguments.empty() && d.index >= 0 && static_cast<size_t>(d.index) < r.calls.size()) {
        r.calls[static_cast<size_t>(d.index)].arguments += d.arguments;
        out.push_back({OutputEvent::Kind::kToolArguments, std::move(d.arguments), d.index, "", ""});
      }
    }
    if (r.done && !r.calls.empty() && r.finish == Finish::kStop) r.finish = Finish::kToolCalls;
  };
  if (s.harmony) {  // gpt-oss: one parser for the reasoning, the answer and the calls
    toolcall::HarmonyDelta hd = s.harmony->Push(delta);
    if (e.finished) {
      toolcall::HarmonyDelta rest = s.harmony->Finish();
      hd.reasoning += rest.reasoning;
      hd.content += rest.content;
      hd.calls.insert(hd.calls.end(), rest.calls.begin(), rest.calls.end());
    }
    if (!hd.reasoning.empty()) {
      r.reasoning += hd.reasoning;
      out.push_back({OutputEvent::Kind::kReasoning, std::move(hd.reasoning), -1, "", ""});
    }
    if (!hd.content.empty()) {
      r.content += hd.content;
      out.push_back({OutputEvent::Kind::kText, std::move(hd.content), -1, "", ""});
    }
    add_calls(hd.calls);
    return u;
  }
  if (s.splitter) {
    reasoning::Split split = s.splitter->Push(delta);
    if (e.finished) {
      reasoning::Split rest = s.splitter->Finish();
      split.reasoning += rest.reasoning;
      split.content += rest.content;
    }
    if (!split.reasoning.empty()) {
      r.reasoning += split.reasoning;
      out.push_back({OutputEvent::Kind::kReasoning, std::move(split.reasoning), -1, "", ""});
    }
    delta = std::move(split.content);
  }
  if (s.reasoning_tokens) r.reasoning_tokens = static_cast<size_t>(s.reasoning_tokens->load(std::memory_order_relaxed));
  auto add_text = [&](std::string text) {
    if (text.empty()) return;
    r.content += text;
    out.push_back({OutputEvent::Kind::kText, std::move(text), -1, "", ""});
  };
  if (!s.tools) {
    add_text(std::move(delta));
    return u;
  }
  toolcall::ToolDelta td = s.tools->Push(delta);
  if (e.finished) {
    toolcall::ToolDelta rest = s.tools->Finish();
    td.content += rest.content;
    td.calls.insert(td.calls.end(), rest.calls.begin(), rest.calls.end());
  }
  add_text(std::move(td.content));
  add_calls(td.calls);
  return u;
}

void Generation::Finish() {
  if (finished_) return;
  finished_ = true;
  // With a store, a session's new state is written through before the answer ends, so the next turn may
  // go to any instance. A conflict (another instance continued the session first) becomes the request's
  // error; any other store failure leaves the session held here, unsaved, and says so on stderr.
  const std::string written = !c_.store_as.empty() ? c_.store_as : c_.fork_session ? std::string() : c_.session;
  if (!written.empty() && error_.ok()) {
    Status s = server_.CommitSession(written);
    if (s.detail() == engine::kDetailSessionConflict) {
      error_ = s;
    } else if (!s.ok()) {
      std::fprintf(stderr, "llamay: session %s not saved to the store: %s\n", written.c_str(), s.message().c_str());
    }
  }
  if (!error_.ok() && error_.detail() != engine::kDetailSessionConflict) return;
  const GenerationUsage u = usage();
  server_.metrics().prompt_tokens += u.prompt_tokens;
  server_.metrics().cached_tokens += u.cached_tokens;
  server_.metrics().completion_tokens += u.completion_tokens;
}

}  // namespace llamay::server
