// The one thread pool every component shares. It is sized to the cores the process may run on (or
// DEEPINFER_THREADS) and the calling thread works as one of them, so a pool of N runs on exactly N threads.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace deepinfer {

class ThreadPool {
 public:
  // A pool of `num_threads` participants: the caller plus num_threads - 1 workers.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // The process-wide pool: DEEPINFER_THREADS if set, else as many as the first caller's affinity mask has cores.
  static ThreadPool& Shared();

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) over [0, n) in chunks of `grain` items (the last may be shorter) and returns when
  // all have run. Chunk boundaries depend only on n and grain, never on timing, so a caller that reduces
  // per chunk gets the same result on every run. grain <= 0 means ceil(n / size()).
  // Called from inside a running job, or while another thread's job holds the pool, it runs inline
  // on the calling thread: the pool never has more busy threads than it has participants.
  void ParallelFor(int64_t n, const std::function<void(int64_t begin, int64_t end)>& fn, int64_t grain = 0);

  // Number of chunks ParallelFor(n, fn, grain) will produce.
  static int64_t NumChunks(int64_t n, int64_t grain) { return grain <= 0 ? 0 : (n + grain - 1) / grain; }

 private:
  struct Job {
    const std::function<void(int64_t, int64_t)>* fn = nullptr;
    int64_t n = 0;
    int64_t grain = 1;
    int64_t num_chunks = 0;
    std::atomic<int64_t> next_chunk{0};
    std::atomic<int64_t> done_chunks{0};
  };

  void WorkerLoop();
  void RunChunks(Job& job);

  // Takes the current job if it is new to a worker that last saw `seen`; null if there is none.
  Job* TryTakeJob(uint64_t& seen);

  std::vector<std::thread> workers_;
  std::mutex submit_mutex_;  // held by the thread whose job owns the pool
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable finished_;
  // job_, generation_ and stopping_ change under mutex_; they are atomic so that a worker that has just
  // finished can watch for the next job without the lock (and without a futex wake) for a short while:
  // decode steps hand the pool a job every few tens of microseconds, less than a sleeping thread takes
  // to wake.
  std::atomic<Job*> job_{nullptr};
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stopping_{false};
  int active_workers_ = 0;
  int sleeping_workers_ = 0;
};

}  // namespace deepinfer
