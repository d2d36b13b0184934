// Syntax tree to automata: per-rule Thompson NFA over UTF-8 byte ranges, byte classes, subset construction.
// The passes after determinisation live in analyze.cc.
#include "grammar/compile.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <utility>

#include "grammar/compile_internal.h"
#include "grammar/grammar.h"

namespace llamay::grammar::internal {
namespace {

constexpr size_t kMaxNfaStates = grammar::kMaxNfaStates;
constexpr size_t kMaxDfaStates = grammar::kMaxAutomatonStates;
constexpr size_t kMaxTransitions = grammar::kMaxAutomatonTransitions;  // trans entries (4 bytes each)
constexpr size_t kMaxSetElements = grammar::kMaxNfaSetElements;

struct Nfa {
  struct ByteEdge {
    int32_t target;
    uint8_t lo, hi;
  };
  struct RefEdge {
    int32_t rule;
    int32_t target;
  };
  std::vector<std::vector<int32_t>> eps;
  std::vector<std::vector<ByteEdge>> bytes;
  std::vector<std::vector<RefEdge>> refs;
  int32_t start = 0;
  int32_t accept = 0;

  int32_t NewState() {
    eps.emplace_back();
    bytes.emplace_back();
    refs.emplace_back();
    return static_cast<int32_t>(eps.size() - 1);
  }
  size_t size() const { return eps.size(); }
};

class NfaBuilder {
 public:
  explicit NfaBuilder(size_t* total_states) : total_(*total_states) {}

  // False when the state budget ran out.
  bool Build(const Expr& body, Nfa* nfa) {
    nfa_ = nfa;
    nfa->start = nfa->NewState();
    nfa->accept = nfa->NewState();
    return Add(body, nfa->start, nfa->accept);
  }

 private:
  int32_t NewState() {
    ++total_;
    return nfa_->NewState();
  }

  bool Add(const Expr& e, int32_t from, int32_t to) {
    if (total_ > kMaxNfaStates) return false;
    switch (e.kind) {
      case Expr::Kind::kSeq: {
        if (e.items.empty()) {
          nfa_->eps[from].push_back(to);
          return true;
        }
        int32_t cur = from;
        for (size_t i = 0; i < e.items.size(); ++i) {
          const int32_t next = i + 1 == e.items.size() ? to : NewState();
          if (!Add(e.items[i], cur, next)) return false;
          cur = next;
        }
        return true;
      }
      case Expr::Kind::kAlt:
        for (const Expr& item : e.items) {
          if (!Add(item, from, to)) return false;
        }
        return true;
      case Expr::Kind::kChars:
        for (const auto& seq : Utf8Sequences(e.chars)) {
          int32_t cur = from;
          for (size_t j = 0; j < seq.size(); ++j) {
            const int32_t next = j + 1 == seq.size() ? to : NewState();
            nfa_->bytes[cur].push_back({next, seq[j].lo, seq[j].hi});
            cur = next;
          }
        }
        return true;
      case Expr::Kind::kRef:
        nfa_->refs[from].push_back({e.rule, to});
        return true;
      case Expr::Kind::kRepeat:
        return AddRepeat(e, from, to);
    }
    return true;
  }

  // Mandatory copies in a chain, then a loop (no maximum) or nested optional copies, each able to exit.
  // Loops live on fresh states, so no construct adds edges into `from` or out of `to`.
  bool AddRepeat(const Expr& e, int32_t from, int32_t to) {
    const Expr& item = e.items[0];
    int32_t cur = from;
    for (uint32_t i = 0; i < e.min; ++i) {
      const int32_t next = (i + 1 == e.min && e.max == e.min) ? to : NewState();
      if (!Add(item, cur, next)) return false;
      cur = next;
    }
    if (e.max == e.min) {
      if (e.min == 0) nfa_->eps[from].push_back(to);
      return true;
    }
    if (e.max == kUnbounded) {
      const int32_t loop = NewState(), back = NewState();
      nfa_->eps[cur].push_back(loop);
      if (!Add(item, loop, back)) return false;
      nfa_->eps[back].push_back(loop);
      nfa_->eps[loop].push_back(to);
      return true;
    }
    for (uint32_t i = e.min; i < e.max; ++i) {
      nfa_->eps[cur].push_back(to);
      const int32_t next = i + 1 == e.max ? to : NewState();
      if (!Add(item, cur, next)) return false;
      cur = next;
    }
    return true;
  }

  size_t& total_;
  Nfa* nfa_ = nullptr;
};

// Byte classes: bytes that no edge label tells apart. Every label is a byte range, so the classes are the
// intervals between range boundaries.
void ComputeByteClasses(const std::vector<Nfa>& nfas, Automaton* a) {
  bool boundary[257] = {};
  for (const Nfa& nfa : nfas) {
    for (const auto& edges : nfa.bytes) {
      for (const auto& e : edges) {
        boundary[e.lo] = true;
        boundary[e.hi + 1] = true;
      }
    }
  }
  int32_t cls = -1;
  for (int b = 0; b < 256; ++b) {
    if (b == 0 || boundary[b]) ++cls;
    a->byte_class[b] = static_cast<uint8_t>(cls);
  }
  a->num_classes = cls + 1;
}

struct VecHash {
  size_t operator()(const std::vector<int32_t>& v) const {
    uint64_t h = 1469598103934665603ull;
    for (int32_t x : v) h = (h ^ static_cast<uint32_t>(x)) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

class Determinizer {
 public:
  explicit Determinizer(Automaton* a) : a_(*a) {}

  // Appends rule `rule`'s DFA to the automaton. False when the size limits are exceeded.
  bool Run(const Nfa& nfa, int32_t rule) {
    nfa_ = &nfa;
    ids_.clear();
    sets_.clear();
    mark_.assign(nfa.size(), 0);
    generation_ = 0;
    buckets_.assign(a_.num_classes, {});
    base_ = static_cast<int32_t>(a_.states.size());
    a_.rule_start[rule] = Intern(Closure({nfa.start}));
    for (size_t i = 0; i < sets_.size(); ++i) {
      if (OverLimits()) return false;
      Expand(static_cast<int32_t>(i), rule);
    }
    return !OverLimits();
  }

 private:
  bool OverLimits() const {
    return a_.states.size() > kMaxDfaStates || a_.trans.size() > kMaxTransitions ||
           set_elements_ > kMaxSetElements;
  }

  std::vector<int32_t> Closure(std::vector<int32_t> seeds) {
    ++generation_;
    std::vector<int32_t> out;
    while (!seeds.empty()) {
      const int32_t s = seeds.back();
      seeds.pop_back();
      if (mark_[s] == generation_) continue;
      mark_[s] = generation_;
      out.push_back(s);
      for (int32_t t : nfa_->eps[s]) seeds.push_back(t);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  // The global state id of a (closed, sorted) NFA state set, adding it if new.
  int32_t Intern(std::vector<int32_t> set) {
    const auto it = ids_.find(set);
    if (it != ids_.end()) return it->second;
    const int32_t id = base_ + static_cast<int32_t>(sets_.size());
    set_elements_ += set.size();
    const auto added = ids_.emplace(std::move(set), id).first;
    sets_.push_back(&added->first);  // map nodes do not move: the key stays where it is
    a_.states.emplace_back();
    a_.trans.resize(a_.trans.size() + a_.num_classes, -1);
    return id;
  }

  void Expand(int32_t local, int32_t rule) {
    const int32_t id = base_ + local;
    const std::vector<int32_t>& set = *sets_[local];
    for (auto& b : buckets_) b.clear();
    std::vector<Nfa::RefEdge> refs;
    bool final = false;
    for (int32_t s : set) {
      final |= s == nfa_->accept;
      for (const auto& e : nfa_->bytes[s]) {
        for (int c = a_.byte_class[e.lo]; c <= a_.byte_class[e.hi]; ++c) buckets_[c].push_back(e.target);
      }
      refs.insert(refs.end(), nfa_->refs[s].begin(), nfa_->refs[s].end());
    }
    for (int32_t c = 0; c < a_.num_classes; ++c) {
      if (buckets_[c].empty()) continue;
      const int32_t target = Intern(Closure(buckets_[c]));
      a_.trans[static_cast<size_t>(id) * a_.num_classes + c] = target;
    }
    std::stable_sort(refs.begin(), refs.end(), [](const auto& x, const auto& y) { return x.rule < y.rule; });
    std::vector<std::pair<int32_t, int32_t>> out;
    for (size_t i = 0; i < refs.size();) {
      std::vector<int32_t> targets;
      size_t j = i;
      for (; j < refs.size() && refs[j].rule == refs[i].rule; ++j) targets.push_back(refs[j].target);
      out.emplace_back(refs[i].rule, Intern(Closure(std::move(targets))));
      i = j;
    }
    Automaton::State& st = a_.states[id];
    st.rule = rule;
    st.final = final;
    st.ref_begin = static_cast<uint32_t>(a_.refs.size());
    for (const auto& [r, t] : out) a_.refs.push_back({r, t});
    st.ref_end = static_cast<uint32_t>(a_.refs.size());
  }

  Automaton& a_;
  const Nfa* nfa_ = nullptr;
  std::unordered_map<std::vector<int32_t>, int32_t, VecHash> ids_;
  std::vector<const std::vector<int32_t>*> sets_;  // by local id: the keys of ids_
  // The NFA states in the sets interned so far (over every rule): the work and memory of the subset
  // construction, which an automaton of huge sets runs up long before the state limit.
  size_t set_elements_ = 0;
  std::vector<uint32_t> mark_;
  uint32_t generation_ = 0;
  std::vector<std::vector<int32_t>> buckets_;
  int32_t base_ = 0;
};

// Names the limit that was hit, so that a client can tell what to shrink.
Status TooLarge(const std::string& rule, const std::string& limit) {
  return InvalidArgumentError("grammar too large: rule '" + rule + "' takes the grammar past its limit of " +
                              limit + " (a repetition count too high, or too many alternatives?)");
}

}  // namespace

Result<Automaton> Compile(GrammarAst ast) {
  InlineRules(&ast);
  const size_t n = ast.rules.size();
  std::vector<Nfa> nfas(n);
  size_t total = 0;
  for (size_t r = 0; r < n; ++r) {
    if (!NfaBuilder(&total).Build(ast.rules[r].body, &nfas[r]))
      return TooLarge(ast.rules[r].name, std::to_string(kMaxNfaStates) + " NFA states");
    ast.rules[r].body = Expr();  // free the tree as we go
  }
  Automaton a;
  a.root = ast.root;
  a.rule_start.assign(n, -1);
  for (const RuleDef& r : ast.rules) a.rule_names.push_back(r.name);
  ComputeByteClasses(nfas, &a);
  // Refs are stored per state in the order the states are expanded; states are appended rule by rule and
  // expanded in id order, so each state's refs are contiguous.
  Determinizer det(&a);
  for (size_t r = 0; r < n; ++r) {
    if (!det.Run(nfas[r], static_cast<int32_t>(r))) {
      return TooLarge(ast.rules[r].name,
                      a.states.size() > kMaxDfaStates ? std::to_string(kMaxDfaStates) + " automaton states"
                      : a.trans.size() > kMaxTransitions
                          ? std::to_string(kMaxTransitions) + " transitions"
                          : std::to_string(kMaxSetElements) + " NFA states in the automaton states' sets");
    }
    nfas[r] = Nfa();
  }
  LLAMAY_RETURN_IF_ERROR(Analyze(&a));
  return a;
}

}  // namespace llamay::grammar::internal
