// Conversions between nlohmann::json and template Values, and the `tojson` filter's serializer.
//
// ToJson reproduces Python's json.dumps as HF transformers' `tojson` override calls it (ensure_ascii=False,
// indent=None, separators=None, sort_keys=False by default), byte for byte: ", " and ": " separators without
// indent, "," and ": " with it, floats in Python repr, NaN/Infinity spelled as Python writes them.
//
// Thread-safety: pure functions.
#ifndef LLAMAY_TEMPLATE_JSON_VALUE_H_
#define LLAMAY_TEMPLATE_JSON_VALUE_H_

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/status.h"
#include "template/value.h"

namespace llamay::chat::internal {

// Objects keep nlohmann's key order: sorted for nlohmann::json, insertion order for nlohmann::ordered_json
// (which is what Python dicts, and so transformers, iterate in). Unsigned integers above INT64_MAX become
// floats, binary values are refused. InvalidArgument past 512 levels of nesting.
Result<Value> FromJson(const nlohmann::json& j);
Result<Value> FromJson(const nlohmann::ordered_json& j);

struct JsonDumpOptions {
  std::optional<std::string> indent;  // json.dumps(indent=...): spaces already expanded; nullopt = None
  bool ensure_ascii = false;
  std::optional<std::string> item_separator;  // nullopt: ", " without indent, "," with it
  std::optional<std::string> key_separator;   // nullopt: ": "
  bool sort_keys = false;
};

// InvalidArgument for undefined, namespaces and callables ("not JSON serializable").
Result<std::string> ToJson(const Value& v, const JsonDumpOptions& options);

}  // namespace llamay::chat::internal

#endif  // LLAMAY_TEMPLATE_JSON_VALUE_H_
