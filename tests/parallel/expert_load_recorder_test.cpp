#include "parallel/expert_load_recorder.h"

#include <thread>

#include <gtest/gtest.h>

namespace deepinfer::parallel {
namespace {

TEST(ExpertLoadRecorder, CountsRoutingAndCountsPerLayer) {
  auto made = ExpertLoadRecorder::Create(2, 4, 3, 3);
  ASSERT_TRUE(made.ok()) << made.status().message();
  ExpertLoadRecorder& r = **made;
  // Two tokens, top-2 each, on layer 0 (a score-routed layer): experts 0,1 and 1,3.
  const std::vector<int32_t> ids{0, 1, 1, 3};
  ASSERT_TRUE(r.RecordRouting(0, ids).ok());
  // Layer 1 (a hash-routed layer) reported as counts.
  const std::vector<int64_t> counts{0, 0, 5, 1};
  ASSERT_TRUE(r.RecordCounts(1, counts).ok());
  r.EndStep();
  const ExpertLoads last = r.LastStepLoads();
  EXPECT_EQ(last.values, (std::vector<double>{1, 2, 0, 1, 0, 0, 5, 1}));
  EXPECT_EQ(r.WindowLoads().values, last.values);
  EXPECT_EQ(r.steps(), 1);
  EXPECT_EQ(r.LastStepTraceLine(), "{\"loads\":[[1,2,0,1],[0,0,5,1]]}");
  // The trace line reads back as the same loads.
  auto back = ParseExpertLoads(r.LastStepTraceLine());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->values, last.values);

  EXPECT_FALSE(r.RecordRouting(0, std::vector<int32_t>{4}).ok());
  EXPECT_FALSE(r.RecordRouting(0, std::vector<int32_t>{-1}).ok());
  EXPECT_FALSE(r.RecordRouting(2, ids).ok());
  EXPECT_FALSE(r.RecordCounts(0, std::vector<int64_t>{1, 2}).ok());
  EXPECT_FALSE(r.RecordCounts(0, std::vector<int64_t>{1, 2, -3, 0}).ok());
  r.EndStep();
  // Refused records add nothing: the second step is empty.
  EXPECT_EQ(r.LastStepLoads().values, std::vector<double>(8, 0.0));
}

// A window of 4 steps in 2 slots of 2: after 5 steps (each step s sends s tokens to expert 0) the first
// slot (steps 1 and 2) was dropped when step 5 arrived, leaving steps 3, 4, 5: 3 + 4 + 5 = 12.
TEST(ExpertLoadRecorder, WindowSlidesBySlots) {
  auto made = ExpertLoadRecorder::Create(1, 2, 4, 2);
  ASSERT_TRUE(made.ok());
  ExpertLoadRecorder& r = **made;
  const int64_t expected_window[] = {1, 3, 6, 10, 12, 18, 18, 26};  // sums of the steps in the window
  const int64_t expected_steps[] = {1, 2, 3, 4, 3, 4, 3, 4};
  for (int64_t s = 1; s <= 8; ++s) {
    ASSERT_TRUE(r.RecordCounts(0, std::vector<int64_t>{s, 0}).ok());
    r.EndStep();
    EXPECT_EQ(r.WindowLoads().at(0, 0), static_cast<double>(expected_window[s - 1])) << "after step " << s;
    EXPECT_EQ(r.window_steps_recorded(), expected_steps[s - 1]) << "after step " << s;
  }
  // An exact window (one step per slot) of 2: the last two steps, 7 + 8.
  auto exact = ExpertLoadRecorder::Create(1, 2, 2, 2);
  ASSERT_TRUE(exact.ok());
  for (int64_t s = 1; s <= 8; ++s) {
    ASSERT_TRUE((*exact)->RecordCounts(0, std::vector<int64_t>{s, 0}).ok());
    (*exact)->EndStep();
  }
  EXPECT_EQ((*exact)->WindowLoads().at(0, 0), 15.0);
}

TEST(ExpertLoadRecorder, BalanceUnderAPlacement) {
  auto made = ExpertLoadRecorder::Create(1, 4, 8, 1);
  ASSERT_TRUE(made.ok());
  ExpertLoadRecorder& r = **made;
  ASSERT_TRUE(r.RecordCounts(0, std::vector<int64_t>{6, 2, 1, 1}).ok());
  r.EndStep();
  auto identity = IdentityPlacement(1, 4, 2);
  ASSERT_TRUE(identity.ok());
  // Ranks carry 6 + 2 = 8 and 1 + 1 = 2, mean 5: max/mean 1.6.
  auto plain = r.LastStepBalance(*identity);
  ASSERT_TRUE(plain.ok());
  EXPECT_DOUBLE_EQ((*plain)[0], 1.6);
  // The balancer on the window with 2 spare slots: expert 0 gets copies until 6/3 = 2; ranks carry
  // 2 + 2 + 1 = 5 and 2 + 2 + 1 = 5 (hand packing: 2,2,2,2 then 1,1): max/mean 1.
  auto placed = RebalanceExperts(r.WindowLoads(), {.replicas = 6, .groups = 1, .nodes = 1, .ranks = 2});
  ASSERT_TRUE(placed.ok());
  auto balanced = r.WindowBalance(*placed);
  ASSERT_TRUE(balanced.ok());
  EXPECT_DOUBLE_EQ((*balanced)[0], 1.0);
  auto wrong = IdentityPlacement(2, 4, 2);
  ASSERT_TRUE(wrong.ok());
  EXPECT_FALSE(r.LastStepBalance(*wrong).ok());
}

TEST(ExpertLoadRecorder, RejectsBadShapes) {
  EXPECT_FALSE(ExpertLoadRecorder::Create(0, 4, 4, 1).ok());
  EXPECT_FALSE(ExpertLoadRecorder::Create(1, EplbLimits::kMaxExperts + 1, 4, 1).ok());
  EXPECT_FALSE(ExpertLoadRecorder::Create(1, 4, 6, 4).ok());  // 4 slots do not divide 6 steps
  EXPECT_FALSE(ExpertLoadRecorder::Create(1, 4, 0, 1).ok());
  EXPECT_FALSE(ExpertLoadRecorder::Create(1024, 4096, 1024, 1024).ok());  // too many counts
}

// One thread records while another reads: every read sees at most the window's 16 steps of one token to
// expert 1 on layer 0, and never a token on an expert nobody routed to.
TEST(ExpertLoadRecorder, RecordsWhileOthersRead) {
  auto made = ExpertLoadRecorder::Create(2, 8, 16, 4);
  ASSERT_TRUE(made.ok());
  ExpertLoadRecorder& r = **made;
  std::thread writer([&] {
    for (int s = 0; s < 2000; ++s) {
      ASSERT_TRUE(r.RecordRouting(0, std::vector<int32_t>{1}).ok());
      ASSERT_TRUE(r.RecordRouting(1, std::vector<int32_t>{1, 2}).ok());
      r.EndStep();
    }
  });
  for (int i = 0; i < 2000; ++i) {
    const ExpertLoads w = r.WindowLoads();
    EXPECT_LE(w.at(0, 1), 16.0);
    EXPECT_EQ(w.at(0, 2), 0.0);
  }
  writer.join();
  EXPECT_EQ(r.steps(), 2000);
  // From step 17 on, the window holds 13 + (step - 17) mod 4 steps: 16 after step 2000.
  EXPECT_EQ(r.WindowLoads().at(1, 2), 16.0);
}

}  // namespace
}  // namespace deepinfer::parallel
