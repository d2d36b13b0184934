#include "server/ollama.h"

#include <chrono>
#include <ctime>

#include "server/chat_prompt.h"
#include "server/conversation.h"
#include "server/generation.h"
#include "server/http_util.h"
#include "server/respond.h"
#include "server/structured_output.h"

namespace llamay::server {
namespace {

using ojson = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

// The version reported: Ollama's API as of the release whose fields this file follows. Clients compare it
// numerically to decide what to send (VS Code's Ollama provider wants 0.6.4 or later).
constexpr const char* kOllamaVersion = "0.13.0";

std::string Rfc3339Now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000;
  char out[64];
  std::snprintf(out, sizeof out, "%s.%06lldZ", buf, static_cast<long long>(us));
  return out;
}

// The model as /api/tags, /api/show and /api/ps describe it.
json Details(Server& server) {
  const auto& file = server.engine().model().file();
  const std::string arch = file.GetStringOr("general.architecture", "llama");
  return {{"parent_model", ""}, {"format", "gguf"}, {"family", arch}, {"families", json::array({arch})},
          {"parameter_size", file.GetStringOr("general.size_label", "")},
          {"quantization_level", file.GetStringOr("general.file_type_name", "")}};
}

json ModelEntry(Server& server) {
  const std::string& name = server.options().model_name;
  return {{"name", name}, {"model", name}, {"modified_at", Rfc3339Now()},
          {"size", server.engine().model().file().bytes().size()},
          {"digest", DigestHex(server.engine().model().weight_digest())}, {"details", Details(server)}};
}

bool TemplateThinks(Server& server) {
  const std::string source = server.engine().model().file().GetStringOr("tokenizer.chat_template", "");
  return source.find("<think>") != std::string::npos;
}

// Ollama's options: temperature, top_p, top_k, min_p, repeat_penalty, frequency_penalty, presence_penalty,
// seed, num_predict (-1: the server's default), stop. Others (num_ctx, num_gpu, mirostat...) are ignored.
Status ParseOptions(const json& body, Conversation* c) {
  sampling::SamplingParams& sp = c->sampling;
  sp.temperature = 0.8f;  // Ollama's defaults
  sp.top_p = 0.9f;
  sp.top_k = 40;
  sp.min_p = 0;
  sp.repeat_penalty = 1.1f;
  if (!body.contains("options") || body["options"].is_null()) return sp.Validate();
  const json& o = body["options"];
  if (!o.is_object()) return InvalidArgumentError("'options' must be an object");
  sp.temperature = Opt(o, "temperature", sp.temperature);
  sp.top_p = Opt(o, "top_p", sp.top_p);
  LLAMAY_RETURN_IF_ERROR(OptInt(o, "top_k", 0, INT32_MAX, &sp.top_k));
  sp.min_p = Opt(o, "min_p", sp.min_p);
  sp.repeat_penalty = Opt(o, "repeat_penalty", sp.repeat_penalty);
  sp.frequency_penalty = Opt(o, "frequency_penalty", 0.0f);
  sp.presence_penalty = Opt(o, "presence_penalty", 0.0f);
  LLAMAY_RETURN_IF_ERROR(ParseSeed(o, &sp));
  int num_predict = -1;
  LLAMAY_RETURN_IF_ERROR(OptInt(o, "num_predict", -2, 1 << 20, &num_predict));
  if (num_predict >= 0) c->max_tokens = num_predict;
  if (o.contains("stop")) LLAMAY_RETURN_IF_ERROR(ParseStop(o["stop"], "options.stop", 16, &c->stop));
  return sp.Validate();
}

// `format`: "json" (any JSON value... Ollama means an object) or a JSON Schema.
Status ParseFormat(const json& body, const std::string& raw, Conversation* c) {
  if (!body.contains("format") || body["format"].is_null() || body["format"] == "") return Status::Ok();
  ojson rf;
  if (body["format"] == "json") {
    rf = {{"type", "json_object"}};
  } else if (body["format"].is_object()) {
    rf = {{"type", "json_schema"}, {"json_schema", {{"name", "format"}, {"schema", OrderedBody(raw)["format"]}}}};
  } else {
    return InvalidArgumentError("'format' must be \"json\" or a JSON Schema object");
  }
  const std::string text = ojson{{"response_format", rf}}.dump();
  auto format = RequestFormat(json::parse(text), text);
  if (!format.ok()) return InvalidArgumentError("format: " + format.status().message());
  c->format = std::move(*format);
  return Status::Ok();
}

Status ParseThink(const json& body, Conversation* c) {
  if (!body.contains("think") || body["think"].is_null()) return Status::Ok();
  const json& t = body["think"];
  if (t.is_boolean()) {
    c->reasoning.enabled = t.get<bool>();
  } else if (t.is_string()) {
    c->reasoning.enabled = true;  // "low" | "medium" | "high": on (the effort is not a budget)
  } else {
    return InvalidArgumentError("'think' must be a boolean or \"low\", \"medium\", \"high\"");
  }
  return Status::Ok();
}

// What /api/chat and /api/generate both take: stream (Ollama streams unless told not to), options, format
// and think.
Status ParseCommon(const json& body, const std::string& raw, Conversation* c) {
  c->stream = Opt(body, "stream", true);
  LLAMAY_RETURN_IF_ERROR(ParseOptions(body, c));
  LLAMAY_RETURN_IF_ERROR(ParseFormat(body, raw, c));
  LLAMAY_RETURN_IF_ERROR(ParseSpeculative(body, c));
  return ParseThink(body, c);
}

// Ollama's messages: role system, user, assistant or tool; content a string; images refused; assistant
// tool_calls with `arguments` as an object; thinking sent back; tool_name on tool results.
Result<std::vector<Message>> ParseOllamaMessages(const json& messages) {
  if (!messages.is_array()) return InvalidArgumentError("'messages' must be an array");
  std::vector<Message> out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      return InvalidArgumentError(where + " needs a string 'role'");
    const std::string role = m["role"];
    Message msg;
    const std::optional<Message::Role> parsed = RoleFromName(role);
    if (!parsed || role == "developer") return InvalidArgumentError(where + ".role must be system, user, assistant or tool");
    msg.role = *parsed;
    if (m.contains("images") && m["images"].is_array() && !m["images"].empty())
      return InvalidArgumentError(where + ".images: images are not supported (llamay serves text models)");
    if (m.contains("content") && !m["content"].is_null()) {
      if (!m["content"].is_string()) return InvalidArgumentError(where + ".content must be a string");
      msg.content = m["content"].get<std::string>();
    } else {
      msg.content = "";
    }
    if (m.contains("thinking") && m["thinking"].is_string()) msg.reasoning = m["thinking"];
    if (m.contains("tool_name") && m["tool_name"].is_string()) msg.name = m["tool_name"];
    if (msg.role == Message::Role::kAssistant && m.contains("tool_calls") && m["tool_calls"].is_array()) {
      for (size_t k = 0; k < m["tool_calls"].size(); ++k) {
        const json& tc = m["tool_calls"][k];
        if (!tc.is_object() || !tc.contains("function") || !tc["function"].is_object() ||
            !tc["function"].contains("name") || !tc["function"]["name"].is_string())
          return InvalidArgumentError(where + ".tool_calls[" + std::to_string(k) + "] needs function.name");
        const json& f = tc["function"];
        MessageToolCall call;
        call.id = tc.contains("id") && tc["id"].is_string() ? tc["id"].get<std::string>() : "call_" + std::to_string(k);
        call.name = f["name"];
        const json args = f.contains("arguments") ? f["arguments"] : json::object();
        call.arguments = args.is_string() ? args.get<std::string>() : args.dump();
        msg.tool_calls.push_back(std::move(call));
      }
      if (msg.content && msg.content->empty() && !msg.tool_calls.empty()) msg.content.reset();
    }
    out.push_back(std::move(msg));
  }
  // Tool results name their tool, not a call id: they answer the calls before them in order.
  std::vector<std::string> pending;
  for (Message& msg : out) {
    if (msg.role == Message::Role::kAssistant) {
      pending.clear();
      for (auto it = msg.tool_calls.rbegin(); it != msg.tool_calls.rend(); ++it) pending.push_back(it->id);
    } else if (msg.role == Message::Role::kTool && !pending.empty()) {
      msg.tool_call_id = pending.back();
      pending.pop_back();
    }
  }
  return out;
}

// NDJSON lines: /api/chat's {"message": {...}} or /api/generate's {"response": "..."}, then a last line with
// done, done_reason and the counts and durations (nanoseconds).
class OllamaWire : public WireFormat {
 public:
  OllamaWire(Server& server, bool chat) : model_(server.options().model_name), chat_(chat), start_(Clock::now()) {}

  void SendError(httplib::Response& res, const Status& s) override {
    res.status = HttpStatusFor(s);
    res.set_content(Dump(ErrorBody(s)), "application/json");
  }
  json ErrorBody(const Status& s) override { return {{"error", s.message()}}; }
  std::string StreamContentType() const override { return "application/x-ndjson"; }

  json Body(const Generation& g) override {
    const ChoiceResult& r = g.result(0);
    json out = Line(r.content, r.reasoning, Calls(r));
    Done(g, &out);
    return out;
  }

  std::string Update(const Generation& g, const ChoiceUpdate& u) override {
    if (!first_token_) first_token_ = Clock::now();
    std::string text, thinking;
    for (const OutputEvent& e : u.events) {
      if (e.kind == OutputEvent::Kind::kText) text += e.text;
      if (e.kind == OutputEvent::Kind::kReasoning) thinking += e.text;
    }
    std::string out;
    if (!text.empty() || !thinking.empty()) out += Dump(Line(text, thinking, json())) + "\n";
    // Ollama sends a call whole, its arguments an object: the calls go out once the answer is complete.
    if (u.finished && !g.result(u.choice).calls.empty()) out += Dump(Line("", "", Calls(g.result(u.choice)))) + "\n";
    return out;
  }

  std::string End(const Generation& g) override {
    if (!g.error().ok()) return Dump(ErrorBody(g.error())) + "\n";
    json out = Line("", "", json());
    Done(g, &out);
    return Dump(out) + "\n";
  }

 private:
  static json Calls(const ChoiceResult& r) {
    if (r.calls.empty()) return json();
    json calls = json::array();
    for (size_t i = 0; i < r.calls.size(); ++i) {
      json args = json::parse(r.calls[i].arguments, nullptr, false);
      if (!args.is_object()) args = json::object();
      calls.push_back({{"id", r.calls[i].id},
                       {"function", {{"index", i}, {"name", r.calls[i].name}, {"arguments", args}}}});
    }
    return calls;
  }

  json Line(const std::string& text, const std::string& thinking, const json& calls) const {
    json out = {{"model", model_}, {"created_at", Rfc3339Now()}};
    if (chat_) {
      json message = {{"role", "assistant"}, {"content", text}};
      if (!thinking.empty()) message["thinking"] = thinking;
      if (!calls.is_null()) message["tool_calls"] = calls;
      out["message"] = message;
    } else {
      out["response"] = text;
      if (!thinking.empty()) out["thinking"] = thinking;
    }
    out["done"] = false;
    return out;
  }

  void Done(const Generation& g, json* out) const {
    const ChoiceResult& r = g.result(0);
    const GenerationUsage u = g.usage();
    const auto now = Clock::now();
    const auto first = first_token_.value_or(now);
    auto ns = [](Clock::duration d) { return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count(); };
    (*out)["done"] = true;
    (*out)["done_reason"] = r.finish == Finish::kLength ? "length" : "stop";
    (*out)["total_duration"] = ns(now - start_);
    (*out)["load_duration"] = 0;
    (*out)["prompt_eval_count"] = u.prompt_tokens - u.cached_tokens;
    (*out)["prompt_eval_duration"] = ns(first - start_);
    (*out)["eval_count"] = u.completion_tokens;
    (*out)["eval_duration"] = ns(now - first);
    (*out)["llamay_draft_tokens"] = u.draft_tokens;
    (*out)["llamay_accepted_draft_tokens"] = u.accepted_draft_tokens;
  }

  std::string model_;
  bool chat_;
  Clock::time_point start_;
  std::optional<Clock::time_point> first_token_;
};

Status ParseChat(Server& server, const json& body, const std::string& raw, Conversation* c) {
  c->chat = true;
  c->max_tokens = server.options().default_max_tokens;
  try {
    if (!body.contains("messages") || !body["messages"].is_array())
      return InvalidArgumentError("'messages' must be an array");
    LLAMAY_ASSIGN_OR_RETURN(c->messages, ParseOllamaMessages(body["messages"]));
    if (body.contains("tools") && body["tools"].is_array() && !body["tools"].empty()) {
      const ojson ordered = OrderedBody(raw);
      LLAMAY_ASSIGN_OR_RETURN(c->tools, ParseToolsDroppingUnsupported(ordered["tools"]));
      // Not Ollama's: OpenAI's tool_choice, taken as an extension (Ollama always lets the model choose).
      LLAMAY_ASSIGN_OR_RETURN(c->tool_choice,
                              toolcall::ParseToolChoice(ordered.contains("tool_choice") ? ordered["tool_choice"] : ojson(),
                                                        c->tools));
    }
    LLAMAY_RETURN_IF_ERROR(ParseCommon(body, raw, c));
  } catch (const json::exception& e) {
    return InvalidArgumentError(std::string("a field has the wrong type: ") + e.what());
  }
  return Status::Ok();
}

// /api/generate: the prompt through the chat template (with `system`), or as it is with `raw`.
Status ParseGenerate(Server& server, const json& body, const std::string& raw, Conversation* c) {
  c->max_tokens = server.options().default_max_tokens;
  try {
    const std::string prompt = Opt<std::string>(body, "prompt", "");
    if (Opt(body, "raw", false)) {
      c->chat = false;
      c->prompt_text = prompt;
      c->prompt_is_text = true;
    } else {
      c->chat = true;
      const std::string system = Opt<std::string>(body, "system", "");
      if (!system.empty()) c->messages.push_back({Message::Role::kSystem, system, "", {}, "", ""});
      c->messages.push_back({Message::Role::kUser, prompt, "", {}, "", ""});
    }
    if (body.contains("images") && body["images"].is_array() && !body["images"].empty())
      return InvalidArgumentError("images are not supported (llamay serves text models)");
    LLAMAY_RETURN_IF_ERROR(ParseCommon(body, raw, c));
  } catch (const json::exception& e) {
    return InvalidArgumentError(std::string("a field has the wrong type: ") + e.what());
  }
  return Status::Ok();
}

void Run(Server& server, const httplib::Request& req, const std::string& raw, httplib::Response& res, bool chat) {
  auto wire = std::make_shared<OllamaWire>(server, chat);
  json body;
  body = json::parse(ReplaceLoneSurrogates(raw), nullptr, false);
  if (body.is_discarded() || !body.is_object())
    return wire->SendError(res, InvalidArgumentError("the request body is not a JSON object"));
  Conversation c;
  Status s = chat ? ParseChat(server, body, raw, &c) : ParseGenerate(server, body, raw, &c);
  if (!s.ok()) return wire->SendError(res, s);
  // An empty request loads the model (Ollama's way to warm it up): it is loaded, so the answer is done.
  const bool empty = chat ? c.messages.empty() : (c.chat ? (*c.messages.back().content).empty() : c.prompt_text.empty());
  if (empty) {
    json done = {{"model", server.options().model_name}, {"created_at", Rfc3339Now()}, {"done", true}, {"done_reason", "load"}};
    if (chat) done["message"] = {{"role", "assistant"}, {"content", ""}};
    else done["response"] = "";
    return SendJson(res, done);
  }
  auto gen = Generation::Start(server, std::move(c), WatchConnection(req));
  if (!gen.ok()) return wire->SendError(res, gen.status());
  Respond(std::move(*gen), wire, res);
}

}  // namespace

void RegisterOllamaRoutes(Server& server, httplib::Server& h) {
  const size_t limit = server.options().max_body_bytes;
  h.Get("/api/version", [](const httplib::Request&, httplib::Response& res) { SendJson(res, {{"version", kOllamaVersion}}); });
  h.Get("/api/tags", [&server](const httplib::Request&, httplib::Response& res) {
    SendJson(res, {{"models", json::array({ModelEntry(server)})}});
  });
  h.Get("/api/ps", [&server](const httplib::Request&, httplib::Response& res) {
    json m = ModelEntry(server);
    m.erase("modified_at");
    m["expires_at"] = "0001-01-01T00:00:00Z";  // loaded for as long as the server runs
    m["size_vram"] = 0;
    m["context_length"] = server.ContextLength();
    SendJson(res, {{"models", json::array({m})}});
  });
  PostWithBody(h, "/api/show", limit, [&server](const httplib::Request&, httplib::Response& res, const std::string&) {
    const auto& file = server.engine().model().file();
    const std::string arch = file.GetStringOr("general.architecture", "llama");
    json capabilities = json::array({"completion", "tools"});
    if (TemplateThinks(server)) capabilities.push_back("thinking");
    SendJson(res, {{"modelfile", ""},
                   {"parameters", ""},
                   {"template", file.GetStringOr("tokenizer.chat_template", "")},
                   {"details", Details(server)},
                   {"model_info", {{"general.architecture", arch},
                                   {"general.name", server.options().model_name},
                                   {arch + ".context_length", server.ContextLength()}}},
                   {"capabilities", capabilities},
                   {"modified_at", Rfc3339Now()}});
  });
  PostWithBody(h, "/api/chat", limit, [&server](const httplib::Request& req, httplib::Response& res, const std::string& body) {
    Run(server, req, body, res, /*chat=*/true);
  });
  PostWithBody(h, "/api/generate", limit, [&server](const httplib::Request& req, httplib::Response& res, const std::string& body) {
    Run(server, req, body, res, /*chat=*/false);
  });
}

}  // namespace llamay::server
