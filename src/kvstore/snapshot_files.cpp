#include "kvstore/snapshot_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iterator>

#include "core/log.h"
#include "core/sched.h"
#include "kvstore/file_io.h"

namespace deepinfer::kvstore {
namespace {

constexpr int64_t kMaxQueuedSnapshotWrites = 64;

// Writes the pieces one after another, straight from where they are (no copy of the record is made).
bool WriteWhole(int fd, std::vector<std::span<const uint8_t>> pieces) {
  std::erase_if(pieces, [](std::span<const uint8_t> piece) { return piece.empty(); });
  size_t first = 0;
  while (first < pieces.size()) {
    std::vector<iovec> io;
    for (size_t i = first; i < pieces.size(); ++i)
      io.push_back({const_cast<uint8_t*>(pieces[i].data()), pieces[i].size()});
    ssize_t n = ::writev(fd, io.data(), static_cast<int>(io.size()));
    if (n <= 0) return false;
    while (first < pieces.size() && static_cast<size_t>(n) >= pieces[first].size()) {
      n -= static_cast<ssize_t>(pieces[first].size());
      ++first;
    }
    if (first < pieces.size()) pieces[first] = pieces[first].subspan(static_cast<size_t>(n));
  }
  return true;
}

// Whether the file at `path` begins with `head`: then it holds this very record, state and blocks included
// (the head's checksum covers them), written by an earlier offer of the same snapshot (a prefill unit's,
// before its decode unit finishes the same prompt) or by this one.
bool StoredWithHead(const std::string& path, std::span<const uint8_t> head) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  std::vector<uint8_t> stored(head.size());
  const ssize_t n = ::pread(fd, stored.data(), stored.size(), 0);
  ::close(fd);
  return n == static_cast<ssize_t>(head.size()) && std::equal(head.begin(), head.end(), stored.begin());
}

// The head first, then the state and the blocks straight into the vectors the snapshot keeps (no copy of
// the file is made). kUnavailable: the file could not be read; kDataLoss and the rest: it is not a record.
Result<SnapshotRecord> ReadRecord(int fd, uint64_t file_bytes, const Hash128& namespace_id, const Hash128& prefix) {
  if (file_bytes < kSnapshotHeaderBytes) return Status::DataLoss("snapshot record: truncated header");
  std::vector<uint8_t> head(kSnapshotHeaderBytes);
  if (!ReadAt(fd, head, 0)) return Status::Unavailable("snapshot record: a read failed");
  DI_ASSIGN_OR_RETURN(const SnapshotRecordSizes sizes, SnapshotRecordSizesOf(head));
  if (sizes.file_bytes() != file_bytes)
    return Status::DataLoss("snapshot record: the file's size does not match its header");
  head.resize(sizes.head_bytes());
  std::vector<uint8_t> state(sizes.state_bytes), blocks(sizes.block_bytes);
  if (!ReadAt(fd, std::span(head).subspan(kSnapshotHeaderBytes), kSnapshotHeaderBytes) ||
      !ReadAt(fd, state, sizes.head_bytes()) || !ReadAt(fd, blocks, sizes.head_bytes() + sizes.state_bytes))
    return Status::Unavailable("snapshot record: a read failed");
  return DecodeSnapshotPieces(head, std::move(state), std::move(blocks), namespace_id, prefix);
}

}  // namespace

SnapshotFiles::SnapshotFiles(StoreDir dir, const Hash128& namespace_id, int64_t ttl_seconds, SnapshotWrites writes)
    : dir_(std::move(dir)), namespace_id_(namespace_id), ttl_seconds_(ttl_seconds), writes_(writes),
      thread_([this] { Loop(kReads); }), write_thread_([this] { Loop(kWrites); }) {}

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
  write_thread_.join();
}

void SnapshotFiles::SetWrites(SnapshotWrites writes) {
  MutexLock lock(&mu_);
  writes_ = writes;
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
  queues_[writes_ == SnapshotWrites::kBackground ? kWrites : kReads].jobs.push_back(
      [this, record = std::move(record)] { WriteNow(record); });
  cv_.SignalAll();
}

void SnapshotFiles::Read(const Hash128& prefix, kvcache::LowerTier::SnapshotDone done) {
  {
    MutexLock lock(&mu_);
    if (!stop_) {
      queues_[kReads].jobs.push_back([this, prefix, done] { ReadNow(prefix, done); });
      cv_.SignalAll();
      return;
    }
  }
  done({}, nullptr);
}

void SnapshotFiles::Flush() {
  MutexLock lock(&mu_);
  auto idle = [this]() REQUIRES(mu_) {
    return std::all_of(std::begin(queues_), std::end(queues_),
                       [](const JobQueue& q) { return q.jobs.empty() && !q.busy; });
  };
  while (!idle()) cv_.Wait(&mu_);
}

uint64_t SnapshotFiles::writes_done() const {
  MutexLock lock(&mu_);
  return writes_done_;
}

uint64_t SnapshotFiles::writes_present() const {
  MutexLock lock(&mu_);
  return writes_present_;
}

uint64_t SnapshotFiles::writes_dropped() const {
  MutexLock lock(&mu_);
  return writes_dropped_;
}

void SnapshotFiles::Loop(int queue) {
  if (queue == kWrites) {
    SetCurrentThreadName("di-kvs-snap-w");
    if (const Status s = SetThreadBackgroundPriority(); !s.ok())
      DI_LOG(kWarn, "kvstore: snapshot writes stay at normal priority").Field("status", s.ToString());
  } else {
    SetCurrentThreadName("di-kvs-snap");
  }
  while (true) {
    std::function<void()> job;
    {
      MutexLock lock(&mu_);
      JobQueue& q = queues_[queue];
      while (!stop_ && q.jobs.empty()) cv_.Wait(&mu_);
      if (q.jobs.empty()) return;  // stopping, and everything queued here has run
      job = std::move(q.jobs.front());
      q.jobs.pop_front();
      q.busy = true;
    }
    job();
    {
      MutexLock lock(&mu_);
      queues_[queue].busy = false;
    }
    cv_.SignalAll();
  }
}

void SnapshotFiles::WriteNow(const SnapshotRecord& record) {
  bool ok = false, present = false;
  auto head = EncodeSnapshotHead(namespace_id_, record);
  if (head.ok()) {
    const std::string tmp = dir_.NewTmpPath(), path = PathOf(record.prefix);
    // Snapshots are exact, so the same tokens under the same name give the same bytes: one stored already is
    // kept (the sizes, tail and checksum in its head say it is this one) and only gets this write's times.
    struct stat st {};
    present = ::stat(path.c_str(), &st) == 0 &&
              static_cast<uint64_t>(st.st_size) ==
                  head->size() + record.snapshot->state.size() + record.snapshot->blocks.size() &&
              StoredWithHead(path, *head);
    if (present) {
      Stamp(path, int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec);
      ok = true;
    } else {
      const std::string bucket = path.substr(0, path.rfind('/'));
      ::mkdir(bucket.c_str(), 0755);  // may exist already
      const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd >= 0) {
        ok = WriteWhole(fd, {*head, record.snapshot->state, record.snapshot->blocks});
        ok = ::close(fd) == 0 && ok;
        if (ok) Stamp(tmp, 0);  // before it appears, so a sweep never sees it already expired
        ok = ok && ::rename(tmp.c_str(), path.c_str()) == 0;
        if (!ok) ::unlink(tmp.c_str());
      }
    }
    if (!ok) DI_LOG(kWarn, "kvstore: a snapshot could not be written").Field("path", path);
  }
  MutexLock lock(&mu_);
  --queued_writes_;
  if (present) {
    ++writes_present_;
  } else if (ok) {
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
  const bool sized =
      ::fstat(fd, &st) == 0 && st.st_size > 0 && static_cast<uint64_t>(st.st_size) <= kMaxSnapshotFileBytes;
  Result<SnapshotRecord> record = sized ? ReadRecord(fd, static_cast<uint64_t>(st.st_size), namespace_id_, prefix)
                                        : Result<SnapshotRecord>(Status::Unavailable("snapshot record: no size"));
  ::close(fd);
  if (!record.ok()) {
    if (record.status().code() != StatusCode::kUnavailable)
      DI_LOG(kWarn, "kvstore: a snapshot failed verification")
          .Field("path", path)
          .Field("status", record.status().ToString());
    done({}, nullptr);
    return;
  }
  Stamp(path, int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec);
  done(std::move(record->tail), std::move(record->snapshot));
}

}  // namespace deepinfer::kvstore
