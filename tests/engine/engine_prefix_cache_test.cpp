// Prefix-cache hits against cold runs: a hit resumed from cached window blocks, and replays when the
// window blocks are gone (exact, and bounded, which is exact on the fixture because layers × (window − 1)
// < 128), give bit-identical logprobs; prompt_cache_hit_tokens is exact; the counters say which path ran.
#include "engine_test_support.h"

namespace deepinfer::engine {
namespace {

using test_support::Fingerprint;
using test_support::GreedyProbe;
using test_support::MakeEngine;
using test_support::Prompt;

GenerateOutput GenerateOne(Engine& e, const std::vector<int32_t>& prompt, RequestParams p = GreedyProbe(6)) {
  auto r = e.Generate(std::vector<std::vector<int32_t>>{prompt}, p);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? (*r)[0] : GenerateOutput{};
}

std::vector<float> Cold(const std::vector<int32_t>& prompt, const RequestParams& p = GreedyProbe(6)) {
  EngineOptions o;
  o.enable_prefix_caching = false;
  auto e = MakeEngine(o);
  return Fingerprint(GenerateOne(*e, prompt, p));
}

TEST(EnginePrefixCache, WindowBlockHitIsBitExactWithAnExactHitCount) {
  EngineOptions o;
  o.snapshot_cache_bytes = 0;  // else `first`'s prompt snapshot serves 299 positions
  auto e = MakeEngine(o);
  const std::vector<int32_t> first = Prompt(300, 1);
  std::vector<int32_t> second = first;
  for (int32_t t : Prompt(77, 2)) second.push_back(t);
  const GenerateOutput a = GenerateOne(*e, first);
  EXPECT_EQ(a.prompt_cache_hit_tokens, 0);
  const GenerateOutput b = GenerateOne(*e, second);
  EXPECT_EQ(b.prompt_cache_hit_tokens, 256);  // two full blocks of `first`
  EXPECT_EQ(Fingerprint(b), Cold(second));
  const EngineStats s = e->Stats();
  EXPECT_EQ(s.window_block_hits, 1u);
  EXPECT_EQ(s.replay_hits, 0u);
  EXPECT_EQ(s.prefix_cache_hits, 256u);
  EXPECT_EQ(s.prefix_cache_queries, 300u + 377u);
}

TEST(EnginePrefixCache, AFullyCachedPromptRecomputesItsLastPositionOrWithoutSnapshotsItsLastBlock) {
  const std::vector<int32_t> prompt = Prompt(384, 3);  // exactly three blocks
  const std::vector<float> cold = Cold(prompt);
  for (const bool snapshots : {true, false}) {
    EngineOptions o;
    if (!snapshots) o.snapshot_cache_bytes = 0;
    auto e = MakeEngine(o);
    GenerateOne(*e, prompt);
    const GenerateOutput again = GenerateOne(*e, prompt);
    // The last position's logits are needed: the prompt's snapshot one position before it, or the blocks
    // before the last one.
    EXPECT_EQ(again.prompt_cache_hit_tokens, snapshots ? 383 : 256);
    EXPECT_EQ(Fingerprint(again), cold) << snapshots;
  }
}

TEST(EnginePrefixCache, ReplaysWithoutWindowBlocksAreBitExact) {
  const std::vector<int32_t> first = Prompt(520, 4);
  std::vector<int32_t> second = first;
  for (int32_t t : Prompt(40, 5)) second.push_back(t);
  const std::vector<float> cold = Cold(second);
  for (SwaReplay mode : {SwaReplay::kExact, SwaReplay::kBounded}) {
    EngineOptions o;
    o.swa_replay = mode;
    o.window_cache_bytes = 1;  // no window block survives its sequence
    auto e = MakeEngine(o);
    GenerateOne(*e, first);
    const GenerateOutput b = GenerateOne(*e, second);
    EXPECT_EQ(b.prompt_cache_hit_tokens, 512);
    EXPECT_EQ(Fingerprint(b), cold) << (mode == SwaReplay::kExact ? "exact" : "bounded");
    const EngineStats s = e->Stats();
    EXPECT_EQ(s.window_block_hits, 0u);
    EXPECT_EQ(s.replay_hits, 1u);
    EXPECT_EQ(s.window_misses_evicted, 1u);  // a zero budget evicts each window block as it is released
    EXPECT_EQ(s.window_misses_expired + s.window_misses_never_cached, 0u);
    EXPECT_GT(s.replayed_tokens, 0u);
    if (mode == SwaReplay::kBounded) {
      EXPECT_EQ(s.replayed_tokens, 128u);
    }
  }
}

TEST(EnginePrefixCache, SaltsIsolateTenants) {
  auto e = MakeEngine();
  const std::vector<int32_t> prompt = Prompt(300, 6);
  RequestParams p = GreedyProbe(2);
  p.cache_salt = "tenant-a";
  GenerateOne(*e, prompt, p);
  p.cache_salt = "tenant-b";
  EXPECT_EQ(GenerateOne(*e, prompt, p).prompt_cache_hit_tokens, 0);
  p.cache_salt = "tenant-a";
  EXPECT_EQ(GenerateOne(*e, prompt, p).prompt_cache_hit_tokens, 299);  // the blocks, then the prompt's snapshot
}

TEST(EnginePrefixCache, AgentTurnsHitTheWholePreviousTurn) {
  // Each turn's prompt is the previous prompt, its output and a new message: the hit covers every
  // position of the previous turn's prompt + output (its snapshot), or, with snapshots off, every full block.
  for (const bool snapshots : {true, false}) {
    EngineOptions o;
    if (!snapshots) o.snapshot_cache_bytes = 0;
    auto e = MakeEngine(o);
    std::vector<int32_t> context = Prompt(200, 7);
    int64_t previous_computed = 0;
    for (int turn = 0; turn < 4; ++turn) {
      const GenerateOutput r = GenerateOne(*e, context, GreedyProbe(20));
      // Everything the previous turn computed (its prompt and its 20 tokens but the last, whose KV was never
      // computed), in whole blocks without snapshots.
      const int64_t hit = snapshots ? previous_computed : (previous_computed / 128) * 128;
      EXPECT_EQ(r.prompt_cache_hit_tokens, turn == 0 ? 0 : hit) << "turn " << turn;
      EXPECT_EQ(Fingerprint(r), Cold(context, GreedyProbe(20))) << "turn " << turn;
      previous_computed = static_cast<int64_t>(context.size()) + 19;
      for (const GeneratedToken& t : r.sequences[0].tokens) context.push_back(t.id);
      for (int32_t t : Prompt(40, 100 + static_cast<uint32_t>(turn))) context.push_back(t);
    }
    const EngineStats s = e->Stats();
    if (snapshots) {
      EXPECT_EQ(s.snapshot_hits, 3u);
      EXPECT_EQ(s.snapshot_misses, 1u);  // the first turn
      // Past the full blocks: 219 − 128, 279 − 256 and 339 − 256 positions (200 + 19, then + 20 + 40 each turn).
      EXPECT_EQ(s.snapshot_tokens, 91u + 23u + 83u);
    } else {
      EXPECT_GE(s.window_block_hits, 3u);
    }
  }
}

TEST(EnginePrefixCache, NOutputsForkFromThePromptBitExactly) {
  auto e = MakeEngine();
  const std::vector<int32_t> prompt = Prompt(200, 8);
  RequestParams p = GreedyProbe(5);
  p.sampling.temperature = 1.0;
  p.sampling.seed = 5;
  p.sampling.n = 4;
  const GenerateOutput multi = GenerateOne(*e, prompt, p);
  // Output i of an n = 4 request equals what a single request sampling with sequence index i would give:
  // check output 0 against n = 1 on a cold engine.
  EngineOptions o;
  o.enable_prefix_caching = false;
  auto cold = MakeEngine(o);
  RequestParams single = p;
  single.sampling.n = 1;
  EXPECT_EQ(Fingerprint(multi), Fingerprint(GenerateOne(*cold, prompt, single)));
}

// The engine plans restores, forks and exact replays by what the model declares, not by probing it.
TEST(EnginePrefixCache, TheModelDeclaresItsSequenceOperationsAndReplayCone) {
  auto m = test_support::LoadFixture();
  ASSERT_NE(m, nullptr);
  const model::ModelInfo& info = m->info();
  EXPECT_TRUE(info.supports_restore);
  EXPECT_TRUE(info.supports_fork);
  EXPECT_FALSE(info.supports_draft);  // loaded without drafting
  int64_t window = 0, layers = 0;
  for (const kvcache::CacheGroupSpec& g : m->cache_spec().groups) {
    if (g.retention != kvcache::CacheRetention::kWindow) continue;
    window = std::max(window, g.window);
    layers = std::max(layers, g.num_layers);
  }
  ASSERT_GT(window, 0);  // the fixture has window attention
  // Every window layer's dependency reaches window − 1 further back, plus the boundary state, plus a block.
  EXPECT_EQ(info.exact_replay_positions, (layers + 1) * (window - 1) + kvcache::kBlockTokens);
}

}  // namespace
}  // namespace deepinfer::engine
