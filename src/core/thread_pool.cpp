#include "core/thread_pool.h"

#include <cstdlib>
#include <string>

namespace deepinfer {
namespace {
thread_local bool t_inside_job = false;

int DefaultThreadCount() {
  if (const char* env = std::getenv("DEEPINFER_THREADS")) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}
}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads < 1) num_threads = 1;
  workers_.reserve(num_threads - 1);
  for (int i = 0; i + 1 < num_threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
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

void ThreadPool::WorkerLoop() {
  uint64_t seen_generation = 0;
  for (;;) {
    Job* job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || (job_ != nullptr && generation_ != seen_generation); });
      if (stopping_) return;
      seen_generation = generation_;
      job = job_;
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
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &job;
    ++generation_;
  }
  wake_.notify_all();
  RunChunks(job);
  std::unique_lock<std::mutex> lock(mutex_);
  // Workers that woke late may still hold a pointer to the job: wait until none is inside it.
  finished_.wait(lock, [&] {
    return job.done_chunks.load(std::memory_order_acquire) == num_chunks && active_workers_ == 0;
  });
  job_ = nullptr;
}

}  // namespace deepinfer
