#include "server/responses.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <set>

#include "grammar/lark.h"
#include "server/conversation.h"
#include "server/generation.h"
#include "server/http_util.h"
#include "server/openai_common.h"
#include "server/respond.h"
#include "server/structured_output.h"

namespace llamay::server {
namespace {

using ojson = nlohmann::ordered_json;

// What a Responses request says beyond its Conversation: what the response object echoes, and which tools
// are custom (their calls come back as custom_tool_call items with free-text input).
struct ResponsesRequest {
  std::string id;                // "resp_..."; the held context's id when stored
  bool store = true;
  std::string previous;          // previous_response_id
  std::set<std::string> custom;  // custom tools' names
  json echo = json::object();    // the request's fields the response object repeats
};

// A message's content: a string, or parts of which the text kinds count.
Result<std::string> ContentText(const json& content, const std::string& where) {
  if (content.is_null()) return std::string();
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) return InvalidArgumentError(where + " must be a string or an array of content parts");
  std::string text;
  for (size_t k = 0; k < content.size(); ++k) {
    const json& p = content[k];
    const std::string at = where + "[" + std::to_string(k) + "]";
    if (!p.is_object() || !p.contains("type") || !p["type"].is_string())
      return InvalidArgumentError(at + " needs a string 'type'");
    const std::string type = p["type"];
    if (type == "input_text" || type == "output_text" || type == "text" || type == "summary_text" ||
        type == "reasoning_text") {
      if (!p.contains("text") || !p["text"].is_string()) return InvalidArgumentError(at + ".text must be a string");
      if (!text.empty()) text += "\n";
      text += p["text"].get<std::string>();
    } else if (type == "refusal") {
      if (p.contains("refusal") && p["refusal"].is_string()) text += p["refusal"].get<std::string>();
    } else {
      return InvalidArgumentError(at + ": content of type '" + type + "' is not supported (llamay serves text models)");
    }
  }
  return text;
}

std::string StringOr(const json& j, const char* key, std::string fallback = "") {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : fallback;
}

// The input items, in order, as chat messages: function calls join the assistant message before them (or
// start one), outputs become tool messages, reasoning items go with the assistant message that follows.
Status ParseInput(const json& input, std::vector<Message>* out) {
  if (input.is_string()) {
    Message m;
    m.content = input.get<std::string>();
    out->push_back(std::move(m));
    return Status::Ok();
  }
  if (!input.is_array()) return InvalidArgumentError("'input' must be a string or an array of items");
  std::string reasoning;  // of a reasoning item, for the next assistant message
  std::map<std::string, std::string> call_names;  // call_id -> the function's name
  auto assistant = [&]() -> Message& {
    if (out->empty() || out->back().role != Message::Role::kAssistant) {
      Message m;
      m.role = Message::Role::kAssistant;
      out->push_back(std::move(m));
    }
    Message& m = out->back();
    if (!reasoning.empty()) m.reasoning += std::exchange(reasoning, "");
    return m;
  };
  for (size_t i = 0; i < input.size(); ++i) {
    const json& item = input[i];
    const std::string where = "input[" + std::to_string(i) + "]";
    if (!item.is_object()) return InvalidArgumentError(where + " must be an object");
    const std::string type = StringOr(item, "type", item.contains("role") ? "message" : "");
    if (type == "message") {
      const std::string role = StringOr(item, "role");
      LLAMAY_ASSIGN_OR_RETURN(std::string text,
                              ContentText(item.contains("content") ? item["content"] : json(), where + ".content"));
      if (role == "assistant") {
        Message& m = assistant();
        if (!m.tool_calls.empty()) {  // text after the calls: a turn of its own
          Message next;
          next.role = Message::Role::kAssistant;
          out->push_back(std::move(next));
        }
        std::optional<std::string>& content = out->back().content;
        content = content ? *content + text : text;
        continue;
      }
      Message m;
      if (role == "user") {
        m.role = Message::Role::kUser;
      } else if (role == "system" || role == "developer") {
        // Chat templates take one system message, first. Codex sends several developer messages: those
        // at the start make one; a later one joins the user turn before it (or starts one), so that the
        // conversation's earlier tokens stay as they were for the prefix tree (as on the Messages route).
        const bool leading = std::all_of(out->begin(), out->end(), [](const Message& x) { return x.role == Message::Role::kSystem; });
        if (!out->empty() && (leading || out->back().role == Message::Role::kUser)) {
          std::optional<std::string>& content = out->back().content;
          content = (content && !content->empty() ? *content + "\n\n" : "") + text;
          continue;
        }
        m.role = leading ? Message::Role::kSystem : Message::Role::kUser;
      } else {
        return InvalidArgumentError(where + ".role must be user, assistant, system or developer");
      }
      m.content = std::move(text);
      out->push_back(std::move(m));
    } else if (type == "function_call" || type == "custom_tool_call") {
      MessageToolCall call;
      call.id = StringOr(item, "call_id", StringOr(item, "id"));
      call.name = StringOr(item, "name");
      if (call.name.empty()) return InvalidArgumentError(where + ".name must be a non-empty string");
      if (type == "function_call") {
        call.arguments = StringOr(item, "arguments", "{}");
      } else {
        call.arguments = json{{"input", StringOr(item, "input")}}.dump();
      }
      call_names[call.id] = call.name;
      assistant().tool_calls.push_back(std::move(call));
    } else if (type == "function_call_output" || type == "custom_tool_call_output") {
      Message m;
      m.role = Message::Role::kTool;
      m.tool_call_id = StringOr(item, "call_id");
      if (auto it = call_names.find(m.tool_call_id); it != call_names.end()) m.name = it->second;
      LLAMAY_ASSIGN_OR_RETURN(std::string text,
                              ContentText(item.contains("output") ? item["output"] : json(), where + ".output"));
      m.content = std::move(text);
      out->push_back(std::move(m));
    } else if (type == "reasoning") {
      // The reasoning text when the client kept it, else its summary; encrypted content is OpenAI's only.
      const char* key = item.contains("content") && item["content"].is_array() && !item["content"].empty() ? "content"
                                                                                                             : "summary";
      if (item.contains(key)) {
        LLAMAY_ASSIGN_OR_RETURN(std::string text, ContentText(item[key], where + "." + key));
        reasoning += text;
      }
    } else if (type == "item_reference") {
      return InvalidArgumentError(where + ": item_reference is not supported: send the items themselves, or "
                                          "continue a stored response with previous_response_id");
    } else {
      return InvalidArgumentError(where + ": input items of type '" + type + "' are not supported");
    }
  }
  if (out->empty()) return InvalidArgumentError("'input' holds no messages");
  return Status::Ok();
}

// A custom tool as a function of one string argument, `input`: how the model's template shows it and how
// its call is written. A grammar (Lark or a regular expression) constrains that string where it can be a
// regular expression; one that cannot (a recursive Lark grammar) leaves the input free, and says so once.
Result<ojson> CustomToolAsFunction(const ojson& t, size_t i) {
  ojson input = {{"type", "string"}};
  if (t.contains("format") && t["format"].is_object()) {
    const ojson& f = t["format"];
    if (f.value("type", "") == "grammar") {
      const std::string syntax = f.value("syntax", "");
      const std::string definition = f.contains("definition") && f["definition"].is_string() ? f["definition"].get<std::string>() : "";
      auto pattern = grammar::RegexForCustomTool(syntax, definition);
      if (pattern.ok()) {
        input["pattern"] = *pattern;
      } else {
        std::fprintf(stderr, "llamay: tools[%zu] (custom tool %s): its input is not constrained: %s\n", i,
                     t.value("name", "").c_str(), pattern.status().message().c_str());
      }
    }
  }
  ojson f = {{"name", t.contains("name") ? t["name"] : ojson()}};
  if (t.contains("description")) f["description"] = t["description"];
  f["parameters"] = {{"type", "object"}, {"properties", {{"input", input}}}, {"required", {"input"}},
                     {"additionalProperties", false}};
  return ojson{{"type", "function"}, {"function", f}};
}

// tools (function and custom; the hosted kinds, which only OpenAI runs, are left out) and tool_choice.
Status ParseResponsesTools(const json& body, const ojson& ordered, Conversation* c, ResponsesRequest* rr) {
  ojson tools = ojson::array();
  if (body.contains("tools") && !body["tools"].is_null()) {
    if (!body["tools"].is_array()) return InvalidArgumentError("'tools' must be an array");
    for (size_t i = 0; i < ordered["tools"].size(); ++i) {
      const ojson& t = ordered["tools"][i];
      if (!t.is_object() || !t.contains("type") || !t["type"].is_string())
        return InvalidArgumentError("tools[" + std::to_string(i) + "] needs a string 'type'");
      const std::string type = t["type"];
      if (type == "function") {
        ojson f = {{"name", t.contains("name") ? t["name"] : ojson()}};
        for (const char* key : {"description", "parameters", "strict"})
          if (t.contains(key) && !t[key].is_null()) f[key] = t[key];
        tools.push_back({{"type", "function"}, {"function", f}});
      } else if (type == "custom") {
        LLAMAY_ASSIGN_OR_RETURN(ojson f, CustomToolAsFunction(t, i));
        rr->custom.insert(t.value("name", ""));
        tools.push_back(std::move(f));
      }
    }
  }
  ojson choice;
  if (body.contains("tool_choice") && !body["tool_choice"].is_null()) {
    const json& tc = body["tool_choice"];
    if (tc.is_string()) {
      choice = tc.get<std::string>();
    } else if (tc.is_object()) {
      const std::string type = StringOr(tc, "type");
      if (type == "function" || type == "custom") {
        choice = {{"type", "function"}, {"function", {{"name", StringOr(tc, "name")}}}};
      } else if (type == "allowed_tools") {
        choice = StringOr(tc, "mode", "auto");  // the subset is not enforced (docs/server.md)
      } else {
        choice = "auto";  // a hosted tool's choice: there is no such tool here
      }
    } else {
      return InvalidArgumentError("'tool_choice' must be a string or an object");
    }
  }
  if (body.contains("parallel_tool_calls") && body["parallel_tool_calls"].is_boolean())
    c->parallel_tool_calls = body["parallel_tool_calls"].get<bool>();
  if (tools.empty()) {
    if (!choice.is_null() && choice != "auto" && choice != "none")
      return InvalidArgumentError("'tool_choice' names a tool, but the request has no function or custom tools");
    return Status::Ok();
  }
  LLAMAY_ASSIGN_OR_RETURN(c->tools, ParseToolsDroppingUnsupported(std::move(tools)));
  LLAMAY_ASSIGN_OR_RETURN(c->tool_choice, toolcall::ParseToolChoice(choice, c->tools));
  return Status::Ok();
}

// text.format: {"type": "text" | "json_object" | "json_schema", name, schema, strict}, as Chat Completions'
// response_format reads it.
Status ParseTextFormat(const ojson& ordered, Conversation* c) {
  if (!ordered.contains("text") || !ordered["text"].is_object() || !ordered["text"].contains("format")) return Status::Ok();
  const ojson& f = ordered["text"]["format"];
  if (!f.is_object()) return InvalidArgumentError("'text.format' must be an object");
  ojson rf = {{"type", f.value("type", "text")}};
  if (rf["type"] == "json_schema") {
    ojson js = ojson::object();
    for (const char* key : {"name", "schema", "strict", "description"})
      if (f.contains(key)) js[key] = f[key];
    rf["json_schema"] = js;
  }
  const std::string raw = ojson{{"response_format", rf}}.dump();
  auto format = RequestFormat(json::parse(raw), raw);
  if (!format.ok()) {
    std::string m = format.status().message();
    for (const std::string from : {"response_format.json_schema", "response_format"})
      if (size_t at = m.find(from); at != std::string::npos) m.replace(at, from.size(), "text.format");
    return InvalidArgumentError(m);
  }
  c->format = std::move(*format);
  return Status::Ok();
}

Status ParseRequest(Server& server, const json& body, const std::string& raw, Conversation* c, ResponsesRequest* rr) {
  c->chat = true;
  // As OpenAI's: without max_output_tokens the answer may run to the end of the context (agents such as
  // Codex never send it). Generation that reaches the context's end is `incomplete`. Without a context
  // size (an engine made without one) the chat routes' default applies.
  c->max_tokens = server.engine().options().max_context > 0 ? 1 << 30 : server.options().default_max_tokens;
  try {
    const ojson ordered = OrderedBody(raw);
    rr->store = Opt(body, "store", true);
    if (body.contains("previous_response_id") && !body["previous_response_id"].is_null()) {
      if (!body["previous_response_id"].is_string()) return InvalidArgumentError("'previous_response_id' must be a string");
      rr->previous = body["previous_response_id"];
    }
    if (Opt(body, "background", false))
      return InvalidArgumentError("'background' responses are not supported: stream the response instead");
    // Instructions are the system message of a new conversation. A continued one keeps the system prompt
    // its context was computed with: OpenAI drops the previous instructions, but they are in the KV.
    const std::string instructions = Opt<std::string>(body, "instructions", "");
    if (!instructions.empty() && rr->previous.empty()) {
      Message m;
      m.role = Message::Role::kSystem;
      m.content = instructions;
      c->messages.push_back(std::move(m));
    }
    if (!body.contains("input")) return InvalidArgumentError("'input' is required");
    LLAMAY_RETURN_IF_ERROR(ParseInput(body["input"], &c->messages));
    LLAMAY_RETURN_IF_ERROR(ParseResponsesTools(body, ordered, c, rr));
    LLAMAY_RETURN_IF_ERROR(ParseTextFormat(ordered, c));
    LLAMAY_RETURN_IF_ERROR(OptInt(body, "max_output_tokens", 1, 1 << 20, &c->max_tokens));
    c->stream = Opt(body, "stream", false);
    LLAMAY_RETURN_IF_ERROR(ParseOpenAiSampling(body, &c->sampling));
    if (body.contains("reasoning") && body["reasoning"].is_object()) {
      const std::string effort = StringOr(body["reasoning"], "effort");
      c->reasoning.effort = effort;
      if (effort == "none") c->reasoning.enabled = false;
      else if (!effort.empty()) c->reasoning.enabled = true;
    }
    LLAMAY_RETURN_IF_ERROR(OptInt(body, "thinking_budget_tokens", 0, 1 << 20, &c->reasoning.budget));
    c->cache_key = Opt<std::string>(body, "prompt_cache_key", "");
    if (body.contains("llamay_retain_prefix")) c->retain_prefix = Opt(body, "llamay_retain_prefix", false);
    LLAMAY_RETURN_IF_ERROR(ParseSpeculative(body, c));
    json& e = rr->echo;
    e["instructions"] = instructions.empty() ? json(nullptr) : json(instructions);
    e["max_output_tokens"] = body.contains("max_output_tokens") ? body["max_output_tokens"] : json(nullptr);
    e["parallel_tool_calls"] = c->parallel_tool_calls;
    e["previous_response_id"] = rr->previous.empty() ? json(nullptr) : json(rr->previous);
    e["reasoning"] = body.contains("reasoning") && body["reasoning"].is_object() ? body["reasoning"]
                                                                                 : json{{"effort", nullptr}, {"summary", nullptr}};
    e["store"] = rr->store;
    e["temperature"] = c->sampling.temperature;
    e["text"] = body.contains("text") && body["text"].is_object() ? body["text"] : json{{"format", {{"type", "text"}}}};
    e["tool_choice"] = body.contains("tool_choice") && !body["tool_choice"].is_null() ? body["tool_choice"] : json("auto");
    e["tools"] = body.contains("tools") && body["tools"].is_array() ? body["tools"] : json::array();
    e["top_p"] = c->sampling.top_p;
    e["truncation"] = "disabled";
    e["metadata"] = body.contains("metadata") && body["metadata"].is_object() ? body["metadata"] : json::object();
    e["user"] = body.contains("user") ? body["user"] : json(nullptr);
  } catch (const json::exception& ex) {
    return InvalidArgumentError(std::string("a field has the wrong type: ") + ex.what());
  }
  return Status::Ok();
}

// The decoded text of the JSON string value of "input" in arguments text that may be cut off anywhere:
// what a custom tool call's input is so far. Stops before an escape that is not complete yet.
std::string InputSoFar(std::string_view a) {
  size_t at = a.find("\"input\"");
  if (at == std::string_view::npos) return "";
  at = a.find(':', at + 7);
  if (at == std::string_view::npos) return "";
  ++at;
  while (at < a.size() && (a[at] == ' ' || a[at] == '\n' || a[at] == '\t' || a[at] == '\r')) ++at;
  if (at >= a.size() || a[at] != '"') return "";
  std::string out;
  auto put = [&out](uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  };
  auto hex4 = [&a](size_t p, uint32_t* v) {
    if (p + 4 > a.size()) return false;
    *v = 0;
    for (size_t k = p; k < p + 4; ++k) {
      const char c = a[k];
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) return false;
      *v = *v * 16 + static_cast<uint32_t>(d);
    }
    return true;
  };
  for (size_t i = at + 1; i < a.size();) {
    const char c = a[i];
    if (c == '"') break;
    if (c != '\\') {
      out += c;
      ++i;
      continue;
    }
    if (i + 1 >= a.size()) break;
    const char e = a[i + 1];
    if (e == 'u') {
      uint32_t cp = 0;
      if (!hex4(i + 2, &cp)) break;
      size_t next = i + 6;
      if (cp >= 0xD800 && cp < 0xDC00) {  // a surrogate pair: both halves or neither
        uint32_t lo = 0;
        if (next + 1 >= a.size() || a[next] != '\\' || a[next + 1] != 'u' || !hex4(next + 2, &lo)) {
          if (next + 6 > a.size()) break;
          cp = 0xFFFD;
        } else {
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          next += 6;
        }
      }
      put(cp);
      i = next;
      continue;
    }
    const char* map = "\"\"\\\\//b\bf\fn\nr\rt\t";
    char decoded = e;
    for (const char* m = map; *m; m += 2)
      if (*m == e) decoded = m[1];
    out += decoded;
    i += 2;
  }
  return out;
}

// Responses' wire format. A streamed answer is a sequence of output items: one opens when the kind of
// output changes (reasoning, a message, a call) and is done before the next opens; every event has its
// sequence_number.
class ResponsesWire : public WireFormat {
 public:
  ResponsesWire(Server& server, ResponsesRequest rr)
      : server_(server), rr_(std::move(rr)), model_(server.options().model_name) {
    created_ = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  }

  void SendError(httplib::Response& res, const Status& s) override { SendStatus(res, s); }
  json ErrorBody(const Status& s) override { return OpenAiErrorBody(s); }

  json Body(const Generation& g) override {
    const ChoiceResult& r = g.result(0);
    json output = json::array();
    if (!r.reasoning.empty()) output.push_back(ReasoningItem(ItemId("rs"), r.reasoning, "completed"));
    if (!r.content.empty() || r.calls.empty()) output.push_back(MessageItem(ItemId("msg"), r.content, "completed"));
    for (const toolcall::ToolCall& call : r.calls) output.push_back(CallItem(call.id, call.name, call.arguments, "completed"));
    json done = Response(g, std::move(output));
    Keep(done);
    return done;
  }

  std::string Begin(const Generation&) override { return Started(); }

  std::string Update(const Generation&, const ChoiceUpdate& u) override {
    std::string out;
    for (const OutputEvent& e : u.events) {
      switch (e.kind) {
        case OutputEvent::Kind::kReasoning:
          if (open_ != Kind::kReasoning) {
            out += Close();
            out += Open(Kind::kReasoning, ReasoningItem(ItemId("rs"), "", "in_progress"));
          }
          text_ += e.text;
          out += Event("response.reasoning_text.delta", {{"item_id", item_["id"]}, {"output_index", index_},
                                                          {"content_index", 0}, {"delta", e.text}});
          break;
        case OutputEvent::Kind::kText:
          if (open_ != Kind::kMessage) {
            out += Close();
            out += Open(Kind::kMessage, MessageItem(ItemId("msg"), "", "in_progress", /*empty=*/true));
            out += Event("response.content_part.added", {{"item_id", item_["id"]}, {"output_index", index_},
                                                         {"content_index", 0}, {"part", TextPart("")}});
          }
          text_ += e.text;
          out += Event("response.output_text.delta", {{"item_id", item_["id"]}, {"output_index", index_},
                                                       {"content_index", 0}, {"delta", e.text}, {"logprobs", json::array()}});
          break;
        case OutputEvent::Kind::kToolCall:
          out += Close();
          call_name_ = e.call_name;
          out += Open(Kind::kCall, CallItem(e.call_id, e.call_name, "", "in_progress"));
          break;
        case OutputEvent::Kind::kToolArguments: {
          const std::string before = custom() ? InputSoFar(text_) : text_;
          text_ += e.text;
          const std::string delta = custom() ? InputSoFar(text_).substr(before.size()) : e.text;
          if (delta.empty()) break;
          out += Event(custom() ? "response.custom_tool_call_input.delta" : "response.function_call_arguments.delta",
                       {{"item_id", item_["id"]}, {"output_index", index_}, {"delta", delta}});
          break;
        }
      }
    }
    return out;
  }

  std::string End(const Generation& g) override {
    std::string out = Close();
    if (!g.error().ok()) return out + Failed(g.error());
    json done = Response(g, items_);
    Keep(done);
    const char* name = done["status"] == "incomplete" ? "response.incomplete" : "response.completed";
    return out + Event(name, {{"response", done}});
  }

  // A stream that fails before its first token (a prompt longer than the context): created, then failed.
  std::string FailedStream(const Status& s) {
    std::string out = Started();
    return out + Failed(s);
  }

 private:
  enum class Kind { kNone, kReasoning, kMessage, kCall };

  bool custom() const { return rr_.custom.count(call_name_) > 0; }

  // A stored response's body goes with its held context, for GET /v1/responses/{id}. The context was held
  // before the final event reached the surface (Generation::LaunchForked); if it is not held (evicted
  // already), there is nothing to keep.
  void Keep(const json& done) {
    if (!rr_.store) return;
    std::lock_guard l(server_.contexts_mu());
    auto it = server_.contexts().find(rr_.id);
    // Dump: invalid UTF-8 (a character cut off by max_output_tokens) replaced, as in every body sent.
    if (it != server_.contexts().end()) it->second.response_body = Dump(done);
  }

  std::string ItemId(const char* prefix) {
    return std::string(prefix) + "_" + rr_.id.substr(5) + "_" + std::to_string(next_item_++);
  }

  static json TextPart(const std::string& text) {
    return {{"type", "output_text"}, {"text", text}, {"annotations", json::array()}, {"logprobs", json::array()}};
  }
  static json MessageItem(const std::string& id, const std::string& text, const char* status, bool empty = false) {
    return {{"type", "message"}, {"id", id}, {"status", status}, {"role", "assistant"},
            {"content", empty ? json::array() : json::array({TextPart(text)})}};
  }
  static json ReasoningItem(const std::string& id, const std::string& text, const char* status) {
    json content = text.empty() ? json::array() : json::array({{{"type", "reasoning_text"}, {"text", text}}});
    return {{"type", "reasoning"}, {"id", id}, {"status", status}, {"summary", json::array()}, {"content", content}};
  }
  json CallItem(const std::string& call_id, const std::string& name, const std::string& arguments, const char* status) {
    if (rr_.custom.count(name) > 0) {
      json args = json::parse(arguments, nullptr, false);
      const std::string input = args.is_object() && args.contains("input") && args["input"].is_string()
                                    ? args["input"].get<std::string>()
                                    : InputSoFar(arguments);
      return {{"type", "custom_tool_call"}, {"id", ItemId("ctc")}, {"call_id", call_id}, {"name", name},
              {"input", input}, {"status", status}};
    }
    return {{"type", "function_call"}, {"id", ItemId("fc")}, {"call_id", call_id}, {"name", name},
            {"arguments", arguments}, {"status", status}};
  }

  // response.created and response.in_progress. (Events are numbered as they are made: one statement each.)
  std::string Started() {
    const json pending = Head("in_progress");
    std::string out = Event("response.created", {{"response", pending}});
    return out + Event("response.in_progress", {{"response", pending}});
  }

  std::string Failed(const Status& s) {
    json failed = Head("failed");
    failed["output"] = items_;
    const int status = HttpStatusFor(s);
    failed["error"] = {{"code", s.detail() == engine::kDetailContextLength ? "context_length_exceeded"
                                : status < 500                            ? "invalid_request"
                                                                          : "server_error"},
                       {"message", s.message()}};
    return Event("response.failed", {{"response", failed}});
  }

  std::string Event(const char* type, json fields) {
    fields["type"] = type;
    fields["sequence_number"] = seq_++;
    return SseEvent(type, fields);
  }

  std::string Open(Kind kind, json item) {
    open_ = kind;
    text_.clear();
    item_ = std::move(item);
    index_ = static_cast<int>(items_.size());
    return Event("response.output_item.added", {{"output_index", index_}, {"item", item_}});
  }

  // The open item's done events, and the item as it ends.
  std::string Close() {
    if (open_ == Kind::kNone) return "";
    std::string out;
    const json id = item_["id"];
    if (open_ == Kind::kReasoning) {
      out += Event("response.reasoning_text.done", {{"item_id", id}, {"output_index", index_}, {"content_index", 0}, {"text", text_}});
      item_ = ReasoningItem(id, text_, "completed");
    } else if (open_ == Kind::kMessage) {
      out += Event("response.output_text.done", {{"item_id", id}, {"output_index", index_}, {"content_index", 0},
                                                  {"text", text_}, {"logprobs", json::array()}});
      out += Event("response.content_part.done", {{"item_id", id}, {"output_index", index_}, {"content_index", 0},
                                                  {"part", TextPart(text_)}});
      item_ = MessageItem(id, text_, "completed");
    } else {
      const json call_id = item_["call_id"];
      if (custom()) {
        item_["input"] = CallItem(call_id, call_name_, text_, "completed")["input"];
        out += Event("response.custom_tool_call_input.done", {{"item_id", id}, {"output_index", index_}, {"input", item_["input"]}});
      } else {
        item_["arguments"] = text_;
        out += Event("response.function_call_arguments.done", {{"item_id", id}, {"output_index", index_},
                                                               {"name", call_name_}, {"arguments", text_}});
      }
      item_["status"] = "completed";
    }
    out += Event("response.output_item.done", {{"output_index", index_}, {"item", item_}});
    items_.push_back(item_);
    open_ = Kind::kNone;
    return out;
  }

  json Head(const char* status) const {
    json r = {{"id", rr_.id}, {"object", "response"}, {"created_at", created_}, {"status", status},
              {"error", nullptr}, {"incomplete_details", nullptr}, {"model", model_}, {"output", json::array()},
              {"usage", nullptr}};
    for (auto it = rr_.echo.begin(); it != rr_.echo.end(); ++it) r[it.key()] = it.value();
    return r;
  }

  json Response(const Generation& g, json output) const {
    const ChoiceResult& r = g.result(0);
    const bool cut = r.finish == Finish::kLength;
    json out = Head(cut ? "incomplete" : "completed");
    if (cut) out["incomplete_details"] = {{"reason", "max_output_tokens"}};
    out["output"] = std::move(output);
    const GenerationUsage u = g.usage();
    out["usage"] = {{"input_tokens", u.prompt_tokens},
                    {"input_tokens_details", {{"cached_tokens", u.cached_tokens}}},
                    {"output_tokens", u.completion_tokens},
                    {"output_tokens_details", {{"reasoning_tokens", u.reasoning_tokens}}},
                    {"total_tokens", u.prompt_tokens + u.completion_tokens},
                    {"llamay_draft_tokens", u.draft_tokens},
                    {"llamay_accepted_draft_tokens", u.accepted_draft_tokens}};
    // The text of the message items, as the SDKs' output_text (they compute it too; curl users read it).
    std::string text;
    for (const json& item : out["output"])
      if (item["type"] == "message")
        for (const json& part : item["content"]) text += part["text"].get<std::string>();
    out["output_text"] = text;
    return out;
  }

  Server& server_;
  ResponsesRequest rr_;
  std::string model_;
  int64_t created_ = 0;
  uint64_t seq_ = 0;
  int next_item_ = 0;
  Kind open_ = Kind::kNone;
  json item_;            // the open item
  int index_ = 0;        // its output_index
  std::string text_;     // its text so far (for a call: the arguments text)
  std::string call_name_;
  json items_ = json::array();  // the items done
};

std::string NewResponseId(Server& server) {
  // The held context's id when stored: unique as context ids are (across instances that share a store).
  return "resp_" + server.NewContextId().substr(4);
}

// `previous_response_id`: the turn continues a fork of that response's held context (the previous response
// stays as it was). False, with the 404 sent, when it is not held.
bool ContinuePrevious(Server& server, const std::string& previous, Conversation* c, httplib::Response& res) {
  // Pulled from the store first when sessions are shared (another instance made it, or it was evicted).
  if (Status s = server.FetchSession(previous); !s.ok()) return SendStatus(res, s), false;
  if (previous.rfind("resp_", 0) != 0 || server.HeldTokens(previous) == 0) {
    SendError(res, 404, "previous response '" + previous + "' not found (it was not stored, or it was deleted or "
              "evicted)", "previous_response_not_found", "previous_response_id");
    return false;
  }
  c->session = previous;
  c->fork_session = true;
  return true;
}

// A request's body into `c` and `rr`, continuing its previous response's context when it names one. False,
// with the error sent, when the body or the previous response is refused.
bool ParseTurn(Server& server, const std::string& raw, Conversation* c, ResponsesRequest* rr, httplib::Response& res) {
  json body;
  if (!ParseBody(raw, res, &body)) return false;
  if (Status s = ParseRequest(server, body, raw, c, rr); !s.ok()) return SendStatus(res, s), false;
  return rr->previous.empty() || ContinuePrevious(server, rr->previous, c, res);
}

}  // namespace

void HandleResponses(Server& server, const httplib::Request& req, const std::string& raw, httplib::Response& res) {
  Conversation c;
  ResponsesRequest rr;
  if (!ParseTurn(server, raw, &c, &rr, res)) return;
  rr.id = NewResponseId(server);
  if (rr.store) c.store_as = rr.id;
  auto wire = std::make_shared<ResponsesWire>(server, std::move(rr));
  const bool stream = c.stream;
  auto gen = Generation::Start(server, std::move(c), WatchConnection(req));
  if (!gen.ok() && stream && gen.status().detail() == engine::kDetailContextLength) {
    // Streamed, a context overflow is the stream's response.failed, as Codex and the SDKs read it.
    res.set_content(wire->FailedStream(gen.status()), "text/event-stream");
    return;
  }
  if (!gen.ok()) return wire->SendError(res, gen.status());
  Respond(std::move(*gen), wire, res);
}

void HandleDeleteResponse(Server& server, const std::string& id, httplib::Response& res) {
  {
    std::lock_guard l(server.contexts_mu());
    auto& held = server.contexts();
    auto it = held.find(id);
    if (id.rfind("resp_", 0) == 0 && it != held.end() && !it->second.busy) {
      held.erase(it);
      SendJson(res, {{"id", id}, {"object", "response.deleted"}, {"deleted", true}});
      return;
    }
  }
  SendError(res, 404, "no stored response '" + id + "'", "not_found");
}

void HandleGetResponse(Server& server, const std::string& id, httplib::Response& res) {
  {
    std::lock_guard l(server.contexts_mu());
    auto& held = server.contexts();
    auto it = held.find(id);
    if (id.rfind("resp_", 0) == 0 && it != held.end()) {
      if (!it->second.response_body.empty()) return res.set_content(it->second.response_body, "application/json");
      // Held without its body: restored from --state-dir or pulled from the store by another instance.
      SendError(res, 404, "response '" + id + "' is held and can be continued with previous_response_id, but its "
                "body is kept only by the instance that answered it, until it stops", "not_found");
      return;
    }
  }
  SendError(res, 404, "no stored response '" + id + "'", "not_found");
}

void HandleInputTokens(Server& server, const std::string& raw, httplib::Response& res) {
  Conversation c;
  ResponsesRequest rr;
  if (!ParseTurn(server, raw, &c, &rr, res)) return;
  Result<size_t> n = CountPromptTokens(server, c);
  if (!n.ok()) return SendStatus(res, n.status());
  SendJson(res, {{"object", "response.input_tokens"}, {"input_tokens", *n}});
}

}  // namespace llamay::server
