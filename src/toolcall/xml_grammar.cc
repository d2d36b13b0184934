// The GBNF of tool calls in the XML-like formats (see toolcall.h, ToolCallGbnf). The format's own rules are
// `root` (or `calls`), `xml-block`, `xml-text`; function i is `xcall<i>` and its parameter j `xparam<i>-<j>`.
// A value typed as JSON embeds its schema's rules under the prefix "fn<i>-p<j>-" (no such prefix is a
// prefix of another, nor of "answer-"), and the JSON rules come once at the end.
#include <set>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "toolcall/scan.h"
#include "toolcall/xml.h"

namespace llamay::toolcall::internal {
namespace {

// The largest count of a GBNF repetition (as grammar/json_schema.h compiles minLength/maxLength): a larger
// maximum is no maximum, a larger minimum is refused.
constexpr int64_t kMaxRepeat = 100000;

// A GBNF literal of UTF-8 text.
std::string Lit(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out = "\"";
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out.append("\\n");
    } else if (c == '\r') {
      out.append("\\r");
    } else if (c == '\t') {
      out.append("\\t");
    } else if (u < 0x20) {
      out.append("\\x").push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 15]);
    } else {
      out.push_back(c);
    }
  }
  return out + "\"";
}

// An ASCII character inside a GBNF class.
std::string ClassChar(char c) {
  if (c == ']' || c == '[' || c == '\\' || c == '-' || c == '^') return std::string("\\") + c;
  return std::string(1, c);
}

// Any text without `tag` (which begins with '<', its only '<'): runs of other characters, and after each
// '<' anything but the rest of the tag (a prefix of it, then a character that does not continue it).
std::string NotContaining(std::string_view tag) {
  const std::string_view rest = tag.substr(1);
  std::string seg;
  for (size_t k = rest.size(); k-- > 0;) {
    std::string alt = "[^" + ClassChar(rest[k]) + "<] [^<]*";
    if (k + 1 < rest.size()) alt += " | " + Lit(rest.substr(k, 1)) + " " + seg;
    seg = "( " + alt + " )?";
  }
  return "[^<]* ( \"<\" " + seg + " )*";
}

// Whether the format's syntax carries the parameter name as it is (the parser reads it back the same).
bool NameFits(ToolFormat format, const std::string& name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (static_cast<unsigned char>(c) < 0x20 || c == '<' || (format == ToolFormat::kQwen3Coder && c == '>')) {
      return false;
    }
  }
  return format == ToolFormat::kQwen3Coder || (!IsSpace(name.front()) && !IsSpace(name.back()));
}

struct Param {
  std::string name;
  Json schema;
  bool required = false;
};

// The parameters in the schema's order: the properties, then required names it does not describe.
std::vector<Param> Params(const Json& params) {
  std::vector<Param> out;
  std::set<std::string> required, seen;
  if (params.contains("required") && params["required"].is_array()) {
    for (const Json& r : params["required"]) {
      if (r.is_string()) required.insert(r.get<std::string>());
    }
  }
  if (params.contains("properties") && params["properties"].is_object()) {
    for (const auto& [name, schema] : params["properties"].items()) {
      out.push_back({name, schema, required.count(name) > 0});
      seen.insert(name);
    }
  }
  const Json extra = params.contains("additionalProperties") && params["additionalProperties"].is_object()
                         ? params["additionalProperties"]
                         : Json::object();
  if (params.contains("required") && params["required"].is_array()) {
    for (const Json& r : params["required"]) {
      if (r.is_string() && seen.insert(r.get<std::string>()).second) {
        out.push_back({r.get<std::string>(), extra, true});
      }
    }
  }
  return out;
}

// The GBNF expression of a parameter's value (the text between its tags, less kQwen3Coder's newlines):
// raw text for raw strings, else JSON of its schema (whose rules are appended to `rules`).
Result<std::string> ValueExpr(ToolFormat format, const Json& root, const Param& p, const std::string& prefix,
                              std::string* rules, bool* uses_text) {
  const std::string context = "parameter \"" + p.name + "\"";
  const Json& resolved = ResolveSchema(root, p.schema);
  if (format == ToolFormat::kQwen3Coder && AllowedTypes(root, p.schema) == kTypeBoolean &&
      !resolved.contains("enum") && !resolved.contains("const")) {
    // Its templates write booleans as Python does (`| string`): the model has seen both.
    return std::string("( \"true\" | \"false\" | \"True\" | \"False\" )");
  }
  if (!IsRawString(root, p.schema)) {
    Json schema = p.schema;
    // Its $refs point into the arguments schema: bring the definitions along.
    if (schema.is_object() &&
        schema.dump(-1, ' ', false, Json::error_handler_t::replace).find("\"$ref\"") != std::string::npos) {
      for (const char* defs : {"$defs", "definitions"}) {
        if (root.contains(defs) && !schema.contains(defs)) schema[defs] = root[defs];
      }
    }
    auto gbnf = grammar::JsonSchemaRulesGbnf(schema, prefix);
    if (!gbnf.ok()) return gbnf.status().WithContext(context);
    *rules += *gbnf;
    return prefix + "root";
  }
  const Json& s = resolved;
  if (s.contains("const") || s.contains("enum")) {
    const Json values = s.contains("const") ? Json::array({s["const"]}) : s["enum"];
    std::string alts;
    for (const Json& v : values) {
      if (!v.is_string() || v.get<std::string>().find(ValueClose(format)) != std::string::npos) continue;
      alts += (alts.empty() ? "" : " | ") + Lit(v.get<std::string>());
    }
    if (alts.empty()) {
      return InvalidArgumentError(context + ": none of its values can be written in the " +
                                  std::string(ToolFormatName(format)) + " format");
    }
    return "( " + alts + " )";
  }
  if (s.contains("minLength") || s.contains("maxLength")) {
    // Counted characters, none of them '<' (so no closing tag among them): stricter than the schema.
    auto bound = [&s](const char* key, int64_t otherwise) {
      return s.contains(key) && s[key].is_number_integer() ? s[key].get<int64_t>() : otherwise;
    };
    const int64_t min = bound("minLength", 0);
    int64_t max = bound("maxLength", -1);
    if (min < 0 || min > kMaxRepeat || (max >= 0 && max < min)) {
      return InvalidArgumentError(context + ": minLength/maxLength out of range");
    }
    if (max > kMaxRepeat) max = -1;
    return "[^<]{" + std::to_string(min) + "," + (max >= 0 ? std::to_string(max) : "") + "}";
  }
  *uses_text = true;
  return std::string("xml-text");
}

// The rule of one call of function `index`.
Result<std::string> CallRule(ToolFormat format, const ToolSpec& tool, size_t index, std::string* rules,
                             bool* uses_text) {
  const bool qwen = format == ToolFormat::kQwen3Coder;
  const std::string id = std::to_string(index);
  std::string body;
  const std::vector<Param> params = Params(tool.parameters);
  for (size_t j = 0; j < params.size(); ++j) {
    const Param& p = params[j];
    if (!NameFits(format, p.name)) {
      return InvalidArgumentError("parameter \"" + p.name + "\" has a name the " +
                                  std::string(ToolFormatName(format)) + " format cannot carry");
    }
    const std::string prefix = "fn" + id + "-p" + std::to_string(j) + "-";
    LLAMAY_ASSIGN_OR_RETURN(std::string value,
                            ValueExpr(format, tool.parameters, p, prefix, rules, uses_text));
    const std::string name = "xparam" + id + "-" + std::to_string(j);
    if (qwen) {
      *rules += name + " ::= " + Lit("<parameter=" + p.name + ">\n") + " " + value + " " +
                Lit("\n</parameter>\n") + "\n";
    } else {
      *rules += name + " ::= " + Lit("\n") + "? " + Lit("<arg_key>" + p.name + "</arg_key>") + " " +
                Lit("\n") + "? " + Lit("<arg_value>") + " " + value + " " + Lit("</arg_value>") + "\n";
    }
    body += " " + name + (p.required ? "" : "?");
  }
  const std::string call = "xcall" + id;
  if (qwen) {
    *rules +=
        call + " ::= " + Lit("<function=" + tool.name + ">\n") + body + " " + Lit("</function>\n") + "\n";
  } else {
    *rules += call + " ::= " + Lit(tool.name) + body + "\n";
  }
  return call;
}

}  // namespace

Result<std::string> XmlToolCallGbnf(ToolFormat format, const std::vector<ToolSpec>& tools,
                                    const ToolChoice& choice, bool parallel, const Json* answer_schema) {
  std::string rules, alternatives;
  bool uses_text = false;
  for (size_t i = 0; i < tools.size(); ++i) {
    const ToolSpec& tool = tools[i];
    if (choice.mode == ToolChoice::Mode::kNamed && tool.name != choice.name) continue;
    auto call = CallRule(format, tool, i, &rules, &uses_text);
    if (!call.ok()) return call.status().WithContext("the parameters of function \"" + tool.name + "\"");
    alternatives += (alternatives.empty() ? "" : " | ") + *call;
  }
  if (alternatives.empty()) {
    return InvalidArgumentError("tool_choice names the function \"" + choice.name +
                                "\", which is not in tools");
  }
  std::string root;
  const std::string calls = answer_schema != nullptr ? "calls" : "root";
  if (answer_schema != nullptr) {
    auto answer = grammar::JsonSchemaRulesGbnf(*answer_schema, "answer-");
    if (!answer.ok()) return answer.status().WithContext("the response format's schema");
    root = "root ::= calls | answer-root\n" + *answer;
  }
  root += calls + " ::= xml-block" + (parallel ? " ( " + Lit("\n") + "? xml-block )*" : "") + "\n";
  if (format == ToolFormat::kQwen3Coder) {
    root +=
        "xml-block ::= " + Lit("<tool_call>\n") + " ( " + alternatives + " ) " + Lit("</tool_call>") + "\n";
  } else {
    root += "xml-block ::= " + Lit("<tool_call>") + " ( " + alternatives + " ) " + Lit("\n") + "? " +
            Lit("</tool_call>") + "\n";
  }
  if (uses_text) root += "xml-text ::= " + NotContaining(ValueClose(format)) + "\n";
  return root + rules + grammar::JsonRulesGbnf();
}

}  // namespace llamay::toolcall::internal
