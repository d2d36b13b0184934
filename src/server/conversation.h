// The one internal request every API surface translates its wire format into (chat_completions.cc,
// completions.cc, responses.cc, messages.cc, ollama.cc), and the JSON field readers they share.
//
// A surface parses and validates its body into a Conversation; generation.h turns a Conversation into
// engine requests and their events into one stream of OutputEvents, which the surface encodes back into
// its own wire format. Nothing below the surfaces knows which API a request came from.
//
// Thread-safety: values.
#ifndef LLAMAY_SERVER_CONVERSATION_H_
#define LLAMAY_SERVER_CONVERSATION_H_

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/engine.h"
#include "server/structured_output.h"
#include "toolcall/toolcall.h"

namespace llamay::server {

// A call the assistant made, as it comes back in a conversation's history.
struct MessageToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text of the arguments object (or, for a custom tool, its free input)
};

// One message of a conversation, in the roles chat templates know. Content is text: every surface joins
// its text parts and refuses the kinds of part llamay cannot take (images, audio) by name.
struct Message {
  enum class Role { kSystem, kUser, kAssistant, kTool };
  Role role = Role::kUser;
  std::optional<std::string> content;  // none: null (an assistant message that only calls tools)
  std::string reasoning;               // assistant: reasoning sent back with the history
  std::vector<MessageToolCall> tool_calls;  // assistant
  std::string tool_call_id;                 // tool: the call this result answers
  std::string name;                         // optional: the speaker's or the tool's name
};

std::string_view RoleName(Message::Role role);  // "system", "user", "assistant", "tool"
// The role of that name ("developer" is OpenAI's newer name for system), or none for another name.
std::optional<Message::Role> RoleFromName(std::string_view name);

// Reasoning controls (thinking models): on or off, a budget, and variables handed to the template.
struct ReasoningControls {
  std::optional<bool> enabled;  // none: the template's default
  int budget = -1;              // reasoning tokens allowed; -1: no limit
  std::string effort;           // reasoning_effort (Responses: reasoning.effort) as sent; "" when absent
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();  // chat_template_kwargs
};

struct Conversation {
  // The input: chat messages rendered by the model's template, or (the Completions API) a prompt.
  bool chat = true;
  std::vector<Message> messages;
  std::vector<int32_t> prompt_tokens;  // !chat: the prompt as token ids (tokenized text or sent as ids)
  std::string prompt_text;             // !chat: the prompt as sent, when it was text
  bool prompt_is_text = false;

  // Tools: the calls the answer may make. parse_tools: tools were given and tool_choice is not "none".
  std::vector<toolcall::ToolSpec> tools;
  toolcall::ToolChoice tool_choice;
  bool parallel_tool_calls = true;
  // The output constraint (a JSON Schema, any JSON object or a GBNF grammar); with tools see generation.h.
  RequestedFormat format;

  sampling::SamplingParams sampling;
  int max_tokens = 16;
  int n = 1;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  int top_logprobs = -1;  // >= 0: report logprobs with this many alternatives
  bool echo = false;      // !chat: the text starts with the prompt's (and logprobs cover it)

  ReasoningControls reasoning;

  // A held context this turn continues (llamay_session; previous_response_id), or empty.
  std::string session;
  // `session` is continued on a fork: it stays as it was, and may be continued again (an agent that
  // backtracks; the Responses API's previous_response_id).
  bool fork_session = false;
  // prompt_cache_key: a client that sends the whole conversation every turn continues one held context
  // (Generation: the key's context continues when the prompt begins with what it holds).
  std::string cache_key;
  // Non-empty: the context the turn ends with is held as a new session of this id (a stored response).
  // Without `session` the turn starts from the prefix tree as usual. REQUIRES n 1.
  std::string store_as;
  bool retain_prefix = false;
  bool stream = false;
  bool speculative = true;  // llamay_speculative: false turns speculative decoding off for this request
};

// ---- JSON field readers shared by the surfaces ----------------------------------------------------------

using json = nlohmann::json;

// body[key] as T, or `fallback` when the key is absent or null (clients send null for "unset").
template <typename T>
T Opt(const json& body, const char* key, T fallback) {
  auto it = body.find(key);
  return it == body.end() || it->is_null() ? fallback : it->get<T>();
}

// body[key] as an integer in [lo, hi] into *out; absent or null leaves *out. Anything else is a 400 that
// names the field (a float, a string, 1e20, -3 where only 0..20 make sense).
Status OptIntImpl(const json& body, const char* key, int64_t lo, int64_t hi, int64_t* out);
template <typename T>
Status OptInt(const json& body, const char* key, int64_t lo, int64_t hi, T* out) {
  int64_t v = static_cast<int64_t>(*out);
  LLAMAY_RETURN_IF_ERROR(OptIntImpl(body, key, lo, hi, &v));
  *out = static_cast<T>(v);
  return Status::Ok();
}

// `llamay_speculative`: a boolean, every surface (false: this request decodes without drafts).
Status ParseSpeculative(const json& body, Conversation* c);

// `seed`: any 64-bit integer (a negative one taken as its two's complement, as other servers do).
Status ParseSeed(const json& body, sampling::SamplingParams* sp);

// `stop` as a string or an array of at most `max` non-empty strings.
Status ParseStop(const json& value, const char* key, size_t max, std::vector<std::string>* out);

// Chat Completions' `tools`, `tool_choice` and `parallel_tool_calls` into c (toolcall::ParseTools and
// ParseToolChoice, on `raw` read again in its own key order so that each schema keeps its property order).
Status ParseOpenAiTools(const json& body, const std::string& raw, Conversation* c);

// toolcall::ParseTools (tools in Chat Completions' shape), except that a JSON Schema keyword the grammar
// engine does not support is dropped from that tool's schema (the rest still constrains the arguments)
// instead of refusing the request: agents' own tools use some (Claude Code's propertyNames), and an
// agent cannot change its tools. Anything else is still refused. For the surfaces agent programs speak
// (Messages, Responses); Chat Completions refuses such schemas, naming the keyword.
Result<std::vector<toolcall::ToolSpec>> ParseToolsDroppingUnsupported(nlohmann::ordered_json tools);

}  // namespace llamay::server

#endif  // LLAMAY_SERVER_CONVERSATION_H_
