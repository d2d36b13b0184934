// MessagesForHarmonyTemplate: OpenAI's message shape turned into the one gpt-oss's template reads.
#include <string>
#include <utility>
#include <vector>

#include "toolcall/harmony.h"

namespace llamay::toolcall {
namespace {

using Json = nlohmann::ordered_json;

bool IsRole(const Json& m, const char* role) {
  return m.is_object() && m.contains("role") && m["role"].is_string() && m["role"].get<std::string>() == role;
}

bool IsBlank(const Json& v) {
  return v.is_null() ||
         (v.is_string() && v.get<std::string>().find_first_not_of(" \t\r\n") == std::string::npos);
}

// The assistant message's reasoning moved to `thinking`; null fields the template would test with `in`
// (an error on none) removed.
Json AssistantFields(Json m) {
  if (!m.contains("thinking") || IsBlank(m["thinking"])) {
    for (const char* key : {"reasoning_content", "reasoning"}) {
      if (m.contains(key) && m[key].is_string() && !IsBlank(m[key])) {
        m["thinking"] = m[key];
        break;
      }
    }
  }
  for (const char* key : {"content", "thinking"}) {
    if (m.contains(key) && m[key].is_null()) m.erase(key);
  }
  return m;
}

// The call's arguments as the object the template writes with tojson: MessagesForToolTemplate turned a
// JSON string of an object into it; none (null, a blank string) is {}.
void FixArguments(Json* call) {
  if (!call->is_object() || !call->contains("function") || !(*call)["function"].is_object()) return;
  Json& fn = (*call)["function"];
  if (!fn.contains("arguments") || IsBlank(fn["arguments"])) fn["arguments"] = Json::object();
}

std::string CallId(const Json& call) {
  return call.is_object() && call.contains("id") && call["id"].is_string() ? call["id"].get<std::string>()
                                                                           : "";
}

}  // namespace

nlohmann::ordered_json MessagesForHarmonyTemplate(const nlohmann::ordered_json& messages) {
  const Json in = MessagesForToolTemplate(ToolFormat::kHermes, messages);
  if (!in.is_array()) return in;
  Json out = Json::array();
  for (size_t i = 0; i < in.size(); ++i) {
    if (!IsRole(in[i], "assistant")) {
      out.push_back(in[i]);
      continue;
    }
    Json m = AssistantFields(in[i]);
    if (!m.contains("tool_calls") || !m["tool_calls"].is_array() || m["tool_calls"].empty()) {
      out.push_back(std::move(m));
      continue;
    }
    // The template refuses content beside thinking in a message with calls; it renders either as analysis.
    if (m.contains("thinking") && !IsBlank(m["thinking"])) m.erase("content");
    Json calls = std::move(m["tool_calls"]);
    // The results that follow the calls, each to go after its call.
    std::vector<Json> results;
    size_t next = i + 1;
    for (; next < in.size() && IsRole(in[next], "tool"); ++next) results.push_back(in[next]);
    std::vector<bool> used(results.size(), false);
    for (size_t k = 0; k < calls.size(); ++k) {
      FixArguments(&calls[k]);
      Json message = k == 0 ? m : Json{{"role", "assistant"}};
      message["tool_calls"] = Json::array({calls[k]});
      out.push_back(std::move(message));
      // Its result: the one with its id, else the first not yet placed (clients that send no ids).
      const std::string id = CallId(calls[k]);
      size_t found = results.size();
      for (size_t r = 0; r < results.size() && !id.empty() && found == results.size(); ++r) {
        if (!used[r] && results[r].contains("tool_call_id") && results[r]["tool_call_id"] == id) found = r;
      }
      for (size_t r = 0; r < results.size() && found == results.size(); ++r) {
        const bool has_other_call = results[r].contains("tool_call_id") && !id.empty();
        if (!used[r] && !has_other_call) found = r;
      }
      if (found == results.size()) continue;
      used[found] = true;
      out.push_back(results[found]);
    }
    for (size_t r = 0; r < results.size(); ++r) {
      if (!used[r]) out.push_back(results[r]);  // results of no call here: kept, after the calls
    }
    i = next - 1;
  }
  return out;
}

}  // namespace llamay::toolcall
