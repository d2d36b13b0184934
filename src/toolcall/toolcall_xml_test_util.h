// Shared by the XML-like formats' tests: the test tools and calls written as the templates write them.
//
// Thread-safety: test code.
#ifndef LLAMAY_TOOLCALL_TOOLCALL_XML_TEST_UTIL_H_
#define LLAMAY_TOOLCALL_TOOLCALL_XML_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "toolcall/toolcall.h"

namespace llamay::toolcall::testing {

constexpr ToolFormat kQwen = ToolFormat::kQwen3Coder;
constexpr ToolFormat kGlm = ToolFormat::kGlm45;

inline std::vector<ToolSpec> Tools() {
  auto tools = ParseTools(nlohmann::ordered_json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
      "parameters": {"type": "object", "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
        "unit": {"enum": ["c", "f"]},
        "detailed": {"type": "boolean"}},
      "required": ["city"]}}},
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
        "query": {"type": "string", "maxLength": 12},
        "filters": {"type": "object", "properties": {"site": {"type": "string"}},
                    "additionalProperties": false},
        "tags": {"type": "array", "items": {"type": "string"}},
        "limit": {"type": ["integer", "null"]},
        "ratio": {"type": "number"},
        "when": {"type": "string", "format": "date"}},
      "required": ["query", "limit"]}}},
    {"type": "function", "function": {"name": "ping"}}])"));
  EXPECT_TRUE(tools.ok()) << tools.status().ToString();
  return tools.ok() ? *tools : std::vector<ToolSpec>();
}

// A call as the templates write it: parameters given as (name, value text).
using Params = std::vector<std::pair<std::string, std::string>>;

inline std::string Qwen(const std::string& name, const Params& params) {
  std::string out = "<tool_call>\n<function=" + name + ">\n";
  for (const auto& [k, v] : params) out += "<parameter=" + k + ">\n" + v + "\n</parameter>\n";
  return out + "</function>\n</tool_call>";
}

inline std::string Glm(const std::string& name, const Params& params, bool newlines = true) {
  const std::string nl = newlines ? "\n" : "";
  std::string out = "<tool_call>" + name;
  for (const auto& [k, v] : params) {
    out += nl + "<arg_key>" + k + "</arg_key>" + nl + "<arg_value>" + v + "</arg_value>";
  }
  return out + nl + "</tool_call>";
}

inline std::string Write(ToolFormat f, const std::string& name, const Params& params) {
  return f == kQwen ? Qwen(name, params) : Glm(name, params);
}

}  // namespace llamay::toolcall::testing

#endif  // LLAMAY_TOOLCALL_TOOLCALL_XML_TEST_UTIL_H_
