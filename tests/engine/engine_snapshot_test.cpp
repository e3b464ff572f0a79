// Token-exact continuation: a prompt that extends a finished sequence's tokens resumes from that
// sequence's snapshot at its last computed position, a prompt sent again resumes one position before its
// end from the snapshot taken when it was computed, and what either generates is bit-identical (ids,
// logprobs and top-20 alternatives) to a cold run, at every position inside a block, for V4, V4.1, V3 and V3.2,
// with chunked prefill and with speculative decoding; without the full blocks under it the snapshot is
// not used and the prompt runs as it would without it. Many prompts at once keep their snapshots beside the
// window blocks their decodes release. Also the snapshot cache's LRU budget (and the budget mechanism
// shared with a block allocator), and the models' state export refusing bytes that are not an export.
#include <cstdlib>

#include "engine/snapshot_cache.h"
#include "kvcache/block_allocator.h"
#include "engine/speculative_config.h"
#include "engine_test_support.h"

namespace deepinfer::engine {
namespace {

using test_support::LoadFixture;
using test_support::Fingerprint;
using test_support::GreedyProbe;
using test_support::MakeEngine;
using test_support::Prompt;

std::vector<GenerateOutput> RunBatch(Engine& e, const std::vector<std::vector<int32_t>>& prompts, const RequestParams& p) {
  auto r = e.Generate(prompts, p);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : std::vector<GenerateOutput>(prompts.size());
}

struct CutCase {
  std::string fixture;
  int32_t vocab = 256;
  EngineOptions warm;
  int64_t first_tokens = 1;  // tokens the first turn generates (its last one is not computed)
};

// For each cut c: a first turn whose computed positions end at 128 + c (one full block, then c tokens),
// then a second turn that sends those positions, the first turn's last token and 5 new tokens. The second
// turn hits 128 + c positions and generates what a cold engine generates for it. Between them the first
// turn's prompts are sent again as they were: each resumes one position before its end from the snapshot
// taken when its prompt was computed (at a block boundary from the window blocks; under 128 positions
// none is taken) and generates what the first turn, a cold run, generated.
void ExpectEveryCutExact(const CutCase& k, const std::vector<int64_t>& cuts, uint32_t seed) {
  std::vector<std::vector<int32_t>> first, second;
  for (int64_t c : cuts) {
    const int64_t length = kvcache::kBlockTokens + c - (k.first_tokens - 1);
    first.push_back(Prompt(length, seed + static_cast<uint32_t>(c), k.vocab));
  }
  auto warm = MakeEngine(k.warm, k.fixture);
  ASSERT_TRUE(warm);
  const std::vector<GenerateOutput> turn1 = RunBatch(*warm, first, GreedyProbe(k.first_tokens));
  const std::vector<GenerateOutput> again = RunBatch(*warm, first, GreedyProbe(k.first_tokens));
  uint64_t again_hits = 0, again_tail = 0;
  for (size_t i = 0; i < cuts.size(); ++i) {
    const auto before_last = static_cast<int64_t>(first[i].size()) - 1;
    const int64_t expected = before_last < kvcache::kBlockTokens ? 0 : before_last;
    EXPECT_EQ(again[i].prompt_cache_hit_tokens, expected) << k.fixture << " sent again, cut " << cuts[i];
    EXPECT_EQ(Fingerprint(again[i]), Fingerprint(turn1[i])) << k.fixture << " sent again, cut " << cuts[i];
    if (before_last > kvcache::kBlockTokens) {
      ++again_hits;
      again_tail += static_cast<uint64_t>(before_last - kvcache::kBlockTokens);
    }
  }
  for (size_t i = 0; i < cuts.size(); ++i) {
    std::vector<int32_t> next = first[i];
    for (const GeneratedToken& t : turn1[i].sequences[0].tokens) next.push_back(t.id);
    for (int32_t t : Prompt(5, seed + 1000 + static_cast<uint32_t>(i), k.vocab)) next.push_back(t);
    second.push_back(std::move(next));
  }
  const std::vector<GenerateOutput> turn2 = RunBatch(*warm, second, GreedyProbe(4));
  EngineOptions cold_options;
  cold_options.enable_prefix_caching = false;
  auto cold = MakeEngine(cold_options, k.fixture);
  ASSERT_TRUE(cold);
  const std::vector<GenerateOutput> reference = RunBatch(*cold, second, GreedyProbe(4));
  for (size_t i = 0; i < cuts.size(); ++i) {
    EXPECT_EQ(turn2[i].prompt_cache_hit_tokens, kvcache::kBlockTokens + cuts[i]) << k.fixture << " cut " << cuts[i];
    EXPECT_EQ(Fingerprint(turn2[i]), Fingerprint(reference[i])) << k.fixture << " cut " << cuts[i];
  }
  const EngineStats s = warm->Stats();
  EXPECT_EQ(s.snapshot_hits, again_hits + cuts.size()) << k.fixture;
  uint64_t tail = again_tail;
  for (int64_t c : cuts) tail += static_cast<uint64_t>(c);
  EXPECT_EQ(s.snapshot_tokens, tail) << k.fixture;
}

// Every position inside a block with DEEPINFER_SNAPSHOT_ALL_CUTS=1 (about half a minute); else the edges of
// the block, of the fixtures' windows (16, 32) and compressor groups (4, 128) and a few between.
std::vector<int64_t> Cuts() {
  std::vector<int64_t> cuts;
  if (std::getenv("DEEPINFER_SNAPSHOT_ALL_CUTS")) {
    for (int64_t c = 1; c < kvcache::kBlockTokens; ++c) cuts.push_back(c);
    return cuts;
  }
  return {1, 2, 3, 4, 5, 16, 17, 32, 33, 65, 127};
}

EngineOptions Chunked() {
  EngineOptions o;
  o.prefill_chunk = 48;  // chunks end inside blocks, at other positions than the cuts
  o.snapshot_cache_bytes = int64_t{512} << 20;
  return o;
}

TEST(EngineSnapshot, CutsInsideABlockOfV4AreExactWithChunkedPrefill) {
  ExpectEveryCutExact({.fixture = "v4_mixed", .warm = Chunked()}, Cuts(), 1);
}

TEST(EngineSnapshot, CutsInsideABlockOfV41AreExactWithChunkedPrefill) {
  // The larger fixture: the edges only, unless every cut is asked for.
  std::vector<int64_t> cuts = {1, 4, 5, 32, 33, 127};
  if (std::getenv("DEEPINFER_SNAPSHOT_ALL_CUTS")) cuts = Cuts();
  ExpectEveryCutExact({.fixture = "v41_tiny_a_bf16", .vocab = 512, .warm = Chunked()}, cuts, 2);
}

TEST(EngineSnapshot, V41WithASlidingWindowShorterThanABlock) {
  ExpectEveryCutExact({.fixture = "v41_tiny_b_fp8", .vocab = 512, .warm = Chunked()}, {1, 32, 33, 127}, 3);
}

TEST(EngineSnapshot, SpeculativeDecodingWritesExactSnapshots) {
  // The first turn decodes 9 tokens, verifying MTP drafts: the snapshot is taken after rollbacks, with the
  // draft layer's window entries and hidden-state ring.
  EngineOptions o = Chunked();
  auto parsed = ParseSpeculativeConfig(R"({"method": "mtp", "num_speculative_tokens": 3})");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  o.speculative = *parsed;
  ExpectEveryCutExact({.fixture = "v4_mixed", .warm = o, .first_tokens = 9}, {1, 2, 16, 17, 127}, 4);
}

TEST(EngineSnapshot, V3AndV32ResumeFromTheirPartialBlocks) {
  // No window and no compressor: the latents, rope keys and (V3.2) indexer keys of the partial block are
  // the whole of what a continuation reads besides the full blocks.
  ExpectEveryCutExact({.fixture = "v3_tiny_a_bf16", .warm = Chunked()}, {1, 2, 64, 127}, 5);
  ExpectEveryCutExact({.fixture = "v32_tiny_c_fp8", .warm = Chunked()}, {1, 2, 33, 127}, 6);
}

TEST(EngineSnapshot, V3SpeculativeDecodingWritesExactSnapshots) {
  // The MTP entries and each block's last hidden state live in the partial block, the recent hidden states
  // in the exported state.
  EngineOptions o = Chunked();
  auto parsed = ParseSpeculativeConfig(R"({"method": "mtp", "num_speculative_tokens": 2})");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  o.speculative = *parsed;
  ExpectEveryCutExact({.fixture = "v32_tiny_c_fp8", .warm = o, .first_tokens = 9}, {1, 16, 17, 126}, 7);
}

TEST(EngineSnapshot, WithoutItsPrefixBlocksASnapshotIsNotUsed) {
  EngineOptions o;
  o.kv_blocks = 6;  // three other 300-token prompts (3 blocks each while they run) evict the first one's
  auto e = MakeEngine(o);
  ASSERT_TRUE(e);
  const std::vector<int32_t> first = Prompt(200, 10);
  RunBatch(*e, {first}, GreedyProbe(1));
  for (uint32_t other = 11; other < 14; ++other) RunBatch(*e, {Prompt(300, other)}, GreedyProbe(1));
  std::vector<int32_t> second = first;
  for (int32_t t : Prompt(6, 20)) second.push_back(t);
  const GenerateOutput warm = RunBatch(*e, {second}, GreedyProbe(4))[0];
  EXPECT_EQ(warm.prompt_cache_hit_tokens, 0);
  EngineOptions cold_options;
  cold_options.enable_prefix_caching = false;
  auto cold = MakeEngine(cold_options);
  EXPECT_EQ(Fingerprint(warm), Fingerprint(RunBatch(*cold, {second}, GreedyProbe(4))[0]));
  const EngineStats s = e->Stats();
  EXPECT_EQ(s.snapshot_hits, 0u);
  EXPECT_EQ(s.snapshot_misses, 5u);  // every admission looked
}

TEST(EngineSnapshot, APromptThatDivergesInTheTailDoesNotResume) {
  auto e = MakeEngine();
  ASSERT_TRUE(e);
  const std::vector<int32_t> first = Prompt(200, 30);
  RunBatch(*e, {first}, GreedyProbe(1));
  std::vector<int32_t> second(first.begin(), first.begin() + 190);
  for (int32_t t : Prompt(20, 31)) second.push_back(t);
  EXPECT_EQ(RunBatch(*e, {second}, GreedyProbe(2))[0].prompt_cache_hit_tokens, 128);  // the full block only
  EXPECT_EQ(e->Stats().snapshot_hits, 0u);
}

TEST(EngineSnapshot, ConcurrentPromptsSentAgainAllResumeFromTheirSnapshots) {
  // Prompts of 200 tokens decode 100 tokens each, all at once: each leaves its prompt's snapshot (at 199),
  // a cached window block as its prompt ends (block 0) and one as its decode moves past it (block 1), and
  // its finished sequence's snapshot (at 299). With a window cache budget that holds every snapshot (and a
  // window block more), the window blocks must not push the snapshots out: sent again, every prompt
  // resumes one position before its end; extended by its answer and 3 tokens, at its finished sequence's
  // end, generating what a cold engine does.
  constexpr int kPrompts = 6;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < kPrompts; ++i) prompts.push_back(Prompt(200, 50 + static_cast<uint32_t>(i)));
  int64_t window_block_bytes = 0;
  {
    auto m = LoadFixture("v4_mixed");
    ASSERT_TRUE(m);
    for (const kvcache::CacheGroupSpec& g : m->cache_spec().groups)
      if (g.retention == kvcache::CacheRetention::kWindow) window_block_bytes += g.bytes_per_block;
  }
  ASSERT_GT(window_block_bytes, 0);
  int64_t snapshot_bytes = 0;
  {
    EngineOptions ample;
    ample.window_cache_bytes = int64_t{32} << 20;
    auto e = MakeEngine(ample);
    ASSERT_TRUE(e);
    RunBatch(*e, prompts, GreedyProbe(100));
    // The finished sequences' snapshots are made in the step after they finish: a request of one full
    // block (which leaves none) runs after that step, so the figures below count them all.
    RunBatch(*e, {Prompt(128, 99)}, GreedyProbe(1));
    const EngineStats s = e->Stats();
    ASSERT_EQ(s.snapshots_cached, 2 * kPrompts);
    ASSERT_GE(s.window_blocks_cached, 2 * kPrompts);
    snapshot_bytes = s.snapshot_bytes;
  }
  EngineOptions o;
  o.window_cache_bytes = snapshot_bytes + window_block_bytes;
  auto e = MakeEngine(o);
  ASSERT_TRUE(e);
  const std::vector<GenerateOutput> first = RunBatch(*e, prompts, GreedyProbe(100));
  const std::vector<GenerateOutput> again = RunBatch(*e, prompts, GreedyProbe(100));
  std::vector<std::vector<int32_t>> extended;
  for (int i = 0; i < kPrompts; ++i) {
    EXPECT_EQ(again[static_cast<size_t>(i)].prompt_cache_hit_tokens, 199) << "prompt " << i;
    EXPECT_EQ(Fingerprint(again[static_cast<size_t>(i)]), Fingerprint(first[static_cast<size_t>(i)])) << "prompt " << i;
    std::vector<int32_t> next = prompts[static_cast<size_t>(i)];
    for (const GeneratedToken& t : first[static_cast<size_t>(i)].sequences[0].tokens) next.push_back(t.id);
    for (int32_t t : Prompt(3, 70 + static_cast<uint32_t>(i))) next.push_back(t);
    extended.push_back(std::move(next));
  }
  const std::vector<GenerateOutput> turn2 = RunBatch(*e, extended, GreedyProbe(2));
  EngineOptions cold_options;
  cold_options.enable_prefix_caching = false;
  auto cold = MakeEngine(cold_options);
  ASSERT_TRUE(cold);
  const std::vector<GenerateOutput> reference = RunBatch(*cold, extended, GreedyProbe(2));
  for (int i = 0; i < kPrompts; ++i) {
    EXPECT_EQ(turn2[static_cast<size_t>(i)].prompt_cache_hit_tokens, 299) << "prompt " << i;
    EXPECT_EQ(Fingerprint(turn2[static_cast<size_t>(i)]), Fingerprint(reference[static_cast<size_t>(i)]))
        << "prompt " << i;
  }
}

// A whole prompt's state at a block boundary is kept under its full blocks with no tail: it serves a prompt
// of those blocks and one token more (which leaves it no tail token to resume past), and a longer snapshot
// under the same blocks is still preferred where the prompt leaves room for it.
TEST(EngineSnapshot, TheCacheKeepsABlockBoundaryStateUnderNoTail) {
  auto snapshot = [](int64_t n) {
    auto s = std::make_shared<SequenceSnapshot>();
    s->num_tokens = n;
    return std::shared_ptr<const SequenceSnapshot>(std::move(s));
  };
  SnapshotCache cache(1 << 20);
  const kvcache::BlockHash a{1, 2}, b{3, 4};
  const uint64_t boundary = cache.Reserve(a, {}, 100);
  ASSERT_NE(boundary, 0u);
  EXPECT_EQ(cache.Reserve(a, {}, 100), 0u);  // the same one again
  cache.Fill(boundary, snapshot(256));
  const std::vector<int32_t> one = {9}, three = {9, 8, 7};
  ASSERT_NE(cache.Find(a, one, 0), nullptr);
  EXPECT_EQ(cache.Find(a, one, 0)->num_tokens, 256);
  EXPECT_EQ(cache.Find(b, one, 0), nullptr);  // other full blocks
  cache.Fill(cache.Reserve(a, std::vector<int32_t>{9, 8}, 100), snapshot(258));
  EXPECT_EQ(cache.Find(a, three, 2)->num_tokens, 258);  // the longest
  EXPECT_EQ(cache.Find(a, three, 1)->num_tokens, 256);  // the longest that leaves a position to compute
}

TEST(EngineSnapshot, TheCacheKeepsTheMostRecentlyUsedWithinItsBudget) {
  auto snapshot = [](int64_t n, size_t bytes) {
    auto s = std::make_shared<SequenceSnapshot>();
    s->num_tokens = n;
    s->blocks.resize(bytes);
    return std::shared_ptr<const SequenceSnapshot>(std::move(s));
  };
  const int64_t each = snapshot(0, 1000)->bytes();
  SnapshotCache cache(2 * each + each / 2);  // two fit
  const kvcache::BlockHash a{1, 2}, b{3, 4};
  const std::vector<int32_t> t1 = {5, 6, 7}, t2 = {5, 6}, t3 = {9};
  const uint64_t k1 = cache.Reserve(a, t1, each), k2 = cache.Reserve(a, t2, each);
  EXPECT_NE(k1, 0u);
  EXPECT_EQ(cache.Reserve(a, t1, each), 0u);  // the same one again
  // Two being made take the budget: a third is not taken.
  EXPECT_EQ(cache.Reserve(b, t3, each), 0u);
  EXPECT_EQ(cache.pending_bytes(), 2 * each);
  cache.Fill(k1, snapshot(3, 1000));
  cache.Fill(k2, snapshot(2, 1000));
  const std::vector<int32_t> prompt = {5, 6, 7, 8};
  EXPECT_EQ(cache.Find(a, prompt, 10)->num_tokens, 3);  // the longest
  EXPECT_EQ(cache.Find(a, prompt, 2)->num_tokens, 2);   // the longest that leaves a position to compute
  EXPECT_EQ(cache.Find(b, prompt, 10), nullptr);        // other full blocks
  EXPECT_EQ(cache.Find(a, std::vector<int32_t>{5, 7}, 10), nullptr);
  // A third evicts the least recently used (t1: t2 was found last).
  cache.Fill(cache.Reserve(b, t3, each), snapshot(1, 1000));
  EXPECT_EQ(cache.count(), 2);
  EXPECT_EQ(cache.bytes(), 2 * each);
  EXPECT_EQ(cache.evictions(), 1u);
  EXPECT_EQ(cache.Find(a, prompt, 10)->num_tokens, 2);
  // Making room for one more evicts the least recently used kept one first (t3: t2 was found last), so
  // kept plus being made stay within the budget. A failed take then forgets its name; one larger than the
  // budget is not kept.
  const uint64_t k3 = cache.Reserve(b, t1, each);
  ASSERT_NE(k3, 0u);
  EXPECT_EQ(cache.evictions(), 2u);
  EXPECT_LE(cache.bytes() + cache.pending_bytes(), 2 * each + each / 2);
  EXPECT_EQ(cache.Find(b, std::vector<int32_t>{9, 1}, 10), nullptr);
  cache.Fill(k3, nullptr);
  cache.Fill(cache.Reserve(b, t2, each), snapshot(2, 10000));
  EXPECT_EQ(cache.count(), 1);
  EXPECT_EQ(cache.pending_bytes(), 0);
  EXPECT_EQ(cache.Reserve(b, t2, 3 * each), 0u);  // expected larger than the budget: not taken
  EXPECT_EQ(cache.Find(a, prompt, 10)->num_tokens, 2);
}

TEST(EngineSnapshot, SnapshotsAndCachedWindowBlocksShareOneLeastRecentlyUsedBudget) {
  auto snapshot = [](int64_t n) {
    auto s = std::make_shared<SequenceSnapshot>();
    s->num_tokens = n;
    s->blocks.resize(1000);
    return std::shared_ptr<const SequenceSnapshot>(std::move(s));
  };
  // Every entry of either kind counts `each` bytes; three fit.
  const int64_t each = snapshot(0)->bytes();
  kvcache::LruBudget budget(3 * each);
  kvcache::BlockAllocator window({.num_blocks = 8, .budget = &budget, .block_bytes = each});
  SnapshotCache snapshots(&budget, -1);
  auto cache_block = [&](uint64_t name) {  // a full window block its sequence no longer sees
    const int32_t b = window.Allocate();
    EXPECT_EQ(window.Register(b, {name, 0}), b);
    window.Release(b, 0);
  };
  const kvcache::BlockHash prefix{7, 7};
  const std::vector<int32_t> tail1 = {1}, tail2 = {2}, tail3 = {3};
  auto expect_bound = [&](const char* when) {
    EXPECT_EQ(budget.bytes(), snapshots.bytes() + snapshots.pending_bytes() + window.num_cached() * each) << when;
    EXPECT_LE(budget.bytes(), budget.budget()) << when;
    EXPECT_TRUE(window.CheckInvariants().ok()) << when << ": " << window.CheckInvariants().ToString();
  };
  // Uses, oldest first: block A, snapshot 1, block B: the budget is full and nothing was evicted.
  cache_block(1);
  snapshots.Fill(snapshots.Reserve(prefix, tail1, each), snapshot(1));
  cache_block(2);
  expect_bound("full");
  EXPECT_EQ(window.num_cached(), 2);
  EXPECT_EQ(window.evictions() + snapshots.evictions(), 0u);
  // Snapshot 2 evicts the oldest entry, block A, for room.
  snapshots.Fill(snapshots.Reserve(prefix, tail2, each), snapshot(2));
  expect_bound("snapshot 2");
  EXPECT_EQ(window.Find({1, 0}), kvcache::kNoBlock);
  EXPECT_EQ(window.WhyForgotten({1, 0}), kvcache::Forgotten::kEvicted);
  EXPECT_EQ(window.evictions(), 1u);
  EXPECT_EQ(snapshots.count(), 2);
  // A prompt finds snapshot 1 (now the most recently used): order B, 2, 1. Block C evicts block B.
  const std::vector<int32_t> prompt = {1, 9, 9};
  ASSERT_NE(snapshots.Find(prefix, prompt, 2), nullptr);
  cache_block(3);
  expect_bound("block C");
  EXPECT_EQ(window.Find({2, 0}), kvcache::kNoBlock);
  EXPECT_NE(window.Find({3, 0}), kvcache::kNoBlock);
  EXPECT_EQ(window.evictions(), 2u);
  EXPECT_EQ(snapshots.evictions(), 0u);
  // Order 2, 1, C: snapshot 3 evicts snapshot 2, the least recently used, not block C.
  snapshots.Fill(snapshots.Reserve(prefix, tail3, each), snapshot(3));
  expect_bound("snapshot 3");
  EXPECT_EQ(snapshots.evictions(), 1u);
  EXPECT_EQ(snapshots.Find(prefix, std::vector<int32_t>{2, 9}, 1), nullptr);
  EXPECT_NE(snapshots.Find(prefix, prompt, 2), nullptr);
  // A hit on block C takes it out of the cache (its bytes are the sequence's now), and its release puts it
  // back as the most recently used: order 3, 1, C. Block D then evicts snapshot 3.
  const int32_t c = window.Acquire({3, 0});
  ASSERT_NE(c, kvcache::kNoBlock);
  EXPECT_EQ(budget.bytes(), 2 * each);
  window.Release(c, 0);
  cache_block(4);
  expect_bound("block D");
  EXPECT_EQ(snapshots.evictions(), 2u);
  EXPECT_EQ(snapshots.Find(prefix, std::vector<int32_t>{3, 9}, 1), nullptr);
  EXPECT_EQ(snapshots.count(), 1);
  EXPECT_EQ(window.num_cached(), 2);
  EXPECT_EQ(window.evictions(), 2u);
}

TEST(EngineSnapshot, ModelsRefuseBytesThatAreNotTheirExport) {
  for (const char* fixture : {"v4_mixed", "v41_tiny_a_bf16", "v3_tiny_a_bf16", "v32_tiny_c_fp8"}) {
    auto m = LoadFixture(fixture);
    ASSERT_TRUE(m);
    ASSERT_TRUE(m->info().supports_state_export);
    auto pools = kvcache::KvPools::Create(m->cache_spec(), 4);
    ASSERT_TRUE(pools.ok());
    model::SequentialBlocks blocks(m->cache_spec(), *pools);
    auto state = m->NewSequence();
    const std::vector<int32_t> tokens = Prompt(150, 40, 256);
    ASSERT_TRUE(blocks.Reserve(*state, 150).ok());
    model::ForwardOutput out;
    model::SequenceChunk chunk{state.get(), tokens, model::LogitsWanted::kNone};
    ASSERT_TRUE(m->Forward(std::span(&chunk, 1), *pools, &out).ok());
    auto bytes = m->ExportState(*state);
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    // A round trip gives the same bytes and position.
    auto copy = m->NewSequence();
    ASSERT_TRUE(m->ImportState(*copy, *bytes).ok()) << fixture;
    EXPECT_EQ(copy->num_tokens(), 150);
    EXPECT_EQ(*m->ExportState(*copy), *bytes);
    // Truncated, extended, or another family's: refused, and the state keeps what it had.
    std::vector<uint8_t> shorter(bytes->begin(), bytes->end() - 1), longer = *bytes, retagged = *bytes;
    longer.push_back(0);
    retagged[0] ^= 1;
    for (const auto& bad : {shorter, longer, retagged, std::vector<uint8_t>{}}) {
      const Status st = m->ImportState(*copy, bad);
      EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << fixture << ": " << st.ToString();
      EXPECT_EQ(copy->num_tokens(), 150);
    }
  }
}

}  // namespace
}  // namespace deepinfer::engine
