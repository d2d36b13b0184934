// Filters (see builtins.h for the list), each following its Jinja2 3.1 definition.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>

#include "template/builtins.h"
#include "template/json_value.h"
#include "template/str_ops.h"

namespace llamay::chat::internal {
namespace {

using FilterFn = Result<Value> (*)(const Value&, const CallArgs&, const RenderLimits&);

Status FilterError(std::string_view filter, std::string_view message) {
  return InvalidArgumentError("filter '" + std::string(filter) + "': " + std::string(message));
}

// Jinja's make_attrgetter: "a.b.0" looks up a, then b, then index 0.
Value AttrPath(const Value& item, const Value& path) {
  if (path.is_int()) return GetItem(item, path);
  if (!path.is_string()) return Value();
  Value v = item;
  std::string_view rest = path.AsString();
  while (true) {
    size_t dot = rest.find('.');
    std::string part(rest.substr(0, dot));
    bool numeric =
        !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (v.is_undefined()) return v;
    v = numeric ? GetItem(v, Value::Int(std::atoll(part.c_str()))) : GetItem(v, Value::String(part));
    if (dot == std::string_view::npos) return v;
    rest.remove_prefix(dot + 1);
  }
}

Value IgnoreCase(const Value& v) { return v.is_string() ? Value::String(PyLower(v.AsString())) : v; }

bool ArgTruthy(const CallArgs& args, size_t index, std::string_view name, bool dflt) {
  const Value* v = args.Get(index, name);
  return v == nullptr ? dflt : Truthy(*v);
}

// The key a sort/unique/min/max uses for `item`.
Value SortKey(const Value& item, const CallArgs& args, size_t attr_index, size_t case_index) {
  const Value* attr = args.Get(attr_index, "attribute");
  Value key = (attr != nullptr && !attr->is_none()) ? AttrPath(item, *attr) : item;
  return ArgTruthy(args, case_index, "case_sensitive", false) ? key : IgnoreCase(key);
}

Result<Value> Default(const Value& v, const CallArgs& args, const RenderLimits&) {
  const Value* dflt = args.Get(0, "default_value");
  if (v.is_undefined() || (ArgTruthy(args, 1, "boolean", false) && !Truthy(v))) {
    return dflt != nullptr ? *dflt : Value::String("");
  }
  return v;
}

Result<Value> First(const Value& v, const CallArgs&, const RenderLimits&) {
  LLAMAY_ASSIGN_OR_RETURN(List items, Iterate(v));
  return items.empty() ? Value() : items.front();
}

Result<Value> Last(const Value& v, const CallArgs&, const RenderLimits&) {
  LLAMAY_ASSIGN_OR_RETURN(List items, Iterate(v));
  return items.empty() ? Value() : items.back();
}

Result<Value> Join(const Value& v, const CallArgs& args, const RenderLimits& limits) {
  const Value* sep = args.Get(0, "d");
  const Value* attr = args.Get(1, "attribute");
  LLAMAY_ASSIGN_OR_RETURN(List items, Iterate(v));
  std::string out, d = sep != nullptr ? ToStr(*sep) : "";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += d;
    out += ToStr(attr != nullptr && !attr->is_none() ? AttrPath(items[i], *attr) : items[i]);
    if (out.size() > limits.max_output_bytes) return ResourceExhaustedError("join exceeds the output limit");
  }
  return Value::String(std::move(out));
}

Result<Value> LengthFilter(const Value& v, const CallArgs&, const RenderLimits&) {
  LLAMAY_ASSIGN_OR_RETURN(int64_t n, Length(v));
  return Value::Int(n);
}

Result<Value> ToList(const Value& v, const CallArgs&, const RenderLimits&) {
  LLAMAY_ASSIGN_OR_RETURN(List items, Iterate(v));
  return Value::MakeList(std::move(items));
}

Result<Value> Trim(const Value& v, const CallArgs& args, const RenderLimits&) {
  const Value* chars = args.Get(0, "chars");
  std::optional<std::string> set;
  if (chars != nullptr && !chars->is_none()) set = ToStr(*chars);
  return Value::String(Strip(ToStr(v), set, true, true));
}

Result<Value> ReplaceFilter(const Value& v, const CallArgs& args, const RenderLimits& limits) {
  const Value* from = args.Get(0, "old");
  const Value* to = args.Get(1, "new");
  const Value* count = args.Get(2, "count");
  if (from == nullptr || to == nullptr) return FilterError("replace", "expects old and new");
  int64_t n = (count == nullptr || count->is_none()) ? -1 : (count->is_int() ? count->AsInt() : -1);
  std::string out = Replace(ToStr(v), ToStr(*from), ToStr(*to), n);
  if (out.size() > limits.max_output_bytes) return ResourceExhaustedError("replace exceeds the output limit");
  return Value::String(std::move(out));
}

Result<Value> Items(const Value& v, const CallArgs&, const RenderLimits&) {
  if (v.is_undefined()) return Value::MakeList({});
  if (!v.is_dict()) return FilterError("items", "can only get item pairs from a mapping");
  List out;
  for (const auto& [k, val] : v.AsDict().items) out.push_back(Value::MakeList({Value::String(k), val}, true));
  return Value::MakeList(std::move(out));
}

Result<Value> ToInt(const Value& v, const CallArgs& args, const RenderLimits&) {
  const Value* dflt = args.Get(0, "default");
  const Value* base_v = args.Get(1, "base");
  int base = base_v != nullptr && base_v->is_int() ? static_cast<int>(base_v->AsInt()) : 10;
  if (v.is_int() || v.is_bool()) return Value::Int(v.AsInt());
  if (v.is_float() && std::isfinite(v.AsDouble()) && std::fabs(v.AsDouble()) < 9.2e18) {
    return Value::Int(static_cast<int64_t>(v.AsDouble()));
  }
  if (v.is_string()) {
    std::string s = Strip(v.AsString(), std::nullopt, true, true);
    s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
    char* end = nullptr;
    errno = 0;
    long long i = s.empty() ? 0 : std::strtoll(s.c_str(), &end, base);
    if (!s.empty() && errno == 0 && end == s.c_str() + s.size()) return Value::Int(i);
    double d = s.empty() ? 0 : std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size() && std::isfinite(d) && std::fabs(d) < 9.2e18) {
      return Value::Int(static_cast<int64_t>(d));
    }
  }
  return dflt != nullptr ? *dflt : Value::Int(0);
}

Result<Value> ToFloat(const Value& v, const CallArgs& args, const RenderLimits&) {
  const Value* dflt = args.Get(0, "default");
  if (v.is_number()) return Value::Float(v.AsDouble());
  if (v.is_string()) {
    std::string s = Strip(v.AsString(), std::nullopt, true, true);
    char* end = nullptr;
    double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size()) return Value::Float(d);
  }
  return dflt != nullptr ? *dflt : Value::Float(0.0);
}

Result<Value> Abs(const Value& v, const CallArgs&, const RenderLimits&) {
  if (v.is_float()) return Value::Float(std::fabs(v.AsDouble()));
  if (v.is_int() || v.is_bool()) return Negate(v, v.AsInt() < 0);
  return FilterError("abs", "bad operand type " + std::string(TypeName(v)));
}

Result<Value> Round(const Value& v, const CallArgs& args, const RenderLimits&) {
  if (!v.is_number()) return FilterError("round", "expects a number");
  const Value* prec_v = args.Get(0, "precision");
  const Value* method_v = args.Get(1, "method");
  int64_t prec = prec_v != nullptr && prec_v->is_int() ? prec_v->AsInt() : 0;
  std::string method = method_v != nullptr ? ToStr(*method_v) : "common";
  double scale = std::pow(10.0, static_cast<double>(prec));
  double x = v.AsDouble() * scale;
  if (method == "common") {
    x = std::nearbyint(x);  // Python's round() rounds half to even
  } else if (method == "ceil") {
    x = std::ceil(x);
  } else if (method == "floor") {
    x = std::floor(x);
  } else {
    return FilterError("round", "method must be common, ceil or floor");
  }
  return Value::Float(x / scale);
}

Result<Value> Reverse(const Value& v, const CallArgs&, const RenderLimits&) {
  if (v.is_string()) return Slice(v, Value(), Value(), Value::Int(-1));
  LLAMAY_ASSIGN_OR_RETURN(List items, Iterate(v));
  std::reverse(items.begin(), items.end());
  return Value::MakeList(std::move(items));
}

Result<Value> Sort(const Value& v, const CallArgs& args, const RenderLimits&) {
  LLAMAY_ASSIGN_OR_RETURN(List items, Iterate(v));
  const bool reverse = ArgTruthy(args, 0, "reverse", false);
  std::vector<std::pair<Value, Value>> keyed;  // (key, item)
  for (Value& item : items) keyed.emplace_back(SortKey(item, args, 2, 1), std::move(item));
  Status error;
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    Result<int> c = reverse ? Compare(b.first, a.first) : Compare(a.first, b.first);
    if (!c.ok()) {
      error = c.status();
      return false;
    }
    return *c < 0;
  });
  LLAMAY_RETURN_IF_ERROR(error);
  List out;
  for (auto& [k, item] : keyed) out.push_back(std::move(item));
  return Value::MakeList(std::move(out));
}

Result<Value> DictSort(const Value& v, const CallArgs& args, const RenderLimits& limits) {
  LLAMAY_ASSIGN_OR_RETURN(Value items, Items(v, {}, limits));
  const Value* by = args.Get(1, "by");
  int64_t pos = (by != nullptr && ToStr(*by) == "value") ? 1 : 0;
  CallArgs sort_args;
  sort_args.named = {{"reverse", Value::Bool(ArgTruthy(args, 2, "reverse", false))},
                     {"case_sensitive", Value::Bool(ArgTruthy(args, 0, "case_sensitive", false))},
                     {"attribute", Value::Int(pos)}};
  return Sort(items, sort_args, limits);
}

Result<Value> Unique(const Value& v, const CallArgs& args, const RenderLimits&) {
  LLAMAY_ASSIGN_OR_RETURN(List items, Iterate(v));
  List out, seen;
  for (Value& item : items) {
    Value key = SortKey(item, args, 1, 0);
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return Equals(s, key); })) continue;
    seen.push_back(std::move(key));
    out.push_back(std::move(item));
  }
  return Value::MakeList(std::move(out));
}

Result<Value> MinMax(const Value& v, const CallArgs& args, bool max) {
  LLAMAY_ASSIGN_OR_RETURN(List items, Iterate(v));
  if (items.empty()) return Value();
  size_t best = 0;
  Value best_key = SortKey(items[0], args, 1, 0);
  for (size_t i = 1; i < items.size(); ++i) {
    Value key = SortKey(items[i], args, 1, 0);
    LLAMAY_ASSIGN_OR_RETURN(int c, Compare(key, best_key));
    if (max ? c > 0 : c < 0) {
      best = i;
      best_key = std::move(key);
    }
  }
  return items[best];
}

Result<Value> Min(const Value& v, const CallArgs& args, const RenderLimits&) {
  return MinMax(v, args, false);
}
Result<Value> Max(const Value& v, const CallArgs& args, const RenderLimits&) { return MinMax(v, args, true); }

Result<Value> Sum(const Value& v, const CallArgs& args, const RenderLimits& limits) {
  LLAMAY_ASSIGN_OR_RETURN(List items, Iterate(v));
  const Value* attr = args.Get(0, "attribute");
  const Value* start = args.Get(1, "start");
  Value total = start != nullptr ? *start : Value::Int(0);
  for (const Value& item : items) {
    LLAMAY_ASSIGN_OR_RETURN(total,
                            Arithmetic("+", total, attr != nullptr ? AttrPath(item, *attr) : item, limits));
  }
  return total;
}

// select / reject / selectattr / rejectattr: `attr` says whether the first argument names an attribute.
Result<Value> SelectImpl(const Value& v, const CallArgs& args, bool attr, bool keep) {
  LLAMAY_ASSIGN_OR_RETURN(List items, Iterate(v));
  size_t first = attr ? 1 : 0;
  std::string test = args.positional.size() > first ? ToStr(args.positional[first]) : "";
  if (!test.empty() && !IsKnownTest(test)) return FilterError("select", "no test named '" + test + "'");
  CallArgs test_args;
  for (size_t i = first + 1; i < args.positional.size(); ++i)
    test_args.positional.push_back(args.positional[i]);
  List out;
  for (Value& item : items) {
    Value subject = attr ? AttrPath(item, args.positional.empty() ? Value() : args.positional[0]) : item;
    bool pass;
    if (test.empty()) {
      pass = Truthy(subject);
    } else {
      LLAMAY_ASSIGN_OR_RETURN(pass, ApplyTest(test, subject, test_args));
    }
    if (pass == keep) out.push_back(std::move(item));
  }
  return Value::MakeList(std::move(out));
}

Result<Value> Map(const Value& v, const CallArgs& args, const RenderLimits& limits) {
  LLAMAY_ASSIGN_OR_RETURN(List items, Iterate(Truthy(v) ? v : Value()));
  const Value* attr = nullptr;
  const Value* dflt = nullptr;
  for (const auto& [k, val] : args.named) {
    if (k == "attribute") attr = &val;
    if (k == "default") dflt = &val;
  }
  List out;
  if (attr != nullptr) {
    for (const Value& item : items) {
      Value got = AttrPath(item, *attr);
      out.push_back(got.is_undefined() && dflt != nullptr ? *dflt : got);
    }
    return Value::MakeList(std::move(out));
  }
  if (args.positional.empty()) return FilterError("map", "expects a filter name or attribute=");
  std::string filter = ToStr(args.positional[0]);
  if (!IsKnownFilter(filter)) return FilterError("map", "no filter named '" + filter + "'");
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.named = args.named;
  for (const Value& item : items) {
    LLAMAY_ASSIGN_OR_RETURN(Value mapped, ApplyFilter(filter, item, rest, limits));
    out.push_back(std::move(mapped));
  }
  return Value::MakeList(std::move(out));
}

Result<Value> ToJsonFilter(const Value& v, const CallArgs& args, const RenderLimits& limits) {
  JsonDumpOptions opt;
  opt.ensure_ascii = ArgTruthy(args, 0, "ensure_ascii", false);
  const Value* indent = args.Get(1, "indent");
  if (indent != nullptr && !indent->is_none()) {
    if (indent->is_string()) {
      opt.indent = indent->AsString();
    } else if (indent->is_int()) {
      opt.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(indent->AsInt(), 0, 64)), ' ');
    } else {
      return FilterError("tojson", "indent must be an int or a string");
    }
  }
  const Value* seps = args.Get(2, "separators");
  if (seps != nullptr && !seps->is_none()) {
    if (!seps->is_list() || seps->AsList().size() != 2)
      return FilterError("tojson", "separators must be a pair");
    opt.item_separator = ToStr(seps->AsList()[0]);
    opt.key_separator = ToStr(seps->AsList()[1]);
  }
  opt.sort_keys = ArgTruthy(args, 3, "sort_keys", false);
  LLAMAY_ASSIGN_OR_RETURN(std::string json, ToJson(v, opt));
  if (json.size() > limits.max_output_bytes) return ResourceExhaustedError("tojson exceeds the output limit");
  return Value::String(std::move(json));
}

Result<Value> Indent(const Value& v, const CallArgs& args, const RenderLimits&) {
  const Value* width = args.Get(0, "width");
  std::string pad =
      width == nullptr ? "    "
      : width->is_string()
          ? width->AsString()
          : std::string(
                static_cast<size_t>(std::clamp<int64_t>(width->is_int() ? width->AsInt() : 4, 0, 256)), ' ');
  const bool first = ArgTruthy(args, 1, "first", false), blank = ArgTruthy(args, 2, "blank", false);
  std::string s = ToStr(v) + "\n";
  std::vector<std::string> lines;
  for (size_t pos = 0; pos < s.size();) {  // splitlines on \n, \r\n, \r
    size_t end = s.find_first_of("\r\n", pos);
    lines.push_back(s.substr(pos, end - pos));
    pos = end + ((s[end] == '\r' && end + 1 < s.size() && s[end + 1] == '\n') ? 2 : 1);
  }
  std::string out = lines.empty() ? "" : lines[0];
  for (size_t i = 1; i < lines.size(); ++i) {
    out.push_back('\n');
    if (blank || !lines[i].empty()) out.append(pad);
    out.append(lines[i]);
  }
  if (first) out.insert(0, pad);
  return Value::String(std::move(out));
}

Result<Value> Escape(const Value& v, const CallArgs&, const RenderLimits&) {
  std::string out;
  for (char c : ToStr(v)) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return Value::String(std::move(out));
}

// Jinja's `title` filter: each word (starting after any of - whitespace ( { [ <) gets its first character
// upper-cased and the rest lower-cased.
Result<Value> TitleFilter(const Value& v, const CallArgs&, const RenderLimits&) {
  const std::string s = ToStr(v);
  std::string out;
  bool word_start = true;
  for (size_t i = 0; i < s.size();) {
    const size_t at = i;
    const uint32_t cp = DecodeUtf8(s, &i);
    const bool sep = cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || IsSpaceCodePoint(cp);
    std::string_view ch(s.data() + at, i - at);
    out += sep ? std::string(ch) : (word_start ? PyUpper(ch) : PyLower(ch));
    word_start = sep;
  }
  return Value::String(std::move(out));
}

Result<Value> Attr(const Value& v, const CallArgs& args, const RenderLimits&) {
  const Value* name = args.Get(0, "name");
  if (name == nullptr || !v.is_namespace()) return Value();  // dicts have no attributes, only items
  return GetAttr(v, ToStr(*name));
}

struct FilterEntry {
  std::string_view name;
  FilterFn fn;
};

const FilterEntry kFilters[] = {
    {"abs", Abs},
    {"attr", Attr},
    {"capitalize",
     [](const Value& v, const CallArgs&, const RenderLimits&) -> Result<Value> {
       return Value::String(PyCapitalize(ToStr(v)));
     }},
    {"count", LengthFilter},
    {"d", Default},
    {"default", Default},
    {"dictsort", DictSort},
    {"e", Escape},
    {"escape", Escape},
    {"first", First},
    {"float", ToFloat},
    {"indent", Indent},
    {"int", ToInt},
    {"items", Items},
    {"join", Join},
    {"last", Last},
    {"length", LengthFilter},
    {"list", ToList},
    {"lower",
     [](const Value& v, const CallArgs&, const RenderLimits&) -> Result<Value> {
       return Value::String(PyLower(ToStr(v)));
     }},
    {"map", Map},
    {"max", Max},
    {"min", Min},
    {"reject",
     [](const Value& v, const CallArgs& a, const RenderLimits&) { return SelectImpl(v, a, false, false); }},
    {"rejectattr",
     [](const Value& v, const CallArgs& a, const RenderLimits&) { return SelectImpl(v, a, true, false); }},
    {"replace", ReplaceFilter},
    {"reverse", Reverse},
    {"round", Round},
    {"safe", [](const Value& v, const CallArgs&, const RenderLimits&) -> Result<Value> { return v; }},
    {"select",
     [](const Value& v, const CallArgs& a, const RenderLimits&) { return SelectImpl(v, a, false, true); }},
    {"selectattr",
     [](const Value& v, const CallArgs& a, const RenderLimits&) { return SelectImpl(v, a, true, true); }},
    {"sort", Sort},
    {"string",
     [](const Value& v, const CallArgs&, const RenderLimits&) -> Result<Value> {
       return Value::String(ToStr(v));
     }},
    {"sum", Sum},
    {"title", TitleFilter},
    {"tojson", ToJsonFilter},
    {"trim", Trim},
    {"unique", Unique},
    {"upper",
     [](const Value& v, const CallArgs&, const RenderLimits&) -> Result<Value> {
       return Value::String(PyUpper(ToStr(v)));
     }},
};

const FilterEntry* FindFilter(std::string_view name) {
  for (const FilterEntry& e : kFilters) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

}  // namespace

bool IsKnownFilter(std::string_view name) { return FindFilter(name) != nullptr; }

Result<Value> ApplyFilter(std::string_view name, const Value& operand, const CallArgs& args,
                          const RenderLimits& limits) {
  const FilterEntry* entry = FindFilter(name);
  if (entry == nullptr) return InvalidArgumentError("no filter named '" + std::string(name) + "'");
  return entry->fn(operand, args, limits);
}

}  // namespace llamay::chat::internal
