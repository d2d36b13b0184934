// The XML-like formats' values typed by schema, and the parser of a call's body (see xml.h).
#include <algorithm>
#include <cmath>
#include <string>

#include "toolcall/scan.h"
#include "toolcall/xml.h"

namespace llamay::toolcall::internal {
namespace {

constexpr int kMaxResolve = 8;  // $ref / allOf hops, and nesting of anyOf etc., followed at most
constexpr std::string_view kEndCall = "</tool_call>", kEndFunction = "</function>";
constexpr std::string_view kKeyClose = "</arg_key>", kValueOpen = "<arg_value>";

std::string_view TrimSpace(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

// The node at a local JSON pointer ("#", "#/$defs/a", ...) in `root`; nullptr when there is none.
const Json* Pointer(const Json& root, const std::string& ref) {
  if (ref.empty() || ref[0] != '#') return nullptr;
  const Json* node = &root;
  size_t i = 1;
  while (i < ref.size()) {
    if (ref[i] != '/') return nullptr;
    const size_t next = std::min(ref.find('/', i + 1), ref.size());
    std::string token;
    for (size_t j = i + 1; j < next; ++j) {
      if (ref[j] == '~' && j + 1 < next && (ref[j + 1] == '0' || ref[j + 1] == '1')) {
        token.push_back(ref[++j] == '0' ? '~' : '/');
      } else {
        token.push_back(ref[j]);
      }
    }
    if (node->is_object()) {
      const auto it = node->find(token);
      if (it == node->end()) return nullptr;
      node = &*it;
    } else if (node->is_array()) {
      if (token.empty() || token.size() > 9 || token.find_first_not_of("0123456789") != std::string::npos) {
        return nullptr;
      }
      const size_t index = std::stoul(token);
      if (index >= node->size()) return nullptr;
      node = &(*node)[index];
    } else {
      return nullptr;
    }
    i = next;
  }
  return node;
}

int TypeNameBits(const Json& name) {
  if (!name.is_string()) return 0;
  const std::string& n = name.get_ref<const std::string&>();
  if (n == "string") return kTypeString;
  if (n == "integer") return kTypeInteger;
  if (n == "number") return kTypeNumber | kTypeInteger;
  if (n == "boolean") return kTypeBoolean;
  if (n == "null") return kTypeNull;
  if (n == "object") return kTypeObject;
  if (n == "array") return kTypeArray;
  return 0;
}

// The type of a JSON value; an integral float counts as an integer too (JSON Schema says 1.0 is one).
int ValueBits(const Json& v) {
  switch (v.type()) {
    case Json::value_t::string:
      return kTypeString;
    case Json::value_t::boolean:
      return kTypeBoolean;
    case Json::value_t::null:
      return kTypeNull;
    case Json::value_t::object:
      return kTypeObject;
    case Json::value_t::array:
      return kTypeArray;
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return kTypeInteger | kTypeNumber;
    case Json::value_t::number_float: {
      const double d = v.get<double>();
      return kTypeNumber | (std::isfinite(d) && std::floor(d) == d ? kTypeInteger : 0);
    }
    default:
      return 0;
  }
}

int Allowed(const Json& root, const Json& schema, int depth) {
  if (depth > kMaxResolve) return 0;
  const Json& s = ResolveSchema(root, schema);
  if (!s.is_object()) return 0;
  int bits = -1;  // -1: nothing said yet
  auto meet = [&bits](int b) {
    if (b != 0) bits = bits < 0 ? b : (bits & b);
  };
  if (s.contains("type")) {
    int b = 0;
    if (s["type"].is_array()) {
      for (const Json& t : s["type"]) b |= TypeNameBits(t);
    } else {
      b = TypeNameBits(s["type"]);
    }
    meet(b);
  }
  if (s.contains("enum") && s["enum"].is_array()) {
    int b = 0;
    for (const Json& v : s["enum"]) b |= ValueBits(v);
    meet(b);
  }
  if (s.contains("const")) meet(ValueBits(s["const"]));
  for (const char* key : {"anyOf", "oneOf"}) {
    if (!s.contains(key) || !s[key].is_array()) continue;
    int b = 0;
    bool any = false;
    for (const Json& member : s[key]) {
      const int m = Allowed(root, member, depth + 1);
      any = any || m == 0;
      b |= m;
    }
    if (!any) meet(b);
  }
  if (s.contains("allOf") && s["allOf"].is_array()) {
    for (const Json& member : s["allOf"]) meet(Allowed(root, member, depth + 1));
  }
  if (bits >= 0) return bits;
  // No type said: what the keywords used are about.
  int b = 0;
  for (const char* key : {"properties", "required", "additionalProperties"})
    b |= s.contains(key) ? kTypeObject : 0;
  for (const char* key : {"items", "prefixItems", "minItems", "maxItems"})
    b |= s.contains(key) ? kTypeArray : 0;
  for (const char* key : {"minLength", "maxLength", "pattern", "format"})
    b |= s.contains(key) ? kTypeString : 0;
  for (const char* key : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
    b |= s.contains(key) ? kTypeNumber | kTypeInteger : 0;
  }
  return b;
}

// Compact JSON text of a value that parsed, as written (no whitespace outside strings).
std::string Compact(std::string_view text) {
  ArgsCompactor compactor;
  std::string out;
  for (char c : text) compactor.Feed(c, &out);
  return out;
}

std::string JsonString(std::string_view text) {
  std::string out = "\"";
  AppendJsonEscaped(text, &out);
  return out + "\"";
}

// Longest end of `text` that is a proper prefix of `tag`.
size_t PartialTag(std::string_view text, std::string_view tag) {
  for (size_t k = std::min(tag.size() - 1, text.size()); k > 0; --k) {
    if (text.substr(text.size() - k) == tag.substr(0, k)) return k;
  }
  return 0;
}

// `lit` at text[pos..]: kYes, kNeedMore when the text ends inside it, kNo otherwise.
Match LiteralAt(std::string_view text, size_t pos, std::string_view lit) {
  const std::string_view rest = text.substr(pos);
  if (rest.size() >= lit.size()) return rest.substr(0, lit.size()) == lit ? Match::kYes : Match::kNo;
  return lit.substr(0, rest.size()) == rest ? Match::kNeedMore : Match::kNo;
}

}  // namespace

const Json& ResolveSchema(const Json& root, const Json& schema) {
  const Json* s = &schema;
  for (int hops = 0; hops < kMaxResolve && s->is_object(); ++hops) {
    if (s->contains("$ref") && (*s)["$ref"].is_string()) {
      const Json* target = Pointer(root, (*s)["$ref"].get<std::string>());
      if (target == nullptr) break;
      s = target;
    } else if (s->contains("allOf") && (*s)["allOf"].is_array() && (*s)["allOf"].size() == 1) {
      s = &(*s)["allOf"][0];
    } else {
      break;
    }
  }
  return *s;
}

int AllowedTypes(const Json& root, const Json& schema) { return Allowed(root, schema, 0); }

bool IsRawString(const Json& root, const Json& schema) {
  const Json& s = ResolveSchema(root, schema);
  if (!s.is_object() || AllowedTypes(root, schema) != kTypeString) return false;
  for (const char* key : {"format", "pattern", "anyOf", "oneOf", "allOf", "not", "$ref"}) {
    if (s.contains(key)) return false;
  }
  return true;
}

const Json* ParamSchema(const Json& params, const std::string& name) {
  if (!params.is_object()) return nullptr;
  const auto props = params.find("properties");
  if (props != params.end() && props->is_object()) {
    const auto it = props->find(name);
    if (it != props->end()) return &*it;
  }
  const auto extra = params.find("additionalProperties");
  if (extra != params.end() && extra->is_object()) return &*extra;
  return nullptr;
}

void AppendJsonEscaped(std::string_view text, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(c);
    } else if (c == '\n') {
      out->append("\\n");
    } else if (c == '\r') {
      out->append("\\r");
    } else if (c == '\t') {
      out->append("\\t");
    } else if (u < 0x20) {
      out->append("\\u00").push_back(kHex[u >> 4]);
      out->push_back(kHex[u & 15]);
    } else {
      out->push_back(c);
    }
  }
}

std::string TypedValue(std::string_view raw, const Json* root, const Json* schema) {
  if (schema != nullptr && IsRawString(*root, *schema)) return JsonString(raw);
  const int bits = schema != nullptr ? AllowedTypes(*root, *schema) : 0;
  const std::string_view text = TrimSpace(raw);
  const Json v = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) {
    // What the templates' `| string` writes for Python's booleans and None.
    if ((bits & kTypeBoolean) && (text == "True" || text == "False"))
      return text == "True" ? "true" : "false";
    if ((bits & kTypeNull) && text == "None") return "null";
    return JsonString(raw);
  }
  // Unknown: JSON unless it is a string (a quoted text is the text with its quotes). Known: JSON of a type
  // the schema allows (for a string schema that is not raw, a JSON string is the value's JSON form).
  const bool json = bits == 0 ? !v.is_string() : (ValueBits(v) & bits) != 0;
  return json ? Compact(text) : JsonString(raw);
}

// ---- XmlArgs --------------------------------------------------------------------------------------------

struct XmlArgs::Tag {
  enum class What { kParam, kEndFunction, kEndCall };
  Match match = Match::kNeedMore;
  size_t consumed = 0;  // kYes: through the tag (for a parameter: up to its value)
  What what = What::kParam;
  std::string key;
};

// What comes next between two parameters: whitespace, then a parameter's opening, </function> or
// </tool_call>.
XmlArgs::Tag XmlArgs::NextTag(std::string_view text) const {
  Tag t;
  size_t i = 0;
  while (i < text.size() && IsSpace(text[i])) ++i;
  if (i == text.size()) return t;
  const bool qwen = format_ == ToolFormat::kQwen3Coder;
  const std::string_view open = qwen ? "<parameter=" : "<arg_key>";
  const Match param = LiteralAt(text, i, open);
  const Match end_call = LiteralAt(text, i, kEndCall);
  const Match end_function = qwen ? LiteralAt(text, i, kEndFunction) : Match::kNo;
  if (end_call == Match::kYes || end_function == Match::kYes) {
    t.match = Match::kYes;
    t.what = end_call == Match::kYes ? Tag::What::kEndCall : Tag::What::kEndFunction;
    t.consumed = i + (end_call == Match::kYes ? kEndCall : kEndFunction).size();
    return t;
  }
  if (param != Match::kYes) {
    const bool more =
        param == Match::kNeedMore || end_call == Match::kNeedMore || end_function == Match::kNeedMore;
    t.match = more ? Match::kNeedMore : Match::kNo;
    return t;
  }
  const size_t key_start = i + open.size();
  size_t key_end;
  if (qwen) {  // <parameter=KEY>: the key is all before '>', on one line
    key_end = key_start;
    while (key_end < text.size() && text[key_end] != '>') {
      const char c = text[key_end];
      if (c == '<' || c == '\n' || c == '\r') {
        t.match = Match::kNo;
        return t;
      }
      ++key_end;
    }
    if (key_end == text.size()) return t;
    t.consumed = key_end + 1;
  } else {  // <arg_key>KEY</arg_key> then <arg_value>
    key_end = text.find(kKeyClose, key_start);
    if (key_end == std::string_view::npos) return t;
    size_t j = key_end + kKeyClose.size();
    while (j < text.size() && IsSpace(text[j])) ++j;
    const Match value = LiteralAt(text, j, kValueOpen);
    if (value != Match::kYes) {
      t.match = value;
      return t;
    }
    t.consumed = j + kValueOpen.size();
  }
  t.key = std::string(qwen ? text.substr(key_start, key_end - key_start)
                           : TrimSpace(text.substr(key_start, key_end - key_start)));
  t.match = t.key.empty() ? Match::kNo : Match::kYes;
  return t;
}

size_t XmlArgs::Feed(std::string_view text, bool final, std::string* out) {
  size_t pos = 0;
  while (state_ != State::kDone) {
    const std::string_view rest = text.substr(pos);
    if (state_ == State::kBetween) {
      const Tag t = NextTag(rest.substr(0, kMaxPending));
      const bool bounded = rest.size() >= kMaxPending;  // undecided after kMaxPending bytes: not a tag
      if (t.match == Match::kNeedMore && !final && !bounded) break;
      if (t.match != Match::kYes) {
        // A tag cut off by the end of the output is the call's own (dropped); other text is content.
        if (t.match == Match::kNeedMore && !bounded) pos = text.size();
        Close(End::kOther, out);
        break;
      }
      pos += t.consumed;
      if (t.what == Tag::What::kParam) {
        StartValue(t.key, out);
      } else {
        Close(t.what == Tag::What::kEndCall ? End::kCall : End::kFunction, out);
      }
      continue;
    }
    const std::string_view close = ValueClose(format_);
    const size_t at = rest.find(close);
    if (at != std::string_view::npos) {
      raw_.append(rest.substr(0, at));
      pos += at + close.size();
      EndValue(out);
      state_ = State::kBetween;
      continue;
    }
    const size_t keep = PartialTag(rest, close);  // may be the closing tag's beginning
    if (final) {  // cut off inside the value: it is what it is, less the closing tag it was writing
      raw_.append(rest.substr(0, rest.size() - keep));
      pos = text.size();
      EndValue(out);
      Close(End::kOther, out);
      break;
    }
    raw_.append(rest.substr(0, rest.size() - keep));
    pos += rest.size() - keep;
    if (raw_string_) StreamString(out);
    break;
  }
  return pos;
}

void XmlArgs::StartValue(const std::string& key, std::string* out) {
  if (!first_) out->push_back(',');
  first_ = false;
  out->append(JsonString(key)).push_back(':');
  schema_ = params_ != nullptr ? ParamSchema(*params_, key) : nullptr;
  raw_string_ = schema_ != nullptr && IsRawString(*params_, *schema_);
  raw_.clear();
  streamed_ = 0;
  if (raw_string_) out->push_back('"');
  state_ = State::kValue;
}

void XmlArgs::StreamString(std::string* out) {
  if (raw_.empty()) return;
  // kQwen3Coder's templates write a newline on each side of the value: one of each is not the value's.
  const bool qwen = format_ == ToolFormat::kQwen3Coder;
  const size_t begin = qwen && raw_[0] == '\n' ? 1 : 0;
  size_t limit = raw_.size();
  if (qwen && limit > begin && raw_[limit - 1] == '\n') --limit;  // the last one, or it may be
  streamed_ = std::max(streamed_, begin);
  if (limit > streamed_) {
    AppendJsonEscaped(std::string_view(raw_).substr(streamed_, limit - streamed_), out);
    streamed_ = limit;
  }
}

void XmlArgs::EndValue(std::string* out) {
  if (raw_string_) {
    StreamString(out);
    out->push_back('"');
    return;
  }
  std::string_view value = raw_;
  if (format_ == ToolFormat::kQwen3Coder) {
    if (!value.empty() && value.front() == '\n') value.remove_prefix(1);
    if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
  }
  out->append(TypedValue(value, params_, schema_));
}

void XmlArgs::Close(End end, std::string* out) {
  out->push_back('}');
  end_ = end;
  state_ = State::kDone;
}

}  // namespace llamay::toolcall::internal
