// The harmony parser: ParseHarmony and HarmonyStream are one incremental machine (HarmonyStream), so they
// agree by construction. Every decision is taken on the text up to the end of what it is about (a marker,
// a header's `<|message|>`, at most kMaxHeader bytes of a header), never on where a push ended.
#include "toolcall/harmony.h"

#include <algorithm>
#include <initializer_list>
#include <utility>

#include "base/check.h"
#include "grammar/json_schema.h"

namespace llamay::toolcall {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kStartMarker = "<|start|>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kConstrain = "<|constrain|>";
constexpr std::string_view kEnd = "<|end|>";
constexpr std::string_view kReturn = "<|return|>";
constexpr std::string_view kCall = "<|call|>";
// A recipient in the output's first header, whose `<|start|>assistant` the prompt wrote.
constexpr std::string_view kFirstRecipient = " to=";

// A header longer than this is not one (real ones are a role, a channel, a recipient and a content type).
constexpr size_t kMaxHeader = 512;

// Markers that end a message; that mean something outside a message (the first four begin a header);
// that end a body.
constexpr std::initializer_list<std::string_view> kTerminators = {kEnd, kReturn, kCall};
constexpr std::initializer_list<std::string_view> kOutsideMarkers = {
    kStartMarker, kChannel, kMessage, kConstrain, kEnd, kReturn, kCall};
constexpr std::initializer_list<std::string_view> kBodyEnds = {kEnd, kReturn, kCall, kStartMarker, kChannel};

bool IsSpace(char c) { return internal::IsSpace(c); }

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

bool IsOneOf(std::string_view marker, std::initializer_list<std::string_view> markers) {
  return std::find(markers.begin(), markers.end(), marker) != markers.end();
}

struct Found {
  size_t at = std::string_view::npos;
  std::string_view marker;
};

// The first of `markers` in `text` (all begin with "<|").
Found FindMarker(std::string_view text, std::initializer_list<std::string_view> markers) {
  for (size_t at = text.find("<|"); at != std::string_view::npos; at = text.find("<|", at + 1)) {
    for (std::string_view m : markers) {
      if (StartsWith(text.substr(at), m)) return {at, m};
    }
  }
  return {};
}

// The length of the longest end of `text` that is a proper prefix of one of `markers`: what may still
// become a marker when more text comes.
size_t HeldTail(std::string_view text, std::initializer_list<std::string_view> markers) {
  size_t held = 0;
  for (std::string_view m : markers) {
    for (size_t k = std::min(m.size() - 1, text.size()); k > held; --k) {
      if (text.substr(text.size() - k) == m.substr(0, k)) {
        held = k;
        break;
      }
    }
  }
  return held;
}

struct Header {
  std::string recipient;
  std::string channel;
};

// A header's text (from its first byte to its `<|message|>`, exclusive), read leniently: a role after
// `<|start|>`, then in any order `to=R`, `<|channel|>C`, `<|constrain|>T` and bare words (a content type),
// separated by spaces or markers. A later recipient or channel replaces an earlier one.
Header ReadHeader(std::string_view text) {
  Header h;
  size_t i = 0;
  // A word runs to a space or the next marker.
  auto word = [&]() {
    const size_t begin = i;
    while (i < text.size() && !IsSpace(text[i]) && !(i > begin && StartsWith(text.substr(i), "<|"))) ++i;
    return text.substr(begin, i - begin);
  };
  if (StartsWith(text, kStartMarker)) {
    i = kStartMarker.size();
    word();  // the role
  }
  while (i < text.size()) {
    if (IsSpace(text[i])) {
      ++i;
    } else if (StartsWith(text.substr(i), kChannel)) {
      i += kChannel.size();
      h.channel = std::string(word());
    } else if (StartsWith(text.substr(i), kConstrain)) {
      i += kConstrain.size();
      word();  // the content type: the parser takes a call's body as JSON when it looks like JSON anyway
    } else if (StartsWith(text.substr(i), "to=")) {
      i += 3;
      const std::string_view r = word();
      if (!r.empty() && r != "assistant") h.recipient = std::string(r);  // gpt-oss-20b's stray `to=assistant`
    } else {
      word();  // a bare content type (`json`), or something unknown
    }
  }
  return h;
}

}  // namespace

bool IsHarmonyTemplate(std::string_view chat_template_source) {
  return chat_template_source.find(kChannel) != std::string_view::npos;
}

HarmonyStream::HarmonyStream(ToolCallIdGenerator ids) : ids_(ids ? std::move(ids) : RandomToolCallIds()) {}

HarmonyDelta HarmonyStream::Push(std::string_view text) {
  LLAMAY_CHECK(!finished_) << "HarmonyStream::Push after Finish";
  HarmonyDelta out;
  buf_.append(text);
  Run(/*final=*/false, &out);
  return out;
}

HarmonyDelta HarmonyStream::Finish() {
  LLAMAY_CHECK(!finished_) << "HarmonyStream::Finish called twice";
  finished_ = true;
  HarmonyDelta out;
  Run(/*final=*/true, &out);
  if (mode_ == Mode::kBody) EndBody(&out);
  EndOutside();  // whitespace that never led to text is dropped
  return out;
}

void HarmonyStream::Run(bool final, HarmonyDelta* out) {
  for (bool progress = true; progress;) {
    switch (mode_) {
      case Mode::kStart:
        progress = StepStart(final);
        break;
      case Mode::kOutside:
        progress = StepOutside(final, out);
        break;
      case Mode::kHeader:
        progress = StepHeader(final, out);
        break;
      case Mode::kBody:
        progress = StepBody(final, out);
        break;
    }
  }
  buf_.erase(0, pos_);
  pos_ = 0;
}

bool HarmonyStream::StepStart(bool final) {
  const std::string_view view = std::string_view(buf_).substr(pos_);
  if (StartsWith(view, kFirstRecipient)) {
    mode_ = Mode::kHeader;
    return true;
  }
  // Still undecided while the output is a proper prefix of ` to=`.
  if (!final && view.size() < kFirstRecipient.size() && StartsWith(kFirstRecipient, view)) return false;
  mode_ = Mode::kOutside;
  return true;
}

bool HarmonyStream::StepOutside(bool final, HarmonyDelta* out) {
  const std::string_view view = std::string_view(buf_).substr(pos_);
  const Found f = FindMarker(view, kOutsideMarkers);
  if (f.at == std::string_view::npos) {
    const size_t safe = final ? view.size() : view.size() - HeldTail(view, kOutsideMarkers);
    EmitOutside(view.substr(0, safe), out);
    pos_ += safe;
    return false;
  }
  EmitOutside(view.substr(0, f.at), out);
  EndOutside();
  pos_ += f.at;
  if (IsOneOf(f.marker, kTerminators)) {
    pos_ += f.marker.size();  // a lone end of a message: nothing to end
  } else {
    mode_ = Mode::kHeader;  // the header begins with the marker
  }
  return true;
}

bool HarmonyStream::StepHeader(bool final, HarmonyDelta* out) {
  const std::string_view view = std::string_view(buf_).substr(pos_);
  // Only a window of kMaxHeader bytes and a `<|message|>` is looked at, so that a long header is refused
  // at the same byte however the text comes.
  const std::string_view window = view.substr(0, kMaxHeader + kMessage.size());
  // The first byte that cannot be in a header: a newline, or a marker that is not a header's (after the
  // header's own first marker).
  size_t bad = window.find('\n');
  const size_t skip = StartsWith(window, kStartMarker) ? kStartMarker.size() : 0;
  const Found interrupt = FindMarker(window.substr(skip), {kStartMarker, kEnd, kReturn, kCall});
  if (interrupt.at != std::string_view::npos) bad = std::min(bad, skip + interrupt.at);
  const Found message = FindMarker(window, {kMessage});
  if (message.at != std::string_view::npos && message.at <= kMaxHeader &&
      (bad == std::string_view::npos || message.at < bad)) {
    pos_ += message.at + kMessage.size();
    BeginBody(view.substr(0, message.at), out);
    mode_ = Mode::kBody;
    return true;
  }
  // Refused for length only once no `<|message|>` can begin within kMaxHeader bytes any more.
  if (bad == std::string_view::npos && window.size() == kMaxHeader + kMessage.size()) bad = kMaxHeader;
  if (bad != std::string_view::npos) {  // not a header: its text is text outside a message
    EmitOutside(view.substr(0, bad), out);
    pos_ += bad;
    mode_ = Mode::kOutside;
    return true;
  }
  if (!final) return false;
  pos_ += view.size();  // cut off inside a header: markup, no text of a message
  mode_ = Mode::kOutside;
  return true;
}

bool HarmonyStream::StepBody(bool final, HarmonyDelta* out) {
  const std::string_view view = std::string_view(buf_).substr(pos_);
  const Found f = FindMarker(view, kBodyEnds);
  if (f.at == std::string_view::npos) {
    const size_t safe = final ? view.size() : view.size() - HeldTail(view, kBodyEnds);
    EmitBody(view.substr(0, safe), out);
    pos_ += safe;
    return false;  // Finish ends the body
  }
  EmitBody(view.substr(0, f.at), out);
  EndBody(out);
  pos_ += f.at;
  // A terminator is consumed; `<|start|>` or `<|channel|>` (no `<|end|>` before it) begins the next header.
  if (IsOneOf(f.marker, kTerminators)) pos_ += f.marker.size();
  mode_ = Mode::kOutside;
  return true;
}

void HarmonyStream::EmitOutside(std::string_view text, HarmonyDelta* out) {
  if (text.empty()) return;
  if (outside_begun_) {
    EmitPiece(Kind::kContent, text, out);
    return;
  }
  size_t first = 0;
  while (first < text.size() && IsSpace(text[first])) ++first;
  outside_ws_.append(text.substr(0, first));
  if (first == text.size()) return;
  outside_ws_.append(text.substr(first));
  EmitPiece(Kind::kContent, outside_ws_, out);
  outside_ws_.clear();
  outside_begun_ = true;
}

void HarmonyStream::EndOutside() {
  outside_ws_.clear();
  outside_begun_ = false;
  piece_begun_ = false;
}

void HarmonyStream::BeginBody(std::string_view header_text, HarmonyDelta* out) {
  const Header h = ReadHeader(header_text);
  piece_begun_ = false;
  constexpr std::string_view kFunctions = "functions.";
  if (StartsWith(h.recipient, kFunctions) && h.recipient.size() > kFunctions.size()) {
    kind_ = Kind::kCall;
    args_mode_ = Args::kUndecided;
    compactor_ = internal::ArgsCompactor();
    args_written_ = false;
    out->calls.push_back({num_calls_, ids_(), h.recipient.substr(kFunctions.size()), ""});
    ++num_calls_;
  } else if (!h.recipient.empty() || h.channel == "analysis") {
    kind_ = Kind::kReasoning;
  } else {
    kind_ = Kind::kContent;
  }
}

void HarmonyStream::EmitBody(std::string_view text, HarmonyDelta* out) {
  if (kind_ != Kind::kCall) {
    EmitPiece(kind_, text, out);
    return;
  }
  std::string fragment;
  for (size_t i = 0; i < text.size(); ++i) {
    if (args_mode_ == Args::kUndecided) {
      if (IsSpace(text[i])) continue;
      args_mode_ = text[i] == '{' ? Args::kJson : Args::kText;
    }
    if (args_mode_ == Args::kText) {
      fragment.append(text.substr(i));
      break;
    }
    compactor_.Feed(text[i], &fragment);  // past the object's end too: what follows is kept, not lost
  }
  EmitArgs(fragment, out);
}

void HarmonyStream::EndBody(HarmonyDelta* out) {
  if (kind_ == Kind::kCall && !args_written_) EmitArgs("{}", out);
  kind_ = Kind::kContent;
  piece_begun_ = false;
}

void HarmonyStream::EmitPiece(Kind kind, std::string_view text, HarmonyDelta* out) {
  if (text.empty()) return;
  std::string& part = kind == Kind::kReasoning ? out->reasoning : out->content;
  bool& written = kind == Kind::kReasoning ? reasoning_written_ : content_written_;
  if (!piece_begun_ && written) part += "\n\n";
  part.append(text);
  piece_begun_ = true;
  written = true;
}

void HarmonyStream::EmitArgs(std::string_view fragment, HarmonyDelta* out) {
  if (fragment.empty()) return;
  args_written_ = true;
  const int index = num_calls_ - 1;
  if (!out->calls.empty() && out->calls.back().index == index && out->calls.back().id.empty()) {
    out->calls.back().arguments.append(fragment);
  } else {
    out->calls.push_back({index, "", "", std::string(fragment)});
  }
}

std::vector<std::string> HarmonyMarkers() {
  return {std::string(kStartMarker), std::string(kChannel), std::string(kMessage), std::string(kConstrain),
          std::string(kEnd)};
}

Result<std::string> HarmonyToolCallGbnf(const std::vector<ToolSpec>& tools, const ToolChoice& choice,
                                        bool analysis) {
  if (choice.mode == ToolChoice::Mode::kNone) return InvalidArgumentError("tool_choice \"none\" has no tool-call grammar");
  if (tools.empty()) return InvalidArgumentError("a tool-call grammar needs tools");
  auto lit = [](std::string_view text) {  // names are [a-zA-Z0-9_-], the markers plain ASCII: nothing to escape
    std::string out(1, '"');
    out.append(text);
    out.push_back('"');
    return out;
  };
  std::string rules, alternatives;
  for (size_t i = 0; i < tools.size(); ++i) {
    if (choice.mode == ToolChoice::Mode::kNamed && tools[i].name != choice.name) continue;
    const std::string prefix = "fn" + std::to_string(i) + "-";
    auto schema = grammar::JsonSchemaRulesGbnf(tools[i].parameters, prefix);
    if (!schema.ok()) return schema.status().WithContext("the parameters of function \"" + tools[i].name + "\"");
    rules += *schema;
    alternatives += alternatives.empty() ? "\n    " : "\n  | ";
    alternatives += lit(tools[i].name) + " " + lit(" ") + " " + lit(kConstrain) + " " + lit("json") + " " +
                    lit(kMessage) + " " + prefix + "root";
  }
  if (alternatives.empty())
    return InvalidArgumentError("tool_choice names the function \"" + choice.name + "\", which is not in tools");
  return std::string(analysis ? "root ::= analysis? call\n" : "root ::= call\n") + "analysis ::= " + lit(kChannel) + " " + lit("analysis") + " " + lit(kMessage) +
         " [^<]* " + lit(kEnd) + " " + lit(kStartMarker) + " " + lit("assistant") + "\ncall ::= " + lit(kChannel) +
         " " + lit("commentary to=functions.") + " (" + alternatives + " )\n" + rules + grammar::JsonRulesGbnf();
}

HarmonyAnswer ParseHarmony(std::string_view text, ToolCallIdGenerator ids) {
  HarmonyStream stream(std::move(ids));
  HarmonyDelta delta = stream.Push(text);
  HarmonyDelta rest = stream.Finish();
  HarmonyAnswer answer;
  answer.reasoning = std::move(delta.reasoning) + rest.reasoning;
  answer.content = std::move(delta.content) + rest.content;
  for (const std::vector<ToolCallDelta>* calls : {&delta.calls, &rest.calls}) {
    for (const ToolCallDelta& d : *calls) {
      if (!d.id.empty()) {
        answer.calls.push_back({d.id, d.name, ""});
      } else {
        answer.calls[d.index].arguments += d.arguments;
      }
    }
  }
  return answer;
}

}  // namespace llamay::toolcall
