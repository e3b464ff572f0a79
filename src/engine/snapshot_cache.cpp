#include "engine/snapshot_cache.h"

#include <algorithm>

namespace deepinfer::engine {

SnapshotCache::SnapshotCache(int64_t budget_bytes)
    : own_budget_(std::make_unique<kvcache::LruBudget>(std::max<int64_t>(budget_bytes, 0))),
      budget_(own_budget_.get()),
      cap_(-1) {
  budget_->Join(this);
}

SnapshotCache::SnapshotCache(kvcache::LruBudget* budget, int64_t cap_bytes) : budget_(budget), cap_(cap_bytes) {
  budget_->Join(this);
}

void SnapshotCache::Use(Iterator it) {
  it->use = budget_->NextUse();
  entries_.splice(entries_.begin(), entries_, it);
}

SnapshotCache::Iterator SnapshotCache::OldestMade() {
  for (auto it = entries_.end(); it != entries_.begin();) {
    --it;
    if (it->snapshot) return it;
  }
  return entries_.end();
}

uint64_t SnapshotCache::OldestUse() const {
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it)
    if (it->snapshot) return it->use;
  return 0;
}

void SnapshotCache::EvictOldest() {
  const Iterator victim = OldestMade();
  if (victim == entries_.end()) return;
  bytes_ -= victim->bytes;
  budget_->Credit(victim->bytes);
  ++evictions_;
  entries_.erase(victim);
}

uint64_t SnapshotCache::Reserve(const kvcache::BlockHash& prefix, std::span<const int32_t> tail,
                               int64_t expected_bytes) {
  if (!enabled() || static_cast<int64_t>(tail.size()) >= kvcache::kBlockTokens) return 0;
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->prefix == prefix && std::ranges::equal(it->tail, tail)) {
      Use(it);
      return 0;
    }
  }
  expected_bytes = std::max<int64_t>(expected_bytes, 0);
  if ((budget_->bounded() && pending_bytes_ + expected_bytes > budget_->budget()) ||
      (cap_ > 0 && pending_bytes_ + expected_bytes > cap_))
    return 0;
  entries_.push_front({.key = next_key_++,
                       .prefix = prefix,
                       .tail = {tail.begin(), tail.end()},
                       .bytes = expected_bytes,
                       .use = budget_->NextUse()});
  pending_bytes_ += expected_bytes;
  budget_->Charge(expected_bytes);
  budget_->Enforce();  // spares the ones being made, this one included
  while (cap_ > 0 && bytes_ + pending_bytes_ > cap_ && OldestUse() != 0) EvictOldest();
  return entries_.front().key;
}

void SnapshotCache::Fill(uint64_t key, std::shared_ptr<const SequenceSnapshot> snapshot) {
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.key == key; });
  if (it == entries_.end() || it->snapshot) return;
  pending_bytes_ -= it->bytes;
  budget_->Credit(it->bytes);
  const int64_t bytes = snapshot ? snapshot->bytes() : 0;
  if (!snapshot || (budget_->bounded() && bytes > budget_->budget()) || (cap_ > 0 && bytes > cap_)) {
    entries_.erase(it);
    return;
  }
  // Made now: the most recently used, so the budget evicts everything older (of either kind) first.
  it->bytes = bytes;
  it->snapshot = std::move(snapshot);
  Use(it);
  bytes_ += bytes;
  budget_->Charge(bytes);
  budget_->Enforce();
  while (cap_ > 0 && bytes_ + pending_bytes_ > cap_ && OldestUse() != 0) EvictOldest();
}

std::shared_ptr<const SequenceSnapshot> SnapshotCache::Find(const kvcache::BlockHash& prefix,
                                                            std::span<const int32_t> tokens, int64_t most) {
  auto best = entries_.end();
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    const auto n = static_cast<int64_t>(it->tail.size());
    if (!it->snapshot || !(it->prefix == prefix) || n > most || n > static_cast<int64_t>(tokens.size())) continue;
    if (best != entries_.end() && n <= static_cast<int64_t>(best->tail.size())) continue;
    if (std::equal(it->tail.begin(), it->tail.end(), tokens.begin())) best = it;
  }
  if (best == entries_.end()) return nullptr;
  Use(best);
  return best->snapshot;
}

}  // namespace deepinfer::engine
