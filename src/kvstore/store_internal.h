// Store internals shared by store.cpp (the store, its I/O threads) and store_tasks.cpp (the write, read
// and lookup state machines). Not part of the component's interface.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "core/clock.h"
#include "core/mutex.h"
#include "kvstore/io_backend.h"
#include "kvstore/store.h"
#include "kvstore/store_dir.h"

namespace deepinfer::kvstore {
namespace internal {

struct FreeDeleter {
  void operator()(uint8_t* p) const;
};
// What O_DIRECT asks of buffer addresses, lengths and file offsets. The device's logical block (512 bytes
// on most) would do; a page is enough on every device and filesystem.
inline constexpr size_t kDirectAlign = 4096;
static_assert(kHeaderBytes % kDirectAlign == 0);

// Page-aligned (O_DIRECT-capable) bytes: header then payload.
using StagingBuffer = std::unique_ptr<uint8_t, FreeDeleter>;
StagingBuffer AllocateStaging(size_t bytes);

// A unit of work an I/O thread drives: a chain of operations, each started when the previous completes.
class Task {
 public:
  virtual ~Task() = default;
  // Prepares the first operation(s); returns true when the task finished without any.
  virtual bool Start(IoBackend& io) = 0;
  // Advances on one completed operation; returns true when the task has finished.
  virtual bool OnComplete(IoOp* op, IoBackend& io) = 0;
  // The store is closing and the task never started: report it as cancelled or dropped.
  virtual void Cancel() = 0;
  bool is_write = false;
};

class IoThread {
 public:
  IoThread(std::unique_ptr<IoBackend> backend, int depth, int write_depth);
  ~IoThread();  // runs what is in flight to completion, then joins
  void Push(Task* task);
  std::vector<Task*> TakeQueued();

 private:
  void Run();
  void Finish(Task* task);

  std::unique_ptr<IoBackend> io_;
  const int depth_;
  const int write_depth_;
  Mutex mutex_;
  std::deque<Task*> reads_ GUARDED_BY(mutex_);  // reads and lookups
  std::deque<Task*> writes_ GUARDED_BY(mutex_);
  bool stopping_ GUARDED_BY(mutex_) = false;
  int in_flight_ = 0;         // I/O thread only
  int writes_in_flight_ = 0;  // I/O thread only
  std::thread thread_;
};

struct ReadBatch {
  std::vector<ReadItem> items;
  std::vector<ReadResult> results;
  std::atomic<size_t> remaining{0};
  std::atomic<uint64_t> bytes{0};
  ReadDone done;
  int64_t start_ns = 0;
};

Task* MakeWriteTask(Store::Impl* store, const Hash128& hash, TtlClass ttl, StagingBuffer buffer, uint64_t bytes);
Task* MakeReadTask(Store::Impl* store, std::shared_ptr<ReadBatch> batch, size_t index);
Task* MakeLookupTask(Store::Impl* store, std::vector<Hash128> hashes, LookupDone done);

}  // namespace internal

class Store::Impl {
 public:
  Impl(StoreOptions options, StoreDir dir);
  ~Impl();

  void FlushFor(double seconds);
  // A queued write left the queue; `now_present` when the block is on disk (written or found there).
  void WriteFinished(const Hash128& hash, uint64_t bytes, bool now_present);
  void RememberPresentLocked(const Hash128& hash) REQUIRES(write_mutex);
  void ForgetPresent(const Hash128& hash);
  void NoteWriteOk();
  // Classifies a failed write (full, read-only, vanished, other), pauses writes, logs on a change of state.
  void NoteWriteError(int err, const std::string& path, const char* what);
  void RequestSweep();
  // A hit: last use = now, expiry = max(current, now + the reader's TTL); at most once per refresh interval.
  void RefreshTimes(const std::string& path, int64_t atime_ns, int64_t mtime_ns, TtlClass ttl);
  void Quarantine(const std::string& path, const Hash128& hash, VerifyFailure why);
  void RecordRead(double seconds, uint64_t bytes);
  void RecordBatch(double seconds, uint64_t bytes);
  internal::IoThread& ThreadFor(uint64_t key);
  void SweeperLoop();
  Result<SweepReport> RunSweep();

  const StoreOptions options;
  const StoreDir dir;
  const Hash128 ns;
  const uint64_t file_bytes;  // header + payload
  std::string backend_name;
  StoreCounters counters;
  LatencyHistogram read_latency;
  LatencyHistogram write_latency;
  std::atomic<int64_t> writes_paused_until_ms{0};
  std::atomic<bool> rename_noreplace{true};  // cleared when the filesystem refuses RENAME_NOREPLACE
  std::atomic<bool> direct_io_ok{true};       // cleared when the filesystem refuses O_DIRECT
  std::atomic<uint32_t> next_thread{0};

  Mutex write_mutex;
  CondVar flushed_cv;
  std::unordered_set<Hash128, Hash128Hasher> pending GUARDED_BY(write_mutex);
  std::unordered_set<Hash128, Hash128Hasher> known GUARDED_BY(write_mutex);
  std::deque<Hash128> known_order GUARDED_BY(write_mutex);

  mutable Mutex speed_mutex;
  bool have_speed GUARDED_BY(speed_mutex) = false;
  bool have_rate GUARDED_BY(speed_mutex) = false;
  double ewma_block_seconds GUARDED_BY(speed_mutex) = 0;
  double ewma_bytes_per_second GUARDED_BY(speed_mutex) = 0;

  Mutex sweep_mutex;
  CondVar sweep_cv;
  bool sweep_requested GUARDED_BY(sweep_mutex) = false;
  bool sweep_stopping GUARDED_BY(sweep_mutex) = false;
  std::thread sweeper;

  std::vector<std::unique_ptr<internal::IoThread>> threads;  // last: destroyed (joined) first
};

}  // namespace deepinfer::kvstore
