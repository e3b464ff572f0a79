// What one automaton state decides about the next token by itself, computed once by one walk of the
// token trie and cached: the matcher's adaptive token-mask cache (in the spirit of xgrammar's). Every
// token falls in one of three classes for a stack whose top is in that state:
//  - accepted: read whole by the state's own rule (a counted rule's tokens carry how many units they read,
//    so the bound check is a comparison at mask time);
//  - rejected: everything else, except
//  - uncertain: tokens that leave the rule mid-token (the rule ends, or calls another rule, before the
//    token's last byte). Only these are walked at mask time, from the stack below (or the callee), over
//    the trie subtree that follows (`exits`, `calls`).
// A state's entry depends only on its rule's automaton, so leaf rules that are equal in two grammars share
// entries through the vocabulary (SharedEntries, held by TokenIndex): every JSON string without a pattern
// is computed once per process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace deepinfer::grammar {

struct MaskEntry {
  // Accepted tokens: a bitmask when that is smaller, else an id list. For a counted rule these are the
  // tokens accepted whatever the count (none) and the lists below hold the rest.
  std::vector<uint32_t> bits;
  std::vector<int32_t> ids;

  // Counted rules: tokens that stay inside the rule, sorted by `need` (units read + the fewest units the
  // end state still needs); accepted when need <= max - count and, where `reach` is given (units read +
  // the most the end state may read; only when some end state has a most), reach >= min - count.
  std::vector<int32_t> counted_ids;
  std::vector<uint32_t> need;
  std::vector<uint32_t> reach;
  uint32_t max_need = 0;
  // Tokens that leave the counted part (and end in the rule's tail or at its end), with the units read
  // before leaving: accepted when min <= count + units <= max.
  std::vector<std::pair<int32_t, uint32_t>> post;
  // All of counted_ids as a bitmask (when max - count >= max_need and no `reach` applies).
  std::vector<uint32_t> counted_all;
  // Counted states where every plain code point of the categories `text_cats` is one unit and comes back
  // to the state (an unconstrained string's content): the plain tokens of L <= text_len such code points
  // are left out of counted_ids and taken by length at mask time (need L + dmin, reach L + dmax), so
  // the entry's trie walk skips them (TokenIndex::text_mask).
  uint8_t text_cats = 0;
  uint8_t text_len = 0;

  struct Exit {
    uint32_t node;   // the rule may end after this trie node's bytes; its subtree continues below
    uint32_t units;  // counted rules: units read before leaving the counted part
  };
  std::vector<Exit> exits;
  struct CallPoint {
    uint32_t node;   // after this node's bytes the rule is in `state`, which calls other rules
    uint32_t state;
  };
  std::vector<CallPoint> calls;

  // Masks of counted_ids for max - count = r < max_need, made on first use.
  mutable std::mutex by_room_mu;
  mutable std::vector<std::shared_ptr<const std::vector<uint32_t>>> by_room;

  size_t bytes() const {
    return sizeof(MaskEntry) + 4 * (bits.size() + ids.size() + counted_ids.size() + need.size() + reach.size() +
                                    counted_all.size()) +
           8 * (post.size() + exits.size() + calls.size());
  }
};

// Entries of leaf rules by (rule content hash, canonical state index), shared by every grammar bound to
// one vocabulary. Thread-safe; stops adding past its byte budget (entries are then recomputed per use).
class SharedEntries {
 public:
  explicit SharedEntries(size_t budget_bytes = size_t{512} << 20) : budget_(budget_bytes) {}

  std::shared_ptr<const MaskEntry> Find(uint64_t a, uint64_t b, uint32_t state) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(Key{a, b, state});
    return it == map_.end() ? nullptr : it->second;
  }
  // Stores `e` unless an entry is there already (returned instead) or the budget is spent.
  std::shared_ptr<const MaskEntry> Put(uint64_t a, uint64_t b, uint32_t state, std::shared_ptr<const MaskEntry> e) {
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, fresh] = map_.try_emplace(Key{a, b, state}, nullptr);
    if (!fresh) return it->second;
    if (bytes_ + e->bytes() > budget_) {
      map_.erase(it);
      return e;
    }
    bytes_ += e->bytes();
    it->second = e;
    return e;
  }
  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return map_.size();
  }

 private:
  struct Key {
    uint64_t a, b;
    uint32_t state;
    bool operator==(const Key& o) const { return a == o.a && b == o.b && state == o.state; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return static_cast<size_t>(k.a ^ (k.b * 0x9E3779B97F4A7C15ULL) ^ (static_cast<uint64_t>(k.state) << 17));
    }
  };
  size_t budget_;
  mutable std::mutex mu_;
  std::unordered_map<Key, std::shared_ptr<const MaskEntry>, KeyHash> map_;
  size_t bytes_ = 0;
};

}  // namespace deepinfer::grammar
