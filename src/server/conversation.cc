#include "server/conversation.h"

#include <cstdlib>

namespace llamay::server {

std::optional<Message::Role> RoleFromName(std::string_view name) {
  if (name == "system" || name == "developer") return Message::Role::kSystem;
  if (name == "user") return Message::Role::kUser;
  if (name == "assistant") return Message::Role::kAssistant;
  if (name == "tool") return Message::Role::kTool;
  return std::nullopt;
}

std::string_view RoleName(Message::Role role) {
  switch (role) {
    case Message::Role::kSystem: return "system";
    case Message::Role::kUser: return "user";
    case Message::Role::kAssistant: return "assistant";
    case Message::Role::kTool: return "tool";
  }
  return "user";
}

Status OptIntImpl(const json& body, const char* key, int64_t lo, int64_t hi, int64_t* out) {
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
  *out = it->get<int64_t>();
  return Status::Ok();
}

Status ParseSpeculative(const json& body, Conversation* c) {
  auto it = body.find("llamay_speculative");
  if (it == body.end() || it->is_null()) return Status::Ok();
  if (!it->is_boolean()) return InvalidArgumentError("'llamay_speculative' must be a boolean");
  c->speculative = it->get<bool>();
  return Status::Ok();
}

Status ParseSeed(const json& body, sampling::SamplingParams* sp) {
  auto it = body.find("seed");
  if (it == body.end() || it->is_null()) return Status::Ok();
  if (!it->is_number_integer()) return InvalidArgumentError("'seed' must be an integer");
  sp->seed = it->is_number_unsigned() ? it->get<uint64_t>() : static_cast<uint64_t>(it->get<int64_t>());
  sp->has_seed = true;
  return Status::Ok();
}

Status ParseStop(const json& value, const char* key, size_t max, std::vector<std::string>* out) {
  const std::string what = std::string("'") + key + "'";
  if (value.is_null()) return Status::Ok();
  if (value.is_string()) {
    out->push_back(value);
  } else if (value.is_array()) {
    for (const auto& s : value) {
      if (!s.is_string()) return InvalidArgumentError(what + " must be a string or an array of strings");
      out->push_back(s);
    }
  } else {
    return InvalidArgumentError(what + " must be a string or an array of strings");
  }
  if (out->size() > max) return InvalidArgumentError(what + " holds at most " + std::to_string(max) + " strings");
  for (const auto& s : *out)
    if (s.empty()) return InvalidArgumentError(what + " strings must not be empty");
  return Status::Ok();
}

Status ParseOpenAiTools(const json& body, const std::string& raw, Conversation* c) {
  const bool has_tools = body.contains("tools") && !body["tools"].is_null();
  const bool has_choice = body.contains("tool_choice") && !body["tool_choice"].is_null();
  if (body.contains("parallel_tool_calls") && !body["parallel_tool_calls"].is_null()) {
    if (!body["parallel_tool_calls"].is_boolean()) return InvalidArgumentError("'parallel_tool_calls' must be a boolean");
    c->parallel_tool_calls = body["parallel_tool_calls"].get<bool>();
  }
  if (!has_tools && !has_choice) return Status::Ok();
  const nlohmann::ordered_json ordered = OrderedBody(raw);  // schemas keep their property order
  LLAMAY_ASSIGN_OR_RETURN(c->tools, toolcall::ParseTools(has_tools ? ordered["tools"] : nlohmann::ordered_json()));
  LLAMAY_ASSIGN_OR_RETURN(c->tool_choice,
                          toolcall::ParseToolChoice(has_choice ? ordered["tool_choice"] : nlohmann::ordered_json(),
                                                    c->tools));
  return Status::Ok();
}

namespace {

// The object in `params` that holds `keyword` at the JSON pointer ending `message` ("... at /a/b"), or null.
// The pointer is the message's tail after some " at /" past `from`: not simply the last " at ", since a
// property name in the pointer may contain " at " (only '/' and '~' are escaped), nor the first, since a
// $ref quoted before it may too. Each candidate is tried; one that is no pointer or names nothing is skipped.
nlohmann::ordered_json* KeywordHolder(nlohmann::ordered_json& params, const std::string& message, size_t from,
                                      const std::string& keyword) {
  for (size_t at = message.find(" at /", from); at != std::string::npos; at = message.find(" at /", at + 1)) {
    std::string ptr = message.substr(at + 4);
    if (ptr == "/") ptr.clear();
    try {
      const nlohmann::ordered_json::json_pointer where(ptr);
      if (params.contains(where) && params[where].is_object() && params[where].contains(keyword))
        return &params[where];
    } catch (const nlohmann::ordered_json::exception&) {  // no pointer: a candidate inside the quoted $ref
    }
  }
  return nullptr;
}

}  // namespace

Result<std::vector<toolcall::ToolSpec>> ParseToolsDroppingUnsupported(nlohmann::ordered_json tools) {
  static constexpr std::string_view kKeyword = "unsupported JSON Schema keyword \"";
  for (int attempt = 0; attempt < 256; ++attempt) {
    auto parsed = toolcall::ParseTools(tools);
    if (parsed.ok()) return parsed;
    const std::string m = parsed.status().message();
    const size_t k = m.find(kKeyword);
    if (m.rfind("tools[", 0) != 0 || k == std::string::npos) return parsed.status();
    const size_t index = std::strtoul(m.c_str() + 6, nullptr, 10);
    const size_t kw_end = m.find('"', k + kKeyword.size());
    if (kw_end == std::string::npos || index >= tools.size()) return parsed.status();
    const std::string keyword = m.substr(k + kKeyword.size(), kw_end - k - kKeyword.size());
    nlohmann::ordered_json* holder =
        KeywordHolder(tools[index]["function"]["parameters"], m, kw_end, keyword);
    if (holder == nullptr) return parsed.status();
    holder->erase(keyword);
  }
  return InvalidArgumentError("'tools': too many unsupported JSON Schema keywords");
}

}  // namespace llamay::server
