#include "template/json_value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace llamay::chat::internal {
namespace {

constexpr int kMaxJsonDepth = 512;

template <typename Json>
Result<Value> FromJsonAt(const Json& j, int depth) {
  if (depth > kMaxJsonDepth) return InvalidArgumentError("context JSON nested deeper than 512 levels");
  switch (j.type()) {
    case Json::value_t::null:
      return Value::None();
    case Json::value_t::boolean:
      return Value::Bool(j.template get<bool>());
    case Json::value_t::number_integer:
      return Value::Int(j.template get<int64_t>());
    case Json::value_t::number_unsigned: {
      uint64_t u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Value::Float(static_cast<double>(u));
      }
      return Value::Int(static_cast<int64_t>(u));
    }
    case Json::value_t::number_float:
      return Value::Float(j.template get<double>());
    case Json::value_t::string:
      return Value::String(j.template get<std::string>());
    case Json::value_t::array: {
      List items;
      items.reserve(j.size());
      for (const auto& e : j) {
        LLAMAY_ASSIGN_OR_RETURN(Value v, FromJsonAt(e, depth + 1));
        items.push_back(std::move(v));
      }
      return Value::MakeList(std::move(items));
    }
    case Json::value_t::object: {
      std::vector<std::pair<std::string, Value>> items;
      items.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) {
        LLAMAY_ASSIGN_OR_RETURN(Value v, FromJsonAt(it.value(), depth + 1));
        items.emplace_back(it.key(), std::move(v));
      }
      return Value::MakeDict(std::move(items));
    }
    case Json::value_t::discarded:
      return Value();
    case Json::value_t::binary:
      break;
  }
  return InvalidArgumentError("context JSON holds a binary value");
}

void AppendJsonString(const std::string& s, bool ensure_ascii, std::string* out) {
  out->push_back('"');
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    char buf[16];
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
      ++i;
    } else if (c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f') {
      out->push_back('\\');
      out->push_back(c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\t' ? 't' : c == '\b' ? 'b' : 'f');
      ++i;
    } else if (c < 0x20) {
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      *out += buf;
      ++i;
    } else if (c < 0x80 || !ensure_ascii) {
      out->push_back(static_cast<char>(c));
      ++i;
    } else {
      uint32_t cp = DecodeUtf8(s, &i);
      if (cp >= 0x10000) {
        cp -= 0x10000;
        std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
      } else {
        std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
      }
      *out += buf;
    }
  }
  out->push_back('"');
}

struct Dumper {
  const JsonDumpOptions& opt;
  std::string item_sep;
  std::string key_sep;
  std::string out;

  void NewLine(int level) {
    if (!opt.indent) return;
    out.push_back('\n');
    for (int i = 0; i < level; ++i) out += *opt.indent;
  }

  Status Dump(const Value& v, int level) {
    if (level > kMaxJsonDepth) return InvalidArgumentError("tojson: value nested too deeply");
    switch (v.kind()) {
      case Value::Kind::kNone:
        out += "null";
        return Status::Ok();
      case Value::Kind::kBool:
        out += v.AsBool() ? "true" : "false";
        return Status::Ok();
      case Value::Kind::kInt:
        out += std::to_string(v.AsInt());
        return Status::Ok();
      case Value::Kind::kFloat: {
        double d = v.AsDouble();
        if (std::isnan(d)) {
          out += "NaN";
        } else if (std::isinf(d)) {
          out += d < 0 ? "-Infinity" : "Infinity";
        } else {
          out += FormatFloat(d);
        }
        return Status::Ok();
      }
      case Value::Kind::kString:
        AppendJsonString(v.AsString(), opt.ensure_ascii, &out);
        return Status::Ok();
      case Value::Kind::kList: {
        const List& l = v.AsList();
        if (l.empty()) {
          out += "[]";
          return Status::Ok();
        }
        out.push_back('[');
        for (size_t i = 0; i < l.size(); ++i) {
          if (i > 0) out += item_sep;
          NewLine(level + 1);
          LLAMAY_RETURN_IF_ERROR(Dump(l[i], level + 1));
        }
        NewLine(level);
        out.push_back(']');
        return Status::Ok();
      }
      case Value::Kind::kDict: {
        std::vector<const std::pair<std::string, Value>*> items;
        for (const auto& item : v.AsDict().items) items.push_back(&item);
        if (opt.sort_keys) {
          std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
        }
        if (items.empty()) {
          out += "{}";
          return Status::Ok();
        }
        out.push_back('{');
        for (size_t i = 0; i < items.size(); ++i) {
          if (i > 0) out += item_sep;
          NewLine(level + 1);
          AppendJsonString(items[i]->first, opt.ensure_ascii, &out);
          out += key_sep;
          LLAMAY_RETURN_IF_ERROR(Dump(items[i]->second, level + 1));
        }
        NewLine(level);
        out.push_back('}');
        return Status::Ok();
      }
      default:
        return InvalidArgumentError("Object of type " + std::string(TypeName(v)) +
                                    " is not JSON serializable");
    }
  }
};

}  // namespace

Result<Value> FromJson(const nlohmann::json& j) { return FromJsonAt(j, 0); }
Result<Value> FromJson(const nlohmann::ordered_json& j) { return FromJsonAt(j, 0); }

Result<std::string> ToJson(const Value& v, const JsonDumpOptions& options) {
  Dumper d{options,
           options.item_separator.value_or(options.indent ? "," : ", "),
           options.key_separator.value_or(": "),
           {}};
  LLAMAY_RETURN_IF_ERROR(d.Dump(v, 0));
  return std::move(d.out);
}

}  // namespace llamay::chat::internal
