// Rule inlining: see compile_internal.h. Fewer rules mean fewer stack frames pushed and popped per byte at
// match time; bodies stay bounded so determinisation stays small.
#include <algorithm>
#include <functional>
#include <utility>

#include "grammar/compile_internal.h"

namespace llamay::grammar::internal {
namespace {

// A body this size (roughly NFA states, repetitions multiplied out) or smaller is copied into its callers.
constexpr uint64_t kInlineBudget = 65536;
// A rule stops absorbing callees once its body reaches this size.
constexpr uint64_t kMaxInlinedRuleSize = 262144;

uint64_t Saturate(uint64_t v) { return std::min<uint64_t>(v, uint64_t{1} << 40); }

uint64_t Copies(const Expr& e) {
  return e.max == kUnbounded ? uint64_t{e.min} + 1 : std::max<uint64_t>(e.max, 1);
}

uint64_t Size(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::kChars:
      return 1 + 2 * e.chars.size();
    case Expr::Kind::kRef:
      return 1;
    case Expr::Kind::kRepeat:
      return Saturate(Size(e.items[0]) * Copies(e));
    default: {
      uint64_t s = 1;
      for (const Expr& item : e.items) s = Saturate(s + Size(item));
      return s;
    }
  }
}

void CollectRefs(const Expr& e, std::vector<int32_t>* out) {
  if (e.kind == Expr::Kind::kRef) {
    if (std::find(out->begin(), out->end(), e.rule) == out->end()) out->push_back(e.rule);
    return;
  }
  for (const Expr& item : e.items) CollectRefs(item, out);
}

class Inliner {
 public:
  explicit Inliner(GrammarAst* ast) : ast_(*ast), refs_(ReferencedRules(*ast)) {}

  void Run() {
    const size_t n = ast_.rules.size();
    index_.assign(n, -1);
    low_.assign(n, 0);
    on_stack_.assign(n, false);
    recursive_.assign(n, false);
    size_.assign(n, 0);
    Visit(ast_.root);
    Prune();
  }

 private:
  // Tarjan's strongly connected components; a component is finished (and its rules inlined into) only
  // after every component it references, so callees are always processed first.
  void Visit(int32_t r) {
    index_[r] = low_[r] = counter_++;
    stack_.push_back(r);
    on_stack_[r] = true;
    for (int32_t c : refs_[r]) {
      if (index_[c] < 0) {
        Visit(c);
        low_[r] = std::min(low_[r], low_[c]);
      } else if (on_stack_[c]) {
        low_[r] = std::min(low_[r], index_[c]);
      }
    }
    if (low_[r] != index_[r]) return;
    std::vector<int32_t> component;
    int32_t m;
    do {
      m = stack_.back();
      stack_.pop_back();
      on_stack_[m] = false;
      component.push_back(m);
    } while (m != r);
    const bool self_loop = std::find(refs_[r].begin(), refs_[r].end(), r) != refs_[r].end();
    for (int32_t x : component) recursive_[x] = component.size() > 1 || self_loop;
    for (int32_t x : component) {
      uint64_t budget = Size(ast_.rules[x].body);
      InlineInto(&ast_.rules[x].body, 1, &budget);
      size_[x] = Size(ast_.rules[x].body);
    }
  }

  void InlineInto(Expr* e, uint64_t multiplier, uint64_t* rule_size) {
    if (e->kind == Expr::Kind::kRef) {
      const int32_t c = e->rule;
      if (recursive_[c]) return;
      const uint64_t added = Saturate(size_[c] * multiplier);
      if (size_[c] > kInlineBudget || added > kInlineBudget || *rule_size + added > kMaxInlinedRuleSize)
        return;
      *rule_size += added;
      *e = ast_.rules[c].body;  // already inlined into itself: callees finish first
      return;
    }
    const uint64_t m = e->kind == Expr::Kind::kRepeat ? Saturate(multiplier * Copies(*e)) : multiplier;
    for (Expr& item : e->items) InlineInto(&item, m, rule_size);
  }

  // Keeps the rules still reachable from the root, renumbered in order of discovery (the root is 0).
  void Prune() {
    std::vector<int32_t> new_id(ast_.rules.size(), -1);
    std::vector<int32_t> order{ast_.root};
    new_id[ast_.root] = 0;
    for (size_t i = 0; i < order.size(); ++i) {
      std::vector<int32_t> callees;
      CollectRefs(ast_.rules[order[i]].body, &callees);
      for (int32_t c : callees) {
        if (new_id[c] < 0) {
          new_id[c] = static_cast<int32_t>(order.size());
          order.push_back(c);
        }
      }
    }
    std::function<void(Expr*)> renumber = [&](Expr* e) {
      if (e->kind == Expr::Kind::kRef) e->rule = new_id[e->rule];
      for (Expr& item : e->items) renumber(&item);
    };
    std::vector<RuleDef> kept;
    kept.reserve(order.size());
    for (int32_t r : order) {
      kept.push_back(std::move(ast_.rules[r]));
      renumber(&kept.back().body);
    }
    ast_.rules = std::move(kept);
    ast_.root = 0;
  }

  GrammarAst& ast_;
  std::vector<std::vector<int32_t>> refs_;
  std::vector<int32_t> index_, low_, stack_;
  std::vector<bool> on_stack_, recursive_;
  std::vector<uint64_t> size_;
  int32_t counter_ = 0;
};

}  // namespace

std::vector<std::vector<int32_t>> ReferencedRules(const GrammarAst& ast) {
  std::vector<std::vector<int32_t>> refs(ast.rules.size());
  for (size_t r = 0; r < ast.rules.size(); ++r) CollectRefs(ast.rules[r].body, &refs[r]);
  return refs;
}

void InlineRules(GrammarAst* ast) { Inliner(ast).Run(); }

}  // namespace llamay::grammar::internal
