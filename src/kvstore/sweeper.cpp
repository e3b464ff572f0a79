#include "kvstore/sweeper.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <span>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "kvstore/snapshot_format.h"

namespace deepinfer::kvstore {
namespace {

int64_t ToNanos(const struct timespec& t) { return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec; }

// A block or a snapshot record (snapshot_format.h): both live by the same times and the same rules.
struct BlockEntry {
  std::string path;
  uint64_t bytes = 0;
  int64_t atime_ns = 0;
  int64_t mtime_ns = 0;
  bool snapshot = false;
  std::string ns_dir;  // a snapshot's namespace directory, where the block it continues lives
};

bool ParseSnapshotFileName(std::string_view name) {
  Hash128 h;
  return name.size() == 36 && name.ends_with(".kvs") && ParseHex(name.substr(0, 32), &h) &&
         h.ToHex() == name.substr(0, 32);
}

// Whether a snapshot record is of no use: the block it continues is gone (or goes in this sweep: `going`),
// or it is not a snapshot record at all. A record of another format version is left to the other rules.
bool SnapshotIsOrphaned(const BlockEntry& e, const std::unordered_set<std::string>& going, bool* unreadable) {
  *unreadable = false;
  uint8_t header[kSnapshotHeaderBytes];
  const int fd = ::open(e.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;  // gone already (another sweeper)
  const ssize_t n = ::pread(fd, header, sizeof header, 0);
  ::close(fd);
  if (n < 0) {
    *unreadable = true;
    return false;
  }
  auto block = SnapshotRecordBlock(std::span(header, static_cast<size_t>(n)));
  if (!block.ok()) return block.status().code() == StatusCode::kDataLoss;
  if (!block->has_value()) return false;  // it continues no block
  const std::string hex = (*block)->ToHex();
  const std::string block_path = e.ns_dir + "/" + hex.substr(0, 2) + "/" + hex + ".kvb";
  struct stat st {};
  return going.contains(block_path) || (::lstat(block_path.c_str(), &st) != 0 && errno == ENOENT);
}

// Holds the sweep lock (flock on DIR/sweep.lock) for the sweep's duration.
class SweepLock {
 public:
  // busy: another process holds it. A filesystem without flock support sweeps unlocked.
  SweepLock(const std::string& path, bool wait, bool* busy) {
    *busy = false;
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) return;
    int r;
    do {
      r = ::flock(fd_, LOCK_EX | (wait ? 0 : LOCK_NB));
    } while (r != 0 && errno == EINTR);
    if (r != 0 && errno == EWOULDBLOCK) {
      *busy = true;
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~SweepLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }
  SweepLock(const SweepLock&) = delete;
  SweepLock& operator=(const SweepLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace

bool TmpOwnerIsGone(const std::string& host, int64_t pid) {
  if (host != HostTag() || pid <= 0 || pid == ::getpid()) return false;
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

uint64_t CleanTemporaries(const StoreDir& dir, double tmp_max_age_s, bool dry_run) {
  const int64_t now_ns = UnixNanos();
  uint64_t removed = 0;
  // Writers that crashed (this host: the pid is gone) or stalled (any host: too old).
  ForEachDirEntry(dir.TmpDir(), [&](std::string_view name) {
    const std::string path = dir.TmpDir() + "/" + std::string(name);
    std::string host;
    int64_t pid = 0;
    bool remove = ParseTmpName(name, &host, &pid) && TmpOwnerIsGone(host, pid);
    struct stat st {};
    if (!remove && ::lstat(path.c_str(), &st) == 0 &&
        now_ns - ToNanos(st.st_mtim) >= static_cast<int64_t>(tmp_max_age_s * 1e9)) {
      remove = true;
    }
    if (remove && (dry_run || ::unlink(path.c_str()) == 0)) ++removed;
  });
  return removed;
}

Result<SweepReport> Sweep(const StoreDir& dir, const SweepOptions& options) {
  SweepReport report;
  if (!dir.StillThere()) return Status::Unavailable(dir.root() + ": the KV store directory is gone");
  SweepLock lock(dir.SweepLockPath(), options.wait_for_lock, &report.lock_busy);
  if (report.lock_busy) return report;

  const int64_t now_ms = UnixMillis();
  const int64_t now_ns = now_ms * 1'000'000;
  const bool act = !options.dry_run;

  report.tmp_removed = CleanTemporaries(dir, options.tmp_max_age_s, options.dry_run);

  // The trash: unlink what is past its grace period (all of it for --all). The time is in the name,
  // because a rename does not reliably change the times a sweeper on another host sees.
  uint64_t trash_pending_bytes = 0;
  ForEachDirEntry(dir.TrashDir(), [&](std::string_view name) {
    const std::string path = dir.TrashDir() + "/" + std::string(name);
    int64_t ms = 0;
    const bool named = ParseLeadingMillis(name, &ms);
    if (options.evict_all || !named || now_ms - ms >= static_cast<int64_t>(options.trash_grace_s * 1e3)) {
      if (!act || ::unlink(path.c_str()) == 0) ++report.trash_unlinked;
      return;
    }
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0) trash_pending_bytes += static_cast<uint64_t>(st.st_size);
    ++report.trash_pending;
  });

  ForEachDirEntry(dir.QuarantineDir(), [&](std::string_view name) {
    int64_t ms = 0;
    if (!ParseLeadingMillis(name, &ms) || now_ms - ms <= static_cast<int64_t>(options.quarantine_max_age_s * 1e3)) return;
    const std::string path = dir.QuarantineDir() + "/" + std::string(name);
    if (!act || ::unlink(path.c_str()) == 0) ++report.quarantine_removed;
  });

  // Every block of every namespace, with its times.
  std::vector<BlockEntry> blocks;
  ForEachDirEntry(dir.root(), [&](std::string_view ns_name) {
    if (!IsNamespaceName(ns_name)) return;
    ++report.namespaces;
    const std::string ns_dir = dir.root() + "/" + std::string(ns_name);
    ForEachDirEntry(ns_dir, [&](std::string_view bucket) {
      if (!IsBucketName(bucket)) return;
      const std::string bucket_dir = ns_dir + "/" + std::string(bucket);
      ForEachDirEntry(bucket_dir, [&](std::string_view name) {
        Hash128 h;
        BlockEntry e;
        e.snapshot = ParseSnapshotFileName(name);
        if (!e.snapshot && !ParseBlockName(name, &h)) return;
        if (e.snapshot) e.ns_dir = ns_dir;
        e.path = bucket_dir + "/" + std::string(name);
        struct stat st {};
        if (::lstat(e.path.c_str(), &st) != 0) {
          if (errno != ENOENT) ++report.errors;  // ENOENT: another sweeper or a reader's quarantine took it
          return;
        }
        if (!S_ISREG(st.st_mode)) return;
        e.bytes = static_cast<uint64_t>(st.st_size);
        e.atime_ns = ToNanos(st.st_atim);
        e.mtime_ns = ToNanos(st.st_mtim);
        if (e.snapshot) {
          ++report.snapshots;
          report.snapshot_bytes += e.bytes;
        } else {
          ++report.blocks;
          report.block_bytes += e.bytes;
        }
        blocks.push_back(std::move(e));
      });
    });
  });

  std::unordered_set<std::string> going;  // blocks evicted in this sweep (a dry run's included)
  auto evict = [&](const BlockEntry& e) {
    if (act && ::rename(e.path.c_str(), dir.NewTrashPath(now_ms).c_str()) != 0) {
      if (errno != ENOENT) ++report.errors;
      return false;
    }
    report.evicted_bytes += e.bytes;
    trash_pending_bytes += e.bytes;
    if (!e.snapshot) going.insert(e.path);
    return true;
  };

  std::vector<BlockEntry> live;
  live.reserve(blocks.size());
  for (auto& e : blocks) {
    if (options.evict_all || (options.expired && e.mtime_ns <= now_ns)) {
      if (evict(e)) ++(e.snapshot ? report.snapshots_evicted : report.expired);
    } else {
      live.push_back(std::move(e));
    }
  }
  if (options.evict_all && act) {
    // Nobody should be reading a store being emptied; free the space now.
    ForEachDirEntry(dir.TrashDir(), [&](std::string_view name) {
      if (::unlink((dir.TrashDir() + "/" + std::string(name)).c_str()) == 0) ++report.trash_unlinked;
    });
    trash_pending_bytes = 0;
    report.trash_pending = 0;
  }

  // Capacity: the store's own bytes against a configured capacity, or the filesystem's used space.
  uint64_t used = 0;
  if (options.capacity_bytes > 0) {
    report.capacity = options.capacity_bytes;
    uint64_t live_bytes = 0;
    for (const auto& e : live) live_bytes += e.bytes;
    used = live_bytes + trash_pending_bytes;
  } else {
    struct statvfs vfs {};
    if (::statvfs(dir.root().c_str(), &vfs) == 0) {
      report.capacity = uint64_t{vfs.f_blocks} * vfs.f_frsize;
      used = (uint64_t{vfs.f_blocks} - uint64_t{vfs.f_bavail}) * vfs.f_frsize;
    }
  }
  report.used_before = used;
  // What the trash holds is about to be freed (after its grace period): count it as gone.
  uint64_t projected = used > trash_pending_bytes ? used - trash_pending_bytes : 0;
  if (report.capacity > 0 && static_cast<double>(projected) > options.high_watermark * static_cast<double>(report.capacity)) {
    const auto target = static_cast<uint64_t>(options.low_watermark * static_cast<double>(report.capacity));
    // Snapshot records go first, least recently used first, then blocks: a record serves only prompts that
    // extend its sequence exactly and needs its blocks to be of use, while a block serves every prompt with
    // its prefix; and a record is many blocks' bytes (the window blocks and the model's state), so under a
    // small capacity ordering by time alone would let each new record push out the blocks it stands on.
    std::sort(live.begin(), live.end(), [](const BlockEntry& a, const BlockEntry& b) {
      if (a.snapshot != b.snapshot) return a.snapshot;
      return a.atime_ns != b.atime_ns ? a.atime_ns < b.atime_ns : a.path < b.path;
    });
    for (auto& e : live) {
      if (projected <= target) break;
      if (evict(e)) {
        ++(e.snapshot ? report.snapshots_evicted : report.capacity_evicted);
        projected = projected > e.bytes ? projected - e.bytes : 0;
        e.path.clear();  // gone
      }
    }
  }
  // Snapshot records whose blocks are gone, or that are not records at all.
  for (const auto& e : live) {
    if (!e.snapshot || e.path.empty()) continue;
    bool unreadable = false;
    const bool orphaned = SnapshotIsOrphaned(e, going, &unreadable);
    if (unreadable) ++report.errors;
    if (orphaned && evict(e)) {
      ++report.snapshots_orphaned;
      projected = projected > e.bytes ? projected - e.bytes : 0;
    }
  }
  report.used_after = projected;
  return report;
}

}  // namespace deepinfer::kvstore
