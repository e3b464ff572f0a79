// The token-level matcher: a compiled grammar bound to a vocabulary (BoundGrammar, shared and thread-safe)
// and one GrammarMatcher per sequence (not thread-safe; one per request).
//
// How a mask stays cheap: the matcher's state is a set of pushdown stacks whose frames are (automaton
// state, unit count). Before a mask the stacks are closed (calls pushed, finished rules popped), and the
// token set of each closed stack is the entry of its top state (mask_entry.h: tokens the top's own rule
// reads whole, computed once per state by one walk of the token trie, shared across grammars for equal
// leaf rules), filtered by the frame's count for counted rules, plus walks of the few trie subtrees where
// a token leaves the top's rule mid-token (from the frame below, or into the callee). Tokens that span
// several rules are few (only 334 of DeepSeek's 128K tokens hold a '"'), so those walks stay short.
//
// Bounded work: a step that would hold more than `max_stacks` stacks, subtree walks past
// `max_walk_nodes` visited nodes, or an arena past `max_nodes` stack nodes fails with kResourceExhausted
// instead of stalling the caller; the matcher then stays in its last good state. An entry walk visits
// each trie node at most once.
//
// uniqueItems at run time (grammars with UniqueRole rules): the matcher keeps the bytes it accepted, an
// item rule's frame holds where its item started, and an array rule's frame holds the set of its
// finished items (a persistent list, compared by UniqueItem::canonical). Where an item rule ends, a parse
// whose item equals an earlier one is dropped; a parse that could only go on by ending such an item
// (its item rule at a state with no moves left) is dropped with it. The mask is then made as for any
// grammar and corrected for the tokens a finished duplicate could affect: those on trie paths where
// some open item may still equal an earlier one (MayEqual), walked from the root with the real parses,
// and the tokens holding a ',' followed by a whole value (a new item started and finished inside one
// token), each checked by stepping it. The items kept are bounded by `max_unique_item_bytes` (their
// canonical forms, all arrays together); past it a step fails with kResourceExhausted. Where every
// completion of an item repeats an earlier one (a finite item language nearly used up) the mask is
// empty, and generation ends there with an error.
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
#include "grammar/mask_entry.h"
#include "grammar/token_index.h"
#include "grammar/unique_items.h"

namespace deepinfer::grammar {

struct MatcherLimits {
  size_t max_stacks = 2048;            // live stacks after one byte
  size_t max_walk_nodes = 4'000'000;   // trie nodes times stacks visited by one mask's subtree walks
  size_t max_nodes = 4'000'000;        // stack nodes one matcher may hold
  size_t cache_bytes = 256u << 20;     // cached per-state entries of non-leaf rules, per BoundGrammar
  size_t max_unique_item_bytes = 1u << 20;  // uniqueItems: finished items one matcher keeps to compare
};

class BoundGrammar {
 public:
  BoundGrammar(std::shared_ptr<const CompiledGrammar> grammar, std::shared_ptr<const TokenIndex> vocab,
               MatcherLimits limits = {});

  const CompiledGrammar& grammar() const { return *grammar_; }
  const TokenIndex& vocab() const { return *vocab_; }
  const MatcherLimits& limits() const { return limits_; }
  const std::shared_ptr<const TokenIndex>& vocab_ptr() const { return vocab_; }

  // The entry of `state`, computed on first use. Thread-safe.
  std::shared_ptr<const MaskEntry> GetEntry(uint32_t state) const;
  size_t cached_entries() const;
  // Grammars with uniqueItems rules: whether `state` has no byte moves and no calls (a parse there can
  // only end its rule), and the tokens that hold a ',' followed by a whole JSON value.
  bool stuck(uint32_t state) const { return stuck_[state] != 0; }
  const std::vector<int32_t>& comma_value_tokens() const { return comma_value_tokens_; }

 private:
  std::shared_ptr<const MaskEntry> ComputeEntry(uint32_t state) const;
  void FindUniqueItemsParts();

  std::shared_ptr<const CompiledGrammar> grammar_;
  std::shared_ptr<const TokenIndex> vocab_;
  MatcherLimits limits_;
  mutable std::mutex mu_;
  mutable std::vector<std::shared_ptr<const MaskEntry>> entries_;
  mutable size_t cached_bytes_ = 0;
  mutable size_t cached_count_ = 0;
  // States from which every plain text keeps the automaton alive, found by earlier entries' plain-text
  // searches: a later search stops there instead of exploring the same states again.
  std::unique_ptr<std::atomic<uint8_t>[]> text_closed_;
  // Per state, the characters that lead back to it (LoopChars), kept for every later entry: `known` is set
  // (release) after both words are stored, so a reader that sees it (acquire) reads the whole set.
  struct LoopCharsSlot {
    std::atomic<uint64_t> lo{0}, hi{0};
    std::atomic<bool> known{false};
  };
  std::unique_ptr<LoopCharsSlot[]> loop_chars_;
  std::vector<uint8_t> stuck_;
  std::vector<int32_t> comma_value_tokens_;
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
    uint32_t count;
  };
  struct NodeKey {
    uint32_t state;
    int32_t parent;
    uint32_t count;
    bool operator==(const NodeKey& o) const { return state == o.state && parent == o.parent && count == o.count; }
  };
  struct NodeKeyHash {
    size_t operator()(const NodeKey& k) const {
      uint64_t h = (static_cast<uint64_t>(k.state) << 32 | static_cast<uint32_t>(k.parent)) * 0x9E3779B97F4A7C15ULL;
      return static_cast<size_t>(h ^ (h >> 29) ^ (static_cast<uint64_t>(k.count) * 0xBF58476D1CE4E5B9ULL));
    }
  };
  int32_t Intern(uint32_t state, int32_t parent, uint32_t count);
  // Calls and rule ends applied until closed (no bytes consumed).
  Status Close(const std::vector<int32_t>& in, std::vector<int32_t>* out);
  void Advance(const std::vector<int32_t>& closed, uint8_t byte, std::vector<int32_t>* out);
  Status StepBytes(std::string_view bytes, std::vector<int32_t>* configs);
  // Sets the bits of the tokens below trie node `node` whose bytes after it the stacks `from` accept.
  Status WalkSubtree(uint32_t node, const std::vector<int32_t>& from, uint32_t* bits, size_t* budget);
  void AddCounted(const MaskEntry& e, uint32_t state, uint32_t count, uint32_t min, uint32_t max, uint32_t* bits) const;
  bool Terminable(const std::vector<int32_t>& closed) const;
  void ReleaseTo(size_t mark);
  // uniqueItems (see the header comment). The frame pushed for a call of `rule` returning to `ret`.
  int32_t CallFrame(uint32_t rule, int32_t ret, size_t pos);
  // Ends the item rule of frame `n`: the array's frame with the item added, or -1 for a duplicate.
  Result<int32_t> EndItem(const Node& n);
  bool SetHolds(uint32_t set, const std::string& canonical) const;
  // Whether some parse in `stacks` has an open item that may still equal an earlier one of its array, or
  // sits between the items of an array that has some.
  bool AtRisk(const std::vector<int32_t>& stacks) const;
  // Corrects the mask in `bits` (made as if items could repeat) for finished duplicates.
  Status MaskUniqueItems(const std::vector<int32_t>& closed, uint32_t* bits, size_t* budget);
  static std::string NodeBytes(const TokenIndex& v, uint32_t node);
  // Whether the closed stacks `closed` can read `bytes` and go on.
  Result<bool> Survives(const std::vector<int32_t>& closed, std::string_view bytes);
  struct Marks {
    size_t nodes, sets, text;
  };
  Marks Mark() const { return {nodes_.size(), sets_.size(), text_.size()}; }
  void ReleaseTo(const Marks& m);

  std::shared_ptr<const BoundGrammar> g_;
  const CompiledGrammar* cg_;
  std::vector<Node> nodes_;
  std::unordered_map<NodeKey, int32_t, NodeKeyHash> intern_;
  std::vector<int32_t> configs_;
  struct Saved {
    std::vector<int32_t> configs;
    Marks mark;
    bool terminated;
  };
  std::vector<Saved> history_;
  bool terminated_ = false;
  Status error_;
  std::vector<int32_t> scratch_a_, scratch_b_, work_, closed_, starts_;
  std::vector<std::vector<int32_t>> levels_;
  std::unordered_map<int32_t, uint8_t> seen_;
  // uniqueItems: the bytes so far (during mask walks, with the walked token's bytes after them), and the
  // item sets (set k > 0 is sets_[k - 1]: one item added to the set `parent`).
  bool unique_ = false;
  std::string text_;
  struct ItemSet {
    uint32_t parent;
    UniqueItem item;
  };
  std::vector<ItemSet> sets_;
  size_t set_bytes_ = 0;
  size_t duplicates_dropped_ = 0;
};

}  // namespace deepinfer::grammar
