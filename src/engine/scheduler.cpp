// The step thread's scheduling half: the inbox, deadlines, and each step's plan — decode tokens of running
// sequences first, then prefill (and replay) chunks sized by the token budget and the latency target, then
// admission of waiting sequences (prefix-cache match, restore, replay decision), with preemption by
// recomputation when blocks run out.
#include <algorithm>
#include <utility>

#include "core/clock.h"
#include "core/log.h"
#include "engine/engine_impl.h"

namespace deepinfer::engine {
namespace {

constexpr int64_t kMinLatencyChunk = 16;  // progress for prefills even when decodes alone fill the target
constexpr int64_t kExpireEveryNanos = 1'000'000'000;

}  // namespace

bool EngineImpl::DrainInbox(bool wait) {
  std::vector<std::unique_ptr<Request>> fresh;
  std::vector<RequestId> aborts;
  std::vector<std::pair<RequestId, int>> stops;
  std::vector<TierEvent> tier;
  bool compiled;
  bool stopping;
  {
    std::unique_lock<std::mutex> lock(inbox_mutex_);
    if (wait && new_requests_.empty() && aborts_.empty() && output_stops_.empty() && tier_events_.empty() &&
        !constraints_compiled_ && !stopping_) {
      // Wake for deadlines and cache expiry too, not only for new work.
      inbox_cv_.wait_for(lock, std::chrono::milliseconds(requests_.empty() ? 1000 : 20));
    }
    fresh.swap(new_requests_);
    aborts.swap(aborts_);
    stops.swap(output_stops_);
    tier.swap(tier_events_);
    compiled = std::exchange(constraints_compiled_, false);
    stopping = stopping_;
  }
  for (const TierEvent& e : tier) OnTierEvent(e);
  if (compiled) {
    std::vector<RequestId> compiling;
    compiling.swap(compiling_);
    for (RequestId id : compiling) {
      auto it = requests_.find(id);
      if (it != requests_.end()) QueueWhenMasksReady(it->second.get());  // finished (aborted, late): gone
    }
  }
  for (auto& r : fresh) {
    Request* request = r.get();
    const RequestId id = r->id;
    requests_.emplace(id, std::move(r));
    QueueWhenMasksReady(request);
  }
  for (RequestId id : aborts) {
    auto it = requests_.find(id);
    if (it != requests_.end()) FinishRequest(it->second.get(), FinishReason::kAbort, Status::Ok());
  }
  for (const auto& [id, index] : stops) {
    auto it = requests_.find(id);
    if (it == requests_.end()) continue;
    Sequence* s = it->second->seqs[static_cast<size_t>(index)].get();
    if (s->finished) continue;
    std::vector<OutputEvent> events;
    FinishSequence(s, FinishReason::kStop, -1, &EventFor(it->second.get(), &events));
    Post(events);
    if (it->second->live == 0) requests_.erase(it);
  }
  return stopping;
}

void EngineImpl::QueueWhenMasksReady(Request* r) {
  if (r->constraint) {
    if (!r->constraint->ready()) {
      compiling_.push_back(r->id);
      return;
    }
    // The one place a request's masks are made.
    auto masks = r->constraint->MakeMasks(static_cast<int>(r->seqs.size()));
    r->constraint.reset();
    if (!masks.ok()) {
      FinishRequest(r, FinishReason::kError, masks.status());
      return;
    }
    for (size_t i = 0; i < r->seqs.size(); ++i) {
      Sequence* s = r->seqs[i].get();
      s->mask = std::move((*masks)[i]);
      s->allowed.Resize(info_.vocab_size);
    }
  }
  waiting_.insert(r->seqs[0].get());
}

void EngineImpl::CheckDeadlines(int64_t now) {
  std::vector<Request*> late;
  for (auto& [id, r] : requests_) {
    if (r->params.deadline_nanos > 0 && now > r->params.deadline_nanos) late.push_back(r.get());
  }
  for (Request* r : late) FinishRequest(r, FinishReason::kDeadline, Status::Ok());
  if (!tier_loads_.empty()) CheckTierTimeouts(now);
  if (now - last_expire_nanos_ > kExpireEveryNanos) {
    blocks_->Expire(now);
    last_expire_nanos_ = now;
  }
}

void EngineImpl::StepLoop() {
  std::vector<PlannedChunk> plan;
  bool idle = false;
  while (true) {
    if (DrainInbox(idle)) break;
    CheckDeadlines(NowNanos());
    Schedule(&plan);
    if (plan.empty() && !running_.empty()) {
      // Every running sequence is stuck on blocks the others hold: give the worst one's back.
      Preempt(PickVictim(nullptr), &plan);
      Schedule(&plan);
    }
    idle = plan.empty();
    if (idle) {
      last_forward_end_ = 0;  // the next gap would measure waiting for work, not the loop
      continue;
    }
    Execute(plan);
  }
  ReleaseTierHeld();
  // Shutdown: everything in flight finishes with kAbort.
  std::vector<Request*> all;
  for (auto& [id, r] : requests_) all.push_back(r.get());
  for (Request* r : all) FinishRequest(r, FinishReason::kAbort, Status::Ok());
}

Sequence* EngineImpl::PickVictim(const Sequence* better_than) const {
  if (running_.empty()) return nullptr;
  Sequence* worst = running_.back();
  if (better_than && !SeqOrder()(better_than, worst)) return nullptr;
  return worst;
}

void EngineImpl::Preempt(Sequence* s, std::vector<PlannedChunk>* plan) {
  if (!s) return;
  std::erase_if(*plan, [s](const PlannedChunk& c) { return c.seq == s; });
  ReleaseSequence(s);
  s->running = false;
  waiting_.insert(s);
  std::lock_guard<std::mutex> lock(stats_mutex_);
  ++counters_.num_preemptions;
}

void EngineImpl::ReleaseTierHeld() {
  if (tier_held_.empty()) return;
  const int64_t now = NowNanos();
  for (int32_t block : tier_held_) blocks_->prefix().Release(block, now);
  tier_held_.clear();
}

// Frees a sequence's blocks and model state; what it computed is lost (full blocks stay cached, so a
// recomputation usually hits them).
void EngineImpl::ReleaseSequence(Sequence* s) {
  if (s->running) std::erase(running_, s);
  blocks_->Free(&s->blocks, NowNanos());
  s->blocks = kvcache::SequenceBlocks{};
  s->state.reset();
  s->computed = 0;
  s->replay_end = 0;
}

int64_t EngineImpl::ChunkFor(const Sequence* s, int64_t budget, const StepShape& shape) const {
  const int64_t stop = s->replaying() ? s->replay_end : static_cast<int64_t>(s->tokens.size());
  int64_t n = std::min(stop - s->computed, budget);
  if (options_.tbt_target_ms > 0 && cost_.ready()) {
    const int64_t finish_at = s->replaying() ? -1 : stop - s->computed;
    const int64_t solved = cost_.SolveChunk(shape, s->computed, n, finish_at, options_.tbt_target_ms / 1000.0);
    n = std::min(n, std::max(solved, kMinLatencyChunk));
  } else {
    n = std::min(n, options_.prefill_chunk);
  }
  return std::max<int64_t>(n, 0);
}

void EngineImpl::Schedule(std::vector<PlannedChunk>* plan) {
  plan->clear();
  int64_t budget = options_.max_num_batched_tokens;
  StepShape shape;
  auto add = [&](Sequence* s, int64_t n) {
    PlannedChunk c;
    c.seq = s;
    c.start = s->computed;
    c.end = s->computed + n;
    c.state_only = s->replaying();
    c.logits = !c.state_only && c.end == static_cast<int64_t>(s->tokens.size());
    plan->push_back(c);
    shape.AddChunk(c.start, n, c.logits);
    budget -= n;
  };
  auto planned = [&](const Sequence* s) {
    return std::any_of(plan->begin(), plan->end(), [s](const PlannedChunk& c) { return c.seq == s; });
  };

  // 1. Decode tokens: every running sequence with one pending token, best first; preempt from the worst
  //    end when blocks run out.
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Sequence* s = running_[i];
    if (s->pending() != 1 || s->replaying()) continue;
    bool ok = true;
    while (!blocks_->Grow(&s->blocks, s->computed, s->computed + 1)) {
      Sequence* victim = PickVictim(nullptr);
      Preempt(victim, plan);
      if (victim == s || !victim) {
        ok = false;
        break;
      }
    }
    if (!ok) break;  // s itself was the worst: everything after it was preempted too
    add(s, 1);
  }

  // 2. Prefill and replay chunks of running sequences.
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Sequence* s = running_[i];
    if (planned(s) || s->pending() <= 0) continue;
    int64_t n = ChunkFor(s, budget, shape);
    if (n <= 0) continue;
    // Shrink to what the free blocks allow; if not even one position fits, take blocks from worse sequences.
    auto fits = [&](int64_t len) { return blocks_->CanAllocate(blocks_->NeedFor(s->blocks, s->computed, s->computed + len)); };
    while (!fits(1)) {
      Sequence* victim = PickVictim(s);
      if (!victim) break;
      Preempt(victim, plan);
    }
    if (!fits(1)) continue;
    if (!fits(n)) {
      int64_t lo = 1, hi = n;
      while (hi - lo > 1) {
        const int64_t mid = lo + (hi - lo) / 2;
        (fits(mid) ? lo : hi) = mid;
      }
      n = lo;
    }
    blocks_->Grow(&s->blocks, s->computed, s->computed + n);
    add(s, n);
  }

  // 3. Admission, best first; a sequence that cannot start keeps the ones behind it waiting (priority).
  // Sequences loading from the persistent tier are passed over until their blocks are in (or not); one
  // whose blocks wait for room to be read into keeps the ones behind it waiting, as one that cannot start.
  for (auto it = waiting_.begin();
       budget > 0 && it != waiting_.end() && static_cast<int64_t>(running_.size()) < options_.max_num_seqs;) {
    Sequence* s = *it;
    if (TierMatchShrank(s)) s->tier = Sequence::Tier::kUnchecked;
    if (NeedsTierLookup(s)) StartTierLookup(s);
    if (s->tier == Sequence::Tier::kLoading && !ContinueTierLoad(s)) break;
    if (s->tier == Sequence::Tier::kLoading) {
      ++it;
      continue;
    }
    const int64_t n = Admit(s, budget, shape);
    if (n <= 0) break;
    add(s, n);
    it = waiting_.begin();  // Admit took s out of waiting_
  }
  ReleaseTierHeld();

  std::lock_guard<std::mutex> lock(stats_mutex_);
  gauge_running_ = static_cast<int64_t>(running_.size());
  gauge_waiting_ = static_cast<int64_t>(waiting_.size() + compiling_.size());
  const kvcache::BlockAllocator& p = blocks_->prefix();
  const kvcache::BlockAllocator& w = blocks_->window_class();
  gauge_blocks_used_ = {p.num_used(), w.num_used()};
  gauge_blocks_cached_ = {p.num_cached(), w.num_cached()};
  gauge_blocks_free_ = {p.num_free(), w.num_free()};
}

// Starts a waiting sequence: matches its tokens against the prefix cache, decides where its state is
// restored from (cached window blocks, exact replay, bounded replay, or nothing), attaches the blocks,
// restores the model state and allocates its first chunk, whose length it returns (0: it cannot start
// this step, and nothing changed).
int64_t EngineImpl::Admit(Sequence* s, int64_t budget, const StepShape& shape) {
  Request* r = s->request;
  kvcache::SequenceBlocks& b = s->blocks;
  b = kvcache::SequenceBlocks{};
  b.root = r->root;
  const int64_t length = static_cast<int64_t>(s->tokens.size());
  kvcache::ExtendBlockHashes(b.root, s->tokens, &b.hashes);
  const bool has_window = blocks_->has_window();

  // At least one position must be computed to produce logits: a fully cached prompt re-runs its last block.
  int64_t m = can_restore_ ? blocks_->MatchPrefix(b.hashes, (length - 1) / model::kBlockTokens) : 0;
  int64_t restore_at = 0;   // boundary block the state resumes at
  int64_t window_at = -1;   // boundary whose cached window blocks are attached (-1: none)
  bool exact = true, window_hit = false;
  model::RestoreFrom from = model::RestoreFrom::kWindowBlocks;
  if (m > 0 && !has_window) {
    restore_at = m;
  } else if (m > 0 && blocks_->HasWindowAt(b.hashes, m)) {
    restore_at = window_at = m;
    window_hit = true;
  } else if (m > 0) {
    // The window state at the hit is gone: replay up to the hit. Exact from the nearest cached window
    // state (or from the start of the dependency cone with no window state); bounded: the last block only.
    int64_t j = m - 1;
    while (j > 0 && !blocks_->HasWindowAt(b.hashes, j)) --j;
    const int64_t cone_start = std::max<int64_t>(0, (m * model::kBlockTokens - cone_positions_) / model::kBlockTokens);
    if (options_.swa_replay == SwaReplay::kExact || j == m - 1) {
      if (j >= cone_start) {
        restore_at = window_at = j;
      } else {
        restore_at = cone_start;
        from = model::RestoreFrom::kNoWindow;
      }
    } else {
      restore_at = m - 1;
      from = model::RestoreFrom::kNoWindow;
      exact = false;
    }
  }

  // Blocks: the matched ones that are cached now stop being available once attached.
  auto cached_among = [&](int64_t n) {
    int64_t c = 0;
    for (int64_t i = 0; i < n; ++i) c += blocks_->prefix().refcount(blocks_->prefix().Find(b.hashes[static_cast<size_t>(i)])) == 0;
    return c;
  };
  const int64_t attach_cost = m > 0 ? cached_among(m) : 0;
  if (blocks_->prefix().num_available() - attach_cost < 1) return 0;

  blocks_->Attach(&b, m, window_at);
  if (!exact) {
    b.register_limit = m;
    b.window_registered = restore_at;
    b.window_register_limit = restore_at;
  } else if (from == model::RestoreFrom::kNoWindow) {
    b.window_registered = std::max<int64_t>(m - 1, 0);  // the cone's warm-up window blocks are not exact
  }
  s->computed = restore_at * model::kBlockTokens;
  s->replay_end = m * model::kBlockTokens;
  s->state = model_->NewSequence();
  if (restore_at > 0) {
    MirrorTables(s);
    Status st = model_->RestoreAt(*s->state, s->computed, from, pools_);
    if (!st.ok()) {
      // A model without RestoreAt (or without this mode) serves no hits: start cold.
      if (st.code() == StatusCode::kUnimplemented) can_restore_ = false;
      else DI_LOG(kWarn, "engine: restore failed, recomputing").Field("status", st.ToString());
      blocks_->Free(&b, NowNanos());
      b = kvcache::SequenceBlocks{};
      b.root = r->root;
      kvcache::ExtendBlockHashes(b.root, s->tokens, &b.hashes);
      s->state = model_->NewSequence();
      s->computed = s->replay_end = 0;
      m = restore_at = 0;
      window_hit = false;
      exact = true;
    }
  }

  int64_t n = ChunkFor(s, budget, shape);
  auto fits = [&](int64_t len) { return blocks_->CanAllocate(blocks_->NeedFor(b, s->computed, s->computed + len)); };
  if (n > 0 && !fits(n)) {
    int64_t lo = 0, hi = n;
    while (hi - lo > 1) {
      const int64_t mid = lo + (hi - lo) / 2;
      (fits(mid) ? lo : hi) = mid;
    }
    n = lo;
  }
  if (n <= 0) {
    blocks_->Free(&b, NowNanos());
    s->state.reset();
    s->computed = s->replay_end = 0;
    return 0;
  }
  blocks_->Grow(&b, s->computed, s->computed + n);

  waiting_.erase(s);
  s->running = true;
  running_.insert(std::upper_bound(running_.begin(), running_.end(), s, SeqOrder()), s);
  const int64_t now = NowNanos();
  const bool first = r->hit_tokens < 0;
  if (first) {
    r->hit_tokens = std::min<int64_t>(m * model::kBlockTokens, r->prompt_tokens);
    r->admitted_nanos = now;
    queue_.Record(static_cast<double>(now - r->arrival_nanos) * 1e-9);
    std::lock_guard<std::mutex> lock(inbox_mutex_);
    if (r->fresh) {
      r->fresh = false;
      --waiting_fresh_;
    }
  }
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    if (first) {
      counters_.prompt_tokens += static_cast<uint64_t>(r->prompt_tokens);
      counters_.prefix_cache_queries += static_cast<uint64_t>(r->prompt_tokens);
      counters_.prefix_cache_hits += static_cast<uint64_t>(r->hit_tokens);
      // Of the hit, the blocks the persistent tier brought in for this request.
      const int64_t from_tier = std::clamp<int64_t>(m - s->tier_from, 0, s->tier_loaded);
      counters_.external_prefix_cache_hits +=
          static_cast<uint64_t>(std::min(from_tier * model::kBlockTokens, r->hit_tokens));
    }
    if (m > 0) {
      if (window_hit) ++counters_.window_block_hits;
      else if (s->replay_end > s->computed) {
        ++counters_.replay_hits;
        counters_.replayed_tokens += static_cast<uint64_t>(s->replay_end - s->computed);
      }
    }
  }
  return n;
}

}  // namespace deepinfer::engine
