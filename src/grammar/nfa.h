// Internal to the compiler: Thompson NFAs over bytes (with call edges for rules kept as rules), their
// construction from grammar expressions, byte classes and the subset construction.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/status.h"
#include "grammar/compiler.h"
#include "grammar/grammar.h"

namespace deepinfer::grammar {

struct ByteEdge {
  uint8_t lo;
  uint8_t hi;
  uint32_t to;
};

struct NfaState {
  std::vector<ByteEdge> bytes;
  std::vector<uint32_t> eps;
  std::vector<std::pair<uint32_t, uint32_t>> calls;  // (rule, target)
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
};

struct Dfa {
  uint32_t num_states = 1;  // state 0 is dead
  uint32_t num_classes = 1;
  std::vector<uint32_t> next;  // num_states * num_classes
  std::vector<uint8_t> accepting;
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> calls;  // (rule, target)
};

struct Deadline {
  std::chrono::steady_clock::time_point at;
  mutable uint32_t ticks = 0;
  // Checks the clock every 4096 calls.
  bool Passed() const {
    if ((++ticks & 4095) != 0) return false;
    return std::chrono::steady_clock::now() > at;
  }
};

// Subset construction from `start`; `final` marks acceptance. Fails past `max_states` or the deadline.
Result<Dfa> Determinize(const Nfa& nfa, uint32_t start, uint32_t final, const ByteClasses& classes,
                        const Deadline& deadline, size_t max_states);

// The byte-range sequences that spell the code points lo..hi in UTF-8 (surrogates excluded).
std::vector<std::vector<std::pair<uint8_t, uint8_t>>> Utf8Sequences(uint32_t lo, uint32_t hi);

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
  }
  // Builds the body of `rule` as a fragment of nfa().
  Result<Frag> BuildRule(uint32_t rule);
  // Rules referenced by call edges since the last call.
  std::vector<uint32_t> TakeCallees() { return std::exchange(callees_, {}); }
  Nfa& nfa() { return nfa_; }
  const Deadline& deadline() const { return deadline_; }

 private:
  Result<Frag> Build(Nfa& nfa, ExprId e, uint32_t depth, bool standalone);
  Result<Frag> BuildSepList(Nfa& nfa, const Expr& x, uint32_t depth, bool standalone);
  Result<Frag> BuildProduct(Nfa& nfa, const Expr& x, uint32_t depth);
  Status Grow(const Nfa& nfa);

  const Grammar& g_;
  const CompileLimits& limits_;
  Nfa nfa_;
  std::vector<uint8_t> inline_;
  std::vector<uint8_t> recursive_;
  std::vector<uint32_t> callees_;
  size_t scratch_states_ = 0;
  Deadline deadline_;
};

}  // namespace deepinfer::grammar
