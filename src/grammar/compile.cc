// Syntax tree to automata: per-rule Thompson NFA over UTF-8 byte ranges, byte classes, subset construction.
// The passes after determinisation live in analyze.cc.
#include "grammar/compile.h"

#include <algorithm>
#include <string>
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

// Subset construction. The NFA state sets live end to end in one pool, found through an open-addressing
// table of their ids, and every closure is built in scratch vectors: a state costs no allocation of its own
// (a grammar at the state limit interns about 250,000 sets and looks up several times as many).
class Determinizer {
 public:
  explicit Determinizer(Automaton* a) : a_(*a) {}

  // Appends rule `rule`'s DFA to the automaton. False when the size limits are exceeded.
  bool Run(const Nfa& nfa, int32_t rule) {
    nfa_ = &nfa;
    pool_.clear();
    offsets_.assign(1, 0);
    hashes_.clear();
    table_.assign(1024, -1);
    mark_.assign(nfa.size(), 0);
    generation_ = 0;
    buckets_.assign(a_.num_classes, {});
    base_ = static_cast<int32_t>(a_.states.size());
    seeds_.assign(1, nfa.start);
    a_.rule_start[rule] = Intern(Closure());
    for (int32_t local = 0; local < num_sets(); ++local) {
      if (OverLimits()) return false;
      Expand(local, rule);
    }
    return !OverLimits();
  }

 private:
  int32_t num_sets() const { return static_cast<int32_t>(hashes_.size()); }

  bool OverLimits() const {
    return a_.states.size() > kMaxDfaStates || a_.trans.size() > kMaxTransitions ||
           set_elements_ > kMaxSetElements;
  }

  static uint64_t Hash(const std::vector<int32_t>& v) {
    uint64_t h = 1469598103934665603ull;
    for (int32_t x : v) h = (h ^ static_cast<uint32_t>(x)) * 1099511628211ull;
    return h ^ (h >> 29);
  }

  // The epsilon closure of seeds_ (consumed), sorted, in closure_.
  const std::vector<int32_t>& Closure() {
    ++generation_;
    closure_.clear();
    while (!seeds_.empty()) {
      const int32_t s = seeds_.back();
      seeds_.pop_back();
      if (mark_[s] == generation_) continue;
      mark_[s] = generation_;
      closure_.push_back(s);
      for (int32_t t : nfa_->eps[s]) seeds_.push_back(t);
    }
    std::sort(closure_.begin(), closure_.end());
    return closure_;
  }

  bool SameSet(int32_t local, const std::vector<int32_t>& set) const {
    const uint32_t begin = offsets_[local], end = offsets_[local + 1];
    return end - begin == set.size() && std::equal(set.begin(), set.end(), pool_.begin() + begin);
  }

  // The global state id of a (closed, sorted) NFA state set, adding it if new.
  int32_t Intern(const std::vector<int32_t>& set) {
    const uint64_t h = Hash(set);
    const size_t mask = table_.size() - 1;
    size_t i = h & mask;
    for (; table_[i] >= 0; i = (i + 1) & mask) {
      const int32_t local = table_[i];
      if (hashes_[local] == h && SameSet(local, set)) return base_ + local;
    }
    const int32_t local = num_sets();
    set_elements_ += set.size();
    pool_.insert(pool_.end(), set.begin(), set.end());
    offsets_.push_back(static_cast<uint32_t>(pool_.size()));
    hashes_.push_back(h);
    table_[i] = local;
    if (hashes_.size() * 2 > table_.size()) Grow();
    a_.states.emplace_back();
    a_.trans.resize(a_.trans.size() + a_.num_classes, -1);
    return base_ + local;
  }

  void Grow() {
    table_.assign(table_.size() * 2, -1);
    const size_t mask = table_.size() - 1;
    for (int32_t local = 0; local < num_sets(); ++local) {
      size_t i = hashes_[local] & mask;
      while (table_[i] >= 0) i = (i + 1) & mask;
      table_[i] = local;
    }
  }

  void Expand(int32_t local, int32_t rule) {
    const int32_t id = base_ + local;
    for (auto& b : buckets_) b.clear();
    refs_.clear();
    bool final = false;
    // Interning below appends to pool_, so the set is read before any target is interned.
    for (uint32_t i = offsets_[local]; i < offsets_[local + 1]; ++i) {
      const int32_t s = pool_[i];
      final |= s == nfa_->accept;
      for (const auto& e : nfa_->bytes[s]) {
        for (int c = a_.byte_class[e.lo]; c <= a_.byte_class[e.hi]; ++c) buckets_[c].push_back(e.target);
      }
      refs_.insert(refs_.end(), nfa_->refs[s].begin(), nfa_->refs[s].end());
    }
    // A character class cut apart by other labels' boundaries leads to the same NFA states from each
    // piece: a class whose states are those of the last class that led anywhere shares its target.
    int32_t prev = -1, target = -1;
    for (int32_t c = 0; c < a_.num_classes; ++c) {
      if (buckets_[c].empty()) continue;
      if (prev < 0 || buckets_[c] != buckets_[prev]) {
        seeds_.assign(buckets_[c].begin(), buckets_[c].end());
        target = Intern(Closure());
      }
      prev = c;
      a_.trans[static_cast<size_t>(id) * a_.num_classes + c] = target;
    }
    std::stable_sort(refs_.begin(), refs_.end(),
                     [](const auto& x, const auto& y) { return x.rule < y.rule; });
    // Each state's refs are contiguous: interning adds states, never refs.
    a_.states[id].rule = rule;
    a_.states[id].final = final;
    a_.states[id].ref_begin = static_cast<uint32_t>(a_.refs.size());
    for (size_t i = 0; i < refs_.size();) {
      seeds_.clear();
      size_t j = i;
      for (; j < refs_.size() && refs_[j].rule == refs_[i].rule; ++j) seeds_.push_back(refs_[j].target);
      const int32_t target = Intern(Closure());
      a_.refs.push_back({refs_[i].rule, target});
      i = j;
    }
    a_.states[id].ref_end = static_cast<uint32_t>(a_.refs.size());
  }

  Automaton& a_;
  const Nfa* nfa_ = nullptr;
  // The sets of this rule's states, by local id: pool_[offsets_[i], offsets_[i + 1]), hash hashes_[i].
  std::vector<int32_t> pool_;
  std::vector<uint32_t> offsets_;
  std::vector<uint64_t> hashes_;
  std::vector<int32_t> table_;  // open addressing, a power of two at most half full: local ids, -1 empty
  // The NFA states in the sets interned so far (over every rule): the work and memory of the subset
  // construction, which an automaton of huge sets runs up long before the state limit.
  size_t set_elements_ = 0;
  std::vector<uint32_t> mark_;
  uint32_t generation_ = 0;
  std::vector<std::vector<int32_t>> buckets_;  // Expand's: [class]: the NFA states it leads to
  std::vector<int32_t> seeds_, closure_;
  std::vector<Nfa::RefEdge> refs_;
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
