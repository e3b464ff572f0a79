// The token-level matcher: a compiled grammar bound to a vocabulary (BoundGrammar, shared and thread-safe)
// and one GrammarMatcher per sequence (not thread-safe; one per request).
//
// How a mask stays cheap: the matcher's state is a set of pushdown stacks, and the tokens a stack allows
// split into those decided by its top state alone and those that need the states below. For each top
// state the first part is computed once, by one walk of the token trie, and cached in the BoundGrammar
// (an accepted-token bitmask or id list, in the spirit of xgrammar's adaptive token mask cache), together
// with the trie subtrees where the top rule may end mid-token. A later mask for that state is a copy of
// the cached part plus walks of those subtrees only, from the state below. A grammar without recursive
// rules has one-state stacks, so its masks are pure cache hits after the first visit of each state.
//
// Bounded work: a step that would hold more than `max_stacks` stacks, a trie walk past `max_walk_nodes`
// visited nodes, or an arena past `max_nodes` stack nodes fails with kResourceExhausted instead of
// stalling the caller; the matcher then stays in its last good state.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "grammar/compiler.h"
#include "grammar/token_index.h"

namespace deepinfer::grammar {

struct MatcherLimits {
  size_t max_stacks = 2048;            // live stacks after one byte
  size_t max_walk_nodes = 8'000'000;   // trie nodes times stacks visited by one mask
  size_t max_nodes = 4'000'000;        // stack nodes one matcher may hold
  size_t cache_bytes = 256u << 20;     // cached per-state masks, per BoundGrammar
};

class BoundGrammar {
 public:
  BoundGrammar(std::shared_ptr<const CompiledGrammar> grammar, std::shared_ptr<const TokenIndex> vocab,
               MatcherLimits limits = {});

  const CompiledGrammar& grammar() const { return *grammar_; }
  const TokenIndex& vocab() const { return *vocab_; }
  const MatcherLimits& limits() const { return limits_; }
  const std::shared_ptr<const TokenIndex>& vocab_ptr() const { return vocab_; }

  // What a top state decides alone (see the header comment).
  struct Entry {
    std::vector<uint32_t> bits;  // the accepted tokens as a bitmask, or
    std::vector<int32_t> ids;    // as an id list when shorter
    // (trie node, depth) where the top rule may end after the node's bytes with more bytes to follow.
    std::vector<std::pair<uint32_t, uint16_t>> ends;
    bool ends_at_start = false;  // the rule may end before any byte
  };
  // The entry of `state`, computed on first use. Thread-safe.
  Result<std::shared_ptr<const Entry>> GetEntry(uint32_t state) const;
  size_t cached_entries() const;

 private:
  Result<std::shared_ptr<const Entry>> ComputeEntry(uint32_t state) const;

  std::shared_ptr<const CompiledGrammar> grammar_;
  std::shared_ptr<const TokenIndex> vocab_;
  MatcherLimits limits_;
  mutable std::mutex mu_;
  mutable std::vector<std::shared_ptr<const Entry>> entries_;
  mutable size_t cached_bytes_ = 0;
  mutable size_t cached_count_ = 0;
};

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const BoundGrammar> grammar);

  // Consumes one token. False (and no change) when the grammar does not allow it. A stop token is
  // accepted where the grammar may end, and terminates the matcher.
  bool AcceptToken(int32_t id);
  // Consumes raw bytes (for forced text and tests); false and no change when not a valid prefix.
  bool AcceptString(std::string_view bytes);
  // Drops the last n accepted tokens (or strings); n beyond history rolls back to the start.
  void Rollback(size_t n);
  void Reset();

  // Writes the allowed next tokens to `bits` (vocab().words() words; bit id%32 of word id/32). After
  // termination only nothing is allowed. Errors: kResourceExhausted (work bound), the matcher unchanged.
  Status FillNextTokenBitmask(uint32_t* bits);
  // Bytes every continuation must start with (jump-forward), up to max_bytes; stops where the grammar
  // could end or branches.
  std::string ForcedBytes(size_t max_bytes = 256);

  bool CanTerminate();
  bool IsTerminated() const { return terminated_; }
  size_t num_steps() const { return history_.size() - 1; }
  const BoundGrammar& bound() const { return *g_; }
  // Stacks currently held (for `deepinfer grammar` and tests).
  size_t num_stacks() const { return configs_.size(); }
  const Status& error() const { return error_; }

 private:
  struct Node {
    uint32_t state;
    int32_t parent;
  };
  int32_t Intern(uint32_t state, int32_t parent);
  // Calls and rule ends applied until closed (no bytes consumed).
  Status Close(const std::vector<int32_t>& in, std::vector<int32_t>* out);
  void Advance(const std::vector<int32_t>& closed, uint8_t byte, std::vector<int32_t>* out);
  Status StepBytes(std::string_view bytes, std::vector<int32_t>* configs);
  Status WalkSubtree(uint32_t node, int32_t from, uint32_t* bits, size_t* budget);
  bool Terminable(const std::vector<int32_t>& closed) const;
  void ReleaseTo(size_t mark);

  std::shared_ptr<const BoundGrammar> g_;
  const CompiledGrammar* cg_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> intern_;
  std::vector<int32_t> configs_;
  struct Saved {
    std::vector<int32_t> configs;
    size_t mark;
    bool terminated;
  };
  std::vector<Saved> history_;
  bool terminated_ = false;
  Status error_;
  std::vector<int32_t> scratch_a_, scratch_b_, work_;
  std::vector<std::vector<int32_t>> levels_;
  std::unordered_map<int32_t, uint8_t> seen_;
};

}  // namespace deepinfer::grammar
