#include "core/sched.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <thread>

namespace deepinfer {
namespace {

// The kernel's struct sched_attr, to read back what SetThreadLatencySlice set.
struct Attr {
  uint32_t size, policy;
  uint64_t flags;
  int32_t nice;
  uint32_t priority;
  uint64_t runtime, deadline, period;
};

Attr Current() {
  Attr a;
  std::memset(&a, 0, sizeof a);
  EXPECT_EQ(syscall(SYS_sched_getattr, 0, &a, sizeof a, 0), 0);
  return a;
}

// On a thread of its own, so that the test process keeps its scheduling.
TEST(SchedTest, SetsTheSliceAndKeepsPolicyAndNice) {
  std::thread([] {
    // A nice value of our own first (raising it needs no privilege): the call must keep it.
    const int nice_before = getpriority(PRIO_PROCESS, static_cast<id_t>(gettid()));
    const int nice = nice_before < 19 ? nice_before + 1 : 19;
    ASSERT_EQ(setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), nice), 0);
    const Attr before = Current();
    const Status s = SetThreadLatencySlice(200);
    ASSERT_TRUE(s.ok()) << s.ToString();
    const Attr after = Current();
    EXPECT_EQ(after.policy, before.policy);
    EXPECT_EQ(after.nice, nice);
    EXPECT_EQ(getpriority(PRIO_PROCESS, static_cast<id_t>(gettid())), nice);
    // Kernels with per-task slices (6.12+) report the slice; older ones report 0 for the fair class.
    if (after.runtime != 0) {
      EXPECT_EQ(after.runtime, 200u * 1000u);
    }
    // Below the kernel's 100 us floor it is clamped, not refused.
    ASSERT_TRUE(SetThreadLatencySlice(1).ok());
    const Attr floor = Current();
    if (floor.runtime != 0) {
      EXPECT_EQ(floor.runtime, 100u * 1000u);
    }
  }).join();
}

// On a thread of its own: the move cannot be undone without privilege.
TEST(SchedTest, MovesTheThreadToTheBackground) {
  const Attr main_before = Current();
  std::thread([] {
    const Status s = SetThreadBackgroundPriority();
    ASSERT_TRUE(s.ok()) << s.ToString();
    const Attr after = Current();
    EXPECT_EQ(after.policy, 3u);  // SCHED_BATCH (uapi/linux/sched.h)
    EXPECT_EQ(after.nice, 19);
    EXPECT_EQ(getpriority(PRIO_PROCESS, static_cast<id_t>(gettid())), 19);
    // A latency slice asked for later keeps the background policy and nice value.
    ASSERT_TRUE(SetThreadLatencySlice(200).ok());
    EXPECT_EQ(Current().policy, 3u);
    EXPECT_EQ(Current().nice, 19);
  }).join();
  // The process's other threads keep theirs.
  EXPECT_EQ(Current().policy, main_before.policy);
  EXPECT_EQ(Current().nice, main_before.nice);
}

TEST(SchedTest, RefusesANonPositiveSlice) {
  EXPECT_EQ(SetThreadLatencySlice(0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(SetThreadLatencySlice(-5).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace deepinfer
