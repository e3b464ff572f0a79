#include "server/background_worker.h"

#include "core/log.h"
#include "core/sched.h"

namespace deepinfer::server {

BackgroundWorker::BackgroundWorker(std::string thread_name) : thread_name_(std::move(thread_name)) {}

BackgroundWorker::~BackgroundWorker() { Stop(); }

void BackgroundWorker::Post(std::function<void()> job) {
  {
    MutexLock lock(&mu_);
    if (!stopping_) {
      jobs_.push_back(std::move(job));
      if (!started_) {
        started_ = true;
        thread_ = std::thread([this] { Loop(); });
      }
      cv_.Signal();
      return;
    }
  }
  job();
}

void BackgroundWorker::Stop() {
  {
    MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    cv_.SignalAll();
  }
  // started_ no longer changes: Post starts no thread once stopping_ is set.
  if (thread_.joinable()) thread_.join();
}

void BackgroundWorker::Loop() {
  SetCurrentThreadName(thread_name_.c_str());
  // Without it the jobs still run, at the default priority.
  if (const Status s = SetThreadBackgroundPriority(); !s.ok())
    DI_LOG(kWarn, "background thread keeps the default priority")
        .Field("thread", thread_name_)
        .Field("error", s.message());
  while (true) {
    std::function<void()> job;
    {
      MutexLock lock(&mu_);
      while (jobs_.empty() && !stopping_) cv_.Wait(&mu_);
      if (jobs_.empty()) return;  // stopping, with everything queued run
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

}  // namespace deepinfer::server
