#include "core/thread_pool.h"

#include <gtest/gtest.h>

#if defined(__linux__)
#include <sched.h>
#endif

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace deepinfer {
namespace {

TEST(ThreadPool, EveryIndexRunsExactlyOnce) {
  ThreadPool pool(4);
  for (int64_t n : {1, 2, 3, 7, 100, 1001}) {
    for (int64_t grain : {0, 1, 3, 64}) {
      std::vector<std::atomic<int>> hits(n);
      pool.ParallelFor(n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
      }, grain);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " grain=" << grain << " i=" << i;
    }
  }
}

TEST(ThreadPool, ChunksDependOnlyOnSizeAndGrain) {
  ThreadPool pool(3);
  auto chunks = [&](int64_t n, int64_t grain) {
    std::mutex m;
    std::set<std::pair<int64_t, int64_t>> seen;
    pool.ParallelFor(n, [&](int64_t b, int64_t e) {
      std::lock_guard<std::mutex> lock(m);
      seen.insert({b, e});
    }, grain);
    return seen;
  };
  auto first = chunks(1000, 7);
  for (int r = 0; r < 20; ++r) EXPECT_EQ(chunks(1000, 7), first);
  EXPECT_EQ(static_cast<int64_t>(first.size()), ThreadPool::NumChunks(1000, 7));
  const std::pair<int64_t, int64_t> last{994, 1000};
  EXPECT_EQ(*first.rbegin(), last);
}

TEST(ThreadPool, UsesAtMostItsSizeConcurrently) {
  ThreadPool pool(2);
  std::atomic<int> running{0}, peak{0};
  pool.ParallelFor(64, [&](int64_t, int64_t) {
    int now = running.fetch_add(1) + 1;
    int p = peak.load();
    while (now > p && !peak.compare_exchange_weak(p, now)) {
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    running.fetch_sub(1);
  }, 1);
  EXPECT_LE(peak.load(), 2);
  EXPECT_GE(peak.load(), 1);
}

TEST(ThreadPool, NestedCallsRunInline) {
  ThreadPool pool(4);
  std::atomic<int64_t> total{0};
  pool.ParallelFor(8, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      pool.ParallelFor(10, [&](int64_t b2, int64_t e2) { total.fetch_add(e2 - b2); }, 1);
    }
  }, 1);
  EXPECT_EQ(total.load(), 80);
}

TEST(ThreadPool, ConcurrentCallersAllComplete) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&] {
      for (int r = 0; r < 50; ++r) pool.ParallelFor(100, [&](int64_t b, int64_t e) { total.fetch_add(e - b); }, 9);
    });
  }
  for (auto& c : callers) c.join();
  EXPECT_EQ(total.load(), 4 * 50 * 100);
}

TEST(ThreadPool, SharedPoolIsSizedToTheCoresTheProcessMayRunOn) {
  EXPECT_GE(ThreadPool::Shared().size(), 1);
#if defined(__linux__)
  if (std::getenv("DEEPINFER_THREADS") != nullptr) GTEST_SKIP() << "DEEPINFER_THREADS sets the size";
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  EXPECT_EQ(ThreadPool::Shared().size(), CPU_COUNT(&allowed));
#endif
}

#if defined(__linux__)
TEST(ThreadPool, SharedPoolOfAProcessPinnedToOneCoreHasOneThread) {
  if (std::getenv("DEEPINFER_THREADS") != nullptr) GTEST_SKIP() << "DEEPINFER_THREADS sets the size";
  // As under `taskset -c N`, on a machine of any size. The threadsafe style runs the statement in a fresh
  // copy of this test binary, which has made no shared pool before the pinning (nothing before it here
  // asks for one).
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        cpu_set_t allowed;
        if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) std::_Exit(100);
        int first = 0;
        while (!CPU_ISSET(first, &allowed)) ++first;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(first, &one);
        if (sched_setaffinity(0, sizeof(one), &one) != 0) std::_Exit(101);
        std::_Exit(ThreadPool::Shared().size());
      },
      ::testing::ExitedWithCode(1), "");
}
#endif

}  // namespace
}  // namespace deepinfer
