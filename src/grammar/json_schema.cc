// JSON Schema to GBNF: keyword dispatch, objects, arrays, enum/const and references (see json_schema.h;
// strings and numbers are in json_schema_scalar.cc).
#include "grammar/json_schema.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <set>
#include <utility>

#include "grammar/json_core.h"
#include "grammar/json_schema_internal.h"

namespace llamay::grammar {
namespace internal {
namespace {

const std::set<std::string, std::less<>>& Annotations() {
  static const std::set<std::string, std::less<>> kSet = {
      "$schema",     "$id",      "$comment", "$anchor",    "$defs",    "definitions", "title",
      "description", "examples", "default",  "deprecated", "readOnly", "writeOnly"};
  return kSet;
}

const std::set<std::string, std::less<>>& Supported() {
  static const std::set<std::string, std::less<>> kSet = {"type",
                                                          "enum",
                                                          "const",
                                                          "anyOf",
                                                          "oneOf",
                                                          "allOf",
                                                          "$ref",
                                                          "properties",
                                                          "required",
                                                          "additionalProperties",
                                                          "items",
                                                          "prefixItems",
                                                          "additionalItems",
                                                          "minItems",
                                                          "maxItems",
                                                          "uniqueItems",
                                                          "minLength",
                                                          "maxLength",
                                                          "pattern",
                                                          "format",
                                                          "minimum",
                                                          "maximum",
                                                          "exclusiveMinimum",
                                                          "exclusiveMaximum"};
  return kSet;
}

bool IsOneOf(std::string_view key, std::initializer_list<std::string_view> keys) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

// The types a schema without `type` is taken to describe, from the keywords it uses.
std::vector<std::string> InferTypes(const Json& s) {
  std::vector<std::string> types;
  auto has_any = [&](std::initializer_list<const char*> keys) {
    for (const char* k : keys) {
      if (s.contains(k)) return true;
    }
    return false;
  };
  if (has_any({"properties", "required", "additionalProperties"})) types.push_back("object");
  if (has_any({"items", "prefixItems", "additionalItems", "minItems", "maxItems"})) types.push_back("array");
  if (has_any({"minLength", "maxLength", "pattern", "format"})) types.push_back("string");
  if (has_any({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})) types.push_back("number");
  return types;
}

bool HasType(const Json& v, std::string_view type) {
  if (type == "null") return v.is_null();
  if (type == "boolean") return v.is_boolean();
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "number") return v.is_number();
  if (type == "integer") {
    return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
  }
  return false;
}

// A non-negative integer keyword (minItems, maxLength, ...): its value, or `fallback` when absent.
Result<int64_t> CountKeyword(const Json& s, const char* key, const std::string& ptr, int64_t fallback) {
  if (!s.contains(key)) return fallback;
  const Json& v = s[key];
  if (!v.is_number_integer() || v.get<int64_t>() < 0) {
    return InvalidSchema(ptr, std::string(key) + " must be a non-negative integer");
  }
  return v.get<int64_t>();
}

// Nesting deeper than this in TrieGbnf lists the remaining texts whole: the GBNF parser and the compiler
// recurse once per level, and a chain of values that extend one another ("a", "aa", "aaa", ...) would
// otherwise nest once per value.
constexpr int kMaxTrieNesting = 32;

// The length of the UTF-8 character whose lead byte is `b` (1 for a byte that leads none).
size_t Utf8Length(uint8_t b) { return b < 0xC0 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4; }

// A GBNF expression matching exactly the texts [lo, hi) of `texts` (valid UTF-8, sorted, distinct), all of
// which start with the same `depth` bytes (a character boundary), from byte `depth` on: a trie, each
// shared prefix written once. An enum of N values as N alternatives compiles in time and memory that
// grows with the values' total length times their number at each branching (subset construction walks
// every alternative that is still alive); as a trie each character is one NFA state.
std::string TrieGbnf(const std::vector<std::string>& texts, size_t lo, size_t hi, size_t depth, int nesting) {
  bool optional = false;  // one of the texts ends here
  if (texts[lo].size() == depth) {
    optional = true;
    ++lo;
  }
  std::vector<std::string> alts;
  for (size_t i = lo; i < hi;) {
    const std::string& first = texts[i];
    if (nesting >= kMaxTrieNesting) {
      alts.push_back(GbnfLiteral(std::string_view(first).substr(depth)));
      ++i;
      continue;
    }
    // The texts whose next character is first's: contiguous, since byte order is code point order.
    const size_t n = Utf8Length(static_cast<uint8_t>(first[depth]));
    size_t j = i + 1;
    while (j < hi && texts[j].compare(depth, n, first, depth, n) == 0) ++j;
    // Their common prefix is the first's and the last's (sorted), cut back to a character boundary.
    const std::string& last = texts[j - 1];
    size_t common = depth + n;
    while (common < first.size() && common < last.size() && first[common] == last[common]) ++common;
    while (common < first.size() && (static_cast<uint8_t>(first[common]) & 0xC0) == 0x80) --common;
    std::string alt = GbnfLiteral(std::string_view(first).substr(depth, common - depth));
    if (j - i > 1 || first.size() > common) alt.append(" ").append(TrieGbnf(texts, i, j, common, nesting + 1));
    alts.push_back(std::move(alt));
    i = j;
  }
  if (alts.empty()) return "\"\"";  // only the empty text (not from Dump, which never writes one)
  if (!optional) return GbnfAlternatives(alts);
  return Cat(alts.size() == 1 ? Cat("( ", alts[0], " )") : GbnfAlternatives(alts), "?");
}

std::string Quantifier(int64_t lo, int64_t hi) {  // hi < 0: no maximum
  if (hi > kMaxRepeatBound) hi = -1;
  if (hi < 0) return lo == 0 ? "*" : lo == 1 ? "+" : "{" + std::to_string(lo) + ",}";
  if (lo == hi) return lo == 1 ? "" : "{" + std::to_string(lo) + "}";
  return "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
}

}  // namespace

Status Unsupported(std::string_view keyword, const std::string& ptr, std::string_view detail) {
  return InvalidArgumentError("unsupported JSON Schema keyword \"" + std::string(keyword) + "\"" +
                              std::string(detail) + " at " + (ptr.empty() ? "/" : ptr));
}

Status InvalidSchema(const std::string& ptr, std::string_view message) {
  return InvalidArgumentError("invalid JSON Schema at " + (ptr.empty() ? std::string("/") : ptr) + ": " +
                              std::string(message));
}

std::string Child(const std::string& ptr, std::string_view key) {
  std::string out = ptr + "/";
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

std::string Dump(const Json& value) { return value.dump(-1, ' ', false, Json::error_handler_t::replace); }

Result<std::string> SchemaConverter::Run() {
  LLAMAY_ASSIGN_OR_RETURN(std::string rules, RunRules());
  return rules + JsonCoreGbnf();
}

Result<std::string> SchemaConverter::RunRules() {
  LLAMAY_ASSIGN_OR_RETURN(std::string root, Visit(root_, "", "root"));
  return prefix_ + "root ::= " + root + "\n" + rules_.Text();
}

Result<std::string> SchemaConverter::Visit(const Json& s, const std::string& ptr, const std::string& hint) {
  if (s.is_boolean()) {
    if (s.get<bool>()) return std::string("value");
    return InvalidSchema(ptr, "the schema false matches nothing");
  }
  if (!s.is_object()) return InvalidSchema(ptr, "a schema must be an object or a boolean");
  std::vector<std::string> assertions;
  for (const auto& [key, value] : s.items()) {
    if (Annotations().count(key)) continue;
    if (!Supported().count(key)) return Unsupported(key, ptr);
    if (key == "uniqueItems" && !(value.is_boolean() && !value.get<bool>())) return Unsupported(key, ptr);
    if (key != "uniqueItems") assertions.push_back(key);
  }
  // Keywords that stand alone: every other assertion beside them would need an intersection.
  for (const char* alone : {"$ref", "allOf", "anyOf", "oneOf"}) {
    if (!s.contains(alone)) continue;
    for (const std::string& other : assertions) {
      if (other != alone) return Unsupported(other, ptr, std::string(" next to \"") + alone + "\"");
    }
  }
  if (s.contains("$ref")) return VisitRef(s["$ref"], ptr);
  if (s.contains("allOf")) {
    const Json& all = s["allOf"];
    if (!all.is_array() || all.size() != 1) return Unsupported("allOf", ptr, " (only with a single schema)");
    return Visit(all[0], Child(Child(ptr, "allOf"), "0"), hint);
  }
  for (const char* any : {"anyOf", "oneOf"}) {
    if (!s.contains(any)) continue;
    const Json& branches = s[any];
    if (!branches.is_array() || branches.empty())
      return InvalidSchema(ptr, std::string(any) + " must be a non-empty array");
    std::vector<std::string> alts;
    for (size_t i = 0; i < branches.size(); ++i) {
      LLAMAY_ASSIGN_OR_RETURN(std::string alt, Visit(branches[i], Child(Child(ptr, any), std::to_string(i)),
                                                     hint + "-" + std::to_string(i)));
      alts.push_back(std::move(alt));
    }
    return GbnfAlternatives(alts);
  }
  if (s.contains("enum") || s.contains("const")) {
    for (const std::string& other : assertions) {
      if (!IsOneOf(other, {"enum", "const", "type"})) {
        return Unsupported(other, ptr, s.contains("enum") ? " next to \"enum\"" : " next to \"const\"");
      }
    }
    return VisitEnum(s, ptr);
  }
  std::vector<std::string> types;
  if (s.contains("type")) {
    const Json& t = s["type"];
    if (t.is_string()) {
      types.push_back(t.get<std::string>());
    } else if (t.is_array() && !t.empty() &&
               std::all_of(t.begin(), t.end(), [](const Json& x) { return x.is_string(); })) {
      for (const Json& x : t) types.push_back(x.get<std::string>());
    } else {
      return InvalidSchema(ptr, "type must be a string or a non-empty array of strings");
    }
  } else {
    types = InferTypes(s);
  }
  if (types.empty()) return std::string("value");
  std::vector<std::string> alts;
  for (const std::string& type : types) {
    LLAMAY_ASSIGN_OR_RETURN(std::string alt, VisitType(type, s, ptr, hint));
    alts.push_back(std::move(alt));
  }
  return GbnfAlternatives(alts);
}

Result<std::string> SchemaConverter::VisitType(const std::string& type, const Json& s, const std::string& ptr,
                                               const std::string& hint) {
  if (type == "null") return GbnfLiteral("null");
  if (type == "boolean") return "( " + GbnfLiteral("true") + " | " + GbnfLiteral("false") + " )";
  if (type == "string") return VisitString(s, ptr, hint);
  if (type == "integer") return VisitNumber(s, ptr, /*integer=*/true);
  if (type == "number") return VisitNumber(s, ptr, /*integer=*/false);
  if (type == "object") return VisitObject(s, ptr, hint);
  if (type == "array") return VisitArray(s, ptr, hint);
  return InvalidSchema(ptr, "unknown type \"" + type + "\"");
}

Result<std::string> SchemaConverter::VisitEnum(const Json& s, const std::string& ptr) {
  std::vector<std::string> types;
  if (s.contains("type")) {
    const Json& t = s["type"];
    if (t.is_string()) types.push_back(t.get<std::string>());
    if (t.is_array()) {
      for (const Json& x : t) {
        if (x.is_string()) types.push_back(x.get<std::string>());
      }
    }
  }
  std::vector<Json> values;
  if (s.contains("const")) values.push_back(s["const"]);
  if (s.contains("enum")) {
    if (!s["enum"].is_array() || s["enum"].empty())
      return InvalidSchema(ptr, "enum must be a non-empty array");
    for (const Json& v : s["enum"]) values.push_back(v);
    if (s.contains("const")) {  // both: the const, if the enum has it
      const bool listed = std::find(values.begin() + 1, values.end(), values[0]) != values.end();
      values.resize(listed ? 1 : 0);
    }
  }
  std::vector<std::string> texts;
  for (const Json& v : values) {
    const bool typed = types.empty() || std::any_of(types.begin(), types.end(),
                                                    [&](const std::string& t) { return HasType(v, t); });
    if (typed) texts.push_back(Dump(v));
  }
  if (texts.empty()) return InvalidSchema(ptr, "no enum or const value satisfies the schema's type");
  std::sort(texts.begin(), texts.end());
  texts.erase(std::unique(texts.begin(), texts.end()), texts.end());
  // In parentheses: callers may treat the expression as one element.
  const std::string trie = TrieGbnf(texts, 0, texts.size(), 0, 0);
  return texts.size() == 1 ? trie : Cat("( ", trie, " )");
}

Result<std::string> SchemaConverter::VisitRef(const Json& ref, const std::string& ptr) {
  if (!ref.is_string()) return InvalidSchema(ptr, "$ref must be a string");
  const std::string r = ref.get<std::string>();
  if (r.empty() || r[0] != '#' || (r.size() > 1 && r[1] != '/')) {
    return Unsupported("$ref", ptr, " to \"" + r + "\" (only local references such as #/$defs/name)");
  }
  const auto known = ref_rules_.find(r);
  if (known != ref_rules_.end()) return known->second;
  // Walk the JSON pointer after '#'.
  const Json* target = &root_;
  std::string target_ptr, last = "root";
  for (size_t pos = 1; pos < r.size();) {
    const size_t next = std::min(r.find('/', pos + 1), r.size());
    std::string token;
    for (size_t i = pos + 1; i < next; ++i) {
      if (r[i] == '~' && i + 1 < next && (r[i + 1] == '0' || r[i + 1] == '1')) {
        token += r[i + 1] == '0' ? '~' : '/';
        ++i;
      } else {
        token += r[i];
      }
    }
    if (target->is_object() && target->contains(token)) {
      target = &(*target)[token];
    } else if (target->is_array() && !token.empty() &&
               std::all_of(token.begin(), token.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
               token.size() < 10 && std::stoul(token) < target->size()) {
      target = &(*target)[std::stoul(token)];
    } else {
      return InvalidSchema(ptr, "$ref \"" + r + "\" points at nothing");
    }
    target_ptr = Child(target_ptr, token);
    last = token;
    pos = next;
  }
  const std::string name = rules_.NewName(last);
  ref_rules_[r] = name;  // before visiting: a recursive reference finds it
  LLAMAY_ASSIGN_OR_RETURN(std::string body, Visit(*target, target_ptr, name));
  rules_.Define(name, std::move(body));
  return name;
}

Result<std::string> SchemaConverter::VisitObject(const Json& s, const std::string& ptr,
                                                 const std::string& hint) {
  // The declared members, in schema order, then required names the properties do not declare.
  struct Member {
    std::string name;
    const Json* schema;
    bool required;
  };
  static const Json kAny = true;
  std::vector<Member> members;
  if (s.contains("properties")) {
    if (!s["properties"].is_object()) return InvalidSchema(ptr, "properties must be an object");
    for (const auto& [name, schema] : s["properties"].items()) members.push_back({name, &schema, false});
  }
  if (s.contains("required")) {
    const Json& req = s["required"];
    if (!req.is_array()) return InvalidSchema(ptr, "required must be an array of strings");
    for (const Json& r : req) {
      if (!r.is_string()) return InvalidSchema(ptr, "required must be an array of strings");
      const std::string name = r.get<std::string>();
      auto it = std::find_if(members.begin(), members.end(), [&](const Member& m) { return m.name == name; });
      if (it == members.end()) {
        members.push_back({name, &kAny, true});
      } else {
        it->required = true;
      }
    }
  }
  // Extra members: absent additionalProperties allows them only when no property is declared.
  std::string extra_value;
  if (s.contains("additionalProperties")) {
    const Json& ap = s["additionalProperties"];
    if (!(ap.is_boolean() && !ap.get<bool>())) {
      LLAMAY_ASSIGN_OR_RETURN(extra_value, Visit(ap, Child(ptr, "additionalProperties"), hint + "-extra"));
    }
  } else if (members.empty()) {
    extra_value = "value";
  }
  if (members.empty()) {
    if (extra_value == "value") return std::string("object");
    if (extra_value.empty()) return GbnfLiteral("{") + " ws " + GbnfLiteral("}");
    const std::string kv = rules_.Add(hint + "-kv", "string " + GbnfLiteral(":") + " ws " + extra_value);
    return rules_.Add(hint, GbnfLiteral("{") + " ws ( " + kv + " ( " + GbnfLiteral(",") + " ws " + kv +
                                " )* ws )? " + GbnfLiteral("}"));
  }
  std::vector<std::string> kvs;
  std::vector<std::string> names;
  for (const Member& m : members) {
    LLAMAY_ASSIGN_OR_RETURN(std::string value,
                            Visit(*m.schema, Child(Child(ptr, "properties"), m.name), m.name));
    kvs.push_back(GbnfLiteral(Dump(Json(m.name)) + ":") + " ws " + value);
    names.push_back(m.name);
  }
  const std::string comma = GbnfLiteral(",") + " ws ";
  const std::string close = GbnfLiteral("}");
  std::string extra_kv;
  if (!extra_value.empty()) {
    extra_kv = rules_.Add(hint + "-extra-kv", GbnfLiteral("\"") + " " + KeyNotIn(names, hint) + " " +
                                                  GbnfLiteral("\":") + " ws " + extra_value);
  }
  // rest[i][started]: members i.. (a member before them when `started`), then the extras and the close.
  const size_t n = members.size();
  std::vector<std::array<std::string, 2>> rest(n + 1);
  for (int started = 0; started < 2; ++started) {
    if (extra_kv.empty()) {
      rest[n][started] = started ? "ws " + close : close;
    } else {
      rest[n][started] = started ? "( " + comma + extra_kv + " )* ws " + close
                                 : "( " + extra_kv + " ( " + comma + extra_kv + " )* ws )? " + close;
    }
  }
  for (size_t i = n; i-- > 0;) {
    for (int started = 0; started < 2; ++started) {
      const std::string take = (started ? comma : "") + kvs[i] + " " + rest[i + 1][1];
      const std::string body = members[i].required ? take : "( " + take + " | " + rest[i + 1][started] + " )";
      // Optional members reference both continuations: rules keep the text linear in their number.
      rest[i][started] = rules_.Add(hint + "-" + std::to_string(i) + (started ? "-more" : "-first"), body);
    }
  }
  return rules_.Add(hint, GbnfLiteral("{") + " ws " + rest[0][0]);
}

Result<std::string> SchemaConverter::VisitArray(const Json& s, const std::string& ptr,
                                                const std::string& hint) {
  std::vector<std::string> prefix;
  const Json* rest_schema = nullptr;  // nullptr: any value; points at false: no more items
  static const Json kNone = false;
  std::string rest_ptr = Child(ptr, "items");
  auto visit_prefix = [&](const Json& list, const char* key) -> Status {
    for (size_t i = 0; i < list.size(); ++i) {
      auto item = Visit(list[i], Child(Child(ptr, key), std::to_string(i)), hint + "-" + std::to_string(i));
      if (!item.ok()) return item.status();
      prefix.push_back(*item);
    }
    return Status::Ok();
  };
  if (s.contains("prefixItems")) {
    if (!s["prefixItems"].is_array()) return InvalidSchema(ptr, "prefixItems must be an array");
    if (s.contains("items") && s["items"].is_array())
      return InvalidSchema(ptr, "items must not be an array next to prefixItems");
    LLAMAY_RETURN_IF_ERROR(visit_prefix(s["prefixItems"], "prefixItems"));
    if (s.contains("items")) rest_schema = &s["items"];
  } else if (s.contains("items") && s["items"].is_array()) {  // draft 7 tuple
    LLAMAY_RETURN_IF_ERROR(visit_prefix(s["items"], "items"));
    if (s.contains("additionalItems")) {
      rest_schema = &s["additionalItems"];
      rest_ptr = Child(ptr, "additionalItems");
    }
  } else if (s.contains("items")) {
    rest_schema = &s["items"];
  }
  if (rest_schema != nullptr && rest_schema->is_boolean() && !rest_schema->get<bool>()) rest_schema = &kNone;
  LLAMAY_ASSIGN_OR_RETURN(int64_t min, CountKeyword(s, "minItems", ptr, 0));
  LLAMAY_ASSIGN_OR_RETURN(int64_t max, CountKeyword(s, "maxItems", ptr, -1));
  const int64_t k = static_cast<int64_t>(prefix.size());
  std::string rest;
  if (rest_schema == &kNone) {
    if (min > k) return InvalidSchema(ptr, "minItems asks for more items than the schema allows");
    max = max < 0 ? k : std::min(max, k);
  } else if (rest_schema == nullptr) {
    rest = "value";
  } else {
    LLAMAY_ASSIGN_OR_RETURN(rest, Visit(*rest_schema, rest_ptr, hint + "-item"));
  }
  if (max >= 0 && min > max) return InvalidSchema(ptr, "minItems is above maxItems");
  const std::string open = GbnfLiteral("[") + " ws ", close = GbnfLiteral("]");
  if (max == 0) return open + close;
  const std::string comma = GbnfLiteral(",") + " ws ";
  // tail(j): the items at positions j, j+1, ... (each after a comma), given those before j are there.
  auto tail = [&](auto&& self, int64_t j) -> std::string {
    if (max >= 0 && j >= max) return "";
    if (j < k) {
      const std::string after = self(self, j + 1);
      const std::string inner = comma + prefix[j] + (after.empty() ? "" : " " + after);
      return j < min ? inner : "( " + inner + " )?";
    }
    if (rest.empty()) return "";
    const int64_t lo = std::max<int64_t>(min - j, 0), hi = max < 0 ? -1 : max - j;
    return "( " + comma + rest + " )" + Quantifier(lo, hi);
  };
  const std::string after_first = tail(tail, 1);
  const std::string first = k > 0 ? prefix[0] : rest;
  const std::string items = first + (after_first.empty() ? "" : " " + after_first);
  const std::string body = min == 0 ? open + "( " + items + " ws )? " + close : open + items + " ws " + close;
  return rules_.Add(hint, body);
}

}  // namespace internal

Result<std::string> JsonSchemaToGbnf(const nlohmann::ordered_json& schema) {
  return internal::SchemaConverter(schema).Run();
}

Result<std::string> JsonSchemaRulesGbnf(const nlohmann::ordered_json& schema, std::string_view rule_prefix) {
  const bool valid = !rule_prefix.empty() && std::all_of(rule_prefix.begin(), rule_prefix.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  });
  if (!valid) {
    return InvalidArgumentError("rule prefix \"" + std::string(rule_prefix) +
                                "\" must be letters, digits, '-' and '_' (and not empty)");
  }
  return internal::SchemaConverter(schema, std::string(rule_prefix)).RunRules();
}

Result<std::shared_ptr<const Grammar>> FromJsonSchema(const nlohmann::ordered_json& schema) {
  LLAMAY_ASSIGN_OR_RETURN(std::string gbnf, JsonSchemaToGbnf(schema));
  auto grammar = ParseGbnf(gbnf);
  if (!grammar.ok()) return grammar.status().WithContext("the grammar of a JSON Schema");
  return grammar;
}

Result<std::shared_ptr<const Grammar>> FromJsonSchemaText(std::string_view schema_json) {
  const auto schema = nlohmann::ordered_json::parse(schema_json, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return InvalidArgumentError("the JSON Schema is not valid JSON");
  return FromJsonSchema(schema);
}

}  // namespace llamay::grammar
