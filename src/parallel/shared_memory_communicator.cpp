#include "parallel/shared_memory_communicator.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/hash.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace deepinfer::parallel {
namespace {

// The segment's layout: a header line, one line per member (its doorbell and whether it sleeps), a control
// block per ring (the producer's and the consumer's counters on lines of their own, so that the two sides
// do not share a cache line), then the rings' bytes, page aligned.
constexpr uint64_t kMagic = 0x6d68735f66696464;  // identifies a deepinfer segment of this layout
constexpr uint32_t kLayoutVersion = 1;
constexpr size_t kLine = 64;
constexpr size_t kPage = 4096;

struct Header {
  uint64_t magic;
  uint32_t version;
  int32_t members;
  int64_t ring_bytes;
};
static_assert(sizeof(Header) <= kLine);

size_t Rings(int members) { return static_cast<size_t>(members) * static_cast<size_t>(members - 1); }
size_t MemberLinesAt() { return kLine; }
size_t RingControlAt(int members) { return MemberLinesAt() + kLine * static_cast<size_t>(members); }
size_t RingDataAt(int members) {
  const size_t end = RingControlAt(members) + 2 * kLine * Rings(members);
  return (end + kPage - 1) / kPage * kPage;
}
size_t SegmentLength(int members, int64_t ring_bytes) {
  return RingDataAt(members) + Rings(members) * static_cast<size_t>(ring_bytes);
}
// The ring from member `from` to member `to` (from != to).
size_t RingIndex(int members, int from, int to) {
  return static_cast<size_t>(from) * static_cast<size_t>(members - 1) + static_cast<size_t>(to < from ? to : to - 1);
}

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

long Futex(uint32_t* word, int op, uint32_t value, const timespec* timeout) {
  return syscall(SYS_futex, word, op, value, timeout, nullptr, 0);
}

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

}  // namespace

SharedMemorySegment::~SharedMemorySegment() { munmap(base_, length_); }

int64_t SharedMemorySegment::RingBytesFor(int members) {
  constexpr int64_t kBudget = int64_t{32} << 20, kMin = int64_t{64} << 10, kMax = int64_t{4} << 20;
  const int64_t rings = std::max<int64_t>(1, static_cast<int64_t>(Rings(members)));
  const int64_t bytes = std::clamp(kBudget / rings, kMin, kMax);
  return bytes / static_cast<int64_t>(kPage) * static_cast<int64_t>(kPage);
}

Result<std::unique_ptr<SharedMemorySegment>> SharedMemorySegment::Create(const std::string& name, int members,
                                                                         int64_t ring_bytes) {
  if (members < 2 || ring_bytes <= 0 || ring_bytes % static_cast<int64_t>(kPage) != 0)
    return Status::InvalidArgument("shared memory segment: at least 2 members and whole pages of ring expected");
  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return Status::Unavailable(Errno("shm_open " + name));
  const size_t length = SegmentLength(members, ring_bytes);
  // Reserved now: tmpfs otherwise allocates on first touch, and a full /dev/shm would be a SIGBUS mid-step.
  const int reserved = posix_fallocate(fd, 0, static_cast<off_t>(length));
  if (reserved != 0) {
    close(fd);
    shm_unlink(name.c_str());
    return Status::ResourceExhausted("shared memory segment of " + std::to_string(length >> 20) + " MiB in /dev/shm: " +
                                     std::strerror(reserved));
  }
  void* mapped = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (mapped == MAP_FAILED) {
    shm_unlink(name.c_str());
    return Status::Unavailable(Errno("mmap " + name));
  }
  auto* base = static_cast<uint8_t*>(mapped);
  std::memset(base, 0, RingDataAt(members));  // (the counters; a fresh object is zero anyway)
  Header header{0, kLayoutVersion, members, ring_bytes};
  std::memcpy(base, &header, sizeof(header));
  // The magic last: a member that opens the object sees a complete header or none.
  std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(base)).store(kMagic, std::memory_order_release);
  return std::unique_ptr<SharedMemorySegment>(new SharedMemorySegment(base, length, members, ring_bytes));
}

Result<std::unique_ptr<SharedMemorySegment>> SharedMemorySegment::Open(const std::string& name, int members) {
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) return Status::Unavailable(Errno("shm_open " + name));
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < kPage) {
    close(fd);
    return Status::DataLoss("shared memory segment " + name + " is too small");
  }
  void* mapped = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (mapped == MAP_FAILED) return Status::Unavailable(Errno("mmap " + name));
  auto* base = static_cast<uint8_t*>(mapped);
  Header header{};
  std::memcpy(&header, base, sizeof(header));
  header.magic = std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(base)).load(std::memory_order_acquire);
  if (header.magic != kMagic || header.version != kLayoutVersion || header.members != members ||
      header.ring_bytes <= 0 || SegmentLength(members, header.ring_bytes) != static_cast<size_t>(st.st_size)) {
    munmap(mapped, static_cast<size_t>(st.st_size));
    return Status::DataLoss("shared memory segment " + name + " has another layout than this build's");
  }
  return std::unique_ptr<SharedMemorySegment>(
      new SharedMemorySegment(base, static_cast<size_t>(st.st_size), members, header.ring_bytes));
}

void SharedMemorySegment::Unlink(const std::string& name) { shm_unlink(name.c_str()); }

SharedMemoryCommunicator::SharedMemoryCommunicator(std::shared_ptr<SharedMemorySegment> segment, int rank,
                                                   Communicator* base, SharedMemoryWait wait)
    : segment_(std::move(segment)), rank_(rank), base_(base), wait_(wait) {}

void SharedMemoryCommunicator::Abort(int code) {
  if (base_ != nullptr) base_->Abort(code);
  std::_Exit(code);
}

Status SharedMemoryCommunicator::AllToAllV(const uint8_t* send, std::span<const int64_t> send_bytes, uint8_t* recv,
                                           std::span<const int64_t> recv_bytes, double timeout_s) {
  return Move(send, send_bytes, recv, recv_bytes, nullptr, timeout_s, nullptr);
}

Status SharedMemoryCommunicator::AllToAllVWithIdleWork(const uint8_t* send, std::span<const int64_t> send_bytes,
                                                       uint8_t* recv, std::span<const int64_t> recv_bytes,
                                                       double timeout_s, std::function<void()>* idle_work) {
  return Move(send, send_bytes, recv, recv_bytes, nullptr, timeout_s, idle_work);
}

Status SharedMemoryCommunicator::AllToAllVSized(const uint8_t* send, std::span<const int64_t> send_bytes,
                                                const std::function<uint8_t*(int64_t)>& receive_into,
                                                std::span<int64_t> recv_bytes, int64_t max_part_bytes,
                                                double timeout_s, std::function<void()>* idle_work) {
  if (static_cast<int>(recv_bytes.size()) != size())
    return Status::InvalidArgument("all-to-all: one size per member expected");
  const Sized sized{&receive_into, recv_bytes, max_part_bytes};
  return Move(send, send_bytes, nullptr, {}, &sized, timeout_s, idle_work);
}

Status SharedMemoryCommunicator::Move(const uint8_t* send, std::span<const int64_t> send_bytes, uint8_t* recv,
                                      std::span<const int64_t> recv_bytes, const Sized* sized, double timeout_s,
                                      std::function<void()>* idle_work) {
  const int n = size();
  if (static_cast<int>(send_bytes.size()) != n || (sized == nullptr && static_cast<int>(recv_bytes.size()) != n))
    return Status::InvalidArgument("all-to-all: one size per member expected");
  uint8_t* const base = segment_->base();
  const uint64_t capacity = static_cast<uint64_t>(segment_->ring_bytes());
  const auto bell = [&](int member) {
    return std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(base + MemberLinesAt() + kLine * member));
  };
  const auto sleeping = [&](int member) {
    return std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(base + MemberLinesAt() + kLine * member + 4));
  };
  const auto head = [&](size_t ring) {  // bytes the producer has written, ever
    return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(base + RingControlAt(n) + 2 * kLine * ring));
  };
  const auto tail = [&](size_t ring) {  // bytes the consumer has read, ever
    return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(base + RingControlAt(n) + 2 * kLine * ring + kLine));
  };
  const auto data = [&](size_t ring) { return base + RingDataAt(n) + ring * capacity; };
  // Tells `member` that bytes moved for it, waking it if it sleeps.
  const auto ring_bell = [&](int member) {
    bell(member).fetch_add(1, std::memory_order_seq_cst);
    if (sleeping(member).load(std::memory_order_seq_cst) != 0)
      Futex(reinterpret_cast<uint32_t*>(base + MemberLinesAt() + kLine * member), FUTEX_WAKE, 1, nullptr);
  };

  // What is left to move with each member, and where it starts in the caller's buffers. In a sized
  // collective each ring towards a peer first carries the part's size (size_out, size_out_left bytes of it
  // still to write), and each ring from a peer first gives its size (size_in, size_in_left bytes still to
  // read); the received parts are taken once every size is in (sizes_known).
  const size_t members = static_cast<size_t>(n);
  std::vector<int64_t> send_at(members), recv_at(members), to_send(members), to_recv(members);
  std::vector<int64_t> size_out(members), size_in(members);
  std::vector<uint64_t> size_out_left(members), size_in_left(members);
  const uint64_t size_length = sized != nullptr ? sizeof(int64_t) : 0;
  int sizes_missing = 0;
  int64_t send_offset = 0, recv_offset = 0;
  int open = 0;
  for (int p = 0; p < n; ++p) {
    const int64_t out = send_bytes[p], in = sized != nullptr ? 0 : recv_bytes[p];
    if (out < 0 || in < 0) return Status::InvalidArgument("all-to-all: a negative size");
    if (p == rank_) {
      if (sized != nullptr) {
        sized->recv_bytes[p] = out;
      } else {
        if (out != in) return Status::InvalidArgument("all-to-all: this member's own part differs in size");
        if (out > 0) std::memcpy(recv + recv_offset, send + send_offset, static_cast<size_t>(out));
      }
    } else {
      send_at[p] = send_offset;
      recv_at[p] = recv_offset;
      to_send[p] = out;
      to_recv[p] = in;
      size_out[p] = out;
      size_out_left[p] = size_in_left[p] = size_length;
      sizes_missing += sized != nullptr;
      open += (out > 0 || size_length > 0) + (in > 0 || size_length > 0);
    }
    send_offset += out;
    recv_offset += in;
  }
  // Once every peer's size is in: the room for the parts, this member's own part copied in.
  const auto place_parts = [&]() -> Status {
    int64_t total = 0;
    for (int p = 0; p < n; ++p) {
      const int64_t bytes = p == rank_ ? send_bytes[p] : size_in[p];
      if (bytes < 0 || bytes > sized->max_part_bytes)
        return Status::DataLoss("all-to-all: rank " + std::to_string(p) + " announced a part of " +
                                std::to_string(bytes) + " bytes (at most " + std::to_string(sized->max_part_bytes) +
                                " expected)");
      sized->recv_bytes[p] = bytes;
      recv_at[p] = total;
      if (p != rank_) to_recv[p] = bytes;
      total += bytes;
    }
    recv = (*sized->receive_into)(total);
    int64_t own_at = 0;
    for (int p = 0; p < rank_; ++p) own_at += send_bytes[p];
    if (send_bytes[rank_] > 0)
      std::memcpy(recv + recv_at[rank_], send + own_at, static_cast<size_t>(send_bytes[rank_]));
    for (int p = 0; p < n; ++p)
      if (p != rank_ && to_recv[p] == 0) --open;  // (an empty part: its size was all there was)
    return Status::Ok();
  };
  if (sized != nullptr && sizes_missing == 0) DI_RETURN_IF_ERROR(place_parts());  // (no peers: not a unit)
  if (open == 0) return Status::Ok();

  const auto start = std::chrono::steady_clock::now();
  auto deadline = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                    std::chrono::duration<double>(timeout_s));
  const auto spin = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(wait_.spin_s));
  auto idle_since = start;
  for (;;) {
    // Read before looking at the rings: a peer that moves bytes after this changes it, so the sleep below
    // cannot miss its bell.
    const uint32_t seen = bell(rank_).load(std::memory_order_seq_cst);
    bool moved = false;
    for (int p = 0; p < n; ++p) {
      if (p == rank_) continue;
      if (size_out_left[p] > 0 || to_send[p] > 0) {
        const size_t ring = RingIndex(n, rank_, p);
        const uint64_t written = head(ring).load(std::memory_order_relaxed);  // (this member is its only writer)
        const uint64_t room = capacity - (written - tail(ring).load(std::memory_order_acquire));
        uint64_t count = 0;  // bytes written into the ring this turn
        const auto put = [&](const uint8_t* from, uint64_t bytes) {
          const uint64_t at = (written + count) % capacity, first = std::min(bytes, capacity - at);
          std::memcpy(data(ring) + at, from, first);
          if (bytes > first) std::memcpy(data(ring), from + first, bytes - first);
          count += bytes;
        };
        if (size_out_left[p] > 0) {
          const uint64_t bytes = std::min(room, size_out_left[p]);
          put(reinterpret_cast<const uint8_t*>(&size_out[p]) + (size_length - size_out_left[p]), bytes);
          size_out_left[p] -= bytes;
        }
        if (size_out_left[p] == 0 && to_send[p] > 0) {
          const uint64_t bytes = std::min<uint64_t>(room - count, static_cast<uint64_t>(to_send[p]));
          put(send + send_at[p], bytes);
          send_at[p] += static_cast<int64_t>(bytes);
          to_send[p] -= static_cast<int64_t>(bytes);
        }
        if (count > 0) {
          head(ring).store(written + count, std::memory_order_release);
          open -= size_out_left[p] == 0 && to_send[p] == 0;
          ring_bell(p);
          moved = true;
        }
      }
      if (size_in_left[p] > 0 || (sizes_missing == 0 && to_recv[p] > 0)) {
        const size_t ring = RingIndex(n, p, rank_);
        const uint64_t read = tail(ring).load(std::memory_order_relaxed);  // (this member is its only reader)
        const uint64_t ready = head(ring).load(std::memory_order_acquire) - read;
        uint64_t count = 0;  // bytes taken from the ring this turn
        const auto take = [&](uint8_t* to, uint64_t bytes) {
          const uint64_t at = (read + count) % capacity, first = std::min(bytes, capacity - at);
          std::memcpy(to, data(ring) + at, first);
          if (bytes > first) std::memcpy(to + first, data(ring), bytes - first);
          count += bytes;
        };
        bool sizes_complete = false;
        if (size_in_left[p] > 0) {
          const uint64_t bytes = std::min(ready, size_in_left[p]);
          take(reinterpret_cast<uint8_t*>(&size_in[p]) + (size_length - size_in_left[p]), bytes);
          size_in_left[p] -= bytes;
          sizes_complete = size_in_left[p] == 0 && --sizes_missing == 0;
        }
        if (sizes_missing == 0 && to_recv[p] > 0) {
          const uint64_t bytes = std::min<uint64_t>(ready - count, static_cast<uint64_t>(to_recv[p]));
          take(recv + recv_at[p], bytes);
          recv_at[p] += static_cast<int64_t>(bytes);
          to_recv[p] -= static_cast<int64_t>(bytes);
          open -= to_recv[p] == 0;
        }
        if (count > 0) {
          tail(ring).store(read + count, std::memory_order_release);
          ring_bell(p);  // (its producer may wait for the room)
          moved = true;
        }
        // The last size in: the room for the parts (the other peers' parts are taken on the next turn).
        if (sizes_complete) DI_RETURN_IF_ERROR(place_parts());
      }
    }
    if (open == 0) return Status::Ok();
    const auto now = std::chrono::steady_clock::now();
    if (moved) {
      idle_since = now;
      continue;
    }
    if (now >= deadline) break;
    // The idle work once every part of ours is in its ring: the peers then wait for nothing of this member's
    // while it runs (a ring towards here that were full would have moved bytes above).
    if (idle_work != nullptr && *idle_work &&
        std::all_of(to_send.begin(), to_send.end(), [](int64_t bytes) { return bytes == 0; }) &&
        std::all_of(size_out_left.begin(), size_out_left.end(), [](uint64_t bytes) { return bytes == 0; })) {
      const std::function<void()> work = std::move(*idle_work);
      *idle_work = nullptr;
      work();
      const auto after = std::chrono::steady_clock::now();
      deadline += after - now;
      idle_since = after;
      continue;
    }
    if (now - idle_since < spin) {
      CpuRelax();
      continue;
    }
    // Sleep until a peer rings (or a tenth of a second passes, or the deadline).
    const auto left = std::min<std::chrono::steady_clock::duration>(deadline - now, std::chrono::milliseconds(100));
    const auto left_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    const timespec timeout{static_cast<time_t>(left_ns / 1000000000), static_cast<long>(left_ns % 1000000000)};
    sleeping(rank_).store(1, std::memory_order_seq_cst);
    if (bell(rank_).load(std::memory_order_seq_cst) == seen)
      Futex(reinterpret_cast<uint32_t*>(base + MemberLinesAt() + kLine * rank_), FUTEX_WAIT, seen, &timeout);
    sleeping(rank_).store(0, std::memory_order_seq_cst);
  }
  // Which members it still waits for: those whose bytes have not all come, else those not taking ours.
  std::string who;
  for (int pass = 0; pass < 2 && who.empty(); ++pass)
    for (int p = 0; p < n; ++p)
      if (pass == 0 ? to_recv[p] > 0 || size_in_left[p] > 0 : to_send[p] > 0 || size_out_left[p] > 0)
        who += (who.empty() ? " " : ", ") + std::to_string(p);
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%.1f", timeout_s);
  return Status::DeadlineExceeded("rank" + who + " did not answer within " + seconds + " s (stopped, dead or stalled)");
}

namespace {

// This host as the members compare it: the host name and this boot (two containers may share a name).
Hash128 HostIdentity() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  const std::string host(name);
  return Hasher128().UpdateInt(host.size()).Update(host).UpdateInt(boot.size()).Update(boot).Digest();
}

// Every member's fixed-size record (all-gather through the all-to-all).
Status AllGatherRecord(Communicator& base, const std::vector<uint8_t>& mine, double timeout_s, std::vector<uint8_t>* all) {
  const int n = base.size();
  std::vector<uint8_t> send(mine.size() * static_cast<size_t>(n));
  for (int p = 0; p < n; ++p) std::copy(mine.begin(), mine.end(), send.begin() + static_cast<ptrdiff_t>(p * mine.size()));
  all->assign(send.size(), 0);
  const std::vector<int64_t> bytes(static_cast<size_t>(n), static_cast<int64_t>(mine.size()));
  return base.AllToAllV(send.data(), bytes, all->data(), bytes, timeout_s);
}

}  // namespace

Result<Communicator*> OpenSameHostCommunicator(Communicator& base, double timeout_s,
                                               std::unique_ptr<Communicator>* owned) {
  const int n = base.size();
  if (n < 2) return &base;
  if (const char* transport = std::getenv("DEEPINFER_EP_TRANSPORT"); transport != nullptr && *transport != '\0') {
    if (std::string(transport) == "mpi") return &base;
    if (std::string(transport) != "shm")
      return Status::InvalidArgument("DEEPINFER_EP_TRANSPORT=" + std::string(transport) + ": mpi or shm expected");
  }
  // 1. Every member on this host?
  const Hash128 host = HostIdentity();
  std::vector<uint8_t> record(16), all;
  std::memcpy(record.data(), &host.high, 8);
  std::memcpy(record.data() + 8, &host.low, 8);
  DI_RETURN_IF_ERROR(AllGatherRecord(base, record, timeout_s, &all));
  for (int p = 1; p < n; ++p)
    if (std::memcmp(all.data() + 16 * p, all.data(), 16) != 0) return &base;  // ranks on several hosts: MPI
  // 2. Rank 0 makes the segment and names it; the others map it.
  constexpr size_t kNameBytes = 64;
  std::vector<uint8_t> name_record(kNameBytes, 0);
  std::unique_ptr<SharedMemorySegment> segment;
  std::string name, failure;
  if (base.rank() == 0) {
    std::random_device random;
    name = "/deepinfer-unit-" + std::to_string(getpid()) + "-" + std::to_string(random());
    auto made = SharedMemorySegment::Create(name, n, SharedMemorySegment::RingBytesFor(n));
    if (made.ok()) {
      segment = std::move(made).value();
      std::memcpy(name_record.data(), name.data(), std::min(name.size(), kNameBytes - 1));
    } else {
      failure = made.status().message();
    }
  }
  if (Status named = AllGatherRecord(base, name_record, timeout_s, &all); !named.ok()) {
    if (segment != nullptr) SharedMemorySegment::Unlink(name);
    return named;
  }
  if (base.rank() != 0) {
    name.assign(reinterpret_cast<const char*>(all.data()), strnlen(reinterpret_cast<const char*>(all.data()), kNameBytes));
    if (!name.empty()) {
      auto opened = SharedMemorySegment::Open(name, n);
      if (opened.ok()) segment = std::move(opened).value();
      else failure = opened.status().message();
    }
  }
  // 3. Shared memory only if every member mapped it; the name goes once all have.
  const std::vector<uint8_t> mapped{static_cast<uint8_t>(segment != nullptr)};
  const Status agreed = AllGatherRecord(base, mapped, timeout_s, &all);
  if (base.rank() == 0 && !name.empty()) SharedMemorySegment::Unlink(name);
  DI_RETURN_IF_ERROR(agreed);
  const bool everyone = std::all_of(all.begin(), all.end(), [](uint8_t v) { return v != 0; });
  if (!everyone) {
    if (!failure.empty())
      std::fprintf(stderr, "deepinfer: rank %d: shared memory between the ranks unavailable (%s); they talk through MPI\n",
                   base.rank(), failure.c_str());
    return &base;
  }
  *owned = std::make_unique<SharedMemoryCommunicator>(std::move(segment), base.rank(), &base);
  return owned->get();
}

}  // namespace deepinfer::parallel
