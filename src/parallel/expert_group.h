// One parallel unit's members as the engine and the model see them: the model's expert exchange
// (model/common/expert_parallel.h) and the engine's lock step (engine::StepGroup) over a Communicator, each
// collective with a deadline. A collective that misses its deadline ends the unit: this member prints
// which rank it waited for and aborts every member (the others would otherwise wait for it forever).
//
// Deadlines follow the steps. Each member tells the others at every agreement how long its engine's
// calibrated step-cost model predicts its next step (engine::StepGroup::NotePredictedStep); an exchange inside
// a forward pass waits at most for the slowest member's share of one layer, so it gets max(floor, 4 × the
// longer of the longest predicted step of the unit and the last step it took); the agreement before a step
// also covers the pause of an idle member. A long prefill is predicted long, so its deadline grows before
// it runs, and shrinks again after it.
//
// Idle. When no member has work, every member pauses before the next agreement, 1 ms at first, doubling
// up to 50 ms while the unit stays idle: a request waits at most that long for the others to wake, and an
// idle unit makes at most 20 small collectives a second.
//
// Threads. While an engine runs, only its step thread calls AllToAllV and AnyMemberHasWork; CheckSameModel
// and GatherToRoot run on the main thread before the engine starts and after every member has finished.
#pragma once

#include <atomic>
#include <memory>
#include <chrono>
#include <thread>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/hash.h"
#include "core/mutex.h"
#include "core/status.h"
#include "engine/engine.h"
#include "model/common/expert_parallel.h"
#include "parallel/communicator.h"
#include "parallel/expert_load_recorder.h"
#include "parallel/live_placement.h"

namespace deepinfer::parallel {

struct GroupTimeouts {
  double exchange_floor_s = 1.0;  // the least an exchange waits
  double idle_pause_max_s = 0.05;  // idle members agree again after a pause that doubles up to this
  double startup_s = 300.0;        // the first collective: members finish loading at different times
};

// Messages that ride on the step agreement: a serving unit's requests, going out from rank 0, and their
// answers and updates coming back. Called on the step thread only, at each agreement.
class StepMailbox {
 public:
  virtual ~StepMailbox() = default;
  // Whether this member has messages to send or waits for answers: it counts as work, so the unit steps.
  virtual bool HasWork() = 0;
  // The bytes for each member (`to_member` has size() empty entries; this member's own is not sent).
  virtual void TakeOutgoing(std::vector<std::string>* to_member) = 0;
  // What member `from` sent at this agreement (only called for non-empty bytes). An error (malformed
  // bytes) ends the unit.
  virtual Status Deliver(int from, std::string_view bytes) = 0;
};

class ExpertGroup final : public model::ExpertExchange, public engine::StepGroup {
 public:
  ExpertGroup(Communicator& communicator, GroupTimeouts timeouts = {});
  ~ExpertGroup() override;

  int rank() const override { return communicator_.rank(); }
  int size() const override { return communicator_.size(); }
  // What carries the collectives ("MPI", "shared memory").
  const char* transport() const { return communicator_.transport(); }
  void AllToAllV(const uint8_t* send, std::span<const int64_t> send_bytes, uint8_t* recv,
                 std::span<const int64_t> recv_bytes) override;
  void AllToAllVWithIdleWork(const uint8_t* send, std::span<const int64_t> send_bytes, uint8_t* recv,
                             std::span<const int64_t> recv_bytes, std::function<void()>* idle_work) override;
  void AllToAllVSized(const uint8_t* send, std::span<const int64_t> send_bytes,
                      const std::function<uint8_t*(int64_t)>& receive_into, std::span<int64_t> recv_bytes,
                      int64_t max_part_bytes, std::function<void()>* idle_work) override;
  bool AnyMemberHasWork(bool has_work) override;
  void NotePredictedStep(double seconds) override { predicted_step_s_ = seconds; }
  // The deadline of an exchange in the next forward pass (seconds; step thread).
  double ExchangeTimeout() const;
  // The step agreement's deadline as of the last agreement (any thread): what waits that span a few steps
  // scale with.
  double StepDeadline() const { return step_deadline_s_.load(std::memory_order_relaxed); }
  // With record_loads on: this member's routed rows per layer and step go to an ExpertLoadRecorder (made at
  // the end of the first forward pass, when the routed layers are counted), a step closing at each agreement.
  void NoteRouting(int64_t experts, std::span<const int32_t> expert_ids) override;
  // The live placement's ranks for this member's pairs (the static shard until the first rebalance); counts
  // the pairs each rank computes per layer for the balance figures.
  void PlaceRoutedPairs(int64_t experts, std::span<const int32_t> expert_ids, std::span<int32_t> members,
                        std::vector<uint8_t>* computes) override;
  int64_t redundant_experts() const override { return eplb_.enabled ? eplb_.redundant_experts : 0; }
  void SetExpertWeightPages(std::shared_ptr<const model::ExpertWeightPages> pages) override { pages_ = std::move(pages); }
  // Before the engine starts: the load balancer (off by default; redundant experts turn it on).
  void set_eplb(const EplbOptions& options) {
    eplb_ = options;
    eplb_.enabled |= options.redundant_experts > 0;
  }
  // Placements swapped in so far (every member swaps at the same step), and those computed but not swapped
  // in because they would not have beaten the one in use over the window by EplbOptions::min_improvement
  // (every member decides the same: all hold the same loads).
  int64_t rebalances() const { return rebalances_.load(); }
  int64_t skipped_rebalances() const { return skipped_rebalances_.load(); }
  // Since the first swap (or the start): the routed pairs this member sent to each rank's experts, per layer
  // ([layers][ranks]), and this member's routed pairs per expert ([layers][experts]): summed over the
  // members, what the balancer's placements did against what the static shard would have done over the
  // same steps.
  struct SinceSwap {
    int64_t layers = 0, experts = 0, ranks = 0;
    std::vector<int64_t> rank_rows, expert_rows;
  };
  SinceSwap since_swap() const;  void set_record_loads(bool on) { record_loads_ = on; }
  // Before the engine starts: the mailbox whose messages each agreement carries (not owned; null: none).
  void set_mailbox(StepMailbox* mailbox) { mailbox_ = mailbox; }
  // The loads recorded over the last 65,536 steps (empty without record_loads or before a step ended).
  ExpertLoads RecordedLoads() const;

  // Before the engines start: every member checks that all run the same build (ExecutableBuildId) on the
  // same checkpoint (`fingerprint`: the weights fingerprint, config.json included) with the same `settings`
  // (flags that must agree), within the start-up deadline; the error names the first member that differs
  // from rank 0.
  Status CheckSameModel(const Hash128& fingerprint, const std::string& settings);
  // This member has no more requests of its own; returns once every member has said so and none has work
  // left. Until then the engine's step thread keeps joining the others' steps.
  void FinishAndWait();
  // Every member's `mine` on rank 0 (in rank order; empty elsewhere), waiting at most timeout_s for the
  // others to call it too. Under lock step, after FinishAndWait.
  Result<std::vector<std::string>> GatherToRoot(const std::string& mine, double timeout_s);

  // Figures for the unit's report: exchanges made, bytes sent to other members, seconds spent in exchanges,
  // and with measure_memcpy on, the seconds a memcpy of each exchange's bytes (sent and received) took on
  // this member right after it: the exchange's cost as a ratio on the same machine at the same moment.
  //
  // Steps: the steps that had work (from one agreement to the next), and within them the seconds spent in the
  // step agreement (the synchronisation outside the expert exchange) and in exchanges. The run's fastest
  // agreement and fastest exchange (among those moving bytes between members) stand for one where no member
  // waited for another: the time beyond them bounds from above the time this member waited at those barriers.
  struct Counters {
    int64_t exchanges = 0, remote_bytes = 0;
    double exchange_seconds = 0, memcpy_seconds = 0, fastest_exchange_seconds = 0;
    int64_t steps = 0, step_exchanges = 0;  // (the exchanges within those steps)
    double step_seconds = 0, agreement_seconds = 0, fastest_agreement_seconds = 0, step_exchange_seconds = 0;
  };
  Counters counters() const;
  // Where waiting happens within a forward pass: per routed layer, the two exchanges of its dispatch
  // (kinds: the pairs with their counts, which wait for the slowest member's attention; the outputs, which
  // wait for the slowest member's experts), each kind's count, total and fastest seconds within steps with
  // work; and the idle work (the shared expert) run inside waits. The seconds exclude the idle work.
  static constexpr int kExchangeKinds = 2;
  struct LayerExchange {
    int64_t count = 0;
    double seconds = 0, fastest_seconds = 0;
  };
  struct WaitBreakdown {
    std::vector<LayerExchange> exchanges;  // [layers][kExchangeKinds]
    int64_t idle_works = 0;
    double idle_work_seconds = 0;
  };
  WaitBreakdown wait_breakdown() const;
  void set_measure_memcpy(bool on) { measure_memcpy_ = on; }

  // With a mailbox and expert parallelism, each agreement also carries the routed (row, expert) pairs each
  // member's rows sent to each member's experts in the step before it, so that every member knows the
  // unit's expert load per rank: in total, in the last step that routed rows, and over the last
  // kBalanceWindowSteps such steps. Balance is max/mean over the ranks (1: even; N: one rank does it all).
  //
  // Balance is taken per MoE layer and step: max/mean over the ranks of the pairs they computed in that
  // layer in that step; the figures are its value in the last routed step, and its mean over the last
  // kBalanceWindowSteps routed steps and since start, per layer.
  static constexpr int kBalanceWindowSteps = 64;
  struct ExpertRows {
    std::vector<int64_t> total;  // per rank, since start
    std::vector<double> last_step_balance, window_balance, total_balance;  // per layer; empty before a routed step
    int64_t routed_steps = 0;
  };
  ExpertRows expert_rows() const;

 private:
  // The model's exchanges, timed: `collective` runs the communicator's with the deadline and the idle work
  // (may be null) it is given; then send_bytes went out of `send` and recv_bytes came into `*recv`.
  using Collective = std::function<Status(double timeout_s, std::function<void()>* idle_work)>;
  void Exchange(const Collective& collective, const uint8_t* send, std::span<const int64_t> send_bytes,
                const uint8_t* const* recv, std::span<const int64_t> recv_bytes, std::function<void()>* idle_work);
  // Prints "deepinfer: rank R: <what>: <status>" and ends every member.
  [[noreturn]] void Fail(const std::string& what, const Status& status);
  // An all-gather of a fixed-size record through the all-to-all.
  Status AllGather(const std::vector<uint8_t>& mine, double timeout_s, std::vector<uint8_t>* all);

  Communicator& communicator_;
  GroupTimeouts timeouts_;
  // Step thread only.
  std::chrono::steady_clock::time_point last_work_step_{};
  double last_step_s_ = 0;       // the last step with work, agreement to agreement
  double predicted_step_s_ = 0;  // this member's engine's prediction for its next step
  double unit_predicted_s_ = 0;  // the longest of the members' predictions at the last agreement
  std::atomic<double> step_deadline_s_{0};
  double idle_pause_s_ = 0;
  bool finished_ = false;
  bool agreed_once_ = false;  // the first agreement waits for the slowest member's engine start-up
  StepMailbox* mailbox_ = nullptr;
  bool record_loads_ = false;
  // This member's routed pairs by layer and the rank computing them, this step ([agreement_layers_][ranks]).
  std::vector<int64_t> step_rows_;
  int64_t agreement_layers_ = 0;  // routed layers per forward pass, once the first one has run
  void NoteUnitRows(const std::vector<int64_t>& unit_step_rows);
  // The load balancer (step thread): its window of this member's loads, the steps with work, the placement
  // in use (null: the static shard) and the one being read in by reader_ (ready once its pages are in).
  EplbOptions eplb_;
  std::shared_ptr<const model::ExpertWeightPages> pages_;
  std::unique_ptr<ExpertLoadRecorder> eplb_recorder_;
  int64_t work_steps_ = 0;
  std::unique_ptr<ExpertPlacement> live_, pending_;
  std::thread reader_;
  std::atomic<bool> pending_ready_{false};
  std::atomic<int64_t> rebalances_{0}, skipped_rebalances_{0};
  void StartRebalance(double timeout_s);
  // Which experts this member computes in `layer` under `placement` (null: the static shard).
  std::vector<uint8_t> ExpertsComputedHere(const ExpertPlacement* placement, int64_t layer, int64_t experts) const;
  void SwapPlacement();
  mutable Mutex since_mu_;
  SinceSwap since_ GUARDED_BY(since_mu_);
  std::unique_ptr<ExpertLoadRecorder> recorder_;
  std::vector<std::vector<int32_t>> first_step_;  // the routing of the first forward pass, by layer
  int64_t experts_ = 0;
  int64_t routed_layer_ = 0;  // the next NoteRouting's layer in this step
  std::atomic<int64_t> exchanges_{0}, remote_bytes_{0}, exchange_nanos_{0}, memcpy_nanos_{0};
  std::atomic<int64_t> fastest_exchange_nanos_{0};
  std::atomic<int64_t> steps_{0}, step_nanos_{0}, agreement_nanos_{0}, fastest_agreement_nanos_{0};
  std::atomic<int64_t> step_exchanges_{0}, step_exchange_nanos_{0};
  int exchange_in_layer_ = 0;  // the next exchange's kind in the routed layer (step thread)
  mutable Mutex breakdown_mu_;
  WaitBreakdown breakdown_ GUARDED_BY(breakdown_mu_);
  std::chrono::steady_clock::time_point work_cycle_start_{};  // the agreement that began a step with work
  bool measure_memcpy_ = false;
  std::vector<uint8_t> memcpy_scratch_;

  std::atomic<bool> local_done_{false};
  Mutex mu_;
  CondVar cv_;
  bool all_done_ GUARDED_BY(mu_) = false;
  mutable Mutex rows_mu_;
  ExpertRows rows_ GUARDED_BY(rows_mu_);
  std::vector<std::vector<double>> window_ GUARDED_BY(rows_mu_);  // the last routed steps' balance per layer
  std::vector<double> window_sum_ GUARDED_BY(rows_mu_), total_sum_ GUARDED_BY(rows_mu_);
};

}  // namespace deepinfer::parallel
