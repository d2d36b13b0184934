// The GBNF of tool calls in each format (see toolcall.h). Each function's argument schema is embedded
// under its own rule prefix ("fn<i>-", i its index in `tools`); the format's own rules are `root`,
// `block` and `call`, and the JSON rules (value, object, string, ws, ...) come once at the end. The
// XML-like formats have their own (xml_grammar.cc).
#include <string>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "toolcall/toolcall.h"
#include "toolcall/xml.h"

namespace llamay::toolcall {
namespace {

// A GBNF literal of plain text (names are letters, digits, '_' and '-'; the syntax is ASCII).
std::string Lit(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out.push_back('\\');
    if (c == '\n') {
      out.append("\\n");
    } else {
      out.push_back(c);
    }
  }
  return out + "\"";
}

// `first ( sep first )*` when parallel, else `first`.
std::string Repeated(const std::string& first, const std::string& sep, bool parallel) {
  return parallel ? first + " ( " + sep + " " + first + " )*" : first;
}

}  // namespace

Result<std::string> ToolCallGbnf(ToolFormat format, const std::vector<ToolSpec>& tools,
                                 const ToolChoice& choice, bool parallel,
                                 const nlohmann::ordered_json* answer_schema) {
  if (choice.mode == ToolChoice::Mode::kNone) {
    return InvalidArgumentError("tool_choice \"none\" has no tool-call grammar");
  }
  if (tools.empty()) return InvalidArgumentError("a tool-call grammar needs tools");
  // A named function is called once, as OpenAI and vLLM do: parallel calls are for "auto" and "required".
  if (choice.mode == ToolChoice::Mode::kNamed) parallel = false;
  if (internal::IsXmlFormat(format)) {
    return internal::XmlToolCallGbnf(format, tools, choice, parallel, answer_schema);
  }
  const std::string args_key = format == ToolFormat::kLlama3 ? "\"parameters\":" : "\"arguments\":";
  std::string rules, alternatives;
  for (size_t i = 0; i < tools.size(); ++i) {
    const ToolSpec& tool = tools[i];
    if (choice.mode == ToolChoice::Mode::kNamed && tool.name != choice.name) continue;
    const std::string prefix = "fn" + std::to_string(i) + "-";
    auto schema = grammar::JsonSchemaRulesGbnf(tool.parameters, prefix);
    if (!schema.ok()) return schema.status().WithContext("the parameters of function \"" + tool.name + "\"");
    rules += *schema;
    alternatives += alternatives.empty() ? "\n    " : "\n  | ";
    alternatives += Lit("\"" + tool.name + "\"") + " \",\" ws " + Lit(args_key) + " ws " + prefix + "root";
  }
  if (alternatives.empty()) {
    return InvalidArgumentError("tool_choice names the function \"" + choice.name +
                                "\", which is not in tools");
  }
  // With an answer schema the calls are one side of root's choice; the answer's rules are prefixed apart
  // from every function's ("answer-" is no prefix of "fnN-", nor the other way round).
  const std::string calls = answer_schema != nullptr ? "calls" : "root";
  std::string root;
  if (answer_schema != nullptr) {
    auto answer = grammar::JsonSchemaRulesGbnf(*answer_schema, "answer-");
    if (!answer.ok()) return answer.status().WithContext("the response format's schema");
    root = "root ::= calls | answer-root\n" + *answer;
  }
  switch (format) {
    case ToolFormat::kHermes:
    case ToolFormat::kGeneric:
      root += calls + " ::= " + Repeated("block", Lit("\n") + "?", parallel) +
             "\nblock ::= " + Lit("<tool_call>") + " " + Lit("\n") + "? call " + Lit("\n") + "? " +
             Lit("</tool_call>") + "\n";
      break;
    case ToolFormat::kLlama3:
      root += calls + " ::= " + Lit("<|python_tag|>") + "? " +
             Repeated("call", Lit(";") + " " + Lit(" ") + "?", parallel) + "\n";
      break;
    case ToolFormat::kMistral:
    case ToolFormat::kGranite:
      root += calls + " ::= " + Lit(format == ToolFormat::kMistral ? "[TOOL_CALLS]" : "<|tool_call|>") + " " +
             Lit("[") + " ws " + Repeated("call", Lit(",") + " ws", parallel) + " ws " + Lit("]") + "\n";
      break;
    case ToolFormat::kQwen3Coder:
    case ToolFormat::kGlm45:
      break;  // XmlToolCallGbnf
  }
  return root + "call ::= " + Lit("{") + " ws " + Lit("\"name\":") + " ws (" + alternatives + " ) ws " +
         Lit("}") + "\n" + rules + grammar::JsonRulesGbnf();
}

}  // namespace llamay::toolcall
