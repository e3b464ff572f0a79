// The engine as the three parts it is made of, with plain data between them: each step the Scheduler
// plans (StepPlan), the Executor runs the plan on the model (StepResult), the Scheduler applies the result
// and hands events to the OutputProcessor. Only engine.cpp's Create sees EngineImpl; everything here is
// private to src/engine.
//
// Threads. The step thread runs the loop (StepLoop) and owns the scheduler and the executor's step state;
// AddRequest, Abort, Stats and Generate come from any thread and meet it in the Inbox and EngineMetrics;
// the OutputProcessor's threads deliver updates.
#pragma once

#include <memory>
#include <mutex>
#include <thread>

#include "engine/engine.h"
#include "engine/executor.h"
#include "engine/metrics.h"
#include "engine/output_processor.h"
#include "engine/scheduler.h"

namespace deepinfer::engine {

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
  void StepLoop();

  std::unique_ptr<model::CausalLM> model_;  // until Init hands it to the executor
  EngineOptions options_;
  EngineInfo info_;
  Hash128 weights_fingerprint_;
  std::unique_ptr<Executor> executor_;  // LocalExecutor; another Executor (several processes) can take its place
  Inbox inbox_;
  EngineMetrics metrics_;
  std::unique_ptr<OutputProcessor> output_;
  std::unique_ptr<Scheduler> scheduler_;
  std::thread step_thread_;
  std::once_flag shutdown_once_;
};

}  // namespace deepinfer::engine
