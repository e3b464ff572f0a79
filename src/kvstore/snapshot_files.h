// Snapshot files (snapshot_format.h) of one store namespace, written and read on a thread of their own so
// that the engine's step thread never waits for them. A write goes to a temporary file renamed into place
// (a reader sees a whole file or none), unless the file holds that very record already (its head, checksum
// included, is equal): then it only gets the write's times. A read verifies everything before it reports a
// snapshot. Neither copies a whole record: the pieces go between the file and the snapshot's own vectors.
// A file's times follow the blocks' rules (sweeper.h): mtime = its expiry, set at write and pushed on by a
// read (now + the TTL), atime = its last use.
//
// Where nothing waits for a write (a decode unit's finished sequences, kept for a later continuation), the
// writes can go to a second thread at background priority (kBackground): creating, writing and renaming a
// file is about a millisecond of kernel work that would otherwise preempt the engine's step thread on a
// unit's one core, lengthening the gap between every running stream's tokens. Reads stay on the first
// thread, whose requests wait for them. A read may then not yet find a record whose write is still queued
// (a miss: the caller computes what it would have read, as for any record not stored).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "core/mutex.h"
#include "kvcache/lower_tier.h"
#include "kvstore/snapshot_format.h"
#include "kvstore/store_dir.h"

namespace deepinfer::kvstore {

// Which thread a snapshot write runs on.
enum class SnapshotWrites {
  kWithReads,   // the reads' thread, in the order offered (a prefill unit's hand-off waits for its write)
  kBackground,  // a thread of their own at background priority (core/sched.h)
};

// Where a serving unit in `role` writes: a prefill unit's hand-off waits for the write (its answer comes once
// the prompt's state is stored); a decode or colocated unit's writes keep finished sequences for later.
inline SnapshotWrites SnapshotWritesFor(bool prefill_role) {
  return prefill_role ? SnapshotWrites::kWithReads : SnapshotWrites::kBackground;
}

class SnapshotFiles {
 public:
  // ttl_seconds: how long a file lives after its last use.
  SnapshotFiles(StoreDir dir, const Hash128& namespace_id, int64_t ttl_seconds,
                SnapshotWrites writes = SnapshotWrites::kWithReads);
  ~SnapshotFiles();  // finishes the queued work
  SnapshotFiles(const SnapshotFiles&) = delete;
  SnapshotFiles& operator=(const SnapshotFiles&) = delete;

  // Queues a write (dropped when too many wait).
  void Write(SnapshotRecord record);
  // Queues a read; `done` runs on the reads' thread.
  void Read(const Hash128& prefix, kvcache::LowerTier::SnapshotDone done);
  // Where the writes offered from now on go (a unit whose role changes).
  void SetWrites(SnapshotWrites writes);
  // Waits until nothing is queued or running, on either thread.
  void Flush();

  std::string PathOf(const Hash128& prefix) const;
  uint64_t writes_done() const;
  // Writes of a record the file held already (not written again).
  uint64_t writes_present() const;
  uint64_t writes_dropped() const;

 private:
  // One thread's jobs, in order.
  struct JobQueue {
    std::deque<std::function<void()>> jobs;
    bool busy = false;  // a job taken from `jobs` is running
  };
  static constexpr int kReads = 0, kWrites = 1;  // queues_: reads (and kWithReads writes), kBackground writes

  void Loop(int queue);
  void WriteNow(const SnapshotRecord& record);
  void ReadNow(const Hash128& prefix, const kvcache::LowerTier::SnapshotDone& done);
  // Last use now, expiry now + the TTL (never earlier than it was).
  void Stamp(const std::string& path, int64_t old_expiry_ns) const;

  StoreDir dir_;
  Hash128 namespace_id_;
  int64_t ttl_seconds_;
  mutable Mutex mu_;
  CondVar cv_;
  SnapshotWrites writes_ GUARDED_BY(mu_);
  JobQueue queues_[2] GUARDED_BY(mu_);
  int64_t queued_writes_ GUARDED_BY(mu_) = 0;
  bool stop_ GUARDED_BY(mu_) = false;
  uint64_t writes_done_ GUARDED_BY(mu_) = 0;
  uint64_t writes_present_ GUARDED_BY(mu_) = 0;
  uint64_t writes_dropped_ GUARDED_BY(mu_) = 0;
  std::thread thread_;
  std::thread write_thread_;  // the kBackground writes'; idle otherwise
};

}  // namespace deepinfer::kvstore
