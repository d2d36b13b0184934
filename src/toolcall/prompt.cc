// The prompt side: the system text for templates that know nothing of tools, and messages prepared for
// templates (see toolcall.h).
#include <cstdint>
#include <string>

#include "toolcall/toolcall.h"
#include "toolcall/xml.h"

namespace llamay::toolcall {
namespace {

using Json = nlohmann::ordered_json;

// JSON text as Python's json.dumps writes it (", " and ": "), the form models were trained on. Never
// throws: invalid UTF-8 is replaced.
std::string PyDump(const Json& v) {
  if (v.is_object()) {
    std::string out = "{";
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (it != v.begin()) out += ", ";
      out += Json(it.key()).dump(-1, ' ', false, Json::error_handler_t::replace);
      out += ": ";
      out += PyDump(it.value());
    }
    return out + "}";
  }
  if (v.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) {
      if (i > 0) out += ", ";
      out += PyDump(v[i]);
    }
    return out + "]";
  }
  return v.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string StringField(const Json& m, const char* key) {
  return m.is_object() && m.contains(key) && m[key].is_string() ? m[key].get<std::string>() : std::string();
}

// A message's content as text: a string, or the text parts of a content array.
std::string ContentText(const Json& m) {
  if (!m.is_object() || !m.contains("content")) return "";
  const Json& c = m["content"];
  if (c.is_string()) return c.get<std::string>();
  std::string out;
  if (c.is_array()) {
    for (const Json& part : c) out += StringField(part, "text");
  }
  return out;
}

// A call's function ({name, arguments}), and its arguments as a value (parsed when a JSON string).
const Json& CallFunction(const Json& call) {
  return call.is_object() && call.contains("function") ? call["function"] : call;
}

Json CallArguments(const Json& fn) {
  Json args = Json::object();
  if (fn.is_object() && fn.contains("arguments")) {
    args = fn["arguments"];
    if (args.is_string()) {
      Json parsed = Json::parse(args.get<std::string>(), nullptr, /*allow_exceptions=*/false);
      if (!parsed.is_discarded()) args = std::move(parsed);
    }
  }
  return args;
}

// One call as the model writes it: {"name": ..., "arguments"|"parameters": ...}.
std::string CallObject(ToolFormat format, const Json& call) {
  const Json& fn = CallFunction(call);
  Json args = CallArguments(fn);
  Json obj = {{"name", StringField(fn, "name")}};
  obj[format == ToolFormat::kLlama3 ? "parameters" : "arguments"] = std::move(args);
  return PyDump(obj);
}

// `id` as Mistral templates want call ids: 9 letters or digits (kept when it already is).
std::string MistralId(const std::string& id) {
  static constexpr std::string_view kAlnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  bool ok = id.size() == 9;
  for (char c : id) ok = ok && kAlnum.find(c) != std::string_view::npos;
  if (ok) return id;
  uint64_t h = 14695981039346656037ull;  // FNV-1a
  for (char c : id) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  std::string out;
  for (int i = 0; i < 9; ++i, h /= kAlnum.size()) out.push_back(kAlnum[h % kAlnum.size()]);
  return out;
}

// How to call in each format, with placeholders.
std::string_view SyntaxHelp(ToolFormat format) {
  switch (format) {
    case ToolFormat::kHermes:
    case ToolFormat::kGeneric:
      return "<tool_call>\n{\"name\": <function-name>, \"arguments\": "
             "<arguments-json-object>}\n</tool_call>\n\n"
             "For several calls, write one <tool_call></tool_call> block after another.";
    case ToolFormat::kLlama3:
      return "{\"name\": <function-name>, \"parameters\": <arguments-json-object>}\n\n"
             "The call is your whole reply. For several calls, separate them with \";\".";
    case ToolFormat::kMistral:
      return "[TOOL_CALLS][{\"name\": <function-name>, \"arguments\": <arguments-json-object>}]\n\n"
             "For several calls, put more objects in the list.";
    case ToolFormat::kGranite:
      return "<|tool_call|>[{\"name\": <function-name>, \"arguments\": <arguments-json-object>}]\n\n"
             "For several calls, put more objects in the list.";
    case ToolFormat::kQwen3Coder:
      return "<tool_call>\n<function=<function-name>>\n<parameter=<parameter-name>>\n<value>\n</parameter>\n"
             "</function>\n</tool_call>\n\n"
             "Write one <parameter=...></parameter> block per argument, its value as plain text (numbers, "
             "booleans, objects and arrays as JSON). For several calls, write one <tool_call></tool_call> "
             "block after another.";
    case ToolFormat::kGlm45:
      return "<tool_call><function-name>\n<arg_key><parameter-name></arg_key>\n"
             "<arg_value><value></arg_value>\n</tool_call>\n\n"
             "Write one <arg_key></arg_key><arg_value></arg_value> pair per argument, its value as plain "
             "text (numbers, booleans, objects and arrays as JSON). For several calls, write one "
             "<tool_call></tool_call> block after another.";
  }
  return "";
}

// Prepends `text` to a message's content (string or parts).
void PrependContent(Json* m, const std::string& text) {
  Json& c = (*m)["content"];
  if (c.is_array()) {
    c.insert(c.begin(), Json{{"type", "text"}, {"text", text + "\n\n"}});
  } else {
    const std::string old = c.is_string() ? c.get<std::string>() : "";
    c = old.empty() ? text : text + "\n\n" + old;
  }
}

}  // namespace

namespace internal {

std::string XmlCall(ToolFormat format, const std::string& name, const Json& args) {
  // Values as the templates write them: strings raw, anything else as JSON, except that kQwen3Coder's
  // write booleans and null as Python does (`| string`).
  const bool qwen = format == ToolFormat::kQwen3Coder;
  auto text = [qwen](const Json& v) {
    if (v.is_string()) return v.get<std::string>();
    if (qwen && v.is_boolean()) return std::string(v.get<bool>() ? "True" : "False");
    if (qwen && v.is_null()) return std::string("None");
    return PyDump(v);
  };
  std::string out = qwen ? "<tool_call>\n<function=" + name + ">\n" : "<tool_call>" + name;
  if (args.is_object()) {
    for (auto it = args.begin(); it != args.end(); ++it) {
      if (qwen) {
        out.append("<parameter=").append(it.key()).append(">\n");
        out.append(text(it.value())).append("\n</parameter>\n");
      } else {
        out.append("\n<arg_key>").append(it.key()).append("</arg_key>\n<arg_value>");
        out.append(text(it.value())).append("</arg_value>");
      }
    }
  } else if (!args.is_null()) {  // not an object: kept as it is, for what it says
    out.append(qwen ? "" : "\n").append(text(args)).append(qwen ? "\n" : "");
  }
  return out + (qwen ? "</function>\n</tool_call>" : "\n</tool_call>");
}

}  // namespace internal

std::string ToolSystemPrompt(ToolFormat format, const std::vector<ToolSpec>& tools) {
  if (tools.empty()) return "";
  std::string out =
      "# Tools\n\nYou may call one or more functions to help with the user's request. The functions, one "
      "JSON "
      "object per line, each with its name, description and parameters (a JSON Schema of its arguments):\n"
      "<tools>\n";
  for (const Json& t : ToolsJson(tools)) out += PyDump(t) + "\n";
  out +=
      internal::IsXmlFormat(format)
          ? "</tools>\n\nTo call a function, reply with the call in exactly this form, with a parameter for "
            "each of its arguments, as the function's parameters describe them:\n"
          : "</tools>\n\nTo call a function, reply with the call in exactly this form, the arguments being a "
            "JSON object that matches the function's parameters:\n";
  out += SyntaxHelp(format);
  out +=
      "\n\nThe results come back in <tool_response></tool_response> blocks. When no function is needed, "
      "answer normally.";
  return out;
}

std::string FormatToolCalls(ToolFormat format, const nlohmann::ordered_json& calls) {
  if (!calls.is_array() || calls.empty()) return "";
  std::string out;
  for (size_t i = 0; i < calls.size(); ++i) {
    if (internal::IsXmlFormat(format)) {
      const Json& fn = CallFunction(calls[i]);
      out.append(i ? "\n" : "").append(internal::XmlCall(format, StringField(fn, "name"), CallArguments(fn)));
      continue;
    }
    const std::string call = CallObject(format, calls[i]);
    switch (format) {
      case ToolFormat::kHermes:
      case ToolFormat::kGeneric:
        out.append(i ? "\n" : "").append("<tool_call>\n").append(call).append("\n</tool_call>");
        break;
      case ToolFormat::kLlama3:
        out.append(i ? "; " : "").append(call);
        break;
      case ToolFormat::kMistral:
      case ToolFormat::kGranite:
        out.append(i ? ", " : "").append(call);
        break;
      case ToolFormat::kQwen3Coder:
      case ToolFormat::kGlm45:
        break;  // above
    }
  }
  if (format == ToolFormat::kMistral) return "[TOOL_CALLS][" + out + "]";
  if (format == ToolFormat::kGranite) return "<|tool_call|>[" + out + "]";
  return out;
}

nlohmann::ordered_json MessagesForToolTemplate(ToolFormat format, const nlohmann::ordered_json& messages) {
  Json out = messages;
  if (!out.is_array()) return out;
  for (Json& m : out) {
    if (!m.is_object()) continue;
    if (format == ToolFormat::kMistral && m.contains("tool_call_id") && m["tool_call_id"].is_string()) {
      m["tool_call_id"] = MistralId(m["tool_call_id"].get<std::string>());
    }
    if (!m.contains("tool_calls") || !m["tool_calls"].is_array()) continue;
    for (Json& call : m["tool_calls"]) {
      if (!call.is_object()) continue;
      if (format == ToolFormat::kMistral && call.contains("id") && call["id"].is_string()) {
        call["id"] = MistralId(call["id"].get<std::string>());
      }
      if (!call.contains("function") || !call["function"].is_object()) continue;
      Json& fn = call["function"];
      if (!fn.contains("arguments")) continue;
      Json& args = fn["arguments"];
      // The XML-like templates iterate the arguments: none (null, or "" as some clients send) is {}.
      const bool none =
          args.is_null() ||
          (args.is_string() && args.get<std::string>().find_first_not_of(" \t\r\n") == std::string::npos);
      if (internal::IsXmlFormat(format) && none) {
        args = Json::object();
        continue;
      }
      if (!args.is_string()) continue;
      Json parsed = Json::parse(args.get<std::string>(), nullptr, /*allow_exceptions=*/false);
      if (parsed.is_object()) args = std::move(parsed);
    }
  }
  return out;
}

nlohmann::ordered_json MessagesWithToolPrompt(ToolFormat format, const nlohmann::ordered_json& messages,
                                              const std::vector<ToolSpec>& tools, bool system_role) {
  if (!messages.is_array()) return messages;
  Json out = Json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    const std::string role = StringField(m, "role");
    if (role == "tool") {  // a run of results: one user message
      std::string block;
      for (; i < messages.size() && StringField(messages[i], "role") == "tool"; ++i) {
        block.append(block.empty() ? "" : "\n").append("<tool_response>\n");
        block.append(ContentText(messages[i])).append("\n</tool_response>");
      }
      if (i < messages.size() && StringField(messages[i], "role") == "user") {
        Json user = messages[i];
        PrependContent(&user, block);
        out.push_back(std::move(user));
      } else {
        out.push_back(Json{{"role", "user"}, {"content", block}});
        --i;
      }
      continue;
    }
    Json copy = m;
    if (role == "assistant" && m.contains("tool_calls")) {
      const std::string calls = FormatToolCalls(format, m["tool_calls"]);
      const std::string text = ContentText(m);
      copy["content"] = text.empty() ? calls : calls.empty() ? text : text + "\n" + calls;
      copy.erase("tool_calls");
    }
    out.push_back(std::move(copy));
  }
  const std::string prompt = ToolSystemPrompt(format, tools);
  if (prompt.empty()) return out;
  if (!system_role) {
    for (Json& m : out) {
      if (StringField(m, "role") == "user") {
        PrependContent(&m, prompt);
        return out;
      }
    }
    out.insert(out.begin(), Json{{"role", "user"}, {"content", prompt}});
  } else if (!out.empty() && StringField(out[0], "role") == "system") {
    const std::string old = ContentText(out[0]);
    out[0]["content"] = old.empty() ? prompt : old + "\n\n" + prompt;
  } else {
    out.insert(out.begin(), Json{{"role", "system"}, {"content", prompt}});
  }
  return out;
}

}  // namespace llamay::toolcall
