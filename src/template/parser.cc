#include "template/parser.h"

#include <algorithm>

namespace llamay::chat::internal {

Result<std::unique_ptr<Program>> ParseProgram(std::vector<Token> tokens) {
  return Parser(std::move(tokens)).Run();
}

namespace {

// Jinja2's compile-time check for unknown filters and tests, which it skips in "soft" frames: an if
// statement (test and branches) and a conditional expression, but not the loops and macros inside them.
Status CheckExprNames(const Expr& e, bool soft) {
  soft = soft || e.kind == Expr::Kind::kCondExpr;
  if (!soft && e.kind == Expr::Kind::kFilter && !IsKnownFilter(e.name)) {
    return SyntaxError(e.line, e.col, "no filter named '" + e.name + "'");
  }
  if (!soft && e.kind == Expr::Kind::kTest && !IsKnownTest(e.name)) {
    return SyntaxError(e.line, e.col, "no test named '" + e.name + "'");
  }
  for (const ExprPtr& child : e.args) {
    if (child != nullptr) LLAMAY_RETURN_IF_ERROR(CheckExprNames(*child, soft));
  }
  for (const CallArg& arg : e.call_args) LLAMAY_RETURN_IF_ERROR(CheckExprNames(*arg.value, soft));
  return Status::Ok();
}

Status CheckNames(const Body& body, bool soft) {
  for (const NodePtr& node : body) {
    if (node->expr != nullptr) {
      const bool inner = node->kind == Node::Kind::kFilterBlock;
      LLAMAY_RETURN_IF_ERROR(CheckExprNames(*node->expr, soft && !inner));
    }
    if (node->filter != nullptr) LLAMAY_RETURN_IF_ERROR(CheckExprNames(*node->filter, false));
    for (const IfBranch& branch : node->branches) {
      if (branch.condition != nullptr) LLAMAY_RETURN_IF_ERROR(CheckExprNames(*branch.condition, true));
      LLAMAY_RETURN_IF_ERROR(CheckNames(branch.body, true));
    }
    const bool inner_frame = node->kind == Node::Kind::kFor || node->kind == Node::Kind::kSetBlock ||
                             node->kind == Node::Kind::kFilterBlock;
    LLAMAY_RETURN_IF_ERROR(CheckNames(node->body, soft && !inner_frame));
    LLAMAY_RETURN_IF_ERROR(CheckNames(node->else_body, false));
    if (node->macro != nullptr) {
      for (const auto& [name, value] : node->macro->params) {
        if (value != nullptr) LLAMAY_RETURN_IF_ERROR(CheckExprNames(*value, false));
      }
      LLAMAY_RETURN_IF_ERROR(CheckNames(node->macro->body, false));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Program>> Parser::Run() {
  auto program = std::make_unique<Program>();
  std::string end;
  LLAMAY_RETURN_IF_ERROR(ParseBody(&program->body, {}, &end));
  LLAMAY_RETURN_IF_ERROR(CheckNames(program->body, /*soft=*/false));
  return program;
}

// ---- token helpers ----

const Token& Parser::Peek(size_t ahead) const {
  size_t i = std::min(pos_ + ahead, tokens_.size() - 1);  // the last token is kEof
  return tokens_[i];
}

const Token& Parser::Next() {
  const Token& tok = Peek();
  if (pos_ < tokens_.size() - 1) ++pos_;
  return tok;
}

bool Parser::AtOp(std::string_view op, size_t ahead) const {
  const Token& tok = Peek(ahead);
  return tok.kind == TokenKind::kOp && tok.text == op;
}

bool Parser::AtName(std::string_view name, size_t ahead) const {
  const Token& tok = Peek(ahead);
  return tok.kind == TokenKind::kName && tok.text == name;
}

Status Parser::ErrorHere(std::string_view message) const {
  const Token& tok = Peek();
  return SyntaxError(tok.line, tok.col, message);
}

namespace {

std::string Describe(const Token& tok) {
  switch (tok.kind) {
    case TokenKind::kText:
      return "text";
    case TokenKind::kVarBegin:
      return "'{{'";
    case TokenKind::kVarEnd:
      return "end of print statement";
    case TokenKind::kBlockBegin:
      return "'{%'";
    case TokenKind::kBlockEnd:
      return "end of statement block";
    case TokenKind::kEof:
      return "end of template";
    case TokenKind::kString:
      return "string";
    case TokenKind::kInt:
    case TokenKind::kFloat:
      return "number";
    default:
      return "'" + tok.text + "'";
  }
}

}  // namespace

Status Parser::Expect(TokenKind kind, std::string_view what) {
  if (Peek().kind != kind) {
    return ErrorHere("expected " + std::string(what) + ", got " + Describe(Peek()));
  }
  Next();
  return Status::Ok();
}

Status Parser::ExpectOp(std::string_view op) {
  if (!AtOp(op)) return ErrorHere("expected '" + std::string(op) + "', got " + Describe(Peek()));
  Next();
  return Status::Ok();
}

Status Parser::ExpectName(std::string_view name) {
  if (!AtName(name)) return ErrorHere("expected '" + std::string(name) + "', got " + Describe(Peek()));
  Next();
  return Status::Ok();
}

Result<std::string> Parser::ExpectIdentifier(std::string_view what) {
  if (Peek().kind != TokenKind::kName) {
    return ErrorHere("expected " + std::string(what) + ", got " + Describe(Peek()));
  }
  return Next().text;
}

ExprPtr Parser::NewExpr(Expr::Kind kind, const Token& at) const {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = at.line;
  e->col = at.col;
  return e;
}

Status Parser::CheckDepth() const {
  if (depth_ > kMaxParseDepth) return ErrorHere("template nested too deeply");
  return Status::Ok();
}

// ---- statements ----

Status Parser::ParseBody(Body* body, const std::vector<std::string_view>& end_tags, std::string* end) {
  DepthGuard guard(this);
  LLAMAY_RETURN_IF_ERROR(CheckDepth());
  while (true) {
    const Token& tok = Peek();
    switch (tok.kind) {
      case TokenKind::kEof:
        if (!end_tags.empty()) {
          std::string expected;
          for (std::string_view t : end_tags)
            expected += (expected.empty() ? "'" : " or '") + std::string(t) + "'";
          return ErrorHere("unexpected end of template, expected " + expected);
        }
        return Status::Ok();
      case TokenKind::kText: {
        auto node = std::make_unique<Node>();
        node->kind = Node::Kind::kText;
        node->line = tok.line;
        node->col = tok.col;
        node->text = Next().text;
        body->push_back(std::move(node));
        break;
      }
      case TokenKind::kVarBegin: {
        auto node = std::make_unique<Node>();
        node->kind = Node::Kind::kOutput;
        node->line = tok.line;
        node->col = tok.col;
        Next();
        LLAMAY_ASSIGN_OR_RETURN(node->expr, ParseTuple(/*with_condexpr=*/true));
        LLAMAY_RETURN_IF_ERROR(Expect(TokenKind::kVarEnd, "end of print statement"));
        body->push_back(std::move(node));
        break;
      }
      case TokenKind::kBlockBegin: {
        const Token& name = Peek(1);
        if (name.kind != TokenKind::kName) {
          Next();
          return ErrorHere("expected a statement name, got " + Describe(Peek()));
        }
        if (std::find(end_tags.begin(), end_tags.end(), name.text) != end_tags.end()) {
          Next();
          *end = Next().text;
          return Status::Ok();
        }
        LLAMAY_RETURN_IF_ERROR(ParseStatement(body));
        break;
      }
      default:
        return ErrorHere("unexpected " + Describe(tok));
    }
  }
}

Status Parser::ParseStatement(Body* body) {
  Next();  // {%
  const Token& name_tok = Next();
  const std::string name = name_tok.text;
  auto node = std::make_unique<Node>();
  node->line = name_tok.line;
  node->col = name_tok.col;
  if (name == "if") {
    LLAMAY_RETURN_IF_ERROR(ParseIf(node.get()));
  } else if (name == "for") {
    LLAMAY_RETURN_IF_ERROR(ParseFor(node.get()));
  } else if (name == "set") {
    LLAMAY_RETURN_IF_ERROR(ParseSet(node.get()));
  } else if (name == "macro") {
    LLAMAY_RETURN_IF_ERROR(ParseMacro(node.get()));
  } else if (name == "break" || name == "continue") {
    if (loop_depth_ == 0) return SyntaxError(name_tok.line, name_tok.col, "'" + name + "' outside of a loop");
    node->kind = name == "break" ? Node::Kind::kBreak : Node::Kind::kContinue;
    LLAMAY_RETURN_IF_ERROR(Expect(TokenKind::kBlockEnd, "end of statement block"));
  } else if (name == "filter") {
    node->kind = Node::Kind::kFilterBlock;
    ExprPtr chain = NewExpr(Expr::Kind::kName, name_tok);
    chain->name = kFilterBodyName;
    do {
      const Token& at = Peek();
      ExprPtr filter = NewExpr(Expr::Kind::kFilter, at);
      LLAMAY_ASSIGN_OR_RETURN(filter->name, ParseDottedName("a filter name"));
      if (AtOp("(")) LLAMAY_RETURN_IF_ERROR(ParseCallArgs(&filter->call_args));
      filter->args.push_back(std::move(chain));
      chain = std::move(filter);
    } while (AtOp("|") && Next().kind == TokenKind::kOp);
    node->expr = std::move(chain);
    LLAMAY_RETURN_IF_ERROR(Expect(TokenKind::kBlockEnd, "end of statement block"));
    std::string end;
    LLAMAY_RETURN_IF_ERROR(ParseBody(&node->body, {"endfilter"}, &end));
    LLAMAY_RETURN_IF_ERROR(Expect(TokenKind::kBlockEnd, "end of statement block"));
  } else if (name == "generation") {
    node->kind = Node::Kind::kBlock;
    LLAMAY_RETURN_IF_ERROR(Expect(TokenKind::kBlockEnd, "end of statement block"));
    std::string end;
    LLAMAY_RETURN_IF_ERROR(ParseBody(&node->body, {"endgeneration"}, &end));
    LLAMAY_RETURN_IF_ERROR(Expect(TokenKind::kBlockEnd, "end of statement block"));
  } else {
    return SyntaxError(name_tok.line, name_tok.col, "unknown or unsupported tag '" + name + "'");
  }
  body->push_back(std::move(node));
  return Status::Ok();
}

Status Parser::ParseIf(Node* node) {
  node->kind = Node::Kind::kIf;
  ExprPtr condition;
  LLAMAY_ASSIGN_OR_RETURN(condition, ParseTuple(/*with_condexpr=*/false));
  while (true) {
    LLAMAY_RETURN_IF_ERROR(Expect(TokenKind::kBlockEnd, "end of statement block"));
    IfBranch branch;
    branch.condition = std::move(condition);
    std::string end;
    const bool is_else = branch.condition == nullptr;
    LLAMAY_RETURN_IF_ERROR(ParseBody(&branch.body,
                                     is_else ? std::vector<std::string_view>{"endif"}
                                             : std::vector<std::string_view>{"elif", "else", "endif"},
                                     &end));
    node->branches.push_back(std::move(branch));
    if (end == "endif") break;
    if (end == "elif") {
      LLAMAY_ASSIGN_OR_RETURN(condition, ParseTuple(/*with_condexpr=*/false));
    } else {
      condition = nullptr;
    }
  }
  return Expect(TokenKind::kBlockEnd, "end of statement block");
}

Result<std::vector<std::string>> Parser::ParseTargets() {
  const bool parens = AtOp("(");
  if (parens) Next();
  std::vector<std::string> targets;
  while (true) {
    LLAMAY_ASSIGN_OR_RETURN(std::string name, ExpectIdentifier("a variable name"));
    targets.push_back(std::move(name));
    if (!AtOp(",")) break;
    Next();
    if (Peek().kind != TokenKind::kName) break;  // trailing comma
  }
  if (parens) LLAMAY_RETURN_IF_ERROR(ExpectOp(")"));
  return targets;
}

Status Parser::ParseFor(Node* node) {
  node->kind = Node::Kind::kFor;
  LLAMAY_ASSIGN_OR_RETURN(node->targets, ParseTargets());
  LLAMAY_RETURN_IF_ERROR(ExpectName("in"));
  LLAMAY_ASSIGN_OR_RETURN(node->expr, ParseTuple(/*with_condexpr=*/false));
  if (AtName("if")) {
    Next();
    LLAMAY_ASSIGN_OR_RETURN(node->filter, ParseExpression());
  }
  if (AtName("recursive")) return ErrorHere("recursive loops are not supported");
  LLAMAY_RETURN_IF_ERROR(Expect(TokenKind::kBlockEnd, "end of statement block"));
  std::string end;
  ++loop_depth_;
  Status status = ParseBody(&node->body, {"endfor", "else"}, &end);
  --loop_depth_;
  LLAMAY_RETURN_IF_ERROR(status);
  if (end == "else") {
    LLAMAY_RETURN_IF_ERROR(Expect(TokenKind::kBlockEnd, "end of statement block"));
    LLAMAY_RETURN_IF_ERROR(ParseBody(&node->else_body, {"endfor"}, &end));
  }
  return Expect(TokenKind::kBlockEnd, "end of statement block");
}

Status Parser::ParseSet(Node* node) {
  node->kind = Node::Kind::kSet;
  if (Peek().kind == TokenKind::kName && AtOp(".", 1)) {
    node->targets.push_back(Next().text);
    Next();
    LLAMAY_ASSIGN_OR_RETURN(node->attr, ExpectIdentifier("an attribute name"));
  } else {
    LLAMAY_ASSIGN_OR_RETURN(node->targets, ParseTargets());
  }
  if (AtOp("=")) {
    Next();
    LLAMAY_ASSIGN_OR_RETURN(node->expr, ParseTuple(/*with_condexpr=*/true));
    return Expect(TokenKind::kBlockEnd, "end of statement block");
  }
  if (node->targets.size() != 1 || !node->attr.empty()) return ErrorHere("expected '='");
  node->kind = Node::Kind::kSetBlock;
  LLAMAY_RETURN_IF_ERROR(Expect(TokenKind::kBlockEnd, "end of statement block"));
  std::string end;
  LLAMAY_RETURN_IF_ERROR(ParseBody(&node->body, {"endset"}, &end));
  return Expect(TokenKind::kBlockEnd, "end of statement block");
}

Status Parser::ParseMacro(Node* node) {
  node->kind = Node::Kind::kMacro;
  node->macro = std::make_unique<MacroDef>();
  MacroDef& macro = *node->macro;
  macro.line = node->line;
  macro.col = node->col;
  LLAMAY_ASSIGN_OR_RETURN(macro.name, ExpectIdentifier("a macro name"));
  LLAMAY_RETURN_IF_ERROR(ExpectOp("("));
  while (!AtOp(")")) {
    if (!macro.params.empty()) LLAMAY_RETURN_IF_ERROR(ExpectOp(","));
    if (AtOp(")")) break;
    LLAMAY_ASSIGN_OR_RETURN(std::string param, ExpectIdentifier("a parameter name"));
    ExprPtr default_value;
    if (AtOp("=")) {
      Next();
      LLAMAY_ASSIGN_OR_RETURN(default_value, ParseExpression());
    } else if (!macro.params.empty() && macro.params.back().second != nullptr) {
      return ErrorHere("non-default argument follows default argument");
    }
    macro.params.emplace_back(std::move(param), std::move(default_value));
  }
  Next();  // )
  LLAMAY_RETURN_IF_ERROR(Expect(TokenKind::kBlockEnd, "end of statement block"));
  std::string end;
  const int saved_loop_depth = loop_depth_;
  loop_depth_ = 0;
  Status status = ParseBody(&macro.body, {"endmacro"}, &end);
  loop_depth_ = saved_loop_depth;
  LLAMAY_RETURN_IF_ERROR(status);
  return Expect(TokenKind::kBlockEnd, "end of statement block");
}

}  // namespace llamay::chat::internal
