// Scheduler invariants under seeded randomized workloads: arrivals over time, cancellations, deadlines,
// priorities, n > 1, shared prefixes (cache hits) and pools so small that preemption is constant. Every
// request gets exactly one final update with a reason for each output, the block manager's invariants and
// the step budget hold after every step (EngineOptions::check_invariants), nothing leaks, and every
// request that ran to its end produced exactly what it produces alone on a roomy engine.
#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "core/clock.h"
#include "engine_test_support.h"
#include "support/sanitizer_scale.h"

namespace deepinfer::engine {
namespace {

using test_support::MakeEngine;
using test_support::Prompt;

struct Spec {
  std::vector<int32_t> prompt;
  RequestParams params;
  bool abort = false;
  int abort_after_ms = 0;
};

struct Outcome {
  int finished_updates = 0;
  bool updates_after_finish = false;
  std::vector<std::vector<int32_t>> ids;
  std::vector<std::vector<float>> logprobs;
  std::vector<int> reasons;
};

std::vector<Spec> MakeWorkload(uint32_t seed) {
  std::mt19937 rng(seed);
  auto between = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const std::vector<std::vector<int32_t>> prefixes = {Prompt(260, seed), Prompt(140, seed + 1), Prompt(3, seed + 2)};
  std::vector<Spec> specs;
  for (int i = 0; i < 28; ++i) {
    Spec s;
    s.prompt = prefixes[static_cast<size_t>(between(0, 2))];
    s.prompt.resize(static_cast<size_t>(between(1, static_cast<int>(s.prompt.size()))));
    for (int32_t t : Prompt(between(0, 90), seed * 100 + static_cast<uint32_t>(i))) s.prompt.push_back(t);
    RequestParams& p = s.params;
    p.sampling.temperature = between(0, 1) ? 0.8 : 0.0;
    p.sampling.top_k = between(0, 1) ? 20 : 0;
    p.sampling.seed = static_cast<uint64_t>(i);
    p.sampling.max_tokens = between(1, 4) == 1 ? between(100, 200) : between(1, 40);
    p.sampling.n = between(1, 6) == 1 ? between(2, 3) : 1;
    p.sampling.logprobs = true;
    p.sampling.ignore_eos = true;
    p.priority = between(0, 2);
    if (between(0, 9) == 0) p.deadline_nanos = NowNanos() + between(1, 30) * 1'000'000;
    s.abort = between(0, 7) == 0;
    s.abort_after_ms = between(0, 20);
    specs.push_back(std::move(s));
  }
  return specs;
}

void Record(Outcome* o, std::mutex* mu, const RequestUpdate& u) {
  std::lock_guard<std::mutex> lock(*mu);
  if (o->finished_updates > 0) o->updates_after_finish = true;
  for (const SequenceDelta& d : u.sequences) {
    const size_t i = static_cast<size_t>(d.index);
    if (o->ids.size() <= i) {
      o->ids.resize(i + 1);
      o->logprobs.resize(i + 1);
      o->reasons.resize(i + 1, -1);
    }
    for (const GeneratedToken& t : d.tokens) {
      o->ids[i].push_back(t.id);
      o->logprobs[i].push_back(t.logprob);
    }
    if (d.finish) o->reasons[i] = static_cast<int>(*d.finish);
  }
  if (u.finished) ++o->finished_updates;
}

TEST(EngineStress, PropertyRandomWorkloadsOnTinyPools) {
  uint64_t preemptions = 0;
  const uint32_t seeds = static_cast<uint32_t>(::deepinfer::test_support::RoundsForThisBuild(3, 1));
  for (uint32_t seed = 1; seed <= seeds; ++seed) {
    std::vector<Spec> specs = MakeWorkload(seed);
    std::mt19937 rng(seed * 7);
    EngineOptions o;
    o.kv_blocks = 4 + static_cast<int64_t>(rng() % 4);
    o.window_blocks = 6 + static_cast<int64_t>(rng() % 6);
    o.max_num_seqs = 4 + static_cast<int64_t>(rng() % 5);
    o.prefill_chunk = 16 + static_cast<int64_t>(rng() % 200);
    o.max_num_batched_tokens = 8 + static_cast<int64_t>(rng() % 300);
    o.swa_replay = rng() % 2 ? SwaReplay::kExact : SwaReplay::kBounded;
    o.window_cache_bytes = 0;
    o.check_invariants = true;
    auto engine = MakeEngine(o);
    ASSERT_TRUE(engine);
    std::mutex mu;
    std::vector<Outcome> outcomes(specs.size());
    std::vector<RequestId> ids(specs.size(), 0);
    std::vector<bool> accepted(specs.size(), false);
    std::vector<std::thread> aborters;
    for (size_t i = 0; i < specs.size(); ++i) {
      auto id = engine->AddRequest(specs[i].prompt, specs[i].params,
                                   [&, i](RequestUpdate u) { Record(&outcomes[i], &mu, u); });
      ASSERT_TRUE(id.ok()) << id.status().ToString();
      accepted[i] = true;
      ids[i] = *id;
      if (specs[i].abort) {
        aborters.emplace_back([&engine, id = *id, ms = specs[i].abort_after_ms] {
          std::this_thread::sleep_for(std::chrono::milliseconds(ms));
          engine->Abort(id);
        });
      }
      if (i >= 10) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 3000));  // the first 10 at once
    }
    for (std::thread& t : aborters) t.join();
    for (size_t i = 0; i < specs.size(); ++i) {
      for (int spin = 0; spin < 20000; ++spin) {
        {
          std::lock_guard<std::mutex> lock(mu);
          if (outcomes[i].finished_updates > 0) break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    const EngineStats stats = engine->Stats();
    EXPECT_EQ(stats.invariant_violations, 0u) << "seed " << seed;
    EXPECT_LE(stats.max_step_tokens, static_cast<uint64_t>(o.max_num_batched_tokens));
    preemptions += stats.num_preemptions;
    for (int spin = 0; spin < 1000 && engine->Stats().kv_blocks_used != 0; ++spin)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    EXPECT_EQ(engine->Stats().kv_blocks_used, 0);
    EXPECT_EQ(engine->Stats().window_blocks_used, 0);

    // Reference: each request that ran to its end, alone on a roomy engine.
    auto roomy = MakeEngine();
    for (size_t i = 0; i < specs.size(); ++i) {
      const Outcome& got = outcomes[i];
      ASSERT_EQ(got.finished_updates, 1) << "seed " << seed << " request " << i;
      EXPECT_FALSE(got.updates_after_finish);
      ASSERT_EQ(got.reasons.size(), static_cast<size_t>(specs[i].params.sampling.n));
      bool complete = true;
      for (int reason : got.reasons) {
        EXPECT_GE(reason, 0) << "an output without a finish reason";
        complete &= reason == static_cast<int>(FinishReason::kLength);
      }
      if (!complete) continue;  // aborted or past its deadline
      RequestParams alone = specs[i].params;
      alone.deadline_nanos = 0;
      auto ref = roomy->Generate(std::vector<std::vector<int32_t>>{specs[i].prompt}, alone);
      ASSERT_TRUE(ref.ok());
      for (size_t k = 0; k < got.ids.size(); ++k) {
        std::vector<int32_t> ref_ids;
        std::vector<float> ref_lp;
        for (const GeneratedToken& t : (*ref)[0].sequences[k].tokens) {
          ref_ids.push_back(t.id);
          ref_lp.push_back(t.logprob);
        }
        EXPECT_EQ(got.ids[k], ref_ids) << "seed " << seed << " request " << i << " output " << k;
        EXPECT_EQ(got.logprobs[k], ref_lp) << "seed " << seed << " request " << i << " output " << k;
      }
    }
  }
  EXPECT_GT(preemptions, 0u) << "the pools were meant to be too small";
}

}  // namespace
}  // namespace deepinfer::engine
