// Generation: one Conversation (conversation.h) run through the engine, and its output as one stream of
// events that every API surface encodes into its own wire format.
//
// Below the surfaces, once: the chat template renders the messages, the output constraint and the
// tool-call grammar are built, the choices start (n > 1 prefills once and forks), and each choice's text
// goes through the reasoning splitter and then, its answer part only, the tool-call parser. A choice's
// events come in the order the model wrote them: reasoning, answer text, tool calls (a call's start with
// its id and name, then fragments of its arguments), then its end with the finish reason and usage.
//
// Lifecycle: Start() validates, renders and submits; the handler calls Next() until AllDone(), encoding
// each update (streamed) or reading result() at the end; Finish() then writes a session through to the
// store and counts the request in the server's metrics. A client that leaves is CancelAll()'d.
//
// Thread-safety: the engine's thread only pushes events into the channel; everything else belongs to the
// one handler thread that owns the Generation.
#ifndef LLAMAY_SERVER_GENERATION_H_
#define LLAMAY_SERVER_GENERATION_H_

#include <chrono>
#include <functional>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/engine.h"
#include "server/connection_watch.h"
#include "server/conversation.h"
#include "server/logprobs_json.h"
#include "toolcall/toolcall.h"

namespace llamay::server {

class Server;

struct OutputEvent {
  enum class Kind {
    kReasoning,      // text: more reasoning
    kText,           // text: more of the answer
    kToolCall,       // a call begins: call, call_id, call_name
    kToolArguments,  // text: a fragment of call `call`'s arguments (JSON text, as the model writes it)
  };
  Kind kind = Kind::kText;
  std::string text;
  int call = -1;
  std::string call_id;
  std::string call_name;
};

// How a choice ended.
enum class Finish {
  kStop,       // an end-of-generation token, or a stop sequence (ChoiceResult::stop_sequence)
  kLength,     // max_tokens
  kToolCalls,  // stopped after making tool calls
};
// "stop", "length", "tool_calls": OpenAI's names.
const char* FinishName(Finish f);

// What one engine event brought to one choice.
struct ChoiceUpdate {
  size_t choice = 0;
  bool first = false;     // the choice's first update
  std::vector<OutputEvent> events;
  std::vector<LogprobEntry> logprobs;  // entries of the tokens that arrived (their text may come later)
  bool finished = false;  // the choice ended with this update
  bool failed = false;    // ... with an error (Generation::error())
};

// A choice's whole output so far (complete once it has finished).
struct ChoiceResult {
  std::string reasoning;
  std::string content;
  std::vector<toolcall::ToolCall> calls;  // arguments complete once the choice has finished
  std::vector<LogprobEntry> logprobs;     // the echoed prompt's, then the generated tokens'
  bool done = false;
  Finish finish = Finish::kStop;
  std::string stop_sequence;  // the stop sequence that ended it, if one did
  engine::Usage usage;
  size_t reasoning_tokens = 0;  // generated tokens that were reasoning
};

// The request's token counts, all choices together (prompt and cached: the prompt's).
struct GenerationUsage {
  size_t prompt_tokens = 0;
  size_t cached_tokens = 0;
  size_t completion_tokens = 0;
  size_t reasoning_tokens = 0;
  size_t draft_tokens = 0;           // speculative decoding: tokens drafted and verified
  size_t accepted_draft_tokens = 0;  // of them, tokens generated without a step of their own
};

class Generation {
 public:
  // Builds what `c` needs from the model (the prompt, the constraint), then starts every choice. Errors
  // (bad input, a refused template, a full queue, an unknown or busy session) before anything runs.
  // `watch`: the client's connection, whose departure cancels the prefill of n > 1 (may be null).
  static Result<std::shared_ptr<Generation>> Start(Server& server, Conversation c,
                                                   std::shared_ptr<ConnectionWatch> watch);
  ~Generation();
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  // The next update, waiting up to `wait` for the engine; none when nothing arrived in that time.
  std::optional<ChoiceUpdate> Next(std::chrono::milliseconds wait);

  bool AllStarted() const;  // every choice has had an event (admission errors come by then)
  bool AllDone() const;
  void CancelAll();
  // True once the client's connection has closed (never when the request has no watch).
  std::function<bool()> client_gone() const;

  // The first error of any choice (a choice that failed late, a cancellation), or the session's
  // commit conflict after Finish().
  const Status& error() const { return error_; }
  const Conversation& request() const { return c_; }
  size_t n() const { return choices_.size(); }
  const ChoiceResult& result(size_t i) const;
  GenerationUsage usage() const;
  // Tokens of the request's prompt (the rendered conversation), known from Start on.
  size_t prompt_tokens() const;
  // Whether the answer was parsed for tool calls (tools given, tool_choice not "none").
  bool parses_tools() const { return parse_tools_; }

  // Once AllDone(): writes the session through to the store (a conflict becomes error()) and counts the
  // request's tokens in the server's metrics. Idempotent.
  void Finish();

  struct Impl;  // the choice state and the channel (generation.cc)

 private:
  explicit Generation(Server& server);
  // Submits every choice (n > 1: one prefill, forked).
  Status Launch();
  // Choice i's request without its prompt (and its ReasoningBudget's counter, for a reasoning model).
  engine::Request BaseRequest(size_t i);
  // Submits the one choice of a turn on a fork of its session, or stored (Conversation::fork_session, store_as).
  Status LaunchForked();
  // Submits the one choice of a request with a prompt_cache_key (Conversation::cache_key).
  Status LaunchKeyed();
  // Counts engine event `e` of choice `i`, produced at `at`, in the server's latency histograms and
  // token count. Before Apply (which marks a choice done).
  void CountLatency(size_t i, const engine::Event& e, std::chrono::steady_clock::time_point at);
  // Applies engine event `e` of choice `i`: the text it brings, through the parsers, as output events.
  ChoiceUpdate Apply(size_t i, engine::Event& e);
  Server& server_;
  Conversation c_;
  bool parse_tools_ = false;
  Status error_;
  bool finished_ = false;
  std::unique_ptr<Impl> impl_;
  std::vector<ChoiceResult> choices_;
};

// The prompt tokens running `c` would count (its usage's prompt_tokens), without running it: the tokens
// its session holds, when it continues one, and the rendered conversation. Errors as Start's rendering.
Result<size_t> CountPromptTokens(Server& server, const Conversation& c);

}  // namespace llamay::server

#endif  // LLAMAY_SERVER_GENERATION_H_
