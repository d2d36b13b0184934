// Structured output: the grammar a completion request asks its answer to follow.
//
//   response_format {"type": "json_object"}                       any JSON object
//   response_format {"type": "json_object", "schema": {...}}      llama.cpp's form: that schema
//   response_format {"type": "json_schema", "json_schema": {"name": ..., "schema": {...}, "strict": true}}
//   json_schema {...}                                             llama.cpp's field: that schema
//   grammar "root ::= ..."                                        llama.cpp's field: GBNF
//   response_format {"type": "text"} or none of these             unconstrained
//
// A schema that uses something the grammar engine does not support is refused with a 400 that names the
// keyword and where it is (never a silently unconstrained answer); so is more than one of these fields.
// Schemas keep their property order (the body is read again as an ordered JSON document for them).
// Thread-safety: pure functions.
#ifndef LLAMAY_SERVER_STRUCTURED_OUTPUT_H_
#define LLAMAY_SERVER_STRUCTURED_OUTPUT_H_

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "grammar/grammar.h"
#include "grammar/grammar_cache.h"

namespace llamay::server {

// `raw` parsed keeping its key order (lone surrogate escapes read as U+FFFD); discarded when not JSON.
nlohmann::ordered_json OrderedBody(const std::string& raw);

struct RequestedFormat {
  std::shared_ptr<const grammar::Grammar> grammar;  // null: the request asks for none
  // The JSON Schema `grammar` was compiled from ({"type": "object"} for any JSON object); null for a GBNF
  // grammar. With tools, the answer's side of the tool-call grammar (toolcall::ToolCallGbnf).
  nlohmann::ordered_json schema;
};

// The format `body` (parsed from `raw`) asks for. InvalidArgument, naming the field, for a malformed or
// unsupported request.
Result<RequestedFormat> RequestFormat(const nlohmann::json& body, const std::string& raw);

// The server's compiled grammars, shared by every request: the tool-call grammars, the response formats'
// and the `grammar` fields', each keyed by everything it is built from (agents send the same tools and
// schemas on every turn). At most 64 grammars and 256 MiB (keys plus transition tables).
grammar::GrammarCache& CompiledGrammars();

}  // namespace llamay::server

#endif  // LLAMAY_SERVER_STRUCTURED_OUTPUT_H_
