#include "kvstore/io_backend.h"

#include <poll.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <string>
#include <thread>

#include "core/mutex.h"

#if DEEPINFER_HAVE_LIBURING
#include <liburing.h>
#endif

namespace deepinfer::kvstore {

namespace {

void ReadFileBlocking(IoOp* op) {
  auto fail = [op](IoOp::Stage stage) {
    op->stage = stage;
    op->result = -errno;
  };
  if (::statx(AT_FDCWD, op->path, AT_STATX_SYNC_AS_STAT, STATX_BASIC_STATS, op->stx) != 0) return fail(IoOp::Stage::kStat);
  int fd;
  do {
    fd = ::open(op->path, op->flags, op->mode);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return fail(IoOp::Stage::kOpen);
  ssize_t n;
  do {
    n = ::preadv(fd, op->iov, op->iovcnt, 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    fail(IoOp::Stage::kRead);
    ::close(fd);
    return;
  }
  ::close(fd);
  op->stage = IoOp::Stage::kRead;
  op->result = static_cast<int>(n);
}

}  // namespace

void RunIoOpBlocking(IoOp* op) {
  if (op->kind == IoOp::Kind::kReadFile) return ReadFileBlocking(op);
  int r = 0;
  do {
    switch (op->kind) {
      case IoOp::Kind::kStatx:
        r = ::statx(AT_FDCWD, op->path, AT_STATX_SYNC_AS_STAT, STATX_BASIC_STATS, op->stx);
        break;
      case IoOp::Kind::kOpen:
        r = ::open(op->path, op->flags, op->mode);
        break;
      case IoOp::Kind::kReadv:
        r = static_cast<int>(::preadv(op->fd, op->iov, op->iovcnt, static_cast<off_t>(op->offset)));
        break;
      case IoOp::Kind::kWritev:
        r = static_cast<int>(::pwritev(op->fd, op->iov, op->iovcnt, static_cast<off_t>(op->offset)));
        break;
      case IoOp::Kind::kFsync:
        r = ::fsync(op->fd);
        break;
      case IoOp::Kind::kFdatasync:
        r = ::fdatasync(op->fd);
        break;
      case IoOp::Kind::kClose:
        r = ::close(op->fd);
        if (r != 0 && errno == EINTR) r = 0;  // the descriptor is gone either way on Linux
        break;
      case IoOp::Kind::kRename:
        r = op->flags != 0 ? ::renameat2(AT_FDCWD, op->path, AT_FDCWD, op->path2, static_cast<unsigned>(op->flags))
                           : ::rename(op->path, op->path2);
        break;
      case IoOp::Kind::kUnlink:
        r = ::unlink(op->path);
        break;
      case IoOp::Kind::kReadFile:
        break;  // above
    }
  } while (r < 0 && errno == EINTR);
  op->result = r < 0 ? -errno : r;
}

namespace {

// Worker threads running operations as blocking syscalls; as many workers as operations may be in
// flight (up to 8), so a slow open or read does not hold up the others.
class PosixBackend final : public IoBackend {
 public:
  explicit PosixBackend(int depth) {
    const int workers = std::clamp(depth, 1, 8);
    for (int i = 0; i < workers; ++i) workers_.emplace_back([this] { WorkerLoop(); });
  }
  ~PosixBackend() override {
    {
      MutexLock lock(&mutex_);
      stopping_ = true;
    }
    work_cv_.SignalAll();
    for (auto& t : workers_) t.join();
  }
  std::string_view name() const override { return "posix"; }
  bool async_read_file() const override { return true; }  // a worker runs it, like any operation
  void Prepare(IoOp* op) override { pending_.push_back(op); }
  void Submit() override {
    if (pending_.empty()) return;
    {
      MutexLock lock(&mutex_);
      for (IoOp* op : pending_) work_.push_back(op);
    }
    pending_.clear();
    work_cv_.SignalAll();
  }
  void Wait(std::vector<IoOp*>* done, bool block) override {
    MutexLock lock(&mutex_);
    while (block && done_.empty() && !woken_) done_cv_.Wait(&mutex_);
    woken_ = false;
    done->insert(done->end(), done_.begin(), done_.end());
    done_.clear();
  }
  void Wake() override {
    {
      MutexLock lock(&mutex_);
      woken_ = true;
    }
    done_cv_.SignalAll();
  }

 private:
  void WorkerLoop() {
    MutexLock lock(&mutex_);
    for (;;) {
      while (!stopping_ && work_.empty()) work_cv_.Wait(&mutex_);
      if (work_.empty()) return;  // stopping, nothing left
      IoOp* op = work_.front();
      work_.pop_front();
      mutex_.Unlock();
      RunIoOpBlocking(op);
      mutex_.Lock();
      done_.push_back(op);
      done_cv_.SignalAll();
    }
  }

  std::vector<IoOp*> pending_;  // owner thread only
  Mutex mutex_;
  CondVar work_cv_;
  CondVar done_cv_;
  std::deque<IoOp*> work_ GUARDED_BY(mutex_);
  std::vector<IoOp*> done_ GUARDED_BY(mutex_);
  bool woken_ GUARDED_BY(mutex_) = false;
  bool stopping_ GUARDED_BY(mutex_) = false;
  std::vector<std::thread> workers_;
};

#if DEEPINFER_HAVE_LIBURING

// One ring per I/O thread. Wake() writes an eventfd the ring polls, so a thread blocked on completions
// also wakes for new work. Opcodes the kernel lacks (probed once) run synchronously instead.
class UringBackend final : public IoBackend {
 public:
  static std::unique_ptr<UringBackend> Create(int depth, std::string* why) {
    auto b = std::unique_ptr<UringBackend>(new UringBackend());
    // A block read is a chain of four operations (kReadFile).
    const unsigned entries = static_cast<unsigned>(std::clamp(depth * 4 + 4, 8, 4096));
    const int err = io_uring_queue_init(entries, &b->ring_, 0);
    if (err < 0) {
      *why = std::string("io_uring_queue_init: ") + std::strerror(-err);
      return nullptr;
    }
    b->ring_ok_ = true;
    b->event_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (b->event_fd_ < 0) {
      *why = std::string("eventfd: ") + std::strerror(errno);
      return nullptr;
    }
    if (io_uring_probe* probe = io_uring_get_probe_ring(&b->ring_)) {
      for (int op : {IORING_OP_STATX, IORING_OP_OPENAT, IORING_OP_READV, IORING_OP_WRITEV, IORING_OP_FSYNC,
                     IORING_OP_CLOSE, IORING_OP_RENAMEAT, IORING_OP_UNLINKAT, IORING_OP_POLL_ADD}) {
        b->supported_[op] = io_uring_opcode_supported(probe, op) != 0;
      }
      io_uring_free_probe(probe);
    } else {
      // Kernels before 5.6 cannot probe; they have readv/writev/fsync/poll for certain.
      for (int op : {IORING_OP_READV, IORING_OP_WRITEV, IORING_OP_FSYNC, IORING_OP_POLL_ADD}) b->supported_[op] = true;
    }
    if (!b->supported_[IORING_OP_READV] || !b->supported_[IORING_OP_POLL_ADD]) {
      *why = "io_uring lacks readv or poll";
      return nullptr;
    }
    // kReadFile needs direct descriptors (openat/close into the ring's file table, kernel 5.19): one slot per
    // read in flight. Without them reads take the single steps.
    if (b->supported_[IORING_OP_STATX] && b->supported_[IORING_OP_OPENAT] && b->supported_[IORING_OP_CLOSE]) {
      const unsigned slots = static_cast<unsigned>(std::clamp(depth, 1, 1024));
      if (io_uring_register_files_sparse(&b->ring_, slots) == 0) {
        b->compounds_.resize(slots);
        for (unsigned i = 0; i < slots; ++i) b->free_slots_.push_back(slots - 1 - i);
      }
    }
    b->ArmWakePoll();
    io_uring_submit(&b->ring_);
    return b;
  }

  ~UringBackend() override {
    if (ring_ok_) io_uring_queue_exit(&ring_);
    if (event_fd_ >= 0) ::close(event_fd_);
  }

  std::string_view name() const override { return "io_uring"; }
  bool async_read_file() const override { return !compounds_.empty(); }

  void Prepare(IoOp* op) override {
    if (op->kind == IoOp::Kind::kReadFile) return PrepareReadFile(op);
    const int opcode = Opcode(op->kind);
    if (!supported_[opcode]) {
      RunIoOpBlocking(op);
      inline_done_.push_back(op);
      return;
    }
    io_uring_sqe* sqe = GetSqe();
    switch (op->kind) {
      case IoOp::Kind::kStatx:
        io_uring_prep_statx(sqe, AT_FDCWD, op->path, AT_STATX_SYNC_AS_STAT, STATX_BASIC_STATS, op->stx);
        break;
      case IoOp::Kind::kOpen:
        io_uring_prep_openat(sqe, AT_FDCWD, op->path, op->flags, op->mode);
        break;
      case IoOp::Kind::kReadv:
        io_uring_prep_readv(sqe, op->fd, op->iov, static_cast<unsigned>(op->iovcnt), op->offset);
        break;
      case IoOp::Kind::kWritev:
        io_uring_prep_writev(sqe, op->fd, op->iov, static_cast<unsigned>(op->iovcnt), op->offset);
        break;
      case IoOp::Kind::kFsync:
        io_uring_prep_fsync(sqe, op->fd, 0);
        break;
      case IoOp::Kind::kFdatasync:
        io_uring_prep_fsync(sqe, op->fd, IORING_FSYNC_DATASYNC);
        break;
      case IoOp::Kind::kClose:
        io_uring_prep_close(sqe, op->fd);
        break;
      case IoOp::Kind::kRename:
        io_uring_prep_renameat(sqe, AT_FDCWD, op->path, AT_FDCWD, op->path2, static_cast<unsigned>(op->flags));
        break;
      case IoOp::Kind::kUnlink:
        io_uring_prep_unlinkat(sqe, AT_FDCWD, op->path, 0);
        break;
      case IoOp::Kind::kReadFile:
        break;  // PrepareReadFile
    }
    io_uring_sqe_set_data(sqe, op);
  }

  // statx -> openat (direct, into a free slot) -> readv (fixed file) -> close (the slot). A failed step
  // cancels the rest of the chain, except that the close is hard-linked to the read, so an opened slot is
  // always closed. Four completions come back; the operation completes with the last.
  void PrepareReadFile(IoOp* op) {
    if (free_slots_.empty()) {  // more reads in flight than slots: never with depth slots, but stay correct
      RunIoOpBlocking(op);
      inline_done_.push_back(op);
      return;
    }
    const unsigned slot = free_slots_.back();
    free_slots_.pop_back();
    Compound& c = compounds_[slot];
    c = {};
    c.op = op;
    c.remaining = 4;
    // All four SQEs of a chain must be in the ring together: make room first.
    if (io_uring_sq_space_left(&ring_) < 4) io_uring_submit(&ring_);
    io_uring_sqe* sqe = GetSqe();
    io_uring_prep_statx(sqe, AT_FDCWD, op->path, AT_STATX_SYNC_AS_STAT, STATX_BASIC_STATS, op->stx);
    Tag(sqe, slot, 0, IOSQE_IO_LINK);
    sqe = GetSqe();
    // A direct descriptor is never in the process's table: O_CLOEXEC means nothing and the kernel refuses it.
    io_uring_prep_openat_direct(sqe, AT_FDCWD, op->path, op->flags & ~O_CLOEXEC, op->mode, slot);
    Tag(sqe, slot, 1, IOSQE_IO_LINK);
    sqe = GetSqe();
    io_uring_prep_readv(sqe, static_cast<int>(slot), op->iov, static_cast<unsigned>(op->iovcnt), 0);
    Tag(sqe, slot, 2, IOSQE_FIXED_FILE | IOSQE_IO_HARDLINK);
    sqe = GetSqe();
    io_uring_prep_close_direct(sqe, slot);
    Tag(sqe, slot, 3, 0);
  }

  void Submit() override { io_uring_submit(&ring_); }

  void Wait(std::vector<IoOp*>* done, bool block) override {
    if (!inline_done_.empty()) {
      done->insert(done->end(), inline_done_.begin(), inline_done_.end());
      inline_done_.clear();
      block = false;
    }
    io_uring_cqe* cqe = nullptr;
    if (block) {
      int r;
      do {
        r = io_uring_wait_cqe(&ring_, &cqe);
      } while (r == -EINTR);
      if (r < 0) return;
    }
    unsigned head;
    unsigned seen = 0;
    bool rearm = false;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      ++seen;
      void* data = io_uring_cqe_get_data(cqe);
      if (data == &wake_marker_) {
        uint64_t value;
        while (::read(event_fd_, &value, sizeof(value)) > 0) {
        }
        rearm = true;
        continue;
      }
      const uint64_t tag = io_uring_cqe_get_data64(cqe);
      if ((tag >> 56) == kCompoundTag) {
        CompoundDone(static_cast<unsigned>((tag >> 8) & 0xffffffffu), static_cast<int>(tag & 0xff), cqe->res, done);
        continue;
      }
      auto* op = static_cast<IoOp*>(data);
      op->result = cqe->res;
      done->push_back(op);
    }
    io_uring_cq_advance(&ring_, seen);
    if (rearm) {
      ArmWakePoll();
      io_uring_submit(&ring_);
    }
  }

  void Wake() override {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(event_fd_, &one, sizeof(one));
  }

 private:
  UringBackend() = default;

  static int Opcode(IoOp::Kind kind) {
    switch (kind) {
      case IoOp::Kind::kStatx: return IORING_OP_STATX;
      case IoOp::Kind::kOpen: return IORING_OP_OPENAT;
      case IoOp::Kind::kReadv: return IORING_OP_READV;
      case IoOp::Kind::kWritev: return IORING_OP_WRITEV;
      case IoOp::Kind::kFsync:
      case IoOp::Kind::kFdatasync: return IORING_OP_FSYNC;
      case IoOp::Kind::kClose: return IORING_OP_CLOSE;
      case IoOp::Kind::kRename: return IORING_OP_RENAMEAT;
      case IoOp::Kind::kUnlink: return IORING_OP_UNLINKAT;
      case IoOp::Kind::kReadFile: return IORING_OP_NOP;  // a chain, see PrepareReadFile
    }
    return IORING_OP_NOP;
  }

  struct Compound {
    IoOp* op = nullptr;
    int remaining = 0;
    int res[4] = {};
  };
  // A chain step's user data: this tag in the top byte (user-space pointers never have it), the slot, the step.
  static constexpr uint64_t kCompoundTag = 0xC5;

  static void Tag(io_uring_sqe* sqe, unsigned slot, int step, unsigned flags) {
    io_uring_sqe_set_data64(sqe, (kCompoundTag << 56) | (uint64_t{slot} << 8) | static_cast<uint64_t>(step));
    io_uring_sqe_set_flags(sqe, flags);
  }

  void CompoundDone(unsigned slot, int step, int res, std::vector<IoOp*>* done) {
    Compound& c = compounds_[slot];
    c.res[step] = res;
    if (--c.remaining > 0) return;
    IoOp* op = c.op;
    // The first failure other than -ECANCELED is the cause: what follows a failed step reads -ECANCELED, and
    // so does the chain's head when a later step was refused as it was submitted.
    op->stage = IoOp::Stage::kRead;
    op->result = c.res[2];
    for (int i = 0; i < 3; ++i) {
      if (c.res[i] < 0 && c.res[i] != -ECANCELED) {
        op->stage = static_cast<IoOp::Stage>(i);
        op->result = c.res[i];
        break;
      }
    }
    c = {};
    free_slots_.push_back(slot);
    done->push_back(op);
  }

  io_uring_sqe* GetSqe() {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    while (sqe == nullptr) {
      io_uring_submit(&ring_);
      sqe = io_uring_get_sqe(&ring_);
    }
    return sqe;
  }

  void ArmWakePoll() {
    io_uring_sqe* sqe = GetSqe();
    io_uring_prep_poll_add(sqe, event_fd_, POLLIN);
    io_uring_sqe_set_data(sqe, &wake_marker_);
  }

  io_uring ring_{};
  bool ring_ok_ = false;
  int event_fd_ = -1;
  char wake_marker_ = 0;
  bool supported_[IORING_OP_LAST] = {};
  std::vector<IoOp*> inline_done_;
  std::vector<Compound> compounds_;  // per direct-descriptor slot
  std::vector<unsigned> free_slots_;
};

#endif  // DEEPINFER_HAVE_LIBURING

}  // namespace

std::unique_ptr<IoBackend> MakeIoBackend(IoBackendKind kind, int depth, std::string* chosen_reason) {
  chosen_reason->clear();
  if (kind == IoBackendKind::kPosix) return std::make_unique<PosixBackend>(depth);
#if DEEPINFER_HAVE_LIBURING
  std::string why;
  if (auto b = UringBackend::Create(depth, &why)) return b;
  *chosen_reason = why;
#else
  *chosen_reason = "built without liburing";
#endif
  return std::make_unique<PosixBackend>(depth);
}

}  // namespace deepinfer::kvstore
