// Internal to the compiler: Thompson NFAs over bytes (with call edges for rules kept as rules), their
// construction from grammar expressions, byte classes and the subset construction.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/hash.h"
#include "core/status.h"
#include "grammar/compiler.h"
#include "grammar/grammar.h"

namespace deepinfer::grammar {

struct ByteEdge {
  uint8_t lo;
  uint8_t hi;
  uint32_t to;
};

// NFA (and DFA) state flags for counted repetitions (Expr kCounted): states inside the counted part, and
// among those the ones at a unit boundary (the next byte starts a new unit, which the counter counts).
inline constexpr uint8_t kStateCounting = 1;
inline constexpr uint8_t kStateBoundary = 2;

// A vector of trivially copyable elements that keeps up to N of them in place: most NFA states have one
// or two edges of a kind, and a heap block per state was a large part of building big automata.
template <typename T, uint32_t N>
class SmallVec {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  SmallVec() = default;
  SmallVec(const SmallVec& o) { Append(o.begin(), o.size()); }
  SmallVec(SmallVec&& o) noexcept { Take(o); }
  SmallVec& operator=(const SmallVec& o) {
    if (this != &o) size_ = 0, Append(o.begin(), o.size());
    return *this;
  }
  SmallVec& operator=(SmallVec&& o) noexcept {
    if (this != &o) Free(), Take(o);
    return *this;
  }
  ~SmallVec() { Free(); }

  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }
  T* data() { return heap_ ? heap_ : local_.data(); }
  const T* data() const { return heap_ ? heap_ : local_.data(); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  T& back() { return data()[size_ - 1]; }
  const T& back() const { return data()[size_ - 1]; }
  void reserve(size_t n) {
    if (n > cap_) Grow(n);
  }
  void push_back(const T& x) {
    if (size_ == cap_) Grow(2 * static_cast<size_t>(cap_));
    data()[size_++] = x;
  }

 private:
  void Grow(size_t n) {
    T* grown = new T[n];
    std::copy(begin(), end(), grown);
    Free();
    heap_ = grown;
    cap_ = static_cast<uint32_t>(n);
  }
  void Append(const T* from, size_t n) {
    reserve(size_ + n);
    std::copy(from, from + n, data() + size_);
    size_ += static_cast<uint32_t>(n);
  }
  void Take(SmallVec& o) {
    size_ = o.size_;
    cap_ = o.cap_;
    heap_ = o.heap_;
    local_ = o.local_;
    o.heap_ = nullptr, o.size_ = 0, o.cap_ = N;
  }
  void Free() {
    delete[] heap_;
    heap_ = nullptr;
    cap_ = N;
  }

  std::array<T, N> local_{};
  T* heap_ = nullptr;
  uint32_t size_ = 0, cap_ = N;
};

struct NfaState {
  SmallVec<ByteEdge, 1> bytes;
  SmallVec<uint32_t, 2> eps;
  std::vector<std::pair<uint32_t, uint32_t>> calls;  // (rule, target)
  uint8_t flags = 0;
};

struct Nfa {
  std::vector<NfaState> states;
  uint32_t New() {
    states.emplace_back();
    return static_cast<uint32_t>(states.size() - 1);
  }
  // Rewrites call edges' rule ids from grammar rule ids to kept-rule indices.
  void RemapCalls(const std::vector<int32_t>& kept_index);
};

// Maximal byte intervals that no edge range boundary cuts.
struct ByteClasses {
  uint32_t count = 1;
  std::array<uint8_t, 256> map{};
  static ByteClasses FromNfa(const Nfa& nfa);
  // `cut[b]` set where an edge range starts at byte b or ends at b - 1 (index 256: past the last byte).
  static ByteClasses FromCuts(const std::array<uint8_t, 257>& cut);
};

// Classes lo..hi of state `source` lead to `target` (a run of a row: one target, nonzero).
struct DfaMove {
  uint32_t source;
  uint16_t lo, hi;
  uint32_t target;
};

struct Dfa {
  uint32_t num_states = 1;  // state 0 is dead
  uint32_t num_classes = 1;
  std::vector<uint32_t> next;  // num_states * num_classes
  std::vector<uint8_t> accepting;
  std::vector<uint8_t> flags;  // kStateCounting / kStateBoundary
  std::vector<std::vector<CallEdge>> calls;
  // Every row as runs too (sources ascending, runs in class order), recorded as rows are filled: liveness
  // and minimisation read the moves that exist instead of states times classes.
  std::vector<DfaMove> moves;
};

// Each state's predecessors by `moves`, as one CSR array (`begin` has n + 1 entries): each (source, target)
// pair once, sources ascending.
void MovePredecessors(const std::vector<DfaMove>& moves, uint32_t n, std::vector<uint32_t>* begin,
                      std::vector<uint32_t>* list);

struct Deadline {
  std::chrono::steady_clock::time_point at;
  mutable uint32_t ticks = 0;
  // Checks the clock every 4096 calls.
  bool Passed() const {
    if ((++ticks & 4095) != 0) return false;
    return std::chrono::steady_clock::now() > at;
  }
};

// Subset construction from `start`; `final` marks acceptance. Fails past `max_states` or the deadline, and
// with kInvalidArgument where a counted part is ambiguous (a byte could both continue it and leave it).
Result<Dfa> Determinize(const Nfa& nfa, uint32_t start, uint32_t final, const ByteClasses& classes,
                        const Deadline& deadline, size_t max_states);
// The same, appended to `into` (whose classes must be `classes`): its states from into->num_states on,
// the first of them the start. Fails past `max_states` new states.
Status DeterminizeInto(const Nfa& nfa, uint32_t start, uint32_t final, const ByteClasses& classes,
                       const Deadline& deadline, size_t max_states, Dfa* into);

// The product of DFAs `a` and `b` over the same classes (each one's state 1 its start), its reachable pairs
// only, not minimised: both languages (kAnd), a's without b's (kMinus) or either (kOr). Fails past
// `budget` states or the deadline.
enum class PairMode : uint8_t { kAnd, kMinus, kOr };
Result<Dfa> PairProduct(const Dfa& a, const Dfa& b, PairMode mode, size_t budget, const Deadline& deadline);

// The byte-range sequences that spell the code points lo..hi in UTF-8 (surrogates excluded).
std::vector<std::vector<std::pair<uint8_t, uint8_t>>> Utf8Sequences(uint32_t lo, uint32_t hi);

// The units a counted automaton can still read from each state before it can stop: succ = (target, whether
// the move starts a unit) per live state, exit = it may stop here. Sets dmin/dmax (kUnbounded: no most)
// and `unbounded`; false when some state's counts are not what a counter can decide from (count, dmin,
// dmax) alone. That needs an interval of counts only where both bounds of the count bite: with no lower
// bound only the least count matters (count + dmin <= max), with no upper bound only the most (count +
// dmax >= min). `relax` (per state; empty: none) says which: kCountGapsOk (counts may have gaps, so
// an email's full 63-character label, which can end or go on only with ".x", still runs with a counter)
// and kCountNoMost (the least count only: dmax may be a lower estimate).
inline constexpr uint8_t kCountGapsOk = 1;
inline constexpr uint8_t kCountNoMost = 2;
// The relaxation a counter with bounds min..max allows.
inline uint8_t CountRelax(uint32_t min, uint32_t max) {
  if (min == 0) return kCountGapsOk | kCountNoMost;
  return max == kUnbounded ? kCountGapsOk : 0;
}

// Where both bounds bite and a state's counts have gaps, `entries` (null: none) may still let a counter
// run: when the counts the state can be entered with are known (propagated from `starts`, where counts
// begin at 0, along succ and `resumes`: calls, which keep the caller's count for the state they return
// to), dmin/dmax need only decide exactly for those.
// A string that must be 10 to 90 long and match ^....$ or contain ab1 reads exactly 4 or at least 3
// from the start (a gap), but that state is only entered at count 0, where 4 is too short anyway.
struct CountEntries {
  std::vector<uint32_t> starts;
  std::vector<std::pair<uint32_t, uint32_t>> resumes;  // (caller, state returned to)
  std::vector<uint32_t> min, max;  // per state: its counter's bounds
};
bool CountReach(const std::vector<std::vector<std::pair<uint32_t, uint8_t>>>& succ, const std::vector<uint8_t>& exit,
                const std::vector<uint8_t>& live, const std::vector<uint8_t>& relax, std::vector<uint32_t>* dmin,
                std::vector<uint32_t>* dmax, std::vector<uint8_t>* unbounded, const CountEntries* entries = nullptr);

// Whether `rule` has the shape a counter can run: its body a sequence holding exactly one kCounted part
// that some literal follows (so the counted part ends where that literal starts). Such a rule is never
// inlined: its stack frame holds the counter. Sets *counted to the part.
bool CountedRuleShape(const Grammar& g, uint32_t rule, ExprId* counted);

class NfaBuilder {
 public:
  struct Frag {
    uint32_t start;
    uint32_t end;
  };
  NfaBuilder(const Grammar& g, const CompileLimits& limits);

  void SetInline(std::vector<uint8_t> inline_rules, std::vector<uint8_t> recursive) {
    inline_ = std::move(inline_rules);
    recursive_ = std::move(recursive);
    AnalyseExprs();
  }
  // Builds the body of `rule` as a fragment of nfa().
  Result<Frag> BuildRule(uint32_t rule);
  // Rules referenced by call edges since the last call. Ids from g.rules().size() on are shared parts
  // (see kShareMinSize), which BuildRule builds like rules.
  std::vector<uint32_t> TakeCallees() { return std::exchange(callees_, {}); }
  std::string RuleName(uint32_t rule) const {
    return rule < g_.rules().size() ? g_.rules()[rule].name
                                    : "(shared part " + std::to_string(rule - g_.rules().size()) + ")";
  }
  // The bounds of the counter BuildRule gave the rule, if it built one (else the rule has none).
  struct CountBounds {
    bool counted = false;
    uint32_t min = 0, max = 0;
  };
  CountBounds TakeCountBounds() { return std::exchange(count_bounds_, {}); }
  Nfa& nfa() { return nfa_; }
  const Deadline& deadline() const { return deadline_; }

 private:
  Result<Frag> Build(Nfa& nfa, ExprId e, uint32_t depth, bool standalone);
  Result<Frag> BuildNode(Nfa& nfa, ExprId e, uint32_t depth, bool standalone);

  // Regular sub-expressions (no calls of kept rules, no counter) whose Thompson automaton would be large
  // are built once per distinct content as a minimal DFA and spliced in wherever they are used
  // (nfa_minimize.cpp). Front ends repeat such pieces (an integer range per property, one enum per use),
  // and their Thompson automata are far from minimal, so the rule's DFA shrinks as well as its NFA.
  using SmallDfaEdges = std::vector<std::vector<ByteEdge>>;
  struct SmallDfa {
    uint32_t start = 0;
    SmallDfaEdges edges;  // `to` indexes this DFA's states
    std::vector<uint8_t> accepting;
  };
  struct ExprInfo {
    uint8_t visit = 0;        // 0 new, 1 open, 2 done (AnalyseExprs)
    bool regular = false;     // no call of a kept rule, no counter, no cycle
    uint64_t size = 0;        // NFA states a Thompson build makes, roughly (saturating)
    uint64_t ha = 0, hb = 0;  // content hash (an inlined reference hashes as its rule's body)
  };
  static constexpr uint64_t kSpliceMinSize = 64;
  void AnalyseExprs();
  // Whether every alternative of `alt` is a sequence starting (*pre) or ending (*suf) with the same
  // regular part, by content (a sequence of just the two shared parts leaves the empty string between).
  void CommonEnds(const Expr& alt, bool* pre, bool* suf) const;
  // The alternatives of `alt` in groups, in order of first appearance: sequences of two or more parts
  // that start with the same regular part and end with the same regular part (by content) form one group;
  // every other alternative is a group of its own.
  std::vector<std::vector<ExprId>> AltGroupsByEnds(const Expr& alt) const;
  Result<std::shared_ptr<const SmallDfa>> SmallDfaOf(const Nfa& into, ExprId e, uint32_t depth);
  // An alternation with two or more large regular alternatives, as the union of their minimal DFAs taken
  // in pairs, then pairs of those, minimised after each (the small alternatives `rest` as one automaton). The
  // subset construction over all of them at once tracks every combination of the alternatives' states:
  // objects that differ only in which member is required made hundreds of thousands of states that
  // minimise to a few thousand; folded, no step is much larger than its result.
  Result<std::shared_ptr<const SmallDfa>> UnionOfParts(const std::vector<ExprId>& large, const std::vector<ExprId>& rest,
                                                       uint32_t depth);
  // The union of two minimal DFAs, minimised.
  Result<std::shared_ptr<const SmallDfa>> UnionOf(const SmallDfa& a, const SmallDfa& b);
  static Frag Splice(Nfa& nfa, const SmallDfa& d);
  // The live part of `d` as a SmallDfa, equivalent states merged unless `merge` is false.
  static std::shared_ptr<const SmallDfa> Minimize(const Dfa& d, const ByteClasses& classes, bool merge = true);
  // The process-wide cache behind CompileLimits::share_parts_across_grammars: parts whose Thompson
  // automaton is at least kShareAcrossMinSize states (smaller ones cost less to build than to look up
  // under a lock), at most kSharedEdgeBudget edges in all, the least recently used evicted first. Entries
  // are immutable and handed out as shared_ptr, so a compile keeps using one another compile evicted.
  static constexpr uint64_t kShareAcrossMinSize = 4096;
  static constexpr size_t kSharedEdgeBudget = size_t{1} << 22;
  class SharedParts;
  // The cache key of part `e`: its content hash, apart per way of building unions (their automata differ).
  Hash128 PartKey(ExprId e) const;
  // Whether part `e` is looked up in, and added to, the shared cache.
  bool SharedAcrossGrammars(ExprId e) const {
    return limits_.share_parts_across_grammars && info_[e].size >= kShareAcrossMinSize;
  }
  std::vector<ExprInfo> info_;
  std::unordered_map<Hash128, std::shared_ptr<const SmallDfa>, Hash128Hasher> small_;
  // Records `small` as part `e`'s minimal DFA, in the shared cache too where it qualifies.
  void KeepSmallDfa(ExprId e, const std::shared_ptr<const SmallDfa>& small);
  size_t open_scratch_ = 0;  // states of scratch automata under construction below the current one
  // Parts that are not regular (they call rules: JSON strings, nested values) and large are built once
  // per distinct content as a rule of their own, called from the second use on: schemas whose $refs were
  // expanded repeat the same sub-object many times, and each inlined copy multiplied the automaton.
  static constexpr uint64_t kShareMinSize = 256;
  static constexpr uint32_t kSeenOnce = 0xFFFFFFFFu;
  std::vector<ExprId> shared_bodies_;  // rule g_.rules().size() + k has body shared_bodies_[k]
  std::unordered_map<Hash128, uint32_t, Hash128Hasher> shared_rule_;
  Result<Frag> BuildSepList(Nfa& nfa, const Expr& x, uint32_t depth, bool standalone);
  // kAnd / kMinus: the product of its operands' DFAs, as a DFA over the classes of both (not minimised,
  // dead and non-live states kept), and as an NFA fragment of its live states.
  struct Product {
    Dfa dfa;
    ByteClasses classes;
  };
  Result<Product> ProductDfa(const Expr& x, uint32_t depth);
  Result<Frag> BuildProduct(Nfa& nfa, const Expr& x, uint32_t depth);
  // The counted part of a rule: body x unit* as a product automaton whose states carry the counting
  // flags, or nullopt when a counter cannot run it exactly (then the caller builds the fallback).
  Result<std::optional<Frag>> BuildCounted(Nfa& nfa, const Expr& x, uint32_t depth);
  // kMultiple's remainder automaton, from f.start to f.end.
  Status BuildMultiple(Nfa& nfa, const Expr& x, const Frag& f);
  Status Grow(const Nfa& nfa);

  const Grammar& g_;
  const CompileLimits& limits_;
  Nfa nfa_;
  std::vector<uint8_t> inline_;
  std::vector<uint8_t> recursive_;
  std::vector<uint32_t> callees_;
  CountBounds count_bounds_;
  int64_t counted_expr_ = -1;  // the kCounted part BuildRule may run with a counter
  size_t scratch_states_ = 0;
  Deadline deadline_;
};

}  // namespace deepinfer::grammar
