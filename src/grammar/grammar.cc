// Grammar, ParseGbnf and the built-in JSON grammars.
#include "grammar/grammar.h"

#include <utility>

#include "base/check.h"
#include "grammar/automaton.h"
#include "grammar/compile.h"
#include "grammar/gbnf_parser.h"
#include "grammar/json_core.h"

namespace llamay::grammar {

namespace internal {

const std::string& JsonCoreGbnf() {
  static const std::string kText = R"gbnf(
value  ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( member ( "," ws member )* ws )? "}"
member ::= string ":" ws value
array  ::= "[" ws ( value ( "," ws value )* ws )? "]"
string ::= "\"" char* "\""
char   ::= [^"\\\x00-\x1f] | "\\" ( ["\\/bfnrt] | "u" ( [0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} ) )
number ::= "-"? int frac? exp?
int    ::= "0" | [1-9] [0-9]{0,15}
frac   ::= "." [0-9]{1,16}
exp    ::= [eE] [-+]? [0-9]{1,2}
ws     ::= ( " " | "\n" [ \t]{0,20} )?
)gbnf";
  return kText;
}

const char* const* JsonCoreRuleNames() {
  static const char* const kNames[] = {"value",  "object", "member", "array", "string", "char",
                                       "number", "int",    "frac",   "exp",   "ws",     nullptr};
  return kNames;
}

}  // namespace internal

Grammar::Grammar(std::unique_ptr<const internal::Automaton> automaton, std::string gbnf)
    : automaton_(std::move(automaton)), gbnf_(std::move(gbnf)) {}

Grammar::~Grammar() = default;

int32_t Grammar::num_rules() const { return static_cast<int32_t>(automaton_->rule_start.size()); }
int32_t Grammar::num_states() const { return static_cast<int32_t>(automaton_->states.size()); }

std::bitset<256> Grammar::byte_class_starts() const {
  std::bitset<256> starts;
  starts.set(0);
  for (int b = 1; b < 256; ++b) starts[b] = automaton_->byte_class[b] != automaton_->byte_class[b - 1];
  return starts;
}

size_t Grammar::memory_bytes() const {
  const internal::Automaton& a = *automaton_;
  auto bytes = [](const auto& v) { return v.capacity() * sizeof(v[0]); };
  size_t n = sizeof(*this) + sizeof(a) + gbnf_.capacity() + bytes(a.trans) + bytes(a.states) + bytes(a.first) +
             bytes(a.simple) + bytes(a.loop_kinds) + bytes(a.text_run) + bytes(a.refs) + bytes(a.rule_start) +
             bytes(a.rule_names);
  for (const std::string& name : a.rule_names) n += name.capacity();
  return n;
}

Result<std::shared_ptr<const Grammar>> ParseGbnf(std::string_view text, std::string_view root) {
  LLAMAY_ASSIGN_OR_RETURN(internal::GrammarAst ast, internal::ParseGbnfAst(text, root));
  LLAMAY_ASSIGN_OR_RETURN(internal::Automaton automaton, internal::Compile(std::move(ast)));
  return std::make_shared<const Grammar>(std::make_unique<const internal::Automaton>(std::move(automaton)),
                                         std::string(text));
}

const std::string& AnyJsonGbnf() {
  static const std::string kText = "root ::= value\n" + internal::JsonCoreGbnf();
  return kText;
}

const std::string& JsonRulesGbnf() { return internal::JsonCoreGbnf(); }

std::shared_ptr<const Grammar> AnyJson() {
  static const std::shared_ptr<const Grammar> kGrammar = [] {
    auto g = ParseGbnf(AnyJsonGbnf());
    LLAMAY_CHECK(g.ok()) << g.status().ToString();
    return *g;
  }();
  return kGrammar;
}

std::shared_ptr<const Grammar> AnyJsonObject() {
  static const std::shared_ptr<const Grammar> kGrammar = [] {
    auto g = ParseGbnf("root ::= object\n" + internal::JsonCoreGbnf());
    LLAMAY_CHECK(g.ok()) << g.status().ToString();
    return *g;
  }();
  return kGrammar;
}

}  // namespace llamay::grammar
