// The passes after determinisation: trimming, left-recursion check and per-state precomputation.
// Fixpoints iterate states in descending order: determinisation numbers states breadth-first from each
// rule's start, so successors mostly come later and one or two sweeps usually settle.
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "grammar/compile_internal.h"
#include "grammar/vocabulary.h"

namespace llamay::grammar::internal {
namespace {

constexpr int32_t kInfinite = std::numeric_limits<int32_t>::max() / 4;

template <typename Fn>
void Fixpoint(const Automaton& a, Fn step) {
  bool changed = true;
  while (changed) {
    changed = false;
    for (int32_t s = static_cast<int32_t>(a.states.size()) - 1; s >= 0; --s) changed |= step(s);
  }
}

template <typename Fn>
void ForEachClassTarget(const Automaton& a, int32_t s, Fn fn) {
  const int32_t* row = &a.trans[static_cast<size_t>(s) * a.num_classes];
  for (int32_t c = 0; c < a.num_classes; ++c) {
    if (row[c] >= 0) fn(c, row[c]);
  }
}

// Each state's distinct byte-edge targets, in compressed rows: the fixpoints sweep these, not every class
// of every state (an automaton of many classes has few distinct targets a state).
struct Successors {
  std::vector<uint32_t> begin;  // [state], and one past the last
  std::vector<int32_t> to;

  explicit Successors(const Automaton& a) {
    const int32_t n = static_cast<int32_t>(a.states.size());
    std::vector<int32_t> stamp(n, -1);
    begin.reserve(n + 1);
    for (int32_t s = 0; s < n; ++s) {
      begin.push_back(static_cast<uint32_t>(to.size()));
      ForEachClassTarget(a, s, [&](int32_t, int32_t t) {
        if (stamp[t] == s) return;
        stamp[t] = s;
        to.push_back(t);
      });
    }
    begin.push_back(static_cast<uint32_t>(to.size()));
  }

  template <typename Fn>
  void ForEach(int32_t s, Fn fn) const {
    for (uint32_t i = begin[s]; i < begin[s + 1]; ++i) fn(to[i]);
  }

  // Drops the targets that are not `live`, as Trim drops their transitions.
  void KeepLive(const std::vector<bool>& live) {
    uint32_t kept = 0;
    for (size_t s = 0; s + 1 < begin.size(); ++s) {
      const uint32_t b = begin[s], e = begin[s + 1];
      begin[s] = kept;
      for (uint32_t i = b; i < e; ++i) {
        if (live[to[i]]) to[kept++] = to[i];
      }
    }
    begin.back() = kept;
    to.resize(kept);
  }
};

// Removes transitions into states that cannot reach the end of their rule, and reference edges to rules
// that can never end. Refuses a grammar in which a rule can never end.
Status Trim(Automaton* a, Successors* successors) {
  const size_t n = a->states.size();
  std::vector<bool> live(n);
  for (size_t s = 0; s < n; ++s) live[s] = a->states[s].final;
  Fixpoint(*a, [&](int32_t s) {
    if (live[s]) return false;
    bool ok = false;
    successors->ForEach(s, [&](int32_t t) { ok |= live[t]; });
    for (uint32_t i = a->states[s].ref_begin; i < a->states[s].ref_end && !ok; ++i) {
      ok = live[a->rule_start[a->refs[i].rule]] && live[a->refs[i].target];
    }
    live[s] = ok;
    return ok;
  });
  for (size_t r = 0; r < a->rule_start.size(); ++r) {
    if (!live[a->rule_start[r]]) {
      return InvalidArgumentError("rule '" + a->rule_names[r] +
                                  "' can never complete (every alternative recurses without end)");
    }
  }
  // Only the rows of states with a dead successor change.
  for (size_t s = 0; s < n; ++s) {
    bool dead = false;
    successors->ForEach(static_cast<int32_t>(s), [&](int32_t t) { dead |= !live[t]; });
    if (!dead) continue;
    int32_t* row = &a->trans[s * a->num_classes];
    for (int32_t c = 0; c < a->num_classes; ++c) {
      if (row[c] >= 0 && !live[row[c]]) row[c] = -1;
    }
  }
  successors->KeepLive(live);
  std::vector<Automaton::Ref> refs;
  for (auto& st : a->states) {
    const uint32_t begin = static_cast<uint32_t>(refs.size());
    for (uint32_t i = st.ref_begin; i < st.ref_end; ++i) {
      if (live[a->refs[i].target]) refs.push_back(a->refs[i]);
    }
    st.ref_begin = begin;
    st.ref_end = static_cast<uint32_t>(refs.size());
  }
  a->refs = std::move(refs);
  return Status::Ok();
}

void ComputeCanPop(Automaton* a) {
  for (auto& st : a->states) st.can_pop = st.final;
  Fixpoint(*a, [&](int32_t s) {
    Automaton::State& st = a->states[s];
    if (st.can_pop) return false;
    for (uint32_t i = st.ref_begin; i < st.ref_end; ++i) {
      const auto& ref = a->refs[i];
      if (a->states[a->rule_start[ref.rule]].can_pop && a->states[ref.target].can_pop) {
        st.can_pop = true;
        return true;
      }
    }
    return false;
  });
}

// A rule is left-recursive when it can enter itself, through rules entered before any byte, without
// consuming a byte. The matcher would descend forever there, so it is refused (as llama.cpp does).
Status CheckLeftRecursion(const Automaton& a) {
  const size_t rules = a.rule_start.size();
  // calls[r]: the rules r can enter before consuming a byte.
  std::vector<std::vector<int32_t>> calls(rules);
  std::vector<int32_t> seen(a.states.size(), -1);
  for (size_t r = 0; r < rules; ++r) {
    std::vector<int32_t> todo{a.rule_start[r]};
    seen[a.rule_start[r]] = static_cast<int32_t>(r);
    while (!todo.empty()) {
      const auto& st = a.states[todo.back()];
      todo.pop_back();
      for (uint32_t i = st.ref_begin; i < st.ref_end; ++i) {
        const auto& ref = a.refs[i];
        if (std::find(calls[r].begin(), calls[r].end(), ref.rule) == calls[r].end())
          calls[r].push_back(ref.rule);
        if (a.states[a.rule_start[ref.rule]].can_pop && seen[ref.target] != static_cast<int32_t>(r)) {
          seen[ref.target] = static_cast<int32_t>(r);
          todo.push_back(ref.target);
        }
      }
    }
  }
  // Depth-first search for a cycle, keeping the path to name it.
  std::vector<int> color(rules, 0);  // 0 unvisited, 1 on the path, 2 done
  std::vector<int32_t> path;
  std::string cycle;
  int32_t cycle_rule = -1;
  auto dfs = [&](auto&& self, int32_t r) -> bool {
    color[r] = 1;
    path.push_back(r);
    for (int32_t c : calls[r]) {
      if (color[c] == 1) {
        auto it = std::find(path.begin(), path.end(), c);
        for (; it != path.end(); ++it) cycle += a.rule_names[*it] + " -> ";
        cycle += a.rule_names[c];
        cycle_rule = c;
        return true;
      }
      if (color[c] == 0 && self(self, c)) return true;
    }
    path.pop_back();
    color[r] = 2;
    return false;
  };
  for (size_t r = 0; r < rules; ++r) {
    if (color[r] == 0 && dfs(dfs, static_cast<int32_t>(r))) {
      return InvalidArgumentError("left recursion: rule '" + a.rule_names[cycle_rule] +
                                  "' can reach itself without consuming input (" + cycle + ")");
    }
  }
  return Status::Ok();
}

// What each byte class holds: its bytes, and the union of their kinds (vocabulary.h). The per-state passes
// below look at a state's classes, not at its 256 bytes.
struct ClassInfo {
  std::vector<ByteSet> bytes;
  std::vector<uint8_t> kinds;
  std::vector<int32_t> text;  // the classes that hold a kKindText byte
};

ClassInfo DescribeClasses(const Automaton& a) {
  ClassInfo info;
  info.bytes.assign(a.num_classes, ByteSet());
  info.kinds.assign(a.num_classes, 0);
  for (int b = 0; b < 256; ++b) {
    const uint8_t c = a.byte_class[b];
    info.bytes[c].Set(static_cast<uint8_t>(b));
    info.kinds[c] |= KindOf(static_cast<uint8_t>(b));
  }
  for (int32_t c = 0; c < a.num_classes; ++c) {
    if (info.kinds[c] & kKindText) info.text.push_back(c);
  }
  return info;
}

// first (the bytes a state consumes itself, then those of the rules it enters) and loop_kinds, from one
// read of each row.
void ComputeFirstAndLoops(Automaton* a, const ClassInfo& classes) {
  a->first.assign(a->states.size(), ByteSet());
  a->loop_kinds.assign(a->states.size(), 0);
  for (size_t s = 0; s < a->states.size(); ++s) {
    uint8_t broken = 0;  // kinds with a byte that does not loop
    uint64_t w[4] = {};
    const int32_t* row = &a->trans[s * a->num_classes];
    for (int32_t c = 0; c < a->num_classes; ++c) {
      const ByteSet& bytes = classes.bytes[c];
      const uint64_t consumed = row[c] >= 0 ? ~uint64_t{0} : 0;
      for (int i = 0; i < 4; ++i) w[i] |= bytes.w[i] & consumed;
      broken |= row[c] != static_cast<int32_t>(s) ? classes.kinds[c] : 0;
    }
    for (int i = 0; i < 4; ++i) a->first[s].w[i] = w[i];
    a->loop_kinds[s] = static_cast<uint8_t>(~broken & 31);
  }
  Fixpoint(*a, [&](int32_t s) {
    bool changed = false;
    const auto& st = a->states[s];
    for (uint32_t i = st.ref_begin; i < st.ref_end; ++i) {
      const auto& ref = a->refs[i];
      const int32_t start = a->rule_start[ref.rule];
      changed |= a->first[s].Merge(a->first[start]);
      if (a->states[start].can_pop) changed |= a->first[s].Merge(a->first[ref.target]);
    }
    return changed;
  });
}

void ComputeDist(Automaton* a, const Successors& successors) {
  for (auto& st : a->states) st.dist = st.final ? 0 : kInfinite;
  Fixpoint(*a, [&](int32_t s) {
    Automaton::State& st = a->states[s];
    int32_t best = st.dist;
    successors.ForEach(s, [&](int32_t t) { best = std::min(best, a->states[t].dist + 1); });
    for (uint32_t i = st.ref_begin; i < st.ref_end; ++i) {
      const auto& ref = a->refs[i];
      const int64_t via = int64_t{a->states[a->rule_start[ref.rule]].dist} + a->states[ref.target].dist;
      best = static_cast<int32_t>(std::min<int64_t>(best, std::min<int64_t>(via, kInfinite)));
    }
    if (best >= st.dist) return false;
    st.dist = best;
    return true;
  });
}

// text_run: follow the one state every text byte leads to, as long as there is one; a cycle means no end.
void ComputeTextRun(Automaton* a, const ClassInfo& classes) {
  constexpr int32_t kUnknown = -1, kOnPath = -2;
  const int32_t n = static_cast<int32_t>(a->states.size());
  std::vector<int32_t> next(n, -1);
  for (int32_t s = 0; s < n; ++s) {
    if (a->states[s].ref_begin != a->states[s].ref_end || a->states[s].final) continue;  // not simple
    int32_t target = -2;
    for (size_t i = 0; i < classes.text.size() && target != -1; ++i) {
      const int32_t t = a->trans[static_cast<size_t>(s) * a->num_classes + classes.text[i]];
      target = (target == -2 || target == t) ? t : -1;
    }
    next[s] = target < 0 ? -1 : target;
  }
  a->text_run.assign(n, kUnknown);
  std::vector<int32_t> path;
  for (int32_t s = 0; s < n; ++s) {
    int32_t x = s;
    while (x >= 0 && a->text_run[x] == kUnknown) {
      a->text_run[x] = kOnPath;
      path.push_back(x);
      x = next[x];
    }
    // x is -1 (the chain stops), a state already known, or one on this path (a cycle).
    int32_t run = x < 0 ? 0 : (a->text_run[x] == kOnPath ? kInfinite : a->text_run[x]);
    while (!path.empty()) {
      const int32_t y = path.back();
      path.pop_back();
      if (next[y] < 0) {
        run = 0;
      } else if (run != kInfinite) {
        run = std::min(run + 1, kInfinite);
      }
      a->text_run[y] = run;
    }
  }
}

}  // namespace

Status Analyze(Automaton* a) {
  Successors successors(*a);
  LLAMAY_RETURN_IF_ERROR(Trim(a, &successors));
  ComputeCanPop(a);
  LLAMAY_RETURN_IF_ERROR(CheckLeftRecursion(*a));
  const ClassInfo classes = DescribeClasses(*a);
  ComputeFirstAndLoops(a, classes);
  ComputeDist(a, successors);
  ComputeTextRun(a, classes);
  a->simple.clear();
  for (auto& st : a->states) {
    st.simple = st.ref_begin == st.ref_end && !st.final;
    a->simple.push_back(st.simple);
  }
  return Status::Ok();
}

}  // namespace llamay::grammar::internal
