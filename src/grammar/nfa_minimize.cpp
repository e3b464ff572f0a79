// NfaBuilder's cache of minimal DFAs for regular sub-expressions (see nfa.h): which expressions qualify,
// their content hashes, the minimisation and the splice back into an NFA.
#include <algorithm>
#include <array>
#include <list>
#include <map>
#include <mutex>
#include <unordered_map>

#include "grammar/hash128.h"
#include "grammar/nfa.h"

namespace deepinfer::grammar {

namespace {

constexpr uint64_t kSizeCap = uint64_t{1} << 40;

uint64_t SatAdd(uint64_t a, uint64_t b) { return std::min(kSizeCap, a + b); }
uint64_t SatMul(uint64_t a, uint64_t b) {
  if (a == 0 || b == 0) return 0;
  return a > kSizeCap / b ? kSizeCap : std::min(kSizeCap, a * b);
}

}  // namespace

void NfaBuilder::AnalyseExprs() {
  const size_t n = g_.num_exprs();
  info_.assign(n, ExprInfo{});
  const auto& rules = g_.rules();
  auto inlined_body = [&](const Expr& x, ExprId* body) {
    if (x.kind != ExprKind::kRef || x.rule >= rules.size() || !rules[x.rule].defined) return false;
    if (x.rule >= inline_.size() || !inline_[x.rule] || (x.rule < recursive_.size() && recursive_[x.rule])) return false;
    *body = rules[x.rule].body;
    return true;
  };
  // Iterative post-order over the expression DAG (inlined references followed into their bodies).
  std::vector<std::pair<ExprId, size_t>> stack;
  for (ExprId root = 0; root < n; ++root) {
    if (info_[root].visit) continue;
    info_[root].visit = 1;
    stack.push_back({root, 0});
    while (!stack.empty()) {
      const ExprId e = stack.back().first;
      const size_t k = stack.back().second;
      const Expr& x = g_.expr(e);
      ExprId child = 0;
      bool has_child = false;
      if (k < x.kids.size()) {
        child = x.kids[k];
        has_child = true;
      } else if (k == x.kids.size() && inlined_body(x, &child)) {
        has_child = true;
      }
      if (has_child) {
        ++stack.back().second;
        if (child < n && info_[child].visit == 0) {
          info_[child].visit = 1;
          stack.push_back({child, 0});
        }
        continue;
      }
      stack.pop_back();
      ExprInfo& in = info_[e];
      Mixer128 h;
      h.Mix(static_cast<uint64_t>(x.kind));
      bool regular = x.kind != ExprKind::kCounted;
      uint64_t size = 2;
      auto kid_info = [&](ExprId c) -> const ExprInfo* {
        if (c >= n || info_[c].visit != 2) return nullptr;  // open: a cycle
        return &info_[c];
      };
      uint64_t kids_size = 0;
      for (ExprId c : x.kids) {
        const ExprInfo* ki = kid_info(c);
        if (!ki) {
          regular = false;
          continue;
        }
        regular &= ki->regular;
        kids_size = SatAdd(kids_size, ki->size);
        h.Mix(ki->ha);
        h.Mix(ki->hb);
      }
      switch (x.kind) {
        case ExprKind::kLiteral:
          h.Mix(x.text.size());
          for (unsigned char c : x.text) h.Mix(c);
          size = SatAdd(size, x.text.size());
          break;
        case ExprKind::kChars:
        case ExprKind::kBytes:
          h.Mix(x.ranges.size());
          for (auto [lo, hi] : x.ranges) h.Mix((static_cast<uint64_t>(lo) << 32) | hi);
          size = SatAdd(size, 4 * x.ranges.size());
          break;
        case ExprKind::kRepeat: {
          h.Mix((static_cast<uint64_t>(x.min) << 32) | x.max);
          const uint64_t copies = x.max == kUnbounded ? uint64_t{x.min} + 1 : std::max<uint64_t>(x.max, 1);
          size = SatAdd(size, SatMul(copies, kids_size));
          break;
        }
        case ExprKind::kSepList: {
          h.Mix((static_cast<uint64_t>(x.min) << 32) | x.max);
          h.Mix((x.has_separator ? 1 : 0) | (x.repeat_last ? 2 : 0));
          for (uint8_t r : x.required) h.Mix(r);
          const uint64_t cap = x.max == kUnbounded ? std::max<uint64_t>(x.min, 1) : x.max;
          size = SatAdd(size, SatMul(cap + 1, SatAdd(SatMul(2, kids_size), x.kids.size() + 1)));
          break;
        }
        case ExprKind::kMultiple:
          h.Mix((static_cast<uint64_t>(x.min) << 32) | x.max);
          size = SatAdd(size, SatMul(uint64_t{x.min}, uint64_t{x.max} + 3));
          break;
        case ExprKind::kRef: {
          ExprId body = 0;
          const ExprInfo* bi = inlined_body(x, &body) ? kid_info(body) : nullptr;
          if (!bi) {
            regular = false;
            h.Mix(x.rule);
            break;
          }
          // An inlined rule is its body: equal bodies behind different rules share one DFA.
          in.visit = 2;
          in.regular = bi->regular;
          in.size = bi->size;
          in.ha = bi->ha;
          in.hb = bi->hb;
          continue;
        }
        default:
          size = SatAdd(size, kids_size);
          break;
      }
      in.visit = 2;
      in.regular = regular;
      in.size = size;
      in.ha = h.a;
      in.hb = h.b ^ size;
    }
  }
}

void NfaBuilder::CommonEnds(const Expr& alt, bool* pre, bool* suf) const {
  *pre = *suf = false;
  if (alt.kids.size() < 2) return;
  auto same = [&](ExprId a, ExprId b) {
    if (a >= info_.size() || b >= info_.size()) return false;
    const ExprInfo& x = info_[a];
    const ExprInfo& y = info_[b];
    return x.visit == 2 && y.visit == 2 && x.regular && y.regular && x.ha == y.ha && x.hb == y.hb;
  };
  for (ExprId k : alt.kids)
    if (k >= info_.size() || g_.expr(k).kind != ExprKind::kSeq || g_.expr(k).kids.size() < 2) return;
  const std::vector<ExprId>& first = g_.expr(alt.kids[0]).kids;
  bool p = true, s = true;
  for (ExprId k : alt.kids) {
    const std::vector<ExprId>& parts = g_.expr(k).kids;
    p &= same(parts.front(), first.front());
    s &= same(parts.back(), first.back());
  }
  *pre = p;
  *suf = s;
}

std::vector<std::vector<ExprId>> NfaBuilder::AltGroupsByEnds(const Expr& alt) const {
  std::vector<std::vector<ExprId>> groups;
  // Keys: the content hashes of the first and the last part; a group is keyed only when both are regular.
  std::map<std::array<uint64_t, 4>, size_t> group_of;
  for (ExprId k : alt.kids) {
    const Expr& e = g_.expr(k);
    bool keyed = k < info_.size() && e.kind == ExprKind::kSeq && e.kids.size() >= 2;
    std::array<uint64_t, 4> key{};
    if (keyed) {
      const ExprId a = e.kids.front(), b = e.kids.back();
      keyed = a < info_.size() && b < info_.size() && info_[a].visit == 2 && info_[b].visit == 2 && info_[a].regular &&
              info_[b].regular;
      if (keyed) key = {info_[a].ha, info_[a].hb, info_[b].ha, info_[b].hb};
    }
    size_t at = groups.size();
    if (keyed) at = group_of.try_emplace(key, groups.size()).first->second;
    if (at == groups.size()) groups.emplace_back();
    groups[at].push_back(k);
  }
  return groups;
}

class NfaBuilder::SharedParts {
 public:
  static SharedParts& Get() {
    static SharedParts* parts = new SharedParts();  // never destroyed: compiles may run at exit
    return *parts;
  }
  std::shared_ptr<const SmallDfa> Find(const Hash128& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second.place);
    return it->second.dfa;
  }
  void Add(const Hash128& key, std::shared_ptr<const SmallDfa> dfa) {
    size_t edges = 0;
    for (const auto& state : dfa->edges) edges += state.size() + 1;
    if (edges > kSharedEdgeBudget / 4) return;  // one part must not flush the rest
    std::lock_guard<std::mutex> lock(mu_);
    if (map_.count(key)) return;
    while (edges_ + edges > kSharedEdgeBudget && !order_.empty()) {
      auto victim = map_.find(order_.back());
      edges_ -= victim->second.edges;
      map_.erase(victim);
      order_.pop_back();
    }
    order_.push_front(key);
    map_.emplace(key, Entry{std::move(dfa), edges, order_.begin()});
    edges_ += edges;
  }

 private:
  struct Entry {
    std::shared_ptr<const SmallDfa> dfa;
    size_t edges;
    std::list<Hash128>::iterator place;
  };
  std::mutex mu_;
  std::unordered_map<Hash128, Entry, Hash128Hasher> map_;
  std::list<Hash128> order_;  // most recently used first
  size_t edges_ = 0;
};

Hash128 NfaBuilder::PartKey(ExprId e) const {
  // Folded and plain unions give different (equivalent) automata; tests compare the two.
  return Hash128{info_[e].ha, info_[e].hb ^ (limits_.fold_unions ? 0 : 0x9E3779B97F4A7C15ULL)};
}

void NfaBuilder::KeepSmallDfa(ExprId e, const std::shared_ptr<const SmallDfa>& small) {
  const Hash128 key = PartKey(e);
  small_.emplace(key, small);
  if (SharedAcrossGrammars(e)) SharedParts::Get().Add(key, small);
}

Result<std::shared_ptr<const NfaBuilder::SmallDfa>> NfaBuilder::SmallDfaOf(const Nfa& into, ExprId e, uint32_t depth) {
  const Hash128 key = PartKey(e);
  if (auto it = small_.find(key); it != small_.end()) return it->second;
  if (SharedAcrossGrammars(e)) {
    if (std::shared_ptr<const SmallDfa> shared = SharedParts::Get().Find(key)) {
      small_.emplace(key, shared);
      return shared;
    }
  }
  const size_t open = &into == &nfa_ ? 0 : into.states.size();
  open_scratch_ += open;
  const Expr& x = g_.expr(e);
  if (x.kind == ExprKind::kAnd || x.kind == ExprKind::kMinus) {
    // A product is a DFA already: minimised as it is, without the round trip through an NFA. Its operands
    // are minimal, and a large product of them is too as a rule (in the JSONSchemaBench sample none above
    // kMergeCells merges a state; the largest, a key excluding 412 property names, cost 6 ms to check), so
    // those are only trimmed to their live states.
    constexpr uint64_t kMergeCells = uint64_t{1} << 16;
    auto p = ProductDfa(x, depth);
    open_scratch_ -= open;
    if (!p.ok()) return p.status();
    const bool merge = static_cast<uint64_t>(p->dfa.num_states) * p->classes.count <= kMergeCells;
    std::shared_ptr<const SmallDfa> small = Minimize(p->dfa, p->classes, merge);
    KeepSmallDfa(e, small);
    return small;
  }
  // Unanchored pattern alternatives share "any text" at their ends, which BuildNode builds once; a fold
  // would undo that (each union tracks the partial matches of both sides). Other shared ends (an object's
  // braces) do not keep the subset construction from tracking every combination, so those still fold.
  bool shared_ends = false;
  if (x.kind == ExprKind::kAlt && limits_.fold_unions) {
    auto loops = [&](ExprId part) {
      const Expr& y = g_.expr(part);
      return y.kind == ExprKind::kRepeat && y.max == kUnbounded;
    };
    bool pre = false, suf = false, grouped = false;
    CommonEnds(x, &pre, &suf);
    grouped = pre || suf;
    for (const std::vector<ExprId>& group : grouped ? std::vector<std::vector<ExprId>>{} : AltGroupsByEnds(x))
      grouped |= group.size() > 1;
    for (ExprId k : x.kids) {
      const Expr& y = g_.expr(k);
      shared_ends |= grouped && y.kind == ExprKind::kSeq && y.kids.size() >= 2 && (loops(y.kids.front()) || loops(y.kids.back()));
    }
  }
  if (x.kind == ExprKind::kAlt && limits_.fold_unions && !shared_ends) {
    std::vector<ExprId> large, rest;
    for (ExprId k : x.kids)
      (k < info_.size() && info_[k].regular && info_[k].size >= kSpliceMinSize ? large : rest).push_back(k);
    if (large.size() >= 2) {
      auto u = UnionOfParts(large, rest, depth);
      open_scratch_ -= open;
      if (!u.ok()) return u.status();
      KeepSmallDfa(e, *u);
      return *u;
    }
  }
  Nfa scratch;
  auto f = BuildNode(scratch, e, depth, true);
  open_scratch_ -= open;
  if (!f.ok()) return f.status();
  const ByteClasses classes = ByteClasses::FromNfa(scratch);
  DI_ASSIGN_OR_RETURN(Dfa d, Determinize(scratch, f->start, f->end, classes, deadline_, limits_.max_dfa_states));
  scratch = Nfa();
  std::shared_ptr<const SmallDfa> small = Minimize(d, classes);
  KeepSmallDfa(e, small);
  return small;
}

namespace {

// Classes cut wherever an edge of `a` or `b` starts or ends.
ByteClasses ClassesOf(const std::vector<std::vector<ByteEdge>>& a, const std::vector<std::vector<ByteEdge>>& b) {
  std::array<uint8_t, 257> cut{};
  for (const auto* edges : {&a, &b})
    for (const auto& state : *edges)
      for (const ByteEdge& e : state) cut[e.lo] = 1, cut[static_cast<size_t>(e.hi) + 1] = 1;
  return ByteClasses::FromCuts(cut);
}

// A minimal DFA's table over `classes` (which no edge of it cuts): its start is state 1, state 0 dead.
Dfa TableOf(const std::vector<std::vector<ByteEdge>>& edges, const std::vector<uint8_t>& accepting, uint32_t start,
            const ByteClasses& classes) {
  const uint32_t n = static_cast<uint32_t>(edges.size()), nc = classes.count;
  auto id = [&](uint32_t s) { return s == start ? 1u : s < start ? s + 2 : s + 1; };
  Dfa d;
  d.num_states = n + 1;
  d.num_classes = nc;
  d.next.assign(static_cast<size_t>(n + 1) * nc, 0);
  d.accepting.assign(n + 1, 0);
  for (uint32_t s = 0; s < n; ++s) {
    d.accepting[id(s)] = accepting[s];
    for (const ByteEdge& e : edges[s])
      for (uint32_t c = classes.map[e.lo]; c <= classes.map[e.hi]; ++c) d.next[id(s) * nc + c] = id(e.to);
  }
  return d;
}

// Hopcroft's partition refinement over the live states and their transitions between live states only
// (the dead state and the transitions into it stay implicit, as in Valmari and Lehtinen's minimisation
// of partial automata): most states have a move on few classes, so the work follows the moves that
// exist, not states times classes. A block then holds states with equal languages. Both initial blocks
// start as splitters, since the implicit dead block never is one; a splitter block refines by every
// class at once.
std::vector<uint32_t> EquivalenceBlocks(const Dfa& d, const std::vector<DfaMove>& moves, const std::vector<uint8_t>& live,
                                        uint32_t* count) {
  const uint32_t N = d.num_states, nc = d.num_classes;
  // Incoming moves by target, as (class, source) in one CSR array.
  std::vector<uint32_t> in_begin(static_cast<size_t>(N) + 1, 0);
  for (const DfaMove& m : moves)
    if (live[m.source] && live[m.target]) in_begin[m.target + 1] += m.hi - m.lo + 1u;
  for (size_t k = 1; k < in_begin.size(); ++k) in_begin[k] += in_begin[k - 1];
  std::vector<std::pair<uint32_t, uint32_t>> in_moves(in_begin.back());  // (class, source)
  {
    std::vector<uint32_t> fill(in_begin.begin(), in_begin.end() - 1);
    for (const DfaMove& m : moves)
      if (live[m.source] && live[m.target])
        for (uint32_t c = m.lo; c <= m.hi; ++c) in_moves[fill[m.target]++] = {c, m.source};
  }
  // The refinable partition: elems grouped by block, block b = elems[first[b], last[b]).
  std::vector<uint32_t> elems, pos(N, 0), block(N, 0), first, last, marked;
  for (int acc = 1; acc >= 0; --acc) {
    first.push_back(static_cast<uint32_t>(elems.size()));
    const uint32_t b = static_cast<uint32_t>(first.size() - 1);
    for (uint32_t s = 1; s < N; ++s) {
      if (!live[s] || (d.accepting[s] != 0) != (acc == 1)) continue;
      pos[s] = static_cast<uint32_t>(elems.size());
      block[s] = b;
      elems.push_back(s);
    }
    last.push_back(static_cast<uint32_t>(elems.size()));
    if (last.back() == first.back()) first.pop_back(), last.pop_back();
  }
  marked.assign(first.size(), 0);
  std::vector<uint8_t> in_work(first.size(), 1);
  std::vector<uint32_t> work_list;
  for (uint32_t b = 0; b < first.size(); ++b) work_list.push_back(b);
  std::vector<std::vector<uint32_t>> sources(nc);  // by class: the sources of moves into the splitter
  std::vector<uint32_t> classes_seen, touched;
  while (!work_list.empty()) {
    const uint32_t a = work_list.back();
    work_list.pop_back();
    in_work[a] = 0;
    classes_seen.clear();
    for (uint32_t i = first[a]; i < last[a]; ++i) {
      const uint32_t t = elems[i];
      for (uint32_t k = in_begin[t]; k < in_begin[t + 1]; ++k) {
        const auto [c, s] = in_moves[k];
        if (sources[c].empty()) classes_seen.push_back(c);
        sources[c].push_back(s);
      }
    }
    for (uint32_t c : classes_seen) {
      // One class: its sources (each once: a state has one move per class) move to the marked front of
      // their blocks, and the blocks partly marked split.
      touched.clear();
      for (uint32_t s : sources[c]) {
        const uint32_t b = block[s];
        if (marked[b] == 0) touched.push_back(b);
        const uint32_t to = first[b] + marked[b]++;
        const uint32_t other = elems[to];
        std::swap(elems[pos[s]], elems[to]);
        pos[other] = pos[s];
        pos[s] = to;
      }
      sources[c].clear();
      for (uint32_t b : touched) {
        const uint32_t m = marked[b];
        marked[b] = 0;
        if (m == last[b] - first[b]) continue;
        const uint32_t nb = static_cast<uint32_t>(first.size());
        first.push_back(first[b]);
        last.push_back(first[b] + m);
        marked.push_back(0);
        in_work.push_back(0);
        first[b] += m;
        for (uint32_t i = first[nb]; i < last[nb]; ++i) block[elems[i]] = nb;
        // A block waiting to split others is replaced by both halves; else the smaller half suffices.
        const uint32_t add = in_work[b] || last[nb] - first[nb] <= last[b] - first[b] ? nb : b;
        if (!in_work[add]) in_work[add] = 1, work_list.push_back(add);
      }
    }
  }
  *count = static_cast<uint32_t>(first.size());
  return block;
}

}  // namespace

std::shared_ptr<const NfaBuilder::SmallDfa> NfaBuilder::Minimize(const Dfa& d, const ByteClasses& classes, bool merge) {
  const uint32_t n = d.num_states, nc = d.num_classes;
  auto out = std::make_shared<SmallDfa>();
  const std::vector<DfaMove>& moves = d.moves;
  std::vector<uint32_t> move_begin(static_cast<size_t>(n) + 1, 0);  // state s's runs: [move_begin[s], move_begin[s + 1])
  for (const DfaMove& m : moves) ++move_begin[m.source + 1];
  for (size_t k = 1; k < move_begin.size(); ++k) move_begin[k] += move_begin[k - 1];
  // Live states: those that reach an accepting one (state 0 is dead, state 1 the start).
  std::vector<uint32_t> pred_begin, pred_list;
  MovePredecessors(moves, n, &pred_begin, &pred_list);
  std::vector<uint8_t> live(n, 0);
  std::vector<uint32_t> work;
  for (uint32_t s = 1; s < n; ++s)
    if (d.accepting[s]) live[s] = 1, work.push_back(s);
  while (!work.empty()) {
    const uint32_t t = work.back();
    work.pop_back();
    for (uint32_t k = pred_begin[t]; k < pred_begin[t + 1]; ++k)
      if (const uint32_t p = pred_list[k]; !live[p]) live[p] = 1, work.push_back(p);
  }
  if (n < 2 || !live[1]) {  // the empty language
    out->edges.resize(1);
    out->accepting.assign(1, 0);
    return out;
  }
  // Output states: blocks of equivalent live states (or each live state alone, unmerged).
  uint32_t num_blocks = 0;
  std::vector<uint32_t> block;
  if (merge) {
    block = EquivalenceBlocks(d, moves, live, &num_blocks);
  } else {
    block.assign(n, 0);
    for (uint32_t s = 1; s < n; ++s)
      if (live[s]) block[s] = num_blocks++;
  }
  std::vector<int32_t> cls(n, -1), index(num_blocks, -1);
  uint32_t count = 0;
  for (uint32_t s = 1; s < n; ++s) {
    if (!live[s]) continue;
    const uint32_t b = block[s];
    if (index[b] < 0) index[b] = static_cast<int32_t>(count++);
    cls[s] = index[b];
  }
  std::vector<std::pair<uint8_t, uint8_t>> span(nc, {255, 0});
  for (int byte = 255; byte >= 0; --byte) span[classes.map[byte]].first = static_cast<uint8_t>(byte);
  for (int byte = 0; byte < 256; ++byte) span[classes.map[byte]].second = static_cast<uint8_t>(byte);
  out->edges.resize(count);
  out->accepting.assign(count, 0);
  out->start = static_cast<uint32_t>(cls[1]);
  std::vector<uint8_t> done(count, 0);
  for (uint32_t s = 1; s < n; ++s) {
    if (!live[s] || done[static_cast<uint32_t>(cls[s])]) continue;
    const uint32_t k = static_cast<uint32_t>(cls[s]);
    done[k] = 1;
    out->accepting[k] = d.accepting[s];
    auto& edges = out->edges[k];
    for (uint32_t i = move_begin[s]; i < move_begin[s + 1]; ++i) {
      const DfaMove& m = moves[i];
      if (!live[m.target]) continue;
      const uint32_t to = static_cast<uint32_t>(cls[m.target]);
      // Classes are byte intervals in byte order, so a run of classes is one byte range.
      if (!edges.empty() && edges.back().to == to && edges.back().hi + 1 == span[m.lo].first)
        edges.back().hi = span[m.hi].second;
      else
        edges.push_back({span[m.lo].first, span[m.hi].second, to});
    }
  }
  return out;
}

Result<std::shared_ptr<const NfaBuilder::SmallDfa>> NfaBuilder::UnionOf(const SmallDfa& a, const SmallDfa& b) {
  const ByteClasses classes = ClassesOf(a.edges, b.edges);
  DI_ASSIGN_OR_RETURN(Dfa u, PairProduct(TableOf(a.edges, a.accepting, a.start, classes),
                                         TableOf(b.edges, b.accepting, b.start, classes), PairMode::kOr,
                                         limits_.max_dfa_states, deadline_));
  return Minimize(u, classes);
}

Result<std::shared_ptr<const NfaBuilder::SmallDfa>> NfaBuilder::UnionOfParts(const std::vector<ExprId>& large,
                                                                             const std::vector<ExprId>& rest,
                                                                             uint32_t depth) {
  std::shared_ptr<const SmallDfa> sum;
  if (!rest.empty()) {
    Nfa scratch;
    Frag f{scratch.New(), 0};
    f.end = scratch.New();
    for (ExprId k : rest) {
      DI_ASSIGN_OR_RETURN(Frag kf, Build(scratch, k, depth + 1, true));
      scratch.states[f.start].eps.push_back(kf.start);
      scratch.states[kf.end].eps.push_back(f.end);
    }
    const ByteClasses classes = ByteClasses::FromNfa(scratch);
    DI_ASSIGN_OR_RETURN(Dfa d, Determinize(scratch, f.start, f.end, classes, deadline_, limits_.max_dfa_states));
    sum = Minimize(d, classes);
  }
  std::vector<std::shared_ptr<const SmallDfa>> parts;
  if (sum) parts.push_back(std::move(sum));
  for (ExprId k : large) {
    // Built against the main NFA: no scratch automaton of this union is open meanwhile.
    DI_ASSIGN_OR_RETURN(std::shared_ptr<const SmallDfa> part, SmallDfaOf(nfa_, k, depth + 1));
    parts.push_back(std::move(part));
  }
  // Pairs first, then pairs of those: each round reads every part once, so many parts (long enum strings)
  // cost their total size times the rounds, not times their number.
  while (parts.size() > 1) {
    std::vector<std::shared_ptr<const SmallDfa>> next;
    for (size_t i = 0; i + 1 < parts.size(); i += 2) {
      DI_ASSIGN_OR_RETURN(std::shared_ptr<const SmallDfa> u, UnionOf(*parts[i], *parts[i + 1]));
      next.push_back(std::move(u));
    }
    if (parts.size() % 2) next.push_back(std::move(parts.back()));
    parts = std::move(next);
  }
  sum = std::move(parts[0]);
  return sum;
}

NfaBuilder::Frag NfaBuilder::Splice(Nfa& nfa, const SmallDfa& d) {
  const uint32_t base = static_cast<uint32_t>(nfa.states.size());
  const uint32_t n = static_cast<uint32_t>(d.edges.size());
  for (uint32_t i = 0; i < n; ++i) nfa.New();
  Frag f{nfa.New(), 0};
  f.end = nfa.New();
  nfa.states[f.start].eps.push_back(base + d.start);
  for (uint32_t i = 0; i < n; ++i) {
    NfaState& st = nfa.states[base + i];
    st.bytes.reserve(d.edges[i].size());
    for (const ByteEdge& e : d.edges[i]) st.bytes.push_back({e.lo, e.hi, base + e.to});
    if (d.accepting[i]) st.eps.push_back(f.end);
  }
  return f;
}

}  // namespace deepinfer::grammar
