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

namespace llamay::server {

// OpenAI's sampling fields with OpenAI's defaults (temperature 1, top_p 1, no top-k, min-p or repetition
// penalty): temperature, top_p, top_k, min_p, repetition_penalty, frequency_penalty, presence_penalty,
// seed; validated.
Status ParseOpenAiSampling(const json& body, sampling::SamplingParams* sp);

// llamay_session and llamay_retain_prefix.
Status ParseLlamayExtensions(const json& body, Conversation* c);

// {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details": {"cached_tokens"},
//  "llamay_cached_prompt_tokens"}, and "completion_tokens_details": {"reasoning_tokens"} when there were any.
json OpenAiUsageJson(const GenerationUsage& u);

// The error object of a failure after the answer's 200 went out (a session conflict is the client's).
json OpenAiErrorBody(const Status& s);

}  // namespace llamay::server

#endif  // LLAMAY_SERVER_OPENAI_COMMON_H_
