#include "server/structured_output.h"

#include "grammar/grammar_cache.h"
#include "grammar/json_schema.h"
#include "server/http_util.h"

namespace llamay::server {

grammar::GrammarCache& CompiledGrammars() {
  static grammar::GrammarCache* const kCache = new grammar::GrammarCache(64, size_t{256} << 20);
  return *kCache;
}

namespace {

using ordered = nlohmann::ordered_json;

Result<RequestedFormat> FromSchema(const ordered& schema, const std::string& field) {
  if (!schema.is_object() && !schema.is_boolean())
    return InvalidArgumentError("'" + field + "' must be a JSON Schema object");
  auto g = CompiledGrammars().GetOrBuild("schema:" + schema.dump(), [&] { return grammar::FromJsonSchema(schema); });
  if (!g.ok()) return InvalidArgumentError("'" + field + "': " + g.status().message());
  return RequestedFormat{*g, schema};
}

RequestedFormat AnyObject() { return RequestedFormat{grammar::AnyJsonObject(), ordered{{"type", "object"}}}; }

}  // namespace

// The body again, in its own key order (schemas list properties in the order the answer should have).
ordered OrderedBody(const std::string& raw) {
  ordered j = ordered::parse(raw, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) j = ordered::parse(ReplaceLoneSurrogates(raw), nullptr, false);
  return j;
}

Result<RequestedFormat> RequestFormat(const nlohmann::json& body, const std::string& raw) {
  auto present = [&](const char* key) { return body.contains(key) && !body[key].is_null(); };
  const bool has_format = present("response_format"), has_schema = present("json_schema"),
             has_grammar = present("grammar");
  if (has_format + has_schema + has_grammar > 1)
    return InvalidArgumentError("use one of 'response_format', 'json_schema' and 'grammar', not several");
  if (has_grammar) {
    if (!body["grammar"].is_string()) return InvalidArgumentError("'grammar' must be a string of GBNF");
    const std::string gbnf = body["grammar"].get<std::string>();
    auto g = CompiledGrammars().GetOrBuild("gbnf:" + gbnf, [&] { return grammar::ParseGbnf(gbnf); });
    if (!g.ok()) return InvalidArgumentError("'grammar': " + g.status().message());
    return RequestedFormat{*g, nullptr};
  }
  if (has_schema) return FromSchema(OrderedBody(raw)["json_schema"], "json_schema");
  if (!has_format) return RequestedFormat{};
  const nlohmann::json& rf = body["response_format"];
  if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string())
    return InvalidArgumentError("'response_format' must be an object with a string 'type'");
  const std::string type = rf["type"];
  if (type == "text") return RequestedFormat{};
  if (type == "json_object") {
    if (rf.contains("schema") && !rf["schema"].is_null())
      return FromSchema(OrderedBody(raw)["response_format"]["schema"], "response_format.schema");
    return AnyObject();
  }
  if (type == "json_schema") {
    if (!rf.contains("json_schema") || !rf["json_schema"].is_object())
      return InvalidArgumentError("'response_format.json_schema' must be an object holding 'schema'");
    const nlohmann::json& js = rf["json_schema"];
    if (js.contains("name") && !js["name"].is_string())
      return InvalidArgumentError("'response_format.json_schema.name' must be a string");
    if (js.contains("strict") && !js["strict"].is_null() && !js["strict"].is_boolean())
      return InvalidArgumentError("'response_format.json_schema.strict' must be a boolean");
    // OpenAI requires the schema; without one any JSON object is the only sensible reading.
    if (!js.contains("schema") || js["schema"].is_null()) return AnyObject();
    return FromSchema(OrderedBody(raw)["response_format"]["json_schema"]["schema"], "response_format.json_schema.schema");
  }
  return InvalidArgumentError("'response_format.type' must be \"text\", \"json_object\" or \"json_schema\", not \"" +
                              type + "\"");
}

}  // namespace llamay::server
