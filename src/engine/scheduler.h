// The scheduler: decides every step (StepPlan) and turns each step's result into finishes, births and
// output events. It owns the requests and sequences in flight, the block manager (prefix matching,
// preemption by recomputation), deadlines, the latency-budget chunk sizing and cost model, and the
// persistent tier's loading state machine (tier_loading.cpp). It knows no model: what it needs from it
// comes as plain data in SchedulerConfig, and it meets the executor only through step_plan.h.
//
// Threads. Everything here runs on the engine's step thread, except the Inbox, which any thread fills
// (under its mutex), and the tier's callbacks, which post into the Inbox through a TierMailbox.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/mutex.h"
#include "engine/cost_model.h"
#include "engine/engine.h"
#include "engine/metrics.h"
#include "engine/output_processor.h"
#include "engine/snapshot_cache.h"
#include "engine/step_plan.h"
#include "engine/verify_budget.h"
#include "kvcache/block_manager.h"
#include "kvcache/lower_tier.h"

namespace deepinfer::engine {

struct Request;

// One of a request's n outputs as the scheduler tracks it: its tokens, blocks and place in the queues.
// Owned by its Request; its model and sampling state live in the executor under `id`.
struct Sequence {
  Request* request = nullptr;
  SeqId id = 0;
  int index = 0;
  bool born = false;     // n > 1: outputs other than 0 are born when the prompt's first token is sampled
  bool running = false;  // in running_ (else waiting, unborn or finished)
  bool finished = false;
  bool sampler_sent = false;  // the executor has its SamplingSetup
  std::optional<StateSetup> setup;  // admitted: how the executor makes its state (sent with its next chunk)
  kvcache::SequenceBlocks blocks;
  std::vector<int32_t> tokens;  // prompt, then every generated token (the last one not yet computed)
  int64_t computed = 0;         // positions in the model state
  int64_t replay_end = 0;       // state-only (replay) chunks run up to this position
  int64_t generated = 0;
  int64_t last_token_nanos = 0;
  // The drafter's proposals for the tokens after the pending one (speculative decoding): the next decode
  // step verifies up to K of them.
  std::vector<int32_t> draft;
  std::vector<float> draft_survival;  // the drafter's predicted survival of each draft prefix (may be empty)
  int64_t verify_limit = -1;  // this step's scheduled verify length (-1: not scheduled)
  int64_t draft_limit = -1;   // draft tokens to propose after this step (-1: K)
  // The persistent tier (tier_loading.cpp): looked up once, before the first admission; while kLoading the
  // sequence waits and the step loop serves others.
  enum class Tier : uint8_t { kUnchecked, kLoading, kChecked };
  Tier tier = Tier::kUnchecked;
  int64_t tier_from = 0;    // first block index asked of the tier
  int64_t tier_loaded = 0;  // blocks it served (verified, now cached in RAM)
  uint64_t tier_ticket = 0;  // its TierLoad while kLoading
  int tier_lookups = 0;      // lookups so far (a lookup is redone when its RAM match was evicted meanwhile)
  // The RAM match the last tier decision relied on (blocks; 0: none to re-check). A sequence that waits
  // long for admission can see those blocks evicted; the tier is then asked again (TierMatchShrank).
  int64_t tier_match_end = 0;
  // A finished sequence's snapshot stored in the tier (scheduler_snapshots.cpp): asked for once, after
  // the tier's blocks, under the prompt's last matched block; the sequence waits for the answer.
  enum class SnapshotRead : uint8_t { kUnchecked, kReading, kChecked };
  SnapshotRead snapshot_read = SnapshotRead::kUnchecked;

  int64_t pending() const { return static_cast<int64_t>(tokens.size()) - computed; }
  bool replaying() const { return computed < replay_end; }
};

// A request in flight. Made by AddRequest (on the caller's thread), handed over through the Inbox, then
// owned by the scheduler (requests_) until its last output finishes.
struct Request {
  RequestId id = 0;
  int64_t order = 0;  // arrival sequence number
  int64_t arrival_nanos = 0;
  int64_t admitted_nanos = 0;
  int64_t prompt_tokens = 0;
  RequestParams params;
  uint64_t seed = 0;
  uint64_t constraint = 0;  // Executor::PrepareConstraints's handle (0: none)
  // Its masks exist; until then (a grammar compiling) it waits in compiling_, not in waiting_.
  bool constraint_ready = true;
  bool use_counts = false;  // penalties
  kvcache::BlockHash root;
  std::shared_ptr<OutputRequest> out;
  int64_t hit_tokens = -1;  // decided at the first admission
  bool forked = false;      // outputs 1..n-1 born
  bool first_token_seen = false;
  int live = 0;             // outputs not finished
  bool fresh = true;        // never admitted (counts against max_waiting)
  // RequestParams::prompt_logprobs: those of prompt positions 1, 2, ... collected so far (a recomputation
  // after a preemption adds none twice), until delivered with the first update after the whole prompt.
  std::vector<sampling::SampledToken> prompt_logprobs;
  bool prompt_logprobs_sent = false;
  std::vector<std::unique_ptr<Sequence>> seqs;
};

// A lookup or read of the persistent tier that finished (posted by the tier's thread to the inbox).
struct TierEvent {
  uint64_t ticket = 0;
  bool read = false;  // else a lookup
  size_t leading = 0;  // blocks present (lookup) or verified and filled (read)
  // A snapshot read (token-exact continuation): what the tier had under the name asked (none: null).
  bool snapshot_read = false;
  std::vector<int32_t> tail;
  std::shared_ptr<const SequenceSnapshot> snapshot;
};

// What other threads hand the step thread.
struct Inbox {
  Mutex mu;
  CondVar cv;       // something arrived
  CondVar tier_cv;  // a tier read finished
  std::vector<std::unique_ptr<Request>> new_requests GUARDED_BY(mu);
  std::vector<RequestId> aborts GUARDED_BY(mu);
  std::vector<std::pair<RequestId, int>> output_stops GUARDED_BY(mu);  // outputs a stop string finished
  std::vector<TierEvent> tier_events GUARDED_BY(mu);
  // Grammars that finished compiling (Executor::PrepareConstraints's on_ready): handle and outcome.
  std::vector<std::pair<uint64_t, Status>> compiled_constraints GUARDED_BY(mu);
  int64_t tier_reads_outstanding GUARDED_BY(mu) = 0;  // tier reads whose callback has not run yet
  int64_t waiting_fresh GUARDED_BY(mu) = 0;  // fresh requests queued or not yet admitted
  bool stopping GUARDED_BY(mu) = false;
  RequestId next_id GUARDED_BY(mu) = 1;
  int64_t next_order GUARDED_BY(mu) = 0;
  uint64_t seed_state GUARDED_BY(mu) = 0;
};

// Where the tier's callbacks deliver: the inbox while the engine runs, nothing after Shutdown (a hung
// lookup that answers late must not touch an engine that is gone). Reads are different: they fill pool
// blocks, so Shutdown waits for them.
struct TierMailbox {
  Mutex mu;
  Inbox* inbox GUARDED_BY(mu) = nullptr;
  bool closed GUARDED_BY(mu) = false;
};

// The prefix blocks a tier read fills; they belong to the load, not to a sequence, so that an abort while
// the read runs cannot free memory the tier is still writing.
struct TierLoad {
  RequestId request = 0;
  int index = 0;
  int64_t from = 0;
  int64_t start_nanos = 0;
  bool detached = false;  // the sequence stopped waiting for it (lower_tier_timeout_s)
  // The lookup answered and the blocks it found wait for pool blocks to be read into; the admission pass
  // starts the read when there is room (ContinueTierLoad).
  bool awaiting_room = false;
  std::vector<kvcache::BlockKey> keys;
  std::vector<int32_t> blocks;  // allocated for the read (one reference each)
  std::vector<int32_t> pinned;  // the RAM-matched blocks before `from`, referenced while the read runs
};

struct SeqOrder {
  bool operator()(const Sequence* a, const Sequence* b) const;
};

// What the scheduler knows of the model and the pools: plain data.
struct SchedulerConfig {
  EngineOptions options;
  int64_t prefix_blocks = 0;   // per prefix cache group
  int64_t window_blocks = 0;   // per window cache group
  int64_t window = 0;          // positions of the widest window group
  int64_t window_cached = -1;  // cached window blocks kept (pool slots beyond the running sequences'); -1: no bound
  // The snapshots' byte budget, in memory beside the pools (least recently used evicted first). Their own,
  // not shared with the cached window blocks: those live in pool slots that are resident anyway, and at
  // many concurrent prompts the window blocks their decodes release would otherwise push out the prompts'
  // own snapshots, the entries an identical re-send needs.
  int64_t snapshot_budget_bytes = 0;
  int64_t vocab_size = 0;
  int64_t max_model_len = 0;
  std::vector<int32_t> eos_token_ids;
  bool supports_restore = false;  // prefix-cache hits (else every sequence starts cold)
  bool supports_fork = false;     // n > 1 outputs share the prompt's state (else they recompute it)
  int64_t replay_cone = 0;        // positions exact replay recomputes before a hit without window state
  // Token-exact continuation's snapshots, under snapshot_budget_bytes: 0: off; > 0: at most this many bytes
  // of it; -1: no cap of their own.
  int64_t snapshot_bytes = 0;
  // Names everything that shapes a snapshot's bytes besides its tokens (cache groups, block sizes, the
  // model's state): mixed into the name a snapshot is stored under in the persistent tier.
  Hash128 snapshot_layout;
  int64_t prefix_block_bytes = 0, window_block_bytes = 0;  // one block of every group of the class
  int64_t sequence_state_bytes = 0;  // the model's state outside the blocks, at most (a snapshot's share)
};

class Scheduler {
 public:
  // `inbox`, `metrics`, `output` and `bytes` must outlive the scheduler.
  Scheduler(SchedulerConfig config, Inbox* inbox, EngineMetrics* metrics, OutputProcessor* output,
            PrefixBlockBytes* bytes);
  ~Scheduler();

  // Takes what the inbox holds (waiting for something, or a timeout, when `wait`); true once stopping.
  bool DrainInbox(bool wait);
  // Finished sequences whose snapshots the next plan takes.
  bool HasSnapshotTakes() const { return !snapshot_takes_.empty(); }
  void CheckDeadlines(int64_t now);
  // The next step; empty when there is nothing to run.
  StepPlan Schedule();
  // Applies the executor's result of the plan Schedule returned last.
  void Update(const StepResult& result);
  // The step loop waits for work: the next gap measures waiting, not the loop.
  void NoteIdle() { last_forward_end_ = 0; }
  // The calibrated step-cost model's prediction for the step Schedule() planned last (0 before it is fitted).
  double PredictedStepSeconds() const { return cost_.ready() ? cost_.Predict(current_shape_) : 0; }
  // A short profile of typical step shapes through `run` calibrates the cost model.
  void Calibrate(const std::function<StepResult(const StepPlan&)>& run);
  // Finishes everything in flight with kAbort.
  void AbortAll();
  // Waits for the tier reads in flight (they write into the pools) and closes the tier's mailbox.
  void WaitForTier();

 private:
  // One sequence's chunk of the step being planned.
  struct Work {
    Sequence* seq = nullptr;
    int64_t start = 0, end = 0;
    bool state_only = false;
    bool logits = false;
    int64_t verify = 0;  // draft tokens after the pending one (positions [start + 1, end))
    // Positions past `end` whose blocks were allocated for the draft layers to write (rolled back after).
    int64_t draft_room = 0;
  };

  void Plan(std::vector<Work>* plan);
  StepPlan BuildPlan(std::vector<Work> plan);
  int64_t Admit(Sequence* s, int64_t budget, const StepShape& shape);
  // Whether a running sequence is computing the first block of `s`'s prompt that the prefix cache lacks
  // (the same tokens from the same root): `s` then waits for it to be cached rather than compute it too.
  bool AnotherComputesItsNextBlock(const Sequence* s) const;
  int64_t ChunkFor(const Sequence* s, int64_t budget, const StepShape& shape) const;
  // This step's latency target (EngineOptions::tbt_target_ms; derived from decode_shape_), or 0 for fixed
  // chunks.
  double TargetSeconds() const;
  // Draft tokens a decoding sequence verifies this step (0: none).
  int64_t VerifyLength(const Sequence* s, int64_t budget) const;
  // The draft tokens it could verify this step with a whole draft (K within its limits).
  int64_t VerifyRoom(const Sequence* s, int64_t budget) const;
  // Positions past a decode chunk of `length` that the model's draft layers may write (0: none).
  int64_t DraftRoom(const Sequence* s, int64_t length) const;
  // Scheduled verification (verify_schedule.cpp): sets each decoding sequence's verify_limit for this step
  // and draft_limit for the next.
  void ScheduleVerifyLengths(int64_t budget);
  // A step ran with `decoders` decode chunks verifying `verified_positions` draft tokens at a cost of
  // `seconds` (the process's CPU time from planning to its result): measured for the budget whose positions
  // it verified as planned (whatever budget was asked: a shorter draft may verify a smaller one's).
  void ObserveVerifyStep(int64_t decoders, int64_t verified_positions, double seconds);
  // The predicted survival of a sequence's first k draft prefixes: its drafter's, else the online
  // per-position acceptance estimate.
  std::vector<double> PredictedSurvival(const Sequence* s, int64_t k) const;
  // Observed verification of one draft (positions verified, the first `accepted` matched).
  void ObserveAcceptance(int64_t verified, int64_t accepted);
  // A verify chunk's result: the sequence keeps its accepted positions (blocks registered for them only,
  // the lookahead rolled back) and the counters count the draft.
  Status ApplyVerify(const Work& c, const SequenceResult& row, int64_t now);
  Sequence* PickVictim(const Sequence* better_than) const;
  void Preempt(Sequence* s, std::vector<Work>* plan);
  void ReleaseSequence(Sequence* s);
  void ReleaseTierHeld();  // tier_held_ back to the cache
  void BirthChildren(Sequence* parent);
  void FinishSequence(Sequence* s, FinishReason reason, int32_t stop_token, OutputEvent* event);
  void FinishRequest(Request* r, FinishReason reason, const Status& status);
  void FailPlan(const Status& status);
  OutputEvent& EventFor(Request* r, std::vector<OutputEvent>* events);
  // Prompt logprobs (RequestParams::prompt_logprobs): asked of a chunk, collected, delivered once.
  void SetPromptLogprobs(const Sequence& s, const Work& w, PlannedChunk* c) const;
  static void CollectPromptLogprobs(const PromptLogprobsResult& result, Request* r);
  void DeliverPromptLogprobs(const Sequence& s, std::vector<OutputEvent>* events);
  SamplingSetup SamplingFor(const Sequence* s) const;
  void CheckStep();
  // The pools' gauges in the metrics (blocks used, cached, free; sequences running and waiting).
  void PublishPoolGauges();
  // Token-exact continuation (scheduler_snapshots.cpp): a finished sequence's snapshot is asked of the
  // executor in the next plan, its blocks held until that step is done; Admit resumes a prompt from one.
  void TakeSnapshot(Sequence* s, FinishReason reason);
  // A chunk over [start, end) that ends the prompt: its snapshot one position before the end (at the end
  // for RequestParams::snapshot_whole_prompt, a block boundary included), taken right after the step's
  // forward pass (StepPlan::prompt_snapshots), so that the same prompt sent again resumes there.
  void TakePromptSnapshot(const Sequence& s, int64_t start, int64_t end, std::vector<SnapshotTake>* takes);
  // Reserves the snapshot of `s` at position n, whose full blocks chain to `prefix`, to be offered to the
  // persistent tier under `tier_name`, and holds the blocks the executor copies (its partial prefix block,
  // the window blocks the next position sees) until the step ran. False when it is not taken.
  bool ReserveSnapshot(const Sequence& s, int64_t n, const kvcache::BlockHash& prefix,
                       const kvcache::BlockHash& tier_name, SnapshotTake* take);
  std::shared_ptr<const SequenceSnapshot> FindSnapshot(const Sequence* s, int64_t matched_blocks);
  void ReceiveSnapshots(const StepResult& result);
  // The persistent tier's snapshots: the name one is stored under, and the read at admission. A finished
  // sequence's is named by its last full block alone (a longer prompt finds it without knowing where that
  // sequence ended), a prompt's own by its tokens after it too (beside the finished one of the same block).
  // A whole prompt that ends at a block boundary has no tokens after it: its name is one of its own, apart
  // from the finished sequence's of that block.
  kvcache::BlockHash TierSnapshotName(const kvcache::BlockHash& prefix, std::span<const int32_t> tail) const;
  kvcache::BlockHash TierBoundarySnapshotName(const kvcache::BlockHash& prefix) const;
  bool NeedsSnapshotRead(const Sequence* s) const;
  void StartSnapshotRead(Sequence* s);
  void IssueSnapshotRead(uint64_t ticket, const kvcache::BlockHash& name);
  void OnSnapshotRead(const TierEvent& e);
  // A sequence waits for a snapshot read at most lower_tier_timeout_s, as for the tier's blocks.
  void CheckSnapshotReadTimeouts(int64_t now);
  void OfferBlock(const Sequence* s, int64_t index, int32_t block);

  // The persistent tier (tier_loading.cpp).
  bool NeedsTierLookup(const Sequence* s) const;
  void StartTierLookup(Sequence* s);
  bool ContinueTierLoad(Sequence* s);  // false: waiting for pool blocks to read into
  bool TierMatchShrank(const Sequence* s) const;  // the RAM match it was checked at was evicted meanwhile
  // The sequence a tier load serves, if it still waits for that load (else nullptr).
  Sequence* WaitingSequenceFor(uint64_t ticket, const TierLoad& load) const;
  void IssueTierRead(uint64_t ticket, TierLoad& load);
  void OnTierEvent(const TierEvent& e);
  // Delivers a tier callback to the inbox if the engine still runs.
  static void DeliverTierEvent(const std::shared_ptr<TierMailbox>& box, const TierEvent& e);
  void CheckTierTimeouts(int64_t now);

  SchedulerConfig config_;
  const EngineOptions& options_ = config_.options;
  Inbox* inbox_;
  EngineMetrics* metrics_;
  OutputProcessor* output_;
  PrefixBlockBytes* bytes_;
  kvcache::LruBudget snapshot_budget_{config_.snapshot_budget_bytes};  // before snapshots_
  kvcache::BlockManager blocks_;
  bool can_restore_;
  bool can_fork_;
  CostModel cost_;
  StepShape decode_shape_;  // this step's decode tokens (the streams a prefill chunk would slow)
  // Per draft position: drafts that reached it (every earlier one accepted) and those accepted there.
  std::array<double, kMaxSpeculativeTokens> reached_at_{};
  std::array<double, kMaxSpeculativeTokens> accepted_at_{};
  // Scheduled verification: measured step costs per budget, the budget chosen for the next step (-1: none
  // yet), and what the step being executed is measured as (budget -1: not measured).
  VerifyBudgets budgets_{options_.speculative.num_speculative_tokens};
  int next_budget_ = -1;
  int measured_budget_ = -1;
  int64_t measured_decoders_ = 0, measured_positions_ = 0;
  int64_t schedule_started_nanos_ = 0;
  int64_t schedule_started_cpu_nanos_ = 0;

  std::unordered_map<RequestId, std::unique_ptr<Request>> requests_;
  std::vector<Sequence*> running_;  // best first
  std::set<Sequence*, SeqOrder> waiting_;
  // Requests whose grammar compiles, by constraint handle: in requests_ (so aborts and deadlines reach them)
  // but not scheduled.
  std::unordered_map<uint64_t, RequestId> compiling_;
  SeqId next_seq_id_ = 1;
  int64_t last_expire_nanos_ = 0;
  int64_t last_forward_end_ = 0;

  // The plan being executed, and what the next plan carries to the executor.
  std::vector<Work> current_;
  StepShape current_shape_;
  std::vector<ForkSetup> forks_;
  std::vector<BlockCopy> copies_;
  std::vector<SeqId> dropped_, finished_;
  std::vector<uint64_t> released_constraints_;
  // Sources of pending copies, referenced until the executor has copied them.
  std::vector<BlockCopy> copy_pins_;
  SnapshotCache snapshots_{&snapshot_budget_, config_.snapshot_bytes};
  std::vector<SnapshotTake> snapshot_takes_;  // for the next plan
  std::vector<BlockCopy> snapshot_pins_;      // their blocks (`from`), referenced until it ran
  // With a persistent tier: the snapshots being made, to offer them to the tier once made.
  struct SnapshotOffer {
    kvcache::BlockHash name, prefix;
    std::vector<int32_t> tail;
  };
  std::unordered_map<uint64_t, SnapshotOffer> snapshot_offers_;
  // Snapshot reads in flight: the sequence (request, output index) and the prefix asked for.
  struct SnapshotReadTicket {
    RequestId request = 0;
    int index = 0;
    kvcache::BlockHash prefix;
    int64_t start_nanos = 0;
    bool prompt_first = false;  // asking for the prompt's own snapshot; a finished sequence's next
  };
  std::unordered_map<uint64_t, SnapshotReadTicket> snapshot_reads_;

  std::unordered_map<uint64_t, TierLoad> tier_loads_;
  // Blocks a tier read just brought in, still referenced until the next Schedule's admission pass has run:
  // released into the LRU cache at once, a small pool's other allocations would evict them before the
  // sequence that asked for them could attach them.
  std::vector<int32_t> tier_held_;
  uint64_t next_tier_ticket_ = 1;
  std::shared_ptr<TierMailbox> tier_mailbox_ = std::make_shared<TierMailbox>();
};

}  // namespace deepinfer::engine
