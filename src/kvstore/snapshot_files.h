// Snapshot files (snapshot_format.h) of one store namespace, written and read on a thread of their own so
// that the engine's step thread never waits for them. A write goes to a temporary file renamed into place
// (a reader sees a whole file or none), unless the file holds that very record already (its head, checksum
// included, is equal): then it only gets the write's times. A read verifies everything before it reports a
// snapshot. Neither copies a whole record: the pieces go between the file and the snapshot's own vectors.
// A file's times follow the blocks' rules (sweeper.h): mtime = its expiry, set at write and pushed on by a
// read (now + the TTL), atime = its last use.
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

class SnapshotFiles {
 public:
  // ttl_seconds: how long a file lives after its last use.
  SnapshotFiles(StoreDir dir, const Hash128& namespace_id, int64_t ttl_seconds);
  ~SnapshotFiles();  // finishes the queued work
  SnapshotFiles(const SnapshotFiles&) = delete;
  SnapshotFiles& operator=(const SnapshotFiles&) = delete;

  // Queues a write (dropped when too many wait).
  void Write(SnapshotRecord record);
  // Queues a read; `done` runs on the files' thread.
  void Read(const Hash128& prefix, kvcache::LowerTier::SnapshotDone done);
  // Waits until nothing is queued or running.
  void Flush();

  std::string PathOf(const Hash128& prefix) const;
  uint64_t writes_done() const;
  // Writes of a record the file held already (not written again).
  uint64_t writes_present() const;
  uint64_t writes_dropped() const;

 private:
  void Loop();
  void WriteNow(const SnapshotRecord& record);
  void ReadNow(const Hash128& prefix, const kvcache::LowerTier::SnapshotDone& done);
  // Last use now, expiry now + the TTL (never earlier than it was).
  void Stamp(const std::string& path, int64_t old_expiry_ns) const;

  StoreDir dir_;
  Hash128 namespace_id_;
  int64_t ttl_seconds_;
  mutable Mutex mu_;
  CondVar cv_;
  std::deque<std::function<void()>> jobs_ GUARDED_BY(mu_);
  int64_t queued_writes_ GUARDED_BY(mu_) = 0;
  bool busy_ GUARDED_BY(mu_) = false;
  bool stop_ GUARDED_BY(mu_) = false;
  uint64_t writes_done_ GUARDED_BY(mu_) = 0;
  uint64_t writes_present_ GUARDED_BY(mu_) = 0;
  uint64_t writes_dropped_ GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace deepinfer::kvstore
