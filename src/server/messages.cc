#include "server/messages.h"

#include <atomic>

#include "server/chat_prompt.h"
#include "server/generation.h"
#include "server/http_util.h"
#include "server/respond.h"
#include "server/structured_output.h"

namespace llamay::server {
namespace {

using ojson = nlohmann::ordered_json;

// Claude Code's first system block: "x-anthropic-billing-header: cc_version=...; cch=...;", different on
// every request. Dropped line by line, so the rest of the system prompt is the same every turn.
std::string WithoutBillingHeader(const std::string& text) {
  static constexpr std::string_view kHeader = "x-anthropic-billing-header";
  if (text.find(kHeader) == std::string::npos) return text;
  std::string out;
  size_t at = 0;
  while (at <= text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + at, end - at);
    if (line.substr(0, kHeader.size()) != kHeader) {
      if (!out.empty()) out += '\n';
      out += line;
    }
    at = end + 1;
  }
  return out;
}

// A string, or blocks of which only text blocks count (what `system` and a tool_result's content hold).
Result<std::string> BlockText(const json& v, const std::string& where) {
  if (v.is_null()) return std::string();
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) return InvalidArgumentError(where + " must be a string or an array of blocks");
  std::string text;
  for (const json& b : v) {
    if (!b.is_object() || !b.contains("type") || !b["type"].is_string())
      return InvalidArgumentError(where + ": each block needs a string 'type'");
    const std::string type = b["type"];
    if (type != "text")
      return InvalidArgumentError(where + ": blocks of type '" + type + "' are not supported here (text only)");
    if (!b.contains("text") || !b["text"].is_string()) return InvalidArgumentError(where + ": a text block needs 'text'");
    if (!text.empty()) text += "\n";
    text += b["text"].get<std::string>();
  }
  return text;
}

// One Anthropic message: a user turn may become tool results (each its own tool message) then text; an
// assistant turn is its thinking, text and tool_use blocks.
Status AddMessage(const json& m, size_t i, std::vector<Message>* out) {
  const std::string where = "messages[" + std::to_string(i) + "]";
  if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
    return InvalidArgumentError(where + " needs a string 'role'");
  const std::string role = m["role"];
  if (role == "system") {
    // Claude Code sends system reminders as messages between turns. Chat templates take a system message
    // only first, and changing the first would defeat the prefix tree: it joins the user turn before it
    // (or starts one), so the conversation's earlier tokens stay as they were.
    LLAMAY_ASSIGN_OR_RETURN(std::string text, BlockText(m.contains("content") ? m["content"] : json(), where + ".content"));
    if (!out->empty() && out->back().role == Message::Role::kUser) {
      std::optional<std::string>& content = out->back().content;
      if (!content) content = "";
      std::string& prev = *content;
      prev += (prev.empty() ? "" : "\n\n") + text;
    } else {
      Message user;
      user.content = std::move(text);
      out->push_back(std::move(user));
    }
    return Status::Ok();
  }
  if (role != "user" && role != "assistant")
    return InvalidArgumentError(where + ".role must be \"user\", \"assistant\" or \"system\"");
  const bool user = role == "user";
  Message msg;
  msg.role = user ? Message::Role::kUser : Message::Role::kAssistant;
  const json content = m.contains("content") ? m["content"] : json();
  if (content.is_string()) {
    msg.content = content.get<std::string>();
    out->push_back(std::move(msg));
    return Status::Ok();
  }
  if (!content.is_array()) return InvalidArgumentError(where + ".content must be a string or an array of blocks");
  std::string text;
  bool has_text = false;
  for (size_t k = 0; k < content.size(); ++k) {
    const json& b = content[k];
    const std::string at = where + ".content[" + std::to_string(k) + "]";
    if (!b.is_object() || !b.contains("type") || !b["type"].is_string())
      return InvalidArgumentError(at + " needs a string 'type'");
    const std::string type = b["type"];
    if (type == "text") {
      if (!b.contains("text") || !b["text"].is_string()) return InvalidArgumentError(at + ".text must be a string");
      if (has_text) text += "\n";
      text += b["text"].get<std::string>();
      has_text = true;
    } else if (type == "tool_result" && user) {
      Message result;
      result.role = Message::Role::kTool;
      result.tool_call_id = b.contains("tool_use_id") && b["tool_use_id"].is_string() ? b["tool_use_id"].get<std::string>() : "";
      LLAMAY_ASSIGN_OR_RETURN(std::string r, BlockText(b.contains("content") ? b["content"] : json(), at + ".content"));
      result.content = std::move(r);
      out->push_back(std::move(result));
    } else if (type == "tool_use" && !user) {
      if (!b.contains("name") || !b["name"].is_string()) return InvalidArgumentError(at + ".name must be a string");
      MessageToolCall call;
      call.id = b.contains("id") && b["id"].is_string() ? b["id"].get<std::string>() : "";
      call.name = b["name"];
      call.arguments = b.contains("input") && b["input"].is_object() ? b["input"].dump() : "{}";
      msg.tool_calls.push_back(std::move(call));
    } else if (type == "thinking" && !user) {
      if (b.contains("thinking") && b["thinking"].is_string()) msg.reasoning += b["thinking"].get<std::string>();
    } else if (type == "redacted_thinking") {
      // Opaque to any model but Anthropic's: nothing to render.
    } else if (type == "image" || type == "document") {
      return InvalidArgumentError(at + ": '" + type + "' blocks are not supported (llamay serves text models)");
    } else {
      return InvalidArgumentError(at + ": blocks of type '" + type + "' are not supported in a " + role + " message");
    }
  }
  if (has_text || !msg.tool_calls.empty() || !msg.reasoning.empty()) {
    if (has_text) msg.content = std::move(text);
    out->push_back(std::move(msg));
  }
  return Status::Ok();
}

// tools [{name, description, input_schema}] and tool_choice {type: auto|any|tool|none, name} in
// toolcall's (OpenAI's) shapes.
Status ParseAnthropicTools(const json& body, const ojson& ordered, Conversation* c) {
  ojson tools = ojson::array();
  if (body.contains("tools") && !body["tools"].is_null()) {
    if (!body["tools"].is_array()) return InvalidArgumentError("'tools' must be an array");
    for (const ojson& t : ordered["tools"]) {
      if (!t.is_object()) return InvalidArgumentError("each tool must be an object");
      ojson f = {{"name", t.contains("name") ? t["name"] : ojson()}};
      if (t.contains("description")) f["description"] = t["description"];
      f["parameters"] = t.contains("input_schema") ? t["input_schema"] : ojson{{"type", "object"}};
      tools.push_back({{"type", "function"}, {"function", f}});
    }
  }
  ojson choice;  // null: auto with tools
  if (body.contains("tool_choice") && body["tool_choice"].is_object()) {
    const json& tc = body["tool_choice"];
    const std::string type = tc.contains("type") && tc["type"].is_string() ? tc["type"].get<std::string>() : "";
    if (type == "auto") {
      choice = "auto";
    } else if (type == "any") {
      choice = "required";
    } else if (type == "none") {
      choice = "none";
    } else if (type == "tool") {
      if (!tc.contains("name") || !tc["name"].is_string()) return InvalidArgumentError("tool_choice.name must be a string");
      choice = {{"type", "function"}, {"function", {{"name", tc["name"]}}}};
    } else {
      return InvalidArgumentError("tool_choice.type must be auto, any, tool or none");
    }
    if (tc.contains("disable_parallel_tool_use") && tc["disable_parallel_tool_use"].is_boolean())
      c->parallel_tool_calls = !tc["disable_parallel_tool_use"].get<bool>();
  }
  if (tools.empty() && choice.is_null()) return Status::Ok();
  LLAMAY_ASSIGN_OR_RETURN(c->tools, ParseToolsDroppingUnsupported(std::move(tools)));
  LLAMAY_ASSIGN_OR_RETURN(c->tool_choice, toolcall::ParseToolChoice(choice, c->tools));
  return Status::Ok();
}

Status ParseRequest(Server& server, const json& body, const std::string& raw, Conversation* c) {
  c->chat = true;
  c->max_tokens = server.options().default_max_tokens;
  try {
    LLAMAY_RETURN_IF_ERROR(ParseAnthropicConversation(body, c));
    const ojson ordered = OrderedBody(raw);  // schemas keep their property order
    LLAMAY_RETURN_IF_ERROR(ParseAnthropicTools(body, ordered, c));
    LLAMAY_RETURN_IF_ERROR(OptInt(body, "max_tokens", 0, 1 << 20, &c->max_tokens));
    c->stream = Opt(body, "stream", false);
    if (body.contains("stop_sequences"))
      LLAMAY_RETURN_IF_ERROR(ParseStop(body["stop_sequences"], "stop_sequences", 16, &c->stop));
    sampling::SamplingParams& sp = c->sampling;
    sp.temperature = Opt(body, "temperature", 1.0f);
    sp.top_p = Opt(body, "top_p", 1.0f);
    sp.top_k = 0;
    sp.min_p = 0;
    sp.repeat_penalty = 1;
    LLAMAY_RETURN_IF_ERROR(OptInt(body, "top_k", 0, INT32_MAX, &sp.top_k));
    LLAMAY_RETURN_IF_ERROR(ParseSeed(body, &sp));  // not Anthropic's; accepted as the OpenAI routes do
    LLAMAY_RETURN_IF_ERROR(ParseSpeculative(body, c));
    LLAMAY_RETURN_IF_ERROR(sp.Validate());
    if (body.contains("thinking") && body["thinking"].is_object()) {
      const json& t = body["thinking"];
      const std::string type = t.contains("type") && t["type"].is_string() ? t["type"].get<std::string>() : "";
      if (type == "enabled") {
        c->reasoning.enabled = true;
        LLAMAY_RETURN_IF_ERROR(OptInt(t, "budget_tokens", 0, 1 << 20, &c->reasoning.budget));
      } else if (type == "disabled") {
        c->reasoning.enabled = false;
      }
    }
  } catch (const json::exception& e) {
    return InvalidArgumentError(std::string("a field has the wrong type: ") + e.what());
  }
  return Status::Ok();
}

const char* ErrorType(int http_status) {
  switch (http_status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 409: return "invalid_request_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    default: return "api_error";
  }
}

json ErrorJson(int http_status, const std::string& message) {
  return {{"type", "error"}, {"error", {{"type", ErrorType(http_status)}, {"message", message}}}};
}

// Messages' wire format. A streamed answer is a sequence of content blocks: one opens when the kind of
// output changes (thinking, text, a tool call) and closes before the next opens.
class MessagesWire : public WireFormat {
 public:
  explicit MessagesWire(Server& server) : model_(server.options().model_name) {
    static std::atomic<uint64_t> next{1};
    id_ = "msg_" + std::to_string(next++);
  }

  void SendError(httplib::Response& res, const Status& s) override {
    const int status = HttpStatusFor(s);
    if (status == 429 || status == 503) res.set_header("Retry-After", "1");
    SendAnthropicError(res, status, s.message());
  }
  json ErrorBody(const Status& s) override { return ErrorJson(HttpStatusFor(s), s.message()); }

  json Body(const Generation& g) override {
    const ChoiceResult& r = g.result(0);
    json content = json::array();
    if (!r.reasoning.empty()) content.push_back({{"type", "thinking"}, {"thinking", r.reasoning}, {"signature", ""}});
    if (!r.content.empty() || r.calls.empty()) content.push_back({{"type", "text"}, {"text", r.content}});
    for (const toolcall::ToolCall& call : r.calls)
      content.push_back({{"type", "tool_use"}, {"id", ToolUseId(call.id)}, {"name", call.name}, {"input", Input(call.arguments)}});
    return {{"id", id_}, {"type", "message"}, {"role", "assistant"}, {"model", model_}, {"content", content},
            {"stop_reason", StopReason(r)}, {"stop_sequence", StopSequence(r)}, {"usage", Usage(g)}};
  }

  std::string Begin(const Generation& g) override {
    json usage = {{"input_tokens", g.prompt_tokens()}, {"output_tokens", 0},
                  {"cache_read_input_tokens", 0}, {"cache_creation_input_tokens", 0}};
    json message = {{"id", id_}, {"type", "message"}, {"role", "assistant"}, {"model", model_},
                    {"content", json::array()}, {"stop_reason", nullptr}, {"stop_sequence", nullptr}, {"usage", usage}};
    return SseEvent("message_start", {{"type", "message_start"}, {"message", message}}) +
           SseEvent("ping", {{"type", "ping"}});
  }

  std::string Update(const Generation&, const ChoiceUpdate& u) override {
    std::string out;
    for (const OutputEvent& e : u.events) {
      switch (e.kind) {
        case OutputEvent::Kind::kReasoning:
          out += Open(Block::kThinking, {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
          out += Delta({{"type", "thinking_delta"}, {"thinking", e.text}});
          break;
        case OutputEvent::Kind::kText:
          out += Open(Block::kText, {{"type", "text"}, {"text", ""}});
          out += Delta({{"type", "text_delta"}, {"text", e.text}});
          break;
        case OutputEvent::Kind::kToolCall:
          out += Close();
          out += Open(Block::kToolUse, {{"type", "tool_use"}, {"id", ToolUseId(e.call_id)}, {"name", e.call_name},
                                        {"input", json::object()}});
          break;
        case OutputEvent::Kind::kToolArguments:
          out += Delta({{"type", "input_json_delta"}, {"partial_json", e.text}});
          break;
      }
    }
    return out;
  }

  std::string End(const Generation& g) override {
    std::string out = Close();
    if (!g.error().ok()) return out + SseEvent("error", ErrorJson(HttpStatusFor(g.error()), g.error().message()));
    const ChoiceResult& r = g.result(0);
    out += SseEvent("message_delta", {{"type", "message_delta"},
                                      {"delta", {{"stop_reason", StopReason(r)}, {"stop_sequence", StopSequence(r)}}},
                                      {"usage", Usage(g)}});
    return out + SseEvent("message_stop", {{"type", "message_stop"}});
  }

 private:
  enum class Block { kNone, kThinking, kText, kToolUse };

  std::string Open(Block kind, const json& start) {
    if (open_ == kind && kind != Block::kToolUse) return "";
    std::string out = Close();
    open_ = kind;
    return out + SseEvent("content_block_start", {{"type", "content_block_start"}, {"index", index_}, {"content_block", start}});
  }
  std::string Delta(const json& delta) {
    return SseEvent("content_block_delta", {{"type", "content_block_delta"}, {"index", index_}, {"delta", delta}});
  }
  std::string Close() {
    if (open_ == Block::kNone) return "";
    std::string out;
    if (open_ == Block::kThinking) out += Delta({{"type", "signature_delta"}, {"signature", ""}});
    out += SseEvent("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
    open_ = Block::kNone;
    ++index_;
    return out;
  }

  static std::string ToolUseId(const std::string& call_id) {
    return call_id.rfind("call_", 0) == 0 ? "toolu_" + call_id.substr(5) : call_id;
  }
  static json Input(const std::string& arguments) {
    json v = json::parse(arguments, nullptr, false);
    return v.is_object() ? v : json::object();
  }
  static json StopReason(const ChoiceResult& r) {
    switch (r.finish) {
      case Finish::kLength: return "max_tokens";
      case Finish::kToolCalls: return "tool_use";
      case Finish::kStop: return r.stop_sequence.empty() ? "end_turn" : "stop_sequence";
    }
    return "end_turn";
  }
  static json StopSequence(const ChoiceResult& r) {
    return r.stop_sequence.empty() ? json(nullptr) : json(r.stop_sequence);
  }
  // Anthropic counts cache reads apart from input: input_tokens + cache_read_input_tokens is the prompt.
  static json Usage(const Generation& g) {
    const GenerationUsage u = g.usage();
    return {{"input_tokens", u.prompt_tokens - u.cached_tokens}, {"output_tokens", u.completion_tokens},
            {"cache_read_input_tokens", u.cached_tokens}, {"cache_creation_input_tokens", 0},
            {"llamay_draft_tokens", u.draft_tokens}, {"llamay_accepted_draft_tokens", u.accepted_draft_tokens}};
  }

  std::string id_, model_;
  Block open_ = Block::kNone;
  int index_ = 0;
};

bool ParseAnthropicBody(const std::string& raw, httplib::Response& res, json* body) {
  *body = json::parse(ReplaceLoneSurrogates(raw), nullptr, false);
  if (body->is_discarded() || !body->is_object()) {
    SendAnthropicError(res, 400, "the request body is not a JSON object");
    return false;
  }
  return true;
}

}  // namespace

Status ParseAnthropicConversation(const json& body, Conversation* c) {
  if (body.contains("system") && !body["system"].is_null()) {
    LLAMAY_ASSIGN_OR_RETURN(std::string system, BlockText(body["system"], "system"));
    system = WithoutBillingHeader(system);
    if (!system.empty()) {
      Message m;
      m.role = Message::Role::kSystem;
      m.content = std::move(system);
      c->messages.push_back(std::move(m));
    }
  }
  if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty())
    return InvalidArgumentError("'messages' must be a non-empty array");
  for (size_t i = 0; i < body["messages"].size(); ++i)
    LLAMAY_RETURN_IF_ERROR(AddMessage(body["messages"][i], i, &c->messages));
  return Status::Ok();
}

void SendAnthropicError(httplib::Response& res, int http_status, const std::string& message) {
  res.status = http_status;
  res.set_content(Dump(ErrorJson(http_status, message)), "application/json");
}

void HandleMessages(Server& server, const httplib::Request& req, const std::string& raw, httplib::Response& res) {
  json body;
  if (!ParseAnthropicBody(raw, res, &body)) return;
  auto wire = std::make_shared<MessagesWire>(server);
  Conversation c;
  if (Status s = ParseRequest(server, body, raw, &c); !s.ok()) return wire->SendError(res, s);
  auto gen = Generation::Start(server, std::move(c), WatchConnection(req));
  if (!gen.ok()) return wire->SendError(res, gen.status());
  Respond(std::move(*gen), wire, res);
}

void HandleCountTokens(Server& server, const std::string& raw, httplib::Response& res) {
  json body;
  if (!ParseAnthropicBody(raw, res, &body)) return;
  MessagesWire wire(server);
  Conversation c;
  Status s = ParseRequest(server, body, raw, &c);
  Result<std::vector<int32_t>> tokens = s.ok() ? server.chat_prompt().Tokens(c.messages, false, c.tools, true, &c.reasoning)
                                               : Result<std::vector<int32_t>>(s);
  if (!tokens.ok()) return wire.SendError(res, tokens.status());
  SendJson(res, {{"input_tokens", tokens->size()}});
}

}  // namespace llamay::server
