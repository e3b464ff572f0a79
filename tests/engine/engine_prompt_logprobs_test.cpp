// Prompt logprobs (RequestParams::prompt_logprobs) on the tiny V4 fixture, against the engine's own
// sampled-token logprobs: both are log_softmax of the row of the position before the token.
#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <thread>

#include "engine_test_support.h"

namespace deepinfer::engine {
namespace {

using test_support::MakeEngine;
using test_support::Prompt;

struct PromptLogprobsRun {
  std::vector<GeneratedToken> prompt_logprobs;
  std::vector<GeneratedToken> generated;
  int updates_with_prompt_logprobs = 0;
  int64_t hit_tokens = -1;
};

PromptLogprobsRun RunWithPromptLogprobs(Engine& engine, const std::vector<int32_t>& prompt, const RequestParams& params) {
  PromptLogprobsRun run;
  std::mutex mu;
  std::atomic<bool> done{false};
  auto id = engine.AddRequest(prompt, params, [&](RequestUpdate u) {
    std::lock_guard<std::mutex> lock(mu);
    if (!u.prompt_logprobs.empty()) {
      ++run.updates_with_prompt_logprobs;
      run.prompt_logprobs = u.prompt_logprobs;
    }
    run.hit_tokens = u.prompt_cache_hit_tokens;
    for (const SequenceDelta& d : u.sequences)
      for (const GeneratedToken& t : d.tokens) run.generated.push_back(t);
    if (u.finished) done = true;
  });
  EXPECT_TRUE(id.ok()) << id.status().ToString();
  while (id.ok() && !done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::lock_guard<std::mutex> lock(mu);
  return run;
}

RequestParams GreedyWithLogprobs(int64_t max_tokens, int prompt_logprobs) {
  RequestParams p = test_support::GreedyProbe(max_tokens, 2);
  p.prompt_logprobs = prompt_logprobs;
  return p;
}

// A greedy run of P yields g1..g8 with logprobs l1..l8, each log_softmax of the logits at the position
// before it. A prompt P + g1..g7 asks for the same rows' log_softmax at those tokens: the prompt logprob of
// g_k (position |P| + k - 1) must be l_k, and its alternatives the sampled token's. Small chunks put chunk
// boundaries inside the prompt; the second run of the same prompt finds its blocks cached and must still
// compute (and report) every position.
TEST(EnginePromptLogprobs, EqualTheLogprobsOfTheSameTokensGenerated) {
  EngineOptions o;
  o.prefill_chunk = 48;
  auto engine = MakeEngine(o);
  ASSERT_TRUE(engine);
  const std::vector<int32_t> base = Prompt(150, 3);
  const PromptLogprobsRun greedy = RunWithPromptLogprobs(*engine, base, GreedyWithLogprobs(8, -1));
  ASSERT_EQ(greedy.generated.size(), 8u);
  EXPECT_EQ(greedy.updates_with_prompt_logprobs, 0);
  std::vector<int32_t> extended = base;
  for (size_t k = 0; k < 7; ++k) extended.push_back(greedy.generated[k].id);
  for (int pass = 0; pass < 2; ++pass) {
    const PromptLogprobsRun run = RunWithPromptLogprobs(*engine, extended, GreedyWithLogprobs(2, 2));
    EXPECT_EQ(run.updates_with_prompt_logprobs, 1) << "pass " << pass;
    EXPECT_EQ(run.hit_tokens, 0) << "pass " << pass;
    ASSERT_EQ(run.prompt_logprobs.size(), extended.size()) << "pass " << pass;
    EXPECT_EQ(run.prompt_logprobs[0].id, extended[0]);
    EXPECT_TRUE(run.prompt_logprobs[0].top_logprobs.empty());
    for (size_t i = 1; i < extended.size(); ++i) {
      const GeneratedToken& t = run.prompt_logprobs[i];
      ASSERT_EQ(t.id, extended[i]);
      EXPECT_LE(t.logprob, 0.0f);
      ASSERT_EQ(t.top_logprobs.size(), 2u);
      EXPECT_GE(t.top_logprobs[0].logprob, t.logprob);
    }
    for (size_t k = 0; k < 7; ++k) {
      const GeneratedToken& got = run.prompt_logprobs[base.size() + k];
      const GeneratedToken& want = greedy.generated[k];
      EXPECT_NEAR(got.logprob, want.logprob, 1e-4) << "token " << k << ", pass " << pass;
      // Greedy picked the most likely token: it heads the alternatives.
      EXPECT_EQ(got.top_logprobs[0].id, want.id) << "token " << k;
    }
    // The completion continues as the greedy run did.
    ASSERT_EQ(run.generated.size(), 2u);
    EXPECT_EQ(run.generated[0].id, greedy.generated[7].id);
  }
}

TEST(EnginePromptLogprobs, OutOfRangeIsRefused) {
  auto engine = MakeEngine();
  ASSERT_TRUE(engine);
  RequestParams p = GreedyWithLogprobs(1, 21);
  auto id = engine->AddRequest(Prompt(4, 1), p, [](RequestUpdate) {});
  ASSERT_FALSE(id.ok());
  EXPECT_NE(id.status().message().find("prompt_logprobs"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer::engine
