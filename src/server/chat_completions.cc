#include "server/chat_completions.h"

#include <atomic>
#include <chrono>

#include "server/generation.h"
#include "server/http_util.h"
#include "server/logprobs_json.h"
#include "server/openai_common.h"
#include "server/respond.h"

namespace llamay::server {
namespace {

// `content`: a string, null, or text parts.
Result<std::optional<std::string>> MessageText(const json& content, const std::string& where) {
  if (content.is_null()) return std::optional<std::string>();
  if (content.is_string()) return std::optional<std::string>(content.get<std::string>());
  if (!content.is_array()) return InvalidArgumentError(where + " must be a string, null or an array of parts");
  std::string text;
  bool first = true;
  for (const auto& part : content) {
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      return InvalidArgumentError(where + ": each part needs a string 'type'");
    const std::string type = part["type"].get<std::string>();
    if (type != "text")
      return InvalidArgumentError(where + ": content parts of type '" + type +
                                  "' are not supported (this model takes text parts only)");
    if (!part.contains("text") || !part["text"].is_string())
      return InvalidArgumentError(where + ": a text part needs a string 'text'");
    if (!first) text += "\n";
    text += part["text"].get<std::string>();
    first = false;
  }
  return std::optional<std::string>(std::move(text));
}

Result<std::vector<MessageToolCall>> MessageToolCalls(const json& calls, const std::string& where) {
  std::vector<MessageToolCall> out;
  if (calls.is_null()) return out;
  if (!calls.is_array()) return InvalidArgumentError(where + " must be an array");
  for (size_t i = 0; i < calls.size(); ++i) {
    const json& c = calls[i];
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (!c.is_object() || !c.contains("function") || !c["function"].is_object())
      return InvalidArgumentError(at + " needs a 'function' object");
    const json& f = c["function"];
    if (!f.contains("name") || !f["name"].is_string()) return InvalidArgumentError(at + ".function.name must be a string");
    MessageToolCall call;
    call.id = c.contains("id") && c["id"].is_string() ? c["id"].get<std::string>() : "";
    call.name = f["name"];
    if (f.contains("arguments") && f["arguments"].is_string()) {
      call.arguments = f["arguments"];
    } else if (f.contains("arguments") && !f["arguments"].is_null()) {
      call.arguments = f["arguments"].dump();
    } else {
      call.arguments = "{}";
    }
    out.push_back(std::move(call));
  }
  return out;
}

// Chat Completions' wire format.
class ChatWire : public OpenAiWire {
 public:
  ChatWire(Server& server, bool include_usage) : OpenAiWire(server, "chatcmpl-", include_usage) {}

  json Body(const Generation& g) override {
    json choices = json::array();
    for (size_t i = 0; i < g.n(); ++i) {
      const ChoiceResult& r = g.result(i);
      json message = {{"role", "assistant"}, {"content", r.content}};
      // Clients read one name or the other (vLLM's and DeepSeek's reasoning_content, OpenRouter's reasoning).
      if (!r.reasoning.empty()) message["reasoning_content"] = message["reasoning"] = r.reasoning;
      if (!r.calls.empty()) {
        if (r.content.empty()) message["content"] = nullptr;
        message["tool_calls"] = json::array();
        for (const auto& call : r.calls)
          message["tool_calls"].push_back({{"id", call.id}, {"type", "function"},
                                           {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
      }
      choices.push_back({{"index", i}, {"message", message}, {"logprobs", Logprobs(g, r.logprobs)},
                         {"finish_reason", FinishName(r.finish)}});
    }
    return Answer("chat.completion", std::move(choices), g);
  }

  std::string Update(const Generation& g, const ChoiceUpdate& u) override {
    std::string out = FailureLine(g, u);
    std::string content, reasoning;
    json calls = json::array();
    for (const OutputEvent& e : u.events) {
      if (e.kind == OutputEvent::Kind::kText) content += e.text;
      if (e.kind == OutputEvent::Kind::kReasoning) reasoning += e.text;
      if (e.kind == OutputEvent::Kind::kToolCall)
        calls.push_back({{"index", e.call}, {"id", e.call_id}, {"type", "function"},
                         {"function", {{"name", e.call_name}, {"arguments", ""}}}});
      if (e.kind == OutputEvent::Kind::kToolArguments) {
        if (!calls.empty() && calls.back()["index"] == e.call) {  // one entry per call in a chunk
          calls.back()["function"]["arguments"] = calls.back()["function"]["arguments"].get<std::string>() + e.text;
        } else {
          calls.push_back({{"index", e.call}, {"function", {{"arguments", e.text}}}});
        }
      }
    }
    // Each chunk carries the logprobs of the tokens that arrived since the last one (their text may be in
    // a later chunk, held back for a stop string or an incomplete character).
    const json logprobs = u.logprobs.empty() ? json(nullptr) : Logprobs(g, u.logprobs);
    if (!content.empty() || !reasoning.empty() || !calls.empty() || u.first || !logprobs.is_null()) {
      json d = json::object();
      if (u.first) d["role"] = "assistant";
      if (!reasoning.empty()) d["reasoning_content"] = d["reasoning"] = reasoning;
      if (!content.empty()) d["content"] = content;
      if (!calls.empty()) d["tool_calls"] = calls;
      out += SseData(Chunk(u.choice, d, logprobs, nullptr));
    }
    if (u.finished) {
      const ChoiceResult& r = g.result(u.choice);
      json d = json::object();
      if (r.calls.empty()) d["content"] = "";
      out += SseData(Chunk(u.choice, d, nullptr, FinishName(r.finish)));
    }
    return out;
  }

 private:
  json Logprobs(const Generation& g, std::span<const LogprobEntry> entries) const {
    if (g.request().top_logprobs < 0) return nullptr;
    return ChatLogprobsJson(server_.engine().tokenizer(), entries);
  }
  json Chunk(size_t i) const override { return Chunk(i, json::object(), nullptr, nullptr); }
  json Chunk(size_t i, const json& delta, const json& logprobs, const json& finish) const {
    json out = Head("chat.completion.chunk");
    out["choices"] = json::array({{{"index", i}, {"delta", delta}, {"logprobs", logprobs}, {"finish_reason", finish}}});
    return out;
  }

};

Status ParseRequest(Server& server, const json& body, const std::string& raw, Conversation* c, bool* include_usage) {
  c->chat = true;
  c->max_tokens = server.options().default_max_tokens;
  try {
    LLAMAY_RETURN_IF_ERROR(ParseLlamayExtensions(body, c));
    if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty())
      return InvalidArgumentError("'messages' must be a non-empty array");
    LLAMAY_RETURN_IF_ERROR(ParseOpenAiTools(body, raw, c));
    LLAMAY_ASSIGN_OR_RETURN(c->messages, ParseChatMessages(body["messages"]));
    LLAMAY_RETURN_IF_ERROR(ParseOpenAiGeneration(body, c, include_usage));
    LLAMAY_RETURN_IF_ERROR(ParseReasoningControls(body, c));
    c->cache_key = Opt<std::string>(body, "prompt_cache_key", "");
    if (Opt(body, "logprobs", false)) {
      c->top_logprobs = 0;
      LLAMAY_RETURN_IF_ERROR(OptInt(body, "top_logprobs", 0, 20, &c->top_logprobs));
    }
  } catch (const json::exception& e) {
    return InvalidArgumentError(std::string("a field has the wrong type: ") + e.what());
  }
  LLAMAY_ASSIGN_OR_RETURN(c->format, RequestFormat(body, raw));
  return Status::Ok();
}

}  // namespace

Result<std::vector<Message>> ParseChatMessages(const json& messages) {
  if (!messages.is_array()) return InvalidArgumentError("'messages' must be an array");
  std::vector<Message> out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      return InvalidArgumentError("each message needs a string 'role'");
    const std::string role = m["role"];
    Message msg;
    const std::optional<Message::Role> parsed = RoleFromName(role);
    if (!parsed)
      return InvalidArgumentError(where + ".role '" + role + "' is not one of system, developer, user, assistant, tool");
    msg.role = *parsed;
    LLAMAY_ASSIGN_OR_RETURN(msg.content, MessageText(m.contains("content") ? m["content"] : json(), where + ".content"));
    // As OpenAI's API: only an assistant turn (one that calls tools, or carries only reasoning) may have none.
    if (!msg.content && msg.role != Message::Role::kAssistant)
      return InvalidArgumentError(where + ".content is required for a " + role + " message");
    if (m.contains("name") && m["name"].is_string()) msg.name = m["name"];
    if (msg.role == Message::Role::kAssistant) {
      if (m.contains("tool_calls")) {
        LLAMAY_ASSIGN_OR_RETURN(msg.tool_calls, MessageToolCalls(m["tool_calls"], where + ".tool_calls"));
      }
      for (const char* key : {"reasoning_content", "reasoning"})
        if (m.contains(key) && m[key].is_string() && msg.reasoning.empty()) msg.reasoning = m[key];
    }
    if (msg.role == Message::Role::kTool && m.contains("tool_call_id") && m["tool_call_id"].is_string())
      msg.tool_call_id = m["tool_call_id"];
    out.push_back(std::move(msg));
  }
  return out;
}

void HandleChatCompletion(Server& server, const httplib::Request& req, const std::string& raw, httplib::Response& res) {
  json body;
  if (!ParseBody(raw, res, &body)) return;
  Conversation c;
  bool include_usage = false;
  if (Status s = ParseRequest(server, body, raw, &c, &include_usage); !s.ok()) return SendStatus(res, s);
  auto gen = Generation::Start(server, std::move(c), WatchConnection(req));
  if (!gen.ok()) return SendStatus(res, gen.status());
  Respond(std::move(*gen), std::make_shared<ChatWire>(server, include_usage), res);
}

}  // namespace llamay::server
