// Internal: recognising tool-call syntax at the start of a buffer that may still grow (scan.cc), and the
// scanner that ToolCallStream and ParseToolCalls share (stream.cc).
//
// Every recogniser here looks only at the bytes it needs and answers kNeedMore exactly when it reached the
// end of the text before it could decide: so an answer given on a prefix of the output never changes when
// more output arrives, which is what makes streaming agree with parsing the whole text.
//
// Thread-safety: pure functions; a Scanner belongs to one request.
#ifndef LLAMAY_TOOLCALL_SCAN_H_
#define LLAMAY_TOOLCALL_SCAN_H_

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "toolcall/toolcall.h"
#include "toolcall/xml.h"

namespace llamay::toolcall::internal {

enum class Match { kNeedMore, kNo, kYes };

// A call's beginning (or its closing) is decided on at most this many bytes: syntax still undecided after
// them is not a call (the beginning) or ends the call (the closing). Keeps the re-reading of held-back
// text bounded, and depends only on the text, not on how it was split.
inline constexpr size_t kMaxPending = 16384;

inline bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

// The literal trigger texts the scanner looks for in free text (ToolCallTriggers without the
// start-only ones, which the scanner handles itself).
std::vector<std::string_view> TriggerTexts(ToolFormat format);

// Where a call's syntax begins.
enum class Entry {
  kTrigger,     // at a trigger text
  kBareObject,  // at `{` (kLlama3: at the start of the output, or after a call)
  kListItem,    // at the `,` before the next object of a [...] list (kMistral, kGranite)
};

// The shape of the call being parsed, for what must follow its arguments.
enum class Form {
  kObject,      // {"name": ..., "arguments": {...}} alone (kHermes, kGeneric, kLlama3)
  kListObject,  // the same inside [ ... ] (kMistral, kGranite)
  kNameArgs,    // [TOOL_CALLS]name[ARGS]{...} (kMistral)
  kXml,         // <tool_call> then the name and the parameters as tags (kQwen3Coder, kGlm45; xml.h)
};

struct Header {
  Match match = Match::kNeedMore;
  // kYes: bytes up to the arguments' `{` (or, when args_done, through the call object's `}`; for kXml,
  // through the name: `<function=f>`, kGlm45's `f`).
  // kNo: bytes to give up as content before looking for calls again (the trigger, `{` or `,`).
  size_t consumed = 0;
  std::string name;
  Form form = Form::kObject;
  bool args_done = false;  // the arguments came before the name: `args` holds them, compacted
  std::string args;
};

// A call's beginning at the start of `text`: through the name and up to its arguments object.
Header ParseHeader(ToolFormat format, Entry entry, std::string_view text);

struct Tail {
  Match match = Match::kNeedMore;  // kYes once decided (never kNo: what does not fit is left as text)
  size_t consumed = 0;             // the call's closing syntax
  bool next_list_item = false;     // a `,` follows in a list: the next call starts at `consumed`
};

// What follows a call's arguments: the rest of its object (skipping other members) unless
// `object_closed`, then the format's closing (</tool_call>, `;`, `]`; for kXml, what follows
// </function>). With `final`, never kNeedMore.
Tail ParseTail(ToolFormat format, Form form, bool object_closed, std::string_view text, bool final);

// Copies the arguments' JSON text, dropping whitespace outside strings (but keeping it between two
// letters or digits, where JSON would not have it and dropping it would change the meaning), and tells
// when the outermost value closes.
class ArgsCompactor {
 public:
  // Appends what `c` contributes to `out`; true when `c` closed the value.
  bool Feed(char c, std::string* out);

 private:
  int depth_ = 0;
  bool in_string_ = false;
  bool escape_ = false;
  bool last_word_ = false;
  std::string pending_ws_;
};

// The incremental tool-call scanner behind ToolCallStream and ParseToolCalls.
class Scanner {
 public:
  // `tools`: for typing the XML-like formats' values (copied); may be nullptr.
  Scanner(ToolFormat format, ToolCallIdGenerator ids, const std::vector<ToolSpec>* tools);

  void Push(std::string_view text, ToolDelta* out);
  void Finish(ToolDelta* out);
  int num_calls() const { return num_calls_; }

 private:
  enum class Mode { kText, kHeader, kArgs, kTail };

  // Each step consumes from buf_[pos_..] and returns whether it made progress.
  void Run(bool final, ToolDelta* out);
  bool StepText(bool final, ToolDelta* out);
  bool StepHeader(bool final, ToolDelta* out);
  bool StepArgs(ToolDelta* out);
  bool StepXmlArgs(bool final, ToolDelta* out);
  // After a call's closing: back to text.
  void EndCall();
  bool StepTail(bool final, ToolDelta* out);
  // Content, with the whitespace rules of ParsedAnswer::content.
  void EmitText(std::string_view text, ToolDelta* out);
  void EmitArgs(std::string_view fragment, ToolDelta* out);
  void StartCall(const std::string& name, ToolDelta* out);

  const ToolFormat format_;
  ToolCallIdGenerator ids_;
  std::vector<std::string_view> triggers_;
  std::string buf_;  // text not yet consumed starts at pos_
  size_t pos_ = 0;
  Mode mode_ = Mode::kText;
  bool finished_ = false;
  // kText
  std::string held_ws_;           // whitespace after the last content, not yet emitted
  bool held_after_call_ = false;  // held_ws_ follows a call
  bool content_emitted_ = false;
  bool bare_object_ok_;  // kLlama3: only whitespace since the start or the last call
  // kHeader / kTail
  Entry entry_ = Entry::kTrigger;
  Form form_ = Form::kObject;
  bool object_closed_ = false;
  // kArgs
  ArgsCompactor args_;
  XmlArgs xml_args_;                     // form_ == Form::kXml
  std::map<std::string, Json> schemas_;  // function name -> its arguments schema (kXml)
  int num_calls_ = 0;
};

}  // namespace llamay::toolcall::internal

#endif  // LLAMAY_TOOLCALL_SCAN_H_
