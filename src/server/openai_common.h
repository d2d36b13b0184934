// What the OpenAI surfaces (Chat Completions, Completions, Responses) read and write alike: the sampling
// fields, llamay's request extensions, and the usage object.
// Thread-safety: pure functions.
#ifndef LLAMAY_SERVER_OPENAI_COMMON_H_
#define LLAMAY_SERVER_OPENAI_COMMON_H_

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "server/conversation.h"
#include "server/generation.h"
#include "server/respond.h"
#include "server/server.h"

namespace llamay::server {

// OpenAI's sampling fields with OpenAI's defaults (temperature 1, top_p 1, no top-k, min-p or repetition
// penalty): temperature, top_p, top_k, min_p, repetition_penalty, frequency_penalty, presence_penalty,
// seed; validated.
Status ParseOpenAiSampling(const json& body, sampling::SamplingParams* sp);

// What Chat Completions and Completions both take: max_tokens (or max_completion_tokens), n, stream with
// stream_options.include_usage (into *include_usage), ignore_eos, stop (up to 4) and the sampling fields.
// May throw json::exception on a wrong type (the caller answers it as a 400).
Status ParseOpenAiGeneration(const json& body, Conversation* c, bool* include_usage);

// Reasoning models' controls on Chat Completions: chat_template_kwargs (template variables; its
// enable_thinking also switches reasoning on or off), reasoning_effort ("none": off; any other: on) and
// thinking_budget_tokens (the most reasoning tokens).
Status ParseReasoningControls(const json& body, Conversation* c);

// llamay_session and llamay_retain_prefix.
Status ParseLlamayExtensions(const json& body, Conversation* c);

// {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details": {"cached_tokens"},
//  "llamay_cached_prompt_tokens"}, and "completion_tokens_details": {"reasoning_tokens"} when there were any.
json OpenAiUsageJson(const GenerationUsage& u);

// The error object of a failure after the answer's 200 went out (a session conflict is the client's).
json OpenAiErrorBody(const Status& s);

// What Chat Completions' and Completions' wire formats share: the id, model and creation time of an
// answer, OpenAI error objects, and the stream's end (a session conflict's error, the usage chunk, [DONE]).
class OpenAiWire : public WireFormat {
 public:
  OpenAiWire(Server& server, const char* id_prefix, bool include_usage);
  void SendError(httplib::Response& res, const Status& s) override;
  json ErrorBody(const Status& s) override { return OpenAiErrorBody(s); }
  std::string End(const Generation& g) override;

 protected:
  // A streamed chunk of choice i without its choices' content (the subclass fills it in).
  virtual json Chunk(size_t i) const = 0;
  json Head(const char* object) const;  // {"id", "object", "created", "model"}
  // A non-streamed answer: Head(object) with the choices and the usage.
  json Answer(const char* object, json choices, const Generation& g) const;
  // Streamed: the error line that comes before a choice's last chunk when it failed, else nothing.
  static std::string FailureLine(const Generation& g, const ChoiceUpdate& u);

  Server& server_;
  bool include_usage_;
  std::string id_, model_;
  int64_t created_ = 0;
};

}  // namespace llamay::server

#endif  // LLAMAY_SERVER_OPENAI_COMMON_H_
