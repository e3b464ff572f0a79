#include "kvcache/block_allocator.h"

#include <algorithm>
#include <string>

namespace deepinfer::kvcache {

BlockAllocator::BlockAllocator(const Options& options)
    : blocks_(static_cast<size_t>(std::max<int64_t>(options.num_blocks, 0))),
      max_cached_(options.max_cached),
      ttl_nanos_(options.ttl_seconds > 0 ? static_cast<int64_t>(options.ttl_seconds * 1e9) : 0),
      budget_(options.budget),
      block_bytes_(options.block_bytes) {
  if (budget_) budget_->Join(this);
  free_.reserve(blocks_.size());
  // Low ids are handed out first (a stack popped from the back).
  for (int64_t b = num_blocks() - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
}

void BlockAllocator::LruPushNewest(int32_t b) {
  Block& block = blocks_[static_cast<size_t>(b)];
  block.prev = lru_newest_;
  block.next = kNoBlock;
  if (lru_newest_ != kNoBlock) blocks_[static_cast<size_t>(lru_newest_)].next = b;
  lru_newest_ = b;
  if (lru_oldest_ == kNoBlock) lru_oldest_ = b;
  ++num_cached_;
  if (budget_) {
    block.use = budget_->NextUse();
    budget_->Charge(block_bytes_);
  }
}

void BlockAllocator::LruRemove(int32_t b) {
  Block& block = blocks_[static_cast<size_t>(b)];
  if (block.prev != kNoBlock) blocks_[static_cast<size_t>(block.prev)].next = block.next;
  else lru_oldest_ = block.next;
  if (block.next != kNoBlock) blocks_[static_cast<size_t>(block.next)].prev = block.prev;
  else lru_newest_ = block.prev;
  block.prev = block.next = kNoBlock;
  --num_cached_;
  if (budget_) budget_->Credit(block_bytes_);
}

uint64_t BlockAllocator::OldestUse() const {
  return lru_oldest_ == kNoBlock ? 0 : blocks_[static_cast<size_t>(lru_oldest_)].use;
}

void BlockAllocator::EvictOldest() {
  if (lru_oldest_ == kNoBlock) return;
  EvictCached(lru_oldest_, Forgotten::kEvicted);
  ++evictions_;
}

void BlockAllocator::EvictCached(int32_t b, Forgotten why) {
  LruRemove(b);
  Block& block = blocks_[static_cast<size_t>(b)];
  index_.erase(block.hash);
  const size_t remembered = static_cast<size_t>(std::max<int64_t>(num_blocks(), 1024));
  while (forgotten_order_.size() >= remembered) {
    const auto& [oldest, serial] = forgotten_order_.front();
    auto it = forgotten_.find(oldest);
    if (it != forgotten_.end() && it->second.serial == serial) forgotten_.erase(it);
    forgotten_order_.pop_front();
  }
  forgotten_[block.hash] = {why, ++forgotten_serial_};
  forgotten_order_.emplace_back(block.hash, forgotten_serial_);
  block.hashed = false;
  block.is_free = true;
  free_.push_back(b);
}

int32_t BlockAllocator::Allocate() {
  if (free_.empty()) {
    if (lru_oldest_ == kNoBlock) return kNoBlock;
    EvictCached(lru_oldest_, Forgotten::kEvicted);
    ++evictions_;
  }
  const int32_t b = free_.back();
  free_.pop_back();
  Block& block = blocks_[static_cast<size_t>(b)];
  block.is_free = false;
  block.refs = 1;
  block.hashed = false;
  return b;
}

int32_t BlockAllocator::Find(const BlockHash& hash) const {
  auto it = index_.find(hash);
  return it == index_.end() ? kNoBlock : it->second;
}

int32_t BlockAllocator::Acquire(const BlockHash& hash) {
  const int32_t b = Find(hash);
  if (b == kNoBlock) return kNoBlock;
  Block& block = blocks_[static_cast<size_t>(b)];
  if (block.refs == 0) LruRemove(b);
  ++block.refs;
  return b;
}

void BlockAllocator::AddRef(int32_t b) {
  Block& block = blocks_[static_cast<size_t>(b)];
  if (block.refs <= 0) {  // only used blocks gain references (a cached one goes through Acquire)
    ++misuse_;
    return;
  }
  ++block.refs;
}

void BlockAllocator::Release(int32_t b, int64_t now_nanos) {
  Block& block = blocks_[static_cast<size_t>(b)];
  if (block.refs <= 0) {  // a caller bug (double release); CheckInvariants reports it
    ++misuse_;
    return;
  }
  if (--block.refs > 0) return;
  if (!block.hashed) {
    block.is_free = true;
    free_.push_back(b);
    return;
  }
  block.last_use = now_nanos;
  LruPushNewest(b);
  if (max_cached_ >= 0) {
    while (num_cached_ > max_cached_) {
      EvictCached(lru_oldest_, Forgotten::kEvicted);
      ++evictions_;
    }
  }
  if (budget_) budget_->Enforce();
}

int32_t BlockAllocator::Register(int32_t b, const BlockHash& hash) {
  auto [it, inserted] = index_.try_emplace(hash, b);
  if (!inserted) return it->second;
  forgotten_.erase(hash);
  Block& block = blocks_[static_cast<size_t>(b)];
  block.hashed = true;
  block.hash = hash;
  return b;
}

int64_t BlockAllocator::Expire(int64_t now_nanos) {
  if (ttl_nanos_ <= 0) return 0;
  int64_t n = 0;
  while (lru_oldest_ != kNoBlock && blocks_[static_cast<size_t>(lru_oldest_)].last_use < now_nanos - ttl_nanos_) {
    EvictCached(lru_oldest_, Forgotten::kExpired);
    ++n;
  }
  expirations_ += static_cast<uint64_t>(n);
  return n;
}

void BlockAllocator::DropCached() {
  while (lru_oldest_ != kNoBlock) EvictCached(lru_oldest_, Forgotten::kEvicted);
}

Forgotten BlockAllocator::WhyForgotten(const BlockHash& hash) const {
  auto it = forgotten_.find(hash);
  return it == forgotten_.end() ? Forgotten::kNever : it->second.why;
}

Status BlockAllocator::CheckInvariants() const {
  auto fail = [](const std::string& m) { return Status::Internal("block allocator: " + m); };
  if (misuse_) return fail(std::to_string(misuse_) + " release(s) of unreferenced blocks");
  std::vector<char> on_free(blocks_.size(), 0);
  for (int32_t b : free_) {
    if (b < 0 || b >= num_blocks()) return fail("free list holds a bad id");
    if (on_free[static_cast<size_t>(b)]++) return fail("block " + std::to_string(b) + " is on the free list twice");
    const Block& block = blocks_[static_cast<size_t>(b)];
    if (!block.is_free || block.refs != 0 || block.hashed) return fail("free block " + std::to_string(b) + " is not free");
  }
  int64_t cached = 0, hashed = 0;
  int64_t prev_use = INT64_MIN;
  uint64_t prev_serial = 0;
  int32_t prev = kNoBlock;
  for (int32_t b = lru_oldest_; b != kNoBlock; b = blocks_[static_cast<size_t>(b)].next) {
    const Block& block = blocks_[static_cast<size_t>(b)];
    if (block.prev != prev) return fail("LRU back link broken at " + std::to_string(b));
    if (block.refs != 0 || !block.hashed || block.is_free) return fail("LRU block " + std::to_string(b) + " is not cached");
    if (block.last_use < prev_use) return fail("LRU out of last-use order");
    if (budget_ && block.use <= prev_serial) return fail("LRU out of the shared budget's use order");
    prev_use = block.last_use;
    prev_serial = block.use;
    prev = b;
    if (++cached > num_blocks()) return fail("LRU list has a cycle");
  }
  if (prev != lru_newest_) return fail("LRU newest end is wrong");
  if (cached != num_cached_) return fail("cached count " + std::to_string(num_cached_) + " != LRU length " + std::to_string(cached));
  for (size_t b = 0; b < blocks_.size(); ++b) {
    const Block& block = blocks_[b];
    if (block.refs < 0) return fail("negative refcount");
    if (block.is_free != (on_free[b] != 0)) return fail("block " + std::to_string(b) + " free flag disagrees with the list");
    if (!block.is_free && block.refs == 0 && !block.hashed) return fail("unreferenced unhashed block " + std::to_string(b) + " leaked");
    if (block.hashed) {
      ++hashed;
      auto it = index_.find(block.hash);
      if (it == index_.end() || it->second != static_cast<int32_t>(b)) return fail("hashed block missing from the index");
    }
  }
  if (hashed != static_cast<int64_t>(index_.size())) return fail("index holds blocks that are not hashed");
  if (max_cached_ >= 0 && num_cached_ > max_cached_) return fail("more cached blocks than the bound");
  return Status::Ok();
}

}  // namespace deepinfer::kvcache
