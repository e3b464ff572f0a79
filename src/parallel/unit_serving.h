// A serving unit (`mpirun -n N deepinfer serve ... --data-parallel-size N`): rank 0 serves HTTP through a
// UnitFrontEngine, an engine::Engine that places each request on a rank (request_placement.h) and runs it
// there; the other ranks run a UnitRankWorker beside their engine. Requests, aborts, acceptances and
// updates ride on the ranks' step agreement (StepMailbox), so every message is bounded by the group's
// deadlines: a rank that stops answering ends the unit rather than leaving a client waiting forever.
//
// Threads. Rank 0's step thread hands messages over (StepMailbox); its updates from other ranks are passed
// to the callers' callbacks on a thread of the front engine's own, in the order they came, so that a slow
// callback never holds up the unit's steps. A rank's worker adds requests to its engine on its step thread.
#pragma once

#include <algorithm>

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/mutex.h"
#include "engine/engine.h"
#include "parallel/expert_group.h"
#include "parallel/request_placement.h"
#include "parallel/unit_messages.h"

namespace deepinfer::parallel {

// Counters per rank, as /metrics shows them.
struct RankServingCounters {
  RankLoad load;
  uint64_t finished = 0;           // requests that finished there
  uint64_t generation_tokens = 0;  // tokens they generated
  RankEngineFigures engine;        // the rank's engine, as last reported (rank 0's: when asked)
};

class UnitFrontEngine final : public engine::Engine, public StepMailbox {
 public:
  // `group` joins the unit's members; set_mailbox(this) is the caller's, before rank 0's engine starts.
  explicit UnitFrontEngine(ExpertGroup& group);
  ~UnitFrontEngine() override;
  // Rank 0's own engine (made with the group as its step group), once it has started, and its options'
  // tokens per step (every rank runs the same options).
  void Attach(std::unique_ptr<engine::Engine> local, int64_t max_num_batched_tokens);

  Result<engine::RequestId> AddRequest(std::vector<int32_t> prompt, engine::RequestParams params,
                                       engine::UpdateCallback callback) override;
  void Abort(engine::RequestId id) override;
  Result<std::vector<engine::GenerateOutput>> Generate(std::span<const std::vector<int32_t>> prompts,
                                                       const engine::RequestParams& params) override;
  // Rank 0's engine's (the unit's per-rank figures are in RankCounters).
  engine::EngineStats Stats() const override;
  const engine::EngineInfo& info() const override { return local_->info(); }
  // Refuses new requests, aborts those in flight on every rank and waits (at most `abort_wait_s`) for their
  // last updates, then tells the other ranks to stop and waits for them, then stops rank 0's engine.
  void Shutdown() override;

  std::vector<RankServingCounters> RankCounters() const;
  // The per-rank families in Prometheus text.
  std::string PrometheusText() const;

  // StepMailbox (rank 0's step thread).
  bool HasWork() override;
  void TakeOutgoing(std::vector<std::string>* to_member) override;
  Status Deliver(int from, std::string_view bytes) override;

  // How long AddRequest waits for another rank to accept a request (its answer rides on the agreement after
  // the one that took the request there: 3 step deadlines, ExpertGroup::StepDeadline), and Shutdown for the
  // last updates (4), each at least its floor.
  static constexpr double kAcceptFloorS = 5;
  static constexpr double kAbortWaitFloorS = 2;
  double AcceptTimeout() const { return std::max(kAcceptFloorS, 3 * group_.StepDeadline()); }
  double AbortWait() const { return std::max(kAbortWaitFloorS, 4 * group_.StepDeadline()); }
  // How often the other ranks report their engine's figures.
  static constexpr double kFiguresEveryS = 0.1;

 private:
  struct Placed {
    int rank = 0;
    engine::RequestId local_id = 0;  // rank 0's engine's id (rank 0 only)
    engine::UpdateCallback callback;  // empty once the caller was told AddRequest failed
    int64_t prompt_tokens = 0, generated = 0;
    bool first_update = false;
    bool answered = false;  // another rank accepted or refused it
    Status accepted;
  };
  // Books an update (loads, counters) and returns the callback to run, or an empty one.
  engine::UpdateCallback Book(engine::RequestUpdate* update);
  void DispatchLoop();

  ExpertGroup& group_;
  const int ranks_;
  std::unique_ptr<engine::Engine> local_;
  RankCapacity capacity_;

  mutable Mutex mu_;
  CondVar cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  uint64_t next_id_ GUARDED_BY(mu_) = 1;
  std::map<uint64_t, Placed> requests_ GUARDED_BY(mu_);
  std::vector<RankServingCounters> counters_ GUARDED_BY(mu_);
  std::vector<std::string> outbox_ GUARDED_BY(mu_);  // per rank
  int64_t remote_unfinished_ GUARDED_BY(mu_) = 0;    // on other ranks, their last update not received yet
  std::deque<engine::RequestUpdate> dispatch_ GUARDED_BY(mu_);
  bool dispatch_stop_ GUARDED_BY(mu_) = false;
  std::thread dispatcher_;
  std::once_flag shutdown_once_;
};

class UnitRankWorker final : public StepMailbox {
 public:
  // This rank's engine (made with the group as its step group), once it has started.
  void Attach(engine::Engine* engine);

  bool HasWork() override;
  void TakeOutgoing(std::vector<std::string>* to_member) override;
  Status Deliver(int from, std::string_view bytes) override;

 private:
  void Process(std::vector<UnitMessage> messages);

  Mutex mu_;
  engine::Engine* engine_ GUARDED_BY(mu_) = nullptr;
  std::chrono::steady_clock::time_point figures_sent_{};  // step thread only
  std::vector<UnitMessage> waiting_ GUARDED_BY(mu_);  // came before the engine was attached
  std::string outbox_ GUARDED_BY(mu_);                 // for rank 0
  std::map<uint64_t, engine::RequestId> local_ids_ GUARDED_BY(mu_);
  std::set<uint64_t> finished_early_ GUARDED_BY(mu_);  // finished before AddRequest returned
};

}  // namespace deepinfer::parallel
