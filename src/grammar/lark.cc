// Lark grammar to one anchored regex (see lark.h): tokenize, parse every definition into a regex tree
// whose rule references are kRef nodes, resolve the references, then inline from the start rule with
// a depth-first walk that refuses recursion.
#include "grammar/lark.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "grammar/gbnf_text.h"
#include "grammar/lark_internal.h"
#include "grammar/regex.h"

namespace llamay::grammar {
namespace {

using internal::Cat;
using internal::LarkError;
using internal::ReNode;
using internal::Tok;
using internal::Token;
using internal::Tokenize;

constexpr uint64_t kMaxNodes = 32768;

// lark's common.lark terminals, by their meaning (lark-parser/lark, lark/grammars/common.lark).
// ESCAPED_STRING is written without lark's lookbehind, and C_COMMENT ends at its first "*/" as lark's
// lazy /.*?/s does.
constexpr std::string_view kCommonLark = R"lark(
DIGIT: "0".."9"
HEXDIGIT: "a".."f"|"A".."F"|DIGIT
INT: DIGIT+
SIGNED_INT: ["+"|"-"] INT
DECIMAL: INT "." INT? | "." INT
_EXP: ("e"|"E") SIGNED_INT
FLOAT: INT _EXP | DECIMAL _EXP?
SIGNED_FLOAT: ["+"|"-"] FLOAT
NUMBER: FLOAT | INT
SIGNED_NUMBER: ["+"|"-"] NUMBER
ESCAPED_STRING: "\"" (/[^"\\\n]/ | /\\[^\n]/)* "\""
LCASE_LETTER: "a".."z"
UCASE_LETTER: "A".."Z"
LETTER: UCASE_LETTER | LCASE_LETTER
WORD: LETTER+
CNAME: ("_"|LETTER) ("_"|LETTER|DIGIT)*
WS_INLINE: (" "|/\t/)+
WS: /[ \t\f\r\n]/+
CR: /\r/
LF: /\n/
NEWLINE: (CR? LF)+
SH_COMMENT: /#[^\n]*/
CPP_COMMENT: /\/\/[^\n]*/
C_COMMENT: /\/\*(?:[^*]|\*+[^*\/])*\*+\//
SQL_COMMENT: /--[^\n]*/
)lark";

constexpr int kUserScope = 0, kCommonScope = 1;

bool IsDigitChar(char c) { return c >= '0' && c <= '9'; }

struct Def {
  std::string name;
  bool terminal = false;
  ReNode body;  // kRef nodes index Grammar::refs
  int line = 0;
};

struct RefSite {
  std::string name;
  int scope = 0;
  int line = 0;
  int32_t in_def = -1;
  int32_t target = -1;  // after Resolve
};

struct LarkGrammar {
  std::vector<Def> defs;
  std::map<std::pair<int, std::string>, int32_t> names;  // (scope, name) -> defs index
  std::vector<RefSite> refs;
  bool common_loaded = false;
};

std::string KindOf(const Def& d) { return d.terminal ? "terminal" : "rule"; }

class LarkParser {
 public:
  LarkParser(LarkGrammar* g, int scope, std::vector<Token> tokens)
      : g_(g), scope_(scope), t_(std::move(tokens)) {}

  Status Run() {
    while (Peek().kind != Tok::kEnd) {
      if (Peek().kind == Tok::kNewline) {
        ++i_;
        continue;
      }
      LLAMAY_RETURN_IF_ERROR(Peek().kind == Tok::kDirective ? Directive() : Definition());
    }
    return Status();
  }

 private:
  const Token& Peek(size_t ahead = 0) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
  const Token& Next() { return t_[std::min(i_++, t_.size() - 1)]; }
  bool Accept(std::string_view punct) {
    if (!Peek().Is(Tok::kPunct, punct)) return false;
    ++i_;
    return true;
  }
  Status Unexpected(std::string_view wanted) const {
    const Token& t = Peek();
    const std::string got = t.kind == Tok::kNewline ? "the end of the line"
                            : t.kind == Tok::kEnd   ? "the end of the grammar"
                                                    : Cat("\"", t.text, "\"");
    return LarkError(t.line, Cat("expected ", wanted, ", found ", got));
  }
  Status Expect(std::string_view punct) {
    return Accept(punct) ? Status() : Unexpected(Cat("\"", punct, "\""));
  }
  Status ExpectEndOfStatement() {
    return Next().kind == Tok::kNewline ? Status() : (--i_, Unexpected("a new line"));
  }
  std::string Where() const { return Cat(KindOf(g_->defs[def_]), " \"", g_->defs[def_].name, "\""); }

  Status AddName(const std::string& name, int32_t def, int line) {
    if (!g_->names.emplace(std::make_pair(scope_, name), def).second) {
      return LarkError(line, Cat("\"", name, "\" is defined twice"));
    }
    return Status();
  }

  Status Directive() {
    const Token& d = Next();
    if (d.text == "%import") return Import(d.line);
    if (d.text == "%ignore") {
      return LarkError(
          d.line,
          "%ignore is not supported: it lets the ignored text appear between any two tokens, which "
          "changes the language (write the whitespace into the rules instead)");
    }
    if (d.text == "%declare") {
      return LarkError(d.line,
                       "%declare is not supported: a declared terminal has no pattern, so its language is "
                       "unknown");
    }
    if (d.text == "%override" || d.text == "%extend")
      return LarkError(d.line, Cat(d.text, " is not supported"));
    return LarkError(d.line, Cat("an unknown directive ", d.text));
  }

  Status Import(int line) {
    if (Peek().Is(Tok::kPunct, ".")) return LarkError(line, "relative imports are not supported");
    std::vector<std::string> path;
    do {
      if (Peek().kind != Tok::kName) return Unexpected("a module or terminal name");
      path.push_back(Next().text);
    } while (Accept("."));
    std::vector<std::pair<std::string, std::string>> imports;  // (name in common, local name)
    if (Accept("(")) {
      do {
        if (Peek().kind != Tok::kName) return Unexpected("a name");
        const std::string& n = Next().text;
        imports.emplace_back(n, n);
      } while (Accept(","));
      LLAMAY_RETURN_IF_ERROR(Expect(")"));
    } else {
      if (path.size() < 2) return LarkError(line, "%import needs module.NAME or module (NAME, ...)");
      imports.emplace_back(path.back(), path.back());
      path.pop_back();
      if (Accept("->")) {
        if (Peek().kind != Tok::kName) return Unexpected("a name");
        imports.back().second = Next().text;
      }
    }
    LLAMAY_RETURN_IF_ERROR(ExpectEndOfStatement());
    if (path.size() != 1 || path[0] != "common") {
      return LarkError(line, "only %import common.NAME (lark's common.lark terminals) is supported");
    }
    LLAMAY_RETURN_IF_ERROR(LoadCommon());
    for (const auto& [name, local] : imports) {
      const auto it = g_->names.find({kCommonScope, name});
      if (it == g_->names.end())
        return LarkError(line, Cat("common.", name, " is not a supported common terminal"));
      LLAMAY_RETURN_IF_ERROR(AddName(local, it->second, line));
    }
    return Status();
  }

  Status LoadCommon() {
    if (g_->common_loaded) return Status();
    g_->common_loaded = true;
    LLAMAY_ASSIGN_OR_RETURN(std::vector<Token> tokens, Tokenize(kCommonLark));
    return LarkParser(g_, kCommonScope, std::move(tokens)).Run();
  }

  Status Definition() {
    while (Peek().Is(Tok::kPunct, "!") || Peek().Is(Tok::kPunct, "?")) ++i_;  // rule modifiers
    if (Peek().kind != Tok::kName) return Unexpected("a rule or terminal name");
    const Token& name = Next();
    const std::string& n = name.text;
    const size_t lead = n[0] == '_' ? 1 : 0;
    const bool lower = n.size() > lead && n[lead] >= 'a' && n[lead] <= 'z';
    const bool upper = n.size() > lead && n[lead] >= 'A' && n[lead] <= 'Z';
    const bool consistent = std::all_of(n.begin(), n.end(), [&](char c) {
      return c == '_' || IsDigitChar(c) || (lower ? (c >= 'a' && c <= 'z') : (c >= 'A' && c <= 'Z'));
    });
    if ((!lower && !upper) || !consistent) {
      return LarkError(name.line,
                       Cat("\"", n, "\" is neither a rule name (lowercase) nor a terminal name (uppercase)"));
    }
    if (Peek().Is(Tok::kPunct, "{"))
      return LarkError(name.line, Cat("rule \"", n, "\" is a template; templates are not supported"));
    if (Accept(".")) {  // a priority: it does not change the language
      Accept("+") || Accept("-");
      if (Next().kind != Tok::kNumber) return (--i_, Unexpected("a priority number"));
    }
    LLAMAY_RETURN_IF_ERROR(Expect(":"));
    def_ = static_cast<int32_t>(g_->defs.size());
    g_->defs.push_back({n, upper, ReNode{}, name.line});
    LLAMAY_RETURN_IF_ERROR(AddName(n, def_, name.line));
    ReNode body;
    LLAMAY_RETURN_IF_ERROR(Expansions(&body));
    LLAMAY_RETURN_IF_ERROR(ExpectEndOfStatement());
    if (upper && internal::ReIsEmpty(body)) return LarkError(name.line, Cat("terminal \"", n, "\" is empty"));
    g_->defs[def_].body = std::move(body);
    return Status();
  }

  Status Expansions(ReNode* out) {
    std::vector<ReNode> options;
    do {
      ReNode option;
      LLAMAY_RETURN_IF_ERROR(Expansion(&option));
      if (Accept("->")) {  // an alias names the tree node; the language is unchanged
        if (g_->defs[def_].terminal) return LarkError(Peek().line, "aliases are not allowed in terminals");
        if (Next().kind != Tok::kName) return (--i_, Unexpected("an alias name"));
      }
      options.push_back(std::move(option));
    } while (Accept("|"));
    *out = internal::ReAlt(std::move(options));
    return Status();
  }

  Status Expansion(ReNode* out) {
    std::vector<ReNode> parts;
    while (true) {
      const Token& t = Peek();
      if (t.kind != Tok::kName && t.kind != Tok::kString && t.kind != Tok::kRegex &&
          !t.Is(Tok::kPunct, "(") && !t.Is(Tok::kPunct, "[")) {
        break;
      }
      ReNode item;
      LLAMAY_RETURN_IF_ERROR(Expr(&item));
      parts.push_back(std::move(item));
    }
    *out = internal::ReSeq(std::move(parts));
    return Status();
  }

  Status Number(uint32_t* n) {
    const Token& t = Next();
    if (t.kind != Tok::kNumber) return (--i_, Unexpected("a repetition count"));
    if (t.text.size() > 5 || std::stoul(t.text) > internal::kMaxRegexCount) {
      return LarkError(t.line, Cat("a repetition count above ", std::to_string(internal::kMaxRegexCount)));
    }
    *n = static_cast<uint32_t>(std::stoul(t.text));
    return Status();
  }

  Status Expr(ReNode* out) {
    ReNode atom;
    LLAMAY_RETURN_IF_ERROR(Atom(&atom));
    uint32_t min = 1, max = 1;
    if (Accept("?")) {
      min = 0;
    } else if (Accept("*")) {
      min = 0, max = internal::kUnbounded;
    } else if (Accept("+")) {
      max = internal::kUnbounded;
    } else if (Accept("~")) {
      LLAMAY_RETURN_IF_ERROR(Number(&min));
      max = min;
      if (Accept("..")) LLAMAY_RETURN_IF_ERROR(Number(&max));
      if (max < min) return LarkError(Peek().line, "a ~ n..m repetition with n > m");
    }
    *out = internal::ReRepeat(std::move(atom), min, max);
    return Status();
  }

  Status Atom(ReNode* out) {
    const Token& t = Next();
    if (t.Is(Tok::kPunct, "(") || t.Is(Tok::kPunct, "[")) {
      LLAMAY_RETURN_IF_ERROR(Expansions(out));
      LLAMAY_RETURN_IF_ERROR(Expect(t.text == "(" ? ")" : "]"));
      if (t.text == "[") *out = internal::ReRepeat(std::move(*out), 0, 1);
      return Status();
    }
    if (t.kind == Tok::kName) {
      if (Peek().Is(Tok::kPunct, "{"))
        return LarkError(t.line, Cat("templates (\"", t.text, "{...}\") are not supported"));
      g_->refs.push_back({t.text, scope_, t.line, def_});
      *out = internal::ReRef(static_cast<int32_t>(g_->refs.size() - 1));
      return Status();
    }
    if (t.kind == Tok::kString) return String(t, out);
    return Regex(t, out);
  }

  Result<uint32_t> RangeEnd(const Token& t) {
    auto cps = internal::EvalLarkEscapes(t.text, /*is_regex=*/false);
    if (!cps.ok()) return LarkError(t.line, Cat("in \"", t.text, "\": ", cps.status().message()));
    if (cps->size() != 1 || !t.flags.empty()) return LarkError(t.line, "a range end must be one character");
    return (*cps)[0];
  }

  Status String(const Token& t, ReNode* out) {
    if (Accept("..")) {
      const Token& hi_token = Next();
      if (hi_token.kind != Tok::kString) return (--i_, Unexpected("a string ending the range"));
      LLAMAY_ASSIGN_OR_RETURN(const uint32_t lo, RangeEnd(t));
      LLAMAY_ASSIGN_OR_RETURN(const uint32_t hi, RangeEnd(hi_token));
      if (hi < lo) return LarkError(t.line, "a reversed range");
      const internal::CpSet set = internal::Normalize({{lo, hi}});
      if (set.empty()) return LarkError(t.line, "a range of surrogates");
      *out = internal::ReChars(set);
      return Status();
    }
    auto cps = internal::EvalLarkEscapes(t.text, /*is_regex=*/false);
    if (!cps.ok()) return LarkError(t.line, Cat("in \"", t.text, "\": ", cps.status().message()));
    if (cps->empty()) return LarkError(t.line, "an empty string literal (lark refuses empty terminals)");
    if (t.flags.empty()) {
      *out = internal::ReLiteral(*cps);
      return Status();
    }
    std::vector<ReNode> parts;
    for (uint32_t cp : *cps) {
      if (cp >= 0x80)
        return LarkError(t.line, Cat("in \"", t.text, "\"i: the i flag is supported only for ASCII text"));
      parts.push_back(internal::ReChars(internal::FoldAsciiCase({{cp, cp}})));
    }
    *out = internal::ReSeq(std::move(parts));
    return Status();
  }

  Status Regex(const Token& t, ReNode* out) {
    const std::string where = Cat("in /", t.text, "/", t.flags, " of ", Where(), ": ");
    internal::PyRegexFlags flags;
    for (char f : t.flags) {
      if (f == 'i') {
        flags.ignore_case = true;
      } else if (f == 's') {
        flags.dot_all = true;
      } else {
        return LarkError(t.line,
                         Cat(where, "the flag ", std::string(1, f), " is not supported (only i and s are)"));
      }
    }
    auto cps = internal::EvalLarkEscapes(t.text, /*is_regex=*/true);
    if (!cps.ok()) return LarkError(t.line, where + cps.status().message());
    if (cps->empty()) return LarkError(t.line, Cat(where, "an empty regex"));
    auto node = internal::PythonRegexToNode(*cps, flags);
    if (!node.ok()) return LarkError(t.line, where + node.status().message());
    *out = std::move(*node);
    return Status();
  }

  LarkGrammar* g_;
  const int scope_;
  std::vector<Token> t_;
  size_t i_ = 0;
  int32_t def_ = -1;  // the definition being parsed
};

// ---- Resolution and inlining ----

Status Resolve(LarkGrammar* g) {
  for (RefSite& r : g->refs) {
    const Def& user = g->defs[r.in_def];
    const auto it = g->names.find({r.scope, r.name});
    const bool terminal =
        !r.name.empty() && (r.name[0] == '_' ? r.name.size() > 1 && r.name[1] <= 'Z' : r.name[0] <= 'Z');
    if (it == g->names.end()) {
      return LarkError(r.line, Cat(terminal ? "terminal" : "rule", " \"", r.name,
                                   "\" is used but not defined (in ", KindOf(user), " \"", user.name, "\")"));
    }
    r.target = it->second;
    if (user.terminal && !g->defs[r.target].terminal) {
      return LarkError(r.line, Cat("terminal \"", user.name, "\" uses rule \"", r.name,
                                   "\"; terminals may only use terminals"));
    }
  }
  return Status();
}

class Inliner {
 public:
  explicit Inliner(const LarkGrammar& g) : g_(g), state_(g.defs.size(), kUnvisited), memo_(g.defs.size()) {}

  Result<ReNode> Lower(int32_t d) {
    if (state_[d] == kDone) return memo_[d];
    if (state_[d] == kActive) {  // a cycle: name it from where it starts
      std::string path;
      for (size_t k = std::find(stack_.begin(), stack_.end(), d) - stack_.begin(); k < stack_.size(); ++k) {
        path.append(g_.defs[stack_[k]].name).append(" -> ");
      }
      const Def& def = g_.defs[d];
      return LarkError(def.line,
                       Cat(KindOf(def), " \"", def.name, "\" is recursive (", path, def.name,
                           "): the language of a recursive grammar may not be regular, so it has no regex"));
    }
    state_[d] = kActive;
    stack_.push_back(d);
    auto body = Substitute(g_.defs[d].body);
    if (!body.ok()) return body.status();
    stack_.pop_back();
    state_[d] = kDone;
    memo_[d] = *body;
    return body;
  }

 private:
  enum State : uint8_t { kUnvisited, kActive, kDone };

  Status TooLarge() const {
    return InvalidArgumentError(Cat("Lark grammar: inlining every rule gives a regex of more than ",
                                    std::to_string(kMaxNodes), " nodes, too large to use"));
  }

  Result<ReNode> Substitute(const ReNode& node) {
    if (node.kind == ReNode::Kind::kRef) return Lower(g_.refs[node.ref].target);
    if (node.kind == ReNode::Kind::kChars) return node;
    std::vector<ReNode> items;
    uint64_t weight = 1;
    for (const ReNode& item : node.items) {
      LLAMAY_ASSIGN_OR_RETURN(ReNode sub, Substitute(item));
      weight += sub.weight;
      if (weight > kMaxNodes) return TooLarge();
      items.push_back(std::move(sub));
    }
    switch (node.kind) {
      case ReNode::Kind::kSeq:
        return internal::ReSeq(std::move(items));
      case ReNode::Kind::kAlt:
        return internal::ReAlt(std::move(items));
      default:
        return internal::ReRepeat(std::move(items[0]), node.min, node.max);
    }
  }

  const LarkGrammar& g_;
  std::vector<State> state_;
  std::vector<ReNode> memo_;
  std::vector<int32_t> stack_;
};

// The top-level alternatives of an ECMAScript pattern (split at | outside groups and classes).
std::vector<std::string_view> TopLevelAlternatives(std::string_view re) {
  std::vector<std::string_view> alts;
  int depth = 0;
  bool in_class = false;
  size_t begin = 0;
  for (size_t k = 0; k < re.size(); ++k) {
    const char c = re[k];
    if (c == '\\') {
      ++k;
    } else if (in_class) {
      in_class = c != ']';
    } else if (c == '[') {
      in_class = true;
    } else if (c == '(') {
      ++depth;
    } else if (c == ')') {
      --depth;
    } else if (c == '|' && depth == 0) {
      alts.push_back(re.substr(begin, k - begin));
      begin = k + 1;
    }
  }
  alts.push_back(re.substr(begin));
  return alts;
}

// Whether `alt` ends with a $ anchor (a $ after an even number of backslashes).
bool EndsWithAnchor(std::string_view alt) {
  if (alt.empty() || alt.back() != '$') return false;
  size_t backslashes = 0;
  while (backslashes + 1 < alt.size() && alt[alt.size() - 2 - backslashes] == '\\') ++backslashes;
  return backslashes % 2 == 0;
}

// The whole input must match: a pattern anchored at both ends stays as it is; otherwise the anchors at the
// edges of its top-level alternatives (no-ops under a full match) are dropped and the whole is anchored.
std::string AnchorWhole(std::string_view re) {
  if (re.empty()) return "^$";
  const std::vector<std::string_view> alts = TopLevelAlternatives(re);
  if (alts.size() == 1 && re.size() >= 2 && re.front() == '^' && EndsWithAnchor(re)) return std::string(re);
  std::string body;
  for (size_t k = 0; k < alts.size(); ++k) {
    std::string_view alt = alts[k];
    if (k > 0) body += '|';
    if (!alt.empty() && alt.front() == '^') alt.remove_prefix(1);
    if (EndsWithAnchor(alt)) alt.remove_suffix(1);
    body += alt;
  }
  return Cat("^(?:", body, ")$");
}

}  // namespace

Result<std::string> LarkToRegex(std::string_view lark_grammar, std::string_view start) {
  LarkGrammar g;
  LLAMAY_ASSIGN_OR_RETURN(std::vector<Token> tokens, Tokenize(lark_grammar));
  LLAMAY_RETURN_IF_ERROR(LarkParser(&g, kUserScope, std::move(tokens)).Run());
  LLAMAY_RETURN_IF_ERROR(Resolve(&g));
  const auto it = g.names.find({kUserScope, std::string(start)});
  if (it == g.names.end()) {
    return InvalidArgumentError(Cat("Lark grammar: the start rule \"", start, "\" is not defined"));
  }
  LLAMAY_ASSIGN_OR_RETURN(ReNode root, Inliner(g).Lower(it->second));
  return internal::RenderAnchoredRegex(root);
}

Result<std::string> RegexForCustomTool(std::string_view syntax, std::string_view definition) {
  if (syntax == "lark") return LarkToRegex(definition);
  if (syntax != "regex") {
    return InvalidArgumentError(
        Cat("unsupported custom tool grammar syntax \"", syntax, "\" (expected \"lark\" or \"regex\")"));
  }
  const std::string re = AnchorWhole(definition);
  auto checked = internal::PatternToGbnf(re);
  if (!checked.ok()) return InvalidArgumentError(Cat("custom tool regex: ", checked.status().message()));
  return re;
}

}  // namespace llamay::grammar
