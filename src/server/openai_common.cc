#include "server/openai_common.h"

#include <atomic>
#include <chrono>

#include "engine/snapshot_store.h"
#include "server/http_util.h"

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

Status ParseOpenAiGeneration(const json& body, Conversation* c, bool* include_usage) {
  for (const char* key : {"max_tokens", "max_completion_tokens"})
    LLAMAY_RETURN_IF_ERROR(OptInt(body, key, 0, 1 << 20, &c->max_tokens));
  LLAMAY_RETURN_IF_ERROR(OptInt(body, "n", 1, 64, &c->n));
  c->stream = Opt(body, "stream", false);
  c->ignore_eos = Opt(body, "ignore_eos", false);
  if (body.contains("stream_options") && !body["stream_options"].is_null()) {
    if (!body["stream_options"].is_object()) return InvalidArgumentError("'stream_options' must be an object");
    *include_usage = Opt(body["stream_options"], "include_usage", false);
  }
  if (body.contains("stop")) LLAMAY_RETURN_IF_ERROR(ParseStop(body["stop"], "stop", 4, &c->stop));
  LLAMAY_RETURN_IF_ERROR(ParseOpenAiSampling(body, &c->sampling));
  return Status::Ok();
}

Status ParseReasoningControls(const json& body, Conversation* c) {
  ReasoningControls& r = c->reasoning;
  if (body.contains("chat_template_kwargs") && !body["chat_template_kwargs"].is_null()) {
    if (!body["chat_template_kwargs"].is_object()) return InvalidArgumentError("'chat_template_kwargs' must be an object");
    r.template_kwargs = nlohmann::ordered_json::parse(body["chat_template_kwargs"].dump());
    if (r.template_kwargs.contains("enable_thinking") && r.template_kwargs["enable_thinking"].is_boolean())
      r.enabled = r.template_kwargs["enable_thinking"].get<bool>();
  }
  if (body.contains("reasoning_effort") && !body["reasoning_effort"].is_null()) {
    if (!body["reasoning_effort"].is_string()) return InvalidArgumentError("'reasoning_effort' must be a string");
    r.enabled = body["reasoning_effort"] != "none";
    r.effort = body["reasoning_effort"].get<std::string>();
  }
  LLAMAY_RETURN_IF_ERROR(OptInt(body, "thinking_budget_tokens", 0, 1 << 20, &r.budget));
  return Status::Ok();
}

Status ParseLlamayExtensions(const json& body, Conversation* c) {
  if (body.contains("llamay_session") && !body["llamay_session"].is_null()) {
    if (!body["llamay_session"].is_string()) return InvalidArgumentError("llamay_session must be a string");
    c->session = body["llamay_session"];
  }
  if (body.contains("llamay_retain_prefix")) c->retain_prefix = Opt(body, "llamay_retain_prefix", false);
  return ParseSpeculative(body, c);
}

json OpenAiUsageJson(const GenerationUsage& u) {
  json out = {{"prompt_tokens", u.prompt_tokens},
              {"completion_tokens", u.completion_tokens},
              {"total_tokens", u.prompt_tokens + u.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}},
              {"llamay_cached_prompt_tokens", u.cached_tokens},
              {"llamay_draft_tokens", u.draft_tokens},
              {"llamay_accepted_draft_tokens", u.accepted_draft_tokens}};
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

OpenAiWire::OpenAiWire(Server& server, const char* id_prefix, bool include_usage)
    : server_(server), include_usage_(include_usage), model_(server.options().model_name) {
  static std::atomic<uint64_t> next{1};
  id_ = id_prefix + std::to_string(next++);
  created_ = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void OpenAiWire::SendError(httplib::Response& res, const Status& s) { SendStatus(res, s); }

json OpenAiWire::Head(const char* object) const {
  return {{"id", id_}, {"object", object}, {"created", created_}, {"model", model_}};
}

json OpenAiWire::Answer(const char* object, json choices, const Generation& g) const {
  json out = Head(object);
  out["choices"] = std::move(choices);
  out["usage"] = OpenAiUsageJson(g.usage());
  return out;
}

std::string OpenAiWire::FailureLine(const Generation& g, const ChoiceUpdate& u) {
  if (!u.failed) return "";
  return SseData({{"error", {{"message", g.error().message()}, {"type", "server_error"}}}});
}

std::string OpenAiWire::End(const Generation& g) {
  std::string out;
  if (g.error().detail() == engine::kDetailSessionConflict)
    out += SseData({{"error", {{"message", g.error().message()}, {"type", "invalid_request_error"}, {"code", "session_conflict"}}}});
  if (include_usage_) {
    json u = Chunk(0);
    u["choices"] = json::array();
    u["usage"] = OpenAiUsageJson(g.usage());
    out += SseData(u);
  }
  return out + "data: [DONE]\n\n";
}

}  // namespace llamay::server
