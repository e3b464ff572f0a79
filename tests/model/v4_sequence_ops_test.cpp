// Sequence operations on DeepSeek-V4: a sequence truncated and replayed, forked, or restored at a block
// boundary gives logits bit-identical to a fresh sequence over the same tokens (every operation is
// validated against the one reference that cannot be wrong here: running the tokens from scratch). Also the
// write rule: a restored or forked sequence writes no block it shares, and state-only chunks write no
// prefix block at all.
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "core/hash.h"
#include "model/causal_lm.h"
#include "model/deepseek_v4/v4_model.h"
#include "model/sequential_blocks.h"
#include "v4_fixture.h"

namespace deepinfer::model {
namespace {

using test_support::FixtureDir;
using test_support::FixtureNames;

std::vector<int32_t> SequenceTokens(int64_t n, int64_t seed) {
  std::vector<int32_t> t;
  for (int64_t i = 0; i < n; ++i) t.push_back(static_cast<int32_t>((i * 131 + seed * 71 + (i * i) % 17) % 256));
  return t;
}

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Every test runs on both fixtures and both KV storage precisions.
class V4SequenceOps : public ::testing::TestWithParam<std::tuple<std::string, KvPrecision>> {
 protected:
  void SetUp() override {
    LoadOptions options;
    options.kv_precision = std::get<1>(GetParam());
    auto m = V4Model::Load(FixtureDir(std::get<0>(GetParam())), options);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::move(*m);
    auto pools = kvcache::KvPools::Create(model_->cache_spec(), 256);
    ASSERT_TRUE(pools.ok());
    pools_ = std::move(*pools);
    blocks_ = std::make_unique<SequentialBlocks>(model_->cache_spec(), pools_);
    v_ = model_->info().vocab_size;
  }

  // Runs `tokens` through `state` in chunks of the given sizes (cycled), returning every row's logits.
  std::vector<float> Run(SequenceState& state, std::span<const int32_t> tokens, std::vector<int64_t> sizes = {64},
                         bool state_only = false) {
    std::vector<float> logits;
    size_t at = 0, k = 0;
    while (at < tokens.size()) {
      const int64_t len = std::min<int64_t>(sizes[k++ % sizes.size()], static_cast<int64_t>(tokens.size() - at));
      Status s = blocks_->Reserve(state, len);
      EXPECT_TRUE(s.ok()) << s.ToString();
      SequenceChunk chunk{&state, tokens.subspan(at, len), state_only ? LogitsWanted::kNone : LogitsWanted::kAll};
      chunk.state_only = state_only;
      ForwardOutput out;
      s = model_->Forward(std::span(&chunk, 1), pools_, &out);
      EXPECT_TRUE(s.ok()) << s.ToString();
      if (!s.ok()) return {};
      logits.insert(logits.end(), out.logits.begin(), out.logits.end());
      at += len;
    }
    return logits;
  }

  std::vector<float> Fresh(const std::vector<int32_t>& tokens) {
    auto s = model_->NewSequence();
    return Run(*s, tokens, {static_cast<int64_t>(tokens.size())});
  }

  // Rows [first, first + count) of a logits matrix.
  std::vector<float> Rows(const std::vector<float>& logits, int64_t first, int64_t count) const {
    return std::vector<float>(logits.begin() + first * v_, logits.begin() + (first + count) * v_);
  }

  // A digest of every block of every group whose retention is `r`, block by block.
  std::vector<Hash128> Digests(kvcache::CacheRetention r) {
    std::vector<Hash128> out;
    for (size_t g = 0; g < pools_.num_groups(); ++g) {
      if (model_->cache_spec().groups[g].retention != r) continue;
      const kvcache::KvBlockPool& p = pools_.group(g);
      for (int32_t b = 0; b < p.num_blocks(); ++b) out.push_back(HashBytes(p.block(b), p.bytes_per_block()));
    }
    return out;
  }

  // A new state sharing `from`'s blocks [0, blocks) of every kPrefix group and, when `window`, its window
  // block blocks − 1 (what a prefix-cache hit on the first 128·blocks positions hands a new request).
  std::unique_ptr<SequenceState> ShareBlocks(const SequenceState& from, int64_t blocks, bool window) {
    auto s = model_->NewSequence();
    for (size_t g = 0; g < s->num_groups(); ++g) {
      const bool prefix = model_->cache_spec().groups[g].retention == kvcache::CacheRetention::kPrefix;
      s->block_table(g).assign(static_cast<size_t>(blocks), kvcache::kNoBlock);
      for (int64_t b = 0; b < blocks; ++b) {
        if (prefix || (window && b == blocks - 1)) s->block_table(g)[b] = from.block_table(g)[b];
      }
    }
    return s;
  }

  std::unique_ptr<V4Model> model_;
  kvcache::KvPools pools_;
  std::unique_ptr<SequentialBlocks> blocks_;
  int64_t v_ = 0;
};

TEST_P(V4SequenceOps, TruncateThenReplayEqualsAFreshSequence) {
  EXPECT_EQ(model_->max_rollback(), 16);
  const std::vector<int32_t> x = SequenceTokens(140, 1), y = SequenceTokens(40, 2);
  // Cuts that cross compressor windows (4, 8, 128) and the block boundary at 128.
  for (int64_t cut : {140, 139, 136, 131, 128, 127, 124}) {
    auto s = model_->NewSequence();
    Run(*s, x, {50, 1, 7});
    ASSERT_TRUE(model_->Truncate(*s, cut).ok()) << cut;
    EXPECT_EQ(s->num_tokens(), cut);
    const std::vector<float> got = Run(*s, y, {3, 17, 1});
    const std::vector<int32_t> whole = Concat(std::vector<int32_t>(x.begin(), x.begin() + cut), y);
    const std::vector<float> want = Rows(Fresh(whole), cut, static_cast<int64_t>(y.size()));
    ASSERT_EQ(got, want) << "truncated to " << cut;
  }
}

TEST_P(V4SequenceOps, RepeatedSpeculativeRollbacksStayExact) {
  // Verify-then-reject cycles: 5 tokens in, keep 2, another 5 in, keep 4, ... against one fresh run of
  // what was kept.
  const std::vector<int32_t> prompt = SequenceTokens(120, 3);
  auto s = model_->NewSequence();
  Run(*s, prompt);
  std::vector<int32_t> kept = prompt;
  std::vector<float> last;
  for (int cycle = 0; cycle < 8; ++cycle) {
    const std::vector<int32_t> draft = SequenceTokens(5, 10 + cycle);
    const int64_t n = s->num_tokens();
    last = Run(*s, draft, {5});
    const int64_t accept = 1 + cycle % 5;
    ASSERT_TRUE(model_->Truncate(*s, n + accept).ok());
    kept.insert(kept.end(), draft.begin(), draft.begin() + accept);
    last.resize(static_cast<size_t>(accept * v_));
  }
  const std::vector<float> fresh = Fresh(kept);
  const int64_t last_accept = 1 + 7 % 5;
  EXPECT_EQ(last, Rows(fresh, static_cast<int64_t>(kept.size()) - last_accept, last_accept));
  // And the state goes on exactly.
  const std::vector<int32_t> more = SequenceTokens(9, 99);
  const std::vector<float> got = Run(*s, more, {2, 7});
  EXPECT_EQ(got, Rows(Fresh(Concat(kept, more)), static_cast<int64_t>(kept.size()), 9));
}

TEST_P(V4SequenceOps, TruncateBeyondTheRollbackIsRefused) {
  auto s = model_->NewSequence();
  Run(*s, SequenceTokens(60, 4));
  EXPECT_EQ(model_->Truncate(*s, 43).code(), StatusCode::kOutOfRange);  // 60 − 16 = 44 is the lowest
  EXPECT_EQ(model_->Truncate(*s, 61).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(s->num_tokens(), 60);
  ASSERT_TRUE(model_->Truncate(*s, 50).ok());
  // Measured from the most positions held: 50 again, not 50 − 16.
  EXPECT_EQ(model_->Truncate(*s, 43).code(), StatusCode::kOutOfRange);
  EXPECT_TRUE(model_->Truncate(*s, 44).ok());
}

TEST_P(V4SequenceOps, ForkedSequencesEqualFreshOnes) {
  const std::vector<int32_t> prompt = SequenceTokens(200, 5), a = SequenceTokens(30, 6), b = SequenceTokens(70, 7);
  auto s = model_->NewSequence();
  Run(*s, prompt, {128, 72});
  auto forked = model_->Fork(*s);
  ASSERT_TRUE(forked.ok()) << forked.status().ToString();
  SequenceState& f = **forked;
  EXPECT_EQ(f.num_tokens(), 200);
  // Copy-on-write of the partial last block (positions 128..255) in every group; block 0 stays shared.
  for (size_t g = 0; g < f.num_groups(); ++g) f.block_table(g)[1] = kvcache::kNoBlock;
  ASSERT_TRUE(blocks_->Reserve(f, 1).ok());
  for (size_t g = 0; g < f.num_groups(); ++g) pools_.group(g).CopyBlock(s->block_table(g)[1], f.block_table(g)[1]);
  const std::vector<Hash128> shared = {HashBytes(pools_.group(0).block(s->block_table(0)[0]),
                                                 pools_.group(0).bytes_per_block())};
  const std::vector<float> got_b = Run(f, b, {1, 33});
  const std::vector<float> got_a = Run(*s, a, {30});
  EXPECT_EQ(got_a, Rows(Fresh(Concat(prompt, a)), 200, 30));
  EXPECT_EQ(got_b, Rows(Fresh(Concat(prompt, b)), 200, 70));
  EXPECT_EQ(HashBytes(pools_.group(0).block(s->block_table(0)[0]), pools_.group(0).bytes_per_block()), shared[0]);
  EXPECT_EQ(model_->Fork(*model_->NewSequence()).ok(), true);
}

TEST_P(V4SequenceOps, WindowBlockHitResumesBitExactly) {
  const std::vector<int32_t> tokens = SequenceTokens(300, 8);
  auto cold = model_->NewSequence();
  const std::vector<float> want = Run(*cold, tokens, {300});
  for (int64_t at : {128, 256}) {
    auto hit = ShareBlocks(*cold, at / kvcache::kBlockTokens, /*window=*/true);
    ASSERT_TRUE(model_->RestoreAt(*hit, at, RestoreFrom::kWindowBlocks, pools_).ok());
    EXPECT_EQ(hit->num_tokens(), at);
    const std::vector<Hash128> before = Digests(kvcache::CacheRetention::kPrefix);
    const std::vector<Hash128> window_before = Digests(kvcache::CacheRetention::kWindow);
    const std::vector<float> got = Run(*hit, std::span(tokens).subspan(at), {5, 1, 40});
    ASSERT_EQ(got, Rows(want, at, 300 - at)) << "resumed at " << at;
    // The write rule: the shared blocks (the cold sequence's) are untouched.
    const std::vector<Hash128> after = Digests(kvcache::CacheRetention::kPrefix);
    const std::vector<Hash128> window_after = Digests(kvcache::CacheRetention::kWindow);
    for (size_t g = 0, i = 0, wi = 0; g < pools_.num_groups(); ++g) {
      const bool prefix = model_->cache_spec().groups[g].retention == kvcache::CacheRetention::kPrefix;
      for (int32_t b = 0; b < pools_.group(g).num_blocks(); ++b, prefix ? ++i : ++wi) {
        bool cold_block = false;
        for (int32_t id : cold->block_table(g)) cold_block = cold_block || id == b;
        if (!cold_block) continue;
        if (prefix) EXPECT_EQ(before[i], after[i]) << "group " << g << " block " << b;
        else EXPECT_EQ(window_before[wi], window_after[wi]) << "group " << g << " block " << b;
      }
    }
  }
}

TEST_P(V4SequenceOps, ExactReplayWithStateOnlyChunksWritesNoPrefixBlock) {
  const std::vector<int32_t> tokens = SequenceTokens(300, 9);
  auto cold = model_->NewSequence();
  const std::vector<float> want = Run(*cold, tokens, {300});
  auto hit = ShareBlocks(*cold, 2, /*window=*/false);
  ASSERT_TRUE(model_->RestoreAt(*hit, 0, RestoreFrom::kNoWindow, pools_).ok());
  const std::vector<Hash128> before = Digests(kvcache::CacheRetention::kPrefix);
  const std::vector<float> none = Run(*hit, std::span(tokens).subspan(0, 256), {100, 1, 60}, /*state_only=*/true);
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(Digests(kvcache::CacheRetention::kPrefix), before) << "a state-only chunk wrote a prefix block";
  EXPECT_EQ(hit->num_tokens(), 256);
  const std::vector<float> got = Run(*hit, std::span(tokens).subspan(256), {44});
  EXPECT_EQ(got, Rows(want, 256, 44));
}

// Replaying the last 128 positions from no window state is exact once every layer's window depends only on
// replayed positions: layers × (window − 1) < 128 (v4_mixed: 5 × 15, v4_hca128: 3 × 31). The compressed
// entries come from the prefix blocks, and the overlapping compressors' previous window (the last 4
// positions) is recomputed from exact hidden states by then.
TEST_P(V4SequenceOps, BoundedReplayIsExactWhenTheDependencyConeFits) {
  const V4Config& c = model_->config();
  ASSERT_LT(c.num_layers * (c.sliding_window - 1), kvcache::kBlockTokens);
  const std::vector<int32_t> tokens = SequenceTokens(300, 10);
  auto cold = model_->NewSequence();
  const std::vector<float> want = Run(*cold, tokens, {300});
  auto hit = ShareBlocks(*cold, 2, /*window=*/false);
  ASSERT_TRUE(model_->RestoreAt(*hit, 128, RestoreFrom::kNoWindow, pools_).ok());
  const std::vector<Hash128> before = Digests(kvcache::CacheRetention::kPrefix);
  Run(*hit, std::span(tokens).subspan(128, 128), {128}, /*state_only=*/true);
  EXPECT_EQ(Digests(kvcache::CacheRetention::kPrefix), before);
  const std::vector<float> got = Run(*hit, std::span(tokens).subspan(256), {1, 43});
  EXPECT_EQ(got, Rows(want, 256, 44));
}

TEST_P(V4SequenceOps, RestoreAtZeroIsAFreshSequenceAndBadRestoresChangeNothing) {
  const std::vector<int32_t> tokens = SequenceTokens(150, 11);
  const std::vector<float> want = Fresh(tokens);
  for (RestoreFrom from : {RestoreFrom::kWindowBlocks, RestoreFrom::kNoWindow}) {
    auto s = model_->NewSequence();
    Run(*s, SequenceTokens(40, 12));
    ASSERT_TRUE(model_->RestoreAt(*s, 0, from, pools_).ok());
    EXPECT_EQ(s->num_tokens(), 0);
    EXPECT_EQ(Run(*s, tokens, {150}), want);
  }
  auto s = model_->NewSequence();
  Run(*s, tokens, {150});
  EXPECT_EQ(model_->RestoreAt(*s, 100, RestoreFrom::kNoWindow, pools_).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(model_->RestoreAt(*s, -128, RestoreFrom::kNoWindow, pools_).code(), StatusCode::kInvalidArgument);
  // Window block 0 missing (prefix blocks present): refused for kWindowBlocks.
  auto no_window = ShareBlocks(*s, 1, /*window=*/false);
  EXPECT_EQ(model_->RestoreAt(*no_window, 128, RestoreFrom::kWindowBlocks, pools_).code(),
            StatusCode::kInvalidArgument);
  // Prefix blocks missing: refused for both.
  auto empty = model_->NewSequence();
  EXPECT_EQ(model_->RestoreAt(*empty, 128, RestoreFrom::kNoWindow, pools_).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s->num_tokens(), 150);
  EXPECT_EQ(model_->Truncate(*s, 149).ok(), true);  // the refused restores left the state as it was
  // Truncate does not reach below a restore position.
  auto hit = ShareBlocks(*s, 1, /*window=*/true);
  ASSERT_TRUE(model_->RestoreAt(*hit, 128, RestoreFrom::kWindowBlocks, pools_).ok());
  Run(*hit, SequenceTokens(10, 13));
  EXPECT_EQ(model_->Truncate(*hit, 127).code(), StatusCode::kOutOfRange);
  EXPECT_TRUE(model_->Truncate(*hit, 128).ok());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, V4SequenceOps,
                         ::testing::Combine(::testing::ValuesIn(FixtureNames()),
                                            ::testing::Values(KvPrecision::kF32, KvPrecision::kBF16)),
                         [](const auto& param_info) {
                           return std::get<0>(param_info.param) +
                                  (std::get<1>(param_info.param) == KvPrecision::kBF16 ? "_bf16_kv" : "_f32_kv");
                         });

}  // namespace
}  // namespace deepinfer::model
