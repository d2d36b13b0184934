// Internal: the XML-like tool-call formats (kQwen3Coder, kGlm45), whose parameter values are raw text typed
// by the tool's JSON Schema: the typing rules (shared by the parser and the grammar, which must agree on
// them), the incremental parser of a call's body that the Scanner (stream.cc) drives, and the grammar
// (xml_grammar.cc).
//
// Thread-safety: pure functions; an XmlArgs belongs to one Scanner.
#ifndef LLAMAY_TOOLCALL_XML_H_
#define LLAMAY_TOOLCALL_XML_H_

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "toolcall/toolcall.h"

namespace llamay::toolcall::internal {

using Json = nlohmann::ordered_json;

inline bool IsXmlFormat(ToolFormat format) {
  return format == ToolFormat::kQwen3Coder || format == ToolFormat::kGlm45;
}

// The tag that ends a parameter's value.
inline std::string_view ValueClose(ToolFormat format) {
  return format == ToolFormat::kQwen3Coder ? "</parameter>" : "</arg_value>";
}

// ---- Typing by schema -----------------------------------------------------------------------------------

// The JSON types a schema allows, as bits; 0 when it does not say (any value). "number" allows integers.
enum TypeBit : int {
  kTypeString = 1,
  kTypeInteger = 2,
  kTypeNumber = 4,
  kTypeBoolean = 8,
  kTypeNull = 16,
  kTypeObject = 32,
  kTypeArray = 64,
};

// `schema` with local $refs (JSON pointers into `root`, the arguments schema) and one-member allOfs
// followed, a few levels at most; `schema` itself when there is nothing to follow or a pointer leads
// nowhere.
const Json& ResolveSchema(const Json& root, const Json& schema);
// The types `schema` allows (type, enum, const, anyOf/oneOf, allOf, else the keywords it uses).
int AllowedTypes(const Json& root, const Json& schema);
// Whether values of `schema` are written as raw text: it allows only strings and has no format, pattern
// or combinator (a string enum or const is raw too). Other string schemas take their values as JSON.
bool IsRawString(const Json& root, const Json& schema);
// The schema of parameter `name` in the arguments schema `params`: properties[name], else an
// additionalProperties schema; nullptr when there is none.
const Json* ParamSchema(const Json& params, const std::string& name);

// Appends `text` as the inside of a JSON string (bytes >= 0x80 as they are).
void AppendJsonEscaped(std::string_view text, std::string* out);
// The value `raw` (the text between the tags, less kQwen3Coder's newlines) typed by `schema` (nullptr:
// unknown), as compact JSON text; see toolcall.h's top. `root` is the arguments schema (for $refs).
std::string TypedValue(std::string_view raw, const Json* root, const Json* schema);

// ---- Parsing --------------------------------------------------------------------------------------------

// A call's body, from just after its name (`<function=f>`; kGlm45: `f`) to its end, turned into the JSON
// arguments object as it comes. Every decision is taken on the text up to the end of the syntax it is
// about (at most kMaxPending bytes of it), so that the output does not depend on how the text was split.
class XmlArgs {
 public:
  enum class End {
    kNone,      // not yet
    kFunction,  // at </function> (kQwen3Coder: the </tool_call> follows)
    kCall,      // at </tool_call>
    kOther,     // at text that is not a parameter (left unconsumed), or at the end of a cut-off output
  };

  XmlArgs() = default;
  // `params`: the function's arguments schema, nullptr when it is not known. It must outlive this.
  XmlArgs(ToolFormat format, const Json* params) : format_(format), params_(params) {}

  // Appends the arguments' opening.
  void Begin(std::string* out) { out->push_back('{'); }
  // Consumes from the front of `text` what can be decided and appends the arguments' fragments to `out`;
  // returns the bytes consumed. With `final` (no more text comes) the arguments always end.
  size_t Feed(std::string_view text, bool final, std::string* out);
  End end() const { return end_; }

 private:
  enum class State { kBetween, kValue, kDone };
  struct Tag;

  Tag NextTag(std::string_view text) const;
  void StartValue(const std::string& key, std::string* out);
  // Streams the string value read so far, less a newline at its end that may be the one to trim.
  void StreamString(std::string* out);
  void EndValue(std::string* out);
  void Close(End end, std::string* out);

  ToolFormat format_ = ToolFormat::kQwen3Coder;
  const Json* params_ = nullptr;
  State state_ = State::kBetween;
  End end_ = End::kNone;
  bool first_ = true;
  // The value being read.
  const Json* schema_ = nullptr;
  bool raw_string_ = false;  // streamed as it comes
  std::string raw_;          // its text so far
  size_t streamed_ = 0;      // raw_[.. streamed_) is out
};

// ---- Grammar --------------------------------------------------------------------------------------------

// ToolCallGbnf for an XML-like format (REQUIRES: IsXmlFormat, choice not "none", tools not empty).
Result<std::string> XmlToolCallGbnf(ToolFormat format, const std::vector<ToolSpec>& tools,
                                    const ToolChoice& choice, bool parallel, const Json* answer_schema);

// ---- Prompts --------------------------------------------------------------------------------------------

// One call as the model writes it in an XML-like format. `args` is the arguments value (an object, or
// whatever else the message had).
std::string XmlCall(ToolFormat format, const std::string& name, const Json& args);

}  // namespace llamay::toolcall::internal

#endif  // LLAMAY_TOOLCALL_XML_H_
