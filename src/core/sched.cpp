#include "core/sched.h"

#include <cerrno>
#include <cstring>
#include <string>

#if defined(__linux__)
#include <sys/syscall.h>
#include <pthread.h>
#include <unistd.h>
#endif

namespace deepinfer {

#if defined(__linux__) && defined(SYS_sched_setattr) && defined(SYS_sched_getattr)
namespace {
// The kernel's struct sched_attr (include/uapi/linux/sched/types.h), declared here: glibc has no wrapper
// and the uapi header's name clashes with glibc's own sched headers on some distributions.
struct SchedAttr {
  uint32_t size;
  uint32_t sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime;
  uint64_t sched_deadline;
  uint64_t sched_period;
};
constexpr uint32_t kSchedOther = 0, kSchedBatch = 3;
}  // namespace

Status SetThreadLatencySlice(int64_t slice_us) {
  if (slice_us <= 0) return Status::InvalidArgument("slice must be positive");
  SchedAttr attr;
  std::memset(&attr, 0, sizeof attr);
  if (syscall(SYS_sched_getattr, 0, &attr, sizeof attr, 0) != 0)
    return Status::Unavailable(std::string("sched_getattr: ") + std::strerror(errno));
  if (attr.sched_policy != kSchedOther && attr.sched_policy != kSchedBatch)
    return Status::Unavailable("the thread is not under the fair scheduler");
  attr.size = sizeof attr;
  attr.sched_flags = 0;
  attr.sched_runtime = static_cast<uint64_t>(slice_us) * 1000;  // the nice value read above is kept
  if (syscall(SYS_sched_setattr, 0, &attr, 0) != 0)
    return Status::Unavailable(std::string("sched_setattr: ") + std::strerror(errno));
  return Status::Ok();
}

Status SetThreadBackgroundPriority() {
  SchedAttr attr;
  std::memset(&attr, 0, sizeof attr);
  attr.size = sizeof attr;
  attr.sched_policy = kSchedBatch;
  attr.sched_nice = 19;
  if (syscall(SYS_sched_setattr, 0, &attr, 0) != 0)
    return Status::Unavailable(std::string("sched_setattr: ") + std::strerror(errno));
  return Status::Ok();
}
#else
Status SetThreadLatencySlice(int64_t) { return Status::Unavailable("per-thread slices need Linux"); }
Status SetThreadBackgroundPriority() { return Status::Unavailable("background priority needs Linux"); }
#endif

void SetCurrentThreadName(const char* name) {
#if defined(__linux__)
  char truncated[16];
  std::strncpy(truncated, name, sizeof truncated - 1);
  truncated[sizeof truncated - 1] = '\0';
  pthread_setname_np(pthread_self(), truncated);
#else
  (void)name;
#endif
}

}  // namespace deepinfer
