#include "template/value.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace llamay::chat::internal {

Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::Bool(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.b_ = b;
  return v;
}

Value Value::Int(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.i_ = i;
  return v;
}

Value Value::Float(double d) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.d_ = d;
  return v;
}

Value Value::String(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.s_ = std::make_shared<const std::string>(std::move(s));
  return v;
}

Value Value::MakeList(List items, bool tuple) {
  Value v;
  v.kind_ = Kind::kList;
  v.tuple_ = tuple;
  v.list_ = std::make_shared<const List>(std::move(items));
  return v;
}

Value Value::MakeDict(std::vector<std::pair<std::string, Value>> items, bool is_loop) {
  Value v;
  v.kind_ = Kind::kDict;
  v.dict_ = std::make_shared<DictData>();
  v.dict_->items = std::move(items);
  v.dict_->is_loop = is_loop;
  return v;
}

Value Value::MakeNamespace(std::vector<std::pair<std::string, Value>> items) {
  Value v = MakeDict(std::move(items));
  v.kind_ = Kind::kNamespace;
  return v;
}

Value Value::Builtin(std::string name) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.s_ = std::make_shared<const std::string>(std::move(name));
  return v;
}

Value Value::Macro(const MacroDef* macro) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.macro_ = macro;
  return v;
}

bool Value::AsBool() const {
  LLAMAY_CHECK(kind_ == Kind::kBool);
  return b_;
}

int64_t Value::AsInt() const {
  LLAMAY_CHECK(kind_ == Kind::kInt || kind_ == Kind::kBool);
  return kind_ == Kind::kBool ? static_cast<int64_t>(b_) : i_;
}

double Value::AsDouble() const {
  LLAMAY_CHECK(is_number());
  if (kind_ == Kind::kFloat) return d_;
  return static_cast<double>(AsInt());
}

const std::string& Value::AsString() const {
  LLAMAY_CHECK(kind_ == Kind::kString);
  return *s_;
}

const List& Value::AsList() const {
  LLAMAY_CHECK(kind_ == Kind::kList);
  return *list_;
}

const DictData& Value::AsDict() const {
  LLAMAY_CHECK(kind_ == Kind::kDict || kind_ == Kind::kNamespace);
  return *dict_;
}

DictData& Value::MutableNamespace() const {
  LLAMAY_CHECK(kind_ == Kind::kNamespace);
  return *dict_;
}

const std::string& Value::builtin_name() const {
  LLAMAY_CHECK(kind_ == Kind::kCallable && macro_ == nullptr);
  return *s_;
}

const MacroDef* Value::macro() const {
  LLAMAY_CHECK(kind_ == Kind::kCallable);
  return macro_;
}

const Value* DictData::Find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void DictData::Set(std::string_view key, Value value) {
  for (auto& [k, v] : items) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::string(key), std::move(value));
}

bool Truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return false;
    case Value::Kind::kBool:
      return v.AsBool();
    case Value::Kind::kInt:
      return v.AsInt() != 0;
    case Value::Kind::kFloat:
      return v.AsDouble() != 0.0;
    case Value::Kind::kString:
      return !v.AsString().empty();
    case Value::Kind::kList:
      return !v.AsList().empty();
    case Value::Kind::kDict:
      return !v.AsDict().items.empty();
    case Value::Kind::kNamespace:
    case Value::Kind::kCallable:
      return true;
  }
  return false;
}

std::string_view TypeName(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "undefined";
    case Value::Kind::kNone:
      return "NoneType";
    case Value::Kind::kBool:
      return "bool";
    case Value::Kind::kInt:
      return "int";
    case Value::Kind::kFloat:
      return "float";
    case Value::Kind::kString:
      return "str";
    case Value::Kind::kList:
      return v.is_tuple() ? "tuple" : "list";
    case Value::Kind::kDict:
      return "dict";
    case Value::Kind::kNamespace:
      return "Namespace";
    case Value::Kind::kCallable:
      return v.macro() != nullptr ? "Macro" : "function";
  }
  return "?";
}

std::string FormatFloat(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(res.ptr - buf));
  std::string out;
  if (!sci.empty() && sci[0] == '-') {
    out.push_back('-');
    sci.remove_prefix(1);
  }
  size_t e_pos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_pos)) {
    if (c != '.') digits.push_back(c);
  }
  int exp = std::atoi(std::string(sci.substr(e_pos + 1)).c_str());
  // Python's repr switches to exponent notation outside 1e-4 <= |d| < 1e16.
  if (exp < -4 || exp >= 16) {
    out.push_back(digits[0]);
    if (digits.size() > 1) {
      out.push_back('.');
      out.append(digits, 1);
    }
    char ebuf[16];
    std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    return out + ebuf;
  }
  if (exp < 0) return StrCat({out, "0.", std::string(static_cast<size_t>(-exp - 1), '0'), digits});
  size_t int_len = static_cast<size_t>(exp) + 1;
  if (digits.size() <= int_len) return StrCat({out, digits, std::string(int_len - digits.size(), '0'), ".0"});
  return StrCat(
      {out, std::string_view(digits).substr(0, int_len), ".", std::string_view(digits).substr(int_len)});
}

namespace {

std::string ReprString(const std::string& s) {
  char quote = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == static_cast<unsigned char>(quote)) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
  return out;
}

std::string ReprItems(const DictData& d) {
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : d.items) {
    if (!first) out += ", ";
    first = false;
    out += StrCat({ReprString(k), ": ", Repr(v)});
  }
  return out + "}";
}

}  // namespace

std::string Repr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kString:
      return ReprString(v.AsString());
    case Value::Kind::kList: {
      const List& l = v.AsList();
      std::string out = v.is_tuple() ? "(" : "[";
      for (size_t i = 0; i < l.size(); ++i) {
        if (i > 0) out += ", ";
        out += Repr(l[i]);
      }
      if (v.is_tuple() && l.size() == 1) out += ",";
      return out + (v.is_tuple() ? ")" : "]");
    }
    case Value::Kind::kDict:
      return ReprItems(v.AsDict());
    case Value::Kind::kNamespace:
      return StrCat({"<Namespace ", ReprItems(v.AsDict()), ">"});
    case Value::Kind::kUndefined:
      return "Undefined";
    default:
      return ToStr(v);
  }
}

std::string ToStr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "";
    case Value::Kind::kNone:
      return "None";
    case Value::Kind::kBool:
      return v.AsBool() ? "True" : "False";
    case Value::Kind::kInt:
      return std::to_string(v.AsInt());
    case Value::Kind::kFloat:
      return FormatFloat(v.AsDouble());
    case Value::Kind::kString:
      return v.AsString();
    case Value::Kind::kCallable:
      return v.macro() != nullptr ? "<Macro>" : StrCat({"<built-in function ", v.builtin_name(), ">"});
    default:
      return Repr(v);
  }
}

bool Equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.AsDouble() == b.AsDouble();
    return a.AsInt() == b.AsInt();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.AsString() == b.AsString();
    case Value::Kind::kList: {
      if (a.is_tuple() != b.is_tuple()) return false;
      const List& x = a.AsList();
      const List& y = b.AsList();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!Equals(x[i], y[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      const DictData& x = a.AsDict();
      const DictData& y = b.AsDict();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* other = y.Find(k);
        if (other == nullptr || !Equals(v, *other)) return false;
      }
      return true;
    }
    case Value::Kind::kNamespace:
      return &a.AsDict() == &b.AsDict();
    case Value::Kind::kCallable:
      return a.macro() == b.macro() && (a.macro() != nullptr || a.builtin_name() == b.builtin_name());
    default:
      return false;
  }
}

Result<int> Compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      double x = a.AsDouble(), y = b.AsDouble();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    int64_t x = a.AsInt(), y = b.AsInt();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    int c = a.AsString().compare(b.AsString());  // byte order is code point order in UTF-8
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const List& x = a.AsList();
    const List& y = b.AsList();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (Equals(x[i], y[i])) continue;
      return Compare(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  return InvalidArgumentError("comparison not supported between instances of '" + std::string(TypeName(a)) +
                              "' and '" + std::string(TypeName(b)) + "'");
}

std::string StrCat(std::initializer_list<std::string_view> parts) {
  size_t n = 0;
  for (std::string_view p : parts) n += p.size();
  std::string out;
  out.reserve(n);
  for (std::string_view p : parts) out.append(p);
  return out;
}

namespace {

// Length of the UTF-8 sequence starting with lead byte `c`, or 1 for an invalid lead byte.
size_t SeqLen(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return 2;
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return 4;
  return 1;
}

}  // namespace

size_t Utf8Length(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++n) {
    size_t len = SeqLen(static_cast<unsigned char>(s[i]));
    i += (i + len <= s.size()) ? len : 1;
  }
  return n;
}

uint32_t DecodeUtf8(std::string_view s, size_t* i) {
  unsigned char c = static_cast<unsigned char>(s[*i]);
  size_t len = SeqLen(c);
  if (*i + len > s.size()) len = 1;
  uint32_t cp = len == 1 ? c : (len == 2 ? c & 0x1F : (len == 3 ? c & 0x0F : c & 0x07));
  for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[*i + k]) & 0x3F);
  *i += len;
  return cp;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::vector<size_t> Utf8Offsets(std::string_view s) {
  std::vector<size_t> offsets;
  offsets.reserve(s.size() + 1);
  for (size_t i = 0; i < s.size();) {
    offsets.push_back(i);
    size_t len = SeqLen(static_cast<unsigned char>(s[i]));
    i += (i + len <= s.size()) ? len : 1;
  }
  offsets.push_back(s.size());
  return offsets;
}

}  // namespace llamay::chat::internal
