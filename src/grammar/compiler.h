// Compiling a Grammar into the byte-level automaton the matcher runs: one DFA per rule that is kept as a
// rule, with call edges for references to such rules (a recursive transition network, run as a pushdown
// automaton by the matcher). Rules that are not recursive are inlined into their callers when small or
// used once, so most JSON schemas and every regex compile to a single DFA with no calls.
//
// All states of all rules share one numbering and one transition table over byte classes (maximal byte
// intervals no range boundary cuts). State 0 is the dead state. Every state left after compilation is
// live (it can reach the end of its rule), and every rule can produce some string, so any prefix the
// automaton accepts can be completed: the matcher never leads generation into a dead end.
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
  size_t num_call_edges() const { return calls_.size(); }
  // Bytes of the transition tables.
  size_t memory_bytes() const;

  // Whether a byte string is in the language (runs the pushdown automaton; for tests and the CLI).
  bool Matches(std::string_view bytes) const;

 private:
  friend class Compiler;
  uint32_t num_classes_ = 1;
  std::array<uint8_t, 256> byte_class_{};
  std::vector<uint32_t> next_;
  std::vector<uint8_t> accepting_;
  std::vector<uint32_t> rule_of_;
  std::vector<uint32_t> call_begin_;
  std::vector<CallEdge> calls_;
  std::vector<uint32_t> rule_start_;
  std::vector<std::string> rule_names_;
  uint32_t root_rule_ = 0;
};

// Compiles `g`. Errors: kInvalidArgument for an undefined rule, left recursion or an empty language;
// kResourceExhausted past a size limit; kDeadlineExceeded past the time limit; kUnimplemented for kAnd /
// kMinus over a recursive rule.
Result<CompiledGrammar> Compile(const Grammar& g, const CompileLimits& limits = {});

}  // namespace deepinfer::grammar
