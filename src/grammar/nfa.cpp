#include "grammar/nfa.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

namespace deepinfer::grammar {

void Nfa::RemapCalls(const std::vector<int32_t>& kept_index) {
  for (auto& s : states)
    for (auto& [rule, target] : s.calls) rule = static_cast<uint32_t>(kept_index[rule]);
}

ByteClasses ByteClasses::FromNfa(const Nfa& nfa) {
  std::array<uint8_t, 257> cut{};
  for (const auto& s : nfa.states)
    for (const auto& e : s.bytes) {
      cut[e.lo] = 1;
      cut[static_cast<size_t>(e.hi) + 1] = 1;
    }
  return FromCuts(cut);
}

ByteClasses ByteClasses::FromCuts(const std::array<uint8_t, 257>& cut) {
  ByteClasses c;
  uint32_t cls = 0;
  for (size_t b = 0; b < 256; ++b) {
    if (b > 0 && cut[b]) ++cls;
    c.map[b] = static_cast<uint8_t>(cls);
  }
  c.count = cls + 1;
  return c;
}

namespace {

uint64_t SetHash(const uint32_t* v, size_t n) {
  uint64_t h = 0x9E3779B97F4A7C15ULL ^ n;
  for (size_t i = 0; i < n; ++i) {
    h ^= v[i];
    h *= 0xBF58476D1CE4E5B9ULL;
    h ^= h >> 29;
  }
  return h;
}

// Sets of NFA states numbered by content, all of them in one pool and found through an open-addressing
// table: a DFA of tens of thousands of states cost an allocation per set and per map node before.
class SetTable {
 public:
  SetTable() : slots_(64, 0) {}
  // The sets so far, which is also the highest number given.
  uint32_t count() const { return static_cast<uint32_t>(begin_.size() - 2); }
  const uint32_t* data(uint32_t id) const { return pool_.data() + begin_[id]; }
  size_t size(uint32_t id) const { return begin_[id + 1] - begin_[id]; }
  // The number of the set v[0..n) (sets are numbered from 1; 0 is never a set's), and whether it is new.
  std::pair<uint32_t, bool> Intern(const uint32_t* v, size_t n) {
    const uint64_t h = SetHash(v, n);
    size_t mask = slots_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      const uint32_t id = slots_[i];
      if (id == 0) break;
      if (hash_[id] == h && size(id) == n && std::equal(v, v + n, data(id))) return {id, false};
    }
    pool_.insert(pool_.end(), v, v + n);
    begin_.push_back(static_cast<uint32_t>(pool_.size()));
    hash_.push_back(h);
    const uint32_t id = count();
    if (2 * (static_cast<size_t>(id) + 1) > slots_.size()) {
      slots_.assign(slots_.size() * 2, 0);
      mask = slots_.size() - 1;
      for (uint32_t k = 1; k < id; ++k) Place(k, mask);
    }
    Place(id, mask);
    return {id, true};
  }

 private:
  void Place(uint32_t id, size_t mask) {
    size_t i = hash_[id] & mask;
    while (slots_[i] != 0) i = (i + 1) & mask;
    slots_[i] = id;
  }
  std::vector<uint32_t> pool_;
  std::vector<uint32_t> begin_ = {0, 0};  // set 0: the empty placeholder
  std::vector<uint64_t> hash_ = {0};
  std::vector<uint32_t> slots_;
};

class Closure {
 public:
  Closure(const Nfa& nfa, uint32_t final) : nfa_(nfa), final_(final) {
    if (Marks().size() < nfa.states.size()) Marks().resize(nfa.states.size(), 0);
  }
  // The epsilon closure of seeds[0..n), sorted, into *out, keeping only the states that matter to the DFA:
  // those with byte or call edges, the final state, and counted states (one that can only leave the
  // counted part, after a pattern's last unit, still makes the DFA state a counting one, so that unit
  // counts). Sets that differ only in pass-through states are the same DFA state, so this also merges
  // states.
  void Of(const uint32_t* seeds, size_t n, std::vector<uint32_t>* out) {
    std::vector<uint32_t>& mark = Marks();
    uint32_t& generation = Generation();
    if (++generation == 0) std::fill(mark.begin(), mark.end(), 0), generation = 1;
    out->clear();
    stack_.clear();
    for (size_t i = 0; i < n; ++i)
      if (mark[seeds[i]] != generation) mark[seeds[i]] = generation, stack_.push_back(seeds[i]);
    while (!stack_.empty()) {
      uint32_t s = stack_.back();
      stack_.pop_back();
      const NfaState& st = nfa_.states[s];
      if (!st.bytes.empty() || !st.calls.empty() || s == final_ || (st.flags & kStateCounting)) out->push_back(s);
      for (uint32_t t : st.eps)
        if (mark[t] != generation) mark[t] = generation, stack_.push_back(t);
    }
    std::sort(out->begin(), out->end());
  }

 private:
  // Marks of the states seen by the current Of(), by generation. They outlive one Closure: the compiler
  // determinizes a grammar's rules one by one over the NFA of all of them, and clearing a mark per NFA
  // state for every rule cost more than most rules' own closures.
  static std::vector<uint32_t>& Marks() {
    static thread_local std::vector<uint32_t> marks;
    return marks;
  }
  static uint32_t& Generation() {
    static thread_local uint32_t generation = 0;
    return generation;
  }

  const Nfa& nfa_;
  uint32_t final_;
  std::vector<uint32_t> stack_;
};

}  // namespace

void MovePredecessors(const std::vector<DfaMove>& moves, uint32_t n, std::vector<uint32_t>* begin,
                      std::vector<uint32_t>* list) {
  std::vector<uint32_t> last_source(n, 0);  // per target: the last source counted (sources ascend)
  begin->assign(static_cast<size_t>(n) + 1, 0);
  for (const DfaMove& m : moves)
    if (last_source[m.target] != m.source) last_source[m.target] = m.source, ++(*begin)[m.target + 1];
  for (size_t k = 1; k < begin->size(); ++k) (*begin)[k] += (*begin)[k - 1];
  list->resize(begin->back());
  std::vector<uint32_t> fill(begin->begin(), begin->end() - 1);
  std::fill(last_source.begin(), last_source.end(), 0);
  for (const DfaMove& m : moves)
    if (last_source[m.target] != m.source) last_source[m.target] = m.source, (*list)[fill[m.target]++] = m.source;
}

Result<Dfa> Determinize(const Nfa& nfa, uint32_t start, uint32_t final, const ByteClasses& classes,
                        const Deadline& deadline, size_t max_states) {
  Dfa d;
  d.num_classes = classes.count;
  d.next.assign(classes.count, 0);
  d.accepting.push_back(0);
  d.flags.push_back(0);
  d.calls.emplace_back();
  DI_RETURN_IF_ERROR(DeterminizeInto(nfa, start, final, classes, deadline, max_states, &d));
  return d;
}

Status DeterminizeInto(const Nfa& nfa, uint32_t start, uint32_t final, const ByteClasses& classes,
                       const Deadline& deadline, size_t max_states, Dfa* into) {
  Dfa& d = *into;
  const uint32_t nc = classes.count;
  // This call's set k is DFA state base + k.
  const uint32_t base = d.num_states - 1;
  Closure closure(nfa, final);
  SetTable sets;
  std::vector<uint32_t> closed;  // Closure::Of's output, reused
  auto intern = [&](const std::vector<uint32_t>& set) -> Result<uint32_t> {
    if (set.empty()) return 0u;
    auto [local, fresh] = sets.Intern(set.data(), set.size());
    const uint32_t id = base + local;
    if (fresh) {
      if (local >= max_states)
        return Status::ResourceExhausted("the grammar's automaton exceeds " + std::to_string(max_states) + " states");
      d.next.resize(d.next.size() + nc, 0);
      d.accepting.push_back(std::binary_search(set.begin(), set.end(), final) ? 1 : 0);
      // A counting state is one holding counted NFA states; they must agree on being at a unit boundary,
      // or the counter would not know whether the next byte starts a unit.
      uint8_t f = 0;
      int boundary = -1;
      for (uint32_t s : set) {
        const uint8_t sf = nfa.states[s].flags;
        if (!(sf & kStateCounting)) continue;
        f |= kStateCounting;
        const int b = (sf & kStateBoundary) ? 1 : 0;
        if (boundary >= 0 && boundary != b)
          return Status::InvalidArgument("a counted repetition is ambiguous (its units are not prefix-free)");
        boundary = b;
      }
      if (boundary == 1) f |= kStateBoundary;
      d.flags.push_back(f);
      d.calls.emplace_back();
    }
    return id;
  };
  // The start gets a DFA state even when its closure keeps no state (an empty language): callers index
  // the rule's start state.
  closure.Of(&start, 1, &closed);
  if (closed.empty()) closed.push_back(start);
  DI_ASSIGN_OR_RETURN(uint32_t s0, intern(closed));
  (void)s0;
  SetTable by_seeds;  // seed sets of several states met so far; their DFA states in seeds_target
  std::vector<uint32_t> seeds_target = {0};
  // One-state seed sets, most of them: the DFA state of each, by NFA state, in per-thread arrays stamped
  // by call (the compiler determinizes rule after rule over one large NFA; a map cost a hash lookup per
  // segment, a fresh array a clear per rule).
  static thread_local std::vector<uint32_t> single_target, single_stamp;
  static thread_local uint32_t single_call = 0;
  if (single_target.size() < nfa.states.size())
    single_target.resize(nfa.states.size(), 0), single_stamp.resize(nfa.states.size(), 0);
  if (++single_call == 0) std::fill(single_stamp.begin(), single_stamp.end(), 0), single_call = 1;
  // Edges are byte ranges, so the classes of one DFA state fall into runs (segments) whose seeds are the
  // same; each segment is resolved once (a JSON string's content is one edge over nearly every class).
  struct Move {
    uint32_t lo, hi, to;  // classes lo..hi
    uint8_t kind;
  };
  std::vector<Move> moves;
  std::vector<uint32_t> cuts, current;
  std::vector<std::vector<uint32_t>> buckets;
  // How the bytes of a class move between counted and other states; every move out of one DFA state on
  // one class must be of one kind (1: within the counted part, 2: out of it, 3: into it, 4: elsewhere).
  std::vector<uint8_t> move_kind;
  // The DFA state of the seed set {seed}.
  auto single_seed_state = [&](uint32_t seed) -> Result<uint32_t> {
    if (single_stamp[seed] != single_call) {
      closure.Of(&seed, 1, &closed);
      DI_ASSIGN_OR_RETURN(uint32_t t, intern(closed));
      single_target[seed] = t;
      single_stamp[seed] = single_call;
    }
    return single_target[seed];
  };
  // Classes lo..hi of state `id` go to `t`.
  auto fill = [&](uint32_t id, uint32_t lo, uint32_t hi, uint32_t t) {
    if (t == 0) return;
    uint32_t* row = d.next.data() + static_cast<size_t>(id) * nc;
    for (uint32_t c = lo; c <= hi; ++c) row[c] = t;
    d.moves.push_back({id, static_cast<uint16_t>(lo), static_cast<uint16_t>(hi), t});
  };
  for (uint32_t local = 1; local <= sets.count(); ++local) {
    const uint32_t id = base + local;
    if (deadline.Passed()) return Status::DeadlineExceeded("compiling the grammar took longer than the limit");
    // A set of one NFA state without calls whose byte edges are sorted and disjoint (a spliced minimal
    // DFA's state: most DFA states of large grammars): each edge is a segment of its own with one seed,
    // and no two moves share a class, so there is nothing to cut, merge or check.
    if (sets.size(local) == 1) {
      const NfaState& st = nfa.states[*sets.data(local)];
      bool sorted = st.calls.empty();
      for (size_t k = 1; sorted && k < st.bytes.size(); ++k) sorted = st.bytes[k].lo > st.bytes[k - 1].hi;
      if (sorted) {
        for (const ByteEdge& e : st.bytes) {
          DI_ASSIGN_OR_RETURN(uint32_t t, single_seed_state(e.to));
          fill(id, classes.map[e.lo], classes.map[e.hi], t);
        }
        continue;
      }
    }
    // Interning below may grow the pool: this state's set is read from a copy.
    current.assign(sets.data(local), sets.data(local) + sets.size(local));
    std::vector<std::pair<uint32_t, uint32_t>> calls;
    moves.clear();
    cuts.clear();
    for (uint32_t s : current) {
      const NfaState& st = nfa.states[s];
      const bool from_counting = st.flags & kStateCounting;
      for (const ByteEdge& e : st.bytes) {
        const bool to_counting = nfa.states[e.to].flags & kStateCounting;
        const uint8_t kind = from_counting ? (to_counting ? 1 : 2) : (to_counting ? 3 : 4);
        const uint32_t lo = classes.map[e.lo], hi = classes.map[e.hi];
        moves.push_back({lo, hi, e.to, kind});
        cuts.push_back(lo);
        cuts.push_back(hi + 1);
      }
      for (const auto& call : st.calls) calls.push_back(call);
    }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    const size_t nseg = cuts.empty() ? 0 : cuts.size() - 1;  // segment k: classes cuts[k]..cuts[k+1]-1
    if (buckets.size() < nseg) buckets.resize(nseg), move_kind.resize(nseg);
    for (size_t k = 0; k < nseg; ++k) buckets[k].clear(), move_kind[k] = 0;
    for (const Move& m : moves) {
      const size_t first = static_cast<size_t>(std::lower_bound(cuts.begin(), cuts.end(), m.lo) - cuts.begin());
      for (size_t k = first; k < nseg && cuts[k] <= m.hi; ++k) {
        if (buckets[k].empty()) move_kind[k] = m.kind;
        else if (move_kind[k] != m.kind)
          return Status::InvalidArgument("a counted repetition is ambiguous (a byte may both continue it and end it)");
        buckets[k].push_back(m.to);
      }
    }
    for (size_t k = 0; k < nseg; ++k) {
      std::vector<uint32_t>& seeds = buckets[k];
      if (seeds.empty()) continue;
      std::sort(seeds.begin(), seeds.end());
      seeds.erase(std::unique(seeds.begin(), seeds.end()), seeds.end());
      // Most segments of most states lead to seed sets met before: their closure, the costly part, is
      // taken once per seed set.
      uint32_t target;
      if (seeds.size() == 1) {
        DI_ASSIGN_OR_RETURN(target, single_seed_state(seeds[0]));
      } else {
        auto [sid, fresh] = by_seeds.Intern(seeds.data(), seeds.size());
        if (fresh) {
          closure.Of(seeds.data(), seeds.size(), &closed);
          DI_ASSIGN_OR_RETURN(uint32_t t, intern(closed));
          seeds_target.push_back(t);
        }
        target = seeds_target[sid];
      }
      fill(id, cuts[k], cuts[k + 1] - 1, target);
    }
    std::sort(calls.begin(), calls.end());
    for (size_t i = 0; i < calls.size();) {
      size_t j = i;
      std::vector<uint32_t> seeds;
      while (j < calls.size() && calls[j].first == calls[i].first) seeds.push_back(calls[j++].second);
      closure.Of(seeds.data(), seeds.size(), &closed);
      DI_ASSIGN_OR_RETURN(uint32_t t, intern(closed));
      if (t != 0) d.calls[id].push_back(CallEdge{calls[i].first, t});
      i = j;
    }
  }
  d.num_states = base + sets.count() + 1;
  return Status::Ok();
}

std::vector<std::vector<std::pair<uint8_t, uint8_t>>> Utf8Sequences(uint32_t lo, uint32_t hi) {
  std::vector<std::vector<std::pair<uint8_t, uint8_t>>> out;
  std::vector<std::pair<uint32_t, uint32_t>> work;
  hi = std::min<uint32_t>(hi, 0x10FFFF);
  if (lo > hi) return out;
  // Surrogates are not scalar values: they have no UTF-8 form.
  if (lo < 0xD800 && hi > 0xDFFF) {
    work.push_back({lo, 0xD7FF});
    work.push_back({0xE000, hi});
  } else if (lo >= 0xD800 && hi <= 0xDFFF) {
    return out;
  } else if (lo >= 0xD800 && lo <= 0xDFFF) {
    work.push_back({0xE000, hi});
  } else if (hi >= 0xD800 && hi <= 0xDFFF) {
    work.push_back({lo, 0xD7FF});
  } else {
    work.push_back({lo, hi});
  }
  auto encode = [](uint32_t cp, uint8_t* b) -> int {
    if (cp < 0x80) return b[0] = static_cast<uint8_t>(cp), 1;
    if (cp < 0x800) {
      b[0] = static_cast<uint8_t>(0xC0 | (cp >> 6));
      b[1] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
      return 2;
    }
    if (cp < 0x10000) {
      b[0] = static_cast<uint8_t>(0xE0 | (cp >> 12));
      b[1] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
      b[2] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
      return 3;
    }
    b[0] = static_cast<uint8_t>(0xF0 | (cp >> 18));
    b[1] = static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F));
    b[2] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
    b[3] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 4;
  };
  static const uint32_t kLenBounds[] = {0x7F, 0x7FF, 0xFFFF};
  while (!work.empty()) {
    auto [a, b] = work.back();
    work.pop_back();
    if (a > b) continue;
    bool split = false;
    for (uint32_t m : kLenBounds) {
      if (a <= m && m < b) {
        work.push_back({a, m});
        work.push_back({m + 1, b});
        split = true;
        break;
      }
    }
    if (split) continue;
    uint8_t ea[4], eb[4];
    int n = encode(a, ea);
    for (int i = 1; i < n && !split; ++i) {
      uint32_t m = (1u << (6 * i)) - 1;
      if ((a & ~m) != (b & ~m)) {
        if ((a & m) != 0) {
          work.push_back({a, a | m});
          work.push_back({(a | m) + 1, b});
          split = true;
        } else if ((b & m) != m) {
          work.push_back({a, (b & ~m) - 1});
          work.push_back({b & ~m, b});
          split = true;
        }
      }
    }
    if (split) continue;
    encode(b, eb);
    std::vector<std::pair<uint8_t, uint8_t>> seq;
    for (int i = 0; i < n; ++i) seq.push_back({ea[i], eb[i]});
    out.push_back(std::move(seq));
  }
  return out;
}

NfaBuilder::NfaBuilder(const Grammar& g, const CompileLimits& limits) : g_(g), limits_(limits) {
  deadline_.at = std::chrono::steady_clock::now() +
                 std::chrono::microseconds(static_cast<int64_t>(limits.max_compile_ms * 1000.0));
  // Growing the state vector moved every state built so far, each time (large schemas build 10^5 states).
  // A reservation costs only address space until states are made, but allocating it is not free (a
  // sanitizer build maps and poisons all of it), so it follows the grammar's size: up to 64 states per
  // expression covered the NFAs of the large bench schemas, most of them with room to spare.
  nfa_.states.reserve(std::min<size_t>({limits.max_nfa_states, size_t{1} << 17, 64 * g.num_exprs() + 256}));
}

Status NfaBuilder::Grow(const Nfa& nfa) {
  size_t total = nfa_.states.size() + scratch_states_ + open_scratch_ + (&nfa == &nfa_ ? 0 : nfa.states.size());
  if (total > limits_.max_nfa_states)
    return Status::ResourceExhausted("the grammar expands past " + std::to_string(limits_.max_nfa_states) +
                                     " automaton states (lower repetition bounds or lengths)");
  if (deadline_.Passed()) return Status::DeadlineExceeded("compiling the grammar took longer than the limit");
  return Status::Ok();
}

bool CountedRuleShape(const Grammar& g, uint32_t rule, ExprId* counted) {
  const Rule& r = g.rules()[rule];
  if (!r.defined) return false;
  const Expr& body = g.expr(r.body);
  if (body.kind != ExprKind::kSeq || body.kids.size() < 2) return false;
  int found = -1;
  for (size_t i = 0; i < body.kids.size(); ++i) {
    if (g.expr(body.kids[i]).kind != ExprKind::kCounted) continue;
    if (found >= 0) return false;
    found = static_cast<int>(i);
  }
  if (found < 0 || static_cast<size_t>(found) + 1 == body.kids.size()) return false;
  if (g.expr(body.kids.back()).kind != ExprKind::kLiteral) return false;
  *counted = body.kids[static_cast<size_t>(found)];
  return true;
}

Result<NfaBuilder::Frag> NfaBuilder::BuildRule(uint32_t rule) {
  count_bounds_ = {};
  counted_expr_ = -1;
  if (rule >= g_.rules().size()) return Build(nfa_, shared_bodies_[rule - g_.rules().size()], 0, false);
  ExprId counted = 0;
  counted_expr_ = CountedRuleShape(g_, rule, &counted) ? static_cast<int64_t>(counted) : -1;
  auto f = Build(nfa_, g_.rules()[rule].body, 0, false);
  counted_expr_ = -1;
  return f;
}

Result<NfaBuilder::Frag> NfaBuilder::Build(Nfa& nfa, ExprId id, uint32_t depth, bool standalone) {
  if (depth > limits_.max_depth)
    return Status::ResourceExhausted("the grammar nests deeper than " + std::to_string(limits_.max_depth) + " levels");
  DI_RETURN_IF_ERROR(Grow(nfa));
  if (depth > 0 && !standalone && &nfa == &nfa_ && id < info_.size() && info_[id].visit == 2 && !info_[id].regular &&
      info_[id].size >= kShareMinSize) {
    auto [it, fresh] = shared_rule_.try_emplace(Hash128{info_[id].ha, info_[id].hb}, kSeenOnce);
    if (!fresh) {
      if (it->second == kSeenOnce) {
        it->second = static_cast<uint32_t>(g_.rules().size() + shared_bodies_.size());
        // The body itself, not an inlined rule's call of it: that call has the body's hash, so the shared
        // rule would build as a call of itself (an empty language).
        ExprId body = id;
        for (size_t hops = 0; hops < g_.rules().size(); ++hops) {
          const Expr& b = g_.expr(body);
          if (b.kind != ExprKind::kRef || b.rule >= inline_.size() || !inline_[b.rule]) break;
          body = g_.rules()[b.rule].body;
        }
        shared_bodies_.push_back(body);
      }
      Frag f{nfa.New(), 0};
      f.end = nfa.New();
      nfa.states[f.start].calls.push_back({it->second, f.end});
      callees_.push_back(it->second);
      return f;
    }
  }
  if (id < info_.size() && info_[id].regular && info_[id].size >= kSpliceMinSize) {
    DI_ASSIGN_OR_RETURN(std::shared_ptr<const SmallDfa> d, SmallDfaOf(nfa, id, depth));
    Frag f = Splice(nfa, *d);
    DI_RETURN_IF_ERROR(Grow(nfa));
    return f;
  }
  return BuildNode(nfa, id, depth, standalone);
}

Result<NfaBuilder::Frag> NfaBuilder::BuildNode(Nfa& nfa, ExprId id, uint32_t depth, bool standalone) {
  const Expr& x = g_.expr(id);
  Frag f{nfa.New(), 0};
  f.end = nfa.New();
  switch (x.kind) {
    case ExprKind::kEmpty:
      nfa.states[f.start].eps.push_back(f.end);
      break;
    case ExprKind::kNothing:
      break;
    case ExprKind::kLiteral: {
      uint32_t cur = f.start;
      for (size_t i = 0; i < x.text.size(); ++i) {
        uint32_t next = i + 1 == x.text.size() ? f.end : nfa.New();
        uint8_t b = static_cast<uint8_t>(x.text[i]);
        nfa.states[cur].bytes.push_back({b, b, next});
        cur = next;
      }
      break;
    }
    case ExprKind::kBytes:
      for (auto [lo, hi] : x.ranges)
        nfa.states[f.start].bytes.push_back({static_cast<uint8_t>(lo), static_cast<uint8_t>(std::min<uint32_t>(hi, 255)), f.end});
      break;
    case ExprKind::kChars:
      for (auto [lo, hi] : x.ranges) {
        for (const auto& seq : Utf8Sequences(lo, hi)) {
          uint32_t cur = f.start;
          for (size_t i = 0; i < seq.size(); ++i) {
            uint32_t next = i + 1 == seq.size() ? f.end : nfa.New();
            nfa.states[cur].bytes.push_back({seq[i].first, seq[i].second, next});
            cur = next;
          }
        }
      }
      DI_RETURN_IF_ERROR(Grow(nfa));
      break;
    case ExprKind::kSeq: {
      uint32_t cur = f.start;
      for (ExprId k : x.kids) {
        DI_ASSIGN_OR_RETURN(Frag kf, Build(nfa, k, depth + 1, standalone));
        nfa.states[cur].eps.push_back(kf.start);
        cur = kf.end;
      }
      nfa.states[cur].eps.push_back(f.end);
      break;
    }
    case ExprKind::kAlt: {
      // P a | P b = P (a | b), and a S | b S = (a | b) S: the shared part is built once. An unanchored
      // pattern's alternatives each start and end with "any text"; kept apart, the subset construction
      // tracks which alternatives have matched so far (2^n sets for n alternatives). Where only some
      // alternatives share both ends (an anchored one among unanchored ones), those are built as one.
      // `kids` (two or more) are built from `from` to `to`, sharing the prefix and/or suffix.
      auto build_shared = [&](const std::vector<ExprId>& kids, bool pre, bool suf, uint32_t from, uint32_t to) -> Status {
        uint32_t cur = from;
        const std::vector<ExprId>& first = g_.expr(kids[0]).kids;
        if (pre) {
          DI_ASSIGN_OR_RETURN(Frag pf, Build(nfa, first.front(), depth + 1, standalone));
          nfa.states[cur].eps.push_back(pf.start);
          cur = pf.end;
        }
        const uint32_t mid_end = nfa.New();
        for (ExprId k : kids) {
          const std::vector<ExprId>& parts = g_.expr(k).kids;
          uint32_t at = cur;
          for (size_t i = pre ? 1 : 0; i + (suf ? 1 : 0) < parts.size(); ++i) {
            DI_ASSIGN_OR_RETURN(Frag pf, Build(nfa, parts[i], depth + 2, standalone));
            nfa.states[at].eps.push_back(pf.start);
            at = pf.end;
          }
          nfa.states[at].eps.push_back(mid_end);
        }
        cur = mid_end;
        if (suf) {
          DI_ASSIGN_OR_RETURN(Frag sf, Build(nfa, first.back(), depth + 1, standalone));
          nfa.states[cur].eps.push_back(sf.start);
          cur = sf.end;
        }
        nfa.states[cur].eps.push_back(to);
        return Status::Ok();
      };
      bool pre = false, suf = false;
      CommonEnds(x, &pre, &suf);
      if (pre || suf) {
        DI_RETURN_IF_ERROR(build_shared(x.kids, pre, suf, f.start, f.end));
        break;
      }
      for (const std::vector<ExprId>& group : AltGroupsByEnds(x)) {
        if (group.size() > 1) {
          DI_RETURN_IF_ERROR(build_shared(group, true, true, f.start, f.end));
          continue;
        }
        DI_ASSIGN_OR_RETURN(Frag kf, Build(nfa, group[0], depth + 1, standalone));
        nfa.states[f.start].eps.push_back(kf.start);
        nfa.states[kf.end].eps.push_back(f.end);
      }
      break;
    }
    case ExprKind::kRepeat: {
      if (x.min > limits_.max_repeat || (x.max != kUnbounded && x.max > limits_.max_repeat))
        return Status::ResourceExhausted("a repetition bound exceeds " + std::to_string(limits_.max_repeat));
      uint32_t cur = f.start;
      for (uint32_t i = 0; i < x.min; ++i) {
        DI_ASSIGN_OR_RETURN(Frag kf, Build(nfa, x.kids[0], depth + 1, standalone));
        nfa.states[cur].eps.push_back(kf.start);
        cur = kf.end;
      }
      if (x.max == kUnbounded) {
        uint32_t loop = nfa.New();
        nfa.states[cur].eps.push_back(loop);
        DI_ASSIGN_OR_RETURN(Frag kf, Build(nfa, x.kids[0], depth + 1, standalone));
        nfa.states[loop].eps.push_back(kf.start);
        nfa.states[kf.end].eps.push_back(loop);
        nfa.states[loop].eps.push_back(f.end);
      } else {
        for (uint32_t i = x.min; i < x.max; ++i) {
          DI_ASSIGN_OR_RETURN(Frag kf, Build(nfa, x.kids[0], depth + 1, standalone));
          nfa.states[cur].eps.push_back(kf.start);
          nfa.states[cur].eps.push_back(f.end);
          cur = kf.end;
        }
        nfa.states[cur].eps.push_back(f.end);
      }
      break;
    }
    case ExprKind::kRef: {
      const Rule& r = g_.rules()[x.rule];
      if (!r.defined) return Status::InvalidArgument("rule '" + r.name + "' is used but not defined");
      bool inl = x.rule < inline_.size() && inline_[x.rule];
      if (standalone && !inl && x.rule < recursive_.size() && recursive_[x.rule])
        return Status::Unimplemented("an intersection or exclusion over the recursive rule '" + r.name + "'");
      if (standalone && r.unique_role != UniqueRole::kNone) {
        // The automaton alone knows nothing of the items' uniqueness, which only the matcher enforces.
        const size_t from = std::string_view("unique_items").size(), to = r.name.rfind('#');
        const std::string pointer = to != std::string::npos && to > from ? r.name.substr(from, to - from) : r.name;
        return Status::Unimplemented(
            "JSON Schema keyword 'uniqueItems (items checked at run time, under oneOf, not or another exclusion)' at " +
            pointer + " is not supported");
      }
      if (inl || standalone) {
        DI_ASSIGN_OR_RETURN(Frag kf, Build(nfa, r.body, depth + 1, standalone));
        nfa.states[f.start].eps.push_back(kf.start);
        nfa.states[kf.end].eps.push_back(f.end);
      } else {
        nfa.states[f.start].calls.push_back({x.rule, f.end});
        callees_.push_back(x.rule);
      }
      break;
    }
    case ExprKind::kSepList: {
      DI_ASSIGN_OR_RETURN(Frag kf, BuildSepList(nfa, x, depth, standalone));
      nfa.states[f.start].eps.push_back(kf.start);
      nfa.states[kf.end].eps.push_back(f.end);
      break;
    }
    case ExprKind::kAnd:
    case ExprKind::kMinus: {
      DI_ASSIGN_OR_RETURN(Frag kf, BuildProduct(nfa, x, depth));
      nfa.states[f.start].eps.push_back(kf.start);
      nfa.states[kf.end].eps.push_back(f.end);
      break;
    }
    case ExprKind::kMultiple:
      DI_RETURN_IF_ERROR(BuildMultiple(nfa, x, f));
      break;
    case ExprKind::kCounted: {
      std::optional<Frag> counted;
      if (!standalone && &nfa == &nfa_ && static_cast<int64_t>(id) == counted_expr_) {
        counted_expr_ = -1;  // one counter per rule
        DI_ASSIGN_OR_RETURN(counted, BuildCounted(nfa, x, depth));
        if (counted) count_bounds_ = {true, x.min, x.max};
      }
      if (!counted) {
        DI_ASSIGN_OR_RETURN(Frag kf, Build(nfa, x.kids[2], depth + 1, standalone));
        counted = kf;
      }
      nfa.states[f.start].eps.push_back(counted->start);
      nfa.states[counted->end].eps.push_back(f.end);
      break;
    }
  }
  return f;
}

// A remainder automaton: the value read so far, times 10^max, modulo min (the step's numerator). Integer
// digits r -> 10r + c; after the point, each of the first `max` fraction digits the same; past them only
// zeros (a further nonzero digit makes the value no multiple: no edge). A state accepts where the value,
// scaled by the fraction digits not yet read, is 0 modulo the numerator.
Status NfaBuilder::BuildMultiple(Nfa& nfa, const Expr& x, const Frag& f) {
  const uint32_t p = x.min, digits = x.max;
  if (p == 0) return Status::InvalidArgument("a multiple of zero");
  const uint64_t states = uint64_t{p} * (digits + 2) + 1;
  if (states > limits_.max_nfa_states)
    return Status::ResourceExhausted("the grammar expands past " + std::to_string(limits_.max_nfa_states) +
                                     " automaton states (a multipleOf step with too many digits)");
  const uint32_t unsigned_start = nfa.New();
  nfa.states[f.start].eps.push_back(unsigned_start);
  nfa.states[f.start].bytes.push_back({'-', '-', unsigned_start});
  // phase[0]: integer digits; phase[1]: after the point, no digit yet; phase[1 + j]: j fraction digits
  // read (the last, j = max, loops on trailing zeros; with max = 0 it is the zeros after the point).
  std::vector<std::vector<uint32_t>> phase(digits + 2 + (digits == 0 ? 1 : 0), std::vector<uint32_t>(p));
  for (auto& ph : phase)
    for (uint32_t& st : ph) st = nfa.New();
  DI_RETURN_IF_ERROR(Grow(nfa));
  const size_t last = phase.size() - 1;  // the state class that takes trailing zeros
  // 10^k mod p, for the digits not read yet.
  std::vector<uint64_t> scale(digits + 1, 1 % p);
  for (uint32_t k = 1; k <= digits; ++k) scale[k] = scale[k - 1] * 10 % p;
  auto digit_edges = [&](uint32_t from, uint32_t r, const std::vector<uint32_t>& to) {
    for (uint32_t c = 0; c < 10; ++c) {
      const uint8_t b = static_cast<uint8_t>('0' + c);
      nfa.states[from].bytes.push_back({b, b, to[(uint64_t{r} * 10 + c) % p]});
    }
  };
  digit_edges(unsigned_start, 0, phase[0]);
  for (uint32_t r = 0; r < p; ++r) {
    digit_edges(phase[0][r], r, phase[0]);
    nfa.states[phase[0][r]].bytes.push_back({'.', '.', phase[1][r]});
    if (scale[digits] * r % p == 0) nfa.states[phase[0][r]].eps.push_back(f.end);
    for (size_t j = 1; j < last; ++j) {  // j - 1 fraction digits read, fewer than max
      if (digits > 0) digit_edges(phase[j][r], r, phase[j + 1]);
      else nfa.states[phase[j][r]].bytes.push_back({'0', '0', phase[last][r]});
      if (j > 1 && scale[digits - (j - 1)] * r % p == 0) nfa.states[phase[j][r]].eps.push_back(f.end);
    }
    nfa.states[phase[last][r]].bytes.push_back({'0', '0', phase[last][r]});
    if (r == 0) nfa.states[phase[last][r]].eps.push_back(f.end);
  }
  return Status::Ok();
}

Result<std::optional<NfaBuilder::Frag>> NfaBuilder::BuildCounted(Nfa& nfa, const Expr& x, uint32_t depth) {
  // The body's automaton B and the units' automaton U = unit*; in the product, a state whose U part
  // accepts is at a unit boundary (units are prefix-free, so U accepts exactly after whole units), and
  // every byte read there starts a unit: the counter counts units started.
  Nfa scratch;
  DI_ASSIGN_OR_RETURN(Frag fb, Build(scratch, x.kids[0], depth + 1, true));
  DI_ASSIGN_OR_RETURN(Frag fu, Build(scratch, x.kids[1], depth + 1, true));
  const uint32_t loop = scratch.New(), ustart = scratch.New(), uend = scratch.New();
  scratch.states[ustart].eps.push_back(loop);
  scratch.states[loop].eps.push_back(fu.start);
  scratch.states[fu.end].eps.push_back(loop);
  scratch.states[loop].eps.push_back(uend);
  scratch_states_ += scratch.states.size();
  DI_RETURN_IF_ERROR(Grow(nfa));
  ByteClasses classes = ByteClasses::FromNfa(scratch);
  const size_t budget = limits_.max_dfa_states;
  DI_ASSIGN_OR_RETURN(Dfa b, Determinize(scratch, fb.start, fb.end, classes, deadline_, budget));
  DI_ASSIGN_OR_RETURN(Dfa u, Determinize(scratch, ustart, uend, classes, deadline_, budget));
  scratch = Nfa();
  const uint32_t nc = classes.count;
  std::unordered_map<uint64_t, uint32_t> ids;
  std::vector<std::pair<uint32_t, uint32_t>> pairs;
  std::vector<uint32_t> next;
  auto intern = [&](uint32_t pb, uint32_t pu) -> uint32_t {
    if (pb == 0 || pu == 0) return 0xFFFFFFFFu;
    uint64_t key = (static_cast<uint64_t>(pb) << 32) | pu;
    auto [it, fresh] = ids.try_emplace(key, static_cast<uint32_t>(pairs.size()));
    if (fresh) pairs.push_back({pb, pu});
    return it->second;
  };
  intern(1, 1);
  for (size_t i = 0; i < pairs.size(); ++i) {
    if (pairs.size() > budget) return Status::ResourceExhausted("a counted repetition is too large");
    if (deadline_.Passed()) return Status::DeadlineExceeded("compiling the grammar took longer than the limit");
    auto [pb, pu] = pairs[i];
    for (uint32_t c = 0; c < nc; ++c) next.push_back(intern(b.next[pb * nc + c], u.next[pu * nc + c]));
  }
  const size_t np = pairs.size();
  std::vector<uint8_t> exit(np), boundary(np), live(np, 0);
  for (size_t i = 0; i < np; ++i) {
    boundary[i] = u.accepting[pairs[i].second];
    exit[i] = boundary[i] && b.accepting[pairs[i].first];
  }
  // Liveness, then the tick counts with which each state can still reach an exit: bit L of reach[i] =
  // some path reads exactly L more units; `unbounded` = arbitrarily many.
  std::vector<std::vector<uint32_t>> preds(np);
  for (size_t i = 0; i < np; ++i)
    for (uint32_t c = 0; c < nc; ++c)
      if (uint32_t t = next[i * nc + c]; t != 0xFFFFFFFFu) preds[t].push_back(static_cast<uint32_t>(i));
  std::vector<uint32_t> work;
  for (size_t i = 0; i < np; ++i)
    if (exit[i]) live[i] = 1, work.push_back(static_cast<uint32_t>(i));
  while (!work.empty()) {
    uint32_t t = work.back();
    work.pop_back();
    for (uint32_t p : preds[t])
      if (!live[p]) live[p] = 1, work.push_back(p);
  }
  if (!live[0]) {
    Frag empty{nfa.New(), nfa.New()};
    return std::optional<Frag>(empty);
  }
  std::vector<std::vector<std::pair<uint32_t, uint8_t>>> succ(np);  // (target, tick)
  for (size_t i = 0; i < np; ++i) {
    if (!live[i]) continue;
    for (uint32_t c = 0; c < nc; ++c) {
      uint32_t t = next[i * nc + c];
      if (t == 0xFFFFFFFFu || !live[t]) continue;
      bool dup = false;
      for (auto& [tt, tick] : succ[i]) dup |= tt == t;
      if (!dup) succ[i].push_back({t, boundary[i]});
    }
  }
  std::vector<uint32_t> dmin, dmax;
  std::vector<uint8_t> unbounded;
  const std::vector<uint8_t> relax(np, CountRelax(x.min, x.max));
  CountEntries entries;  // the count starts at 0 in the product's start, state 0
  entries.starts = {0};
  entries.min.assign(np, x.min);
  entries.max.assign(np, x.max);
  if (!CountReach(succ, exit, live, relax, &dmin, &dmax, &unbounded, &entries)) return std::optional<Frag>();
  // The counter must be able to finish with a count in [min, max] from the start.
  if (dmin[0] > x.max || (!unbounded[0] && dmax[0] < x.min)) {
    Frag empty{nfa.New(), nfa.New()};
    return std::optional<Frag>(empty);
  }
  std::vector<std::pair<uint8_t, uint8_t>> span(nc, {255, 0});
  for (int byte = 255; byte >= 0; --byte) span[classes.map[byte]].first = static_cast<uint8_t>(byte);
  for (int byte = 0; byte < 256; ++byte) span[classes.map[byte]].second = static_cast<uint8_t>(byte);
  std::vector<uint32_t> state(np, 0);
  for (size_t i = 0; i < np; ++i)
    if (live[i]) {
      state[i] = nfa.New();
      nfa.states[state[i]].flags = static_cast<uint8_t>(kStateCounting | (boundary[i] ? kStateBoundary : 0));
    }
  Frag f{nfa.New(), nfa.New()};
  DI_RETURN_IF_ERROR(Grow(nfa));
  nfa.states[f.start].eps.push_back(state[0]);
  for (size_t i = 0; i < np; ++i) {
    if (!live[i]) continue;
    if (exit[i]) nfa.states[state[i]].eps.push_back(f.end);
    for (uint32_t c = 0; c < nc; ++c) {
      uint32_t t = next[i * nc + c];
      if (t == 0xFFFFFFFFu || !live[t]) continue;
      auto& edges = nfa.states[state[i]].bytes;
      if (!edges.empty() && edges.back().to == state[t] && edges.back().hi + 1 == span[c].first)
        edges.back().hi = span[c].second;
      else
        edges.push_back({span[c].first, span[c].second, state[t]});
    }
  }
  return std::optional<Frag>(f);
}

Result<NfaBuilder::Frag> NfaBuilder::BuildSepList(Nfa& nfa, const Expr& x, uint32_t depth, bool standalone) {
  const size_t k = x.kids.size() - (x.has_separator ? 1 : 0);
  const bool bounded = x.max != kUnbounded;
  const uint32_t cap = bounded ? x.max : std::max<uint32_t>(x.min, 1);
  if (cap > 1000) return Status::ResourceExhausted("a property or item count bound exceeds 1000");
  if (bounded && x.min > x.max) {
    Frag f{nfa.New(), nfa.New()};
    return f;
  }
  std::vector<std::vector<uint32_t>> n(k + 1, std::vector<uint32_t>(cap + 1));
  for (auto& row : n)
    for (auto& s : row) s = nfa.New();
  Frag f{n[0][0], nfa.New()};
  for (uint32_t c = x.min; c <= cap; ++c) nfa.states[n[k][c]].eps.push_back(f.end);
  for (size_t i = 0; i < k; ++i) {
    const bool rep = x.repeat_last && i + 1 == k;
    for (uint32_t c = 0; c <= cap; ++c)
      if (!x.required[i] || rep) nfa.states[n[i][c]].eps.push_back(n[i + 1][c]);
    for (uint32_t target = 1; target <= cap; ++target) {
      std::vector<uint32_t> sources = {target - 1};
      if (target == cap && !bounded) sources.push_back(cap);
      DI_ASSIGN_OR_RETURN(Frag item, Build(nfa, x.kids[i], depth + 1, standalone));
      nfa.states[item.end].eps.push_back(rep ? n[i][target] : n[i + 1][target]);
      for (uint32_t c : sources) {
        if (c == 0 || !x.has_separator) {
          nfa.states[n[i][c]].eps.push_back(item.start);
        } else {
          DI_ASSIGN_OR_RETURN(Frag sep, Build(nfa, x.kids.back(), depth + 1, standalone));
          nfa.states[n[i][c]].eps.push_back(sep.start);
          nfa.states[sep.end].eps.push_back(item.start);
        }
      }
    }
  }
  return f;
}

Result<Dfa> PairProduct(const Dfa& a, const Dfa& b, PairMode mode, size_t budget, const Deadline& deadline) {
  const uint32_t nc = a.num_classes;
  // Product states (pa, pb) are DFA states 1, 2, ... (state 0 is dead); pb == 0 (b dead) stays possible
  // for kMinus and kOr, pa == 0 for kOr. Pairs are numbered through a table of all of them where that is
  // small (a cell per pair met: a hash lookup per cell was most of a large product's time), else through
  // a map.
  const uint64_t all_pairs = static_cast<uint64_t>(a.num_states) * b.num_states;
  constexpr uint64_t kDensePairs = uint64_t{1} << 22;
  // calloc: pages of the table that no pair touches are never written.
  std::unique_ptr<uint32_t, decltype(&std::free)> dense(
      all_pairs <= kDensePairs ? static_cast<uint32_t*>(std::calloc(all_pairs, sizeof(uint32_t))) : nullptr, &std::free);
  std::unordered_map<uint64_t, uint32_t> ids;
  std::vector<std::pair<uint32_t, uint32_t>> pairs;
  Dfa d;
  d.num_classes = nc;
  d.next.assign(nc, 0);
  auto intern = [&](uint32_t pa, uint32_t pb) -> uint32_t {
    if (mode == PairMode::kOr ? pa == 0 && pb == 0 : pa == 0 || (mode == PairMode::kAnd && pb == 0)) return 0;
    const uint32_t fresh_id = static_cast<uint32_t>(pairs.size() + 1);
    if (dense) {
      uint32_t& slot = dense.get()[static_cast<size_t>(pa) * b.num_states + pb];
      if (slot == 0) slot = fresh_id, pairs.push_back({pa, pb});
      return slot;
    }
    uint64_t key = (static_cast<uint64_t>(pa) << 32) | pb;
    auto [it, fresh] = ids.try_emplace(key, fresh_id);
    if (fresh) pairs.push_back({pa, pb});
    return it->second;
  };
  intern(1, 1);
  for (size_t i = 0; i < pairs.size(); ++i) {
    if (pairs.size() > budget)
      return Status::ResourceExhausted(mode == PairMode::kOr ? "the grammar's automaton exceeds " + std::to_string(budget) + " states"
                                                             : std::string("an intersection or exclusion is too large"));
    if (deadline.Passed()) return Status::DeadlineExceeded("compiling the grammar took longer than the limit");
    auto [pa, pb] = pairs[i];
    const size_t row = d.next.size();
    d.next.resize(row + nc);
    const uint32_t s = static_cast<uint32_t>(i + 1);
    for (uint32_t c = 0; c < nc; ++c) {
      const uint32_t t = intern(a.next[pa * nc + c], b.next[pb * nc + c]);
      d.next[row + c] = t;
      if (t == 0) continue;
      if (!d.moves.empty() && d.moves.back().source == s && d.moves.back().target == t && d.moves.back().hi + 1u == c)
        d.moves.back().hi = static_cast<uint16_t>(c);
      else
        d.moves.push_back({s, static_cast<uint16_t>(c), static_cast<uint16_t>(c), t});
    }
  }
  d.num_states = static_cast<uint32_t>(pairs.size() + 1);
  d.accepting.assign(d.num_states, 0);
  for (size_t i = 0; i < pairs.size(); ++i) {
    auto [pa, pb] = pairs[i];
    const bool in_a = a.accepting[pa], in_b = b.accepting[pb];  // state 0 of each never accepts
    d.accepting[i + 1] = mode == PairMode::kOr ? in_a || in_b : in_a && (mode == PairMode::kMinus ? !in_b : in_b);
  }
  d.flags.assign(d.num_states, 0);
  d.calls.assign(d.num_states, {});
  return d;
}

Result<NfaBuilder::Product> NfaBuilder::ProductDfa(const Expr& x, uint32_t depth) {
  Nfa scratch;
  DI_ASSIGN_OR_RETURN(Frag fa, Build(scratch, x.kids[0], depth + 1, true));
  DI_ASSIGN_OR_RETURN(Frag fb, Build(scratch, x.kids[1], depth + 1, true));
  scratch_states_ += scratch.states.size();
  Product p;
  p.classes = ByteClasses::FromNfa(scratch);
  size_t budget = limits_.max_dfa_states;
  DI_ASSIGN_OR_RETURN(Dfa a, Determinize(scratch, fa.start, fa.end, p.classes, deadline_, budget));
  DI_ASSIGN_OR_RETURN(Dfa b, Determinize(scratch, fb.start, fb.end, p.classes, deadline_, budget));
  scratch = Nfa();
  DI_ASSIGN_OR_RETURN(p.dfa, PairProduct(a, b, x.kind == ExprKind::kMinus ? PairMode::kMinus : PairMode::kAnd, budget,
                                          deadline_));
  return p;
}

Result<NfaBuilder::Frag> NfaBuilder::BuildProduct(Nfa& nfa, const Expr& x, uint32_t depth) {
  DI_ASSIGN_OR_RETURN(Product p, ProductDfa(x, depth));
  // Its live states as they are (a small product: not worth merging).
  const Frag f = Splice(nfa, *Minimize(p.dfa, p.classes, /*merge=*/false));
  DI_RETURN_IF_ERROR(Grow(nfa));
  return f;
}

}  // namespace deepinfer::grammar
