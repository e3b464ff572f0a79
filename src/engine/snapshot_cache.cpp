#include "engine/snapshot_cache.h"

#include <algorithm>

namespace deepinfer::engine {

uint64_t SnapshotCache::Reserve(const kvcache::BlockHash& prefix, std::span<const int32_t> tail,
                               int64_t expected_bytes) {
  if (!enabled() || tail.empty() || static_cast<int64_t>(tail.size()) >= kvcache::kBlockTokens) return 0;
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->prefix == prefix && std::ranges::equal(it->tail, tail)) {
      Use(it);
      return 0;
    }
  }
  expected_bytes = std::max<int64_t>(expected_bytes, 0);
  if (pending_bytes_ + expected_bytes > budget_) return 0;
  EvictFor(expected_bytes, entries_.end());
  entries_.push_front(
      {.key = next_key_++, .prefix = prefix, .tail = {tail.begin(), tail.end()}, .bytes = expected_bytes});
  pending_bytes_ += expected_bytes;
  return entries_.front().key;
}

void SnapshotCache::EvictFor(int64_t room, Iterator keep) {
  // Least recently used first; a snapshot still being made is counted but not evicted.
  for (auto victim = entries_.end(); bytes_ + pending_bytes_ + room > budget_ && victim != entries_.begin();) {
    --victim;
    if (!victim->snapshot || victim == keep) continue;
    bytes_ -= victim->bytes;
    ++evictions_;
    victim = entries_.erase(victim);
  }
}

void SnapshotCache::Fill(uint64_t key, std::shared_ptr<const SequenceSnapshot> snapshot) {
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.key == key; });
  if (it == entries_.end() || it->snapshot) return;
  pending_bytes_ -= it->bytes;
  if (!snapshot || snapshot->bytes() > budget_) {
    entries_.erase(it);
    return;
  }
  it->bytes = snapshot->bytes();
  it->snapshot = std::move(snapshot);
  bytes_ += it->bytes;
  EvictFor(0, it);
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
