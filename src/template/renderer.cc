// Expression evaluation of the Renderer.
#include "template/renderer.h"

#include <algorithm>

#include "template/builtins.h"
#include "template/chat_template.h"

namespace llamay::chat::internal {

Status AtPosition(const Status& status, int line, int col) {
  if (status.ok()) return status;
  int detail = status.detail();
  if (detail == 0) {
    detail =
        static_cast<int>(status.code() == StatusCode::kResourceExhausted ? TemplateErrorDetail::kLimit
                                                                         : TemplateErrorDetail::kRuntime);
  }
  std::string message = status.message();
  if (message.rfind("line ", 0) != 0) {
    message = "line " + std::to_string(line) + ", column " + std::to_string(col) + ": " + message;
  }
  return Status(status.code(), std::move(message), detail);
}

namespace {

// How an expression reads in an error message: `messages[0].role`.
std::string Describe(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::kName:
      return e.name;
    case Expr::Kind::kGetAttr:
      return Describe(*e.args[0]) + "." + e.name;
    case Expr::Kind::kGetItem:
      if (e.args[1]->kind == Expr::Kind::kLiteral)
        return Describe(*e.args[0]) + "[" + Repr(e.args[1]->value) + "]";
      return Describe(*e.args[0]) + "[...]";
    case Expr::Kind::kCall:
      return Describe(*e.args[0]) + "(...)";
    default:
      return "value";
  }
}

Status UndefinedError(const Expr& e) {
  return InvalidArgumentError(StrCat({"'", Describe(e), "' is undefined"}));
}

}  // namespace

Status Renderer::CountStep() { return Charge(1); }

Status Renderer::Charge(uint64_t units) {
  steps_ += static_cast<int64_t>(std::min<uint64_t>(units, uint64_t{1} << 40));
  if (steps_ > limits_.max_steps)
    return ResourceExhaustedError("template exceeds its render budget of " + std::to_string(limits_.max_steps) +
                                  " steps (statements, loop iterations and bytes built)");
  return Status::Ok();
}

Status Renderer::ChargeOperand(const Value& v, bool iterates) {
  uint64_t items = 0;
  if (v.is_string()) {
    if (!iterates) return Charge(v.AsString().size() / kBytesPerStep);
    items = v.AsString().size();  // one value per character
  } else if (v.is_list()) {
    items = v.AsList().size();
  } else if (v.is_dict() || v.is_namespace()) {
    items = v.AsDict().items.size();
  }
  if (items > Remaining().max_items) return ResourceExhaustedError("an operand exceeds the render budget");
  return Charge(items / kItemsPerStep);
}

RenderLimits Renderer::Remaining() const {
  RenderLimits r = limits_;
  const uint64_t left = steps_ >= limits_.max_steps ? 0 : static_cast<uint64_t>(limits_.max_steps - steps_);
  r.max_output_bytes = static_cast<size_t>(std::min<uint64_t>(limits_.max_output_bytes, left * kBytesPerStep));
  r.max_items = static_cast<size_t>(std::min<uint64_t>(limits_.max_items, left * kItemsPerStep));
  return r;
}

Value Renderer::Lookup(std::string_view name) const {
  for (auto scope = scopes_.rbegin(); scope != scopes_.rend(); ++scope) {
    for (const auto& [k, v] : *scope) {
      if (k == name) return v;
    }
  }
  if (IsGlobalFunction(name)) return Value::Builtin(std::string(name));
  return Value();
}

void Renderer::Assign(const std::string& name, Value value) {
  for (auto& [k, v] : scopes_.back()) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  scopes_.back().emplace_back(name, std::move(value));
}

Result<Value> Renderer::Eval(const Expr& e) {
  LLAMAY_RETURN_IF_ERROR(AtPosition(CountStep(), e.line, e.col));
  struct DepthGuard {
    explicit DepthGuard(int* d) : depth(d) { ++*depth; }
    ~DepthGuard() { --*depth; }
    int* depth;
  } guard(&depth_);
  if (depth_ > limits_.max_depth) {
    return AtPosition(ResourceExhaustedError("template evaluation nested too deeply"), e.line, e.col);
  }
  Result<Value> result = EvalImpl(e);
  if (!result.ok()) return AtPosition(result.status(), e.line, e.col);
  // What this expression built (a name, an attribute or an item only shares a value that exists).
  if (e.kind != Expr::Kind::kName && e.kind != Expr::Kind::kGetAttr && e.kind != Expr::Kind::kGetItem &&
      e.kind != Expr::Kind::kLiteral && e.kind != Expr::Kind::kCondExpr) {
    uint64_t cost = 0;
    if (result->is_string()) cost = result->AsString().size() / kBytesPerStep;
    if (result->is_list()) cost = result->AsList().size() / kItemsPerStep;
    if (cost > 0) LLAMAY_RETURN_IF_ERROR(AtPosition(Charge(cost), e.line, e.col));
  }
  return result;
}

Result<CallArgs> Renderer::EvalArgs(const std::vector<CallArg>& args) {
  CallArgs out;
  for (const CallArg& arg : args) {
    LLAMAY_ASSIGN_OR_RETURN(Value v, Eval(*arg.value));
    if (arg.name.empty()) {
      out.positional.push_back(std::move(v));
    } else {
      out.named.emplace_back(arg.name, std::move(v));
    }
  }
  return out;
}

Result<Value> Renderer::EvalImpl(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::kLiteral:
      return e.value;
    case Expr::Kind::kName:
      return Lookup(e.name);
    case Expr::Kind::kList: {
      List items;
      for (const ExprPtr& item : e.args) {
        LLAMAY_ASSIGN_OR_RETURN(Value v, Eval(*item));
        items.push_back(std::move(v));
      }
      return Value::MakeList(std::move(items), e.tuple);
    }
    case Expr::Kind::kDict: {
      DictData d;
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        LLAMAY_ASSIGN_OR_RETURN(Value key, Eval(*e.args[i]));
        if (!key.is_string()) return InvalidArgumentError("dict literal keys must be strings");
        LLAMAY_ASSIGN_OR_RETURN(Value v, Eval(*e.args[i + 1]));
        d.Set(key.AsString(), std::move(v));
      }
      return Value::MakeDict(std::move(d.items));
    }
    case Expr::Kind::kGetAttr: {
      LLAMAY_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0]));
      if (obj.is_undefined()) return UndefinedError(*e.args[0]);
      return GetAttr(obj, e.name);
    }
    case Expr::Kind::kGetItem: {
      LLAMAY_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0]));
      if (obj.is_undefined()) return UndefinedError(*e.args[0]);
      LLAMAY_ASSIGN_OR_RETURN(Value key, Eval(*e.args[1]));
      LLAMAY_RETURN_IF_ERROR(ChargeOperand(obj, /*iterates=*/false));  // a string is indexed by code points
      return GetItem(obj, key);
    }
    case Expr::Kind::kSlice: {
      LLAMAY_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0]));
      if (obj.is_undefined()) return UndefinedError(*e.args[0]);
      LLAMAY_RETURN_IF_ERROR(ChargeOperand(obj, /*iterates=*/false));
      Value bounds[3];
      for (int i = 0; i < 3; ++i) {
        if (e.args[i + 1] == nullptr) continue;
        LLAMAY_ASSIGN_OR_RETURN(bounds[i], Eval(*e.args[i + 1]));
      }
      return Slice(obj, bounds[0], bounds[1], bounds[2]);
    }
    case Expr::Kind::kCall:
      return EvalCall(e);
    case Expr::Kind::kFilter: {
      LLAMAY_ASSIGN_OR_RETURN(Value operand, Eval(*e.args[0]));
      // These convert their operand the way int(), float() and str methods would, which Jinja2's
      // Undefined refuses; the others treat undefined as empty.
      if (operand.is_undefined() && (e.name == "int" || e.name == "float" || e.name == "indent" ||
                                     e.name == "abs" || e.name == "round")) {
        return UndefinedError(*e.args[0]);
      }
      LLAMAY_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e.call_args));
      if (e.name != "length" && e.name != "count" && e.name != "default" && e.name != "d" && e.name != "safe") {
        const bool by_string = e.name == "trim" || e.name == "lower" || e.name == "upper" || e.name == "replace" ||
                               e.name == "indent" || e.name == "title" || e.name == "capitalize" ||
                               e.name == "escape" || e.name == "e" || e.name == "string" || e.name == "int" ||
                               e.name == "float" || e.name == "tojson";
        LLAMAY_RETURN_IF_ERROR(ChargeOperand(operand, /*iterates=*/!by_string));
      }
      return ApplyFilter(e.name, operand, args, Remaining());
    }
    case Expr::Kind::kTest: {
      LLAMAY_ASSIGN_OR_RETURN(Value operand, Eval(*e.args[0]));
      LLAMAY_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e.call_args));
      LLAMAY_ASSIGN_OR_RETURN(bool pass, ApplyTest(e.name, operand, args));
      return Value::Bool(pass != e.negated);
    }
    case Expr::Kind::kUnary: {
      LLAMAY_ASSIGN_OR_RETURN(Value operand, Eval(*e.args[0]));
      if (e.name == "not") return Value::Bool(!Truthy(operand));
      if (operand.is_undefined()) return UndefinedError(*e.args[0]);
      return Negate(operand, e.name == "-");
    }
    case Expr::Kind::kBinary:
      return EvalBinary(e);
    case Expr::Kind::kCompare:
      return EvalCompare(e);
    case Expr::Kind::kCondExpr: {
      LLAMAY_ASSIGN_OR_RETURN(Value cond, Eval(*e.args[1]));
      if (Truthy(cond)) return Eval(*e.args[0]);
      if (e.args[2] == nullptr) return Value();
      return Eval(*e.args[2]);
    }
  }
  return InternalError("unknown expression kind");
}

Result<Value> Renderer::EvalBinary(const Expr& e) {
  LLAMAY_ASSIGN_OR_RETURN(Value left, Eval(*e.args[0]));
  if (e.name == "and") {
    if (!Truthy(left)) return left;
    return Eval(*e.args[1]);
  }
  if (e.name == "or") {
    if (Truthy(left)) return left;
    return Eval(*e.args[1]);
  }
  LLAMAY_ASSIGN_OR_RETURN(Value right, Eval(*e.args[1]));
  if (e.name == "~") {
    const size_t cap = Remaining().max_output_bytes;
    if ((left.is_string() ? left.AsString().size() : 0) + (right.is_string() ? right.AsString().size() : 0) > cap)
      return ResourceExhaustedError("string exceeds the output limit");
    std::string s = ToStr(left) + ToStr(right);
    if (s.size() > cap) return ResourceExhaustedError("string exceeds the output limit");
    return Value::String(std::move(s));
  }
  if (left.is_undefined()) return UndefinedError(*e.args[0]);
  if (right.is_undefined()) return UndefinedError(*e.args[1]);
  return Arithmetic(e.name, left, right, Remaining());
}

Result<Value> Renderer::EvalCompare(const Expr& e) {
  LLAMAY_ASSIGN_OR_RETURN(Value left, Eval(*e.args[0]));
  for (size_t i = 0; i < e.ops.size(); ++i) {
    LLAMAY_ASSIGN_OR_RETURN(Value right, Eval(*e.args[i + 1]));
    LLAMAY_RETURN_IF_ERROR(ChargeOperand(left, false));
    LLAMAY_RETURN_IF_ERROR(ChargeOperand(right, false));
    const std::string& op = e.ops[i];
    bool holds;
    if (op == "==") {
      holds = Equals(left, right);
    } else if (op == "!=") {
      holds = !Equals(left, right);
    } else if (op == "in" || op == "notin") {
      LLAMAY_ASSIGN_OR_RETURN(bool in, Contains(right, left));
      holds = in == (op == "in");
    } else {
      LLAMAY_ASSIGN_OR_RETURN(int c, Compare(left, right));
      holds = op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
    }
    if (!holds) return Value::Bool(false);
    left = std::move(right);
  }
  return Value::Bool(true);
}

Result<Value> Renderer::EvalCall(const Expr& e) {
  const Expr& callee = *e.args[0];
  if (callee.kind == Expr::Kind::kGetAttr) {  // a method call: obj.name(args)
    LLAMAY_ASSIGN_OR_RETURN(Value obj, Eval(*callee.args[0]));
    if (obj.is_undefined()) return UndefinedError(*callee.args[0]);
    LLAMAY_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e.call_args));
    LLAMAY_RETURN_IF_ERROR(ChargeOperand(obj, /*iterates=*/false));  // str.find, list.index, ... scan it
    if (obj.is_namespace() || (obj.is_dict() && !obj.AsDict().is_loop)) {
      Value member = GetAttr(obj, callee.name);  // a macro stored in a namespace or dict
      if (member.is_callable() && member.macro() != nullptr) return CallMacro(*member.macro(), args);
    }
    return CallMethod(obj, callee.name, args, Remaining());
  }
  LLAMAY_ASSIGN_OR_RETURN(Value fn, Eval(callee));
  if (fn.is_undefined()) return UndefinedError(callee);
  if (!fn.is_callable()) return InvalidArgumentError(StrCat({"'", TypeName(fn), "' object is not callable"}));
  LLAMAY_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e.call_args));
  if (fn.macro() != nullptr) return CallMacro(*fn.macro(), args);
  return CallGlobal(fn.builtin_name(), args, Remaining());
}

Result<Value> Renderer::CallMacro(const MacroDef& macro, const CallArgs& args) {
  if (args.positional.size() > macro.params.size()) {
    return InvalidArgumentError("macro '" + macro.name + "' takes not more than " +
                                std::to_string(macro.params.size()) + " argument(s)");
  }
  for (const auto& [name, unused] : args.named) {
    bool known = false;
    for (const auto& param : macro.params) known = known || param.first == name;
    if (!known)
      return InvalidArgumentError("macro '" + macro.name + "' takes no keyword argument '" + name + "'");
  }
  if (macro_depth_ >= 64) return ResourceExhaustedError("macro calls nested too deeply");
  // The body sees the root scope and its arguments, not the caller's locals.
  std::vector<Scope> caller_scopes(std::make_move_iterator(scopes_.begin() + 1),
                                   std::make_move_iterator(scopes_.end()));
  scopes_.resize(1);
  scopes_.emplace_back();
  std::string caller_out;
  std::swap(out_, caller_out);
  ++macro_depth_;
  Status status;
  for (size_t i = 0; i < macro.params.size() && status.ok(); ++i) {
    const auto& [name, default_value] = macro.params[i];
    const Value* given = i < args.positional.size() ? &args.positional[i] : args.Get(SIZE_MAX, name);
    if (given != nullptr) {
      Assign(name, *given);
    } else if (default_value != nullptr) {
      Result<Value> v = Eval(*default_value);
      if (v.ok()) {
        Assign(name, std::move(v).value());
      } else {
        status = v.status();
      }
    } else {
      Assign(name, Value());
    }
  }
  if (status.ok()) status = Exec(macro.body).status();
  --macro_depth_;
  std::string result = std::move(out_);
  out_ = std::move(caller_out);
  scopes_.resize(1);
  for (Scope& scope : caller_scopes) scopes_.push_back(std::move(scope));
  LLAMAY_RETURN_IF_ERROR(status);
  return Value::String(std::move(result));
}

}  // namespace llamay::chat::internal
