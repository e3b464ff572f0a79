// The persistent tier at admission: after the RAM prefix match ends, the next blocks of a waiting prompt
// are looked up in the tier; those present are read (verified) into freshly allocated prefix blocks, which
// then join the RAM prefix cache under their hashes, and the sequence is admitted as a prefix hit of them.
// Meanwhile the sequence waits (Tier::kLoading) and the step loop serves the others. Window state is not
// persisted: a hit from the tier resumes through the replay policy, as a RAM hit whose window blocks are
// gone does.
#include <algorithm>

#include "core/clock.h"
#include "core/log.h"
#include "engine/scheduler.h"

namespace deepinfer::engine {

// Lookups per sequence at most: one, and a few more when its RAM match is evicted while it waits.
constexpr int kMaxTierLookups = 4;

bool Scheduler::NeedsTierLookup(const Sequence* s) const {
  return options_.lower_tier != nullptr && options_.enable_prefix_caching && can_restore_ &&
         s->tier == Sequence::Tier::kUnchecked && s->request->hit_tokens < 0 && blocks_.has_prefix() &&
         s->request->params.prompt_logprobs < 0;
}

void Scheduler::DeliverTierEvent(const std::shared_ptr<TierMailbox>& box, const TierEvent& e) {
  MutexLock lock(&box->mu);
  Inbox* inbox = box->inbox;
  if (inbox == nullptr) return;
  {
    MutexLock inbox_lock(&inbox->mu);
    inbox->tier_events.push_back(e);
    if (e.read) --inbox->tier_reads_outstanding;
  }
  inbox->cv.SignalAll();
  inbox->tier_cv.SignalAll();
}

void Scheduler::WaitForTier() {
  {
    MutexLock lock(&inbox_->mu);
    while (inbox_->tier_reads_outstanding != 0) inbox_->tier_cv.Wait(&inbox_->mu);
  }
  MutexLock lock(&tier_mailbox_->mu);
  tier_mailbox_->inbox = nullptr;
  tier_mailbox_->closed = true;
}

void Scheduler::StartTierLookup(Sequence* s) {
  Request* r = s->request;
  s->tier = Sequence::Tier::kChecked;
  kvcache::SequenceBlocks& b = s->blocks;
  b = kvcache::SequenceBlocks{};
  b.root = r->root;
  kvcache::ExtendBlockHashes(b.root, s->tokens, &b.hashes);
  // As in Admit: at least one position is computed, so a fully cached prompt re-runs its last block.
  const int64_t length = static_cast<int64_t>(s->tokens.size());
  const int64_t usable = (length - 1) / kvcache::kBlockTokens;
  const int64_t m = blocks_.MatchPrefix(b.hashes, usable);
  s->tier_match_end = m;
  if (m >= usable) return;
  TierLoad load;
  load.request = r->id;
  load.index = s->index;
  load.from = m;
  load.start_nanos = NowNanos();
  for (int64_t i = m; i < usable; ++i) {
    kvcache::BlockKey key;
    key.hash = b.hashes[static_cast<size_t>(i)];
    key.parent = i == 0 ? b.root : b.hashes[static_cast<size_t>(i - 1)];
    std::copy_n(s->tokens.begin() + i * kvcache::kBlockTokens, kvcache::kBlockTokens, key.tokens.begin());
    key.ttl_class = r->params.kv_ttl_class;
    load.keys.push_back(std::move(key));
  }
  const uint64_t ticket = next_tier_ticket_++;
  std::vector<kvcache::BlockKey> keys = load.keys;
  tier_loads_.emplace(ticket, std::move(load));
  s->tier = Sequence::Tier::kLoading;
  s->tier_from = m;
  s->tier_ticket = ticket;
  ++s->tier_lookups;
  {
    MutexLock stats(&metrics_->mu);
    ++metrics_->counters.lower_tier_lookups;
  }
  {
    MutexLock lock(&tier_mailbox_->mu);
    if (!tier_mailbox_->closed) tier_mailbox_->inbox = inbox_;
  }
  options_.lower_tier->Lookup(std::move(keys), [box = tier_mailbox_, ticket](size_t present) {
    DeliverTierEvent(box, {ticket, /*read=*/false, present});
  });
}

Sequence* Scheduler::WaitingSequenceFor(uint64_t ticket, const TierLoad& load) const {
  auto r = requests_.find(load.request);
  if (r == requests_.end() || load.index >= static_cast<int>(r->second->seqs.size())) return nullptr;
  Sequence* s = r->second->seqs[static_cast<size_t>(load.index)].get();
  return s->finished || s->tier != Sequence::Tier::kLoading || s->tier_ticket != ticket ? nullptr : s;
}

void Scheduler::CheckTierTimeouts(int64_t now) {
  const auto limit = static_cast<int64_t>(options_.lower_tier_timeout_s * 1e9);
  for (auto it = tier_loads_.begin(); it != tier_loads_.end();) {
    TierLoad& load = it->second;
    Sequence* s = WaitingSequenceFor(it->first, load);
    if (load.awaiting_room) {
      // No I/O is outstanding: waiting for room is waiting in the queue, which has no timeout here; a load
      // whose sequence went away holds nothing and is dropped.
      it = s ? std::next(it) : tier_loads_.erase(it);
      continue;
    }
    if (load.detached || now - load.start_nanos < limit || s == nullptr) {
      ++it;
      continue;
    }
    load.detached = true;
    s->tier = Sequence::Tier::kChecked;  // admitted on what RAM has; the rest is recomputed
    s->tier_match_end = 0;               // a slow tier is not asked again for this sequence
    {
      MutexLock stats(&metrics_->mu);
      ++metrics_->counters.lower_tier_timeouts;
    }
    DI_LOG(kWarn, "engine: the persistent KV tier is slow; recomputing instead of waiting")
        .Field("waited_s", static_cast<double>(now - load.start_nanos) * 1e-9)
        .Field("blocks", load.keys.size());
    ++it;
  }
}

void Scheduler::OnTierEvent(const TierEvent& e) {
  if (e.snapshot_read) {
    OnSnapshotRead(e);
    return;
  }
  auto it = tier_loads_.find(e.ticket);
  if (it == tier_loads_.end()) return;
  TierLoad& load = it->second;
  Sequence* s = load.detached ? nullptr : WaitingSequenceFor(e.ticket, load);
  const int64_t now = NowNanos();
  if (e.read) {
    // The verified leading blocks join the RAM prefix cache; the rest go back. Done even when the request
    // went away meanwhile: the blocks are good either way.
    int64_t loaded = 0;
    for (size_t i = 0; i < load.blocks.size(); ++i) {
      const int32_t block = load.blocks[i];
      if (i < e.leading) {
        blocks_.prefix().Register(block, load.keys[i].hash);  // another copy already there: ours goes free
        ++loaded;
        if (s) {
          tier_held_.push_back(block);  // released after the admission pass (Schedule)
          continue;
        }
      }
      blocks_.prefix().Release(block, now);
    }
    for (int32_t block : load.pinned) {
      if (s) {
        tier_held_.push_back(block);  // the read blocks follow these; both stay until the admission pass
      } else {
        blocks_.prefix().Release(block, now);
      }
    }
    if (s) {
      s->tier_loaded = loaded;
      s->tier_match_end = load.from + loaded;
      s->tier = Sequence::Tier::kChecked;
    }
    tier_loads_.erase(it);
    return;
  }
  // A lookup: read what is there into fresh blocks unless recomputing it is predicted clearly faster.
  size_t n = std::min(e.leading, load.keys.size());
  if (s && n == 0) {
    MutexLock stats(&metrics_->mu);
    ++metrics_->counters.lower_tier_lookup_misses;
  }
  if (s && n > 0 &&
      RecomputeRatherThanRead(cost_, load.from * kvcache::kBlockTokens,
                              static_cast<int64_t>(n) * kvcache::kBlockTokens,
                              options_.lower_tier->PredictReadSeconds(static_cast<int64_t>(n)))) {
    MutexLock stats(&metrics_->mu);
    metrics_->counters.lower_tier_skipped_blocks += n;
    n = 0;
    s->tier_match_end = 0;  // recomputing was the choice: asking again would choose the same
  }
  if (!s || n == 0) {
    if (s) s->tier = Sequence::Tier::kChecked;
    tier_loads_.erase(it);
    return;
  }
  // The read starts from the admission pass, when there are pool blocks to read into (ContinueTierLoad).
  load.keys.resize(n);
  load.awaiting_room = true;
}

bool Scheduler::TierMatchShrank(const Sequence* s) const {
  if (s->tier != Sequence::Tier::kChecked || s->tier_match_end <= 0 || s->tier_lookups >= kMaxTierLookups ||
      s->request->hit_tokens >= 0)
    return false;
  const kvcache::SequenceBlocks& b = s->blocks;
  if (static_cast<int64_t>(b.hashes.size()) < s->tier_match_end) return false;
  return blocks_.MatchPrefix(b.hashes, s->tier_match_end) < s->tier_match_end;
}

bool Scheduler::ContinueTierLoad(Sequence* s) {
  auto it = tier_loads_.find(s->tier_ticket);
  if (it == tier_loads_.end() || !it->second.awaiting_room) return true;  // lookup or read in flight
  TierLoad& load = it->second;
  const kvcache::SequenceBlocks& b = s->blocks;
  const auto end = load.from + static_cast<int64_t>(load.keys.size());
  const int64_t m = blocks_.MatchPrefix(b.hashes, end);
  if (m < load.from) {
    // Part of the RAM match the tier's blocks would extend was evicted while they waited: look up again
    // from where RAM ends now (a few times at most; after that the rest is recomputed).
    tier_loads_.erase(it);
    s->tier = Sequence::Tier::kUnchecked;
    if (s->tier_lookups < kMaxTierLookups) {
      StartTierLookup(s);
    } else {
      s->tier = Sequence::Tier::kChecked;
    }
    return true;
  }
  if (m > load.from) {  // others brought some of these blocks into RAM meanwhile
    load.keys.erase(load.keys.begin(), load.keys.begin() + (m - load.from));
    load.from = m;
  }
  if (load.keys.empty()) {
    tier_loads_.erase(it);
    s->tier = Sequence::Tier::kChecked;
    return true;
  }
  // Room: the matched blocks are pinned while the read runs (a cached one stops being available), and
  // one block stays free for the chunk that follows. The read waits until all its blocks fit (prefilling
  // them instead would need the same blocks), or as many as the pool could ever give it. Allocate only
  // reuses free or cached blocks.
  kvcache::BlockAllocator& pool = blocks_.prefix();
  int64_t unpinned = 0;
  for (int64_t i = 0; i < m; ++i) unpinned += pool.refcount(pool.Find(b.hashes[static_cast<size_t>(i)])) == 0;
  const int64_t want = std::min(static_cast<int64_t>(load.keys.size()), pool.num_blocks() - m - 1);
  if (want < 1) {  // the pool could never hold them beside the match: recompute
    tier_loads_.erase(it);
    s->tier = Sequence::Tier::kChecked;
    return true;
  }
  if (pool.num_available() - unpinned - 1 < want) return false;
  for (int64_t i = 0; i < m; ++i) load.pinned.push_back(pool.Acquire(b.hashes[static_cast<size_t>(i)]));
  while (load.blocks.size() < load.keys.size() && pool.num_available() > 1) {
    const int32_t block = pool.Allocate();
    if (block == kvcache::kNoBlock) break;
    load.blocks.push_back(block);
  }
  if (load.blocks.size() < load.keys.size()) {
    MutexLock stats(&metrics_->mu);
    metrics_->counters.lower_tier_no_room_blocks += load.keys.size() - load.blocks.size();
  }
  load.keys.resize(load.blocks.size());
  load.awaiting_room = false;
  s->tier_from = load.from;
  IssueTierRead(it->first, load);
  return true;
}

void Scheduler::IssueTierRead(uint64_t ticket, TierLoad& load) {
  load.start_nanos = NowNanos();
  std::vector<std::vector<std::span<uint8_t>>> dest(load.blocks.size());
  for (size_t i = 0; i < load.blocks.size(); ++i) {
    dest[i] = bytes_->PrefixBlock(load.blocks[i]);
  }
  {
    MutexLock lock(&inbox_->mu);
    ++inbox_->tier_reads_outstanding;
  }
  options_.lower_tier->Read(load.keys, std::move(dest), [box = tier_mailbox_, ticket](size_t ok) {
    DeliverTierEvent(box, {ticket, /*read=*/true, ok});
  });
}

}  // namespace deepinfer::engine
