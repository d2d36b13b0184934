// Parser: tokens -> Program, a recursive-descent parser for the Jinja2 subset chat templates use.
//
// Statements: if/elif/else, for (tuple targets, `if` filter, else), set (plain, tuple unpacking,
// `ns.attr`, block form), macro (with default arguments), filter blocks, break/continue (HF enables
// jinja2.ext.loopcontrols) and HF's generation block; raw blocks are handled by the lexer.
// Expressions follow Jinja2's precedence, lowest first: `x if c else y`, or, and, not,
// comparisons (chained, `in`, `not in`), + -, ~, * / // %, **, unary - +, then primaries with attribute,
// subscript, slice and call postfixes, and `|filter` / `is test` (which bind tighter than any operator:
// `'a' + x | trim` is `'a' + (x | trim)`).
//
// Unknown filters and tests are parse errors, as in Jinja2 3.1, except inside an `if` statement (its
// test and branches) or a conditional expression, where Jinja2 defers the error to render time (so a
// template may use a filter it only reaches when that filter exists). Nesting deeper than kMaxParseDepth
// (blocks or parentheses) is an error rather than a stack overflow.
// Errors: InvalidArgument "line L, column C: ...". Thread-safety: a Parser is single-use, single-thread.
#ifndef LLAMAY_TEMPLATE_PARSER_H_
#define LLAMAY_TEMPLATE_PARSER_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "template/ast.h"
#include "template/builtins.h"
#include "template/lexer.h"

namespace llamay::chat::internal {

inline constexpr int kMaxParseDepth = 128;

Result<std::unique_ptr<Program>> ParseProgram(std::vector<Token> tokens);

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Result<std::unique_ptr<Program>> Run();

  // Expressions (parser_expr.cc).
  Result<ExprPtr> ParseTuple(bool with_condexpr, bool explicit_parens = false);
  Result<ExprPtr> ParseExpression(bool with_condexpr = true);

 private:
  // Statements (parser.cc). ParseBody stops before a block whose name is in `end_tags`, consuming `{%`
  // and the name, and stores the name in *end.
  Status ParseBody(Body* body, const std::vector<std::string_view>& end_tags, std::string* end);
  Status ParseStatement(Body* body);
  Status ParseIf(Node* node);
  Status ParseFor(Node* node);
  Status ParseSet(Node* node);
  Status ParseMacro(Node* node);
  Result<std::vector<std::string>> ParseTargets();

  Result<ExprPtr> ParseCondExpr();
  Result<ExprPtr> ParseOr();
  Result<ExprPtr> ParseAnd();
  Result<ExprPtr> ParseNot();
  Result<ExprPtr> ParseCompare();
  Result<ExprPtr> ParseMath1();
  Result<ExprPtr> ParseConcat();
  Result<ExprPtr> ParseMath2();
  Result<ExprPtr> ParsePow();
  Result<ExprPtr> ParseUnary(bool with_filter);
  Result<ExprPtr> ParsePrimary();
  Result<ExprPtr> ParseList();
  Result<ExprPtr> ParseDict();
  Result<ExprPtr> ParsePostfix(ExprPtr node);
  Result<ExprPtr> ParseSubscript(ExprPtr node);
  Result<ExprPtr> ParseFilterExpr(ExprPtr node);
  Status ParseCallArgs(std::vector<CallArg>* args);
  Result<std::string> ParseDottedName(std::string_view what);

  const Token& Peek(size_t ahead = 0) const;
  const Token& Next();
  bool AtOp(std::string_view op, size_t ahead = 0) const;
  bool AtName(std::string_view name, size_t ahead = 0) const;
  Status Expect(TokenKind kind, std::string_view what);
  Status ExpectOp(std::string_view op);
  Status ExpectName(std::string_view name);
  Result<std::string> ExpectIdentifier(std::string_view what);
  Status ErrorHere(std::string_view message) const;
  ExprPtr NewExpr(Expr::Kind kind, const Token& at) const;

  // Guards recursion: call on entry of recursive productions.
  struct DepthGuard {
    explicit DepthGuard(Parser* p) : parser(p) { ++parser->depth_; }
    ~DepthGuard() { --parser->depth_; }
    Parser* parser;
  };
  Status CheckDepth() const;

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;  // for blocks open around the current position (break/continue validity)
};

}  // namespace llamay::chat::internal

#endif  // LLAMAY_TEMPLATE_PARSER_H_
