// The GBNF of tool calls in each format (see toolcall.h). Each function's argument schema is embedded
// under its own rule prefix ("fn<i>-", i its index in `tools`); the format's own rules are `root`,
// `block` and `call`, and the JSON rules (value, object, string, ws, ...) come once at the end. The
// XML-like formats have their own (xml_grammar.cc).
#include <algorithm>
#include <bitset>
#include <map>
#include <string>
#include <vector>

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

bool TooLarge(const Status& s) { return s.message().find("grammar too large") != std::string::npos; }

bool Allowed(const ToolChoice& choice, const ToolSpec& tool) {
  return choice.mode != ToolChoice::Mode::kNamed || tool.name == choice.name;
}

}  // namespace

std::string ToolCallGrammarKey(ToolFormat format, const std::vector<ToolSpec>& tools, const ToolChoice& choice,
                               bool parallel, const nlohmann::ordered_json* answer_schema) {
  // Fields end with '\0' (no name or JSON text holds one unescaped), so no two argument lists read alike.
  std::string key;
  key.append(ToolFormatName(format)).push_back('\0');
  key.append(std::to_string(static_cast<int>(choice.mode))).push_back('\0');
  key.append(choice.name).push_back('\0');
  key.append(parallel ? "1" : "0").push_back('\0');
  auto dump = [](const nlohmann::ordered_json& j) {
    return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  };
  key.append(answer_schema != nullptr ? dump(*answer_schema) : "-").push_back('\0');
  for (const ToolSpec& t : tools) {
    key.append(t.name).push_back('\0');
    key.append(dump(t.parameters)).push_back('\0');
  }
  return key;
}

Result<std::shared_ptr<const grammar::Grammar>> ToolCallGrammar(ToolFormat format,
                                                                const std::vector<ToolSpec>& tools,
                                                                const ToolChoice& choice, bool parallel,
                                                                const nlohmann::ordered_json* answer_schema,
                                                                std::vector<std::string>* relaxed) {
  size_t allowed = 0;
  for (const ToolSpec& t : tools) allowed += Allowed(choice, t);
  if (allowed > kMaxGrammarTools) {
    return InvalidArgumentError("grammar too large: the tool-call grammar takes at most " +
                                std::to_string(kMaxGrammarTools) + " tools, and the request has " +
                                std::to_string(allowed));
  }
  auto compile = [&](const std::vector<ToolSpec>& specs) -> Result<std::shared_ptr<const grammar::Grammar>> {
    LLAMAY_ASSIGN_OR_RETURN(std::string gbnf, ToolCallGbnf(format, specs, choice, parallel, answer_schema));
    auto g = grammar::ParseGbnf(gbnf);
    if (!g.ok()) return g.status().WithContext("the tool-call grammar");
    return g;
  };
  auto full = compile(tools);
  if (full.ok() || !TooLarge(full.status()) || allowed == 0) return full;

  // Too large. With every tool relaxed the grammar is the names and the call syntax: if even that does
  // not build, nothing will. Otherwise estimate each tool's share by compiling its arguments alone, relax
  // the costliest until the estimate fits the limits, then one more at a time until the grammar builds
  // (the estimate counts the JSON rules once per tool, so it rarely falls short). A compile that fails
  // costs as much as the limits allow: this makes two or three full-size compiles, not one per relaxed
  // tool.
  const nlohmann::ordered_json any_object = {{"type", "object"}};
  std::vector<ToolSpec> specs = tools;
  for (ToolSpec& t : specs) t.parameters = any_object;
  auto base = compile(specs);
  if (!base.ok()) return base.status().WithContext("even with every tool's arguments relaxed to any object");
  constexpr int64_t kUnbuildable = int64_t{1} << 40;
  std::vector<int64_t> cost(tools.size(), 0);
  std::vector<size_t> order;
  std::bitset<256> class_starts = (*base)->byte_class_starts();
  int64_t states = (*base)->num_states();
  std::map<std::string, int64_t> measured;  // schema text -> cost (tools often share a schema)
  for (size_t i = 0; i < tools.size(); ++i) {
    if (!Allowed(choice, tools[i])) continue;
    const auto [it, fresh] = measured.emplace(
        tools[i].parameters.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace), 0);
    if (fresh) {
      auto alone = grammar::FromJsonSchema(tools[i].parameters);
      it->second = alone.ok() ? (*alone)->num_states() : kUnbuildable;
      if (alone.ok()) class_starts |= (*alone)->byte_class_starts();
    }
    cost[i] = it->second;
    states += cost[i];
    order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return cost[a] > cost[b]; });
  for (size_t i : order) specs[i].parameters = tools[i].parameters;
  const int64_t classes = static_cast<int64_t>(class_starts.count());
  size_t k = 0;  // order[0, k) are relaxed
  auto relax_next = [&] {
    specs[order[k]].parameters = any_object;
    states -= cost[order[k]];
    if (relaxed != nullptr) relaxed->push_back(tools[order[k]].name);
    ++k;
  };
  relax_next();  // the full grammar did not build
  while (k < order.size() &&
         (states > grammar::kMaxAutomatonStates || states * classes > grammar::kMaxAutomatonTransitions)) {
    relax_next();
  }
  for (; k < order.size(); relax_next()) {
    auto g = compile(specs);
    if (g.ok() || !TooLarge(g.status())) return g;
  }
  return base;
}

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
