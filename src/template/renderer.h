// Renderer: executes a parsed Program against a context and produces the output text.
//
// Scoping follows Jinja2: the context and top-level `set`s live in the root scope; each iteration of a
// for loop gets a fresh scope (assignments inside a loop never leak out, hence namespace()); `if` opens
// no scope; a macro body sees the root scope and its own arguments only. Name lookup goes from the
// innermost scope outwards, then to the global functions.
//
// Limits (RenderLimits in chat_template.h) bound the output, the size of any list or string, the nesting of
// evaluation (recursive macros) and the total work, so that any template terminates with a Status. The
// work is one budget of steps: a statement, an expression or a loop iteration costs one, and what a
// render builds costs too (kBytesPerStep bytes of string or kItemsPerStep list items per step: the output,
// a concatenation, a filter's result, a repeated string). Copying a value costs nothing (values share
// their contents), so a hostile template's time is bounded by its budget whatever it does; an operation
// is given only what the remaining budget can pay for (Remaining()), so one step cannot build 32 MiB.
// Errors carry the line and column of the innermost expression or statement that failed.
//
// Thread-safety: a Renderer is single-use and single-threaded; the Program it reads is shared and
// immutable.
#ifndef LLAMAY_TEMPLATE_RENDERER_H_
#define LLAMAY_TEMPLATE_RENDERER_H_

#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "base/status.h"
#include "template/ast.h"
#include "template/ops.h"
#include "template/value.h"

namespace llamay::chat::internal {

class Renderer {
 public:
  static constexpr uint64_t kBytesPerStep = 64;  // string bytes built per step of the budget
  static constexpr uint64_t kItemsPerStep = 4;   // list items built per step of the budget

  explicit Renderer(const RenderLimits& limits) : limits_(limits) {}

  // REQUIRES: context is a dict (its items become the root scope).
  Result<std::string> Render(const Program& program, const Value& context);

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  using Scope = std::vector<std::pair<std::string, Value>>;

  // Statements (render.cc).
  Result<Flow> Exec(const Body& body);
  Result<Flow> ExecNode(const Node& node);
  Result<Flow> ExecFor(const Node& node);
  Status ExecSet(const Node& node);
  Status Bind(const std::vector<std::string>& targets, const Value& value);
  Status Append(std::string_view text);
  Result<std::string> Capture(const Body& body);

  // Expressions (renderer.cc).
  Result<Value> Eval(const Expr& e);
  Result<Value> EvalImpl(const Expr& e);
  Result<Value> EvalCall(const Expr& e);
  Result<Value> EvalCompare(const Expr& e);
  Result<Value> EvalBinary(const Expr& e);
  Result<CallArgs> EvalArgs(const std::vector<CallArg>& args);
  Result<Value> CallMacro(const MacroDef& macro, const CallArgs& args);
  Value Lookup(std::string_view name) const;
  void Assign(const std::string& name, Value value);
  Status CountStep();
  // Charges `units` steps (what was built).
  Status Charge(uint64_t units);
  // Charges an operation's operand, which it reads whole (a string's bytes; a list's, a dict's or, when
  // `iterates`, a string's items), so that repeating a cheap-looking operation on a big value pays.
  Status ChargeOperand(const Value& v, bool iterates);
  // limits_ with the string and list sizes capped by what the remaining budget can pay for.
  RenderLimits Remaining() const;

  const RenderLimits& limits_;
  std::vector<Scope> scopes_;
  // Every namespace this render assigned an attribute of. Namespaces are the one mutable kind, so a
  // reference cycle (`{% set ns.me = ns %}`, or two namespaces holding each other) is always closed by such
  // an assignment; emptying them when the render ends breaks every cycle, and the shared contents are freed.
  std::vector<Value> assigned_;
  std::unordered_set<const DictData*> assigned_set_;
  std::string out_;
  int depth_ = 0;
  int macro_depth_ = 0;
  int64_t steps_ = 0;
};

// Adds "line L, column C: " to an error that has no position yet, and a TemplateErrorDetail when it has
// none (kLimit for ResourceExhausted, kRuntime otherwise).
Status AtPosition(const Status& status, int line, int col);

}  // namespace llamay::chat::internal

#endif  // LLAMAY_TEMPLATE_RENDERER_H_
