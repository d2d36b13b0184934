// JSON Schema to grammar: the subset OpenAI's strict mode and llama.cpp's json_schema accept.
//
// Supported (docs/grammar.md has the keyword-by-keyword table): type (one or a list), properties with
// required and optional members in the schema's order, additionalProperties, items, prefixItems (and
// draft-7 tuple items with additionalItems), minItems/maxItems, enum, const, anyOf, oneOf (as anyOf),
// allOf with one member, local $ref (#, #/$defs/..., #/definitions/..., any local JSON pointer) with
// recursion, minLength/maxLength, pattern, format (date, time, date-time, uuid, email, ipv4),
// minimum/maximum/exclusiveMinimum/exclusiveMaximum. Annotations (title, description, examples, default,
// $schema, $id, $comment, ...) are ignored. Anything else is refused with InvalidArgument naming the
// keyword and the JSON pointer of the schema that uses it, e.g.
//   unsupported JSON Schema keyword "patternProperties" at /properties/a
// never an unconstrained grammar. The output of a matched grammar always parses as JSON and validates
// against the schema; where the schema allows more than the grammar produces (an object without
// additionalProperties gets only its declared properties), the grammar is the stricter.
//
// Property order comes from the schema object's key order: pass an nlohmann::ordered_json (a plain
// nlohmann::json converts implicitly but has already sorted its keys alphabetically).
//
// Thread-safety: pure functions.
#ifndef LLAMAY_GRAMMAR_JSON_SCHEMA_H_
#define LLAMAY_GRAMMAR_JSON_SCHEMA_H_

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "base/status.h"
#include "grammar/grammar.h"

namespace llamay::grammar {

// The GBNF text for `schema` (root rule `root`), for inspection and debugging.
Result<std::string> JsonSchemaToGbnf(const nlohmann::ordered_json& schema);
// The rules of `schema`'s grammar, for embedding several schemas (or a schema inside a larger syntax) in
// one GBNF text: the schema's values are the rule `<rule_prefix>root`, every other rule defined here starts
// with `rule_prefix`, and the rules of JsonRulesGbnf() (value, object, string, ws, ...) are referenced but
// not defined: append JsonRulesGbnf() once to the combined text. Rules of two schemas never collide when
// neither prefix is a prefix of the other (e.g. "fn0-" and "fn1-"), and never collide with the JSON rules;
// the caller's own rules must avoid both. What `<rule_prefix>root` matches is exactly what
// JsonSchemaToGbnf's `root` matches. InvalidArgument for the schema's errors (as JsonSchemaToGbnf) and for a
// prefix that is empty or not made of letters, digits, '-' and '_'.
Result<std::string> JsonSchemaRulesGbnf(const nlohmann::ordered_json& schema, std::string_view rule_prefix);
// The compiled grammar for `schema`.
Result<std::shared_ptr<const Grammar>> FromJsonSchema(const nlohmann::ordered_json& schema);
// Parses `schema_json` (keeping its key order) and compiles it. InvalidArgument when it is not JSON.
Result<std::shared_ptr<const Grammar>> FromJsonSchemaText(std::string_view schema_json);

}  // namespace llamay::grammar

#endif  // LLAMAY_GRAMMAR_JSON_SCHEMA_H_
