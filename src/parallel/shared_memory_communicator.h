// The collectives of a unit whose ranks all run on one host, through a shared memory segment instead of
// MPI: every per-layer expert exchange of a small decode step is a few kilobytes, and its cost through MPI is
// latency (the library's queues and the poll loop's sleeps), not bandwidth. Here every ordered pair of members
// has a single-producer, single-consumer byte ring in the segment; an all-to-all writes each part into its
// ring and reads each expected part from the ring towards it. Where both sides know every size (AllToAllV)
// the rings carry bare bytes; where only the senders do (AllToAllVSized) each part carries its size in front,
// so that one collective does what would otherwise take two. Consecutive collectives simply follow one
// another in each ring. A part larger than its ring streams through it: the receiver frees space as it reads.
//
// Waiting spins briefly (a balanced exchange completes within microseconds), then sleeps on a futex in the
// segment: the member that moves bytes for a sleeping peer wakes it, so a waiting rank neither burns its core
// nor oversleeps. A caller's idle work (AllToAllVWithIdleWork) runs instead of the first wait, once every
// part of the caller's is in its ring, so that no peer waits for this member while it runs. Every wait has
// the caller's deadline, past which the call fails naming the members it still waits for, as the MPI
// communicator's does.
//
// The segment is a POSIX shared memory object that rank 0 creates and names to the others through the
// unit's MPI communicator; once every member has mapped it the name is removed, so nothing outlives the
// unit even when it is killed. The base communicator stays the unit's way to end every member (Abort).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "core/status.h"
#include "parallel/communicator.h"

namespace deepinfer::parallel {

// A mapped segment of `members` members' rings (every member maps the same object).
class SharedMemorySegment {
 public:
  ~SharedMemorySegment();
  SharedMemorySegment(const SharedMemorySegment&) = delete;
  SharedMemorySegment& operator=(const SharedMemorySegment&) = delete;

  // Creates the POSIX shared memory object `name` ("/..."), with room reserved up front (so that a full
  // /dev/shm is an error here rather than a SIGBUS mid-step), and lays out its rings.
  static Result<std::unique_ptr<SharedMemorySegment>> Create(const std::string& name, int members, int64_t ring_bytes);
  // Maps an object another member created; checks its layout is one this build understands.
  static Result<std::unique_ptr<SharedMemorySegment>> Open(const std::string& name, int members);
  // Removes the object's name (the mappings stay valid).
  static void Unlink(const std::string& name);

  int members() const { return members_; }
  int64_t ring_bytes() const { return ring_bytes_; }
  uint8_t* base() const { return base_; }

  // The ring size for `members` members: a fixed total budget shared by the N·(N−1) rings (containers often
  // give /dev/shm only 64 MiB), within [64 KiB, 4 MiB].
  static int64_t RingBytesFor(int members);

 private:
  SharedMemorySegment(uint8_t* base, size_t length, int members, int64_t ring_bytes)
      : base_(base), length_(length), members_(members), ring_bytes_(ring_bytes) {}
  uint8_t* base_;
  size_t length_;
  int members_;
  int64_t ring_bytes_;
};

// How long a member spins for its peers before it sleeps on the futex (counted from the last bytes it
// moved). Spinning, not yielding: on a loaded machine a yield hands the core to another process for a whole
// time slice, and a sleeper is woken sooner than a spinner that has used up its share.
struct SharedMemoryWait {
  double spin_s = 50e-6;
};

class SharedMemoryCommunicator final : public Communicator {
 public:
  // Member `rank` of the segment's members; `base` (may be null in tests) ends the unit on Abort.
  SharedMemoryCommunicator(std::shared_ptr<SharedMemorySegment> segment, int rank, Communicator* base,
                           SharedMemoryWait wait = {});

  int rank() const override { return rank_; }
  int size() const override { return segment_->members(); }
  Status AllToAllV(const uint8_t* send, std::span<const int64_t> send_bytes, uint8_t* recv,
                   std::span<const int64_t> recv_bytes, double timeout_s) override;
  Status AllToAllVWithIdleWork(const uint8_t* send, std::span<const int64_t> send_bytes, uint8_t* recv,
                               std::span<const int64_t> recv_bytes, double timeout_s,
                               std::function<void()>* idle_work) override;
  // One collective: each ring carries the part's size (8 bytes) in front of its bytes, so that the sizes
  // need no collective of their own. The receiver reads every peer's size first and takes the parts once it
  // knows them all (room for them in rank order); until then the parts wait in the rings, which the peers
  // fill as usual.
  Status AllToAllVSized(const uint8_t* send, std::span<const int64_t> send_bytes,
                        const std::function<uint8_t*(int64_t)>& receive_into, std::span<int64_t> recv_bytes,
                        int64_t max_part_bytes, double timeout_s, std::function<void()>* idle_work) override;
  [[noreturn]] void Abort(int code) override;
  const char* transport() const override { return "shared memory"; }

 private:
  // Both all-to-alls: with `sized` null every size is known (recv_bytes and recv given); else the sizes
  // travel in the rings, land in sized->recv_bytes, and recv comes from sized->receive_into.
  struct Sized {
    const std::function<uint8_t*(int64_t)>* receive_into;
    std::span<int64_t> recv_bytes;
    int64_t max_part_bytes;
  };
  Status Move(const uint8_t* send, std::span<const int64_t> send_bytes, uint8_t* recv,
              std::span<const int64_t> recv_bytes, const Sized* sized, double timeout_s,
              std::function<void()>* idle_work);
  std::shared_ptr<SharedMemorySegment> segment_;
  int rank_;
  Communicator* base_;
  SharedMemoryWait wait_;
};

// The unit's collectives over shared memory when every member of `base` runs on this host (same host name
// and boot), else `base` itself. Set-up talks through `base` within timeout_s; a member that cannot make or
// map the segment makes every member keep `base` (with a note on stderr from rank 0), as does
// DEEPINFER_EP_TRANSPORT=mpi. The result borrows `base`, which must outlive it.
Result<Communicator*> OpenSameHostCommunicator(Communicator& base, double timeout_s,
                                               std::unique_ptr<Communicator>* owned);

}  // namespace deepinfer::parallel
