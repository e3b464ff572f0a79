// Expert loads over a sliding window of steps, per MoE layer, for the load balancer (parallel/eplb.h) and
// for the balance figure on /metrics.
//
// The executor feeds it while a step runs: for each MoE layer, the experts its tokens were routed to (score-
// routed and hash-routed layers alike), or per-expert token counts; EndStep() then closes the step. The
// window holds the last `window_steps` closed steps, kept as `slots` partial sums of window_steps / slots
// steps each (memory: slots × layers × experts counts), so it slides by whole slots: it covers between
// window_steps − window_steps / slots + 1 and window_steps steps once that many have been recorded. With
// slots == window_steps it is exact.
//
// Thread-safe: one thread may record while others read the window or the balance.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/mutex.h"
#include "core/status.h"
#include "parallel/eplb.h"

namespace deepinfer::parallel {

class ExpertLoadRecorder {
 public:
  static constexpr int64_t kMaxWindowSteps = int64_t{1} << 20;
  static constexpr int64_t kMaxSlotValues = int64_t{1} << 26;  // slots × layers × experts

  // InvalidArgument unless layers and experts are within EplbLimits, window_steps in 1..kMaxWindowSteps and
  // slots a divisor of window_steps with slots × layers × experts at most kMaxSlotValues.
  static Result<std::unique_ptr<ExpertLoadRecorder>> Create(int64_t layers, int64_t experts, int64_t window_steps,
                                                            int64_t slots);

  // One layer's routing in the current step: every entry an expert one token was sent to (a token's top-k
  // ids one after another). Ids outside [0, experts) are refused and nothing is recorded.
  Status RecordRouting(int64_t layer, std::span<const int32_t> expert_ids) EXCLUDES(mu_);
  // One layer's tokens per expert in the current step (experts entries, each non-negative).
  Status RecordCounts(int64_t layer, std::span<const int64_t> tokens_per_expert) EXCLUDES(mu_);
  // Closes the current step: it becomes the last step and enters the window.
  void EndStep() EXCLUDES(mu_);

  // The window's loads, [layers][experts]: what RebalanceExperts takes.
  ExpertLoads WindowLoads() const EXCLUDES(mu_);
  // The last closed step's loads.
  ExpertLoads LastStepLoads() const EXCLUDES(mu_);
  // Closed steps in the window now, and in all.
  int64_t window_steps_recorded() const EXCLUDES(mu_);
  int64_t steps() const EXCLUDES(mu_);

  // max/mean of the ranks' loads per layer under `placement` (same layers and experts), for the last step
  // and over the window. InvalidArgument when the placement's shape differs.
  Result<std::vector<double>> LastStepBalance(const ExpertPlacement& placement) const EXCLUDES(mu_);
  Result<std::vector<double>> WindowBalance(const ExpertPlacement& placement) const EXCLUDES(mu_);

  // The last closed step as one line of a routing trace ({"loads": [[...], ...]}, no newline): what
  // `deepinfer eplb --weights-file` and `deepinfer bench ep --simulate --trace` read.
  std::string LastStepTraceLine() const EXCLUDES(mu_);

  int64_t layers() const { return layers_; }
  int64_t experts() const { return experts_; }

 private:
  ExpertLoadRecorder(int64_t layers, int64_t experts, int64_t window_steps, int64_t slots);
  Status CheckLayer(int64_t layer) const;
  Result<std::vector<double>> Balance(const ExpertPlacement& placement, const std::vector<int64_t>& counts) const;

  const int64_t layers_, experts_, steps_per_slot_, slots_;
  mutable Mutex mu_;
  std::vector<int64_t> current_ GUARDED_BY(mu_);  // the step being recorded
  std::vector<int64_t> last_ GUARDED_BY(mu_);     // the last closed step
  std::vector<int64_t> ring_ GUARDED_BY(mu_);     // [slots][layers][experts]
  std::vector<int64_t> window_ GUARDED_BY(mu_);   // the sum of the ring
  std::vector<int64_t> slot_steps_ GUARDED_BY(mu_);  // closed steps in each slot
  int64_t slot_ GUARDED_BY(mu_) = 0;                 // the slot that closed steps go to
  int64_t window_steps_ GUARDED_BY(mu_) = 0;
  int64_t steps_ GUARDED_BY(mu_) = 0;
};

}  // namespace deepinfer::parallel
