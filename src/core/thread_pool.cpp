#include "core/thread_pool.h"

#include "core/sched.h"

#if defined(__linux__)
#include <sched.h>
#endif

#include <chrono>
#include <cstdlib>
#include <string>

namespace deepinfer {
namespace {
thread_local bool t_inside_job = false;

// Pinned to fewer cores than the machine has (taskset, a cgroup's cpuset), a process that ran a thread per
// machine core would have more compute threads than cores, which then take turns.
int DefaultThreadCount() {
  if (const char* env = std::getenv("DEEPINFER_THREADS")) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
#if defined(__linux__)
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0 && CPU_COUNT(&allowed) > 0) return CPU_COUNT(&allowed);
#endif
  unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}
// How long a worker that has just finished keeps watching for the next job before it sleeps:
// DEEPINFER_POOL_SPIN_US (0 sleeps at once), default 200 µs.
int SpinMicroseconds() {
  static const int us = [] {
    const char* env = std::getenv("DEEPINFER_POOL_SPIN_US");
    return env != nullptr && std::atoi(env) >= 0 ? std::atoi(env) : 200;
  }();
  return us;
}
}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads < 1) num_threads = 1;
  workers_.reserve(num_threads - 1);
  for (int i = 0; i + 1 < num_threads; ++i) workers_.emplace_back([this] {
      SetCurrentThreadName("di-pool");
      WorkerLoop();
    });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_.store(true, std::memory_order_release);
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

ThreadPool& ThreadPool::Shared() {
  static ThreadPool pool(DefaultThreadCount());
  return pool;
}

void ThreadPool::RunChunks(Job& job) {
  const bool was_inside = t_inside_job;
  t_inside_job = true;
  for (;;) {
    int64_t chunk = job.next_chunk.fetch_add(1, std::memory_order_relaxed);
    if (chunk >= job.num_chunks) break;
    int64_t begin = chunk * job.grain;
    int64_t end = std::min(job.n, begin + job.grain);
    (*job.fn)(begin, end);
    job.done_chunks.fetch_add(1, std::memory_order_acq_rel);
  }
  t_inside_job = was_inside;
}

ThreadPool::Job* ThreadPool::TryTakeJob(uint64_t& seen) {
  std::lock_guard<std::mutex> lock(mutex_);
  Job* job = job_.load(std::memory_order_relaxed);
  const uint64_t generation = generation_.load(std::memory_order_relaxed);
  if (generation == seen) return nullptr;
  seen = generation;
  if (job == nullptr) return nullptr;  // that job has already finished
  ++active_workers_;
  return job;
}

void ThreadPool::WorkerLoop() {
  const auto spin = std::chrono::microseconds(SpinMicroseconds());
  uint64_t seen_generation = 0;
  for (;;) {
    Job* job = nullptr;
    const auto spin_until = std::chrono::steady_clock::now() + spin;
    for (int polls = 0; job == nullptr; ++polls) {
      if (stopping_.load(std::memory_order_acquire)) return;
      if (generation_.load(std::memory_order_acquire) != seen_generation) job = TryTakeJob(seen_generation);
      if (job != nullptr) break;
      if ((polls & 63) == 63 && std::chrono::steady_clock::now() > spin_until) break;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    if (job == nullptr) {
      std::unique_lock<std::mutex> lock(mutex_);
      ++sleeping_workers_;
      wake_.wait(lock, [&] {
        return stopping_.load(std::memory_order_relaxed) ||
               (job_.load(std::memory_order_relaxed) != nullptr &&
                generation_.load(std::memory_order_relaxed) != seen_generation);
      });
      --sleeping_workers_;
      if (stopping_.load(std::memory_order_relaxed)) return;
      seen_generation = generation_.load(std::memory_order_relaxed);
      job = job_.load(std::memory_order_relaxed);
      ++active_workers_;
    }
    RunChunks(*job);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --active_workers_;
    }
    finished_.notify_all();
  }
}

void ThreadPool::ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain) {
  if (n <= 0) return;
  if (grain <= 0) grain = (n + size() - 1) / size();
  const int64_t num_chunks = NumChunks(n, grain);
  auto run_inline = [&] {
    for (int64_t c = 0; c < num_chunks; ++c) fn(c * grain, std::min(n, (c + 1) * grain));
  };
  if (num_chunks == 1 || workers_.empty() || t_inside_job) return run_inline();
  std::unique_lock<std::mutex> owner(submit_mutex_, std::try_to_lock);
  if (!owner.owns_lock()) return run_inline();

  Job job;
  job.fn = &fn;
  job.n = n;
  job.grain = grain;
  job.num_chunks = num_chunks;
  bool any_sleeping;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_.store(&job, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_release);
    any_sleeping = sleeping_workers_ > 0;
  }
  if (any_sleeping) wake_.notify_all();  // spinning workers see the new generation by themselves
  RunChunks(job);
  std::unique_lock<std::mutex> lock(mutex_);
  // Workers that woke late may still hold a pointer to the job: wait until none is inside it.
  finished_.wait(lock, [&] {
    return job.done_chunks.load(std::memory_order_acquire) == num_chunks && active_workers_ == 0;
  });
  job_.store(nullptr, std::memory_order_release);
}

}  // namespace deepinfer
