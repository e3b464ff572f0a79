// The engine's internals: requests and sequences on the step thread, the output thread's per-request
// state, and the step loop. Only engine.cpp's Create sees EngineImpl; everything here is private to
// src/engine.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/cost_model.h"
#include "engine/engine.h"
#include "engine/metrics.h"
#include "kvcache/block_manager.h"
#include "kvcache/lower_tier.h"
#include "model/causal_lm.h"
#include "sampling/constraint_masks.h"
#include "sampling/sampler.h"
#include "sampling/stop_strings.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::engine {

// ---- Output thread side -------------------------------------------------------------------------------

struct OutputSequence {
  std::unique_ptr<tokenizer::StreamingDetokenizer> detokenizer;
  std::unique_ptr<sampling::StopStringMatcher> stops;
  bool finished = false;
};

struct OutputRequest {
  RequestId id = 0;
  UpdateCallback callback;
  bool text = false;  // detokenize with a tokenizer
  int64_t prompt_tokens = 0;
  int64_t hit_tokens = 0;
  uint64_t seed = 0;
  std::vector<OutputSequence> seqs;
  int finished = 0;
  bool done = false;
};

// What the step thread reports for one output of a request.
struct SeqEvent {
  int index = 0;
  std::vector<sampling::SampledToken> tokens;
  std::optional<FinishReason> finish;
  int32_t stop_token = -1;
};

struct OutputEvent {
  std::shared_ptr<OutputRequest> request;
  int64_t hit_tokens = 0;
  std::vector<SeqEvent> seqs;
  Status status;
  int64_t posted_nanos = 0;  // when Post() queued it
};

// ---- Step thread side ---------------------------------------------------------------------------------

struct Request;

struct Sequence {
  Request* request = nullptr;
  int index = 0;
  bool born = false;     // n > 1: outputs other than 0 are born when the prompt's first token is sampled
  bool running = false;  // in running_ (else waiting, unborn or finished)
  bool finished = false;
  std::unique_ptr<model::SequenceState> state;
  kvcache::SequenceBlocks blocks;
  std::vector<int32_t> tokens;  // prompt, then every generated token (the last one not yet computed)
  int64_t computed = 0;         // positions in the model state
  int64_t replay_end = 0;       // state-only (replay) chunks run up to this position
  int64_t generated = 0;
  int64_t last_token_nanos = 0;
  sampling::TokenCounts counts;
  bool use_counts = false;
  std::unique_ptr<sampling::LogitsMask> mask;
  sampling::TokenBitmask allowed;
  bool mask_filled = false;
  bool all_allowed = false;
  Status mask_status;
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

  int64_t pending() const { return static_cast<int64_t>(tokens.size()) - computed; }
  bool replaying() const { return computed < replay_end; }
};

struct Request {
  RequestId id = 0;
  int64_t order = 0;  // arrival sequence number
  int64_t arrival_nanos = 0;
  int64_t admitted_nanos = 0;
  int64_t prompt_tokens = 0;
  RequestParams params;
  uint64_t seed = 0;
  kvcache::BlockHash root;
  std::shared_ptr<OutputRequest> out;
  int64_t hit_tokens = -1;  // decided at the first admission
  bool forked = false;      // outputs 1..n-1 born
  bool first_token_seen = false;
  int live = 0;             // outputs not finished
  bool fresh = true;        // never admitted (counts against max_waiting)
  // Its constraint until the outputs' masks are made; a grammar still compiling keeps it out of waiting_.
  std::shared_ptr<sampling::PreparedConstraint> constraint;
  std::vector<std::unique_ptr<Sequence>> seqs;
};

// A lookup or read of the persistent tier that finished (posted by the tier's thread to the inbox).
struct TierEvent {
  uint64_t ticket = 0;
  bool read = false;  // else a lookup
  size_t leading = 0;  // blocks present (lookup) or verified and filled (read)
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

// Where the tier's callbacks deliver: the engine while it runs, nothing after Shutdown (a hung lookup that
// answers late must not touch an engine that is gone). Reads are different: they fill pool blocks, so
// Shutdown waits for them.
class EngineImpl;
struct TierMailbox {
  std::mutex mu;
  EngineImpl* engine = nullptr;
  bool closed = false;
};

struct SeqOrder {
  bool operator()(const Sequence* a, const Sequence* b) const;
};

struct PlannedChunk {
  Sequence* seq = nullptr;
  int64_t start = 0, end = 0;
  bool state_only = false;
  bool logits = false;
};

class EngineImpl final : public Engine {
 public:
  EngineImpl(std::unique_ptr<model::CausalLM> model, EngineOptions options);
  ~EngineImpl() override;
  Status Init();

  Result<RequestId> AddRequest(std::vector<int32_t> prompt, RequestParams params, UpdateCallback callback) override;
  void Abort(RequestId id) override;
  Result<std::vector<GenerateOutput>> Generate(std::span<const std::vector<int32_t>> prompts,
                                               const RequestParams& params) override;
  EngineStats Stats() const override;
  const EngineInfo& info() const override { return info_; }
  void Shutdown() override;

 private:
  // Step thread.
  void StepLoop();
  bool DrainInbox(bool wait);
  // Into waiting_ once its constraint is ready (its masks made), or into compiling_ until then; a
  // constraint that failed to compile finishes the request with kError.
  void QueueWhenMasksReady(Request* r);
  void CheckDeadlines(int64_t now);
  void Schedule(std::vector<PlannedChunk>* plan);
  int64_t Admit(Sequence* s, int64_t budget, const StepShape& shape);
  // The persistent tier (tier_loading.cpp).
  bool NeedsTierLookup(const Sequence* s) const;
  void StartTierLookup(Sequence* s);
  bool ContinueTierLoad(Sequence* s);  // false: waiting for pool blocks to read into
  bool TierMatchShrank(const Sequence* s) const;  // the RAM match it was checked at was evicted meanwhile
  // The sequence a tier load serves, if it still waits for that load (else nullptr).
  Sequence* WaitingSequenceFor(uint64_t ticket, const TierLoad& load) const;
  void IssueTierRead(uint64_t ticket, TierLoad& load);
  void OnTierEvent(const TierEvent& e);
  void PostTierEvent(const TierEvent& e);
  // Delivers a tier callback to the engine if it still runs.
  static void DeliverTierEvent(const std::shared_ptr<TierMailbox>& box, const TierEvent& e);
  void WaitForTier();
  void CheckTierTimeouts(int64_t now);
  int64_t ChunkFor(const Sequence* s, int64_t budget, const StepShape& shape) const;
  Sequence* PickVictim(const Sequence* better_than) const;
  void Preempt(Sequence* s, std::vector<PlannedChunk>* plan);
  void Execute(std::vector<PlannedChunk>& plan);
  void MirrorTables(Sequence* s);
  void SampleAndAdvance(std::vector<PlannedChunk>& plan, const model::ForwardOutput& out);
  void BirthChildren(Sequence* parent);
  void FinishSequence(Sequence* s, FinishReason reason, int32_t stop_token, OutputEvent* event);
  void FinishRequest(Request* r, FinishReason reason, const Status& status);
  void FailPlan(std::vector<PlannedChunk>& plan, const Status& status);
  void ReleaseSequence(Sequence* s);
  void ReleaseTierHeld();  // tier_held_ back to the cache
  // Queues a batch of events for the output thread (one lock, one wake-up) and empties `events`.
  void Post(std::vector<OutputEvent>& events);
  void FillMasks(const std::vector<PlannedChunk>& plan);
  OutputEvent& EventFor(Request* r, std::vector<OutputEvent>* events);
  void Calibrate();
  void CheckStep(const std::vector<PlannedChunk>& plan);

  // Output threads.
  struct OutputShard;
  void OutputLoop(OutputShard* shard);
  void Deliver(OutputEvent& event);

  std::unique_ptr<model::CausalLM> model_;
  EngineOptions options_;
  EngineInfo info_;
  model::KvCacheSpec spec_;
  model::KvPools pools_;
  std::unique_ptr<kvcache::BlockManager> blocks_;
  std::vector<int32_t> eos_;
  bool can_restore_ = true;  // the model implements RestoreAt (else no prefix hits)
  bool can_fork_ = true;     // the model implements Fork (else n > 1 outputs recompute the prompt)
  int64_t cone_positions_ = 0;  // exact replay's dependency cone
  CostModel cost_;
  std::unordered_map<uint64_t, TierLoad> tier_loads_;  // step thread
  // Blocks a tier read just brought in, still referenced until the next Schedule's admission pass has run:
  // released into the LRU cache at once, a small pool's other allocations would evict them before the
  // sequence that asked for them could attach them. Step thread.
  std::vector<int32_t> tier_held_;
  uint64_t next_tier_ticket_ = 1;

  // Step-thread state.
  std::unordered_map<RequestId, std::unique_ptr<Request>> requests_;
  std::vector<Sequence*> running_;  // best first
  std::set<Sequence*, SeqOrder> waiting_;
  std::vector<RequestId> compiling_;  // requests whose grammar compiles (not scheduled yet)
  int64_t last_expire_nanos_ = 0;
  int64_t last_forward_end_ = 0;
  model::ForwardOutput forward_out_;
  std::vector<model::SequenceChunk> chunks_;

  // Inbox (any thread → step thread).
  mutable std::mutex inbox_mutex_;
  std::condition_variable inbox_cv_;
  std::vector<std::unique_ptr<Request>> new_requests_;
  std::vector<RequestId> aborts_;
  std::vector<std::pair<RequestId, int>> output_stops_;  // outputs the output thread finished (stop string)
  std::vector<TierEvent> tier_events_;
  bool constraints_compiled_ = false;  // a grammar of compiling_ finished compiling
  int64_t tier_reads_outstanding_ = 0;  // tier reads whose callback has not run yet
  std::condition_variable tier_cv_;
  std::shared_ptr<TierMailbox> tier_mailbox_ = std::make_shared<TierMailbox>();
  int64_t waiting_fresh_ = 0;  // fresh requests queued or not yet admitted
  bool stopping_ = false;
  RequestId next_id_ = 1;
  int64_t next_order_ = 0;
  uint64_t seed_state_ = 0;

  // Output queues (step thread → output threads). A request's events always go to the same shard
  // (its id modulo the shard count), so its updates stay in order while different requests' updates of
  // one step are delivered in parallel.
  struct OutputShard {
    std::mutex mutex;
    std::condition_variable cv;
    std::deque<OutputEvent> queue;
    bool stop = false;
    std::thread thread;
  };
  std::vector<std::unique_ptr<OutputShard>> out_shards_;
  std::vector<std::vector<OutputEvent>> out_sorted_;  // Post's per-shard scratch (step thread)

  // Metrics.
  mutable std::mutex stats_mutex_;
  EngineStats counters_;  // the counter fields; gauges are filled by Stats()
  int64_t gauge_running_ = 0, gauge_waiting_ = 0;
  kvcache::BlockManager::Need gauge_blocks_used_, gauge_blocks_cached_, gauge_blocks_free_;
  FixedHistogram ttft_{FirstTokenBuckets()}, itl_{InterTokenBuckets()}, queue_{RequestBuckets()},
      e2e_{RequestBuckets()}, gap_{GapBuckets()};

  std::thread step_thread_;
  std::once_flag shutdown_once_;
  // Last, so destroyed first: its compile threads call into the inbox above until they are joined.
  std::unique_ptr<sampling::ConstraintMasks> constraint_masks_;
};

}  // namespace deepinfer::engine
