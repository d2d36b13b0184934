// Internals of the Lark-to-regex converter (lark.h): a small regular-expression tree, its rendering as an
// ECMAScript pattern in the subset PatternToGbnf (regex.h) reads, Lark's literal escape evaluation, a
// translator from Python `re` syntax (what Lark's /regex/ literals are written in) to the tree, and the
// Lark grammar tokenizer.
//
// The tree is built only through the Re* constructors, which keep it simplified: sequences and
// alternatives are flattened, empty parts dropped, single-character alternatives merged into one class,
// duplicate alternatives removed, an alternative with an empty option becomes an optional, and nested
// repetitions that collapse exactly (x?* = x*, (x+)+ = x+, ...) are collapsed. `weight` counts the nodes,
// so callers can bound the size of what inlining produces.
//
// Thread-safety: pure functions and plain values.
#ifndef LLAMAY_GRAMMAR_LARK_INTERNAL_H_
#define LLAMAY_GRAMMAR_LARK_INTERNAL_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "grammar/ast.h"
#include "grammar/utf8.h"

namespace llamay::grammar::internal {

// The largest {m,n} count PatternToGbnf accepts.
inline constexpr uint32_t kMaxRegexCount = 10000;

struct ReNode {
  enum class Kind : uint8_t { kChars, kSeq, kAlt, kRepeat, kRef };

  Kind kind = Kind::kSeq;     // an empty kSeq matches the empty string
  CpSet chars;                // kChars: one code point of this set (normalized, non-empty)
  std::vector<ReNode> items;  // kSeq, kAlt: the parts; kRepeat: the one repeated item
  uint32_t min = 0;           // kRepeat: min..max repetitions (max may be kUnbounded)
  uint32_t max = 0;
  int32_t ref = -1;     // kRef: a reference to be substituted (an index the caller owns)
  uint64_t weight = 1;  // nodes in the tree
};

ReNode ReEmpty();
bool ReIsEmpty(const ReNode& node);
// REQUIRES: `set` normalized and non-empty.
ReNode ReChars(CpSet set);
ReNode ReLiteral(const std::vector<uint32_t>& cps);
ReNode ReSeq(std::vector<ReNode> parts);
ReNode ReAlt(std::vector<ReNode> options);
// REQUIRES: min <= max.
ReNode ReRepeat(ReNode item, uint32_t min, uint32_t max);
ReNode ReRef(int32_t ref);
bool ReEqual(const ReNode& a, const ReNode& b);

// The ECMAScript pattern (for the u flag) of a tree without kRef nodes; "^...$" for the anchored form.
std::string RenderRegex(const ReNode& node);
std::string RenderAnchoredRegex(const ReNode& node);

// `set` with the other case of every ASCII letter in it added.
CpSet FoldAsciiCase(const CpSet& set);

// Lark's evaluation of a "string" or /regex/ literal's body (the text between the delimiters, as UTF-8):
// \n \t \r \f \xHH \uHHHH \UHHHHHHHH become the characters, \" becomes ", and every other backslash stays;
// in a string, \\ becomes one backslash (so "\d" is a backslash and a d), in a regex it stays \\ (the
// regex escape of a backslash). InvalidArgument for a malformed escape or invalid UTF-8.
Result<std::vector<uint32_t>> EvalLarkEscapes(std::string_view body, bool is_regex);

struct PyRegexFlags {
  bool ignore_case = false;  // i: ASCII letters only (refuses other characters, see lark.h)
  bool dot_all = false;      // s
};
// A Python `re` pattern (code points, after EvalLarkEscapes) as a tree. InvalidArgument naming what is
// not supported (anchors, lookaround, backreferences, word boundaries, atomic groups, possessive
// quantifiers, inline flags, \N{...}) or malformed.
Result<ReNode> PythonRegexToNode(const std::vector<uint32_t>& pattern, PyRegexFlags flags);

// ---- Lark grammar tokens (lark_tokenize.cc) ----

enum class Tok : uint8_t { kName, kString, kRegex, kNumber, kPunct, kDirective, kNewline, kEnd };

struct Token {
  Tok kind = Tok::kEnd;
  std::string text;   // a name, a literal's body (undecoded), a number, punctuation, a directive with its '%'
  std::string flags;  // a literal's flags
  int line = 0;
  bool Is(Tok k, std::string_view t) const { return kind == k && text == t; }
};

// InvalidArgument "Lark grammar line <line>: <message>".
Status LarkError(int line, std::string_view message);
// The tokens of a Lark grammar, ending with kNewline (when there are any) and kEnd. InvalidArgument for
// an unterminated or multi-line literal, a stray backslash or character, a malformed number.
Result<std::vector<Token>> Tokenize(std::string_view text);

}  // namespace llamay::grammar::internal

#endif  // LLAMAY_GRAMMAR_LARK_INTERNAL_H_
