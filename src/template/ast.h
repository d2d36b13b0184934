// The syntax tree of a parsed chat template: expressions (Expr) and statements (Node).
//
// Invariants: every node records the line and column of its first token (for error messages); children
// listed as required for a kind are never null. A Program owns the whole tree; macro Values point into it,
// so a Program outlives every render that uses it.
// Thread-safety: immutable after parsing; any number of renders may read one tree concurrently.
#ifndef LLAMAY_TEMPLATE_AST_H_
#define LLAMAY_TEMPLATE_AST_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/value.h"

namespace llamay::chat::internal {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

// One argument of a call, filter or test: positional when `name` is empty.
struct CallArg {
  std::string name;
  ExprPtr value;
};

struct Expr {
  enum class Kind : uint8_t {
    kLiteral,   // value
    kName,      // name
    kList,      // args = items; tuple marks `(a, b)`
    kDict,      // args = key0, value0, key1, value1, ...
    kGetAttr,   // args[0] . name
    kGetItem,   // args[0] [ args[1] ]
    kSlice,     // args[0] [ args[1] : args[2] : args[3] ]; omitted bounds are null
    kCall,      // args[0] ( call_args )
    kFilter,    // args[0] | name ( call_args )
    kTest,      // args[0] is [not] name ( call_args ); negated
    kUnary,     // name ("-", "+", "not") args[0]
    kBinary,    // args[0] name args[1]; name in + - * / // % ** ~ and or
    kCompare,   // args[0] ops[0] args[1] ops[1] args[2] ...; ops in == != < <= > >= in notin
    kCondExpr,  // args[0] if args[1] else args[2]; args[2] null without else
  };

  Kind kind = Kind::kLiteral;
  int line = 0;
  int col = 0;
  Value value;
  std::string name;
  bool tuple = false;
  bool negated = false;
  std::vector<ExprPtr> args;
  std::vector<CallArg> call_args;
  std::vector<std::string> ops;
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct MacroDef {
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;  // default value may be null
  Body body;
  int line = 0;
  int col = 0;
};

struct IfBranch {
  ExprPtr condition;  // null for the else branch
  Body body;
};

struct Node {
  enum class Kind : uint8_t {
    kText,      // text
    kOutput,    // {{ expr }}
    kIf,        // branches
    kFor,       // for targets in expr [if filter]: body [else: else_body]
    kSet,       // set targets = expr, or set targets[0].attr = expr when attr is not empty
    kSetBlock,  // set targets[0]: body rendered into a string
    kMacro,     // macro
    kBreak,
    kContinue,
    kBlock,        // a body rendered in place (HF's {% generation %})
    kFilterBlock,  // body rendered, bound to kFilterBodyName, then expr (a filter chain over that name)
  };

  Kind kind = Kind::kText;
  int line = 0;
  int col = 0;
  std::string text;
  ExprPtr expr;
  std::vector<IfBranch> branches;
  std::vector<std::string> targets;
  std::string attr;
  ExprPtr filter;
  Body body;
  Body else_body;
  std::unique_ptr<MacroDef> macro;
};

// The variable a filter block's chain reads its rendered body from (not a valid identifier, so a template
// cannot name it).
inline constexpr char kFilterBodyName[] = "\x01filter body";

struct Program {
  Body body;
};

}  // namespace llamay::chat::internal

#endif  // LLAMAY_TEMPLATE_AST_H_
