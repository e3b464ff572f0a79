#include "kvstore/snapshot_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "core/log.h"
#include "core/sched.h"

namespace deepinfer::kvstore {
namespace {

constexpr int64_t kMaxQueuedSnapshotWrites = 64;

bool WriteWhole(int fd, const std::vector<uint8_t>& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

SnapshotFiles::SnapshotFiles(StoreDir dir, const Hash128& namespace_id, int64_t ttl_seconds)
    : dir_(std::move(dir)), namespace_id_(namespace_id), ttl_seconds_(ttl_seconds), thread_([this] { Loop(); }) {}

void SnapshotFiles::Stamp(const std::string& path, int64_t old_expiry_ns) const {
  const int64_t now_ns = UnixNanos();
  const int64_t expiry_ns = std::max(old_expiry_ns, now_ns + ttl_seconds_ * 1'000'000'000);
  struct timespec times[2];
  times[0] = {static_cast<time_t>(now_ns / 1'000'000'000), static_cast<long>(now_ns % 1'000'000'000)};
  times[1] = {static_cast<time_t>(expiry_ns / 1'000'000'000), static_cast<long>(expiry_ns % 1'000'000'000)};
  ::utimensat(AT_FDCWD, path.c_str(), times, 0);  // best effort: a read-only store still serves
}

SnapshotFiles::~SnapshotFiles() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  thread_.join();
}

std::string SnapshotFiles::PathOf(const Hash128& prefix) const {
  std::string path = dir_.BlockPath(namespace_id_, prefix);
  return path.substr(0, path.size() - 4) + ".kvs";  // beside the block files, in the same bucket
}

void SnapshotFiles::Write(SnapshotRecord record) {
  MutexLock lock(&mu_);
  if (stop_ || queued_writes_ >= kMaxQueuedSnapshotWrites) {
    ++writes_dropped_;
    return;
  }
  ++queued_writes_;
  jobs_.push_back([this, record = std::move(record)] { WriteNow(record); });
  cv_.SignalAll();
}

void SnapshotFiles::Read(const Hash128& prefix, kvcache::LowerTier::SnapshotDone done) {
  {
    MutexLock lock(&mu_);
    if (!stop_) {
      jobs_.push_back([this, prefix, done] { ReadNow(prefix, done); });
      cv_.SignalAll();
      return;
    }
  }
  done({}, nullptr);
}

void SnapshotFiles::Flush() {
  MutexLock lock(&mu_);
  while (!jobs_.empty() || busy_) cv_.Wait(&mu_);
}

uint64_t SnapshotFiles::writes_done() const {
  MutexLock lock(&mu_);
  return writes_done_;
}

uint64_t SnapshotFiles::writes_dropped() const {
  MutexLock lock(&mu_);
  return writes_dropped_;
}

void SnapshotFiles::Loop() {
  SetCurrentThreadName("di-kvs-snap");
  while (true) {
    std::function<void()> job;
    {
      MutexLock lock(&mu_);
      while (!stop_ && jobs_.empty()) cv_.Wait(&mu_);
      if (jobs_.empty()) return;  // stopping, and everything queued has run
      job = std::move(jobs_.front());
      jobs_.pop_front();
      busy_ = true;
    }
    job();
    {
      MutexLock lock(&mu_);
      busy_ = false;
    }
    cv_.SignalAll();
  }
}

void SnapshotFiles::WriteNow(const SnapshotRecord& record) {
  bool ok = false;
  auto bytes = EncodeSnapshotRecord(namespace_id_, record);
  if (bytes.ok()) {
    const std::string tmp = dir_.NewTmpPath(), path = PathOf(record.prefix);
    const std::string bucket = path.substr(0, path.rfind('/'));
    ::mkdir(bucket.c_str(), 0755);  // may exist already
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ok = WriteWhole(fd, *bytes);
      ok = ::close(fd) == 0 && ok;
      if (ok) Stamp(tmp, 0);  // before it appears, so a sweep never sees it already expired
      ok = ok && ::rename(tmp.c_str(), path.c_str()) == 0;
      if (!ok) ::unlink(tmp.c_str());
    }
    if (!ok) DI_LOG(kWarn, "kvstore: a snapshot could not be written").Field("path", path);
  }
  MutexLock lock(&mu_);
  --queued_writes_;
  if (ok) {
    ++writes_done_;
  } else {
    ++writes_dropped_;
  }
}

void SnapshotFiles::ReadNow(const Hash128& prefix, const kvcache::LowerTier::SnapshotDone& done) {
  const std::string path = PathOf(prefix);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    done({}, nullptr);  // none stored
    return;
  }
  struct stat st {};
  std::vector<uint8_t> bytes;
  bool ok = ::fstat(fd, &st) == 0 && st.st_size > 0 && static_cast<uint64_t>(st.st_size) <= kMaxSnapshotFileBytes;
  if (ok) {
    bytes.resize(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (got < bytes.size()) {
      const ssize_t n = ::pread(fd, bytes.data() + got, bytes.size() - got, static_cast<off_t>(got));
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    ok = got == bytes.size();
  }
  ::close(fd);
  if (!ok) {
    done({}, nullptr);
    return;
  }
  auto record = DecodeSnapshotRecord(bytes, namespace_id_, prefix);
  if (!record.ok()) {
    DI_LOG(kWarn, "kvstore: a snapshot failed verification").Field("path", path).Field("status", record.status().ToString());
    done({}, nullptr);
    return;
  }
  Stamp(path, int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec);
  done(std::move(record->tail), std::move(record->snapshot));
}

}  // namespace deepinfer::kvstore
