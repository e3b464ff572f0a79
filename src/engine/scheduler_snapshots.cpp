// Token-exact continuation, the scheduler's side. A sequence that finishes with an exact state part-way
// into a block leaves a snapshot (SequenceSnapshot: the executor's copy of its state outside the blocks,
// its partial prefix block and the window blocks its next position sees), made in a plan of its own
// before anything else runs, so the blocks it copies are still the sequence's. A prompt whose prefix-cache
// match ends at that sequence's last full block and whose next tokens are the snapshot's tail resumes at
// the snapshot's position instead of the block boundary (Admit); when those full blocks are gone the
// match ends earlier and the snapshot is simply not found.
#include <algorithm>

#include "core/clock.h"
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
  SnapshotTake take;
  take.id = s->id;
  take.num_tokens = n;
  take.prefix_first = full;
  if (blocks_.has_prefix()) {
    if (static_cast<int64_t>(b.prefix.size()) <= full || b.prefix[static_cast<size_t>(full)] == kvcache::kNoBlock) return;
    take.prefix_blocks.push_back(b.prefix[static_cast<size_t>(full)]);
  }
  if (blocks_.has_window()) {
    const kvcache::BlockRange r = blocks_.WindowRange(n - blocks_.window() + 1, n);
    take.window_first = r.first;
    for (int64_t i = r.first; i < r.end; ++i) {
      if (i >= static_cast<int64_t>(b.window.size()) || b.window[static_cast<size_t>(i)] == kvcache::kNoBlock) return;
      take.window_blocks.push_back(b.window[static_cast<size_t>(i)]);
    }
  }
  const kvcache::BlockHash& prefix = full > 0 ? b.hashes[static_cast<size_t>(full - 1)] : b.root;
  take.key = snapshots_.Reserve(prefix, std::span(s->tokens).subspan(static_cast<size_t>(full * kvcache::kBlockTokens),
                                                                      static_cast<size_t>(n - full * kvcache::kBlockTokens)));
  if (take.key == 0) return;  // an equal one is kept already
  for (int32_t block : take.prefix_blocks) {
    blocks_.prefix().AddRef(block);
    snapshot_pins_.push_back({false, block, kvcache::kNoBlock});
  }
  for (int32_t block : take.window_blocks) {
    blocks_.window_class().AddRef(block);
    snapshot_pins_.push_back({true, block, kvcache::kNoBlock});
  }
  snapshot_takes_.push_back(std::move(take));
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
  for (const auto& [key, snapshot] : result.snapshots) snapshots_.Fill(key, snapshot);
  MutexLock lock(&metrics_->mu);
  metrics_->counters.snapshots_cached = snapshots_.count();
  metrics_->counters.snapshot_bytes = snapshots_.bytes();
}

}  // namespace deepinfer::engine
