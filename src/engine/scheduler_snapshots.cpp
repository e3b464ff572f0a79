// Token-exact continuation, the scheduler's side. A sequence that finishes with an exact state part-way
// into a block leaves a snapshot (SequenceSnapshot: the executor's copy of its state outside the blocks,
// its partial prefix block and the window blocks its next position sees), made in a plan of its own
// before anything else runs, so the blocks it copies are still the sequence's. A prompt whose prefix-cache
// match ends at that sequence's last full block and whose next tokens are the snapshot's tail resumes at
// the snapshot's position instead of the block boundary (Admit); when those full blocks are gone the
// match ends earlier and the snapshot is simply not found.
#include <algorithm>

#include "core/clock.h"
#include "core/hash.h"
#include "engine/scheduler.h"

namespace deepinfer::engine {

void Scheduler::TakeSnapshot(Sequence* s, FinishReason reason) {
  const kvcache::SequenceBlocks& b = s->blocks;
  const int64_t n = s->computed;
  const int64_t full = n / kvcache::kBlockTokens;
  // Only exact states (not a bounded replay's), part-way into a block (a boundary is the window blocks'
  // job), of a sequence the executor ran to `computed`.
  if (!snapshots_.enabled() || !s->running || reason == FinishReason::kError || n <= 0 ||
      n % kvcache::kBlockTokens == 0 || s->replaying() || b.register_limit != INT64_MAX ||
      b.window_register_limit != INT64_MAX || n > static_cast<int64_t>(s->tokens.size()) ||
      static_cast<int64_t>(b.hashes.size()) < full)
    return;
  const kvcache::BlockHash& prefix = full > 0 ? b.hashes[static_cast<size_t>(full - 1)] : b.root;
  SnapshotTake take;
  if (ReserveSnapshot(*s, n, prefix, TierSnapshotName(prefix, {}), &take)) snapshot_takes_.push_back(std::move(take));
}

void Scheduler::TakePromptSnapshot(const Sequence& s, int64_t start, int64_t end, std::vector<SnapshotTake>* takes) {
  const kvcache::SequenceBlocks& b = s.blocks;
  // Before the last position, whose logits the same prompt sent again samples; or after it, for a
  // continuation that brings the token sampled there.
  const bool whole = s.request->params.snapshot_whole_prompt;
  const int64_t n = whole ? end : end - 1;
  // Past the first block (a shorter prompt costs little to compute again), of an exact state, once per
  // prompt (its first output computes it). Part-way into a block, or at a block boundary for the whole
  // prompt: the continuation that brings the sampled token finds the full blocks in the tier but not the
  // window blocks at their end (the tier keeps none), and would replay the window's reach without it.
  const bool boundary = n % kvcache::kBlockTokens == 0;
  if (!snapshots_.enabled() || s.index != 0 || end != s.request->prompt_tokens || start >= end ||
      n <= kvcache::kBlockTokens || (boundary && !whole) || b.register_limit != INT64_MAX ||
      b.window_register_limit != INT64_MAX || end > static_cast<int64_t>(s.tokens.size()))
    return;
  const int64_t full = n / kvcache::kBlockTokens;
  std::vector<kvcache::BlockHash> hashes;
  const std::vector<kvcache::BlockHash>* chain = &b.hashes;
  if (static_cast<int64_t>(b.hashes.size()) < full) {  // the blocks this chunk fills are not hashed yet
    hashes = b.hashes;
    kvcache::ExtendBlockHashes(b.root, std::span(s.tokens).first(static_cast<size_t>(full * kvcache::kBlockTokens)),
                               &hashes);
    chain = &hashes;
  }
  const kvcache::BlockHash& prefix = (*chain)[static_cast<size_t>(full - 1)];
  const std::span<const int32_t> tail =
      std::span(s.tokens).subspan(static_cast<size_t>(full * kvcache::kBlockTokens),
                                  static_cast<size_t>(n - full * kvcache::kBlockTokens));
  SnapshotTake take;
  take.rewind = !whole;
  const kvcache::BlockHash name = boundary ? TierBoundarySnapshotName(prefix) : TierSnapshotName(prefix, tail);
  if (ReserveSnapshot(s, n, prefix, name, &take)) takes->push_back(std::move(take));
}

bool Scheduler::ReserveSnapshot(const Sequence& s, int64_t n, const kvcache::BlockHash& prefix,
                                const kvcache::BlockHash& tier_name, SnapshotTake* take) {
  const kvcache::SequenceBlocks& b = s.blocks;
  const int64_t full = n / kvcache::kBlockTokens;
  take->id = s.id;
  take->num_tokens = n;
  take->prefix_first = full;
  if (blocks_.has_prefix() && n % kvcache::kBlockTokens != 0) {  // a boundary has no partial block
    if (static_cast<int64_t>(b.prefix.size()) <= full || b.prefix[static_cast<size_t>(full)] == kvcache::kNoBlock)
      return false;
    take->prefix_blocks.push_back(b.prefix[static_cast<size_t>(full)]);
  }
  if (blocks_.has_window()) {
    const kvcache::BlockRange r = blocks_.WindowRange(n - blocks_.window() + 1, n);
    take->window_first = r.first;
    for (int64_t i = r.first; i < r.end; ++i) {
      if (i >= static_cast<int64_t>(b.window.size()) || b.window[static_cast<size_t>(i)] == kvcache::kNoBlock)
        return false;
      take->window_blocks.push_back(b.window[static_cast<size_t>(i)]);
    }
  }
  const int64_t expected = static_cast<int64_t>(sizeof(SequenceSnapshot)) + config_.sequence_state_bytes +
                           static_cast<int64_t>(take->prefix_blocks.size()) * config_.prefix_block_bytes +
                           static_cast<int64_t>(take->window_blocks.size()) * config_.window_block_bytes;
  const std::span<const int32_t> tail =
      std::span(s.tokens).subspan(static_cast<size_t>(full * kvcache::kBlockTokens),
                                  static_cast<size_t>(n - full * kvcache::kBlockTokens));
  take->key = snapshots_.Reserve(prefix, tail, expected);
  if (take->key == 0) return false;  // an equal one is kept already, or the budget is taken by those being made
  if (options_.lower_tier) snapshot_offers_[take->key] = {tier_name, prefix, {tail.begin(), tail.end()}};
  for (int32_t block : take->prefix_blocks) {
    blocks_.prefix().AddRef(block);
    snapshot_pins_.push_back({false, block, kvcache::kNoBlock});
  }
  for (int32_t block : take->window_blocks) {
    blocks_.window_class().AddRef(block);
    snapshot_pins_.push_back({true, block, kvcache::kNoBlock});
  }
  return true;
}

std::shared_ptr<const SequenceSnapshot> Scheduler::FindSnapshot(const Sequence* s, int64_t matched_blocks) {
  if (!snapshots_.enabled()) return nullptr;
  const kvcache::SequenceBlocks& b = s->blocks;
  const int64_t from = matched_blocks * kvcache::kBlockTokens;
  const int64_t length = static_cast<int64_t>(s->tokens.size());
  // The snapshot continues the match, and leaves at least the prompt's last position to compute.
  const kvcache::BlockHash& prefix = matched_blocks > 0 ? b.hashes[static_cast<size_t>(matched_blocks - 1)] : b.root;
  return snapshots_.Find(prefix, std::span(s->tokens).subspan(static_cast<size_t>(from)), length - 1 - from);
}

void Scheduler::ReceiveSnapshots(const StepResult& result) {
  const int64_t now = NowNanos();
  for (const BlockCopy& pin : snapshot_pins_)
    (pin.window ? blocks_.window_class() : blocks_.prefix()).Release(pin.from, now);
  snapshot_pins_.clear();
  for (const auto& [key, snapshot] : result.snapshots) {
    snapshots_.Fill(key, snapshot);
    auto offer = snapshot_offers_.find(key);
    if (offer == snapshot_offers_.end()) continue;
    const SnapshotOffer& o = offer->second;
    if (snapshot) options_.lower_tier->OfferSnapshot(o.name, o.prefix, o.tail, snapshot);
    snapshot_offers_.erase(offer);
  }
  MutexLock lock(&metrics_->mu);
  metrics_->counters.snapshots_cached = snapshots_.count();
  metrics_->counters.snapshot_bytes = snapshots_.bytes();
}

kvcache::BlockHash Scheduler::TierBoundarySnapshotName(const kvcache::BlockHash& prefix) const {
  constexpr uint64_t kBoundary = 1;  // five words: never the four of TierSnapshotName
  const uint64_t words[] = {prefix.low, prefix.high, config_.snapshot_layout.low, config_.snapshot_layout.high, kBoundary};
  return HashBytes(words, sizeof words);
}

kvcache::BlockHash Scheduler::TierSnapshotName(const kvcache::BlockHash& prefix, std::span<const int32_t> tail) const {
  const uint64_t words[] = {prefix.low, prefix.high, config_.snapshot_layout.low, config_.snapshot_layout.high};
  const kvcache::BlockHash name = HashBytes(words, sizeof words);
  if (tail.empty()) return name;
  return kvcache::ChainHash(name, tail);
}

bool Scheduler::NeedsSnapshotRead(const Sequence* s) const {
  return options_.lower_tier != nullptr && snapshots_.enabled() && can_restore_ &&
         s->snapshot_read == Sequence::SnapshotRead::kUnchecked && s->tier == Sequence::Tier::kChecked &&
         s->request->hit_tokens < 0 && s->request->params.prompt_logprobs < 0;
}

void Scheduler::StartSnapshotRead(Sequence* s) {
  s->snapshot_read = Sequence::SnapshotRead::kChecked;
  std::vector<kvcache::BlockHash> hashes;
  kvcache::ExtendBlockHashes(s->request->root, s->tokens, &hashes);
  const int64_t length = static_cast<int64_t>(s->tokens.size());
  const int64_t m = blocks_.MatchPrefix(hashes, (length - 1) / kvcache::kBlockTokens);
  const int64_t room = length - 1 - m * kvcache::kBlockTokens;  // the most a snapshot's tail may have
  // The match ends right before the last position (a prompt of full blocks and one token more, as a
  // handed-over request is): only a state at that boundary serves, and only where its window blocks are gone.
  const bool boundary = room == 0;
  if (boundary && (m == 0 || !blocks_.has_window() || blocks_.HasWindowAt(hashes, m))) return;
  const kvcache::BlockHash prefix = m > 0 ? hashes[static_cast<size_t>(m - 1)] : s->request->root;
  const std::span<const int32_t> after = std::span(s->tokens).subspan(static_cast<size_t>(m * kvcache::kBlockTokens));
  if (snapshots_.Find(prefix, after, room)) return;  // kept in RAM already
  const uint64_t ticket = next_tier_ticket_++;
  // First the snapshot of this very prompt (the longest that can serve it), then a finished sequence's
  // (whose tail, at least one token, never fits a boundary).
  snapshot_reads_[ticket] = {s->request->id, s->index, prefix, NowNanos(), !boundary};
  s->snapshot_read = Sequence::SnapshotRead::kReading;
  {
    MutexLock lock(&tier_mailbox_->mu);
    if (!tier_mailbox_->closed) tier_mailbox_->inbox = inbox_;
  }
  IssueSnapshotRead(ticket, boundary ? TierBoundarySnapshotName(prefix) : TierSnapshotName(prefix, after.first(after.size() - 1)));
}

void Scheduler::IssueSnapshotRead(uint64_t ticket, const kvcache::BlockHash& name) {
  options_.lower_tier->ReadSnapshot(
      name, [box = tier_mailbox_, ticket](std::vector<int32_t> tail, std::shared_ptr<const SequenceSnapshot> snapshot) {
        TierEvent e;
        e.ticket = ticket;
        e.snapshot_read = true;
        e.tail = std::move(tail);
        e.snapshot = std::move(snapshot);
        DeliverTierEvent(box, e);
      });
}

void Scheduler::OnSnapshotRead(const TierEvent& e) {
  auto it = snapshot_reads_.find(e.ticket);
  if (it == snapshot_reads_.end()) return;
  const SnapshotReadTicket t = it->second;
  // Kept only when its bytes fit this engine's blocks; ImportState checks the state's.
  const SequenceSnapshot* snap = e.snapshot.get();
  const bool fits = snap && static_cast<int64_t>(e.tail.size()) == snap->num_tokens % kvcache::kBlockTokens &&
                    static_cast<int64_t>(snap->blocks.size()) ==
                        snap->prefix_count * config_.prefix_block_bytes + snap->window_count * config_.window_block_bytes;
  if (fits) {
    if (const uint64_t key = snapshots_.Reserve(t.prefix, e.tail, snap->bytes()); key != 0)
      snapshots_.Fill(key, e.snapshot);
  }
  if (!fits && t.prompt_first) {
    it->second.prompt_first = false;
    IssueSnapshotRead(e.ticket, TierSnapshotName(t.prefix, {}));
    return;
  }
  snapshot_reads_.erase(it);
  auto r = requests_.find(t.request);
  if (r == requests_.end() || t.index >= static_cast<int>(r->second->seqs.size())) return;
  Sequence* s = r->second->seqs[static_cast<size_t>(t.index)].get();
  if (s->snapshot_read == Sequence::SnapshotRead::kReading) s->snapshot_read = Sequence::SnapshotRead::kChecked;
}

void Scheduler::CheckSnapshotReadTimeouts(int64_t now) {
  const auto limit = static_cast<int64_t>(options_.lower_tier_timeout_s * 1e9);
  for (auto& [ticket, t] : snapshot_reads_) {
    if (now - t.start_nanos <= limit) continue;
    auto r = requests_.find(t.request);
    if (r == requests_.end() || t.index >= static_cast<int>(r->second->seqs.size())) continue;
    Sequence* s = r->second->seqs[static_cast<size_t>(t.index)].get();
    // It goes on without; the read's answer, when it comes, still fills the cache.
    if (s->snapshot_read == Sequence::SnapshotRead::kReading) s->snapshot_read = Sequence::SnapshotRead::kChecked;
  }
}

}  // namespace deepinfer::engine
