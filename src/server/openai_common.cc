#include "server/openai_common.h"

#include "engine/snapshot_store.h"

namespace llamay::server {

Status ParseOpenAiSampling(const json& body, sampling::SamplingParams* sp) {
  sp->temperature = Opt(body, "temperature", 1.0f);
  sp->top_p = Opt(body, "top_p", 1.0f);
  sp->top_k = 0;
  LLAMAY_RETURN_IF_ERROR(OptInt(body, "top_k", 0, INT32_MAX, &sp->top_k));
  sp->min_p = Opt(body, "min_p", 0.0f);
  sp->repeat_penalty = Opt(body, "repetition_penalty", 1.0f);
  sp->frequency_penalty = Opt(body, "frequency_penalty", 0.0f);
  sp->presence_penalty = Opt(body, "presence_penalty", 0.0f);
  LLAMAY_RETURN_IF_ERROR(ParseSeed(body, sp));
  return sp->Validate();
}

Status ParseLlamayExtensions(const json& body, Conversation* c) {
  if (body.contains("llamay_session") && !body["llamay_session"].is_null()) {
    if (!body["llamay_session"].is_string()) return InvalidArgumentError("llamay_session must be a string");
    c->session = body["llamay_session"];
  }
  if (body.contains("llamay_retain_prefix")) c->retain_prefix = Opt(body, "llamay_retain_prefix", false);
  return Status::Ok();
}

json OpenAiUsageJson(const GenerationUsage& u) {
  json out = {{"prompt_tokens", u.prompt_tokens},
              {"completion_tokens", u.completion_tokens},
              {"total_tokens", u.prompt_tokens + u.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}},
              {"llamay_cached_prompt_tokens", u.cached_tokens}};
  if (u.reasoning_tokens > 0) out["completion_tokens_details"] = {{"reasoning_tokens", u.reasoning_tokens}};
  return out;
}

json OpenAiErrorBody(const Status& s) {
  const bool conflict = s.detail() == engine::kDetailSessionConflict;
  return {{"error", {{"message", s.message()},
                     {"type", conflict ? "invalid_request_error" : "server_error"},
                     {"param", nullptr},
                     {"code", conflict ? json("session_conflict") : json(nullptr)}}}};
}

}  // namespace llamay::server
