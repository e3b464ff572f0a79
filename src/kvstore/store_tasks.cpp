// The store's I/O state machines: writing a block behind (stat, create a temporary, write, sync, stamp its
// times, rename into place), reading and verifying one (one chained statx-open-read-close where the backend
// has it), and looking hashes up.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "kvstore/store_internal.h"

namespace deepinfer::kvstore::internal {
namespace {

int64_t StatxNanos(const struct statx_timestamp& t) { return t.tv_sec * 1'000'000'000 + t.tv_nsec; }
int64_t StatNanos(const struct timespec& t) { return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec; }

struct timespec ToTimespec(int64_t ns) {
  return {static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
}

// Skips `n` bytes of an iovec array in place; returns the first iovec still holding data.
int AdvanceIov(std::vector<iovec>* iov, int first, size_t n) {
  while (n > 0 && first < static_cast<int>(iov->size())) {
    iovec& v = (*iov)[first];
    if (n < v.iov_len) {
      v.iov_base = static_cast<uint8_t*>(v.iov_base) + n;
      v.iov_len -= n;
      return first;
    }
    n -= v.iov_len;
    v.iov_len = 0;
    ++first;
  }
  return first;
}

class WriteTask final : public Task {
 public:
  WriteTask(Store::Impl* s, const Hash128& hash, TtlClass ttl, StagingBuffer buffer, uint64_t bytes)
      : s_(s), hash_(hash), ttl_(ttl), buffer_(std::move(buffer)), bytes_(bytes) {
    is_write = true;
  }

  bool Start(IoBackend& io) override {
    start_ns_ = NowNanos();
    if (UnixMillis() < s_->writes_paused_until_ms.load()) {
      // The store became unwritable while this waited: drop it rather than fail it again.
      s_->counters.writes_dropped.fetch_add(1);
      return Done(false);
    }
    final_path_ = s_->dir.BlockPath(s_->ns, hash_);
    const std::span<const uint8_t> payload(buffer_.get() + kHeaderBytes, bytes_ - kHeaderBytes);
    SealHeader(std::span<uint8_t, kHeaderBytes>(buffer_.get(), kHeaderBytes), std::span(&payload, 1));
    op_ = {};
    op_.kind = IoOp::Kind::kStatx;
    op_.path = final_path_.c_str();
    op_.stx = &stx_;
    Issue(io, State::kStat);
    return false;
  }

  bool OnComplete(IoOp* op, IoBackend& io) override {
    const int r = op->result;
    switch (state_) {
      case State::kStat:
        if (r == 0 && stx_.stx_size == bytes_) {
          // Another process (or an earlier run) wrote it: refresh its life instead.
          s_->RefreshTimes(final_path_, StatxNanos(stx_.stx_atime), StatxNanos(stx_.stx_mtime), ttl_);
          s_->counters.writes_present.fetch_add(1);
          return Done(true);
        }
        tmp_path_ = s_->dir.NewTmpPath();
        op_ = {};
        op_.kind = IoOp::Kind::kOpen;
        op_.path = tmp_path_.c_str();
        op_.flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC;
        op_.mode = 0644;
        Issue(io, State::kOpen);
        return false;
      case State::kOpen:
        if (r < 0) return Fail(-r, "create");
        fd_ = r;
        written_ = 0;
        IssueWrite(io);
        return false;
      case State::kWrite:
        if (r < 0) return Fail(-r, "write");
        if (r == 0) return Fail(EIO, "write");
        written_ += static_cast<uint64_t>(r);
        if (written_ < bytes_) {
          IssueWrite(io);
          return false;
        }
        if (s_->options.fsync != FsyncPolicy::kNone) {
          op_ = {};
          op_.kind = IoOp::Kind::kFdatasync;
          op_.fd = fd_;
          Issue(io, State::kSync);
          return false;
        }
        return StampAndClose(io);
      case State::kSync:
        if (r < 0) return Fail(-r, "fdatasync");
        return StampAndClose(io);
      case State::kClose:
        fd_ = -1;
        if (r < 0) return Fail(-r, "close");  // NFS reports deferred write errors here
        IssueRename(io);
        return false;
      case State::kRename:
        if (r == -EINVAL && op_.flags != 0) {
          s_->rename_noreplace.store(false);  // the filesystem has no RENAME_NOREPLACE: a plain rename is fine
          IssueRename(io);
          return false;
        }
        if (r == -EEXIST) {
          ::unlink(tmp_path_.c_str());
          tmp_path_.clear();
          s_->counters.writes_present.fetch_add(1);
          return Done(true);
        }
        if (r == -ENOENT && !made_dirs_) {
          made_dirs_ = true;
          ::mkdir(s_->dir.NamespaceDir(s_->ns).c_str(), 0755);
          ::mkdir(s_->dir.BucketDir(s_->ns, hash_).c_str(), 0755);
          IssueRename(io);
          return false;
        }
        if (r < 0) return Fail(-r, "rename");
        tmp_path_.clear();
        if (s_->options.fsync == FsyncPolicy::kFull) SyncBucketDir();
        s_->counters.writes_done.fetch_add(1);
        s_->counters.bytes_written.fetch_add(bytes_);
        s_->write_latency.Record(static_cast<double>(NowNanos() - start_ns_) * 1e-9);
        s_->NoteWriteOk();
        return Done(true);
    }
    return Done(false);
  }

  void Cancel() override {
    s_->counters.writes_dropped.fetch_add(1);
    s_->WriteFinished(hash_, bytes_, false);
  }

 private:
  enum class State { kStat, kOpen, kWrite, kSync, kClose, kRename };

  void Issue(IoBackend& io, State next) {
    state_ = next;
    op_.owner = this;
    io.Prepare(&op_);
  }

  void IssueWrite(IoBackend& io) {
    iov_ = {buffer_.get() + written_, bytes_ - written_};
    op_ = {};
    op_.kind = IoOp::Kind::kWritev;
    op_.fd = fd_;
    op_.iov = &iov_;
    op_.iovcnt = 1;
    op_.offset = written_;
    Issue(io, State::kWrite);
  }

  // The file's times carry its life (see sweeper.h): atime = now, mtime = expiry. Set before the rename,
  // so a block is never visible without them.
  bool StampAndClose(IoBackend& io) {
    const int64_t now_ns = UnixNanos();
    const struct timespec times[2] = {
        ToTimespec(now_ns), ToTimespec(now_ns + s_->options.ttl_seconds[static_cast<int>(ttl_)] * 1'000'000'000)};
    if (::futimens(fd_, times) != 0) return Fail(errno, "futimens");
    op_ = {};
    op_.kind = IoOp::Kind::kClose;
    op_.fd = fd_;
    Issue(io, State::kClose);
    return false;
  }

  void IssueRename(IoBackend& io) {
    op_ = {};
    op_.kind = IoOp::Kind::kRename;
    op_.path = tmp_path_.c_str();
    op_.path2 = final_path_.c_str();
    op_.flags = s_->rename_noreplace.load() ? RENAME_NOREPLACE : 0;
    Issue(io, State::kRename);
  }

  void SyncBucketDir() {
    const int fd = ::open(s_->dir.BucketDir(s_->ns, hash_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    ::fsync(fd);
    ::close(fd);
  }

  bool Fail(int err, const char* what) {
    if (fd_ >= 0) {
      ::close(fd_);
      fd_ = -1;
    }
    if (!tmp_path_.empty()) ::unlink(tmp_path_.c_str());
    s_->counters.writes_failed.fetch_add(1);
    s_->NoteWriteError(err, tmp_path_.empty() ? final_path_ : tmp_path_, what);
    tmp_path_.clear();
    return Done(false);
  }

  bool Done(bool present) {
    buffer_.reset();
    s_->WriteFinished(hash_, bytes_, present);
    return true;
  }

  Store::Impl* s_;
  const Hash128 hash_;
  const TtlClass ttl_;
  StagingBuffer buffer_;
  const uint64_t bytes_;
  State state_ = State::kStat;
  IoOp op_;
  struct statx stx_ {};
  iovec iov_{};
  std::string final_path_;
  std::string tmp_path_;
  int fd_ = -1;
  uint64_t written_ = 0;
  bool made_dirs_ = false;
  int64_t start_ns_ = 0;
};

class ReadTask final : public Task {
 public:
  ReadTask(Store::Impl* s, std::shared_ptr<ReadBatch> batch, size_t index)
      : s_(s), batch_(std::move(batch)), index_(index), item_(batch_->items[index]) {}

  bool Start(IoBackend& io) override {
    start_ns_ = NowNanos();
    const auto& seg = s_->options.layout.segment_bytes;
    bool ok = item_.tokens.size() == kvcache::kBlockTokens && item_.dest.size() == seg.size();
    for (size_t i = 0; ok && i < seg.size(); ++i) ok = item_.dest[i].size() == seg[i];
    if (!ok) return Done(Status::InvalidArgument("kvstore: read item does not match the store layout"), VerifyFailure::kNone);
    path_ = s_->dir.BlockPath(s_->ns, item_.hash);
    direct_ = s_->options.direct_io && s_->direct_io_ok.load();
    if (io.async_read_file()) return IssueReadFile(io);
    IssueOpen(io);
    return false;
  }

  bool OnComplete(IoOp* op, IoBackend& io) override {
    const int r = op->result;
    switch (state_) {
      case State::kReadFile: {
        if (op->stage == IoOp::Stage::kOpen && r == -EINVAL && direct_) {
          s_->direct_io_ok.store(false);  // tmpfs and some network filesystems refuse O_DIRECT
          direct_ = false;
          return IssueReadFile(io);
        }
        if (op->stage != IoOp::Stage::kRead && (r == -ENOENT || r == -ENOTDIR)) {
          s_->counters.miss_blocks.fetch_add(1);
          return Done(Status::NotFound("not in the store"), VerifyFailure::kNone);
        }
        if (r < 0) return IoFailure(-r, op->stage == IoOp::Stage::kStat ? "statx" : op->stage == IoOp::Stage::kOpen ? "open" : "read");
        atime_ns_ = StatxNanos(stx_.stx_atime);
        mtime_ns_ = StatxNanos(stx_.stx_mtime);
        // The read asked for a page more than a block file holds, so its length is the file's size (statx
        // was another lookup of the path and may have seen another file).
        got_ = static_cast<uint64_t>(r);
        if (got_ == s_->file_bytes) return Finish();
        if (got_ < s_->file_bytes && stx_.stx_size == s_->file_bytes) {
          // A short read of a whole file (never seen on a local filesystem): read it again step by step.
          IssueOpen(io);
          return false;
        }
        return Refuse(VerifyFailure::kTruncated);
      }
      case State::kOpen: {
        if (r == -EINVAL && direct_) {
          s_->direct_io_ok.store(false);  // tmpfs and some network filesystems refuse O_DIRECT
          direct_ = false;
          IssueOpen(io);
          return false;
        }
        if (r == -ENOENT || r == -ENOTDIR) {
          s_->counters.miss_blocks.fetch_add(1);
          return Done(Status::NotFound("not in the store"), VerifyFailure::kNone);
        }
        if (r < 0) return IoFailure(-r, "open");
        fd_ = r;
        struct stat st {};
        if (::fstat(fd_, &st) != 0) return IoFailure(errno, "fstat");
        atime_ns_ = StatNanos(st.st_atim);
        mtime_ns_ = StatNanos(st.st_mtim);
        if (static_cast<uint64_t>(st.st_size) != s_->file_bytes) {
          CloseNow();
          return Refuse(VerifyFailure::kTruncated);
        }
        if (!PrepareBuffers()) return IoFailure(ENOMEM, "allocate");
        got_ = 0;
        IssueRead(io);
        return false;
      }
      case State::kRead: {
        if (r < 0) return IoFailure(-r, "read");
        got_ += static_cast<uint64_t>(r);
        if (r != 0 && got_ < s_->file_bytes) {
          IssueRead(io);
          return false;
        }
        // EOF before the size fstat gave means the file changed under us (it never should). The close runs
        // here, not on the ring: a read-only descriptor's close does no I/O, and a ring round trip per
        // block is latency every read in the batch would wait for.
        CloseNow();
        if (got_ < s_->file_bytes) return Refuse(VerifyFailure::kTruncated);
        return Finish();
      }
    }
    return Done(Status::Internal("kvstore: bad read state"), VerifyFailure::kNone);
  }

  void Cancel() override { Done(Status::Cancelled("kvstore: the store closed"), VerifyFailure::kNone); }

 private:
  enum class State { kReadFile, kOpen, kRead };

  // The whole file is in header_ and the destinations (or the bounce buffer): verify and report.
  bool Finish() {
    const VerifyFailure failure = Verify();
    if (failure != VerifyFailure::kNone) return Refuse(failure);
    s_->RefreshTimes(path_, atime_ns_, mtime_ns_, item_.ttl);
    s_->counters.hit_blocks.fetch_add(1);
    s_->RecordRead(static_cast<double>(NowNanos() - start_ns_) * 1e-9, s_->file_bytes);
    batch_->bytes.fetch_add(s_->file_bytes);
    {
      MutexLock lock(&s_->write_mutex);
      s_->RememberPresentLocked(item_.hash);
    }
    if (direct_) s_->counters.direct_reads.fetch_add(1);
    if (bounced_) s_->counters.bounced_reads.fetch_add(1);
    return Done(Status::Ok(), VerifyFailure::kNone);
  }

  // O_DIRECT straight into the destination when every segment is page-aligned in address and size (the
  // pool's blocks are, for V4-Flash's groups): no bounce buffer to allocate, fault in and copy. The bounce
  // buffer has room for the one-page overread of IssueReadFile.
  bool PrepareBuffers() {
    bounced_ = direct_ && !DestinationsAligned();
    if (bounced_ && bounce_ == nullptr) bounce_ = AllocateStaging(s_->file_bytes + kDirectAlign);
    return !bounced_ || bounce_ != nullptr;
  }

  // The whole read as one backend operation (statx, open, read, close), asking for a page more than the
  // file should hold so that a longer file shows in the length read.
  bool IssueReadFile(IoBackend& io) {
    if (!PrepareBuffers()) return IoFailure(ENOMEM, "allocate");
    iov_.clear();
    if (bounced_) {
      const uint64_t rounded = (s_->file_bytes + kDirectAlign - 1) / kDirectAlign * kDirectAlign;
      iov_.push_back({bounce_.get(), rounded + kDirectAlign});
    } else {
      iov_.push_back({header_, kHeaderBytes});
      for (const auto& d : item_.dest) iov_.push_back({d.data(), d.size()});
      iov_.push_back({overread_.get(), kDirectAlign});
    }
    op_ = {};
    op_.kind = IoOp::Kind::kReadFile;
    op_.path = path_.c_str();
    op_.flags = O_RDONLY | O_CLOEXEC | (direct_ ? O_DIRECT : 0);
    op_.stx = &stx_;
    op_.iov = iov_.data();
    op_.iovcnt = static_cast<int>(iov_.size());
    Issue(io, State::kReadFile);
    return false;
  }

  bool DestinationsAligned() const {
    for (const auto& d : item_.dest) {
      if (reinterpret_cast<uintptr_t>(d.data()) % kDirectAlign != 0 || d.size() % kDirectAlign != 0) return false;
    }
    return true;
  }

  void Issue(IoBackend& io, State next) {
    state_ = next;
    op_.owner = this;
    io.Prepare(&op_);
  }

  void IssueOpen(IoBackend& io) {
    op_ = {};
    op_.kind = IoOp::Kind::kOpen;
    op_.path = path_.c_str();
    op_.flags = O_RDONLY | O_CLOEXEC | (direct_ ? O_DIRECT : 0);
    Issue(io, State::kOpen);
  }

  void IssueRead(IoBackend& io) {
    op_ = {};
    op_.kind = IoOp::Kind::kReadv;
    op_.fd = fd_;
    // O_DIRECT needs aligned offsets and lengths: after a short read, go on from the start of the page it
    // ended in (short O_DIRECT reads happen only at EOF, so this loops at most once in practice).
    if (direct_) got_ = got_ / kDirectAlign * kDirectAlign;
    iov_.clear();
    if (bounced_) {
      const uint64_t rounded = (s_->file_bytes + kDirectAlign - 1) / kDirectAlign * kDirectAlign;
      iov_.push_back({bounce_.get() + got_, rounded - got_});
    } else {
      iov_.push_back({header_, kHeaderBytes});
      for (const auto& d : item_.dest) iov_.push_back({d.data(), d.size()});
      AdvanceIov(&iov_, 0, got_);
      while (!iov_.empty() && iov_.front().iov_len == 0) iov_.erase(iov_.begin());
    }
    op_.iov = iov_.data();
    op_.iovcnt = static_cast<int>(iov_.size());
    op_.offset = got_;
    Issue(io, State::kRead);
  }

  void CloseNow() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  VerifyFailure Verify() {
    if (bounced_) {
      std::memcpy(header_, bounce_.get(), kHeaderBytes);
      const uint8_t* p = bounce_.get() + kHeaderBytes;
      for (const auto& d : item_.dest) {
        std::memcpy(d.data(), p, d.size());
        p += d.size();
      }
      bounce_.reset();
    }
    const std::span<const uint8_t, kHeaderBytes> header(header_, kHeaderBytes);
    auto decoded = DecodeHeader(header);
    if (!decoded.ok()) {
      return decoded.status().code() == StatusCode::kFailedPrecondition ? VerifyFailure::kVersion : VerifyFailure::kHeader;
    }
    const BlockHeader& h = *decoded;
    if (h.payload_bytes != s_->options.layout.payload_bytes()) return VerifyFailure::kHeader;
    std::vector<std::span<const uint8_t>> payload(item_.dest.begin(), item_.dest.end());
    // The checksum first, so damage anywhere counts as damage and not as, say, a token mismatch.
    if (ComputeChecksum(header, payload) != h.checksum) return VerifyFailure::kChecksum;
    if (h.namespace_id != s_->ns) return VerifyFailure::kNamespace;
    if (h.block_hash != item_.hash || (item_.check_parent && h.parent_hash != item_.parent)) return VerifyFailure::kHash;
    if (!std::equal(h.tokens.begin(), h.tokens.end(), item_.tokens.begin())) return VerifyFailure::kTokens;
    return VerifyFailure::kNone;
  }

  bool Refuse(VerifyFailure why) {
    s_->Quarantine(path_, item_.hash, why);
    return Done(Status::DataLoss(std::string("kvstore: block failed verification (") +
                                 std::string(VerifyFailureName(why)) + ")"),
                why);
  }

  bool IoFailure(int err, const char* what) {
    CloseNow();
    s_->counters.verify_failures[static_cast<int>(VerifyFailure::kIo)].fetch_add(1);
    return Done(Status::IoError(std::string("kvstore: ") + what + " " + path_ + ": " + std::strerror(err)),
                VerifyFailure::kIo);
  }

  bool Done(Status status, VerifyFailure failure) {
    CloseNow();
    batch_->results[index_] = {std::move(status), failure};
    if (batch_->remaining.fetch_sub(1) == 1) {
      s_->RecordBatch(static_cast<double>(NowNanos() - batch_->start_ns) * 1e-9, batch_->bytes.load());
      auto done = std::move(batch_->done);
      done(std::move(batch_->results));
    }
    return true;
  }

  Store::Impl* s_;
  std::shared_ptr<ReadBatch> batch_;
  const size_t index_;
  const ReadItem& item_;
  State state_ = State::kOpen;
  IoOp op_;
  // Page-aligned, so an O_DIRECT read can fill it in the same readv as the payload.
  alignas(kDirectAlign) uint8_t header_[kHeaderBytes];
  StagingBuffer overread_ = AllocateStaging(kDirectAlign);  // where a file longer than a block's would spill
  StagingBuffer bounce_;
  struct statx stx_ {};
  std::vector<iovec> iov_;
  std::string path_;
  int fd_ = -1;
  bool direct_ = false;
  bool bounced_ = false;  // direct_, through bounce_ (a destination is not page-aligned)
  uint64_t got_ = 0;
  int64_t atime_ns_ = 0;
  int64_t mtime_ns_ = 0;
  int64_t start_ns_ = 0;
};

class LookupTask final : public Task {
 public:
  LookupTask(Store::Impl* s, std::vector<Hash128> hashes, LookupDone done)
      : s_(s), hashes_(std::move(hashes)), done_(std::move(done)) {}

  bool Start(IoBackend& io) override {
    const size_t n = hashes_.size();
    if (n == 0) return Finish();
    paths_.resize(n);
    stx_.resize(n);
    ops_.resize(n);
    remaining_ = n;
    for (size_t i = 0; i < n; ++i) {
      paths_[i] = s_->dir.BlockPath(s_->ns, hashes_[i]);
      ops_[i].kind = IoOp::Kind::kStatx;
      ops_[i].path = paths_[i].c_str();
      ops_[i].stx = &stx_[i];
      ops_[i].owner = this;
      io.Prepare(&ops_[i]);
    }
    return false;
  }

  bool OnComplete(IoOp*, IoBackend&) override { return --remaining_ == 0 ? Finish() : false; }

  void Cancel() override { done_(LookupResult{std::vector<bool>(hashes_.size(), false), 0}); }

 private:
  bool Finish() {
    LookupResult result;
    result.present.resize(hashes_.size());
    bool in_prefix = true;
    uint64_t present = 0;
    for (size_t i = 0; i < hashes_.size(); ++i) {
      result.present[i] = ops_[i].result == 0 && stx_[i].stx_size == s_->file_bytes;
      present += result.present[i] ? 1 : 0;
      in_prefix = in_prefix && result.present[i];
      if (in_prefix) result.prefix = i + 1;
    }
    s_->counters.lookups.fetch_add(hashes_.size());
    s_->counters.lookup_present.fetch_add(present);
    done_(std::move(result));
    return true;
  }

  Store::Impl* s_;
  std::vector<Hash128> hashes_;
  LookupDone done_;
  std::vector<std::string> paths_;
  std::vector<struct statx> stx_;
  std::vector<IoOp> ops_;
  size_t remaining_ = 0;
};

}  // namespace

Task* MakeWriteTask(Store::Impl* store, const Hash128& hash, TtlClass ttl, StagingBuffer buffer, uint64_t bytes) {
  return new WriteTask(store, hash, ttl, std::move(buffer), bytes);
}
Task* MakeReadTask(Store::Impl* store, std::shared_ptr<ReadBatch> batch, size_t index) {
  return new ReadTask(store, std::move(batch), index);
}
Task* MakeLookupTask(Store::Impl* store, std::vector<Hash128> hashes, LookupDone done) {
  return new LookupTask(store, std::move(hashes), std::move(done));
}

}  // namespace deepinfer::kvstore::internal
