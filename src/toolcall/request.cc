// The request side: `tools` and `tool_choice` (see toolcall.h).
#include <string>

#include "grammar/json_schema.h"
#include "toolcall/toolcall.h"

namespace llamay::toolcall {
namespace {

using Json = nlohmann::ordered_json;

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string Quoted(const Json& value) { return value.dump(-1, ' ', false, Json::error_handler_t::replace); }

// The arguments schema: an object schema (an untyped one is made one), which the grammar supports.
Result<Json> Parameters(const Json& function, const std::string& field, const std::string& name) {
  if (!function.contains("parameters") || function["parameters"].is_null()) {
    return Json{{"type", "object"}, {"properties", Json::object()}};
  }
  const Json& given = function["parameters"];
  if (!given.is_object()) return InvalidArgumentError(field + " must be a JSON Schema object");
  Json params;
  if (given.contains("type")) {
    const Json& type = given["type"];
    if (type != "object" && type != Json::array({"object"})) {
      return InvalidArgumentError(field + " must describe an object (\"type\": \"object\"), not " +
                                  Quoted(type));
    }
    params = given;
  } else {
    for (const char* key : {"anyOf", "oneOf", "allOf", "$ref", "enum", "const"}) {
      if (given.contains(key)) {
        return InvalidArgumentError(field + " must describe an object (\"type\": \"object\"); \"" + key +
                                    "\" at the top is not supported");
      }
    }
    params = Json{{"type", "object"}};
    for (const auto& [key, value] : given.items()) params[key] = value;
  }
  auto gbnf = grammar::JsonSchemaToGbnf(params);
  if (!gbnf.ok()) {
    return InvalidArgumentError(field + " (function \"" + name + "\"): " + gbnf.status().message());
  }
  return params;
}

Result<ToolSpec> ParseTool(const Json& tool, const std::string& at) {
  if (!tool.is_object()) return InvalidArgumentError(at + " must be an object");
  if (!tool.contains("type") || tool["type"] != "function") {
    return InvalidArgumentError(at + ".type must be \"function\" (the only kind of tool supported)");
  }
  if (!tool.contains("function") || !tool["function"].is_object()) {
    return InvalidArgumentError(at + ".function must be an object");
  }
  const Json& fn = tool["function"];
  ToolSpec spec;
  if (!fn.contains("name") || !fn["name"].is_string())
    return InvalidArgumentError(at + ".function.name must be a string");
  spec.name = fn["name"].get<std::string>();
  if (!ValidName(spec.name)) {
    return InvalidArgumentError(at + ".function.name " + Quoted(fn["name"]) +
                                " must be 1 to 64 letters, digits, underscores or dashes");
  }
  if (fn.contains("description") && !fn["description"].is_null()) {
    if (!fn["description"].is_string())
      return InvalidArgumentError(at + ".function.description must be a string");
    spec.description = fn["description"].get<std::string>();
  }
  if (fn.contains("strict") && !fn["strict"].is_null()) {
    if (!fn["strict"].is_boolean()) return InvalidArgumentError(at + ".function.strict must be a boolean");
    spec.strict = fn["strict"].get<bool>();
  }
  LLAMAY_ASSIGN_OR_RETURN(spec.parameters, Parameters(fn, at + ".function.parameters", spec.name));
  return spec;
}

}  // namespace

Result<std::vector<ToolSpec>> ParseTools(const nlohmann::ordered_json& tools) {
  std::vector<ToolSpec> specs;
  if (tools.is_null()) return specs;
  if (!tools.is_array()) return InvalidArgumentError("tools must be an array");
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string at = "tools[" + std::to_string(i) + "]";
    LLAMAY_ASSIGN_OR_RETURN(ToolSpec spec, ParseTool(tools[i], at));
    for (size_t j = 0; j < specs.size(); ++j) {
      if (specs[j].name == spec.name) {
        return InvalidArgumentError(at + ".function.name \"" + spec.name +
                                    "\" is already the name of tools[" + std::to_string(j) + "]");
      }
    }
    specs.push_back(std::move(spec));
  }
  return specs;
}

Result<ToolChoice> ParseToolChoice(const nlohmann::ordered_json& choice, const std::vector<ToolSpec>& tools) {
  ToolChoice out;
  out.mode = tools.empty() ? ToolChoice::Mode::kNone : ToolChoice::Mode::kAuto;
  if (choice.is_null()) return out;
  if (choice.is_string()) {
    const std::string s = choice.get<std::string>();
    if (s == "none" || (s == "auto" && tools.empty())) {
      out.mode = ToolChoice::Mode::kNone;
      return out;
    }
    if (s == "auto") return out;
    if (s == "required") {
      if (tools.empty()) return InvalidArgumentError("tool_choice \"required\" needs tools");
      out.mode = ToolChoice::Mode::kRequired;
      return out;
    }
  } else if (choice.is_object() && choice.contains("type") && choice["type"] == "function") {
    if (!choice.contains("function") || !choice["function"].is_object() ||
        !choice["function"].contains("name") || !choice["function"]["name"].is_string()) {
      return InvalidArgumentError("tool_choice.function.name must be a string");
    }
    out.mode = ToolChoice::Mode::kNamed;
    out.name = choice["function"]["name"].get<std::string>();
    for (const ToolSpec& t : tools) {
      if (t.name == out.name) return out;
    }
    return InvalidArgumentError("tool_choice names the function " + Quoted(choice["function"]["name"]) +
                                ", which is not in tools");
  }
  return InvalidArgumentError(
      "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": "
      "{\"name\": "
      "...}}");
}

nlohmann::ordered_json ToolsJson(const std::vector<ToolSpec>& tools) {
  Json out = Json::array();
  for (const ToolSpec& t : tools) {
    Json fn = {{"name", t.name}};
    if (!t.description.empty()) fn["description"] = t.description;
    fn["parameters"] = t.parameters;
    out.push_back(Json{{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

}  // namespace llamay::toolcall
