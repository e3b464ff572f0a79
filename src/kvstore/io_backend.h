// Asynchronous file operations for the store's I/O threads: io_uring (liburing) where the kernel allows it,
// otherwise a few worker threads running the same operations as plain syscalls (pread/pwrite and friends).
// Owned by kvstore; internal to it.
//
// One backend belongs to one I/O thread: Prepare/Submit/Wait are called from that thread only; Wake may be
// called from any thread and makes a blocked Wait return.
#pragma once

#include <fcntl.h>
#include <linux/stat.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace deepinfer::kvstore {

struct IoOp {
  // kReadFile is one block read as a single operation: statx(path) into stx, open(path, flags), one readv
  // into iov from offset 0, close. On io_uring the four are linked in one submission (a direct descriptor
  // in the ring's file table, never installed in the process), so the kernel goes from one to the next
  // without waiting for the I/O thread to be scheduled. result: bytes read, or -errno with `stage` saying
  // which step failed.
  enum class Kind : uint8_t { kStatx, kOpen, kReadv, kWritev, kFsync, kFdatasync, kClose, kRename, kUnlink, kReadFile };
  enum class Stage : uint8_t { kStat, kOpen, kRead };
  Kind kind = Kind::kStatx;
  int fd = -1;
  const char* path = nullptr;   // statx, open, rename (from), unlink
  const char* path2 = nullptr;  // rename (to)
  int flags = 0;                // open flags; rename flags (RENAME_NOREPLACE)
  mode_t mode = 0;
  const iovec* iov = nullptr;
  int iovcnt = 0;
  uint64_t offset = 0;
  struct statx* stx = nullptr;
  // >= 0 on success (bytes moved, or the new fd), -errno on failure.
  int result = 0;
  Stage stage = Stage::kRead;  // kReadFile: the step that failed
  void* owner = nullptr;  // the task the completion advances
};

enum class IoBackendKind { kAuto, kUring, kPosix };

class IoBackend {
 public:
  virtual ~IoBackend() = default;
  virtual std::string_view name() const = 0;
  // Queues an operation; it starts at the latest on the next Submit. `op` must stay alive until Wait
  // returns it.
  virtual void Prepare(IoOp* op) = 0;
  virtual void Submit() = 0;
  // Appends completed operations to `done`. With `block`, waits until there is at least one or Wake was
  // called; without, returns at once.
  virtual void Wait(std::vector<IoOp*>* done, bool block) = 0;
  virtual void Wake() = 0;
  // Whether kReadFile runs asynchronously here (else it would block the I/O thread: use the single steps).
  virtual bool async_read_file() const = 0;
};

// kAuto tries io_uring and falls back to the posix backend when the ring cannot be set up (no liburing in
// the build, a kernel or seccomp policy that refuses io_uring_setup). `depth` bounds operations in flight.
// `chosen_reason` says why the fallback was taken, empty otherwise.
std::unique_ptr<IoBackend> MakeIoBackend(IoBackendKind kind, int depth, std::string* chosen_reason);

// Runs one operation synchronously (what the posix backend's workers do); sets op->result.
void RunIoOpBlocking(IoOp* op);

}  // namespace deepinfer::kvstore
