// Tests, methods and global functions (see builtins.h for the lists).
#include <algorithm>
#include <ctime>

#include "template/builtins.h"
#include "template/chat_template.h"
#include "template/str_ops.h"

namespace llamay::chat::internal {
namespace {

bool AllOf(const std::string& s, bool (*pred)(char)) {
  return !s.empty() && std::all_of(s.begin(), s.end(), pred);
}
bool IsAsciiDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAsciiAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsAsciiAlnum(char c) { return IsAsciiDigit(c) || IsAsciiAlpha(c); }
bool IsAsciiSpace(char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

// str.isupper()/islower(): at least one cased character and none of the other case.
bool HasCase(const std::string& s, bool upper) {
  bool cased = false;
  for (size_t i = 0; i < s.size();) {
    const uint32_t cp = DecodeUtf8(s, &i);
    if (upper ? IsLowerCp(cp) : IsUpperCp(cp)) return false;
    cased = cased || (upper ? IsUpperCp(cp) : IsLowerCp(cp));
  }
  return cased;
}

Status MissingArg(std::string_view callee) {
  return InvalidArgumentError(std::string(callee) + "() is missing a required argument");
}

std::optional<std::string> OptionalString(const Value* v) {
  if (v == nullptr || v->is_none() || v->is_undefined()) return std::nullopt;
  return ToStr(*v);
}

int64_t OptionalInt(const Value* v, int64_t dflt) {
  return (v != nullptr && (v->is_int() || v->is_bool())) ? v->AsInt() : dflt;
}

// Code point index of byte offset `at` in s.
int64_t CodePointIndex(const std::string& s, size_t at) {
  return static_cast<int64_t>(Utf8Length(std::string_view(s).substr(0, at)));
}

Result<Value> StringMethod(const std::string& s, std::string_view name, const CallArgs& args,
                           const RenderLimits& limits) {
  const Value* a0 = args.Get(0, "");
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    return Value::String(Strip(s, OptionalString(args.Get(0, "chars")), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    LLAMAY_ASSIGN_OR_RETURN(List parts, Split(s, OptionalString(args.Get(0, "sep")),
                                              OptionalInt(args.Get(1, "maxsplit"), -1), name == "rsplit"));
    return Value::MakeList(std::move(parts));
  }
  if (name == "splitlines") {
    List lines;
    for (size_t pos = 0; pos < s.size();) {
      size_t end = s.find_first_of("\r\n", pos);
      if (end == std::string::npos) end = s.size();
      lines.push_back(Value::String(s.substr(pos, end - pos)));
      pos = end + ((end + 1 < s.size() && s[end] == '\r' && s[end + 1] == '\n') ? 2 : 1);
    }
    return Value::MakeList(std::move(lines));
  }
  if (name == "startswith" || name == "endswith") {
    if (a0 == nullptr) return MissingArg(name);
    List candidates = a0->is_list() ? a0->AsList() : List{*a0};
    for (const Value& c : candidates) {
      if (!c.is_string()) return InvalidArgumentError(std::string(name) + "() expects str or a tuple of str");
      const std::string& p = c.AsString();
      bool hit =
          p.size() <= s.size() && (name == "startswith" ? s.compare(0, p.size(), p) == 0
                                                        : s.compare(s.size() - p.size(), p.size(), p) == 0);
      if (hit) return Value::Bool(true);
    }
    return Value::Bool(false);
  }
  if (name == "upper") return Value::String(PyUpper(s));
  if (name == "lower") return Value::String(PyLower(s));
  if (name == "title") return Value::String(PyTitle(s));
  if (name == "capitalize") return Value::String(PyCapitalize(s));
  if (name == "replace") {
    const Value* to = args.Get(1, "");
    if (a0 == nullptr || to == nullptr) return MissingArg(name);
    std::string out = Replace(s, ToStr(*a0), ToStr(*to), OptionalInt(args.Get(2, "count"), -1));
    if (out.size() > limits.max_output_bytes)
      return ResourceExhaustedError("replace exceeds the output limit");
    return Value::String(std::move(out));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "count") {
    if (a0 == nullptr || !a0->is_string()) return MissingArg(name);
    const std::string& sub = a0->AsString();
    if (name == "count") {
      if (sub.empty()) return Value::Int(static_cast<int64_t>(Utf8Length(s)) + 1);
      int64_t n = 0;
      for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
      return Value::Int(n);
    }
    size_t at = name == "rfind" ? s.rfind(sub) : s.find(sub);
    if (at == std::string::npos) {
      if (name == "index") return InvalidArgumentError("substring not found");
      return Value::Int(-1);
    }
    return Value::Int(CodePointIndex(s, at));
  }
  if (name == "join") {
    if (a0 == nullptr) return MissingArg(name);
    LLAMAY_ASSIGN_OR_RETURN(List items, Iterate(*a0));
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) return InvalidArgumentError("join() expects strings");
      if (i > 0) out += s;
      out += items[i].AsString();
      if (out.size() > limits.max_output_bytes)
        return ResourceExhaustedError("join exceeds the output limit");
    }
    return Value::String(std::move(out));
  }
  if (name == "format") {
    LLAMAY_ASSIGN_OR_RETURN(Value out, StrFormat(s, args));
    if (out.AsString().size() > limits.max_output_bytes)
      return ResourceExhaustedError("format exceeds the output limit");
    return out;
  }
  if (name == "isdigit") return Value::Bool(AllOf(s, IsAsciiDigit));
  if (name == "isalpha") return Value::Bool(AllOf(s, IsAsciiAlpha));
  if (name == "isalnum") return Value::Bool(AllOf(s, IsAsciiAlnum));
  if (name == "isspace") return Value::Bool(AllOf(s, IsAsciiSpace));
  if (name == "isupper") return Value::Bool(HasCase(s, true));
  if (name == "islower") return Value::Bool(HasCase(s, false));
  return InvalidArgumentError("'str' object has no method '" + std::string(name) + "'");
}

Result<Value> DictMethod(const Value& obj, std::string_view name, const CallArgs& args) {
  const DictData& d = obj.AsDict();
  if (d.is_loop && name == "cycle") {
    if (args.positional.empty()) return InvalidArgumentError("no items for cycling given");
    const Value* index0 = d.Find("index0");
    int64_t i = index0 != nullptr ? index0->AsInt() : 0;
    return args.positional[static_cast<size_t>(i) % args.positional.size()];
  }
  if (obj.is_dict() && (name == "items" || name == "keys" || name == "values")) {
    List out;
    for (const auto& [k, v] : d.items) {
      if (name == "items") out.push_back(Value::MakeList({Value::String(k), v}, true));
      if (name == "keys") out.push_back(Value::String(k));
      if (name == "values") out.push_back(v);
    }
    return Value::MakeList(std::move(out));
  }
  if (obj.is_dict() && name == "get") {
    const Value* key = args.Get(0, "key");
    if (key == nullptr) return MissingArg(name);
    const Value* dflt = args.Get(1, "default");
    const Value* found = key->is_string() ? d.Find(key->AsString()) : nullptr;
    if (found != nullptr) return *found;
    return dflt != nullptr ? *dflt : Value::None();
  }
  return InvalidArgumentError(StrCat({"'", TypeName(obj), "' object has no method '", name, "'"}));
}

Result<Value> Range(const CallArgs& args, const RenderLimits& limits) {
  for (const Value& v : args.positional) {
    if (!v.is_int() && !v.is_bool()) return InvalidArgumentError("range() expects integers");
  }
  if (args.positional.empty() || args.positional.size() > 3 || !args.named.empty()) {
    return InvalidArgumentError("range() expects 1 to 3 integer arguments");
  }
  int64_t start = 0, stop, step = 1;
  if (args.positional.size() == 1) {
    stop = args.positional[0].AsInt();
  } else {
    start = args.positional[0].AsInt();
    stop = args.positional[1].AsInt();
    if (args.positional.size() == 3) step = args.positional[2].AsInt();
  }
  if (step == 0) return InvalidArgumentError("range() arg 3 must not be zero");
  // The item count, computed in 128 bits so that no bound overflows.
  const __int128 span = step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
  const __int128 stride = step > 0 ? static_cast<__int128>(step) : -static_cast<__int128>(step);
  const __int128 count = span <= 0 ? 0 : (span + stride - 1) / stride;
  if (count > static_cast<__int128>(limits.max_items))
    return ResourceExhaustedError("range() exceeds the item limit");
  List out;
  out.reserve(static_cast<size_t>(count));
  for (__int128 k = 0; k < count; ++k) out.push_back(Value::Int(static_cast<int64_t>(start + k * step)));
  return Value::MakeList(std::move(out));
}

Result<Value> MakeMapping(std::string_view callee, const CallArgs& args, bool ns) {
  std::vector<std::pair<std::string, Value>> items;
  auto set = [&](const std::string& k, const Value& v) {
    for (auto& item : items) {
      if (item.first == k) {
        item.second = v;
        return;
      }
    }
    items.emplace_back(k, v);
  };
  if (args.positional.size() > 1)
    return InvalidArgumentError(std::string(callee) + "() takes at most 1 positional argument");
  if (!args.positional.empty()) {
    if (!args.positional[0].is_dict())
      return InvalidArgumentError(std::string(callee) + "() expects a mapping");
    for (const auto& [k, v] : args.positional[0].AsDict().items) set(k, v);
  }
  for (const auto& [k, v] : args.named) set(k, v);
  return ns ? Value::MakeNamespace(std::move(items)) : Value::MakeDict(std::move(items));
}

Result<Value> StrftimeNow(const CallArgs& args) {
  const Value* fmt = args.Get(0, "format");
  if (fmt == nullptr || !fmt->is_string())
    return InvalidArgumentError("strftime_now() expects a format string");
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[256];
  size_t n = std::strftime(buf, sizeof(buf), fmt->AsString().c_str(), &tm);
  return Value::String(std::string(buf, n));
}

constexpr std::string_view kTests[] = {
    "boolean",  "callable", "defined",  "divisibleby", "eq",   "equalto", "==",          "escaped",
    "even",     "false",    "float",    "ge",          ">=",   "gt",      "greaterthan", ">",
    "in",       "integer",  "iterable", "le",          "<=",   "lower",   "lt",          "lessthan",
    "<",        "mapping",  "ne",       "!=",          "none", "number",  "odd",         "sameas",
    "sequence", "string",   "true",     "undefined",   "upper"};

constexpr std::string_view kGlobals[] = {"range", "namespace", "dict", "raise_exception", "strftime_now"};

}  // namespace

bool IsKnownTest(std::string_view name) {
  return std::find(std::begin(kTests), std::end(kTests), name) != std::end(kTests);
}

bool IsGlobalFunction(std::string_view name) {
  return std::find(std::begin(kGlobals), std::end(kGlobals), name) != std::end(kGlobals);
}

Result<bool> ApplyTest(std::string_view name, const Value& v, const CallArgs& args) {
  const Value* arg = args.Get(0, "");
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.AsBool();
  if (name == "false") return v.is_bool() && !v.AsBool();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable" || name == "sequence") {
    return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
  }
  if (name == "callable") return v.is_callable();
  if (name == "escaped") return false;
  if (name == "lower" || name == "upper") return v.is_string() && HasCase(v.AsString(), name == "upper");
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (!v.is_int() && !v.is_bool())
      return InvalidArgumentError("test '" + std::string(name) + "' expects an int");
    int64_t i = v.AsInt();
    if (name == "odd") return i % 2 != 0;
    if (name == "even") return i % 2 == 0;
    if (arg == nullptr || !(arg->is_int() || arg->is_bool()) || arg->AsInt() == 0) {
      return InvalidArgumentError("divisibleby expects a non-zero int");
    }
    return i % arg->AsInt() == 0;
  }
  if (arg == nullptr) return InvalidArgumentError("test '" + std::string(name) + "' expects an argument");
  if (name == "sameas") {
    if (v.kind() != arg->kind()) return false;
    if (v.is_none() || v.is_undefined()) return true;
    if (v.is_bool()) return v.AsBool() == arg->AsBool();
    if (v.is_namespace()) return &v.AsDict() == &arg->AsDict();
    return false;
  }
  if (name == "in") return Contains(*arg, v);
  if (name == "eq" || name == "equalto" || name == "==") return Equals(v, *arg);
  if (name == "ne" || name == "!=") return !Equals(v, *arg);
  LLAMAY_ASSIGN_OR_RETURN(int c, Compare(v, *arg));
  if (name == "lt" || name == "lessthan" || name == "<") return c < 0;
  if (name == "le" || name == "<=") return c <= 0;
  if (name == "gt" || name == "greaterthan" || name == ">") return c > 0;
  if (name == "ge" || name == ">=") return c >= 0;
  return InvalidArgumentError("no test named '" + std::string(name) + "'");
}

Result<Value> CallMethod(const Value& obj, std::string_view name, const CallArgs& args,
                         const RenderLimits& limits) {
  if (obj.is_string()) return StringMethod(obj.AsString(), name, args, limits);
  if (obj.is_dict() || obj.is_namespace()) return DictMethod(obj, name, args);
  if (obj.is_list() && (name == "index" || name == "count")) {
    const Value* x = args.Get(0, "");
    if (x == nullptr) return MissingArg(name);
    const List& l = obj.AsList();
    int64_t n = 0;
    for (size_t i = 0; i < l.size(); ++i) {
      if (!Equals(l[i], *x)) continue;
      if (name == "index") return Value::Int(static_cast<int64_t>(i));
      ++n;
    }
    if (name == "index") return InvalidArgumentError("value is not in list");
    return Value::Int(n);
  }
  return InvalidArgumentError(StrCat({"'", TypeName(obj), "' object has no method '", name, "'"}));
}

Result<Value> CallGlobal(std::string_view name, const CallArgs& args, const RenderLimits& limits) {
  if (name == "range") return Range(args, limits);
  if (name == "namespace") return MakeMapping(name, args, /*ns=*/true);
  if (name == "dict") return MakeMapping(name, args, /*ns=*/false);
  if (name == "strftime_now") return StrftimeNow(args);
  if (name == "raise_exception") {
    const Value* msg = args.Get(0, "message");
    return Status(StatusCode::kInvalidArgument, msg != nullptr ? ToStr(*msg) : "raise_exception() called",
                  static_cast<int>(TemplateErrorDetail::kRaised));
  }
  return InvalidArgumentError(StrCat({"'", name, "' is not callable"}));
}

}  // namespace llamay::chat::internal
