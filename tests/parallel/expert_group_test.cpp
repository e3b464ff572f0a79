#include "parallel/expert_group.h"

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace deepinfer::parallel {
namespace {

// The members of a unit as threads of one process: each all-to-all puts every member's parts in shared
// boxes, waits for all, then takes its own. Enough for the group's collectives, which only need every
// member to call them in the same order.
class ThreadUnit {
 public:
  explicit ThreadUnit(int n)
      : sync_(n), boxes_(static_cast<size_t>(n), std::vector<std::vector<uint8_t>>(static_cast<size_t>(n))) {}

  class Member final : public Communicator {
   public:
    Member(ThreadUnit& unit, int rank) : unit_(unit), rank_(rank) {}
    int rank() const override { return rank_; }
    int size() const override { return static_cast<int>(unit_.boxes_.size()); }
    Status AllToAllV(const uint8_t* send, std::span<const int64_t> send_bytes, uint8_t* recv,
                     std::span<const int64_t> recv_bytes, double) override {
      size_t at = 0;
      for (int p = 0; p < size(); ++p) {
        unit_.boxes_[static_cast<size_t>(p)][static_cast<size_t>(rank_)].assign(send + at, send + at + send_bytes[p]);
        at += static_cast<size_t>(send_bytes[p]);
      }
      unit_.sync_.arrive_and_wait();
      Status status = Status::Ok();
      at = 0;
      for (int p = 0; p < size(); ++p) {
        const std::vector<uint8_t>& box = unit_.boxes_[static_cast<size_t>(rank_)][static_cast<size_t>(p)];
        if (static_cast<int64_t>(box.size()) != recv_bytes[p]) status = Status::DataLoss("sizes disagree");
        else if (!box.empty()) std::memcpy(recv + at, box.data(), box.size());
        at += static_cast<size_t>(recv_bytes[p]);
      }
      unit_.sync_.arrive_and_wait();
      return status;
    }
    [[noreturn]] void Abort(int) override { std::abort(); }

   private:
    ThreadUnit& unit_;
    int rank_;
  };

  // Runs body(rank, group) on every member at once.
  void Run(const std::function<void(int, ExpertGroup&)>& body, GroupTimeouts timeouts = {}) {
    std::vector<std::thread> threads;
    for (int r = 0; r < static_cast<int>(boxes_.size()); ++r) {
      threads.emplace_back([&, r] {
        Member member(*this, r);
        ExpertGroup group(member, timeouts);
        body(r, group);
      });
    }
    for (std::thread& t : threads) t.join();
  }

 private:
  std::barrier<> sync_;
  std::vector<std::vector<std::vector<uint8_t>>> boxes_;  // [to][from]
};

TEST(ExpertGroup, ExchangeDeadlinesFollowTheUnitsLongestPredictedStep) {
  ThreadUnit unit(2);
  std::vector<std::vector<double>> deadlines(2), step_deadlines(2);
  unit.Run([&](int rank, ExpertGroup& group) {
    // No prediction yet (an engine whose cost model is not fitted): the floor, 100 s (far above the time
    // these steps take even on a loaded machine, so that only predictions raise the deadline).
    group.NotePredictedStep(0);
    group.AnyMemberHasWork(true);
    deadlines[rank].push_back(group.ExchangeTimeout());
    step_deadlines[rank].push_back(group.StepDeadline());
    // Rank 0 predicts a 50 s step (a long prefill), rank 1 a short one: both wait 4 × 50 s in this step.
    group.NotePredictedStep(rank == 0 ? 50.0 : 0.01);
    group.AnyMemberHasWork(true);
    deadlines[rank].push_back(group.ExchangeTimeout());
    step_deadlines[rank].push_back(group.StepDeadline());
    // Short steps again: back to the floor.
    group.NotePredictedStep(0.1);
    group.AnyMemberHasWork(true);
    deadlines[rank].push_back(group.ExchangeTimeout());
    step_deadlines[rank].push_back(group.StepDeadline());
  }, GroupTimeouts{.exchange_floor_s = 100});
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(deadlines[r], (std::vector<double>{100.0, 200.0, 100.0})) << "rank " << r;
    // The agreement's own deadline (what the serving unit's waits scale with) adds the idle pause, 50 ms.
    EXPECT_EQ(step_deadlines[r], (std::vector<double>{0.05 + 100.0, 0.05 + 200.0, 0.05 + 100.0})) << "rank " << r;
  }
}

TEST(ExpertGroup, PartsWhoseSizesOnlyTheirSendersKnowArriveThroughATransportThatNeedsThemFirst) {
  // ThreadUnit's members implement only AllToAllV: the sized exchange is the Communicator's default (the
  // sizes, then the parts), as over MPI. Member m sends member p (m + 1) · (p + 2) bytes of value 16m + p.
  constexpr int kMembers = 3;
  ThreadUnit unit(kMembers);
  std::vector<std::string> errors(kMembers);
  unit.Run([&](int rank, ExpertGroup& group) {
    std::vector<int64_t> send_bytes(kMembers), recv_bytes(kMembers, -1);
    std::vector<uint8_t> send, recv;
    for (int p = 0; p < kMembers; ++p) {
      send_bytes[p] = (rank + 1) * (p + 2);
      send.insert(send.end(), static_cast<size_t>(send_bytes[p]), static_cast<uint8_t>(16 * rank + p));
    }
    int calls = 0;
    group.AllToAllVSized(send.data(), send_bytes,
                         [&](int64_t bytes) {
                           ++calls;
                           recv.assign(static_cast<size_t>(bytes), 0);
                           return recv.data();
                         },
                         recv_bytes, 64, nullptr);
    std::vector<uint8_t> expected;
    for (int p = 0; p < kMembers; ++p)
      expected.insert(expected.end(), static_cast<size_t>((p + 1) * (rank + 2)), static_cast<uint8_t>(16 * p + rank));
    if (calls != 1 || recv != expected || recv_bytes != std::vector<int64_t>{rank + 2, 2 * (rank + 2), 3 * (rank + 2)})
      errors[static_cast<size_t>(rank)] = "received other parts than sent";
  });
  for (int m = 0; m < kMembers; ++m) EXPECT_EQ(errors[m], "") << "member " << m;
}

TEST(ExpertGroup, MembersSwapTheBalancersPlacementAtTheSameStepAndSkipOneNoBetter) {
  // 8 experts over 2 ranks (4 each) plus 2 redundant copies: 5 each. Rows go mostly to expert 0 (rank 0's):
  // the balancer copies it, and from the swap on rank 1 computes some of its pairs. For kSameRowsSteps
  // steps after that swap the rows stay the same: every placement computed then equals the one in use, so it
  // is not swapped in but counted as skipped (the balance cannot improve by the 1% margin). Then the rows
  // move to expert 6 (rank 1's, not copied): a second placement beats the first and is swapped in.
  // The step at which a swap happens depends on when the members' reader threads finish (the balancer never
  // waits for them), but it is the same on both, so both leave the loop at the same step.
  constexpr int kMaxSteps = 5000, kSameRowsSteps = 10;
  const std::vector<int32_t> ids_a = {0, 0, 0, 0, 0, 0, 1, 5, 0, 0, 0, 6};
  const std::vector<int32_t> ids_b = {6, 6, 6, 6, 6, 6, 1, 5, 6, 6, 6, 2};
  EplbOptions eplb;
  eplb.redundant_experts = 2;
  eplb.enabled = true;
  eplb.window_steps = 4;
  eplb.step_interval = 3;
  ThreadUnit unit(2);
  std::vector<std::vector<int64_t>> swaps(2), skips(2);
  // [rank][step][layer]: which ranks this member's pairs went to, and which experts it computes.
  std::vector<std::vector<std::vector<std::vector<int32_t>>>> sent_to(2);
  std::vector<std::vector<std::vector<std::vector<uint8_t>>>> computes(2);
  unit.Run([&](int rank, ExpertGroup& group) {
    group.set_eplb(eplb);
    EXPECT_EQ(group.redundant_experts(), 2);
    int first_swap = -1;
    for (int step = 0; step < kMaxSteps && group.rebalances() < 2; ++step) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      group.AnyMemberHasWork(true);
      swaps[rank].push_back(group.rebalances());
      skips[rank].push_back(group.skipped_rebalances());
      sent_to[rank].emplace_back();
      computes[rank].emplace_back();
      if (first_swap < 0 && group.rebalances() == 1) first_swap = step;
      const std::vector<int32_t>& ids = first_swap < 0 || step < first_swap + kSameRowsSteps ? ids_a : ids_b;
      for (int layer = 0; layer < 2; ++layer) {
        std::vector<int32_t> members(ids.size(), -1);
        std::vector<uint8_t> on;
        group.NoteRouting(8, ids);
        group.PlaceRoutedPairs(8, ids, members, &on);
        sent_to[rank].back().push_back(members);
        computes[rank].back().push_back(on);
      }
    }
  });
  EXPECT_EQ(swaps[0], swaps[1]);  // the same step on both
  EXPECT_EQ(skips[0], skips[1]);
  ASSERT_EQ(swaps[0].back(), 2);
  const int first_swap = static_cast<int>(std::find(swaps[0].begin(), swaps[0].end(), 1) - swaps[0].begin());
  // The first placement beats the static shard: nothing skipped before it. The same rows after it: a
  // placement computed every 3 steps over a window of 4 steps that all routed them, each skipped.
  ASSERT_GE(first_swap, 1);
  EXPECT_EQ(skips[0][first_swap - 1], 0);
  ASSERT_GT(static_cast<int>(swaps[0].size()), first_swap + kSameRowsSteps);
  EXPECT_GE(skips[0][first_swap + kSameRowsSteps - 1], 2);
  EXPECT_EQ(swaps[0][first_swap + kSameRowsSteps - 1], 1);
  const int steps = static_cast<int>(swaps[0].size());
  bool expert0_on_rank1 = false, expert6_on_rank0 = false;
  for (int step = 0; step < steps; ++step) {
    const std::vector<int32_t>& ids = step < first_swap + kSameRowsSteps ? ids_a : ids_b;
    for (int layer = 0; layer < 2; ++layer) {
      for (int sender = 0; sender < 2; ++sender) {
        const std::vector<int32_t>& to = sent_to[sender][step][layer];
        for (size_t p = 0; p < ids.size(); ++p) {
          ASSERT_TRUE(to[p] == 0 || to[p] == 1);
          // Every pair goes to a member that computes its expert in that step.
          EXPECT_EQ(computes[to[p]][step][layer][ids[p]], 1) << "step " << step << " pair " << p;
          expert0_on_rank1 |= ids[p] == 0 && to[p] == 1;
          expert6_on_rank0 |= ids[p] == 6 && to[p] == 0;
        }
      }
      if (swaps[0][step] == 0) {  // before the first swap: the static shard, experts 0-3 on rank 0
        EXPECT_EQ(computes[0][step][layer], (std::vector<uint8_t>{1, 1, 1, 1, 0, 0, 0, 0}));
      } else {  // after it: 5 copies a rank (two may be of one expert), every expert on some rank
        for (int r = 0; r < 2; ++r)
          EXPECT_LE(std::count(computes[r][step][layer].begin(), computes[r][step][layer].end(), 1), 5);
        for (size_t e = 0; e < 8; ++e) EXPECT_TRUE(computes[0][step][layer][e] || computes[1][step][layer][e]) << e;
        if (swaps[0][step] == 1) {
          EXPECT_TRUE(computes[0][step][layer][0] && computes[1][step][layer][0]);
        }
      }
    }
  }
  EXPECT_TRUE(expert0_on_rank1);
  EXPECT_TRUE(expert6_on_rank0);  // the second placement copied expert 6 onto rank 0
}

TEST(ExpertGroup, RedundantExpertsMustFillEveryRankEvenly) {
  ThreadUnit unit(2);
  unit.Run([&](int, ExpertGroup& group) {
    EplbOptions eplb;
    eplb.redundant_experts = 3;  // 8 experts + 3 copies do not split over 2 ranks
    group.set_eplb(eplb);
    const Status odd = model::CheckExpertSharding(8, &group);
    EXPECT_EQ(odd.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(odd.message().find("8 routed experts plus the redundant copies must be a multiple of the 2 ranks"),
              std::string::npos) << odd.message();
    eplb.redundant_experts = 9;  // more than every expert on every rank: 8 × (2 − 1)
    group.set_eplb(eplb);
    EXPECT_EQ(model::CheckExpertSharding(8, &group).code(), StatusCode::kInvalidArgument);
    eplb.redundant_experts = 2;
    group.set_eplb(eplb);
    EXPECT_TRUE(model::CheckExpertSharding(8, &group).ok());
    EXPECT_EQ(model::CheckExpertSharding(7, &group).code(), StatusCode::kInvalidArgument);  // 7 over 2 ranks
  });
}

}  // namespace
}  // namespace deepinfer::parallel
