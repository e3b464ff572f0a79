#include "parallel/request_placement.h"

#include <vector>

#include <gtest/gtest.h>

namespace deepinfer::parallel {
namespace {

TEST(RequestPlacement, IdleRanksTakeRequestsInTurn) {
  std::vector<RankLoad> ranks(3);
  const RankCapacity capacity;
  for (int i = 0; i < 6; ++i) {
    const int r = PlaceRequest(ranks, capacity);
    EXPECT_EQ(r, i % 3);
    ++ranks[static_cast<size_t>(r)].placed;  // finished at once: only the count given so far differs
  }
}

TEST(RequestPlacement, PrefersTheRankWithLessQueuedPrefillAndDecodeLoad) {
  const RankCapacity capacity{.batched_tokens = 1000, .kv_tokens = 10000, .sequences = 10};
  // Rank 0: 500 queued prompt tokens = 0.5 of a step; rank 1: 2 requests holding 3,000 KV tokens =
  // 0.3 + 0.2 = 0.5 as well, but rank 0 was given fewer requests; rank 2: 0.4 + 0.1 + 0.1 = 0.6.
  std::vector<RankLoad> ranks{{.queued_prefill_tokens = 500, .placed = 4},
                              {.kv_tokens = 3000, .requests = 2, .placed = 5},
                              {.queued_prefill_tokens = 400, .kv_tokens = 1000, .requests = 1}};
  EXPECT_EQ(PlaceRequest(ranks, capacity), 0);
  ranks[0].placed = 6;  // now the tie goes to rank 1
  EXPECT_EQ(PlaceRequest(ranks, capacity), 1);
  ranks[1].kv_tokens = 3001;  // and a hair more KV makes rank 0 cheaper again
  EXPECT_EQ(PlaceRequest(ranks, capacity), 0);
  ranks[0].queued_prefill_tokens = 700;  // 0.7: rank 1 (0.5001) then rank 2 (0.6)
  EXPECT_EQ(PlaceRequest(ranks, capacity), 1);
  ranks[1].requests = 4;  // 0.3001 + 0.4: rank 2 now
  EXPECT_EQ(PlaceRequest(ranks, capacity), 2);
}

TEST(RequestPlacement, AttentionWeighsLongPromptsByTheCostModel) {
  // Rank 0 waits on one prompt of 1,000 tokens (500,000 attention pairs), rank 1 on 14 prompts of 100
  // (14 × 5,000 = 70,000 pairs).
  std::vector<RankLoad> ranks{{.queued_prefill_tokens = 1000, .queued_prefill_context = PromptContext(1000)},
                              {.queued_prefill_tokens = 1400, .queued_prefill_context = 14 * PromptContext(100)}};
  EXPECT_EQ(PromptContext(1000), 500000.0);
  RankCapacity capacity{.batched_tokens = 1000, .kv_tokens = 1 << 20, .sequences = 64};
  // Tokens alone (no fitted cost model): 1.0 against 1.4 steps.
  EXPECT_EQ(PlaceRequest(ranks, capacity), 0);
  // A pair costs a thousandth of a token: 1,000 + 500 = 1,500 against 1,400 + 70 = 1,470 tokens' worth.
  capacity.context_cost_per_token = 0.001;
  EXPECT_EQ(PlaceRequest(ranks, capacity), 1);
}

}  // namespace
}  // namespace deepinfer::parallel
