// Tool calls (OpenAI function calling) for several model families, as pure functions: no model, engine
// or HTTP here. What a server does with them, per request that has `tools`:
//
//   1. Request: ParseTools(body["tools"]), ParseToolChoice(body["tool_choice"], tools).
//   2. Prompt: the format comes from DetectToolFormat(template source, vocabulary), once per model. If
//      UseToolSystemPrompt(format, template reads `tools`), render MessagesWithToolPrompt(...) without `tools` (the tools
//      and the call syntax go into a system message, calls and results become text); otherwise render
//      MessagesForToolTemplate(...) with `tools` (ToolsJson).
//   3. Sampling: ToolCallGbnf(format, tools, choice, parallel). For tool_choice "required" or a named
//      function the whole output must match it from the first token; for "auto" sample freely until the
//      output contains one of ToolCallTriggers(format), then match the grammar from the trigger's first
//      byte on (grammar/matcher.h: AcceptBytes(trigger and what followed it)). "none": no grammar.
//   4. Answer: ParseToolCalls(format, text), or a ToolCallStream fed the text as it is generated.
//
// The formats (docs/tool-calls.md has examples):
//   kHermes  (Qwen 2.5/3, Hermes 2/3): <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>, one
//            block per call.
//   kLlama3  (Llama 3.1-3.3): {"name": "f", "parameters": {...}} as the message, optionally after
//            <|python_tag|>; parallel calls separated by ";".
//   kMistral (Mistral v0.3, Nemo, Small): [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...]; the newer
//            [TOOL_CALLS]f[ARGS]{...} is parsed too.
//   kGranite (Granite 3.x): <|tool_call|>[{"name": "f", "arguments": {...}}, ...]
//   kGeneric (templates that know nothing of tools): kHermes's syntax, taught by ToolSystemPrompt.
//   kQwen3Coder (Qwen3-Coder, Qwen3.5/3.6, Nemotron Nano 3): XML-like, one block per call:
//            <tool_call>\n<function=f>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>
//   kGlm45   (GLM-4.5/4.6/4.7): one block per call,
//            <tool_call>f\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>
//            (GLM-4.7 writes no newlines between the tags).
//
// In the two XML-like formats a parameter's value is raw text, not JSON; it is typed by the tool's schema
// for that parameter (hence the `tools` that ParseToolCalls and ToolCallStream take): a plain string schema
// (only strings, no format or pattern) takes the text as it is (kQwen3Coder: less one leading and one
// trailing newline, which the templates write around it); other schemas take the text as JSON when it
// parses as a value of a type the schema allows (so a string with a format may come quoted; Python's
// True/False/None count, which kQwen3Coder's templates write for booleans and null); an unknown parameter
// takes it as JSON when it parses as anything but a string; everything else is a string of the text.
// `arguments` is then the object of the parameters in the order written, compact JSON. String values stream
// as they come; other values when their closing tag arrives.
//
// Parsing is lenient where generation without a grammar may differ (whitespace, "arguments" or
// "parameters", extra members, members in another order, a missing closing tag at the end) and never
// loses text: what does not parse as a call stays content. A call is taken once its name is known and its
// arguments object has begun; from there it is a call even if the output is cut off inside the arguments
// (finish_reason "length"), so that streaming never has to take back what it sent; a beginning still
// undecided after 16 KiB is not a call. `arguments` is the arguments object's text as the model wrote it,
// without the whitespace outside strings. In the XML-like formats a call is taken once its name is known
// (`<function=f>`; kGlm45: the name and the first `<arg_key>` or `</tool_call>`); text in a call's body that
// is not a parameter ends the arguments and stays content, and a cut-off call's arguments are closed into
// valid JSON (a cut-off value is taken as it stands); a <tool_call> block with kHermes's JSON in it is a call
// there too.
//
// Thread-safety: pure functions; a ToolCallStream belongs to one request.
#ifndef LLAMAY_TOOLCALL_TOOLCALL_H_
#define LLAMAY_TOOLCALL_TOOLCALL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "grammar/grammar.h"

namespace llamay::toolcall {

enum class ToolFormat { kHermes, kLlama3, kMistral, kGranite, kGeneric, kQwen3Coder, kGlm45 };

// "hermes", "llama3", "mistral", "granite", "generic", "qwen3_coder", "glm45".
std::string_view ToolFormatName(ToolFormat format);

// The format a model uses, from its chat template's source and its vocabulary's special tokens: the
// template's markers first, the more specific before <tool_call>, which all three of kQwen3Coder, kGlm45
// and kHermes templates contain (<arg_key>; <tool_call> with <function= or <parameter=; <tool_call>;
// [TOOL_CALLS] or [AVAILABLE_TOOLS]; <|tool_call|>; <|python_tag|> or the ipython role), then the
// vocabulary's (the tokens <arg_key>, <tool_call>, [TOOL_CALLS], <|tool_call|>, <|python_tag|>); kGeneric
// when neither tells.
ToolFormat DetectToolFormat(std::string_view chat_template_source,
                            const std::function<bool(std::string_view)>& vocab_has_token);

// Whether the server should describe the tools itself (MessagesWithToolPrompt) instead of passing them to
// the template: for kGeneric, and for templates that do not read `tools` (chat::TemplateReadsVariable).
bool UseToolSystemPrompt(ToolFormat format, bool template_reads_tools);

// ---- Requests -------------------------------------------------------------------------------------------

struct ToolSpec {
  std::string name;         // [a-zA-Z0-9_-]{1,64}
  std::string description;  // may be empty
  // A JSON Schema of the arguments object; {"type":"object","properties":{}} when the request has none.
  nlohmann::ordered_json parameters;
  bool strict = false;  // recorded; the arguments are constrained to the schema either way
};

// The request's `tools` (null: none). Only {"type": "function", "function": {...}} tools. InvalidArgument
// naming the field, e.g. "tools[1].function.name must be a string", for: a tool that is not an object or
// not of type "function", a name that is missing, malformed or used twice, a description or strict of the
// wrong type, parameters that are not an object schema or that use what grammar/json_schema.h does not
// support ("tools[0].function.parameters (function \"f\"): unsupported JSON Schema keyword ..."). Pass an
// ordered_json to keep the schema's property order (generated arguments follow it).
Result<std::vector<ToolSpec>> ParseTools(const nlohmann::ordered_json& tools);

struct ToolChoice {
  enum class Mode { kAuto, kNone, kRequired, kNamed };
  Mode mode = Mode::kAuto;
  std::string name;  // kNamed: the function
};

// The request's `tool_choice` (null: "auto" when there are tools, "none" otherwise): "auto", "none",
// "required" or {"type": "function", "function": {"name": "f"}}. InvalidArgument for anything else, for
// a function that is not in `tools` (naming it), and for "required" or a named function without tools.
Result<ToolChoice> ParseToolChoice(const nlohmann::ordered_json& tool_choice,
                                   const std::vector<ToolSpec>& tools);

// The tools as OpenAI writes them ([{"type": "function", "function": {name, description, parameters}}]),
// the `tools` variable for templates.
nlohmann::ordered_json ToolsJson(const std::vector<ToolSpec>& tools);

// ---- Prompts --------------------------------------------------------------------------------------------

// A system text listing the tools (name, description, parameters schema) and the exact call syntax of
// `format`, for templates that do not render tools. Empty when there are no tools.
std::string ToolSystemPrompt(ToolFormat format, const std::vector<ToolSpec>& tools);

// Calls in `format`'s syntax, as the model would write them (for assistant messages rendered as text).
// Each call is {"name": ..., "arguments": JSON text}; arguments that do not parse are written as a string
// (in the XML-like formats, arguments that are not an object are written as they are, in the call's body;
// string values raw, other values as JSON).
std::string FormatToolCalls(ToolFormat format, const nlohmann::ordered_json& calls);

// `messages` for a template that renders tools: each assistant tool_calls[].function.arguments that is a
// JSON string of an object becomes that object (templates iterate it; OpenAI sends a string), other
// strings stay (for the XML-like formats, whose templates iterate the arguments, null and a blank string
// become {}); for kMistral, call ids (tool_calls[].id, tool_call_id) that are not 9 letters or digits
// are mapped to 9 (Mistral templates refuse others), the same id always to the same 9.
nlohmann::ordered_json MessagesForToolTemplate(ToolFormat format, const nlohmann::ordered_json& messages);

// `messages` for a template that knows nothing of tools: ToolSystemPrompt merged into the first message
// when it is a system message (else prepended as one; with `system_role` false, for templates that refuse
// system messages, put before the first user message's content instead); assistant tool_calls appended to
// the content as text (FormatToolCalls) and removed; each run of `tool` messages becomes one user message
// of <tool_response>...</tool_response> blocks (joined to a user message that follows it), so roles still
// alternate for templates that insist.
nlohmann::ordered_json MessagesWithToolPrompt(ToolFormat format, const nlohmann::ordered_json& messages,
                                              const std::vector<ToolSpec>& tools, bool system_role = true);

// ---- Constrained generation -----------------------------------------------------------------------------

// The GBNF (root rule `root`) of the tool-call part of an answer in `format`: it starts with the format's
// trigger text (nothing before it), constrains the name to the allowed functions (only the named one for
// kNamed) and each call's arguments to that function's schema, allows one call (or several when
// `parallel`, except for kNamed: a named function is called once, as OpenAI's and vLLM's), then ends. Everything it accepts parses with ParseToolCalls into calls whose arguments
// validate against their schemas. InvalidArgument for tool_choice "none", no tools, an unknown named
// function, or a schema grammar/json_schema.h refuses.
//
// In the XML-like formats the grammar writes the template's layout; the parameters come in the schema's
// order, the required ones always and the optional ones or not (others never). A value is constrained by
// its schema: plain strings are any text without the closing tag (with minLength/maxLength: that many
// characters other than '<'), string enums and consts their texts, booleans true/false (kQwen3Coder: and
// True/False, as its templates write them), other schemas (numbers, objects, arrays, strings with a format
// or pattern, unions) their JSON by grammar/json_schema.h (a string then in quotes, which the parser takes
// off for such a schema). One thing it cannot exclude: a JSON string
// inside an object or array value that contains the closing tag itself would end the value early.
// InvalidArgument too for a parameter name the syntax cannot carry (kQwen3Coder: with '<', '>' or control
// characters; kGlm45: with '<', control characters or surrounding spaces), and for a string enum none of
// whose values can be written.
//
// `answer_schema` (tool_choice "auto" with a response format, as agent frameworks send for an agent with
// both tools and a typed output): the answer is then either the tool calls or a JSON value that validates
// against this schema, nothing else, and the grammar applies from the first token (no trigger): root is
// the choice between the two. Without it, free text is the other choice, left to the caller (lazy triggers).
Result<std::string> ToolCallGbnf(ToolFormat format, const std::vector<ToolSpec>& tools,
                                 const ToolChoice& choice, bool parallel,
                                 const nlohmann::ordered_json* answer_schema = nullptr);

// The most tools one tool-call grammar takes (those tool_choice allows). A longer list is refused before
// any grammar is built: thousands of tools would spend seconds building a grammar far beyond the
// automaton's limits (and OpenAI takes at most 128).
inline constexpr size_t kMaxGrammarTools = 512;

// ToolCallGbnf compiled. A tool list whose grammar is too large for the automaton (grammar.h's limits;
// an agent's dozens of tools with long bounded arrays, as Claude Code's) is not refused: the tools whose
// arguments need the most automaton states (each measured alone) have their arguments constrained to any
// JSON object instead, as few as make the grammar build. The call syntax and the tool names stay forced.
// `relaxed`, when given, receives the names of the relaxed tools. InvalidArgument as ToolCallGbnf's, and
// "grammar too large: ..." naming the limit for more than kMaxGrammarTools tools or for a grammar that
// does not build even with every tool relaxed.
Result<std::shared_ptr<const grammar::Grammar>> ToolCallGrammar(
    ToolFormat format, const std::vector<ToolSpec>& tools, const ToolChoice& choice, bool parallel,
    const nlohmann::ordered_json* answer_schema = nullptr, std::vector<std::string>* relaxed = nullptr);

// A text that determines ToolCallGrammar's result for the same arguments (everything it reads of them:
// the format, each tool's name and parameters, the choice, parallel and the answer schema; not the
// descriptions), the key for a cache of compiled grammars (grammar/grammar_cache.h).
std::string ToolCallGrammarKey(ToolFormat format, const std::vector<ToolSpec>& tools, const ToolChoice& choice,
                               bool parallel, const nlohmann::ordered_json* answer_schema = nullptr);

struct ToolCallTrigger {
  std::string text;
  // Counts only when nothing but whitespace precedes it in the output (kLlama3's `{"name"`).
  bool at_start = false;
};

// The strings whose appearance in free text ("auto") switches ToolCallGbnf on; the grammar then receives
// the output from the trigger's first byte.
std::vector<ToolCallTrigger> ToolCallTriggers(ToolFormat format);

// ---- Answers --------------------------------------------------------------------------------------------

struct ToolCall {
  std::string id;  // "call_" + 24 letters and digits
  std::string name;
  std::string arguments;  // JSON text of the arguments object, without whitespace outside strings
};

struct ParsedAnswer {
  // The text outside the calls. Whitespace that separates it from a call is dropped at its ends; between
  // two pieces of text around a call, the whitespace after the call stays.
  std::string content;
  std::vector<ToolCall> calls;
};

// Produces call ids. Not thread-safe (one per request).
using ToolCallIdGenerator = std::function<std::string()>;
// "call_" + 24 random letters and digits from a generator seeded with `seed` (the same ids every time) or,
// without a seed, from std::random_device.
ToolCallIdGenerator RandomToolCallIds(uint64_t seed);
ToolCallIdGenerator RandomToolCallIds();

// The calls in a complete answer. `ids` defaults to RandomToolCallIds(). `tools` (only read during the call)
// types the parameter values of the XML-like formats; without it, or for a function or parameter it does
// not have, a value is typed as an unknown parameter's (see the top). The JSON formats ignore it.
ParsedAnswer ParseToolCalls(ToolFormat format, std::string_view text, ToolCallIdGenerator ids = nullptr,
                            const std::vector<ToolSpec>* tools = nullptr);

// One streamed piece of a call, as OpenAI streams tool_calls: the first delta of a call carries its index,
// id and name (arguments empty); later ones carry the index and a fragment of the arguments text.
struct ToolCallDelta {
  int index = 0;
  std::string id;
  std::string name;
  std::string arguments;
};

struct ToolDelta {
  std::string content;
  std::vector<ToolCallDelta> calls;
  bool empty() const { return content.empty() && calls.empty(); }
};

namespace internal {
class Scanner;
}

// ParseToolCalls incrementally: Push the generated text as it comes, then Finish. Text that could still
// become a call (a prefix of a trigger, a call's beginning, whitespace next to a call) is held back until
// it is clear. For any way of splitting a text into pushes, the content of all deltas concatenated equals
// ParseToolCalls's content, the calls (index, id, name, arguments fragments concatenated) equal its calls
// (with ids from equal generators and the same tools), and each call's arguments arrive as the model
// writes them.
class ToolCallStream {
 public:
  // `tools` as for ParseToolCalls; the stream keeps a copy of what it needs from it.
  explicit ToolCallStream(ToolFormat format, ToolCallIdGenerator ids = nullptr,
                          const std::vector<ToolSpec>* tools = nullptr);
  ~ToolCallStream();
  ToolCallStream(ToolCallStream&&) noexcept;
  ToolCallStream& operator=(ToolCallStream&&) noexcept;

  ToolDelta Push(std::string_view text);
  // Releases what was held back. REQUIRES: called once, after the last Push (CHECKed).
  ToolDelta Finish();
  // Calls begun so far.
  int num_calls() const;

 private:
  std::unique_ptr<internal::Scanner> scanner_;
};

}  // namespace llamay::toolcall

#endif  // LLAMAY_TOOLCALL_TOOLCALL_H_
