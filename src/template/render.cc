// Statement execution of the Renderer.
#include "template/renderer.h"

namespace llamay::chat::internal {

Result<std::string> Renderer::Render(const Program& program, const Value& context) {
  LLAMAY_CHECK(context.is_dict());
  scopes_.clear();
  scopes_.emplace_back(context.AsDict().items);
  out_.clear();
  const Status st = Exec(program.body).status();
  // Nothing of the render outlives it but its text: empty the namespaces it assigned into (which breaks any
  // cycle through them), then drop the scopes.
  for (const Value& ns : assigned_) ns.MutableNamespace().items.clear();
  assigned_.clear();
  assigned_set_.clear();
  scopes_.clear();
  LLAMAY_RETURN_IF_ERROR(st);
  return std::move(out_);
}

Status Renderer::Append(std::string_view text) {
  if (out_.size() + text.size() > limits_.max_output_bytes) {
    return ResourceExhaustedError("rendered text exceeds " + std::to_string(limits_.max_output_bytes) +
                                  " bytes");
  }
  if (text.size() > Remaining().max_output_bytes) {
    return ResourceExhaustedError("rendered text exceeds the render budget");
  }
  LLAMAY_RETURN_IF_ERROR(Charge(text.size() / kBytesPerStep));
  out_.append(text);
  return Status::Ok();
}

Result<std::string> Renderer::Capture(const Body& body) {
  std::string saved;
  std::swap(out_, saved);
  Result<Flow> flow = Exec(body);
  std::string captured = std::move(out_);
  out_ = std::move(saved);
  LLAMAY_RETURN_IF_ERROR(flow.status());
  return captured;
}

Result<Renderer::Flow> Renderer::Exec(const Body& body) {
  for (const NodePtr& node : body) {
    Result<Flow> flow = ExecNode(*node);
    if (!flow.ok()) return AtPosition(flow.status(), node->line, node->col);
    if (*flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Result<Renderer::Flow> Renderer::ExecNode(const Node& node) {
  LLAMAY_RETURN_IF_ERROR(CountStep());
  switch (node.kind) {
    case Node::Kind::kText:
      LLAMAY_RETURN_IF_ERROR(Append(node.text));
      return Flow::kNormal;
    case Node::Kind::kOutput: {
      LLAMAY_ASSIGN_OR_RETURN(Value v, Eval(*node.expr));
      LLAMAY_RETURN_IF_ERROR(Append(ToStr(v)));
      return Flow::kNormal;
    }
    case Node::Kind::kIf:
      for (const IfBranch& branch : node.branches) {
        if (branch.condition != nullptr) {
          LLAMAY_ASSIGN_OR_RETURN(Value cond, Eval(*branch.condition));
          if (!Truthy(cond)) continue;
        }
        return Exec(branch.body);
      }
      return Flow::kNormal;
    case Node::Kind::kFor:
      return ExecFor(node);
    case Node::Kind::kSet:
      LLAMAY_RETURN_IF_ERROR(ExecSet(node));
      return Flow::kNormal;
    case Node::Kind::kSetBlock: {
      LLAMAY_ASSIGN_OR_RETURN(std::string text, Capture(node.body));
      Assign(node.targets[0], Value::String(std::move(text)));
      return Flow::kNormal;
    }
    case Node::Kind::kMacro:
      Assign(node.macro->name, Value::Macro(node.macro.get()));
      return Flow::kNormal;
    case Node::Kind::kBreak:
      return Flow::kBreak;
    case Node::Kind::kContinue:
      return Flow::kContinue;
    case Node::Kind::kBlock:
      return Exec(node.body);
    case Node::Kind::kFilterBlock: {
      LLAMAY_ASSIGN_OR_RETURN(std::string body, Capture(node.body));
      scopes_.emplace_back();
      Assign(kFilterBodyName, Value::String(std::move(body)));
      Result<Value> filtered = Eval(*node.expr);
      scopes_.pop_back();
      LLAMAY_ASSIGN_OR_RETURN(Value v, std::move(filtered));
      LLAMAY_RETURN_IF_ERROR(Append(ToStr(v)));
      return Flow::kNormal;
    }
  }
  return InternalError("unknown statement kind");
}

Status Renderer::Bind(const std::vector<std::string>& targets, const Value& value) {
  if (targets.size() == 1) {
    Assign(targets[0], value);
    return Status::Ok();
  }
  LLAMAY_ASSIGN_OR_RETURN(List parts, Iterate(value));
  if (parts.size() != targets.size()) {
    return InvalidArgumentError(std::string(parts.size() > targets.size() ? "too many" : "not enough") +
                                " values to unpack (expected " + std::to_string(targets.size()) + ", got " +
                                std::to_string(parts.size()) + ")");
  }
  for (size_t i = 0; i < targets.size(); ++i) Assign(targets[i], parts[i]);
  return Status::Ok();
}

Status Renderer::ExecSet(const Node& node) {
  if (!node.attr.empty()) {
    Value ns = Lookup(node.targets[0]);
    if (!ns.is_namespace()) return InvalidArgumentError("cannot assign attribute on non-namespace object");
    LLAMAY_ASSIGN_OR_RETURN(Value v, Eval(*node.expr));
    if (assigned_set_.insert(&ns.AsDict()).second) assigned_.push_back(ns);
    ns.MutableNamespace().Set(node.attr, std::move(v));
    return Status::Ok();
  }
  LLAMAY_ASSIGN_OR_RETURN(Value v, Eval(*node.expr));
  return Bind(node.targets, v);
}

Result<Renderer::Flow> Renderer::ExecFor(const Node& node) {
  LLAMAY_ASSIGN_OR_RETURN(Value iterable, Eval(*node.expr));
  // The list of items is built here (a string's characters, a dict's keys): paid for first.
  const size_t n_items = iterable.is_string() ? iterable.AsString().size()
                         : iterable.is_list() ? iterable.AsList().size()
                         : iterable.is_dict() ? iterable.AsDict().items.size()
                                              : 0;
  if (n_items > Remaining().max_items) return ResourceExhaustedError("for loop exceeds the render budget");
  LLAMAY_RETURN_IF_ERROR(Charge(n_items / kItemsPerStep));
  LLAMAY_ASSIGN_OR_RETURN(List items, Iterate(iterable));
  if (node.filter != nullptr) {  // the loop filter runs first, so loop.length counts kept items
    List kept;
    for (Value& item : items) {
      LLAMAY_RETURN_IF_ERROR(CountStep());
      scopes_.emplace_back();
      Status bound = Bind(node.targets, item);
      Result<Value> keep = bound.ok() ? Eval(*node.filter) : Result<Value>(bound);
      scopes_.pop_back();
      if (!keep.ok()) return keep.status();
      if (Truthy(*keep)) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    scopes_.emplace_back();
    Result<Flow> flow = Exec(node.else_body);
    scopes_.pop_back();
    return flow;
  }
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    LLAMAY_RETURN_IF_ERROR(CountStep());  // an empty body must still spend the step budget
    std::vector<std::pair<std::string, Value>> loop = {
        {"index0", Value::Int(i)},       {"index", Value::Int(i + 1)},
        {"revindex", Value::Int(n - i)}, {"revindex0", Value::Int(n - i - 1)},
        {"first", Value::Bool(i == 0)},  {"last", Value::Bool(i == n - 1)},
        {"length", Value::Int(n)},       {"depth", Value::Int(1)},
        {"depth0", Value::Int(0)}};
    if (i > 0) loop.emplace_back("previtem", items[static_cast<size_t>(i - 1)]);
    if (i + 1 < n) loop.emplace_back("nextitem", items[static_cast<size_t>(i + 1)]);
    scopes_.emplace_back();
    Assign("loop", Value::MakeDict(std::move(loop), /*is_loop=*/true));
    Status bound = Bind(node.targets, items[static_cast<size_t>(i)]);
    Result<Flow> flow = bound.ok() ? Exec(node.body) : Result<Flow>(bound);
    scopes_.pop_back();
    if (!flow.ok()) return flow.status();
    if (*flow == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

}  // namespace llamay::chat::internal
