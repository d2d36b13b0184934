// The JSON Schema to GBNF converter, shared by json_schema.cc (dispatch, objects, arrays, references) and
// json_schema_scalar.cc (strings, formats, numbers).
//
// Visit returns a GBNF expression matching exactly the JSON texts the converter allows for a schema
// (a subset of those the schema accepts), adding rules to `rules_` as needed. `ptr` is the JSON pointer of
// the schema being visited, for error messages.
//
// Thread-safety: one converter per conversion.
#ifndef LLAMAY_GRAMMAR_JSON_SCHEMA_INTERNAL_H_
#define LLAMAY_GRAMMAR_JSON_SCHEMA_INTERNAL_H_

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "grammar/gbnf_text.h"

namespace llamay::grammar::internal {

using Json = nlohmann::ordered_json;

// `unsupported JSON Schema keyword "kw"<detail> at /ptr`.
// The largest count a GBNF repetition takes (gbnf_parser.cc). A schema's maximum above it (maxLength
// 524288, as Claude Code's tools declare) is compiled as no maximum: the grammar is then looser than the
// schema, never stricter. A minimum above it is refused.
inline constexpr int64_t kMaxRepeatBound = 100000;

Status Unsupported(std::string_view keyword, const std::string& ptr, std::string_view detail = "");
// `invalid JSON Schema at /ptr: message`.
Status InvalidSchema(const std::string& ptr, std::string_view message);
// The JSON pointer of `key` under `ptr`.
std::string Child(const std::string& ptr, std::string_view key);
// Compact JSON text of a value (never throws).
std::string Dump(const Json& value);

// Numbers above this magnitude are never generated (16 digits: integers stay exact enough as doubles).
inline constexpr int64_t kMaxInt = 9'999'999'999'999'999;

class SchemaConverter {
 public:
  // Rule names start with `prefix` (see JsonSchemaRulesGbnf); the schema's own rule is `<prefix>root`.
  explicit SchemaConverter(const Json& root, std::string prefix = "")
      : root_(root), prefix_(prefix), rules_(std::move(prefix)) {}
  // The whole grammar: `root`, the generated rules and the core JSON rules.
  Result<std::string> Run();
  // The schema's rule `<prefix>root` and the generated rules, without the core JSON rules.
  Result<std::string> RunRules();

 private:
  Result<std::string> Visit(const Json& s, const std::string& ptr, const std::string& hint);
  Result<std::string> VisitType(const std::string& type, const Json& s, const std::string& ptr,
                                const std::string& hint);
  Result<std::string> VisitObject(const Json& s, const std::string& ptr, const std::string& hint);
  Result<std::string> VisitArray(const Json& s, const std::string& ptr, const std::string& hint);
  Result<std::string> VisitEnum(const Json& s, const std::string& ptr);
  Result<std::string> VisitRef(const Json& ref, const std::string& ptr);
  // json_schema_scalar.cc
  Result<std::string> VisitString(const Json& s, const std::string& ptr, const std::string& hint);
  Result<std::string> VisitNumber(const Json& s, const std::string& ptr, bool integer);
  Result<std::string> Format(const std::string& format, const std::string& ptr);
  // A rule matching a JSON object key that is none of `names` (raw characters only, no escapes).
  std::string KeyNotIn(const std::vector<std::string>& names, const std::string& hint);

  const Json& root_;
  const std::string prefix_;
  GbnfRules rules_;
  std::map<std::string, std::string> ref_rules_;     // $ref -> its rule
  std::map<std::string, std::string> format_rules_;  // format -> its rule
};

// GBNF for the integers in [lo, hi] (REQUIRES: -kMaxInt <= lo <= hi <= kMaxInt), in JSON's form.
std::string IntRangeGbnf(int64_t lo, int64_t hi);
// GBNF for the non-negative integers in [lo, hi] written without leading zeros (REQUIRES: 0 <= lo <= hi).
std::string NonNegativeRangeGbnf(int64_t lo, int64_t hi);

}  // namespace llamay::grammar::internal

#endif  // LLAMAY_GRAMMAR_JSON_SCHEMA_INTERNAL_H_
