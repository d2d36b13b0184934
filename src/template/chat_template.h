// Chat templates: the Jinja2 programs GGUF models carry in `tokenizer.chat_template` that turn a list of
// messages into the prompt text, rendered here the way HF transformers renders them (Jinja2 with
// trim_blocks and lstrip_blocks, a non-escaping `tojson`, `raise_exception`, `strftime_now` and the
// loop-control extension), so that a prompt is byte-identical to what transformers produces.
//
// Supported (details in parser.h and builtins.h): text, {{ }}, {# #}, whitespace control and HF's
// trim_blocks/lstrip_blocks; if/elif/else, for (loop.*, tuple targets, `if` filter, else, break,
// continue), set (plain, unpacking, ns.attr, block), macro, filter blocks, raw, HF's generation block;
// literals, attribute/index/slice access, all Jinja2 operators, the common filters, tests, str/dict/list
// methods, `%` and str.format, and the globals range, namespace, dict, raise_exception, strftime_now.
// Not supported (each a parse or render error naming it): extends/block/include/import, call
// blocks, recursive loops, *args/**kwargs in calls, the rarer filters (center, wordwrap, groupby, ...).
// Known differences from Python: ints are 64-bit (overflow is an error); dict.items()/keys()/values() and
// range() print as lists; case mapping covers Latin, Greek, Cyrillic and Armenian one-to-one pairs.
//
// Values: the context is JSON; objects iterate in the key order nlohmann gives them: sorted by key for
// nlohmann::json, insertion order (as in transformers) for nlohmann::ordered_json.
// Undefined variables, keys and attributes render as empty and are falsy; using one further (an attribute
// of it, arithmetic on it) is an error, as in Jinja2.
//
// Errors: Parse and Render return InvalidArgument with "line L, column C: ..." and a TemplateErrorDetail;
// a limit (output size, list size, nesting depth, evaluation steps) gives ResourceExhausted. Nothing throws
// out and nothing aborts on any input.
//
// Thread-safety: a ChatTemplate is immutable after Parse; Render is const and may run concurrently from
// any number of threads. Copies share the parsed program.
#ifndef LLAMAY_TEMPLATE_CHAT_TEMPLATE_H_
#define LLAMAY_TEMPLATE_CHAT_TEMPLATE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/status.h"

namespace llamay::chat {

namespace internal {
struct Program;
}  // namespace internal

// Status::detail() of the errors Parse and Render return.
enum class TemplateErrorDetail : int {
  kNone = 0,
  kSyntax = 1,   // the source does not parse
  kRaised = 2,   // the template called raise_exception(message); the message is in the Status
  kRuntime = 3,  // an operation failed while rendering (type error, undefined value, ...)
  kLimit = 4,    // a render limit was reached
};

// Bounds on one render, so that any template (a recursive macro, a loop over range(10**9), a string
// doubled in a loop) ends with a ResourceExhausted Status within milliseconds instead of exhausting memory
// or time. max_steps is one budget for all the work: statements, expressions and loop iterations cost a
// step each, and what the render builds costs a step per 64 bytes of string or 4 list items (renderer.h).
// Real chat templates need under 100 steps per message (the largest in testdata: 471 for 6 messages with
// tools); the default base budget of 50,000 (about 50 ms of the slowest kind of step, an empty loop
// iteration) is far above that. RenderLimitsFor() adds a share per message and per byte of input, so a
// long conversation renders too.
struct RenderLimits {
  size_t max_output_bytes = size_t{32} << 20;  // rendered text, and any single string value
  size_t max_items = size_t{1} << 20;          // any single list built during the render
  int max_depth = 200;                         // nested expression evaluation (recursive macros)
  int64_t max_steps = 50'000;                  // the budget: steps plus what is built (see above)
};

// The default limits with the budget grown for an input of `messages` messages and `input_bytes` bytes
// (their JSON): 2,000 steps per message and one per 4 bytes (a template may build each input byte 16
// times over).
RenderLimits RenderLimitsFor(size_t messages, size_t input_bytes);

class ChatTemplate {
 public:
  // Parses `source`. InvalidArgument (kSyntax) naming the line and column of the first error.
  static Result<ChatTemplate> Parse(std::string_view source);

  // Renders with `context` as the global variables: normally `messages` (array of {role, content, ...}),
  // `add_generation_prompt` (bool), `bos_token`, `eos_token`, and optionally `tools`, `documents` or any
  // other variable the template reads. REQUIRES: context is an object (else InvalidArgument).
  Result<std::string> Render(const nlohmann::json& context) const { return Render(context, RenderLimits()); }
  Result<std::string> Render(const nlohmann::json& context, const RenderLimits& limits) const;
  // The same with objects iterated in insertion order, as transformers (Python dicts) does: use this for
  // byte parity when a template iterates a mapping or applies tojson to one (tool schemas).
  Result<std::string> Render(const nlohmann::ordered_json& context,
                             const RenderLimits& limits = RenderLimits()) const;

 private:
  explicit ChatTemplate(std::shared_ptr<const internal::Program> program) : program_(std::move(program)) {}
  std::shared_ptr<const internal::Program> program_;
};

// Parses and renders `source` (the ChatML fallback when empty) as transformers' apply_chat_template does:
// with messages, add_generation_prompt, bos_token, eos_token, and tools and documents set to none, under
// RenderLimitsFor(the messages). A caller that renders one template many times parses it once and uses
// RenderMessages instead.
Result<std::string> ApplyChatTemplate(std::string_view source, const nlohmann::json& messages,
                                      bool add_generation_prompt, std::string_view bos, std::string_view eos);
Result<std::string> ApplyChatTemplate(std::string_view source, const nlohmann::ordered_json& messages,
                                      bool add_generation_prompt, std::string_view bos, std::string_view eos);

// Renders a parsed template as ApplyChatTemplate does.
Result<std::string> RenderMessages(const ChatTemplate& tmpl, const nlohmann::json& messages,
                                   bool add_generation_prompt, std::string_view bos, std::string_view eos);
// The same with the `tools` variable set (null: none), OpenAI's [{"type": "function", "function": ...}].
Result<std::string> RenderMessages(const ChatTemplate& tmpl, const nlohmann::ordered_json& messages,
                                   const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                   std::string_view bos, std::string_view eos);
// The same with more variables (an object: chat_template_kwargs such as enable_thinking). They cannot
// replace the ones above: messages, tools, add_generation_prompt and the tokens are set after them.
Result<std::string> RenderMessages(const ChatTemplate& tmpl, const nlohmann::ordered_json& messages,
                                   const nlohmann::ordered_json& tools, const nlohmann::ordered_json& variables,
                                   bool add_generation_prompt, std::string_view bos, std::string_view eos);

// Whether the template reads the variable `name` in its code ({{ }} and {% %}, not its text, comments or
// string literals, and not as an attribute `x.name`): what a template can be given, such as `tools` or
// `enable_thinking`. False for a source that does not lex.
bool TemplateReadsVariable(std::string_view source, std::string_view name);

// The family a template belongs to, for logging: "chatml", "llama2", "llama3", "mistral", "gemma", "phi3",
// "phi4", "zephyr", "command-r", "deepseek", "deepseek3", "openchat", "vicuna", "alpaca", "granite",
// "chatglm", "unknown", or "none" for an empty source. Detection looks for each format's markers.
std::string_view DetectTemplateFamily(std::string_view source);

// A template written here for a family (the names DetectTemplateFamily returns for chatml, llama2,
// llama3, mistral, gemma, phi3 and zephyr) that renders like the family's reference template; an empty
// view for other names. For models whose GGUF carries no template.
std::string_view BuiltinTemplate(std::string_view family);

// BuiltinTemplate("chatml"): the fallback for a model without a template.
std::string_view DefaultChatTemplate();

}  // namespace llamay::chat

#endif  // LLAMAY_TEMPLATE_CHAT_TEMPLATE_H_
