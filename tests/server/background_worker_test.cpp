#include "server/background_worker.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

namespace deepinfer::server {
namespace {

// Jobs run one after another in the order posted, on one thread that is not the poster's, at background
// priority (core/sched.h: nice 19); Stop runs what is still queued before it returns.
TEST(BackgroundWorkerTest, RunsJobsInOrderOnOneBackgroundThread) {
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::thread::id> threads;
  std::vector<int> nices;
  BackgroundWorker worker("test-bg");
  constexpr int kJobs = 50;
  for (int i = 0; i < kJobs; ++i) {
    worker.Post([&, i] {
      std::lock_guard lock(mu);
      order.push_back(i);
      threads.push_back(std::this_thread::get_id());
      nices.push_back(getpriority(PRIO_PROCESS, static_cast<id_t>(gettid())));
    });
  }
  worker.Stop();
  ASSERT_EQ(order.size(), static_cast<size_t>(kJobs));
  for (int i = 0; i < kJobs; ++i) {
    EXPECT_EQ(order[static_cast<size_t>(i)], i);
    EXPECT_EQ(threads[static_cast<size_t>(i)], threads[0]);
    EXPECT_EQ(nices[static_cast<size_t>(i)], 19);
  }
  EXPECT_NE(threads[0], std::this_thread::get_id());
}

// After Stop a job runs at once on the caller's thread, so nothing posted late is lost; Stop is idempotent.
TEST(BackgroundWorkerTest, AfterStopAJobRunsOnTheCaller) {
  BackgroundWorker worker("test-bg");
  worker.Stop();
  std::thread::id ran_on;
  worker.Post([&] { ran_on = std::this_thread::get_id(); });
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  worker.Stop();
}

// A worker never posted to starts no thread and stops at once; its destructor stops one that ran jobs.
TEST(BackgroundWorkerTest, DestructionRunsWhatIsQueued) {
  std::atomic<int> ran{0};
  {
    BackgroundWorker idle("test-bg");
  }
  {
    BackgroundWorker worker("test-bg");
    for (int i = 0; i < 10; ++i) worker.Post([&] { ran.fetch_add(1); });
  }
  EXPECT_EQ(ran.load(), 10);
}

}  // namespace
}  // namespace deepinfer::server
