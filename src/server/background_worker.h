// A thread that runs posted jobs one after another at background priority (core/sched.h's
// SetThreadBackgroundPriority): work that may wait a little, kept out of the turns of the latency-bound threads
// that share its core. A decode unit prepares handed-over requests here (parsing a long body, rendering and
// tokenizing its prompt), so that on the unit's one core the engine's step thread, which every running
// stream's next token waits on, is not preempted by them. The thread starts with the first job.
#pragma once

#include <deque>
#include <functional>
#include <string>
#include <thread>

#include "core/mutex.h"

namespace deepinfer::server {

class BackgroundWorker {
 public:
  explicit BackgroundWorker(std::string thread_name);
  ~BackgroundWorker();  // Stop()
  BackgroundWorker(const BackgroundWorker&) = delete;
  BackgroundWorker& operator=(const BackgroundWorker&) = delete;

  // Queues `job` after those posted before it. After Stop it runs at once, on the calling thread.
  void Post(std::function<void()> job);
  // Runs what is queued, then ends the thread (and joins it). Idempotent; not from a job.
  void Stop();

 private:
  void Loop();

  const std::string thread_name_;
  Mutex mu_;
  CondVar cv_;
  std::deque<std::function<void()>> jobs_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  bool started_ GUARDED_BY(mu_) = false;
  std::thread thread_;  // started under mu_ (with started_), joined by Stop
};

}  // namespace deepinfer::server
