// The snapshots of finished sequences that token-exact continuation resumes from (SequenceSnapshot,
// step_plan.h), by name: the chained hash of a sequence's full blocks (its root when it has none) and its
// tokens after them. Kept in least-recently-used order under a byte budget, their own or one shared with
// the cached window blocks (kvcache::LruBudget: the least recently used of either kind is evicted first),
// optionally also under a cap of their own. The budget also counts the snapshots being made (at their
// expected size): many sequences finishing in one step take only as many snapshots as it holds, so the
// memory they need never exceeds it. A snapshot is found only under the hash of full blocks that a prompt
// matched in the prefix cache, so a hit never needs a block that is gone. Not thread-safe (the scheduler's
// step thread owns it).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <vector>

#include "engine/step_plan.h"
#include "kvcache/block_hash.h"
#include "kvcache/lru_budget.h"

namespace deepinfer::engine {

class SnapshotCache : private kvcache::LruBudget::Member {
 public:
  // Alone under a budget of its own (0: keeps nothing).
  explicit SnapshotCache(int64_t budget_bytes);
  // Under `budget`, shared with other caches, which must outlive it; cap_bytes > 0: the
  // snapshots also hold at most that many bytes of it; 0: keeps nothing; < 0: no cap of their own.
  SnapshotCache(kvcache::LruBudget* budget, int64_t cap_bytes);
  SnapshotCache(const SnapshotCache&) = delete;
  SnapshotCache& operator=(const SnapshotCache&) = delete;

  bool enabled() const { return cap_ != 0 && budget_->budget() != 0; }
  // A name for the snapshot of a sequence whose full blocks chain to `prefix` and whose tokens after them
  // are `tail` (0 to 127 of them; none: a whole prompt's state at a block boundary), made by the executor in the next step with about `expected_bytes`
  // (SequenceSnapshot::bytes()); least recently used entries are evicted to make room. 0 when an equal
  // one is already kept or being made (which then counts as just used), or when the snapshots being made
  // leave no room for it (it is then not taken).
  uint64_t Reserve(const kvcache::BlockHash& prefix, std::span<const int32_t> tail, int64_t expected_bytes);
  // The executor's answer for a name: the snapshot is kept (the least recently used ones are evicted past
  // the budget), or, when null, the name is forgotten.
  void Fill(uint64_t key, std::shared_ptr<const SequenceSnapshot> snapshot);
  // The longest kept snapshot under `prefix` whose tail begins `tokens` and has at most `most` tokens, which
  // then counts as just used; null when none.
  std::shared_ptr<const SequenceSnapshot> Find(const kvcache::BlockHash& prefix, std::span<const int32_t> tokens,
                                               int64_t most);

  int64_t bytes() const { return bytes_; }                  // of the kept snapshots
  int64_t pending_bytes() const { return pending_bytes_; }  // expected, of those being made
  int64_t count() const { return static_cast<int64_t>(entries_.size()); }
  uint64_t evictions() const { return evictions_; }

 private:
  struct Entry {
    uint64_t key = 0;
    kvcache::BlockHash prefix;
    std::vector<int32_t> tail;
    std::shared_ptr<const SequenceSnapshot> snapshot;  // null while the executor makes it
    int64_t bytes = 0;  // expected while being made, then actual
    uint64_t use = 0;   // the budget's use serial of its last use
  };
  using Iterator = std::list<Entry>::iterator;
  void Use(Iterator it);
  // LruBudget::Member: the least recently used snapshot made (one being made is counted, never evicted).
  Iterator OldestMade();
  uint64_t OldestUse() const override;
  void EvictOldest() override;

  std::unique_ptr<kvcache::LruBudget> own_budget_;  // when alone
  kvcache::LruBudget* budget_;
  int64_t cap_;
  int64_t bytes_ = 0;
  int64_t pending_bytes_ = 0;
  uint64_t next_key_ = 1;
  uint64_t evictions_ = 0;
  std::list<Entry> entries_;  // most recently used first
};

}  // namespace deepinfer::engine
