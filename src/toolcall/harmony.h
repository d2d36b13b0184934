// The "harmony" output format of OpenAI's gpt-oss models, as pure functions: the split of an output into
// reasoning, content and tool calls, whole or streamed. No model, engine or HTTP here.
//
// The prompt ends with `<|start|>assistant`; the model then writes one or more messages, each a header and
// a body:
//
//   <|channel|>analysis<|message|>Need the weather.<|end|>
//   <|start|>assistant<|channel|>commentary to=functions.f
//   <|constrain|>json<|message|>{"city":"Paris"}<|call|>
//
// A header runs from `<|start|>` (the role, "assistant", follows it; the output's first header has none,
// the prompt wrote it) to `<|message|>` and may hold a recipient `to=R` (before or after the channel), the
// channel `<|channel|>C` and a content type (`<|constrain|>json`, or a bare `json` as the template writes
// it). A body ends at `<|end|>`, at `<|return|>` (the final answer ends the turn) or at `<|call|>` (a tool
// call ends the turn); the last two are end-of-generation tokens that the engine usually stops on before
// they reach the text, so the end of the output ends a body as well.
//
// What a message is, from its header (the role is not looked at):
//   recipient functions.NAME (any channel)       a tool call of NAME; the body is its arguments
//   another recipient (a built-in tool: python,  reasoning: the model's own work, not for the user
//     browser.search; "assistant" is ignored)
//   channel analysis                             reasoning
//   channel final, commentary (a preamble the    content
//     user sees), none, or one not known
//
// Bodies of one kind from different messages are joined with "\n\n"; a body is otherwise taken as it is.
// A call's body is its arguments: when it starts with `{` (after whitespace), the JSON text without the
// whitespace outside strings (toolcall.h's ArgsCompactor), even if it does not parse (a cut-off call keeps
// what was written, as the other formats do); otherwise the text as written (not JSON: kept rather than
// lost); "{}" when the body is empty. A call's first delta is sent when its header is complete.
//
// Degrading: text outside any message (before the first header, after a body's end) is content as it is,
// unless it is only whitespace; so an output without markers is all content. A header that does not reach
// `<|message|>` within 512 bytes, or that a newline or another marker (`<|start|>`, `<|end|>`, `<|return|>`,
// `<|call|>`) interrupts, is text outside a message; one cut off by the end of the output is dropped. A
// lone `<|end|>`, `<|return|>` or `<|call|>` outside a message is dropped. `<|start|>` or `<|channel|>`
// inside a body ends the body and begins the next header (a model that skipped `<|end|>`); the stray
// `<|channel|>commentary to=assistant` gpt-oss-20b sometimes writes before a real channel is overridden by
// it (the last channel in a header counts).
//
// The engine must give these special tokens to the parser as their text (`<|channel|>` and the others),
// not drop them as it drops most special tokens.
//
// Thread-safety: pure functions; a HarmonyStream belongs to one request.
#ifndef LLAMAY_TOOLCALL_HARMONY_H_
#define LLAMAY_TOOLCALL_HARMONY_H_

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "toolcall/scan.h"
#include "toolcall/toolcall.h"

namespace llamay::toolcall {

// Whether a chat template writes the harmony format (its source has `<|channel|>`, as gpt-oss's does).
bool IsHarmonyTemplate(std::string_view chat_template_source);

struct HarmonyAnswer {
  std::string reasoning;  // the analysis messages (and messages to built-in tools), joined
  std::string content;    // the final and preamble messages, and text outside messages, joined
  std::vector<ToolCall> calls;
};

// The parts of a complete output (see the top). `ids` defaults to RandomToolCallIds().
HarmonyAnswer ParseHarmony(std::string_view text, ToolCallIdGenerator ids = nullptr);

struct HarmonyDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCallDelta> calls;  // as ToolDelta::calls
  bool empty() const { return reasoning.empty() && content.empty() && calls.empty(); }
};

// ParseHarmony incrementally: Push the generated text as it comes, then Finish. For any way of splitting a
// text into pushes, the reasoning of all deltas concatenated equals ParseHarmony's reasoning, the content
// likewise, and the calls (index, id, name, arguments fragments concatenated) its calls (with ids from
// equal generators). Held back until decided, and only that: what may still be a marker, a header until
// its `<|message|>`, the whitespace that starts text outside a message, and the start of the output while it
// may be ` to=` (a recipient in the first header).
class HarmonyStream {
 public:
  explicit HarmonyStream(ToolCallIdGenerator ids = nullptr);

  HarmonyDelta Push(std::string_view text);
  // Releases what was held back. REQUIRES: called once, after the last Push (CHECKed).
  HarmonyDelta Finish();
  // Calls begun so far.
  int num_calls() const { return num_calls_; }

 private:
  enum class Mode {
    kStart,    // the output's first bytes: ` to=` begins a header, anything else is kOutside
    kOutside,  // between messages: text is content, a marker begins a header
    kHeader,   // from a header's first byte (a marker, or the ` to=`) to its `<|message|>`
    kBody,     // a message's text, up to the marker that ends it
  };
  enum class Kind { kReasoning, kContent, kCall };
  enum class Args { kUndecided, kJson, kText };  // a call body: before its first non-space byte, and after

  // Each step consumes from buf_[pos_..] and returns whether it made progress.
  void Run(bool final, HarmonyDelta* out);
  bool StepStart(bool final);
  bool StepOutside(bool final, HarmonyDelta* out);
  bool StepHeader(bool final, HarmonyDelta* out);
  bool StepBody(bool final, HarmonyDelta* out);

  // Text outside messages: content once a non-space byte shows the run is not only whitespace.
  void EmitOutside(std::string_view text, HarmonyDelta* out);
  void EndOutside();
  // Opens a body of the kind `header` says (for a call: its first delta).
  void BeginBody(std::string_view header, HarmonyDelta* out);
  void EmitBody(std::string_view text, HarmonyDelta* out);
  void EndBody(HarmonyDelta* out);
  // `text` to reasoning or content, after "\n\n" when it is a new piece and that part has text already.
  void EmitPiece(Kind kind, std::string_view text, HarmonyDelta* out);
  void EmitArgs(std::string_view fragment, HarmonyDelta* out);

  ToolCallIdGenerator ids_;
  std::string buf_;  // text not yet consumed starts at pos_
  size_t pos_ = 0;
  Mode mode_ = Mode::kStart;
  bool finished_ = false;
  // Joining pieces.
  bool piece_begun_ = false;  // the current message body or outside run has given out text
  bool reasoning_written_ = false;
  bool content_written_ = false;
  // kOutside
  std::string outside_ws_;  // the whitespace that starts the current run, held
  bool outside_begun_ = false;
  // kBody
  Kind kind_ = Kind::kContent;
  Args args_mode_ = Args::kUndecided;
  internal::ArgsCompactor compactor_;
  bool args_written_ = false;
  int num_calls_ = 0;
};

// The marker that opens the final answer's body: a response format's grammar applies after it.
inline constexpr std::string_view kHarmonyFinalMarker = "<|channel|>final<|message|>";
// What opens and ends the output's first analysis message (its reasoning; a reasoning budget's markers).
inline constexpr std::string_view kHarmonyAnalysisMarker = "<|channel|>analysis<|message|>";
inline constexpr std::string_view kHarmonyEndMarker = "<|end|>";

// The markers a harmony grammar writes (special tokens in gpt-oss's vocabulary).
std::vector<std::string> HarmonyMarkers();

// The GBNF (root `root`) of a forced harmony tool call (tool_choice "required" or a named function): an
// optional analysis message first (reasoning without '<'; none when !analysis), then one call
// `<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>ARGS` with NAME one of the allowed
// functions and ARGS its parameters' JSON; the turn ends there (the model's <|call|>). One call: harmony
// makes parallel calls in later turns. InvalidArgument as ToolCallGbnf's.
Result<std::string> HarmonyToolCallGbnf(const std::vector<ToolSpec>& tools, const ToolChoice& choice,
                                        bool analysis = true);

// `messages` (OpenAI's shape) for gpt-oss's template, which differs from it: an assistant message's
// reasoning (`reasoning_content`, or `reasoning`) goes to `thinking`, the field the template reads (and its
// `content` is dropped when it has tool calls, since the template refuses both there); tool-call arguments
// sent as a JSON string become the object (the template writes them with tojson); and an assistant message
// with several calls becomes one message per call, each followed by its results (`tool` messages matched
// by tool_call_id, else in order), since the template renders only a message's first call and names a
// result after the latest call.
nlohmann::ordered_json MessagesForHarmonyTemplate(const nlohmann::ordered_json& messages);

}  // namespace llamay::toolcall

#endif  // LLAMAY_TOOLCALL_HARMONY_H_
