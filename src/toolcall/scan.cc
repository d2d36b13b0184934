// Recognisers for tool-call syntax at the start of a growing buffer (see scan.h).
#include "toolcall/scan.h"

#include <nlohmann/json.hpp>

namespace llamay::toolcall::internal {
namespace {

constexpr std::string_view kHermesOpen = "<tool_call>", kHermesClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kMistralOpen = "[TOOL_CALLS]", kMistralArgs = "[ARGS]";
constexpr std::string_view kGraniteOpen = "<|tool_call|>";

bool IsWord(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
         c == '+' || c == '_';
}

size_t SkipSpace(std::string_view text, size_t pos) {
  while (pos < text.size() && IsSpace(text[pos])) ++pos;
  return pos;
}

// `lit` at text[pos..]: kYes, kNeedMore when the text ends inside it, kNo otherwise.
Match Literal(std::string_view text, size_t pos, std::string_view lit) {
  const std::string_view rest = text.substr(pos);
  if (rest.size() >= lit.size()) return rest.substr(0, lit.size()) == lit ? Match::kYes : Match::kNo;
  return lit.substr(0, rest.size()) == rest ? Match::kNeedMore : Match::kNo;
}

struct Scan {
  Match match;
  size_t end = 0;  // kYes: one past the value
};

// A JSON string at text[pos] == '"'. Raw control characters are refused (JSON forbids them).
Scan String(std::string_view text, size_t pos) {
  for (size_t i = pos + 1; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\\') {
      ++i;
    } else if (c == '"') {
      return {Match::kYes, i + 1};
    } else if (static_cast<unsigned char>(c) < 0x20) {
      return {Match::kNo};
    }
  }
  return {Match::kNeedMore};
}

// The decoded value of a complete JSON string token; false when it is not valid JSON.
bool DecodeString(std::string_view token, std::string* out) {
  const auto v = nlohmann::json::parse(token, nullptr, /*allow_exceptions=*/false);
  if (!v.is_string()) return false;
  *out = v.get<std::string>();
  return true;
}

// Any JSON value at text[pos], leniently: strings exactly, containers by their brackets, scalars as a run
// of word characters.
Scan Value(std::string_view text, size_t pos) {
  if (pos >= text.size()) return {Match::kNeedMore};
  const char c = text[pos];
  if (c == '"') return String(text, pos);
  if (c == '{' || c == '[') {
    int depth = 0;
    for (size_t i = pos; i < text.size(); ++i) {
      const char d = text[i];
      if (d == '"') {
        const Scan s = String(text, i);
        if (s.match != Match::kYes) return s;
        i = s.end - 1;
      } else if (d == '{' || d == '[') {
        ++depth;
      } else if ((d == '}' || d == ']') && --depth == 0) {
        return {Match::kYes, i + 1};
      }
    }
    return {Match::kNeedMore};
  }
  size_t i = pos;
  while (i < text.size() && IsWord(text[i])) ++i;
  if (i == pos) return {Match::kNo};
  if (i == text.size()) return {Match::kNeedMore};
  return {Match::kYes, i};
}

// The call object at text[pos] == '{', through its name and up to its arguments (or to its end when the
// arguments come first). Members other than name, arguments/parameters, type and id mean it is not a call.
Header ObjectHeader(std::string_view text, size_t pos, Header h) {
  bool have_name = false;
  auto more = [&] {
    h.match = Match::kNeedMore;
    return h;
  };
  auto no = [&] {
    h.match = Match::kNo;
    return h;
  };
  size_t i = SkipSpace(text, pos + 1);
  for (;;) {
    if (i >= text.size()) return more();
    if (text[i] == '}') {
      if (!have_name || !h.args_done) return no();
      h.match = Match::kYes;
      h.consumed = i + 1;
      return h;
    }
    if (text[i] != '"') return no();
    const Scan key = String(text, i);
    if (key.match != Match::kYes) return key.match == Match::kNo ? no() : more();
    std::string key_text;
    if (!DecodeString(text.substr(i, key.end - i), &key_text)) return no();
    i = SkipSpace(text, key.end);
    if (i >= text.size()) return more();
    if (text[i] != ':') return no();
    i = SkipSpace(text, i + 1);
    if (i >= text.size()) return more();
    const bool is_args = (key_text == "arguments" || key_text == "parameters") && !h.args_done;
    // Before the call is certain, only the members calls have: other JSON is let go of at once.
    if (key_text != "name" && key_text != "type" && key_text != "id" && !is_args) return no();
    if (key_text == "name" && !have_name) {
      if (text[i] != '"') return no();
      const Scan v = String(text, i);
      if (v.match != Match::kYes) return v.match == Match::kNo ? no() : more();
      if (!DecodeString(text.substr(i, v.end - i), &h.name) || h.name.empty()) return no();
      have_name = true;
      i = v.end;
    } else if (is_args && have_name) {
      if (text[i] != '{') return no();
      h.match = Match::kYes;
      h.consumed = i;
      return h;
    } else {
      const Scan v = Value(text, i);
      if (v.match != Match::kYes) return v.match == Match::kNo ? no() : more();
      if (is_args) {
        if (text[i] != '{') return no();
        ArgsCompactor compactor;
        for (size_t j = i; j < v.end; ++j) compactor.Feed(text[j], &h.args);
        h.args_done = true;
      }
      i = v.end;
    }
    i = SkipSpace(text, i);
    if (i >= text.size()) return more();
    if (text[i] == ',') {
      i = SkipSpace(text, i + 1);
    } else if (text[i] != '}') {
      return no();
    }
  }
}

// [TOOL_CALLS]name[ARGS]{ with `pos` just after the trigger and its whitespace.
Header NameArgsHeader(std::string_view text, size_t pos, Header h) {
  size_t i = pos;
  while (i < text.size() && (IsWord(text[i]) && text[i] != '+')) ++i;
  h.match = Match::kNeedMore;
  if (i == text.size()) return h;
  h.name = std::string(text.substr(pos, i - pos));
  h.match = Match::kNo;
  if (h.name.empty()) return h;
  i = SkipSpace(text, i);
  const Match args = Literal(text, i, kMistralArgs);
  if (args != Match::kYes) {
    h.match = args;
    return h;
  }
  i = SkipSpace(text, i + kMistralArgs.size());
  if (i >= text.size()) {
    h.match = Match::kNeedMore;
  } else if (text[i] == '{') {
    h.match = Match::kYes;
    h.consumed = i;
    h.form = Form::kNameArgs;
  }
  return h;
}

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         c == '.' || c == ':';
}

// An XML-like call's name after <tool_call> and whitespace (at `pos`): kQwen3Coder's <function=f>, or
// kGlm45's f when <arg_key> or </tool_call> follows it (after whitespace), which tells a name from text.
Header XmlHeader(ToolFormat format, std::string_view text, size_t pos, Header h) {
  h.form = Form::kXml;
  auto decide = [&h](Match m) {
    h.match = m;
    return h;
  };
  if (format == ToolFormat::kQwen3Coder) {
    constexpr std::string_view kOpen = "<function=";
    const Match open = Literal(text, pos, kOpen);
    if (open != Match::kYes) return decide(open);
    size_t i = pos + kOpen.size();
    while (i < text.size() && text[i] != '>') {
      if (IsSpace(text[i]) || text[i] == '<') return decide(Match::kNo);
      ++i;
    }
    if (i == text.size()) return decide(Match::kNeedMore);
    if (i == pos + kOpen.size()) return decide(Match::kNo);
    h.name = std::string(text.substr(pos + kOpen.size(), i - pos - kOpen.size()));
    h.consumed = i + 1;
    return decide(Match::kYes);
  }
  size_t i = pos;
  while (i < text.size() && IsNameChar(text[i])) ++i;
  if (i == text.size()) return decide(Match::kNeedMore);
  if (i == pos) return decide(Match::kNo);
  const size_t j = SkipSpace(text, i);
  const Match key = Literal(text, j, "<arg_key>"), end = Literal(text, j, kHermesClose);
  if (key == Match::kYes || end == Match::kYes) {
    h.name = std::string(text.substr(pos, i - pos));
    h.consumed = i;
    return decide(Match::kYes);
  }
  return decide(key == Match::kNeedMore || end == Match::kNeedMore ? Match::kNeedMore : Match::kNo);
}

}  // namespace

std::vector<std::string_view> TriggerTexts(ToolFormat format) {
  switch (format) {
    case ToolFormat::kHermes:
    case ToolFormat::kGeneric:
    case ToolFormat::kQwen3Coder:
    case ToolFormat::kGlm45:
      return {kHermesOpen};
    case ToolFormat::kLlama3:
      return {kPythonTag};
    case ToolFormat::kMistral:
      return {kMistralOpen};
    case ToolFormat::kGranite:
      return {kGraniteOpen};
  }
  return {};
}

Header ParseHeader(ToolFormat format, Entry entry, std::string_view text) {
  Header h;
  size_t i = 0;
  if (entry == Entry::kListItem) {  // `,` then the next object
    h.consumed = 1;
    h.form = Form::kListObject;
    i = SkipSpace(text, 1);
  } else if (entry == Entry::kBareObject) {
    h.consumed = 1;
  } else {
    const std::string_view trigger = TriggerTexts(format).at(0);
    h.consumed = trigger.size();
    i = SkipSpace(text, trigger.size());
    // A model of an XML-like format that writes kHermes's JSON in its block is understood too.
    if (IsXmlFormat(format) && (i >= text.size() || text[i] != '{')) return XmlHeader(format, text, i, h);
    if (format == ToolFormat::kMistral || format == ToolFormat::kGranite) {
      if (i >= text.size()) return h;
      if (text[i] == '[') {
        h.form = Form::kListObject;
        i = SkipSpace(text, i + 1);
      } else if (text[i] != '{') {
        if (format == ToolFormat::kMistral) return NameArgsHeader(text, i, h);
        h.match = Match::kNo;
        return h;
      }
    }
  }
  if (i >= text.size()) return h;
  if (text[i] != '{') {
    h.match = Match::kNo;
    return h;
  }
  const size_t give_up = h.consumed;
  h = ObjectHeader(text, i, h);
  if (h.match == Match::kNo) h.consumed = give_up;
  return h;
}

Tail ParseTail(ToolFormat format, Form form, bool object_closed, std::string_view text, bool final) {
  Tail t;
  t.match = Match::kYes;
  if (form == Form::kNameArgs) return t;
  if (form == Form::kXml) {  // after </function>: the </tool_call>
    const size_t i = SkipSpace(text, 0);
    const Match m = i < text.size() ? Literal(text, i, kHermesClose) : Match::kNeedMore;
    t.match = (m == Match::kNeedMore && !final) ? Match::kNeedMore : Match::kYes;
    t.consumed = m == Match::kYes ? i + kHermesClose.size() : 0;
    return t;
  }
  auto decide = [&](Match m, size_t done) {  // stop at `done` unless the text may still grow
    t.match = (m == Match::kNeedMore && !final) ? Match::kNeedMore : Match::kYes;
    t.consumed = done;
    return t;
  };
  size_t i = 0;
  // The rest of the call object: other members, then `}`.
  while (!object_closed) {
    i = SkipSpace(text, i);
    if (i >= text.size()) return decide(Match::kNeedMore, 0);
    if (text[i] == '}') {
      ++i;
      break;
    }
    if (text[i] != ',') return decide(Match::kNo, 0);
    i = SkipSpace(text, i + 1);
    if (i >= text.size()) return decide(Match::kNeedMore, 0);
    if (text[i] != '"') return decide(Match::kNo, 0);
    const Scan key = String(text, i);
    if (key.match != Match::kYes) return decide(key.match, 0);
    i = SkipSpace(text, key.end);
    if (i >= text.size()) return decide(Match::kNeedMore, 0);
    if (text[i] != ':') return decide(Match::kNo, 0);
    const Scan v = Value(text, SkipSpace(text, i + 1));
    if (v.match != Match::kYes) return decide(v.match, 0);
    i = v.end;
  }
  // The closing after the object.
  const size_t closed = i;
  i = SkipSpace(text, i);
  if (i >= text.size()) return decide(Match::kNeedMore, closed);
  if (form == Form::kListObject) {
    if (text[i] == ']') return decide(Match::kYes, i + 1);
    if (text[i] == ',') {
      t.next_list_item = true;
      return decide(Match::kYes, i);
    }
    return decide(Match::kNo, closed);
  }
  if (format == ToolFormat::kHermes || format == ToolFormat::kGeneric || IsXmlFormat(format)) {
    const Match m = Literal(text, i, kHermesClose);
    return decide(m, m == Match::kYes ? i + kHermesClose.size() : closed);
  }
  if (format == ToolFormat::kLlama3) return decide(Match::kYes, text[i] == ';' ? i + 1 : closed);
  return decide(Match::kYes, closed);
}

bool ArgsCompactor::Feed(char c, std::string* out) {
  if (in_string_) {
    out->push_back(c);
    if (escape_) {
      escape_ = false;
    } else if (c == '\\') {
      escape_ = true;
    } else if (c == '"') {
      in_string_ = false;
    }
    return false;
  }
  if (IsSpace(c)) {
    if (last_word_) pending_ws_.push_back(c);
    return false;
  }
  const bool word = IsWord(c);
  if (word) out->append(pending_ws_);
  pending_ws_.clear();
  out->push_back(c);
  last_word_ = word;
  if (c == '"') {
    in_string_ = true;
  } else if (c == '{' || c == '[') {
    ++depth_;
  } else if (c == '}' || c == ']') {
    return --depth_ <= 0;
  }
  return false;
}

}  // namespace llamay::toolcall::internal
