// The tool-call scanner (ParseToolCalls and ToolCallStream are both this one incremental machine, so they
// agree by construction), and call ids.
//
// The scanner is in one of four modes, each consuming the unconsumed text from the front:
//   kText    free text: content, up to a trigger (held back while the text ends in a trigger's prefix)
//   kHeader  a trigger or `{` seen: waits until the call's name and the start of its arguments are there
//            (then the call begins) or until it is clear there is no call (then the trigger is content)
//   kArgs    the arguments object, passed on as it comes (compacted) until it closes; for the XML-like
//            formats, the call's parameters, turned into that object as they come (XmlArgs, xml.h)
//   kTail    the call's closing syntax, then back to kText (or kHeader for the next item of a list)
#include <algorithm>
#include <memory>
#include <random>
#include <string>

#include "base/check.h"
#include "toolcall/scan.h"
#include "toolcall/toolcall.h"

namespace llamay::toolcall {

ToolCallIdGenerator RandomToolCallIds(uint64_t seed) {
  auto rng = std::make_shared<std::mt19937_64>(seed);
  return [rng] {
    static constexpr std::string_view kAlnum =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    std::string id = "call_";
    for (int i = 0; i < 24; ++i) id.push_back(kAlnum[(*rng)() % kAlnum.size()]);
    return id;
  };
}

ToolCallIdGenerator RandomToolCallIds() {
  std::random_device device;
  const uint64_t seed = (uint64_t{device()} << 32) ^ device();
  return RandomToolCallIds(seed);
}

namespace internal {

Scanner::Scanner(ToolFormat format, ToolCallIdGenerator ids, const std::vector<ToolSpec>* tools)
    : format_(format),
      ids_(ids ? std::move(ids) : RandomToolCallIds()),
      triggers_(TriggerTexts(format)),
      bare_object_ok_(format == ToolFormat::kLlama3) {
  if (tools != nullptr && IsXmlFormat(format)) {
    for (const ToolSpec& t : *tools) schemas_.emplace(t.name, t.parameters);
  }
}

void Scanner::Push(std::string_view text, ToolDelta* out) {
  LLAMAY_CHECK(!finished_) << "ToolCallStream::Push after Finish";
  buf_.append(text);
  Run(/*final=*/false, out);
}

void Scanner::Finish(ToolDelta* out) {
  LLAMAY_CHECK(!finished_) << "ToolCallStream::Finish called twice";
  finished_ = true;
  Run(/*final=*/true, out);
  if (!held_after_call_) out->content += held_ws_;
  held_ws_.clear();
}

void Scanner::Run(bool final, ToolDelta* out) {
  for (bool progress = true; progress;) {
    switch (mode_) {
      case Mode::kText:
        progress = StepText(final, out);
        break;
      case Mode::kHeader:
        progress = StepHeader(final, out);
        break;
      case Mode::kArgs:
        progress = form_ == Form::kXml ? StepXmlArgs(final, out) : StepArgs(out);
        break;
      case Mode::kTail:
        progress = StepTail(final, out);
        break;
    }
  }
  buf_.erase(0, pos_);
  pos_ = 0;
}

bool Scanner::StepText(bool final, ToolDelta* out) {
  const std::string_view view = std::string_view(buf_).substr(pos_);
  if (view.empty()) return false;
  size_t start = std::string_view::npos;
  Entry entry = Entry::kTrigger;
  for (std::string_view t : triggers_) start = std::min(start, view.find(t));
  if (bare_object_ok_) {
    size_t q = 0;
    while (q < view.size() && IsSpace(view[q])) ++q;
    if (q < view.size() && view[q] == '{' && q < start) {
      start = q;
      entry = Entry::kBareObject;
    }
  }
  if (start != std::string_view::npos) {
    EmitText(view.substr(0, start), out);
    pos_ += start;
    entry_ = entry;
    mode_ = Mode::kHeader;
    return true;
  }
  size_t safe = view.size();
  if (!final) {  // hold back the longest end of the text that may begin a trigger
    for (std::string_view t : triggers_) {
      for (size_t k = std::min(t.size() - 1, view.size()); k > 0; --k) {
        if (view.substr(view.size() - k) == t.substr(0, k)) {
          safe = std::min(safe, view.size() - k);
          break;
        }
      }
    }
  }
  EmitText(view.substr(0, safe), out);
  pos_ += safe;
  return false;
}

bool Scanner::StepHeader(bool final, ToolDelta* out) {
  const std::string_view view = std::string_view(buf_).substr(pos_);
  Header h = ParseHeader(format_, entry_, view.substr(0, kMaxPending));
  if (h.match == Match::kNeedMore && !final && view.size() < kMaxPending) return false;
  if (h.match != Match::kYes) {  // not a call: its first bytes are content, then look again
    EmitText(view.substr(0, h.consumed), out);
    pos_ += h.consumed;
    mode_ = Mode::kText;
    return true;
  }
  held_ws_.clear();  // whitespace before a call is dropped
  StartCall(h.name, out);
  form_ = h.form;
  pos_ += h.consumed;
  if (h.form == Form::kXml) {
    const auto schema = schemas_.find(h.name);
    xml_args_ = XmlArgs(format_, schema != schemas_.end() ? &schema->second : nullptr);
    std::string open;
    xml_args_.Begin(&open);
    EmitArgs(open, out);
    mode_ = Mode::kArgs;
  } else if (h.args_done) {
    EmitArgs(h.args, out);
    object_closed_ = true;
    mode_ = Mode::kTail;
  } else {
    args_ = ArgsCompactor();
    object_closed_ = false;
    mode_ = Mode::kArgs;
  }
  return true;
}

bool Scanner::StepArgs(ToolDelta* out) {
  const std::string_view view = std::string_view(buf_).substr(pos_);
  std::string fragment;
  bool done = false;
  size_t i = 0;
  while (i < view.size() && !done) done = args_.Feed(view[i++], &fragment);
  pos_ += i;
  EmitArgs(fragment, out);
  if (done) mode_ = Mode::kTail;
  return done;
}

bool Scanner::StepXmlArgs(bool final, ToolDelta* out) {
  std::string fragment;
  const size_t consumed = xml_args_.Feed(std::string_view(buf_).substr(pos_), final, &fragment);
  pos_ += consumed;
  EmitArgs(fragment, out);
  switch (xml_args_.end()) {
    case XmlArgs::End::kNone:
      return false;  // it took all it could
    case XmlArgs::End::kFunction:
      object_closed_ = true;
      mode_ = Mode::kTail;
      return true;
    case XmlArgs::End::kCall:
    case XmlArgs::End::kOther:
      EndCall();
      return true;
  }
  return false;
}

bool Scanner::StepTail(bool final, ToolDelta*) {
  const std::string_view view = std::string_view(buf_).substr(pos_);
  const Tail t = ParseTail(format_, form_, object_closed_, view.substr(0, kMaxPending),
                           final || view.size() >= kMaxPending);
  if (t.match == Match::kNeedMore) return false;
  pos_ += t.consumed;
  EndCall();
  if (t.next_list_item) {
    entry_ = Entry::kListItem;
    mode_ = Mode::kHeader;
  }
  return true;
}

void Scanner::EndCall() {
  held_after_call_ = true;
  if (format_ == ToolFormat::kLlama3) bare_object_ok_ = true;
  mode_ = Mode::kText;
}

void Scanner::EmitText(std::string_view text, ToolDelta* out) {
  size_t first = 0;
  while (first < text.size() && IsSpace(text[first])) ++first;
  held_ws_.append(text.substr(0, first));
  if (first == text.size()) return;
  size_t last = text.size();
  while (IsSpace(text[last - 1])) --last;
  // Whitespace after a call is dropped when no content came before it (the content's start).
  if (!held_after_call_ || content_emitted_) out->content += held_ws_;
  out->content.append(text.substr(first, last - first));
  held_ws_.assign(text.substr(last));
  held_after_call_ = false;
  content_emitted_ = true;
  bare_object_ok_ = false;
}

void Scanner::EmitArgs(std::string_view fragment, ToolDelta* out) {
  if (fragment.empty()) return;
  if (!out->calls.empty() && out->calls.back().index == num_calls_ - 1 && out->calls.back().id.empty()) {
    out->calls.back().arguments.append(fragment);
  } else {
    out->calls.push_back({num_calls_ - 1, "", "", std::string(fragment)});
  }
}

void Scanner::StartCall(const std::string& name, ToolDelta* out) {
  out->calls.push_back({num_calls_, ids_(), name, ""});
  ++num_calls_;
}

}  // namespace internal

ToolCallStream::ToolCallStream(ToolFormat format, ToolCallIdGenerator ids, const std::vector<ToolSpec>* tools)
    : scanner_(std::make_unique<internal::Scanner>(format, std::move(ids), tools)) {}
ToolCallStream::~ToolCallStream() = default;
ToolCallStream::ToolCallStream(ToolCallStream&&) noexcept = default;
ToolCallStream& ToolCallStream::operator=(ToolCallStream&&) noexcept = default;

ToolDelta ToolCallStream::Push(std::string_view text) {
  ToolDelta delta;
  scanner_->Push(text, &delta);
  return delta;
}

ToolDelta ToolCallStream::Finish() {
  ToolDelta delta;
  scanner_->Finish(&delta);
  return delta;
}

int ToolCallStream::num_calls() const { return scanner_->num_calls(); }

ParsedAnswer ParseToolCalls(ToolFormat format, std::string_view text, ToolCallIdGenerator ids,
                            const std::vector<ToolSpec>* tools) {
  internal::Scanner scanner(format, std::move(ids), tools);
  ToolDelta delta;
  scanner.Push(text, &delta);
  scanner.Finish(&delta);
  ParsedAnswer answer;
  answer.content = std::move(delta.content);
  for (ToolCallDelta& d : delta.calls) {
    if (!d.id.empty()) {
      answer.calls.push_back({std::move(d.id), std::move(d.name), ""});
    } else {
      answer.calls[d.index].arguments += d.arguments;
    }
  }
  return answer;
}

}  // namespace llamay::toolcall
