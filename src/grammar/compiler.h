// Compiling a Grammar into the byte-level automaton the matcher runs: one DFA per rule that is kept as a
// rule, with call edges for references to such rules (a recursive transition network, run as a pushdown
// automaton by the matcher). Rules that are not recursive are inlined into their callers when small or
// used once, so most JSON schemas and every regex compile to a single DFA with no calls.
//
// All states of all rules share one numbering and one transition table over byte classes (maximal byte
// intervals no range boundary cuts). State 0 is the dead state. Every state left after compilation is
// live (it can reach the end of its rule), and every rule can produce some string, so any prefix the
// automaton accepts can be completed: the matcher never leads generation into a dead end.
//
// Counters: a rule built from a kCounted part (JSON string content with minLength/maxLength) keeps one
// automaton of its units and a count in its stack frame instead of max unrolled copies. Its states say
// whether they are inside the counted part (counting) and at a unit boundary; a move from a boundary
// into the counted part starts a unit (the count must stay <= max), a move out of it needs count >= min.
// dmin/dmax tell how many more units a counting state can still read before it may leave, so "live"
// there means count + dmin <= max and count + dmax >= min.
//
// Leaf rules (no call edges) carry a content hash over their byte-level transitions in a canonical state
// order, so equal leaf rules of different grammars (every JSON string without a pattern) share their
// per-state token masks through the vocabulary (TokenIndex::shared_entries).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "grammar/grammar.h"

namespace deepinfer::grammar {

struct CompileLimits {
  size_t max_nfa_states = 1'000'000;   // across all rules and kAnd/kMinus operands (about 100 bytes each)
  size_t max_dfa_states = 250'000;     // total
  uint32_t max_depth = 400;            // nesting of expressions plus inlined references
  uint32_t max_repeat = 100'000;       // the largest finite bound of a repetition
  double max_compile_ms = 2'000.0;     // wall clock; kDeadlineExceeded past it
  // Alternations of large regular parts are built as a union of the parts' minimal DFAs, one at a time
  // (NfaBuilder::UnionOfParts); false builds them with one subset construction (the same language: tests
  // compare the two).
  bool fold_unions = true;
  // Minimal DFAs of large regular parts are also looked up in, and added to, one cache shared by every
  // compile in the process (NfaBuilder::SharedParts): fixed pieces that front ends put in many grammars
  // (the `regex` format's syntax, date-time and e-mail formats) are built once. false builds every part
  // afresh (the same automaton: tests compare the two).
  bool share_parts_across_grammars = true;
};

struct RuleHash {
  uint64_t a = 0, b = 0;
  bool operator==(const RuleHash& o) const { return a == o.a && b == o.b; }
};

struct CallEdge {
  uint32_t rule;    // the callee (its start state is CompiledGrammar::rule_start(rule))
  uint32_t target;  // where the caller continues once the callee ends
};

class CompiledGrammar {
 public:
  static constexpr uint32_t kDead = 0;

  uint32_t num_states() const { return static_cast<uint32_t>(accepting_.size()); }
  uint32_t num_classes() const { return num_classes_; }
  uint8_t byte_class(uint8_t byte) const { return byte_class_[byte]; }
  // The last byte of `byte`'s class (classes are byte intervals): walks over a byte range visit each class
  // once without testing every byte.
  uint8_t class_last(uint8_t byte) const { return class_last_[byte]; }
  uint32_t Next(uint32_t state, uint8_t byte) const { return next_[state * num_classes_ + byte_class_[byte]]; }
  bool accepting(uint32_t state) const { return accepting_[state] != 0; }
  uint32_t rule_of(uint32_t state) const { return rule_of_[state]; }
  bool has_calls(uint32_t state) const { return call_begin_[state] != call_begin_[state + 1]; }
  const CallEdge* calls_begin(uint32_t state) const { return calls_.data() + call_begin_[state]; }
  const CallEdge* calls_end(uint32_t state) const { return calls_.data() + call_begin_[state + 1]; }
  uint32_t rule_start(uint32_t rule) const { return rule_start_[rule]; }
  uint32_t start() const { return rule_start_[root_rule_]; }
  uint32_t root_rule() const { return root_rule_; }
  const std::vector<std::string>& rule_names() const { return rule_names_; }
  // The source grammar's warnings (Grammar::warnings): where this automaton accepts more than the source.
  const std::vector<std::string>& warnings() const { return warnings_; }

  // uniqueItems at run time (Rule::unique_role): each kept rule's role, and whether any rule has one.
  UniqueRole unique_role(uint32_t rule) const { return unique_role_.empty() ? UniqueRole::kNone : unique_role_[rule]; }
  bool has_unique_items() const { return !unique_role_.empty(); }

  // Counters (see the header comment).
  bool counting(uint32_t state) const { return flags_[state] & 1; }
  bool boundary(uint32_t state) const { return flags_[state] & 2; }
  bool counted(uint32_t rule) const { return counted_[rule] != 0; }
  uint32_t count_min(uint32_t rule) const { return count_min_[rule]; }
  uint32_t count_max(uint32_t rule) const { return count_max_[rule]; }
  uint32_t dmin(uint32_t state) const { return dmin_[state]; }
  uint32_t dmax(uint32_t state) const { return dmax_[state]; }  // kUnbounded: no most
  // One byte from (state, count): the next state (kDead when the byte or the counter forbids it).
  uint32_t Step(uint32_t state, uint8_t byte, uint32_t* count) const {
    const uint32_t t = Next(state, byte);
    if (t == kDead || !(flags_[state] & 1)) return t;
    const uint32_t r = rule_of_[state];
    if (flags_[t] & 1) {
      if (!(flags_[state] & 2)) return t;
      if (*count >= count_max_[r]) return kDead;
      ++*count;
      return t;
    }
    return *count >= count_min_[r] ? t : kDead;
  }
  // Whether a counting state with `count` units so far can still finish within the bounds.
  bool CountLive(uint32_t state, uint32_t count) const {
    if (!(flags_[state] & 1)) return true;
    const uint32_t r = rule_of_[state];
    const uint64_t lo = static_cast<uint64_t>(count) + dmin_[state];
    if (lo > count_max_[r]) return false;
    return dmax_[state] == kUnbounded || static_cast<uint64_t>(count) + dmax_[state] >= count_min_[r];
  }

  // Leaf rules and their content hashes (see the header comment); canon_index(state) is the state's
  // place in its leaf rule's canonical order.
  bool leaf(uint32_t rule) const { return leaf_[rule] != 0; }
  const RuleHash& rule_hash(uint32_t rule) const { return rule_hash_[rule]; }
  uint32_t canon_index(uint32_t state) const { return canon_[state]; }
  size_t num_call_edges() const { return calls_.size(); }
  // Bytes of the transition tables.
  size_t memory_bytes() const;

  // Whether a byte string is in the language (runs the pushdown automaton; for tests and the CLI).
  bool Matches(std::string_view bytes) const;

 private:
  friend class Compiler;
  uint32_t num_classes_ = 1;
  std::array<uint8_t, 256> byte_class_{};
  std::array<uint8_t, 256> class_last_{};
  std::vector<uint32_t> next_;
  std::vector<uint8_t> accepting_;
  std::vector<uint32_t> rule_of_;
  std::vector<uint32_t> call_begin_;
  std::vector<CallEdge> calls_;
  std::vector<uint32_t> rule_start_;
  std::vector<std::string> rule_names_;
  std::vector<std::string> warnings_;
  uint32_t root_rule_ = 0;
  std::vector<uint8_t> flags_;
  std::vector<UniqueRole> unique_role_;  // empty when no rule has a role
  std::vector<uint8_t> counted_;
  std::vector<uint32_t> count_min_, count_max_;
  std::vector<uint32_t> dmin_, dmax_;
  std::vector<uint8_t> leaf_;
  std::vector<RuleHash> rule_hash_;
  std::vector<uint32_t> canon_;
};

// Compiles `g`. Errors: kInvalidArgument for an undefined rule, left recursion or an empty language;
// kResourceExhausted past a size limit; kDeadlineExceeded past the time limit; kUnimplemented for kAnd /
// kMinus over a recursive rule.
Result<CompiledGrammar> Compile(const Grammar& g, const CompileLimits& limits = {});

}  // namespace deepinfer::grammar
