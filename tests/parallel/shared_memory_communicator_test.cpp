#include "parallel/shared_memory_communicator.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace deepinfer::parallel {
namespace {

std::string UniqueName(const char* what) {
  return "/deepinfer-test-" + std::string(what) + "-" + std::to_string(getpid());
}

// The byte member `from` sends member `to` at `index` of its part in collective `round`: every part's bytes
// differ from every other's, so a byte landing in the wrong place or a wrong order shows.
uint8_t Byte(int from, int to, int round, int64_t index) {
  return static_cast<uint8_t>(from * 131 + to * 71 + round * 29 + index * 7 + index / 251);
}
// Part sizes that vary by pair and round: empty parts, parts within one ring, and parts several rings long
// (the sender must wait for the receiver to free room).
int64_t PartBytes(int from, int to, int round) {
  static constexpr int64_t kSizes[] = {0, 1, 100, 4096, 9000, 20000, 37};
  return kSizes[(from * 5 + to * 3 + round) % 7];
}

// What member `m` received in `round` against what every peer sent it, in rank order: "" when every size and
// byte is right, else the first difference.
std::string FirstDifference(const std::vector<uint8_t>& recv, const std::vector<int64_t>& recv_bytes, int members,
                            int m, int round) {
  int64_t at = 0;
  for (int p = 0; p < members; ++p) {
    if (recv_bytes[p] != PartBytes(p, m, round)) {
      return "round " + std::to_string(round) + ": member " + std::to_string(p) + "'s size is " +
             std::to_string(recv_bytes[p]);
    }
    for (int64_t i = 0; i < recv_bytes[p]; ++i, ++at) {
      if (recv[static_cast<size_t>(at)] != Byte(p, m, round, i)) {
        return "round " + std::to_string(round) + ": byte " + std::to_string(i) + " from member " +
               std::to_string(p) + " differs";
      }
    }
  }
  return "";
}

// Maps one segment of `members` members with rings of `ring_bytes`, its name already removed.
std::vector<std::shared_ptr<SharedMemorySegment>> MapSegment(const char* what, int members, int64_t ring_bytes) {
  const std::string name = UniqueName(what);
  auto made = SharedMemorySegment::Create(name, members, ring_bytes);
  if (!made.ok()) return {};
  std::vector<std::shared_ptr<SharedMemorySegment>> segments = {std::move(made).value()};
  for (int m = 1; m < members; ++m) {
    auto opened = SharedMemorySegment::Open(name, members);
    if (!opened.ok()) break;
    segments.push_back(std::move(opened).value());
  }
  SharedMemorySegment::Unlink(name);  // (the mappings outlive the name, as in a unit)
  return segments;
}

TEST(SharedMemoryCommunicator, MembersExchangeVariedPartsThroughRingsSmallerThanThem) {
  constexpr int kMembers = 3, kRounds = 24;
  // One page of ring: the 9,000- and 20,000-byte parts stream through it in pieces.
  std::vector<std::shared_ptr<SharedMemorySegment>> segments = MapSegment("parts", kMembers, 4096);
  ASSERT_EQ(segments.size(), static_cast<size_t>(kMembers));
  std::vector<std::string> errors(kMembers);
  std::vector<std::thread> threads;
  for (int m = 0; m < kMembers; ++m) {
    threads.emplace_back([&, m] {
      // No spin: the late member below makes the others sleep on the futex and be woken.
      SharedMemoryCommunicator comm(segments[static_cast<size_t>(m)], m, nullptr, SharedMemoryWait{0});
      for (int round = 0; round < kRounds; ++round) {
        if (m == 2 && round % 6 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
        std::vector<int64_t> send_bytes(kMembers), recv_bytes(kMembers);
        std::vector<uint8_t> send;
        int64_t received = 0;
        for (int p = 0; p < kMembers; ++p) {
          send_bytes[p] = PartBytes(m, p, round);
          recv_bytes[p] = PartBytes(p, m, round);
          for (int64_t i = 0; i < send_bytes[p]; ++i) send.push_back(Byte(m, p, round, i));
          received += recv_bytes[p];
        }
        std::vector<uint8_t> recv(static_cast<size_t>(received), 0);
        const Status s = comm.AllToAllV(send.data(), send_bytes, recv.data(), recv_bytes, 10.0);
        if (!s.ok()) {
          errors[m] = s.message();
          return;
        }
        errors[m] = FirstDifference(recv, recv_bytes, kMembers, m, round);
        if (!errors[m].empty()) return;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int m = 0; m < kMembers; ++m) EXPECT_EQ(errors[m], "") << "member " << m;
}

TEST(SharedMemoryCommunicator, PartsWhoseSizesOnlyTheirSendersKnowArriveWithThem) {
  // Sized and plain all-to-alls alternate in the same rings (each must leave them where the next expects),
  // with parts larger than the rings, empty parts and a late member whose peers sleep meanwhile.
  constexpr int kMembers = 3, kRounds = 24;
  std::vector<std::shared_ptr<SharedMemorySegment>> segments = MapSegment("sized", kMembers, 4096);
  ASSERT_EQ(segments.size(), static_cast<size_t>(kMembers));
  std::vector<std::string> errors(kMembers);
  std::vector<std::thread> threads;
  for (int m = 0; m < kMembers; ++m) {
    threads.emplace_back([&, m] {
      SharedMemoryCommunicator comm(segments[static_cast<size_t>(m)], m, nullptr, SharedMemoryWait{0});
      for (int round = 0; round < kRounds; ++round) {
        if (m == 1 && round % 5 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
        std::vector<int64_t> send_bytes(kMembers), recv_bytes(kMembers, -1);
        std::vector<uint8_t> send, recv;
        int64_t expected_total = 0;
        for (int p = 0; p < kMembers; ++p) {
          send_bytes[p] = PartBytes(m, p, round);
          for (int64_t i = 0; i < send_bytes[p]; ++i) send.push_back(Byte(m, p, round, i));
          expected_total += PartBytes(p, m, round);
        }
        int calls = 0;
        int64_t asked = -1;
        const std::function<uint8_t*(int64_t)> receive_into = [&](int64_t bytes) {
          ++calls;
          asked = bytes;
          recv.assign(static_cast<size_t>(bytes), 0);
          return recv.data();
        };
        Status s = round % 2 == 0
                       ? comm.AllToAllVSized(send.data(), send_bytes, receive_into, recv_bytes, 20000, 10.0, nullptr)
                       : Status::Ok();
        if (round % 2 != 0) {  // (the plain one: the receiver knows the sizes)
          for (int p = 0; p < kMembers; ++p) recv_bytes[p] = PartBytes(p, m, round);
          recv.assign(static_cast<size_t>(expected_total), 0);
          calls = 1;
          asked = expected_total;
          s = comm.AllToAllV(send.data(), send_bytes, recv.data(), recv_bytes, 10.0);
        }
        if (!s.ok() || calls != 1 || asked != expected_total) {
          errors[m] = "round " + std::to_string(round) + ": " + s.message() + " (room asked " + std::to_string(calls) +
                      " times, for " + std::to_string(asked) + " bytes of " + std::to_string(expected_total) + ")";
          return;
        }
        errors[m] = FirstDifference(recv, recv_bytes, kMembers, m, round);
        if (!errors[m].empty()) return;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int m = 0; m < kMembers; ++m) EXPECT_EQ(errors[m], "") << "member " << m;
}

TEST(SharedMemoryCommunicator, ASizeOverTheReceiversBoundIsRefusedBeforeAnyRoomIsAsked) {
  std::vector<std::shared_ptr<SharedMemorySegment>> segments = MapSegment("bound", 2, 4096);
  ASSERT_EQ(segments.size(), 2u);
  // Member 1 sends member 0 a part of 100 bytes where member 0 takes at most 50; member 0's own 10 bytes
  // for member 1 are within member 1's bound, so member 1 completes.
  Status status[2];
  int calls[2] = {0, 0};
  std::vector<std::thread> threads;
  for (int m = 0; m < 2; ++m) {
    threads.emplace_back([&, m] {
      SharedMemoryCommunicator comm(segments[static_cast<size_t>(m)], m, nullptr);
      const std::vector<uint8_t> send(110, 5);
      const std::vector<int64_t> send_bytes = m == 0 ? std::vector<int64_t>{0, 10} : std::vector<int64_t>{100, 0};
      std::vector<int64_t> recv_bytes(2);
      std::vector<uint8_t> recv;
      const std::function<uint8_t*(int64_t)> receive_into = [&](int64_t bytes) {
        ++calls[m];
        recv.assign(static_cast<size_t>(bytes), 0);
        return recv.data();
      };
      status[m] = comm.AllToAllVSized(send.data(), send_bytes, receive_into, recv_bytes, 50, 10.0, nullptr);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(status[0].code(), StatusCode::kDataLoss);
  EXPECT_NE(status[0].message().find("rank 1 announced a part of 100 bytes (at most 50 expected)"), std::string::npos)
      << status[0].message();
  EXPECT_EQ(calls[0], 0);
  EXPECT_TRUE(status[1].ok()) << status[1].message();
  EXPECT_EQ(calls[1], 1);
}

TEST(SharedMemoryCommunicator, AMemberThatNeverComesIsNamedAtTheDeadline) {
  const std::string name = UniqueName("absent");
  auto made = SharedMemorySegment::Create(name, 2, 4096);
  SharedMemorySegment::Unlink(name);
  ASSERT_TRUE(made.ok()) << made.status().message();
  SharedMemoryCommunicator comm(std::move(made).value(), 0, nullptr);
  // Member 0 sends 10 bytes to member 1 and waits for 10 from it; member 1 never calls.
  const std::vector<uint8_t> send(10, 1);
  std::vector<uint8_t> recv(10);
  const std::vector<int64_t> bytes = {0, 10};
  const Status s = comm.AllToAllV(send.data(), bytes, recv.data(), bytes, 0.06);
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(s.message().find("rank 1 did not answer within 0.1 s"), std::string::npos) << s.message();
}

TEST(SharedMemoryCommunicator, AMemberThatWaitsRunsItsIdleWorkOnceAndOneThatDoesNotLeavesIt) {
  const std::string name = UniqueName("idle");
  auto made = SharedMemorySegment::Create(name, 2, 4096);
  ASSERT_TRUE(made.ok()) << made.status().message();
  auto opened = SharedMemorySegment::Open(name, 2);
  SharedMemorySegment::Unlink(name);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  std::shared_ptr<SharedMemorySegment> segments[] = {std::move(made).value(), std::move(opened).value()};
  // Member 1 starts its exchange only once member 0's idle work has run: member 0 must wait for it, so it
  // runs its work (else it would wait until the deadline); member 1 then finds member 0's part already in
  // its ring, never waits, and leaves its work to its caller.
  std::atomic<bool> member0_worked{false}, member0_returned{false};  // (the latter: no hang if it never works)
  int runs[2] = {0, 0};
  bool left[2] = {false, false};
  std::string errors[2];
  std::vector<uint8_t> received[2];
  std::vector<std::thread> threads;
  for (int m = 0; m < 2; ++m) {
    threads.emplace_back([&, m] {
      SharedMemoryCommunicator comm(segments[m], m, nullptr);
      if (m == 1)
        while (!member0_worked.load() && !member0_returned.load()) std::this_thread::yield();
      std::function<void()> work = [&, m] {
        ++runs[m];
        if (m == 0) member0_worked.store(true);
      };
      // Member 0 keeps 1 byte and sends 2, member 1 sends 2 and keeps 1 (each receives as it sends).
      const std::vector<uint8_t> send = {static_cast<uint8_t>(10 + m), static_cast<uint8_t>(20 + m),
                                         static_cast<uint8_t>(30 + m)};
      const std::vector<int64_t> bytes = m == 0 ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{2, 1};
      received[m].assign(3, 0);
      const Status s = comm.AllToAllVWithIdleWork(send.data(), bytes, received[m].data(), bytes, 10.0, &work);
      if (!s.ok()) errors[m] = s.message();
      left[m] = static_cast<bool>(work);
      if (m == 0) member0_returned.store(true);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_EQ(runs[0], 1);
  EXPECT_FALSE(left[0]);
  EXPECT_EQ(runs[1], 0);
  EXPECT_TRUE(left[1]);
  EXPECT_EQ(received[0], (std::vector<uint8_t>{10, 11, 21}));  // its own byte, then member 1's first two
  EXPECT_EQ(received[1], (std::vector<uint8_t>{20, 30, 31}));  // member 0's last two, then its own
}

TEST(SharedMemoryCommunicator, ASegmentOfAnotherMemberCountIsRefused) {
  const std::string name = UniqueName("count");
  auto made = SharedMemorySegment::Create(name, 2, 4096);
  ASSERT_TRUE(made.ok()) << made.status().message();
  const auto opened = SharedMemorySegment::Open(name, 3);
  SharedMemorySegment::Unlink(name);
  EXPECT_EQ(opened.status().code(), StatusCode::kDataLoss);
}

TEST(SharedMemoryCommunicator, RingsShareAFixedBudgetWithinBounds) {
  // 32 MiB over N(N−1) rings, whole pages, within [64 KiB, 4 MiB].
  EXPECT_EQ(SharedMemorySegment::RingBytesFor(2), int64_t{4} << 20);               // 16 MiB each: capped
  EXPECT_EQ(SharedMemorySegment::RingBytesFor(4), (int64_t{32} << 20) / 12 / 4096 * 4096);  // 2,793,472
  EXPECT_EQ(SharedMemorySegment::RingBytesFor(64), int64_t{64} << 10);             // 8,322 B each: floored
}

}  // namespace
}  // namespace deepinfer::parallel
