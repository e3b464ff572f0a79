// The scheduler's planning half: the inbox, deadlines, and each step's plan — decode tokens of running
// sequences first, then prefill (and replay) chunks sized by the token budget and the latency target, then
// admission of waiting sequences (prefix-cache match, restore, replay decision), with preemption by
// recomputation when blocks run out.
#include <algorithm>

#include "core/clock.h"
#include "core/log.h"
#include "engine/scheduler.h"

namespace deepinfer::engine {
namespace {

constexpr int64_t kMinLatencyChunk = 16;  // progress for prefills even when decodes alone fill the target
constexpr int64_t kExpireEveryNanos = 1'000'000'000;

// Cached window blocks keep to the pool slots counted for them (window_cached); the snapshots have a
// budget of their own (SchedulerConfig::snapshot_budget_bytes), so neither kind pushes the other out.
kvcache::BlockManagerOptions BlockOptions(const SchedulerConfig& c) {
  return {.prefix_blocks = c.prefix_blocks,
          .window_blocks = c.window_blocks,
          .window = c.window,
          .window_max_cached = c.window_cached,
          .window_block_bytes = c.window_block_bytes,
          .window_ttl_s = c.options.window_ttl_s,
          .prefix_caching = c.options.enable_prefix_caching};
}

}  // namespace

bool SeqOrder::operator()(const Sequence* a, const Sequence* b) const {
  if (a->request->params.priority != b->request->params.priority)
    return a->request->params.priority < b->request->params.priority;
  if (a->request->order != b->request->order) return a->request->order < b->request->order;
  return a->index < b->index;
}

Scheduler::Scheduler(SchedulerConfig config, Inbox* inbox, EngineMetrics* metrics, OutputProcessor* output,
                     PrefixBlockBytes* bytes)
    : config_(std::move(config)),
      inbox_(inbox),
      metrics_(metrics),
      output_(output),
      bytes_(bytes),
      blocks_(BlockOptions(config_)),
      can_restore_(config_.supports_restore),
      can_fork_(config_.supports_fork) {}

Scheduler::~Scheduler() = default;

bool Scheduler::DrainInbox(bool wait) {
  std::vector<std::unique_ptr<Request>> fresh;
  std::vector<RequestId> aborts;
  std::vector<std::pair<RequestId, int>> stops;
  std::vector<TierEvent> tier;
  std::vector<std::pair<uint64_t, Status>> compiled;
  bool stopping;
  {
    MutexLock lock(&inbox_->mu);
    if (wait && inbox_->new_requests.empty() && inbox_->aborts.empty() && inbox_->output_stops.empty() &&
        inbox_->tier_events.empty() && inbox_->compiled_constraints.empty() && !inbox_->stopping) {
      // Wake for deadlines and cache expiry too, not only for new work.
      inbox_->cv.WaitUntil(&inbox_->mu, std::chrono::steady_clock::now() + std::chrono::milliseconds(requests_.empty() ? 1000 : 20));
    }
    fresh.swap(inbox_->new_requests);
    aborts.swap(inbox_->aborts);
    stops.swap(inbox_->output_stops);
    tier.swap(inbox_->tier_events);
    compiled.swap(inbox_->compiled_constraints);
    stopping = inbox_->stopping;
  }
  for (const TierEvent& e : tier) OnTierEvent(e);
  for (auto& r : fresh) {
    for (auto& seq : r->seqs) seq->id = next_seq_id_++;
    const RequestId id = r->id;
    if (r->constraint_ready) {
      waiting_.insert(r->seqs[0].get());
    } else {
      compiling_.emplace(r->constraint, id);
    }
    requests_.emplace(id, std::move(r));
  }
  for (auto& [handle, status] : compiled) {
    auto c = compiling_.find(handle);
    if (c == compiling_.end()) continue;  // its request was refused or dropped meanwhile
    const RequestId id = c->second;
    compiling_.erase(c);
    auto it = requests_.find(id);
    if (it == requests_.end()) continue;  // finished meanwhile (aborted, past its deadline)
    Request* r = it->second.get();
    if (!status.ok()) {
      FinishRequest(r, FinishReason::kError, status);
      continue;
    }
    r->constraint_ready = true;
    waiting_.insert(r->seqs[0].get());
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
    output_->Post(events);
    if (it->second->live == 0) requests_.erase(it);
  }
  return stopping;
}

void Scheduler::CheckDeadlines(int64_t now) {
  std::vector<Request*> late;
  for (auto& [id, r] : requests_) {
    if (r->params.deadline_nanos > 0 && now > r->params.deadline_nanos) late.push_back(r.get());
  }
  for (Request* r : late) FinishRequest(r, FinishReason::kDeadline, Status::Ok());
  if (!tier_loads_.empty()) CheckTierTimeouts(now);
  if (!snapshot_reads_.empty()) CheckSnapshotReadTimeouts(now);
  if (now - last_expire_nanos_ > kExpireEveryNanos) {
    blocks_.Expire(now);
    last_expire_nanos_ = now;
  }
}

StepPlan Scheduler::Schedule() {
  if (!snapshot_takes_.empty()) {
    // Finished sequences' snapshots go first, in a step of their own: their blocks are still theirs, and
    // the admissions of the next step can resume from them.
    current_.clear();
    StepPlan out;
    out.snapshots = std::move(snapshot_takes_);
    snapshot_takes_.clear();
    return out;
  }
  schedule_started_nanos_ = NowNanos();
  schedule_started_cpu_nanos_ = ProcessCpuNanos();
  std::vector<Work> plan;
  Plan(&plan);
  if (plan.empty() && !running_.empty()) {
    // Every running sequence is stuck on blocks the others hold: give the worst one's back.
    Preempt(PickVictim(nullptr), &plan);
    Plan(&plan);
  }
  return BuildPlan(std::move(plan));
}

void Scheduler::AbortAll() {
  ReleaseTierHeld();
  std::vector<Request*> all;
  for (auto& [id, r] : requests_) all.push_back(r.get());
  for (Request* r : all) FinishRequest(r, FinishReason::kAbort, Status::Ok());
}

Sequence* Scheduler::PickVictim(const Sequence* better_than) const {
  if (running_.empty()) return nullptr;
  Sequence* worst = running_.back();
  if (better_than && !SeqOrder()(better_than, worst)) return nullptr;
  return worst;
}

void Scheduler::Preempt(Sequence* s, std::vector<Work>* plan) {
  if (!s) return;
  std::erase_if(*plan, [s](const Work& c) { return c.seq == s; });
  ReleaseSequence(s);
  dropped_.push_back(s->id);
  s->running = false;
  waiting_.insert(s);
  MutexLock lock(&metrics_->mu);
  ++metrics_->counters.num_preemptions;
}

void Scheduler::ReleaseTierHeld() {
  if (tier_held_.empty()) return;
  const int64_t now = NowNanos();
  for (int32_t block : tier_held_) blocks_.prefix().Release(block, now);
  tier_held_.clear();
}

// Frees a sequence's blocks (its model state goes with the next plan's dropped or finished list); what it
// computed is lost (full blocks stay cached, so a recomputation usually hits them).
void Scheduler::ReleaseSequence(Sequence* s) {
  if (s->running) std::erase(running_, s);
  blocks_.Free(&s->blocks, NowNanos());
  s->blocks = kvcache::SequenceBlocks{};
  s->setup.reset();
  s->computed = 0;
  s->replay_end = 0;
  s->draft.clear();
  s->draft_survival.clear();
}

int64_t Scheduler::ChunkFor(const Sequence* s, int64_t budget, const StepShape& shape) const {
  const int64_t stop = s->replaying() ? s->replay_end : static_cast<int64_t>(s->tokens.size());
  int64_t n = std::min(stop - s->computed, budget);
  if (const double target = TargetSeconds(); target > 0) {
    const int64_t finish_at = s->replaying() ? -1 : stop - s->computed;
    const int64_t solved = cost_.SolveChunk(shape, s->computed, n, finish_at, target);
    // When the decodes alone fill the target, the best prompt still progresses by a minimal chunk; the
    // others wait for a step with room. A minimal chunk for every prompt would put all of them into every
    // step the streams wait on (sixteen prompts arriving together: a step of many times the target).
    const bool first_prefill = shape.chunks == decode_shape_.chunks;
    n = std::min(n, first_prefill ? std::max(solved, kMinLatencyChunk) : solved);
  } else {
    n = std::min(n, options_.prefill_chunk);
  }
  return std::max<int64_t>(n, 0);
}

double Scheduler::TargetSeconds() const {
  if (!cost_.ready()) return 0;
  if (options_.tbt_target_ms > 0) return options_.tbt_target_ms / 1000.0;
  if (options_.tbt_target_ms != kDerivedTbtTarget) return 0;
  return DerivedTbtTargetSeconds(cost_, decode_shape_);
}

int64_t Scheduler::VerifyRoom(const Sequence* s, int64_t budget) const {
  if (!options_.speculative.enabled()) return 0;
  const sampling::SamplingParams& sp = s->request->params.sampling;
  int64_t k = options_.speculative.num_speculative_tokens;
  k = std::min(k, budget - 1);
  k = std::min(k, sp.max_tokens - s->generated - 1);  // a step yields at most k + 1 tokens
  // The positions computed, up to computed + k, stay inside the context.
  k = std::min(k, config_.max_model_len - static_cast<int64_t>(s->tokens.size()));
  return std::max<int64_t>(k, 0);
}

int64_t Scheduler::VerifyLength(const Sequence* s, int64_t budget) const {
  int64_t k = std::min<int64_t>(static_cast<int64_t>(s->draft.size()), VerifyRoom(s, budget));
  if (s->verify_limit >= 0) k = std::min(k, s->verify_limit);
  return std::max<int64_t>(k, 0);
}

int64_t Scheduler::DraftRoom(const Sequence* s, int64_t length) const {
  const SpeculativeConfig& sc = options_.speculative;
  if (!sc.uses_draft_layers()) return 0;
  const int64_t end = s->computed + length;
  return std::clamp<int64_t>(config_.max_model_len - end, 0, sc.num_speculative_tokens);
}

void Scheduler::Plan(std::vector<Work>* plan) {
  plan->clear();
  int64_t budget = options_.max_num_batched_tokens;
  StepShape shape;
  auto add = [&](Sequence* s, int64_t n, int64_t verify = 0, int64_t draft_room = 0) {
    Work c;
    c.seq = s;
    c.start = s->computed;
    c.end = s->computed + n;
    c.verify = verify;
    c.draft_room = draft_room;
    c.state_only = s->replaying();
    c.logits = !c.state_only && c.end - verify == static_cast<int64_t>(s->tokens.size());
    plan->push_back(c);
    shape.AddChunk(c.start, n, c.logits);
    shape.logit_rows += static_cast<double>(verify);  // a verify chunk's every position has logits
    budget -= n;
  };
  auto planned = [&](const Sequence* s) {
    return std::any_of(plan->begin(), plan->end(), [s](const Work& c) { return c.seq == s; });
  };

  ScheduleVerifyLengths(budget);
  // 1. Decode tokens: every running sequence with one pending token, best first, with its draft tokens
  //    when it has some and their lookahead blocks are free (and, for the model's draft layers, the
  //    blocks of the positions the next draft writes); preempt from the worst end when blocks for the
  //    pending token run out.
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Sequence* s = running_[i];
    if (s->pending() != 1 || s->replaying()) continue;
    const int64_t verify = VerifyLength(s, budget);
    const int64_t room = DraftRoom(s, 1 + verify);
    if ((verify > 0 || room > 0) && blocks_.AllocateLookahead(&s->blocks, s->computed, 1 + verify + room)) {
      add(s, 1 + verify, verify, room);
      continue;
    }
    if (verify > 0 && room > 0 && blocks_.AllocateLookahead(&s->blocks, s->computed, 1 + verify)) {
      add(s, 1 + verify, verify);
      continue;
    }
    bool ok = true;
    while (!blocks_.Grow(&s->blocks, s->computed, s->computed + 1)) {
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

  decode_shape_ = shape;

  // 2. Prefill and replay chunks of running sequences.
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Sequence* s = running_[i];
    if (planned(s) || s->pending() <= 0) continue;
    int64_t n = ChunkFor(s, budget, shape);
    if (n <= 0) continue;
    // Shrink to what the free blocks allow; if not even one position fits, take blocks from worse sequences.
    auto fits = [&](int64_t len) { return blocks_.CanAllocate(blocks_.NeedFor(s->blocks, s->computed, s->computed + len)); };
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
    blocks_.Grow(&s->blocks, s->computed, s->computed + n);
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
    if (NeedsSnapshotRead(s)) StartSnapshotRead(s);
    if (s->snapshot_read == Sequence::SnapshotRead::kReading) {
      ++it;
      continue;
    }
    if (AnotherComputesItsNextBlock(s)) {
      ++it;
      continue;
    }
    const int64_t n = Admit(s, budget, shape);
    if (n <= 0) break;
    add(s, n);
    it = waiting_.begin();  // Admit took s out of waiting_
  }
  ReleaseTierHeld();
  PublishPoolGauges();

  MutexLock lock(&metrics_->mu);
  // What a router needs to predict this engine's next requests (router/placement.h).
  int64_t queued = 0;
  for (const Sequence* s : waiting_) queued += s->pending();
  for (const Sequence* s : running_) queued += std::max<int64_t>(s->pending() - 1, 0);
  metrics_->queued_prefill_tokens = queued;
  metrics_->step_cost = cost_.coefficients();
  metrics_->step_cost_ready = cost_.ready();
}

void Scheduler::PublishPoolGauges() {
  // Blocks only a pending snapshot holds belong to no sequence: they count as what they become next step.
  int64_t prefix_pinned = 0, window_pinned = 0;
  for (const BlockCopy& pin : snapshot_pins_) {
    const kvcache::BlockAllocator& a = pin.window ? blocks_.window_class() : blocks_.prefix();
    if (a.refcount(pin.from) == 1) ++(pin.window ? window_pinned : prefix_pinned);
  }
  MutexLock lock(&metrics_->mu);
  metrics_->running = static_cast<int64_t>(running_.size());
  metrics_->waiting = static_cast<int64_t>(waiting_.size() + compiling_.size());
  const kvcache::BlockAllocator& p = blocks_.prefix();
  const kvcache::BlockAllocator& w = blocks_.window_class();
  metrics_->prefix_used = p.num_used() - prefix_pinned;
  metrics_->prefix_cached = p.num_cached();
  metrics_->prefix_free = p.num_free() + prefix_pinned;
  metrics_->window_used = w.num_used() - window_pinned;
  metrics_->window_cached = w.num_cached();
  // Window blocks cached past the shared budget evict snapshots too.
  metrics_->counters.snapshots_cached = snapshots_.count();
  metrics_->counters.snapshot_bytes = snapshots_.bytes();
}

// Prompts that share a prefix and arrive together (agents' turns under one system prompt) would otherwise
// each compute the shared blocks in the same steps. Waiting costs the later one nothing: the blocks it waits
// for are computed at the pace it would have computed them, and once they are cached it starts from them.
// A running sequence passes the block within its chunks (or is preempted, and no longer runs), so the wait
// ends.
bool Scheduler::AnotherComputesItsNextBlock(const Sequence* s) const {
  const Request* r = s->request;
  if (!can_restore_ || r->params.prompt_logprobs >= 0 || running_.empty()) return false;
  const int64_t length = static_cast<int64_t>(s->tokens.size());
  const int64_t limit = (length - 1) / kvcache::kBlockTokens;
  if (limit <= 0) return false;
  std::vector<kvcache::BlockHash> hashes;
  kvcache::ExtendBlockHashes(r->root, std::span<const int32_t>(s->tokens).first(static_cast<size_t>(limit) * kvcache::kBlockTokens), &hashes);
  const int64_t m = blocks_.MatchPrefix(hashes, limit);
  if (m >= limit) return false;
  const kvcache::BlockHash& next = hashes[static_cast<size_t>(m)];
  const int64_t block_end = (m + 1) * kvcache::kBlockTokens;
  return std::any_of(running_.begin(), running_.end(), [&](const Sequence* other) {
    return other->computed < block_end && static_cast<int64_t>(other->blocks.hashes.size()) > m &&
           other->blocks.hashes[static_cast<size_t>(m)] == next;
  });
}

// Starts a waiting sequence: matches its tokens against the prefix cache, decides where its state is
// restored from (cached window blocks, exact replay, bounded replay, or nothing), attaches the blocks,
// records how the executor makes its state (Sequence::setup) and allocates its first chunk, whose length
// it returns (0: it cannot start this step, and nothing changed).
int64_t Scheduler::Admit(Sequence* s, int64_t budget, const StepShape& shape) {
  Request* r = s->request;
  kvcache::SequenceBlocks& b = s->blocks;
  b = kvcache::SequenceBlocks{};
  b.root = r->root;
  const int64_t length = static_cast<int64_t>(s->tokens.size());
  kvcache::ExtendBlockHashes(b.root, s->tokens, &b.hashes);
  const bool has_window = blocks_.has_window();

  // At least one position must be computed to produce logits: a fully cached prompt re-runs its last block.
  // A request that asks for prompt logprobs computes every prompt position.
  const bool restorable = can_restore_ && r->params.prompt_logprobs < 0;
  int64_t m = restorable ? blocks_.MatchPrefix(b.hashes, (length - 1) / kvcache::kBlockTokens) : 0;
  int64_t restore_at = 0;   // boundary block the state resumes at
  int64_t window_at = -1;   // boundary whose cached window blocks are attached (-1: none)
  bool exact = true, window_hit = false;
  kvcache::Forgotten window_miss = kvcache::Forgotten::kNever;
  RestoreSource from = RestoreSource::kWindowBlocks;
  if (m > 0 && !has_window) {
    restore_at = m;
  } else if (m > 0 && blocks_.HasWindowAt(b.hashes, m)) {
    restore_at = window_at = m;
    window_hit = true;
  } else if (m > 0) {
    window_miss = blocks_.WhyNoWindowAt(b.hashes, m);
    // The window state at the hit is gone: replay up to the hit. Exact from the nearest cached window
    // state (or from the start of the dependency cone with no window state); bounded: the last block only.
    int64_t j = m - 1;
    while (j > 0 && !blocks_.HasWindowAt(b.hashes, j)) --j;
    const int64_t cone_start = std::max<int64_t>(0, (m * kvcache::kBlockTokens - config_.replay_cone) / kvcache::kBlockTokens);
    if (options_.swa_replay == SwaReplay::kExact || j == m - 1) {
      if (j >= cone_start) {
        restore_at = window_at = j;
      } else {
        restore_at = cone_start;
        from = RestoreSource::kNoWindow;
      }
    } else {
      restore_at = m - 1;
      from = RestoreSource::kNoWindow;
      exact = false;
    }
  }

  // A finished sequence's snapshot continuing the match resumes to the token, window state included.
  std::shared_ptr<const SequenceSnapshot> snapshot = restorable ? FindSnapshot(s, m) : nullptr;
  if (snapshot) {
    restore_at = m;
    window_at = -1;
    exact = true;
    from = RestoreSource::kWindowBlocks;
  }

  // Blocks: the matched ones that are cached now stop being available once attached.
  auto cached_among = [&](int64_t n) {
    int64_t c = 0;
    for (int64_t i = 0; i < n; ++i) c += blocks_.prefix().refcount(blocks_.prefix().Find(b.hashes[static_cast<size_t>(i)])) == 0;
    return c;
  };
  const int64_t attach_cost = m > 0 ? cached_among(m) : 0;
  if (blocks_.prefix().num_available() - attach_cost < 1) return 0;

  blocks_.Attach(&b, m, window_at);
  if (!exact) {
    b.register_limit = m;
    b.window_registered = restore_at;
    b.window_register_limit = restore_at;
  } else if (from == RestoreSource::kNoWindow) {
    b.window_registered = std::max<int64_t>(m - 1, 0);  // the cone's warm-up window blocks are not exact
  }
  s->computed = restore_at * kvcache::kBlockTokens;
  s->replay_end = m * kvcache::kBlockTokens;
  s->setup = restore_at > 0 ? StateSetup{StateSetup::Kind::kRestore, s->computed, from} : StateSetup{};
  if (snapshot) {
    s->computed = s->replay_end = snapshot->num_tokens;
    s->setup = StateSetup{.kind = StateSetup::Kind::kSnapshot, .position = s->computed, .snapshot = snapshot};
  }

  int64_t n = ChunkFor(s, budget, shape);
  auto fits = [&](int64_t len) { return blocks_.CanAllocate(blocks_.NeedFor(b, s->computed, s->computed + len)); };
  if (n > 0 && !fits(n)) {
    int64_t lo = 0, hi = n;
    while (hi - lo > 1) {
      const int64_t mid = lo + (hi - lo) / 2;
      (fits(mid) ? lo : hi) = mid;
    }
    n = lo;
  }
  if (n <= 0) {
    blocks_.Free(&b, NowNanos());
    s->setup.reset();
    s->computed = s->replay_end = 0;
    return 0;
  }
  blocks_.Grow(&b, s->computed, s->computed + n);

  waiting_.erase(s);
  s->running = true;
  running_.insert(std::upper_bound(running_.begin(), running_.end(), s, SeqOrder()), s);
  const int64_t now = NowNanos();
  const bool first = r->hit_tokens < 0;
  if (first) {
    r->hit_tokens = std::min<int64_t>(snapshot ? s->computed : m * kvcache::kBlockTokens, r->prompt_tokens);
    r->admitted_nanos = now;
    metrics_->queue.Record(static_cast<double>(now - r->arrival_nanos) * 1e-9);
    MutexLock lock(&inbox_->mu);
    if (r->fresh) {
      r->fresh = false;
      --inbox_->waiting_fresh;
    }
  }
  {
    MutexLock lock(&metrics_->mu);
    EngineStats& stats = metrics_->counters;
    if (first) {
      stats.prompt_tokens += static_cast<uint64_t>(r->prompt_tokens);
      stats.prefix_cache_queries += static_cast<uint64_t>(r->prompt_tokens);
      stats.prefix_cache_hits += static_cast<uint64_t>(r->hit_tokens);
      // Of the hit, the blocks the persistent tier brought in for this request.
      const int64_t from_tier = std::clamp<int64_t>(m - s->tier_from, 0, s->tier_loaded);
      stats.external_prefix_cache_hits +=
          static_cast<uint64_t>(std::min(from_tier * kvcache::kBlockTokens, r->hit_tokens));
    }
    if (first && snapshots_.enabled() && restorable) {
      if (snapshot) {
        ++stats.snapshot_hits;
        stats.snapshot_tokens += static_cast<uint64_t>(s->computed - m * kvcache::kBlockTokens);
      } else {
        ++stats.snapshot_misses;
      }
    }
    if (!snapshot && m > 0 && has_window && !window_hit) {
      if (window_miss == kvcache::Forgotten::kEvicted) ++stats.window_misses_evicted;
      else if (window_miss == kvcache::Forgotten::kExpired) ++stats.window_misses_expired;
      else ++stats.window_misses_never_cached;
    }
    if (m > 0 && !snapshot) {
      if (window_hit) ++stats.window_block_hits;
      else if (s->replay_end > s->computed) {
        ++stats.replay_hits;
        stats.replayed_tokens += static_cast<uint64_t>(s->replay_end - s->computed);
      }
    }
  }
  return n;
}

}  // namespace deepinfer::engine
