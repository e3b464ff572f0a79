// The KV store as the engine's persistent tier: what the engine offers lands in the store under its
// chained block hashes with exactly the bytes a cold computation gives, and a store reopened (a restart,
// or a second process) finds and reads them back verified.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "engine_test_support.h"
#include "kvcache/block_hash.h"
#include "kvstore/kv_store_tier.h"

namespace deepinfer::engine {
namespace {

using namespace test_support;

class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = std::filesystem::temp_directory_path().string() + "/kv_tier_test.XXXXXX";
    path_ = ::mkdtemp(tmpl.data()) != nullptr ? tmpl : "";
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

kvstore::StoreModel StoreModelOf(const model::CausalLM& m, model::ComputePrecision compute) {
  return {m.info().architecture, m.info().weights_fingerprint, model::ComputePrecisionName(compute),
          model::KvPrecisionName(model::KvPrecision::kF32)};
}

std::unique_ptr<kvstore::KvStoreTier> OpenTier(const std::string& dir, const model::CausalLM& m) {
  auto layout = kvstore::StoreLayoutFor(m.cache_spec(), StoreModelOf(m, model::ComputePrecision::kExact));
  EXPECT_TRUE(layout.ok()) << layout.status().ToString();
  kvstore::StoreOptions o;
  o.dir = dir;
  o.layout = *layout;
  o.sweep_interval_s = 0;
  auto store = kvstore::Store::Open(std::move(o));
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return std::make_unique<kvstore::KvStoreTier>(std::move(store).value(), kvstore::TtlClass::kChat);
}

TEST(KvStoreTier, LayoutHoldsThePrefixGroupsAndNamesThePrecision) {
  auto m = LoadFixture();
  ASSERT_NE(m, nullptr);
  auto layout = kvstore::StoreLayoutFor(m->cache_spec(), StoreModelOf(*m, model::ComputePrecision::kExact));
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  size_t prefix_groups = 0;
  for (const auto& g : m->cache_spec().groups) {
    if (g.retention != kvcache::CacheRetention::kPrefix) {
      EXPECT_EQ(layout->description.find(" " + g.name + " "), std::string::npos) << "window groups stay in RAM";
      continue;
    }
    ASSERT_LT(prefix_groups, layout->segment_bytes.size());
    EXPECT_EQ(layout->segment_bytes[prefix_groups], static_cast<uint64_t>(g.bytes_per_block));
    EXPECT_NE(layout->description.find(" " + g.name + " "), std::string::npos);
    ++prefix_groups;
  }
  EXPECT_EQ(prefix_groups, layout->segment_bytes.size());
  EXPECT_EQ(layout->model_fingerprint, m->info().weights_fingerprint);
  EXPECT_NE(layout->description.find(" compute=exact kv=f32"), std::string::npos) << layout->description;
  auto bf16 = kvstore::StoreLayoutFor(m->cache_spec(), StoreModelOf(*m, model::ComputePrecision::kBf16Activations));
  ASSERT_TRUE(bf16.ok());
  EXPECT_NE(bf16->description.find(" compute=bf16 kv=f32"), std::string::npos) << bf16->description;
  EXPECT_NE(bf16->Id(), layout->Id());
}

// The prefix groups' bytes of the first `blocks` blocks of `prompt`, computed by the model directly.
std::vector<std::vector<uint8_t>> ColdBlockBytes(const std::vector<int32_t>& prompt, int64_t blocks) {
  auto m = LoadFixture();
  const auto& spec = m->cache_spec();
  auto pools = kvcache::KvPools::Create(spec, kvcache::BlocksFor(static_cast<int64_t>(prompt.size())) + 2);
  EXPECT_TRUE(pools.ok());
  model::SequentialBlocks filler(spec, *pools);
  auto state = m->NewSequence();
  EXPECT_TRUE(filler.Reserve(*state, static_cast<int64_t>(prompt.size())).ok());
  model::SequenceChunk c{state.get(), prompt, model::LogitsWanted::kLast};
  model::ForwardOutput out;
  EXPECT_TRUE(m->Forward(std::span(&c, 1), *pools, &out).ok());
  std::vector<std::vector<uint8_t>> result;
  for (int64_t b = 0; b < blocks; ++b) {
    std::vector<uint8_t> bytes;
    for (size_t g = 0; g < spec.groups.size(); ++g) {
      if (spec.groups[g].retention != kvcache::CacheRetention::kPrefix) continue;
      const uint8_t* p = pools->group(g).block(state->block_table(g)[static_cast<size_t>(b)]);
      bytes.insert(bytes.end(), p, p + spec.groups[g].bytes_per_block);
    }
    result.push_back(std::move(bytes));
  }
  return result;
}

TEST(KvStoreTier, OfferedBlocksAreTheColdBytesAndSurviveARestart) {
  ScratchDir dir;
  const std::vector<int32_t> prompt = Prompt(300, 7);  // two full blocks and a partial one
  kvcache::BlockHash root;
  {
    auto m = LoadFixture();
    ASSERT_NE(m, nullptr);
    auto tier = OpenTier(dir.path(), *m);
    root = kvcache::RootHash(m->info().weights_fingerprint, "exact", "f32", "");
    EngineOptions options;
    options.kv_cache_bytes = int64_t{64} << 20;
    options.lower_tier = tier.get();
    auto engine = Engine::Create(std::move(m), options);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    RequestParams p;
    p.sampling.max_tokens = 2;
    auto out = (*engine)->Generate(std::span(&prompt, 1), p);
    ASSERT_TRUE(out.ok());
    (*engine)->Shutdown();
    tier->store().Flush();
    EXPECT_EQ(tier->store().stats().writes_done, 2u);
  }
  // A restarted process (a new store on the directory) finds both blocks under the engine's hashes ...
  auto m = LoadFixture();
  auto tier = OpenTier(dir.path(), *m);
  std::vector<kvcache::BlockHash> hashes;
  kvcache::ExtendBlockHashes(root, prompt, &hashes);
  ASSERT_EQ(hashes.size(), 2u);
  std::vector<kvcache::BlockKey> keys(2);
  for (size_t i = 0; i < 2; ++i) {
    keys[i].hash = hashes[i];
    keys[i].parent = i == 0 ? root : hashes[0];
    std::copy_n(prompt.begin() + static_cast<int64_t>(i) * 128, 128, keys[i].tokens.begin());
  }
  std::promise<size_t> found;
  tier->Lookup(keys, [&](size_t n) { found.set_value(n); });
  EXPECT_EQ(found.get_future().get(), 2u);
  // ... and reads them back verified, byte for byte what a cold prefill computes.
  const auto cold = ColdBlockBytes(prompt, 2);
  const auto& segs = tier->store().layout().segment_bytes;
  std::vector<std::vector<uint8_t>> buffers(2, std::vector<uint8_t>(tier->store().layout().payload_bytes()));
  std::vector<std::vector<std::span<uint8_t>>> dest(2);
  for (size_t i = 0; i < 2; ++i) {
    size_t at = 0;
    for (uint64_t n : segs) {
      dest[i].emplace_back(buffers[i].data() + at, n);
      at += n;
    }
  }
  std::promise<size_t> read;
  tier->Read(keys, dest, [&](size_t n) { read.set_value(n); });
  EXPECT_EQ(read.get_future().get(), 2u);
  EXPECT_EQ(buffers[0], cold[0]);
  EXPECT_EQ(buffers[1], cold[1]);
  // Another prompt's tokens under the same hash (a forced collision) are never served.
  keys[1].tokens[5] ^= 1;
  std::promise<size_t> collided;
  tier->Read(keys, dest, [&](size_t n) { collided.set_value(n); });
  EXPECT_EQ(collided.get_future().get(), 1u);
  EXPECT_EQ(tier->store().stats().verify_failures[static_cast<int>(kvstore::VerifyFailure::kTokens)], 1u);
}

struct ServedRun {
  std::vector<int32_t> ids;
  std::vector<float> logprobs;
  int64_t hit_tokens = 0;
  uint64_t external_hits = 0;
  uint64_t tier_timeouts = 0;
  uint64_t tier_skipped_blocks = 0;
};

// Greedy, 4 tokens, logprobs kept: every served prompt of these tests.
RequestParams ServedParams() {
  RequestParams p;
  p.sampling.max_tokens = 4;
  p.sampling.temperature = 0;  // greedy
  p.sampling.logprobs = true;
  return p;
}

// Greedy and blind to end-of-sequence, so it runs exactly max_tokens: the request that holds the pool.
RequestParams LongGreedy(int64_t max_tokens) {
  RequestParams p;
  p.sampling.max_tokens = max_tokens;
  p.sampling.temperature = 0;
  p.sampling.ignore_eos = true;
  return p;
}

ServedRun RunOf(const GenerateOutput& out) {
  ServedRun run;
  for (const GeneratedToken& t : out.sequences[0].tokens) {
    run.ids.push_back(t.id);
    run.logprobs.push_back(t.logprob);
  }
  run.hit_tokens = out.prompt_cache_hit_tokens;
  return run;
}

// One greedy request through an engine (with the tier when given), exact replay, logprobs kept. A warm-up
// prompt runs first when given (the cost model is fitted from the steps it ran).
ServedRun Serve(const std::vector<int32_t>& prompt, kvcache::LowerTier* tier, double tier_timeout_s = 2,
                const std::vector<int32_t>* warmup = nullptr) {
  EngineOptions options;
  options.kv_cache_bytes = int64_t{64} << 20;
  options.lower_tier = tier;
  options.lower_tier_timeout_s = tier_timeout_s;
  options.swa_replay = SwaReplay::kExact;
  auto engine = Engine::Create(LoadFixture(), options);
  EXPECT_TRUE(engine.ok()) << engine.status().ToString();
  const RequestParams p = ServedParams();
  if (warmup != nullptr) {
    EXPECT_TRUE((*engine)->Generate(std::span(warmup, 1), p).ok());
  }
  auto out = (*engine)->Generate(std::span(&prompt, 1), p);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  ServedRun run = RunOf((*out)[0]);
  const EngineStats stats = (*engine)->Stats();
  run.external_hits = stats.external_prefix_cache_hits;
  run.tier_timeouts = stats.lower_tier_timeouts;
  run.tier_skipped_blocks = stats.lower_tier_skipped_blocks;
  (*engine)->Shutdown();
  if (auto* store_tier = dynamic_cast<kvstore::KvStoreTier*>(tier)) store_tier->Flush();
  return run;
}

// A tier that does not answer lookups until the test lets it (a hung filesystem).
class HungTier final : public kvcache::LowerTier {
 public:
  explicit HungTier(kvstore::KvStoreTier* inner) : inner_(inner), released_(release_.get_future().share()) {}
  ~HungTier() override {
    for (auto& t : threads_) t.join();
  }
  void Release() { release_.set_value(); }
  int lookups() const { return lookups_; }
  void Offer(const kvcache::BlockKey& key, std::span<const std::span<const uint8_t>> bytes) override {
    inner_->Offer(key, bytes);
  }
  void Lookup(std::vector<kvcache::BlockKey> keys, std::function<void(size_t)> done) override {
    ++lookups_;
    threads_.emplace_back([this, keys = std::move(keys), done = std::move(done)]() mutable {
      released_.wait();
      inner_->Lookup(std::move(keys), std::move(done));
    });
  }
  void Read(std::vector<kvcache::BlockKey> keys, std::vector<std::vector<std::span<uint8_t>>> dest,
            std::function<void(size_t)> done) override {
    inner_->Read(std::move(keys), std::move(dest), std::move(done));
  }
  double PredictReadSeconds(int64_t blocks) const override { return inner_->PredictReadSeconds(blocks); }

 private:
  kvstore::KvStoreTier* inner_;
  std::promise<void> release_;
  std::shared_future<void> released_;
  std::vector<std::thread> threads_;
  int lookups_ = 0;
};

// Restart equivalence: a prompt served by A is served by a restarted A and by a second process B on the
// same directory as a hit of its full blocks and, from the snapshot A stored when it computed the prompt,
// every position but the last, with tokens and logprobs bit-identical to a cold run.
TEST(KvStoreTier, RestartedAndSecondServersHitExactlyAndMatchAColdRun) {
  ScratchDir dir;
  const std::vector<int32_t> prompt = Prompt(3 * 128 + 40, 21);  // 3 full blocks
  const ServedRun cold = Serve(prompt, nullptr);
  ASSERT_EQ(cold.hit_tokens, 0);
  auto m = LoadFixture();
  std::unique_ptr<kvstore::KvStoreTier> a = OpenTier(dir.path(), *m);
  const ServedRun first = Serve(prompt, a.get());
  EXPECT_EQ(first.hit_tokens, 0);
  EXPECT_EQ(first.ids, cold.ids);
  EXPECT_EQ(a->store().stats().writes_done, 3u);
  // B: a second store on the directory while A's is still open.
  std::unique_ptr<kvstore::KvStoreTier> b = OpenTier(dir.path(), *m);
  const ServedRun second = Serve(prompt, b.get());
  // A restarted: its store closed and opened again.
  a.reset();
  a = OpenTier(dir.path(), *m);
  const ServedRun restarted = Serve(prompt, a.get());
  for (const ServedRun* r : {&second, &restarted}) {
    EXPECT_EQ(r->hit_tokens, 3 * 128 + 39);
    EXPECT_EQ(r->external_hits, 3u * 128);
    EXPECT_EQ(r->ids, cold.ids);
    EXPECT_EQ(r->logprobs, cold.logprobs);  // bit-identical: float ==
    EXPECT_EQ(r->tier_timeouts, 0u);
    EXPECT_EQ(r->tier_skipped_blocks, 0u);
  }
  EXPECT_EQ(a->store().stats().hit_blocks, 3u);
  EXPECT_EQ(b->store().stats().hit_blocks, 3u);
  EXPECT_EQ(a->store().stats().verify_failures_total(), 0u);
}

// A store whose blocks went bad is never served from: the request recomputes and still matches a cold run.
TEST(KvStoreTier, CorruptStoreBlocksAreRecomputed) {
  ScratchDir dir;
  const std::vector<int32_t> prompt = Prompt(2 * 128 + 10, 22);
  const ServedRun cold = Serve(prompt, nullptr);
  auto m = LoadFixture();
  {
    auto a = OpenTier(dir.path(), *m);
    Serve(prompt, a.get());
  }
  // Flip one payload byte in every stored block.
  size_t flipped = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir.path())) {
    if (e.path().extension() != ".kvb") continue;
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(5000);
    f.put('\x5a');
    ++flipped;
  }
  ASSERT_EQ(flipped, 2u);
  auto b = OpenTier(dir.path(), *m);
  const ServedRun again = Serve(prompt, b.get());
  EXPECT_EQ(again.hit_tokens, 0);
  EXPECT_EQ(again.ids, cold.ids);
  EXPECT_EQ(again.logprobs, cold.logprobs);
  EXPECT_EQ(b->store().stats().verify_failures[static_cast<int>(kvstore::VerifyFailure::kChecksum)], 2u);
  EXPECT_EQ(b->store().stats().hit_blocks, 0u);
}

// A hung filesystem never stalls serving: after lower_tier_timeout_s the request is admitted without the
// tier and recomputes (same answer as cold); the late answer is absorbed when it finally comes.
TEST(KvStoreTier, AHungTierIsWaitedForOnlyUntilTheTimeout) {
  ScratchDir dir;
  const std::vector<int32_t> prompt = Prompt(2 * 128 + 10, 23);
  const ServedRun cold = Serve(prompt, nullptr);
  auto m = LoadFixture();
  auto store = OpenTier(dir.path(), *m);
  Serve(prompt, store.get());  // the blocks are in the store
  HungTier hung(store.get());
  std::thread release_later;
  {
    // Generate returns only once the request finished, which it can only do through the timeout: the tier
    // stays hung until after it returns.
    const ServedRun slow = Serve(prompt, &hung, /*tier_timeout_s=*/0.05);
    EXPECT_EQ(hung.lookups(), 1);
    EXPECT_EQ(slow.hit_tokens, 0);
    EXPECT_EQ(slow.ids, cold.ids);
    EXPECT_EQ(slow.logprobs, cold.logprobs);
    EXPECT_EQ(slow.tier_timeouts, 1u);  // /metrics: deepinfer:kvstore_tier_timeouts_total
  }
  hung.Release();
}

// A tier that predicts its reads slower than any recomputation (a filesystem measured slow).
class PessimisticTier final : public kvcache::LowerTier {
 public:
  explicit PessimisticTier(kvstore::KvStoreTier* inner) : inner_(inner) {}
  void Offer(const kvcache::BlockKey& key, std::span<const std::span<const uint8_t>> bytes) override {
    inner_->Offer(key, bytes);
  }
  void Lookup(std::vector<kvcache::BlockKey> keys, std::function<void(size_t)> done) override {
    inner_->Lookup(std::move(keys), std::move(done));
  }
  void Read(std::vector<kvcache::BlockKey> keys, std::vector<std::vector<std::span<uint8_t>>> dest,
            std::function<void(size_t)> done) override {
    ++reads_;
    inner_->Read(std::move(keys), std::move(dest), std::move(done));
  }
  double PredictReadSeconds(int64_t) const override { return 1e6; }
  int reads() const { return reads_; }

 private:
  kvstore::KvStoreTier* inner_;
  std::atomic<int> reads_{0};
};

// Blocks the tier holds are not read when the cost model (fitted by a warm-up request) predicts their
// prefill faster than the tier's read: they are recomputed, counted, and the answer is the cold one.
TEST(KvStoreTier, BlocksPredictedSlowerToReadAreRecomputedAndCounted) {
  ScratchDir dir;
  const std::vector<int32_t> prompt = Prompt(2 * 128 + 10, 24);
  const std::vector<int32_t> warmup = Prompt(40, 25);  // no full block: no tier lookup of its own
  const ServedRun cold = Serve(prompt, nullptr);
  auto m = LoadFixture();
  auto store = OpenTier(dir.path(), *m);
  Serve(prompt, store.get());
  PessimisticTier pessimistic(store.get());
  const ServedRun skipped = Serve(prompt, &pessimistic, 2, &warmup);
  EXPECT_EQ(pessimistic.reads(), 0);
  EXPECT_EQ(skipped.hit_tokens, 0);
  EXPECT_EQ(skipped.tier_skipped_blocks, 2u);  // both full blocks were present
  EXPECT_EQ(skipped.tier_timeouts, 0u);
  EXPECT_EQ(skipped.ids, cold.ids);
  EXPECT_EQ(skipped.logprobs, cold.logprobs);
  EXPECT_EQ(store->store().stats().hit_blocks, 0u);
}

// A lookup that finds blocks while the pool has no free block to read them into waits for room (as
// admission would) instead of giving up and recomputing them. Here a long request holds all but one block
// of a 7-block pool when the lookup of a stored 3-block prefix is answered (the gate opens only then); when
// it finishes, the stored blocks are read and the prompt is a prefix hit of all three, with the cold answer.
// Before, the lookup was dropped for want of room and the prompt recomputed (the agent benchmark's store
// served no block).
TEST(KvStoreTier, ALookupWithNoRoomWaitsForBlocksThenReads) {
  ScratchDir dir;
  const std::vector<int32_t> prompt = Prompt(3 * 128 + 10, 26);
  const ServedRun cold = Serve(prompt, nullptr);
  auto m = LoadFixture();
  auto store = OpenTier(dir.path(), *m);
  Serve(prompt, store.get());  // the blocks are in the store
  HungTier gated(store.get());
  EngineOptions options;
  options.kv_blocks = 7;
  options.lower_tier = &gated;
  // The gate opens only at the long request's 545th token, seconds later under a sanitizer: the lookup's
  // wait must not time out before (the default 2 s did, recomputing instead).
  options.lower_tier_timeout_s = 600;
  options.swa_replay = SwaReplay::kExact;
  auto engine = Engine::Create(LoadFixture(), options);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  // The long request: 100 prompt tokens (no full block, so no lookup of its own) and 640 generated; at
  // 545 generated it holds ceil(645 / 128) = 6 blocks, and the gate opens.
  const RequestParams long_params = LongGreedy(640);
  std::promise<void> long_done;
  std::atomic<int64_t> generated{0};
  std::atomic<bool> opened{false};
  auto long_id = (*engine)->AddRequest(Prompt(100, 27), long_params, [&](RequestUpdate u) {
    for (const auto& d : u.sequences) generated += static_cast<int64_t>(d.tokens.size());
    if (generated >= 545 && !opened.exchange(true)) gated.Release();
    if (u.finished) long_done.set_value();
  });
  ASSERT_TRUE(long_id.ok()) << long_id.status().ToString();
  auto out = (*engine)->Generate(std::span(&prompt, 1), ServedParams());
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  long_done.get_future().wait();
  EXPECT_EQ(generated.load(), 640);
  EXPECT_EQ(gated.lookups(), 1);
  const ServedRun warm = RunOf((*out)[0]);
  EXPECT_EQ(warm.hit_tokens, 3 * 128);
  EXPECT_EQ(warm.ids, cold.ids);
  EXPECT_EQ(warm.logprobs, cold.logprobs);
  const EngineStats stats = (*engine)->Stats();
  EXPECT_EQ(stats.external_prefix_cache_hits, 3u * 128);
  EXPECT_EQ(stats.lower_tier_lookups, 1u);
  EXPECT_EQ(stats.lower_tier_lookup_misses, 0u);
  EXPECT_EQ(stats.lower_tier_no_room_blocks, 0u);
  EXPECT_EQ(stats.lower_tier_timeouts, 0u);
  (*engine)->Shutdown();
}

// A prompt checked against the tier while its prefix was in RAM, which then waits for admission long
// enough for that prefix to be evicted, asks the tier again instead of recomputing what the tier holds.
// Pool of 7 blocks: P (3 full blocks) runs first, so its blocks are cached in RAM and written to the store.
// A long request L then holds 4 blocks (400 tokens) when P' = P + 200 tokens arrives: P''s lookup finds P's
// 3 blocks in RAM and its 4th block nowhere; P' cannot start (attaching the 3 cached blocks leaves no free
// one), and L's growth to 6 blocks evicts them. When L ends, P' is a prefix hit of all 3, read from the
// store, and the 10 positions after them from P's snapshot. (Had P' started at once, RAM would have served
// the same 3 blocks: the hit is 394 either way.)
TEST(KvStoreTier, AnEvictedMatchIsAskedOfTheTierAgain) {
  ScratchDir dir;
  const std::vector<int32_t> prompt = Prompt(3 * 128 + 10, 28);
  std::vector<int32_t> longer = prompt;
  const std::vector<int32_t> extra = Prompt(200, 29);
  longer.insert(longer.end(), extra.begin(), extra.end());
  const ServedRun cold = Serve(longer, nullptr);
  auto m = LoadFixture();
  auto tier = OpenTier(dir.path(), *m);
  EngineOptions options;
  options.kv_blocks = 7;
  options.lower_tier = tier.get();
  options.swa_replay = SwaReplay::kExact;
  auto engine = Engine::Create(LoadFixture(), options);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  RequestParams short_params;
  short_params.sampling.max_tokens = 1;
  ASSERT_TRUE((*engine)->Generate(std::span(&prompt, 1), short_params).ok());
  tier->store().Flush();
  ASSERT_EQ(tier->store().stats().writes_done, 3u);
  const RequestParams long_params = LongGreedy(640);  // 100 + 640 tokens: 6 blocks at the end
  std::promise<void> long_done;
  std::atomic<int64_t> generated{0};
  auto long_id = (*engine)->AddRequest(Prompt(100, 30), long_params, [&](RequestUpdate u) {
    for (const auto& d : u.sequences) generated += static_cast<int64_t>(d.tokens.size());
    if (u.finished) long_done.set_value();
  });
  ASSERT_TRUE(long_id.ok()) << long_id.status().ToString();
  while (generated.load() < 300) std::this_thread::sleep_for(std::chrono::microseconds(100));
  auto out = (*engine)->Generate(std::span(&longer, 1), ServedParams());
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  long_done.get_future().wait();
  const ServedRun warm = RunOf((*out)[0]);
  EXPECT_EQ(warm.hit_tokens, 3 * 128 + 10);
  EXPECT_EQ(warm.ids, cold.ids);
  EXPECT_EQ(warm.logprobs, cold.logprobs);
  const EngineStats stats = (*engine)->Stats();
  std::printf("P' was served %llu tokens from the store after %llu lookups\n",
              static_cast<unsigned long long>(stats.external_prefix_cache_hits),
              static_cast<unsigned long long>(stats.lower_tier_lookups));
  (*engine)->Shutdown();
}

// Token-exact continuation across a restart: a finished sequence's snapshot and its prompt's (one position
// before the prompt's end) are stored beside its blocks, and after a restart a prompt extending it resumes
// from the store's blocks and the finished one's snapshot, the same prompt sent again from its prompt's,
// to the token, with the cold run's tokens and logprobs. A snapshot file that went bad is not used: the
// prompt resumes at the blocks and still matches the cold run.
TEST(KvStoreTier, ARestartResumesAFinishedSequenceToTheToken) {
  ScratchDir dir;
  RequestParams p = LongGreedy(4);
  p.sampling.logprobs = true;
  auto run = [&](const std::vector<int32_t>& prompt, kvcache::LowerTier* tier) {
    EngineOptions options;
    options.kv_cache_bytes = int64_t{64} << 20;
    options.lower_tier = tier;
    auto engine = Engine::Create(LoadFixture(), options);
    EXPECT_TRUE(engine.ok()) << engine.status().ToString();
    auto out = (*engine)->Generate(std::span(&prompt, 1), p);
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    ServedRun r = RunOf((*out)[0]);
    r.external_hits = (*engine)->Stats().external_prefix_cache_hits;
    (*engine)->Shutdown();
    return r;
  };
  const std::vector<int32_t> first = Prompt(2 * 128 + 50, 31);
  auto m = LoadFixture();
  auto a = OpenTier(dir.path(), *m);
  const ServedRun one = run(first, a.get());
  ASSERT_EQ(one.ids.size(), 4u);
  a->store().Flush();
  ASSERT_NE(a->snapshot_files(), nullptr);
  a->Flush();
  EXPECT_EQ(a->snapshot_files()->writes_done(), 2u);
  a.reset();  // the server stops

  a = OpenTier(dir.path(), *m);
  const ServedRun same = run(first, a.get());
  EXPECT_EQ(same.hit_tokens, 2 * 128 + 49);
  EXPECT_EQ(same.external_hits, 2u * 128);
  EXPECT_EQ(same.ids, one.ids);
  EXPECT_EQ(same.logprobs, one.logprobs);
  a.reset();

  std::vector<int32_t> next = first;
  next.insert(next.end(), one.ids.begin(), one.ids.end());
  for (int32_t t : Prompt(5, 32)) next.push_back(t);
  const ServedRun cold = run(next, nullptr);
  a = OpenTier(dir.path(), *m);
  const ServedRun warm = run(next, a.get());
  EXPECT_EQ(warm.hit_tokens, 2 * 128 + 50 + 3);  // the first run's prompt and 3 of its 4 tokens
  EXPECT_EQ(warm.external_hits, 2u * 128);       // the blocks; the rest from the snapshot
  EXPECT_EQ(warm.ids, cold.ids);
  EXPECT_EQ(warm.logprobs, cold.logprobs);

  // The snapshot's file damaged: the blocks only.
  a.reset();
  int damaged = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir.path())) {
    if (entry.path().extension() != ".kvs") continue;
    std::fstream f(entry.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('\x5a');
    ++damaged;
  }
  EXPECT_EQ(damaged, 3);  // the first prompt's, its finished sequence's (written twice), the longer prompt's
  a = OpenTier(dir.path(), *m);
  const ServedRun after = run(next, a.get());
  EXPECT_EQ(after.hit_tokens, 2 * 128);
  EXPECT_EQ(after.ids, cold.ids);
  EXPECT_EQ(after.logprobs, cold.logprobs);
}

// Prefill/decode hand-off: a prompt run for one token with snapshot_whole_prompt stores the state after its
// last position; a second engine on the store, given the prompt and that token, resumes there: every prompt
// position from the store (the full blocks, the rest from the snapshot), only the handed-over token's own
// row computed, none replayed, and its seeded draws are the ones one engine running the whole request makes
// (sampling is keyed by position, and the token sits at the position it was sampled for).
void ExpectAHandOffComputesOnlyItsToken(int64_t prompt_tokens, int32_t seed) {
  ScratchDir dir;
  RequestParams p;
  p.sampling.max_tokens = 5;
  p.sampling.temperature = 1;
  p.sampling.seed = 77;
  p.sampling.ignore_eos = true;
  p.sampling.logprobs = true;
  struct DecodeRun {
    ServedRun run;
    uint64_t replayed = 0, snapshot_hits = 0;
  };
  auto run = [](const std::vector<int32_t>& prompt, const RequestParams& params, kvcache::LowerTier* tier) {
    EngineOptions options;
    options.kv_cache_bytes = int64_t{64} << 20;
    options.lower_tier = tier;
    auto engine = Engine::Create(LoadFixture(), options);
    EXPECT_TRUE(engine.ok()) << engine.status().ToString();
    auto out = (*engine)->Generate(std::span(&prompt, 1), params);
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    DecodeRun r{.run = RunOf((*out)[0])};
    const EngineStats stats = (*engine)->Stats();
    r.run.external_hits = stats.external_prefix_cache_hits;
    r.replayed = stats.replayed_tokens;
    r.snapshot_hits = stats.snapshot_hits;
    (*engine)->Shutdown();
    return r;
  };
  const std::vector<int32_t> prompt = Prompt(prompt_tokens, seed);
  const ServedRun whole = run(prompt, p, nullptr).run;
  ASSERT_EQ(whole.ids.size(), 5u);

  auto m = LoadFixture();
  auto prefill_tier = OpenTier(dir.path(), *m);
  RequestParams prefill = p;
  prefill.sampling.max_tokens = 1;
  prefill.snapshot_whole_prompt = true;
  const ServedRun first = run(prompt, prefill, prefill_tier.get()).run;
  ASSERT_EQ(first.ids.size(), 1u);
  EXPECT_EQ(first.ids[0], whole.ids[0]);
  prefill_tier->Flush();
  prefill_tier.reset();

  std::vector<int32_t> handed = prompt;
  handed.push_back(first.ids[0]);
  RequestParams decode = p;
  decode.sampling.max_tokens = 4;
  auto decode_tier = OpenTier(dir.path(), *m);
  const DecodeRun rest = run(handed, decode, decode_tier.get());
  const int64_t full = prompt_tokens / 128 * 128;
  EXPECT_EQ(rest.run.hit_tokens, prompt_tokens);  // the whole prompt; the handed-over token is the first row
  EXPECT_EQ(rest.run.external_hits, static_cast<uint64_t>(full));  // the full blocks; the rest from the snapshot
  EXPECT_EQ(rest.replayed, 0u);
  EXPECT_EQ(rest.snapshot_hits, 1u);
  EXPECT_EQ(rest.run.ids, std::vector<int32_t>(whole.ids.begin() + 1, whole.ids.end()));
  EXPECT_EQ(rest.run.logprobs, std::vector<float>(whole.logprobs.begin() + 1, whole.logprobs.end()));  // float ==
}

TEST(KvStoreTier, AWholePromptSnapshotLeavesNoPromptPositionToCompute) {
  ExpectAHandOffComputesOnlyItsToken(2 * 128 + 50, 41);
}

// A prompt of full blocks only: its state at the boundary is a snapshot of its own (no tail, no partial
// block), without which the decode engine, finding the blocks but no window blocks at their end, replays
// the window's reach.
TEST(KvStoreTier, AWholePromptSnapshotAtABlockBoundaryLeavesNoPromptPositionToCompute) {
  ExpectAHandOffComputesOnlyItsToken(2 * 128, 42);
}

}  // namespace
}  // namespace deepinfer::engine
