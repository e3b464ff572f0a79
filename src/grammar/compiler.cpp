#include "grammar/compiler.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <string>
#include <unordered_map>

#include "grammar/components.h"
#include "grammar/hash128.h"
#include "grammar/nfa.h"

namespace deepinfer::grammar {

size_t CompiledGrammar::memory_bytes() const {
  return next_.size() * 4 + accepting_.size() * 9 + call_begin_.size() * 4 + calls_.size() * sizeof(CallEdge);
}

bool CompiledGrammar::Matches(std::string_view bytes) const {
  // Configurations are whole stacks of (state, count) frames (the current one last); fine for tests and
  // the CLI.
  using Stack = std::vector<std::pair<uint32_t, uint32_t>>;
  std::set<Stack> configs = {{{start(), 0}}};
  auto close = [&](std::set<Stack> in, uint8_t byte, bool final) {
    std::set<Stack> out, seen;
    std::vector<Stack> work(in.begin(), in.end());
    while (!work.empty()) {
      Stack s = std::move(work.back());
      work.pop_back();
      if (!seen.insert(s).second || seen.size() > 100000) continue;
      auto [top, count] = s.back();
      if (final) {
        if (accepting(top) && s.size() == 1) out.insert(s);
      } else if (uint32_t c = count, t = Step(top, byte, &c); t != kDead && CountLive(t, c)) {
        Stack n = s;
        n.back() = {t, c};
        out.insert(std::move(n));
      }
      for (const CallEdge* e = calls_begin(top); e != calls_end(top); ++e) {
        Stack n = s;
        n.back() = {e->target, count};
        n.push_back({rule_start(e->rule), 0});
        work.push_back(std::move(n));
      }
      if (accepting(top) && s.size() > 1) {
        Stack n(s.begin(), s.end() - 1);
        work.push_back(std::move(n));
      }
    }
    return out;
  };
  for (char c : bytes) {
    configs = close(std::move(configs), static_cast<uint8_t>(c), false);
    if (configs.empty()) return false;
  }
  return !close(std::move(configs), 0, true).empty();
}

class Compiler {
 public:
  Compiler(const Grammar& g, const CompileLimits& limits) : g_(g), limits_(limits), builder_(g, limits) {}

  Result<CompiledGrammar> Run();

 private:
  Status Analyse();
  static Status CountAnalysis(CompiledGrammar* g);
  static void LeafHashes(CompiledGrammar* g);

  const Grammar& g_;
  const CompileLimits& limits_;
  NfaBuilder builder_;
  std::vector<uint8_t> recursive_;
  std::vector<uint8_t> inline_;
};

Status Compiler::Analyse() {
  const auto& rules = g_.rules();
  size_t n = rules.size();
  if (g_.root() >= n) return Status::InvalidArgument("the grammar has no root rule");
  std::vector<std::vector<uint32_t>> refs(n);
  std::vector<uint32_t> refcount(n, 0);
  std::vector<uint32_t> local_size(n, 0);
  std::vector<uint32_t> mark(g_.num_exprs(), 0xFFFFFFFFu);
  for (uint32_t r = 0; r < n; ++r) {
    if (!rules[r].defined) return Status::InvalidArgument("rule '" + rules[r].name + "' is used but not defined");
    std::vector<ExprId> stack = {rules[r].body};
    while (!stack.empty()) {
      ExprId e = stack.back();
      stack.pop_back();
      if (mark[e] == r) continue;
      mark[e] = r;
      ++local_size[r];
      const Expr& x = g_.expr(e);
      if (x.kind == ExprKind::kRef) {
        if (x.rule >= n) return Status::InvalidArgument("reference to a rule that does not exist");
        refs[r].push_back(x.rule);
        ++refcount[x.rule];
      }
      for (ExprId k : x.kids) stack.push_back(k);
    }
  }
  // Recursive rules are those in a cycle of calls (a component of several rules, or one calling itself).
  int32_t components = 0;
  const std::vector<int32_t> component = StronglyConnectedComponents(
      static_cast<uint32_t>(n), [&](uint32_t v) { return refs[v].size(); },
      [&](uint32_t v, size_t k) { return refs[v][k]; }, &components);
  std::vector<uint32_t> component_size(static_cast<size_t>(components), 0);
  for (uint32_t r = 0; r < n; ++r) ++component_size[static_cast<size_t>(component[r])];
  recursive_.assign(n, 0);
  for (uint32_t r = 0; r < n; ++r)
    recursive_[r] = component_size[static_cast<size_t>(component[r])] > 1 ||
                    std::find(refs[r].begin(), refs[r].end(), r) != refs[r].end();
  // Rules in reverse topological order of the component graph (callees before callers; the order inside a
  // component does not matter: its rules are recursive and never inlined).
  std::vector<uint32_t> topo(n);
  for (uint32_t r = 0; r < n; ++r) topo[r] = r;
  std::stable_sort(topo.begin(), topo.end(), [&](uint32_t a, uint32_t b) { return component[a] < component[b]; });
  // Inline a non-recursive rule when it is used once or stays small once its own inlined callees are
  // counted; a large rule used many times stays a called rule so the automaton does not multiply.
  inline_.assign(n, 0);
  std::vector<uint64_t> expanded(n, 0);
  for (uint32_t r : topo) {  // callees come before callers
    uint64_t size = local_size[r];
    for (uint32_t c : refs[r])
      if (inline_[c]) size += expanded[c];
    expanded[r] = std::min<uint64_t>(size, 1u << 30);
    ExprId counted = 0;
    inline_[r] = !recursive_[r] && r != g_.root() && (refcount[r] <= 1 || expanded[r] <= 300) &&
                 !CountedRuleShape(g_, r, &counted) && !rules[r].keep;
  }
  return Status::Ok();
}

Result<CompiledGrammar> Compiler::Run() {
  DI_RETURN_IF_ERROR(Analyse());
  builder_.SetInline(inline_, recursive_);
  // Kept rules: the root and every called rule reachable from it through the automata built.
  std::vector<int32_t> kept_index(g_.rules().size(), -1);
  std::vector<uint32_t> kept = {g_.root()};
  kept_index[g_.root()] = 0;
  std::vector<NfaBuilder::Frag> frags;
  std::vector<NfaBuilder::CountBounds> bounds;
  for (size_t i = 0; i < kept.size(); ++i) {
    DI_ASSIGN_OR_RETURN(NfaBuilder::Frag f, builder_.BuildRule(kept[i]));
    frags.push_back(f);
    bounds.push_back(builder_.TakeCountBounds());
    for (uint32_t callee : builder_.TakeCallees()) {
      if (callee >= kept_index.size()) kept_index.resize(callee + 1, -1);  // a shared part
      if (kept_index[callee] < 0) {
        kept_index[callee] = static_cast<int32_t>(kept.size());
        kept.push_back(callee);
      }
    }
  }
  Nfa& nfa = builder_.nfa();
  nfa.RemapCalls(kept_index);
  ByteClasses classes = ByteClasses::FromNfa(nfa);

  CompiledGrammar out;
  out.warnings_ = g_.warnings();
  out.num_classes_ = classes.count;
  out.byte_class_ = classes.map;
  for (int byte = 255; byte >= 0; --byte)
    out.class_last_[byte] = byte == 255 || classes.map[byte + 1] != classes.map[byte] ? static_cast<uint8_t>(byte)
                                                                                     : out.class_last_[byte + 1];
  const uint32_t nc = classes.count;
  // All rules' DFAs in one, each rule's states after the previous rule's; state 0 is dead.
  Dfa all;
  all.num_classes = nc;
  all.next.assign(nc, 0);
  {
    // A DFA state is a set of NFA states with moves, and large grammars' automata have about as many
    // states as their NFAs have such states, or fewer (all of the 601 bench schemas above 5,000 states):
    // reserving that many rows up front spares the table's regrowth (copies, and fresh pages touched twice).
    size_t rows = kept.size() + 2;
    for (const NfaState& st : nfa.states) rows += !st.bytes.empty() || !st.calls.empty();
    all.next.reserve(std::min<size_t>(rows, limits_.max_dfa_states + 1) * nc);
  }
  all.accepting.push_back(0);
  all.flags.push_back(0);
  all.calls.emplace_back();
  out.rule_of_.push_back(0);
  for (size_t k = 0; k < kept.size(); ++k) {
    if (all.num_states >= limits_.max_dfa_states)
      return Status::ResourceExhausted("the grammar's automaton exceeds " + std::to_string(limits_.max_dfa_states) +
                                       " states");
    const uint32_t first = all.num_states;
    Status det = DeterminizeInto(nfa, frags[k].start, frags[k].end, classes, builder_.deadline(),
                                 limits_.max_dfa_states - all.num_states, &all);
    if (det.code() == StatusCode::kResourceExhausted)
      return Status::ResourceExhausted("the grammar's automaton exceeds " + std::to_string(limits_.max_dfa_states) +
                                       " states");
    DI_RETURN_IF_ERROR(det);
    out.rule_start_.push_back(first);
    out.rule_of_.resize(all.num_states, static_cast<uint32_t>(k));
    out.rule_names_.push_back(builder_.RuleName(kept[k]));
    const UniqueRole role = kept[k] < g_.rules().size() ? g_.rules()[kept[k]].unique_role : UniqueRole::kNone;
    if (role != UniqueRole::kNone) {
      if (out.unique_role_.empty()) out.unique_role_.assign(kept.size(), UniqueRole::kNone);
      out.unique_role_[k] = role;
    }
    out.counted_.push_back(bounds[k].counted ? 1 : 0);
    out.count_min_.push_back(bounds[k].min);
    out.count_max_.push_back(bounds[k].max);
  }
  out.next_ = std::move(all.next);
  {
    // The grammar may stay cached a long time: the pages of rows reserved but not used (which a reused
    // heap block may hold) are handed back; the vector keeps its capacity, so nothing is copied.
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t used = reinterpret_cast<uintptr_t>(out.next_.data() + out.next_.size());
    const uintptr_t end = reinterpret_cast<uintptr_t>(out.next_.data() + out.next_.capacity());
    const uintptr_t from = (used + page - 1) / page * page, to = end / page * page;
    if (to > from) madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED);
  }
  out.accepting_ = std::move(all.accepting);
  out.flags_ = std::move(all.flags);
  std::vector<std::vector<CallEdge>> calls = std::move(all.calls);
  nfa = Nfa();  // the NFA is no longer needed: free it before the analyses below
  const uint32_t ns = static_cast<uint32_t>(out.accepting_.size());
  const uint32_t nr = static_cast<uint32_t>(kept.size());

  // Liveness and productivity together: a state is live when it reaches an accepting state of its rule
  // through bytes and calls of productive rules; a rule is productive when its start is live.
  std::vector<uint8_t> live(ns, 0), productive(nr, 0);
  // Predecessors by byte transitions, from the moves the subset construction recorded.
  std::vector<uint32_t> pred_begin, pred_list;
  MovePredecessors(all.moves, ns, &pred_begin, &pred_list);
  all.moves = {};
  for (bool changed = true; changed;) {
    changed = false;
    std::vector<uint32_t> work;
    for (uint32_t s = 1; s < ns; ++s)
      if (!live[s] && out.accepting_[s]) live[s] = 1, work.push_back(s);
    // Call edges whose callee is productive act as an edge s -> target.
    for (uint32_t s = 1; s < ns; ++s)
      for (const CallEdge& e : calls[s])
        if (!live[s] && productive[e.rule] && live[e.target]) live[s] = 1, work.push_back(s);
    while (!work.empty()) {
      uint32_t t = work.back();
      work.pop_back();
      for (uint32_t k = pred_begin[t]; k < pred_begin[t + 1]; ++k)
        if (const uint32_t p = pred_list[k]; !live[p]) live[p] = 1, work.push_back(p);
      // Predecessors through call edges are found by the outer loop's rescan.
    }
    for (uint32_t r = 0; r < nr; ++r)
      if (!productive[r] && live[out.rule_start_[r]]) productive[r] = 1, changed = true;
    for (uint32_t s = 1; s < ns && !changed; ++s)
      for (const CallEdge& e : calls[s])
        if (!live[s] && productive[e.rule] && live[e.target]) changed = true;
  }
  if (!productive[0]) return Status::InvalidArgument("the grammar accepts no string");
  // Transitions into states that are not live are cut: only the rows of their predecessors hold any.
  std::vector<uint8_t> cut_row(ns, 0);
  for (uint32_t t = 1; t < ns; ++t)
    if (!live[t])
      for (uint32_t k = pred_begin[t]; k < pred_begin[t + 1]; ++k) cut_row[pred_list[k]] = 1;
  for (uint32_t s = 0; s < ns; ++s) {
    for (uint32_t c = 0; c < nc && cut_row[s]; ++c) {
      uint32_t& t = out.next_[s * nc + c];
      if (!live[t]) t = 0;
    }
    auto& ce = calls[s];
    ce.erase(std::remove_if(ce.begin(), ce.end(),
                            [&](const CallEdge& e) { return !productive[e.rule] || !live[e.target] || !live[s]; }),
             ce.end());
    std::sort(ce.begin(), ce.end(),
              [](const CallEdge& a, const CallEdge& b) { return a.rule != b.rule ? a.rule < b.rule : a.target < b.target; });
    ce.erase(std::unique(ce.begin(), ce.end(),
                         [](const CallEdge& a, const CallEdge& b) { return a.rule == b.rule && a.target == b.target; }),
             ce.end());
  }
  for (uint32_t r = 0; r < nr; ++r)
    if (!productive[r]) out.rule_start_[r] = 0;

  // Left recursion: a rule reaching a call to itself without consuming a byte would make the matcher's
  // closure loop. Nullable rules are found first (their start reaches an accepting state through calls
  // of nullable rules only).
  std::vector<uint8_t> nullable(nr, 0);
  auto null_reach = [&](uint32_t from, std::vector<uint32_t>* called) {
    // States reachable from `from` through calls of nullable rules; records every callee seen.
    std::vector<uint32_t> work = {from};
    std::set<uint32_t> seen = {from};
    bool acc = false;
    while (!work.empty()) {
      uint32_t s = work.back();
      work.pop_back();
      if (out.accepting_[s]) acc = true;
      for (const CallEdge& e : calls[s]) {
        if (called) called->push_back(e.rule);
        if (nullable[e.rule] && seen.insert(e.target).second) work.push_back(e.target);
      }
    }
    return acc;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t r = 0; r < nr; ++r)
      if (!nullable[r] && productive[r] && null_reach(out.rule_start_[r], nullptr)) nullable[r] = 1, changed = true;
  }
  std::vector<std::vector<uint32_t>> left(nr);
  for (uint32_t r = 0; r < nr; ++r)
    if (productive[r]) null_reach(out.rule_start_[r], &left[r]);
  {
    std::vector<uint8_t> color(nr, 0);
    for (uint32_t s = 0; s < nr; ++s) {
      if (color[s]) continue;
      std::vector<std::pair<uint32_t, size_t>> dfs = {{s, 0}};
      color[s] = 1;
      while (!dfs.empty()) {
        auto& [v, i] = dfs.back();
        if (i < left[v].size()) {
          uint32_t w = left[v][i++];
          if (color[w] == 1)
            return Status::InvalidArgument("left recursion through rule '" + out.rule_names_[w] +
                                           "' (rewrite it to recurse on the right)");
          if (color[w] == 0) color[w] = 1, dfs.push_back({w, 0});
          continue;
        }
        color[v] = 2;
        dfs.pop_back();
      }
    }
  }
  out.call_begin_.assign(ns + 1, 0);
  for (uint32_t s = 0; s < ns; ++s) {
    out.call_begin_[s + 1] = out.call_begin_[s] + static_cast<uint32_t>(calls[s].size());
    for (const CallEdge& e : calls[s]) out.calls_.push_back(e);
  }
  DI_RETURN_IF_ERROR(CountAnalysis(&out));
  LeafHashes(&out);
  return out;
}

// dmin/dmax of every state of a counted rule before or inside its counted part, on the final automaton
// (what the matcher runs). A move from such a state to one after the counted part leaves it.
Status Compiler::CountAnalysis(CompiledGrammar* g) {
  const uint32_t ns = g->num_states(), nc = g->num_classes_;
  g->dmin_.assign(ns, 0);
  g->dmax_.assign(ns, kUnbounded);
  // Members: counting states and the states of counted rules that reach one (the prefix).
  std::vector<uint8_t> member(ns, 0);
  std::vector<std::vector<uint32_t>> preds(ns);
  std::vector<uint32_t> work;
  for (uint32_t s = 1; s < ns; ++s) {
    if (!g->counted_[g->rule_of_[s]]) continue;
    for (uint32_t c = 0; c < nc; ++c)
      if (uint32_t t = g->next_[s * nc + c]; t != 0) preds[t].push_back(s);
    if (g->counting(s)) member[s] = 1, work.push_back(s);
  }
  while (!work.empty()) {
    uint32_t t = work.back();
    work.pop_back();
    for (uint32_t p : preds[t])
      if (!member[p]) member[p] = 1, work.push_back(p);
  }
  std::vector<uint32_t> local(ns, 0xFFFFFFFFu), members;
  for (uint32_t s = 1; s < ns; ++s)
    if (member[s]) local[s] = static_cast<uint32_t>(members.size()), members.push_back(s);
  if (members.empty()) return Status::Ok();
  const size_t n = members.size();
  std::vector<std::vector<std::pair<uint32_t, uint8_t>>> succ(n);
  std::vector<uint8_t> exit(n, 0), live(n, 1), relax(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t s = members[i];
    const uint32_t r = g->rule_of_[s];
    relax[i] = CountRelax(g->count_min_[r], g->count_max_[r]);
    for (uint32_t c = 0; c < nc; ++c) {
      const uint32_t t = g->next_[s * nc + c];
      if (t == 0) continue;
      if (!member[t]) {
        exit[i] = 1;
        continue;
      }
      const uint8_t tick = g->boundary(s) && g->counting(t) ? 1 : 0;
      bool dup = false;
      for (auto& [tt, k] : succ[i]) dup |= tt == local[t] && k == tick;
      if (!dup) succ[i].push_back({local[t], tick});
    }
  }
  // Each counted rule's count starts at 0 at the rule's start and is kept across the calls it makes.
  CountEntries entries;
  entries.min.assign(n, 0);
  entries.max.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t s = members[i];
    const uint32_t r = g->rule_of_[s];
    entries.min[i] = g->count_min_[r];
    entries.max[i] = g->count_max_[r];
    if (s == g->rule_start_[r]) entries.starts.push_back(static_cast<uint32_t>(i));
    for (const CallEdge* e = g->calls_begin(s); e != g->calls_end(s); ++e)
      if (member[e->target]) entries.resumes.push_back({static_cast<uint32_t>(i), local[e->target]});
  }
  std::vector<uint32_t> dmin, dmax;
  std::vector<uint8_t> unbounded;
  if (!CountReach(succ, exit, live, relax, &dmin, &dmax, &unbounded, &entries))
    return Status::Internal("a counted repetition lost its interval property in the final automaton");
  for (size_t i = 0; i < n; ++i) {
    g->dmin_[members[i]] = dmin[i];
    g->dmax_[members[i]] = dmax[i];
  }
  return Status::Ok();
}

// Canonical order and content hash of each leaf rule: states numbered in the order a breadth-first walk
// from the rule's start meets them, bytes in increasing order; the hash covers, per state, its flags,
// acceptance, units bounds (dmin/dmax) and the byte ranges with their targets' canonical numbers.
void Compiler::LeafHashes(CompiledGrammar* g) {
  const uint32_t ns = g->num_states(), nr = static_cast<uint32_t>(g->rule_start_.size());
  g->leaf_.assign(nr, 1);
  g->rule_hash_.assign(nr, RuleHash{});
  g->canon_.assign(ns, 0);
  for (uint32_t s = 1; s < ns; ++s)
    if (g->has_calls(s)) g->leaf_[g->rule_of_[s]] = 0;
  std::vector<uint32_t> order;
  for (uint32_t r = 0; r < nr; ++r) {
    if (!g->leaf_[r] || g->rule_start_[r] == 0) {
      g->leaf_[r] = 0;
      continue;
    }
    order.assign(1, g->rule_start_[r]);
    g->canon_[order[0]] = 1;
    Mixer128 h;
    auto mix = [&h](uint64_t v) { h.Mix(v); };
    for (size_t i = 0; i < order.size(); ++i) {
      const uint32_t s = order[i];
      mix(g->flags_[s] | (static_cast<uint64_t>(g->accepting_[s]) << 8));
      mix(g->dmin_[s]);
      mix(g->dmax_[s]);
      uint32_t prev = 0xFFFFFFFFu;
      for (int byte = 0; byte < 256; ++byte) {
        const uint32_t t = g->Next(s, static_cast<uint8_t>(byte));
        if (t != 0 && g->canon_[t] == 0) g->canon_[t] = static_cast<uint32_t>(order.size()) + 1, order.push_back(t);
        const uint32_t ct = t == 0 ? 0 : g->canon_[t];
        if (ct != prev) mix((static_cast<uint64_t>(byte) << 32) | ct), prev = ct;
      }
      mix(0xFFFFFFFFFFFFULL);
    }
    for (uint32_t s : order) g->canon_[s] -= 1;
    g->rule_hash_[r] = RuleHash{h.a, h.b ^ order.size()};
  }
}

Result<CompiledGrammar> Compile(const Grammar& g, const CompileLimits& limits) {
  Compiler c(g, limits);
  return c.Run();
}

}  // namespace deepinfer::grammar
