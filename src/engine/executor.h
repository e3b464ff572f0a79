// The executor: runs the scheduler's StepPlans on a model and answers with StepResults (step_plan.h).
// It owns everything the model computes with — the model, its KV block pools, each sequence's model
// state, logits masks, the sampler and penalty counts, and the drafter slot — so that an executor spread
// over several processes can replace LocalExecutor without the scheduler changing.
//
// Threads. Execute runs on the engine's step thread, one call at a time. PrepareConstraints and
// DropConstraints may be called from any thread (AddRequest's caller).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/mutex.h"
#include "engine/drafter.h"
#include "engine/engine.h"
#include "engine/step_plan.h"
#include "model/causal_lm.h"
#include "sampling/constraint_masks.h"
#include "sampling/logits_mask.h"
#include "sampling/sampler.h"

namespace deepinfer::engine {

class Executor : public PrefixBlockBytes {
 public:
  ~Executor() override = default;
  // Starts making a request's logits masks (one per output) and keeps them under the ticket's handle (0:
  // the request has none) until its outputs' SamplingSetups name it. Scripted tokens are ready at once; a
  // grammar compiles on the executor's compile threads (never the caller's or the step thread), after which
  // `on_ready(handle, status)` runs on a compile thread, once (it must not block): status is the compile's
  // error, or ok with the masks kept. It never runs inside this call, so the caller may hold a lock that
  // on_ready takes. Errors here (a grammar beside a script, a grammar without a
  // vocabulary) keep nothing.
  struct ConstraintTicket {
    uint64_t handle = 0;
    bool ready = true;  // else on_ready follows
  };
  using ConstraintReady = std::function<void(uint64_t handle, Status status)>;
  virtual Result<ConstraintTicket> PrepareConstraints(const RequestParams& params, int n, ConstraintReady on_ready) = 0;
  // Forgets prepared masks no SamplingSetup took (a request refused after PrepareConstraints).
  virtual void DropConstraints(uint64_t handle) = 0;
  // Runs one step.
  virtual StepResult Execute(const StepPlan& plan) = 0;
  // Stops the compile threads (a compile under way finishes and reports); no on_ready runs after it returns.
  virtual void StopCompiling() = 0;
};

// Fills the logits masks of a step on one persistent thread while the forward pass runs.
class MaskFiller {
 public:
  MaskFiller();
  ~MaskFiller();
  // Runs `job` on the helper thread; Wait returns when it has finished.
  void Start(std::function<void()> job);
  void Wait();

 private:
  void Loop();
  Mutex mu_;
  CondVar cv_;
  std::function<void()> job_ GUARDED_BY(mu_);
  bool busy_ GUARDED_BY(mu_) = false;
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// The executor of this process: one model on its own thread pool.
class LocalExecutor final : public Executor {
 public:
  // `compiler` compiles requests' grammars (null: grammars are refused). `drafter` (null: none) proposes
  // up to `draft_tokens` tokens for every output that goes on decoding; `rejection_sampling`: sampled
  // outputs verify them by rejection sampling (SpeculativeConfig::rejection_sampling).
  LocalExecutor(std::unique_ptr<model::CausalLM> model, kvcache::KvPools pools,
                std::shared_ptr<sampling::ConstraintCompiler> compiler, std::unique_ptr<Drafter> drafter = nullptr,
                int draft_tokens = 0, bool rejection_sampling = false);
  ~LocalExecutor() override;

  Result<ConstraintTicket> PrepareConstraints(const RequestParams& params, int n, ConstraintReady on_ready) override;
  void DropConstraints(uint64_t handle) override;
  StepResult Execute(const StepPlan& plan) override;
  void StopCompiling() override;
  std::vector<std::span<uint8_t>> PrefixBlock(int32_t block) override;

  kvcache::KvPools& pools() { return pools_; }
  // Every Execute runs the model's forward pass, over no chunks when it has none (a StepGroup member).
  void set_forward_every_step(bool on) { forward_every_step_ = on; }

 private:
  // An output's state here: its model state (absent while preempted) and its sampling state.
  struct Slot {
    std::unique_ptr<model::SequenceState> state;
    SamplingSetup sampling;
    bool has_sampling = false;
    int64_t generated = 0;
    sampling::TokenCounts counts;
    std::unique_ptr<sampling::LogitsMask> mask;
    sampling::TokenBitmask allowed;
    bool mask_filled = false;
    bool all_allowed = false;
    Status mask_status;
    // With a drafter: the prompt and every accepted token.
    std::vector<int32_t> history;
    int64_t prompt_tokens = 0;
  };
  struct Row;

  void MirrorTables(const PlannedChunk& c, model::SequenceState* state);
  Status Setup(const PlannedChunk& c, Slot& slot);
  // Token-exact continuation: a finished sequence's snapshot, and a new state made from one.
  // rewind: of a copy of the state taken back one position (a prompt's snapshot).
  Result<std::shared_ptr<const SequenceSnapshot>> TakeSnapshot(const SnapshotTake& take, bool rewind);
  Status ResumeFromSnapshot(const PlannedChunk& c, model::SequenceState* state);
  // Bytes of one block in every group of a class (prefix or window), in spec order.
  int64_t ClassBlockBytes(bool window) const;
  void FillMasks(const std::vector<Row>& rows);
  // The prompt logprobs of a chunk that asked (every row's logits were computed), from forward_out_.
  PromptLogprobsResult PromptLogprobs(const PlannedChunk& c, size_t chunk) const;
  // Samples the first position of every row, in parallel.
  void Sample(std::vector<Row>& rows);
  void SampleOne(Row& row, sampling::Sampler& sampler);
  // The sampled token becomes the output's: penalty counts, the mask's state, the ending and terminated flags.
  void Accept(Row& row);
  // Whether a verify row goes on to its next position (its last token equals the draft's).
  bool Continues(const Row& row) const;
  // The positions after the first of verify rows, while their tokens equal the draft.
  void Verify(std::vector<Row>& rows, const std::vector<size_t>& continuing);
  void ContinueVerify(Row& row, sampling::Sampler& sampler);
  void Propose(std::vector<Row>& rows, std::vector<SequenceResult>* results);
  DraftInput DraftInputFor(SeqId id, const Slot& slot) const;
  int64_t DraftRoom(const model::SequenceState& state) const;
  // Takes output `index`'s mask of a prepared request (null: none).
  std::unique_ptr<sampling::LogitsMask> TakeMask(uint64_t handle, int index);
  // A compile thread's end of PrepareConstraints: the masks of `handle` made, or the compile's error.
  Status MakePreparedMasks(uint64_t handle);

  // A request's masks: made from `prepared` once it is ready (at once for a script).
  struct PreparedMasks {
    int n = 0;
    std::shared_ptr<sampling::PreparedConstraint> prepared;
    std::vector<std::unique_ptr<sampling::LogitsMask>> masks;
  };

  std::unique_ptr<model::CausalLM> model_;
  kvcache::KvCacheSpec spec_;
  kvcache::KvPools pools_;
  int64_t vocab_size_ = 0;
  std::unordered_map<SeqId, Slot> slots_;  // step thread
  model::ForwardOutput forward_out_;
  std::vector<model::SequenceChunk> chunks_;
  MaskFiller mask_filler_;
  std::unique_ptr<Drafter> drafter_;  // speculative decoding; null: off
  int draft_tokens_ = 0;
  bool rejection_sampling_ = false;
  bool forward_every_step_ = false;

  Mutex constraints_mu_;
  uint64_t next_constraint_ GUARDED_BY(constraints_mu_) = 1;
  std::unordered_map<uint64_t, PreparedMasks> constraints_ GUARDED_BY(constraints_mu_);
  // Null once StopCompiling ran. Its compile threads call into constraints_, so it goes first.
  std::unique_ptr<sampling::ConstraintMasks> constraint_masks_ GUARDED_BY(constraints_mu_);
};

}  // namespace deepinfer::engine
