#include "server/completions.h"

#include <cstdio>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>

#include "engine/grammar_constraint.h"
#include "toolcall/toolcall.h"
#include "server/chat_prompt.h"
#include "server/connection_watch.h"
#include "server/http_util.h"
#include "server/logprobs_json.h"
#include "server/structured_output.h"
#include "template/chat_template.h"
#include "tokenizer/detokenizer.h"

namespace llamay::server {
namespace {

// Everything a completion request asked for, validated.
struct Params {
  bool chat = false;
  std::vector<int32_t> prompt;
  int n = 1;
  int max_tokens = 16;
  bool stream = false;
  bool include_usage = false;
  std::vector<std::string> stop;
  sampling::SamplingParams sampling;
  int top_logprobs = -1;  // chat: logprobs requested -> >= 0
  bool echo = false;         // completions: the text starts with the prompt's (and logprobs cover it)
  std::string prompt_text;   // the prompt as sent, when it was text
  bool prompt_is_text = false;
  bool ignore_eos = false;
  std::string session;
  bool retain_prefix = false;
  // response_format, json_schema or grammar (structured_output.h); null: unconstrained.
  std::shared_ptr<const grammar::Grammar> grammar;
  std::shared_ptr<const grammar::Vocabulary> vocabulary;  // with `grammar`
  // Lazy: the grammar starts at the first of these in the output (tool_choice "auto").
  std::vector<engine::GrammarConstraint::Trigger> triggers;
  // Chat with tools and a tool_choice other than "none": the answer is parsed for tool calls.
  std::vector<toolcall::ToolSpec> tools;
  toolcall::ToolChoice tool_choice;
  bool parse_tools = false;
  toolcall::ToolFormat tool_format = toolcall::ToolFormat::kGeneric;
};

// The grammar of p's tool calls. tool_choice "auto" switches it on at the format's triggers, unless
// `answer` (a response format's schema) is given: then the answer is either calls or a JSON value of that
// schema, constrained from the first token.
Status ToolGrammar(Server& server, const json& body, const nlohmann::ordered_json* answer, Params* p) {
  const bool parallel = !body.contains("parallel_tool_calls") || body["parallel_tool_calls"].is_null() ||
                        body["parallel_tool_calls"].get<bool>();
  LLAMAY_ASSIGN_OR_RETURN(std::string gbnf,
                          toolcall::ToolCallGbnf(p->tool_format, p->tools, p->tool_choice, parallel, answer));
  auto g = grammar::ParseGbnf(gbnf);
  if (!g.ok()) return g.status().WithContext("the tool-call grammar");
  p->grammar = *g;
  p->triggers.clear();
  std::vector<std::string> markers;
  for (const toolcall::ToolCallTrigger& t : toolcall::ToolCallTriggers(p->tool_format)) {
    markers.push_back(t.text);
    if (p->tool_choice.mode == toolcall::ToolChoice::Mode::kAuto && answer == nullptr)
      p->triggers.emplace_back(t.text, t.at_start);
  }
  // A format's markers may be control tokens (<|python_tag|>): the grammar may write those.
  LLAMAY_ASSIGN_OR_RETURN(p->vocabulary, server.engine().GrammarVocabulary(markers));
  return Status::Ok();
}

// The request's tools and tool_choice (chat), parsed from the body in its own key order so that each
// schema's properties keep theirs; then the grammar of a call. Before the prompt: the template needs them.
Status ParseTools(Server& server, const json& body, const std::string& raw, Params* p) {
  const bool has_tools = body.contains("tools") && !body["tools"].is_null();
  const bool has_choice = body.contains("tool_choice") && !body["tool_choice"].is_null();
  if (body.contains("parallel_tool_calls") && !body["parallel_tool_calls"].is_null() &&
      !body["parallel_tool_calls"].is_boolean())
    return InvalidArgumentError("'parallel_tool_calls' must be a boolean");
  if (!has_tools && !has_choice) return Status::Ok();
  const nlohmann::ordered_json ordered = OrderedBody(raw);
  LLAMAY_ASSIGN_OR_RETURN(p->tools, toolcall::ParseTools(has_tools ? ordered["tools"] : nlohmann::ordered_json()));
  LLAMAY_ASSIGN_OR_RETURN(p->tool_choice, toolcall::ParseToolChoice(has_choice ? ordered["tool_choice"]
                                                                               : nlohmann::ordered_json(),
                                                                    p->tools));
  if (p->tools.empty() || p->tool_choice.mode == toolcall::ToolChoice::Mode::kNone) return Status::Ok();
  p->parse_tools = true;
  p->tool_format = server.chat_prompt().tool_format();
  return ToolGrammar(server, body, nullptr, p);
}

// body[key] as T, or `fallback` when the key is absent or null (clients send null for "unset").
template <typename T>
T Opt(const json& body, const char* key, T fallback) {
  auto it = body.find(key);
  return it == body.end() || it->is_null() ? fallback : it->get<T>();
}

// body[key] as an integer in [lo, hi] into *out; absent or null leaves *out. Anything else is a 400 that
// names the field (a float, a string, 1e20, -3 where only 0..20 make sense).
template <typename T>
Status OptInt(const json& body, const char* key, int64_t lo, int64_t hi, T* out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return Status::Ok();
  // JSON non-negative integers arrive unsigned: compared as such, so 2^64-1 cannot wrap into range.
  bool ok = false;
  if (it->is_number_unsigned()) {
    const uint64_t u = it->get<uint64_t>();
    ok = u <= static_cast<uint64_t>(hi) && (lo <= 0 || u >= static_cast<uint64_t>(lo));
  } else if (it->is_number_integer()) {
    ok = it->get<int64_t>() >= lo && it->get<int64_t>() <= hi;
  }
  if (!ok)
    return InvalidArgumentError(std::string("'") + key + "' must be an integer in [" + std::to_string(lo) + ", " +
                                std::to_string(hi) + "]");
  *out = static_cast<T>(it->get<int64_t>());
  return Status::Ok();
}

Status ParseParams(Server& server, const json& body, const std::string& raw, bool chat, Params* p) {
  engine::Engine& engine = server.engine();
  p->chat = chat;
  p->max_tokens = chat ? server.options().default_max_tokens : 16;
  try {
    if (body.contains("llamay_session") && !body["llamay_session"].is_null()) {
      if (!body["llamay_session"].is_string()) return InvalidArgumentError("llamay_session must be a string");
      p->session = body["llamay_session"];
    }
    if (body.contains("llamay_retain_prefix")) p->retain_prefix = Opt(body, "llamay_retain_prefix", false);
    if (chat) {
      if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty())
        return InvalidArgumentError("'messages' must be a non-empty array");
      LLAMAY_RETURN_IF_ERROR(ParseTools(server, body, raw, p));
      // A session that holds a conversation had its tools described when it began.
      const bool describe_tools = p->session.empty() || server.HeldTokens(p->session) == 0;
      LLAMAY_ASSIGN_OR_RETURN(p->prompt, ChatPromptTokens(server, body["messages"], !p->session.empty(), p->tools,
                                                          describe_tools));
    } else {
      if (!body.contains("prompt")) return InvalidArgumentError("'prompt' is required");
      const json& pr = body["prompt"];
      if (pr.is_string() || (pr.is_array() && pr.size() == 1 && pr[0].is_string())) {
        p->prompt_text = pr.is_string() ? pr.get<std::string>() : pr[0].get<std::string>();
        p->prompt_is_text = true;
        LLAMAY_ASSIGN_OR_RETURN(p->prompt, engine.tokenizer().Encode(p->prompt_text, p->session.empty(), false,
                                                                     /*continuation=*/!p->session.empty()));
      } else if (pr.is_array() && !pr.empty() && pr[0].is_number_integer()) {
        for (const auto& t : pr) {
          if (!t.is_number_integer()) return InvalidArgumentError("'prompt' token arrays hold integers");
          // Checked as 64 bits: get<int32_t> would wrap 4294967298 to token 2.
          const bool in_range = t.is_number_unsigned() ? t.get<uint64_t>() <= uint64_t{INT32_MAX}
                                                       : (t.get<int64_t>() >= 0 && t.get<int64_t>() <= INT32_MAX);
          if (!in_range)
            return InvalidArgumentError("'prompt' token id " + t.dump() + " is out of range");
          p->prompt.push_back(t.get<int32_t>());
        }
      } else {
        return InvalidArgumentError("'prompt' must be a string, one string in an array, or an array of token ids");
      }
    }
    for (const char* key : {"max_tokens", "max_completion_tokens"})
      LLAMAY_RETURN_IF_ERROR(OptInt(body, key, 0, 1 << 20, &p->max_tokens));
    LLAMAY_RETURN_IF_ERROR(OptInt(body, "n", 1, 64, &p->n));
    p->stream = Opt(body, "stream", false);
    p->ignore_eos = Opt(body, "ignore_eos", false);
    if (body.contains("stream_options") && !body["stream_options"].is_null()) {
      if (!body["stream_options"].is_object()) return InvalidArgumentError("'stream_options' must be an object");
      p->include_usage = Opt(body["stream_options"], "include_usage", false);
    }
    if (body.contains("stop") && !body["stop"].is_null()) {
      if (body["stop"].is_string()) {
        p->stop.push_back(body["stop"]);
      } else if (body["stop"].is_array()) {
        for (const auto& s : body["stop"]) {
          if (!s.is_string()) return InvalidArgumentError("'stop' must be a string or an array of strings");
          p->stop.push_back(s);
        }
      } else {
        return InvalidArgumentError("'stop' must be a string or an array of strings");
      }
      if (p->stop.size() > 4) return InvalidArgumentError("'stop' holds at most 4 strings");
      for (const auto& s : p->stop)
        if (s.empty()) return InvalidArgumentError("'stop' strings must not be empty");
    }
    // OpenAI's defaults: temperature 1, top_p 1, no top-k, min-p or repetition penalty.
    sampling::SamplingParams& sp = p->sampling;
    sp.temperature = Opt(body, "temperature", 1.0f);
    sp.top_p = Opt(body, "top_p", 1.0f);
    sp.top_k = 0;
    LLAMAY_RETURN_IF_ERROR(OptInt(body, "top_k", 0, INT32_MAX, &sp.top_k));
    sp.min_p = Opt(body, "min_p", 0.0f);
    sp.repeat_penalty = Opt(body, "repetition_penalty", 1.0f);
    sp.frequency_penalty = Opt(body, "frequency_penalty", 0.0f);
    sp.presence_penalty = Opt(body, "presence_penalty", 0.0f);
    if (body.contains("seed") && !body["seed"].is_null()) {
      // Any 64-bit integer; a negative one is taken as its two's complement, as other servers do.
      if (!body["seed"].is_number_integer()) return InvalidArgumentError("'seed' must be an integer");
      sp.seed = body["seed"].is_number_unsigned() ? body["seed"].get<uint64_t>()
                                                  : static_cast<uint64_t>(body["seed"].get<int64_t>());
      sp.has_seed = true;
    }
    LLAMAY_RETURN_IF_ERROR(sp.Validate());
    if (chat && Opt(body, "logprobs", false)) {
      p->top_logprobs = 0;
      LLAMAY_RETURN_IF_ERROR(OptInt(body, "top_logprobs", 0, 20, &p->top_logprobs));
    }
    if (!chat) {
      LLAMAY_RETURN_IF_ERROR(OptInt(body, "logprobs", 0, 20, &p->top_logprobs));
      p->echo = Opt(body, "echo", false);
    }
  } catch (const json::exception& e) {
    return InvalidArgumentError(std::string("a field has the wrong type: ") + e.what());
  }
  LLAMAY_ASSIGN_OR_RETURN(RequestedFormat format, RequestFormat(body, raw));
  if (format.grammar && p->parse_tools) {
    // With tools: "auto" answers with calls or with JSON of the format; "required" or a named function
    // answers with calls only, so the format has nothing to constrain in this turn.
    if (format.schema.is_null())
      return InvalidArgumentError("'grammar' cannot be combined with tools (unless tool_choice is \"none\"); "
                                  "'response_format' and 'json_schema' can");
    if (p->tool_choice.mode == toolcall::ToolChoice::Mode::kAuto)
      LLAMAY_RETURN_IF_ERROR(ToolGrammar(server, body, &format.schema, p));
  } else if (format.grammar) {
    p->grammar = std::move(format.grammar);
    LLAMAY_ASSIGN_OR_RETURN(p->vocabulary, engine.GrammarVocabulary());
  }
  if (p->prompt.empty() && p->session.empty()) return InvalidArgumentError("the prompt is empty");
  if (!p->session.empty() && p->n != 1) return InvalidArgumentError("'n' > 1 cannot continue a llamay_session");
  if (!p->session.empty() && p->echo) return InvalidArgumentError("'echo' cannot continue a llamay_session");
  return Status::Ok();
}

// Events from the engine's scheduler thread to the handler thread.
struct Channel {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::pair<int, engine::Event>> events;  // (choice, event)
  void Push(int choice, engine::Event e) {
    {
      std::lock_guard l(mu);
      events.emplace_back(choice, std::move(e));
    }
    cv.notify_all();
  }
  bool Pop(std::pair<int, engine::Event>* out, std::chrono::milliseconds wait) {
    std::unique_lock l(mu);
    if (!cv.wait_for(l, wait, [&] { return !events.empty(); })) return false;
    *out = std::move(events.front());
    events.pop_front();
    return true;
  }
};

struct Choice {
  uint64_t id = 0;
  std::string text;  // the echoed prompt, then what was generated so far (stop strings cut off)
  size_t sent = 0;   // bytes of text already streamed
  std::vector<LogprobEntry> logprobs;
  size_t logprobs_sent = 0;  // entries already streamed
  size_t echo_code_points = 0;  // of the echoed prompt that starts the text
  std::unique_ptr<toolcall::ToolCallStream> tool_stream;  // streamed chat with tools
  bool tool_stream_finished = false;                      // its Finish() was called (once, at the end)
  bool done = false;
  bool started = false;  // an event (a token or the end) has arrived
  std::string finish;
  engine::Usage usage;
};

// One completion request in flight: its choices, their engine ids and the channel they report on.
struct Job {
  Params p;
  std::shared_ptr<ConnectionWatch> watch;  // the client's connection: a departure cancels the work
  std::string id;
  std::string model;
  int64_t created = 0;
  std::vector<Choice> choices;
  std::shared_ptr<Channel> channel = std::make_shared<Channel>();
  size_t prefill_cached = 0;
  Status error;
  std::vector<size_t> prompt_offsets;  // echo: code points of the text before each prompt token
};

std::string FinishName(engine::FinishReason r) {
  return r == engine::FinishReason::kLength ? "length" : "stop";
}

// The echoed prompt's entries (echo with logprobs): the first token has no logprob, entry i of `lps` is
// prompt[i + 1]'s.
void AddPromptLogprobs(Job& job, Choice& c, std::vector<engine::PromptLogprob>& lps) {
  const std::vector<int32_t>& prompt = job.p.prompt;
  for (size_t i = 0; i < prompt.size(); ++i) {
    LogprobEntry entry{prompt[i], std::nullopt, {}, job.prompt_offsets[i]};
    if (i > 0 && i - 1 < lps.size()) {
      entry.logprob = lps[i - 1].logprob;
      entry.top = std::move(lps[i - 1].top_logprobs);
    }
    c.logprobs.push_back(std::move(entry));
  }
}

// Applies one event to its choice. Returns new text ready to send (stream mode).
std::string Apply(Job& job, int ci, engine::Event& e) {
  Choice& c = job.choices[static_cast<size_t>(ci)];
  c.started = true;
  if (c.done) return "";
  if (e.token < 0 && !e.finished && job.p.echo && job.p.top_logprobs >= 0)  // the prefill's prompt logprobs
    AddPromptLogprobs(job, c, e.prompt_logprobs);
  if (e.token >= 0 && job.p.top_logprobs >= 0)
    c.logprobs.push_back({e.token, e.logprob, std::move(e.top_logprobs), c.echo_code_points + e.text_offset});
  // The engine cut the text at any stop sequence and holds back what might begin one.
  c.text += e.text;
  if (e.finished) {
    c.usage = e.usage;
    c.done = true;
    c.finish = FinishName(e.reason);
    if (e.reason == engine::FinishReason::kError && job.error.ok()) job.error = e.error;
    // The server is shutting down.
    if (e.reason == engine::FinishReason::kCancelled && job.error.ok()) job.error = CancelledStatus();
  }
  if (c.text.size() <= c.sent) return "";
  std::string out = c.text.substr(c.sent);
  c.sent = c.text.size();
  return out;
}

json UsageJson(const Job& job) {
  size_t completion = 0;
  for (const auto& c : job.choices) completion += c.usage.completion_tokens;
  const engine::Usage& u = job.choices[0].usage;
  const size_t cached = job.choices.size() > 1 ? job.prefill_cached : u.cached_tokens;
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", completion},
          {"total_tokens", u.prompt_tokens + completion},
          {"prompt_tokens_details", {{"cached_tokens", cached}}},
          {"llamay_cached_prompt_tokens", cached}};
}

// echo: each choice's text starts with the prompt's: the text as sent, or else the tokens' pieces. Sets
// job.prompt_offsets.
void StartEcho(const tokenizer::Tokenizer& tok, Job& job) {
  const std::vector<int32_t>& prompt = job.p.prompt;
  std::vector<size_t> bytes;
  std::string echoed = job.p.prompt_text;
  if (!job.p.prompt_is_text) {
    tokenizer::StreamingDetokenizer detok(tok);
    for (const int32_t t : prompt) {
      bytes.push_back(echoed.size());
      echoed += detok.Push(t);
    }
    echoed += detok.Flush();
  }
  for (Choice& c : job.choices) {
    c.text = echoed;
    c.echo_code_points = CodePoints(echoed);
  }
  const std::string& text = job.choices[0].text;
  if (job.p.prompt_is_text) bytes = PromptByteOffsets(tok, prompt, text);
  size_t counted = 0, code_points = 0;  // offsets do not decrease: counted once
  for (const size_t b : bytes) {
    code_points += CodePoints(std::string_view(text).substr(counted, b - counted));
    counted = b;
    job.prompt_offsets.push_back(code_points);
  }
}

// Starts every choice. n > 1: the prompt is prefilled once and forked, so no page is copied; with echo
// and logprobs that prefill computes the whole prompt's logprobs, and the choices take it from the tree.
Status Launch(Server& server, std::shared_ptr<Job> job) {
  engine::Engine& engine = server.engine();
  // `held`: the session a request continues, lent to it until its final event.
  auto make_sink = [job, &server](int ci, std::shared_ptr<HeldContext> held = nullptr) {
    std::shared_ptr<Channel> ch = job->channel;
    const std::string session = job->p.session;
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
  auto base = [&](int i) {
    engine::Request r;
    r.sampling = job->p.sampling;
    if (r.sampling.has_seed) r.sampling.seed += static_cast<uint64_t>(i);
    r.max_tokens = job->p.max_tokens;
    r.top_logprobs = job->p.top_logprobs;
    r.ignore_eos = job->p.ignore_eos;
    r.pin_prefix = job->p.retain_prefix;
    r.stop = job->p.stop;
    if (job->p.grammar)
      r.processors.push_back(
          std::make_unique<engine::GrammarConstraint>(job->p.grammar, job->p.vocabulary, job->p.triggers));
    return r;
  };
  job->choices.resize(static_cast<size_t>(job->p.n));
  if (job->p.parse_tools && job->p.stream)
    for (auto& c : job->choices) c.tool_stream = std::make_unique<toolcall::ToolCallStream>(job->p.tool_format);
  if (job->p.echo) StartEcho(engine.tokenizer(), *job);
  const bool echo_logprobs = job->p.echo && job->p.top_logprobs >= 0;
  if (!job->p.session.empty()) {
    LLAMAY_RETURN_IF_ERROR(server.FetchSession(job->p.session));
    LLAMAY_ASSIGN_OR_RETURN(HeldContext taken, server.TakeContext(job->p.session));
    auto held = std::make_shared<HeldContext>(std::move(taken));
    Result<engine::Request> r = held->Continue(job->p.prompt, base(0));
    if (!r.ok()) {
      server.ReturnContext(job->p.session, std::move(*held));
      return r.status();
    }
    Result<uint64_t> id = engine.Submit(std::move(*r), make_sink(0, held));
    if (!id.ok()) {  // refused: the request, and the session's context in it, are untouched
      held->Return(*r);
      server.ReturnContext(job->p.session, std::move(*held));
      return id.status();
    }
    job->choices[0].id = *id;
    return Status::Ok();
  }
  // Submits choice i; a refusal (full queue) cancels the choices already running.
  auto submit = [&](int i, engine::Request r) -> Status {
    Result<uint64_t> id = engine.Submit(std::move(r), make_sink(i));
    if (!id.ok()) {
      for (int k = 0; k < i; ++k) engine.Cancel(job->choices[static_cast<size_t>(k)].id);
      return id.status();
    }
    job->choices[static_cast<size_t>(i)].id = *id;
    return Status::Ok();
  };
  const auto& prompt = job->p.prompt;
  if (job->p.n == 1 || prompt.size() < 2) {
    for (int i = 0; i < job->p.n; ++i) {
      engine::Request r = base(i);
      r.prompt = prompt;
      if (echo_logprobs) r.prompt_logprobs = job->p.top_logprobs;
      LLAMAY_RETURN_IF_ERROR(submit(i, std::move(r)));
    }
    return Status::Ok();
  }
  if (echo_logprobs) {
    engine::Request pre;
    pre.prompt = prompt;
    pre.max_tokens = 0;
    pre.sampling.temperature = 0;
    pre.pin_prefix = job->p.retain_prefix;
    pre.prompt_logprobs = job->p.top_logprobs;
    LLAMAY_ASSIGN_OR_RETURN(engine::Completion c, engine.Generate(std::move(pre), false, GoneProbe(job->watch)));
    if (c.reason == engine::FinishReason::kCancelled) return CancelledStatus();
    job->prefill_cached = c.usage.cached_tokens;
    for (int i = 0; i < job->p.n; ++i) {
      std::vector<engine::PromptLogprob> lps = c.prompt_logprobs;
      AddPromptLogprobs(*job, job->choices[static_cast<size_t>(i)], lps);
      engine::Request r = base(i);
      r.prompt = prompt;  // all but its last token from the tree, where the prefill left them
      LLAMAY_RETURN_IF_ERROR(submit(i, std::move(r)));
    }
    return Status::Ok();
  }
  // One prefill of all but the prompt's last token, forked n ways; each branch runs the last token itself.
  auto started = engine::Session::Start(engine, prompt, job->p.retain_prefix, GoneProbe(job->watch),
                                        &job->prefill_cached);
  if (!started.ok())
    return started.status().detail() == engine::kDetailSessionCancelled ? CancelledStatus() : started.status();
  std::vector<engine::Session> branches = started->Fork(static_cast<size_t>(job->p.n));
  for (int i = 0; i < job->p.n; ++i) {
    LLAMAY_ASSIGN_OR_RETURN(engine::Request r, branches[static_cast<size_t>(i)].Continue({}, base(i)));
    LLAMAY_RETURN_IF_ERROR(submit(i, std::move(r)));
  }
  return Status::Ok();
}

// Entries [from, end) of a choice in its route's format; null without logprobs.
json LogprobsJson(Server& server, const Job& job, const Choice& c, size_t from = 0) {
  if (job.p.top_logprobs < 0) return nullptr;
  const tokenizer::Tokenizer& tok = server.engine().tokenizer();
  const auto entries = std::span(c.logprobs).subspan(std::min(from, c.logprobs.size()));
  return job.p.chat ? ChatLogprobsJson(tok, entries) : CompletionLogprobsJson(tok, entries);
}

// A finished choice that made tool calls ends with "tool_calls", as OpenAI's do.
std::string FinishWithCalls(const Choice& c, bool calls) { return calls && c.finish == "stop" ? "tool_calls" : c.finish; }

json ToolCallJson(const toolcall::ToolCall& call) {
  return {{"id", call.id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

// Streamed tool calls as OpenAI sends them: a call's first delta has its index, id, type and name (and
// empty arguments); the next ones its index and a fragment of the arguments.
json ToolCallDeltasJson(const std::vector<toolcall::ToolCallDelta>& deltas) {
  json out = json::array();
  for (const auto& d : deltas) {
    if (!d.id.empty()) {
      out.push_back({{"index", d.index}, {"id", d.id}, {"type", "function"},
                     {"function", {{"name", d.name}, {"arguments", d.arguments}}}});
    } else if (!out.empty() && out.back()["index"] == d.index) {  // one entry per call in a chunk
      out.back()["function"]["arguments"] = out.back()["function"]["arguments"].get<std::string>() + d.arguments;
    } else {
      out.push_back({{"index", d.index}, {"function", {{"arguments", d.arguments}}}});
    }
  }
  return out;
}

json ChoiceJson(Server& server, const Job& job, size_t i) {
  const Choice& c = job.choices[i];
  json lp = LogprobsJson(server, job, c);
  if (job.p.chat && job.p.parse_tools) {
    const toolcall::ParsedAnswer a = toolcall::ParseToolCalls(job.p.tool_format, c.text);
    json message = {{"role", "assistant"}, {"content", a.content.empty() && !a.calls.empty() ? json(nullptr) : json(a.content)}};
    if (!a.calls.empty()) {
      message["tool_calls"] = json::array();
      for (const auto& call : a.calls) message["tool_calls"].push_back(ToolCallJson(call));
    }
    return {{"index", i}, {"message", message}, {"logprobs", lp}, {"finish_reason", FinishWithCalls(c, !a.calls.empty())}};
  }
  if (job.p.chat)
    return {{"index", i}, {"message", {{"role", "assistant"}, {"content", c.text}}}, {"logprobs", lp},
            {"finish_reason", c.finish}};
  return {{"index", i}, {"text", c.text}, {"logprobs", lp}, {"finish_reason", c.finish}};
}

json ChunkJson(const Job& job, size_t i, const std::string& delta, const json& finish, bool first,
               const json& logprobs = nullptr, const json& tool_calls = nullptr) {
  json d = json::object();
  if (job.p.chat) {
    if (first) d["role"] = "assistant";
    if (!delta.empty() || (!finish.is_null() && tool_calls.is_null())) d["content"] = delta;
    if (!tool_calls.is_null() && !tool_calls.empty()) d["tool_calls"] = tool_calls;
    return {{"id", job.id}, {"object", "chat.completion.chunk"}, {"created", job.created}, {"model", job.model},
            {"choices", json::array({{{"index", i}, {"delta", d}, {"logprobs", logprobs}, {"finish_reason", finish}}})}};
  }
  return {{"id", job.id}, {"object", "text_completion"}, {"created", job.created}, {"model", job.model},
          {"choices", json::array({{{"index", i}, {"text", delta}, {"logprobs", logprobs}, {"finish_reason", finish}}})}};
}

bool AllDone(const Job& job) {
  for (const auto& c : job.choices)
    if (!c.done) return false;
  return true;
}

void CancelAll(Server& server, const Job& job) {
  for (const auto& c : job.choices)
    if (!c.done) server.engine().Cancel(c.id);
}

// With a store, a session's new state is written through before the answer ends, so the next turn may go
// to any instance. A conflict (another instance continued the session first) becomes the request's error;
// any other store failure leaves the session held here, unsaved, and says so on stderr.
void CommitSessionOf(Server& server, Job& job) {
  if (job.p.session.empty() || !job.error.ok()) return;
  Status s = server.CommitSession(job.p.session);
  if (s.ok()) return;
  if (s.detail() == engine::kDetailSessionConflict) {
    job.error = s;
  } else {
    std::fprintf(stderr, "llamay: session %s not saved to the store: %s\n", job.p.session.c_str(), s.message().c_str());
  }
}

void Account(Server& server, const Job& job) {
  const json u = UsageJson(job);
  server.metrics().prompt_tokens += u["prompt_tokens"].get<uint64_t>();
  server.metrics().cached_tokens += u["llamay_cached_prompt_tokens"].get<uint64_t>();
  server.metrics().completion_tokens += u["completion_tokens"].get<uint64_t>();
}

}  // namespace

void HandleCompletion(Server& server, const httplib::Request& req, const std::string& raw, httplib::Response& res,
                      bool chat) {
  json body;
  if (!ParseBody(raw, res, &body)) return;
  auto job = std::make_shared<Job>();
  job->watch = WatchConnection(req);
  if (Status s = ParseParams(server, body, raw, chat, &job->p); !s.ok()) return SendStatus(res, s);
  static std::atomic<uint64_t> next{1};
  job->id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(next++);
  job->model = server.options().model_name;
  job->created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  if (Status s = Launch(server, job); !s.ok()) return SendStatus(res, s);

  if (!job->p.stream) {
    auto body = [job, chat, &server]() -> json {
      json choices = json::array();
      for (size_t i = 0; i < job->choices.size(); ++i) choices.push_back(ChoiceJson(server, *job, i));
      return {{"id", job->id},
              {"object", chat ? "chat.completion" : "text_completion"},
              {"created", job->created},
              {"model", job->model},
              {"choices", choices},
              {"usage", UsageJson(*job)}};
    };
    // Until every choice has started (admission errors and the first token arrive here), the status is
    // still open: a request that fails by then gets its proper error status.
    auto started = [&] {
      return std::all_of(job->choices.begin(), job->choices.end(), [](const Choice& c) { return c.started; });
    };
    while (!AllDone(*job) && !started()) {
      std::pair<int, engine::Event> ev;
      if (job->channel->Pop(&ev, std::chrono::milliseconds(100))) {
        Apply(*job, ev.first, ev.second);
      } else if (job->watch->Closed()) {  // the client left during the prefill: stop it now
        CancelAll(server, *job);
        return SendStatus(res, CancelledStatus());
      }
    }
    if (AllDone(*job)) {
      if (!job->error.ok()) return SendStatus(res, job->error);
      Account(server, *job);
      return SendJson(res, body());
    }
    // Then the answer is a 200 whose body is written when the choices end, from a content provider: only
    // it can see the client go away (cpp-httplib 0.11 shows a handler nothing of its connection). A closed
    // connection shows only when a write fails, so while the choices run it writes a space (leading
    // whitespace is valid JSON) every 250 ms; a client that left cancels its work within about two of
    // those, as a streaming one does. A choice that fails this late (its KV no longer fits even alone)
    // turns the body into an OpenAI error object.
    auto last_write = std::make_shared<std::chrono::steady_clock::time_point>(std::chrono::steady_clock::now());
    res.set_chunked_content_provider("application/json", [&server, job, body, last_write](size_t,
                                                                                           httplib::DataSink& sink) {
      std::pair<int, engine::Event> ev;
      if (job->channel->Pop(&ev, std::chrono::milliseconds(100))) Apply(*job, ev.first, ev.second);
      if (!AllDone(*job)) {
        if (job->watch->Closed()) {
          CancelAll(server, *job);
          return false;
        }
        const auto now = std::chrono::steady_clock::now();
        if (now - *last_write >= std::chrono::milliseconds(250)) {
          *last_write = now;
          if (!sink.is_writable() || !sink.write(" ", 1)) {
            CancelAll(server, *job);
            return false;
          }
        }
        return true;
      }
      std::string out;
      CommitSessionOf(server, *job);
      if (job->error.ok()) {
        Account(server, *job);
        out = Dump(body());
      } else {
        const bool conflict = job->error.detail() == engine::kDetailSessionConflict;
        out = Dump(json{{"error", {{"message", job->error.message()},
                                   {"type", conflict ? "invalid_request_error" : "server_error"},
                                   {"param", nullptr},
                                   {"code", conflict ? json("session_conflict") : json(nullptr)}}}});
      }
      sink.write(out.data(), out.size());
      sink.done();
      return true;
    });
    return;
  }

  // Streaming: server-sent events from the connection's thread until every choice is done.
  auto first = std::make_shared<std::vector<bool>>(job->choices.size(), true);
  auto finished_sent = std::make_shared<std::vector<bool>>(job->choices.size(), false);
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider("text/event-stream", [&server, job, first, finished_sent](size_t, httplib::DataSink& sink) {
    auto send = [&](const json& j) {
      const std::string line = "data: " + Dump(j) + "\n\n";
      return sink.write(line.data(), line.size());
    };
    std::pair<int, engine::Event> ev;
    if (!job->channel->Pop(&ev, std::chrono::milliseconds(200))) {
      if (!sink.is_writable() || job->watch->Closed()) {  // the client went away: free its work now
        CancelAll(server, *job);
        return false;
      }
      return true;
    }
    const size_t ci = static_cast<size_t>(ev.first);
    const bool had_error = ev.second.finished && ev.second.reason == engine::FinishReason::kError;
    std::string delta = Apply(*job, ev.first, ev.second);
    Choice& c = job->choices[ci];
    // With tools the text goes through the choice's tool-call parser: content and call deltas.
    json calls = nullptr;
    if (c.tool_stream && !c.tool_stream_finished) {
      toolcall::ToolDelta td = c.tool_stream->Push(delta);
      if (c.done) {
        c.tool_stream_finished = true;
        toolcall::ToolDelta rest = c.tool_stream->Finish();
        td.content += rest.content;
        td.calls.insert(td.calls.end(), rest.calls.begin(), rest.calls.end());
      }
      delta = std::move(td.content);
      calls = ToolCallDeltasJson(td.calls);
      if (calls.empty()) calls = nullptr;
    }
    if (had_error) {
      json err = {{"error", {{"message", job->error.message()}, {"type", "server_error"}}}};
      send(err);
    }
    // Each chunk carries the logprobs of the tokens that arrived since the last one (their text may be
    // in a later chunk, held back for a stop string or an incomplete character).
    auto new_logprobs = [&]() -> json {
      if (c.logprobs_sent == c.logprobs.size()) return nullptr;
      json lp = LogprobsJson(server, *job, c, c.logprobs_sent);
      c.logprobs_sent = c.logprobs.size();
      return lp;
    };
    if (!delta.empty() || !calls.is_null() || (*first)[ci] || c.logprobs_sent < c.logprobs.size()) {
      if (!send(ChunkJson(*job, ci, delta, nullptr, (*first)[ci], new_logprobs(), calls))) {
        CancelAll(server, *job);
        return false;
      }
      (*first)[ci] = false;
    }
    if (c.done && !(*finished_sent)[ci]) {
      (*finished_sent)[ci] = true;
      const bool made_calls = c.tool_stream && c.tool_stream->num_calls() > 0;
      if (!send(ChunkJson(*job, ci, "", FinishWithCalls(c, made_calls), false, new_logprobs(),
                          made_calls ? json::array() : json(nullptr)))) {
        CancelAll(server, *job);
        return false;
      }
    }
    if (AllDone(*job) && std::all_of(finished_sent->begin(), finished_sent->end(), [](bool b) { return b; })) {
      CommitSessionOf(server, *job);
      if (job->error.detail() == engine::kDetailSessionConflict)
        send(json{{"error", {{"message", job->error.message()}, {"type", "invalid_request_error"}, {"code", "session_conflict"}}}});
      Account(server, *job);
      if (job->p.include_usage) {
        json u = ChunkJson(*job, 0, "", nullptr, false);
        u["choices"] = json::array();
        u["usage"] = UsageJson(*job);
        send(u);
      }
      const std::string done = "data: [DONE]\n\n";
      sink.write(done.data(), done.size());
      sink.done();
    }
    return true;
  });
}

}  // namespace llamay::server
