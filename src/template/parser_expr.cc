// Expression productions of the Parser (see parser.h for the precedence table).
#include "template/parser.h"

namespace llamay::chat::internal {

Result<ExprPtr> Parser::ParseTuple(bool with_condexpr, bool explicit_parens) {
  const Token& start = Peek();
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) LLAMAY_RETURN_IF_ERROR(ExpectOp(","));
    const Token& tok = Peek();
    if (tok.kind == TokenKind::kVarEnd || tok.kind == TokenKind::kBlockEnd || AtOp(")")) break;
    LLAMAY_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(with_condexpr));
    items.push_back(std::move(item));
    if (!AtOp(",")) break;
    is_tuple = true;
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parens) return ErrorHere("expected an expression");
  }
  ExprPtr tuple = NewExpr(Expr::Kind::kList, start);
  tuple->tuple = true;
  tuple->args = std::move(items);
  return tuple;
}

Result<ExprPtr> Parser::ParseExpression(bool with_condexpr) {
  DepthGuard guard(this);
  LLAMAY_RETURN_IF_ERROR(CheckDepth());
  return with_condexpr ? ParseCondExpr() : ParseOr();
}

Result<ExprPtr> Parser::ParseCondExpr() {
  LLAMAY_ASSIGN_OR_RETURN(ExprPtr expr, ParseOr());
  while (AtName("if")) {
    const Token& tok = Next();
    ExprPtr cond = NewExpr(Expr::Kind::kCondExpr, tok);
    cond->args.push_back(std::move(expr));
    LLAMAY_ASSIGN_OR_RETURN(ExprPtr test, ParseOr());
    cond->args.push_back(std::move(test));
    if (AtName("else")) {
      Next();
      LLAMAY_ASSIGN_OR_RETURN(ExprPtr otherwise, ParseExpression(/*with_condexpr=*/true));
      cond->args.push_back(std::move(otherwise));
    } else {
      cond->args.push_back(nullptr);
    }
    expr = std::move(cond);
  }
  return expr;
}

namespace {

ExprPtr MakeBinary(ExprPtr left, ExprPtr right, std::string op, int line, int col) {
  auto e = std::make_unique<Expr>();
  e->kind = Expr::Kind::kBinary;
  e->line = line;
  e->col = col;
  e->name = std::move(op);
  e->args.push_back(std::move(left));
  e->args.push_back(std::move(right));
  return e;
}

}  // namespace

Result<ExprPtr> Parser::ParseOr() {
  LLAMAY_ASSIGN_OR_RETURN(ExprPtr left, ParseAnd());
  while (AtName("or")) {
    const Token& tok = Next();
    LLAMAY_ASSIGN_OR_RETURN(ExprPtr right, ParseAnd());
    left = MakeBinary(std::move(left), std::move(right), "or", tok.line, tok.col);
  }
  return left;
}

Result<ExprPtr> Parser::ParseAnd() {
  LLAMAY_ASSIGN_OR_RETURN(ExprPtr left, ParseNot());
  while (AtName("and")) {
    const Token& tok = Next();
    LLAMAY_ASSIGN_OR_RETURN(ExprPtr right, ParseNot());
    left = MakeBinary(std::move(left), std::move(right), "and", tok.line, tok.col);
  }
  return left;
}

Result<ExprPtr> Parser::ParseNot() {
  if (!AtName("not")) return ParseCompare();
  DepthGuard guard(this);
  LLAMAY_RETURN_IF_ERROR(CheckDepth());
  ExprPtr node = NewExpr(Expr::Kind::kUnary, Next());
  node->name = "not";
  LLAMAY_ASSIGN_OR_RETURN(ExprPtr operand, ParseNot());
  node->args.push_back(std::move(operand));
  return node;
}

Result<ExprPtr> Parser::ParseCompare() {
  const Token& start = Peek();
  LLAMAY_ASSIGN_OR_RETURN(ExprPtr first, ParseMath1());
  ExprPtr cmp;
  while (true) {
    std::string op;
    const Token& tok = Peek();
    if (tok.kind == TokenKind::kOp && (tok.text == "==" || tok.text == "!=" || tok.text == "<" ||
                                       tok.text == "<=" || tok.text == ">" || tok.text == ">=")) {
      op = tok.text;
      Next();
    } else if (AtName("in")) {
      op = "in";
      Next();
    } else if (AtName("not") && AtName("in", 1)) {
      op = "notin";
      Next();
      Next();
    } else {
      break;
    }
    if (cmp == nullptr) {
      cmp = NewExpr(Expr::Kind::kCompare, start);
      cmp->args.push_back(std::move(first));
    }
    LLAMAY_ASSIGN_OR_RETURN(ExprPtr operand, ParseMath1());
    cmp->ops.push_back(std::move(op));
    cmp->args.push_back(std::move(operand));
  }
  return cmp != nullptr ? std::move(cmp) : std::move(first);
}

Result<ExprPtr> Parser::ParseMath1() {
  LLAMAY_ASSIGN_OR_RETURN(ExprPtr left, ParseConcat());
  while (AtOp("+") || AtOp("-")) {
    const Token& tok = Next();
    LLAMAY_ASSIGN_OR_RETURN(ExprPtr right, ParseConcat());
    left = MakeBinary(std::move(left), std::move(right), tok.text, tok.line, tok.col);
  }
  return left;
}

Result<ExprPtr> Parser::ParseConcat() {
  LLAMAY_ASSIGN_OR_RETURN(ExprPtr left, ParseMath2());
  while (AtOp("~")) {
    const Token& tok = Next();
    LLAMAY_ASSIGN_OR_RETURN(ExprPtr right, ParseMath2());
    left = MakeBinary(std::move(left), std::move(right), "~", tok.line, tok.col);
  }
  return left;
}

Result<ExprPtr> Parser::ParseMath2() {
  LLAMAY_ASSIGN_OR_RETURN(ExprPtr left, ParsePow());
  while (AtOp("*") || AtOp("/") || AtOp("//") || AtOp("%")) {
    const Token& tok = Next();
    LLAMAY_ASSIGN_OR_RETURN(ExprPtr right, ParsePow());
    left = MakeBinary(std::move(left), std::move(right), tok.text, tok.line, tok.col);
  }
  return left;
}

Result<ExprPtr> Parser::ParsePow() {
  LLAMAY_ASSIGN_OR_RETURN(ExprPtr left, ParseUnary(/*with_filter=*/true));
  while (AtOp("**")) {
    const Token& tok = Next();
    LLAMAY_ASSIGN_OR_RETURN(ExprPtr right, ParseUnary(/*with_filter=*/true));
    left = MakeBinary(std::move(left), std::move(right), "**", tok.line, tok.col);
  }
  return left;
}

Result<ExprPtr> Parser::ParseUnary(bool with_filter) {
  DepthGuard guard(this);
  LLAMAY_RETURN_IF_ERROR(CheckDepth());
  ExprPtr node;
  if (AtOp("-") || AtOp("+")) {
    const Token& tok = Next();
    node = NewExpr(Expr::Kind::kUnary, tok);
    node->name = tok.text;
    LLAMAY_ASSIGN_OR_RETURN(ExprPtr operand, ParseUnary(/*with_filter=*/false));
    node->args.push_back(std::move(operand));
  } else {
    LLAMAY_ASSIGN_OR_RETURN(node, ParsePrimary());
    LLAMAY_ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
  }
  if (with_filter) return ParseFilterExpr(std::move(node));
  return node;
}

Result<ExprPtr> Parser::ParsePrimary() {
  const Token& tok = Peek();
  switch (tok.kind) {
    case TokenKind::kName: {
      ExprPtr node = NewExpr(Expr::Kind::kLiteral, tok);
      const std::string& n = tok.text;
      if (n == "true" || n == "True") {
        node->value = Value::Bool(true);
      } else if (n == "false" || n == "False") {
        node->value = Value::Bool(false);
      } else if (n == "none" || n == "None") {
        node->value = Value::None();
      } else {
        node->kind = Expr::Kind::kName;
        node->name = n;
      }
      Next();
      return node;
    }
    case TokenKind::kString: {
      ExprPtr node = NewExpr(Expr::Kind::kLiteral, tok);
      std::string s;
      while (Peek().kind == TokenKind::kString) s += Next().text;  // adjacent literals concatenate
      node->value = Value::String(std::move(s));
      return node;
    }
    case TokenKind::kInt:
    case TokenKind::kFloat: {
      ExprPtr node = NewExpr(Expr::Kind::kLiteral, tok);
      node->value = tok.kind == TokenKind::kInt ? Value::Int(tok.int_value) : Value::Float(tok.float_value);
      Next();
      return node;
    }
    case TokenKind::kOp:
      if (tok.text == "(") {
        Next();
        LLAMAY_ASSIGN_OR_RETURN(ExprPtr inner, ParseTuple(/*with_condexpr=*/true, /*explicit_parens=*/true));
        LLAMAY_RETURN_IF_ERROR(ExpectOp(")"));
        return inner;
      }
      if (tok.text == "[") return ParseList();
      if (tok.text == "{") return ParseDict();
      break;
    default:
      break;
  }
  return ErrorHere(tok.kind == TokenKind::kOp ? "unexpected '" + tok.text + "'" : "expected an expression");
}

Result<ExprPtr> Parser::ParseList() {
  ExprPtr node = NewExpr(Expr::Kind::kList, Next());
  while (!AtOp("]")) {
    if (!node->args.empty()) LLAMAY_RETURN_IF_ERROR(ExpectOp(","));
    if (AtOp("]")) break;
    LLAMAY_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression());
    node->args.push_back(std::move(item));
  }
  Next();
  return node;
}

Result<ExprPtr> Parser::ParseDict() {
  ExprPtr node = NewExpr(Expr::Kind::kDict, Next());
  while (!AtOp("}")) {
    if (!node->args.empty()) LLAMAY_RETURN_IF_ERROR(ExpectOp(","));
    if (AtOp("}")) break;
    LLAMAY_ASSIGN_OR_RETURN(ExprPtr key, ParseExpression());
    LLAMAY_RETURN_IF_ERROR(ExpectOp(":"));
    LLAMAY_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
    node->args.push_back(std::move(key));
    node->args.push_back(std::move(value));
  }
  Next();
  return node;
}

Result<ExprPtr> Parser::ParsePostfix(ExprPtr node) {
  while (true) {
    if (AtOp(".")) {
      const Token& dot = Next();
      const Token& tok = Peek();
      if (tok.kind == TokenKind::kName) {
        ExprPtr attr = NewExpr(Expr::Kind::kGetAttr, dot);
        attr->name = Next().text;
        attr->args.push_back(std::move(node));
        node = std::move(attr);
      } else if (tok.kind == TokenKind::kInt) {
        ExprPtr item = NewExpr(Expr::Kind::kGetItem, dot);
        item->args.push_back(std::move(node));
        ExprPtr index = NewExpr(Expr::Kind::kLiteral, tok);
        index->value = Value::Int(Next().int_value);
        item->args.push_back(std::move(index));
        node = std::move(item);
      } else {
        return ErrorHere("expected an attribute name after '.'");
      }
    } else if (AtOp("[")) {
      LLAMAY_ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node)));
    } else if (AtOp("(")) {
      ExprPtr call = NewExpr(Expr::Kind::kCall, Peek());
      LLAMAY_RETURN_IF_ERROR(ParseCallArgs(&call->call_args));
      call->args.push_back(std::move(node));
      node = std::move(call);
    } else {
      return node;
    }
  }
}

Result<ExprPtr> Parser::ParseSubscript(ExprPtr node) {
  const Token& open = Next();  // [
  ExprPtr bounds[3];
  int colons = 0;
  for (int part = 0; part < 3; ++part) {
    if (!AtOp(":") && !AtOp("]")) {
      LLAMAY_ASSIGN_OR_RETURN(bounds[part], ParseExpression());
    }
    if (part < 2 && AtOp(":")) {
      Next();
      ++colons;
      continue;
    }
    break;
  }
  LLAMAY_RETURN_IF_ERROR(ExpectOp("]"));
  if (colons == 0) {
    if (bounds[0] == nullptr) return SyntaxError(open.line, open.col, "expected a subscript");
    ExprPtr item = NewExpr(Expr::Kind::kGetItem, open);
    item->args.push_back(std::move(node));
    item->args.push_back(std::move(bounds[0]));
    return item;
  }
  ExprPtr slice = NewExpr(Expr::Kind::kSlice, open);
  slice->args.push_back(std::move(node));
  for (auto& b : bounds) slice->args.push_back(std::move(b));
  return slice;
}

Result<ExprPtr> Parser::ParseFilterExpr(ExprPtr node) {
  while (true) {
    if (AtOp("|")) {
      const Token& bar = Next();
      ExprPtr filter = NewExpr(Expr::Kind::kFilter, bar);
      LLAMAY_ASSIGN_OR_RETURN(filter->name, ParseDottedName("a filter name"));
      if (AtOp("(")) LLAMAY_RETURN_IF_ERROR(ParseCallArgs(&filter->call_args));
      filter->args.push_back(std::move(node));
      node = std::move(filter);
    } else if (AtName("is")) {
      const Token& is = Next();
      ExprPtr test = NewExpr(Expr::Kind::kTest, is);
      if (AtName("not")) {
        Next();
        test->negated = true;
      }
      LLAMAY_ASSIGN_OR_RETURN(test->name, ParseDottedName("a test name"));
      const Token& tok = Peek();
      if (AtOp("(")) {
        LLAMAY_RETURN_IF_ERROR(ParseCallArgs(&test->call_args));
      } else if ((tok.kind == TokenKind::kName && tok.text != "else" && tok.text != "or" &&
                  tok.text != "and") ||
                 tok.kind == TokenKind::kString || tok.kind == TokenKind::kInt ||
                 tok.kind == TokenKind::kFloat || AtOp("[") || AtOp("{")) {
        if (AtName("is")) return ErrorHere("you cannot chain multiple tests with is");
        CallArg arg;
        LLAMAY_ASSIGN_OR_RETURN(arg.value, ParsePrimary());
        LLAMAY_ASSIGN_OR_RETURN(arg.value, ParsePostfix(std::move(arg.value)));
        test->call_args.push_back(std::move(arg));
      }
      test->args.push_back(std::move(node));
      node = std::move(test);
    } else if (AtOp("(")) {
      ExprPtr call = NewExpr(Expr::Kind::kCall, Peek());
      LLAMAY_RETURN_IF_ERROR(ParseCallArgs(&call->call_args));
      call->args.push_back(std::move(node));
      node = std::move(call);
    } else {
      return node;
    }
  }
}

Result<std::string> Parser::ParseDottedName(std::string_view what) {
  LLAMAY_ASSIGN_OR_RETURN(std::string name, ExpectIdentifier(what));
  while (AtOp(".") && Peek(1).kind == TokenKind::kName) {
    Next();
    name += "." + Next().text;
  }
  return name;
}

Status Parser::ParseCallArgs(std::vector<CallArg>* args) {
  LLAMAY_RETURN_IF_ERROR(ExpectOp("("));
  bool seen_keyword = false;
  while (!AtOp(")")) {
    if (!args->empty()) LLAMAY_RETURN_IF_ERROR(ExpectOp(","));
    if (AtOp(")")) break;
    if (AtOp("*") || AtOp("**")) return ErrorHere("*args and **kwargs in calls are not supported");
    CallArg arg;
    if (Peek().kind == TokenKind::kName && AtOp("=", 1)) {
      arg.name = Next().text;
      Next();
      seen_keyword = true;
    } else if (seen_keyword) {
      return ErrorHere("positional argument follows keyword argument");
    }
    LLAMAY_ASSIGN_OR_RETURN(arg.value, ParseExpression());
    args->push_back(std::move(arg));
  }
  Next();  // )
  return Status::Ok();
}

}  // namespace llamay::chat::internal
