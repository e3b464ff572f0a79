// DeepSeek-V4.1's sequence operations through the CausalLM API: a truncated-then-replayed, a forked and a
// restored sequence give logits bit-identical to a sequence that ran the same tokens from the start; a
// state-only replay writes no prefix block; malformed calls are refused with nothing changed.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <span>

#include "model/causal_lm.h"
#include "model/deepseek_v41/v41_model.h"
#include "model/sequential_blocks.h"
#include "v41_fixture.h"

namespace deepinfer::model {
namespace {

using test_support::V41FixtureDir;
using test_support::V41FixtureNames;
using test_support::V41Reference;

class V41SequenceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto m = V41Model::Load(V41FixtureDir(GetParam()));
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::move(*m);
    auto p = kvcache::KvPools::Create(model_->cache_spec(), 64);
    ASSERT_TRUE(p.ok());
    pools_ = std::move(*p);
    blocks_ = std::make_unique<SequentialBlocks>(model_->cache_spec(), pools_);
    V41Reference ref(GetParam());
    tokens_ = ref.Tokens("seq_len400.input_ids");
  }

  // Runs tokens[begin, end) on `state` in one chunk; returns all rows of logits.
  std::vector<float> Run(SequenceState& state, int64_t begin, int64_t end, bool state_only = false) {
    EXPECT_TRUE(blocks_->Reserve(state, end - begin).ok());
    SequenceChunk chunk{&state, std::span(tokens_).subspan(begin, end - begin), LogitsWanted::kAll};
    chunk.state_only = state_only;
    ForwardOutput out;
    Status s = model_->Forward(std::span(&chunk, 1), pools_, &out);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return out.logits;
  }

  std::vector<float> Rows(const std::vector<float>& all, int64_t first, int64_t count) {
    const int64_t v = model_->vocab_size();
    return std::vector<float>(all.begin() + first * v, all.begin() + (first + count) * v);
  }

  std::unique_ptr<V41Model> model_;
  kvcache::KvPools pools_;
  std::unique_ptr<SequentialBlocks> blocks_;
  std::vector<int32_t> tokens_;
};

TEST_P(V41SequenceTest, TruncateThenReplayIsBitIdentical) {
  auto fresh = model_->NewSequence();
  const std::vector<float> want = Run(*fresh, 0, 300);
  EXPECT_GE(model_->max_rollback(), 16);
  // Odd and even cut points (a partial ratio-2 group or none), at and away from block boundaries, up to the
  // full rollback.
  for (auto [run_to, cut_to] : std::vector<std::pair<int64_t, int64_t>>{{140, 131}, {141, 128}, {257, 256}, {270, 254}}) {
    auto state = model_->NewSequence();
    Run(*state, 0, run_to);
    ASSERT_TRUE(model_->Truncate(*state, cut_to).ok());
    EXPECT_EQ(state->num_tokens(), cut_to);
    const std::vector<float> got = Run(*state, cut_to, 300);
    EXPECT_EQ(got, Rows(want, cut_to, 300 - cut_to)) << "ran to " << run_to << ", truncated to " << cut_to;
  }
  auto state = model_->NewSequence();
  Run(*state, 0, 100);
  EXPECT_EQ(model_->Truncate(*state, 100 - model_->max_rollback() - 1).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(model_->Truncate(*state, 101).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(state->num_tokens(), 100);
}

TEST_P(V41SequenceTest, ForkedSequencesContinueIndependently) {
  auto fresh = model_->NewSequence();
  const std::vector<float> want = Run(*fresh, 0, 260);
  auto parent = model_->NewSequence();
  Run(*parent, 0, 201);
  auto forked = model_->Fork(*parent);
  ASSERT_TRUE(forked.ok());
  // The child writes positions 201.. into a copy of the partial last block of every group (copy on write).
  SequenceState& child = **forked;
  int32_t spare = 60;
  for (size_t g = 0; g < model_->cache_spec().groups.size(); ++g) {
    std::vector<int32_t>& table = child.block_table(g);
    const int64_t b = 201 / kvcache::kBlockTokens;
    if (b < static_cast<int64_t>(table.size()) && table[b] != kvcache::kNoBlock) {
      pools_.group(g).CopyBlock(table[b], spare);
      table[b] = spare;
    }
  }
  // The parent continues with other tokens; the child with the original ones must match the fresh run.
  std::vector<int32_t> other(tokens_.begin() + 201, tokens_.begin() + 230);
  for (int32_t& t : other) t = (t + 17) % static_cast<int32_t>(model_->vocab_size());
  ASSERT_TRUE(blocks_->Reserve(*parent, static_cast<int64_t>(other.size())).ok());
  SequenceChunk p{parent.get(), other, LogitsWanted::kNone};
  ForwardOutput out;
  ASSERT_TRUE(model_->Forward(std::span(&p, 1), pools_, &out).ok());
  EXPECT_EQ(child.num_tokens(), 201);
  ASSERT_TRUE(blocks_->Reserve(child, 59).ok());
  SequenceChunk c{&child, std::span(tokens_).subspan(201, 59), LogitsWanted::kAll};
  ASSERT_TRUE(model_->Forward(std::span(&c, 1), pools_, &out).ok());
  EXPECT_EQ(out.logits, Rows(want, 201, 59));
}

TEST_P(V41SequenceTest, RestoreFromWindowBlocksIsBitIdentical) {
  auto full = model_->NewSequence();
  const std::vector<float> want = Run(*full, 0, 300);
  // A new sequence holding the first run's blocks up to position 256 (prefix blocks and the window block
  // ending there), resumed at 256.
  auto resumed = model_->NewSequence();
  const kvcache::KvCacheSpec& spec = model_->cache_spec();
  for (size_t g = 0; g < spec.groups.size(); ++g) {
    const std::vector<int32_t>& from = full->block_table(g);
    resumed->block_table(g).assign(from.begin(), from.begin() + 2);
  }
  ASSERT_TRUE(model_->RestoreAt(*resumed, 256, RestoreFrom::kWindowBlocks, pools_).ok());
  EXPECT_EQ(resumed->num_tokens(), 256);
  // It writes block 2 of every group afresh.
  EXPECT_EQ(Run(*resumed, 256, 300), Rows(want, 256, 44));
  // Restoring to 0 is a fresh sequence, from either source.
  for (RestoreFrom from : {RestoreFrom::kWindowBlocks, RestoreFrom::kNoWindow}) {
    auto zero = model_->NewSequence();
    Run(*zero, 0, 50);
    ASSERT_TRUE(model_->RestoreAt(*zero, 0, from, pools_).ok());
    EXPECT_EQ(Run(*zero, 0, 60), Rows(want, 0, 60));
  }
  // Not at a block boundary, or without the prefix blocks: refused, nothing changed.
  auto bad = model_->NewSequence();
  EXPECT_EQ(model_->RestoreAt(*bad, 100, RestoreFrom::kWindowBlocks, pools_).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(model_->RestoreAt(*bad, 128, RestoreFrom::kWindowBlocks, pools_).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad->num_tokens(), 0);
}

TEST_P(V41SequenceTest, StateOnlyReplayWritesNoPrefixBlockAndIsChunkingInvariant) {
  auto full = model_->NewSequence();
  Run(*full, 0, 300);
  const kvcache::KvCacheSpec& spec = model_->cache_spec();
  // Snapshot of the prefix blocks the replay reads.
  std::vector<std::vector<uint8_t>> before;
  for (size_t g = 0; g < spec.groups.size(); ++g) {
    if (spec.groups[g].retention != kvcache::CacheRetention::kPrefix) continue;
    for (int b = 0; b < 2; ++b) {
      const uint8_t* p = pools_.group(g).block(full->block_table(g)[b]);
      before.emplace_back(p, p + spec.groups[g].bytes_per_block);
    }
  }
  auto replay = [&](const std::vector<int64_t>& sizes) {
    auto s = model_->NewSequence();
    for (size_t g = 0; g < spec.groups.size(); ++g)
      if (spec.groups[g].retention == kvcache::CacheRetention::kPrefix)
        s->block_table(g).assign(full->block_table(g).begin(), full->block_table(g).begin() + 2);
    EXPECT_TRUE(model_->RestoreAt(*s, 128, RestoreFrom::kNoWindow, pools_).ok());
    int64_t at = 128;
    for (int64_t len : sizes) {
      Run(*s, at, at + len, /*state_only=*/true);
      at += len;
    }
    return Run(*s, 256, 300);
  };
  const std::vector<float> a = replay({128}), b = replay({1, 63, 64});
  EXPECT_EQ(a, b);
  size_t k = 0;
  for (size_t g = 0; g < spec.groups.size(); ++g) {
    if (spec.groups[g].retention != kvcache::CacheRetention::kPrefix) continue;
    for (int blk = 0; blk < 2; ++blk, ++k) {
      const uint8_t* p = pools_.group(g).block(full->block_table(g)[blk]);
      EXPECT_EQ(std::memcmp(p, before[k].data(), before[k].size()), 0) << spec.groups[g].name << " block " << blk;
    }
  }
}

TEST_P(V41SequenceTest, CacheSpecMatchesTheLayout) {
  const V41Config& c = model_->config();
  const kvcache::KvCacheSpec& spec = model_->cache_spec();
  // Per KV source of ratio r: 128/r latents of head_dim in FP4 with an E4M3 scale per 16 (hd/2 + hd/16 bytes),
  // indexer keys of index_head_dim in FP4 with a power-of-two scale per 32; the window FP8 per layer.
  double per_token = 0;
  for (int64_t src : c.kv_source_layer_ids) {
    const double r = static_cast<double>(c.compress_ratios[src]);
    per_token += (c.head_dim / 2 + c.head_dim / 16) / r;
    if (c.layers[src].index_source) per_token += (c.index_head_dim / 2 + c.index_head_dim / 32) / r;
  }
  per_token += c.num_layers * (c.head_dim + c.head_dim / 32) + 4;
  EXPECT_DOUBLE_EQ(spec.BytesPerToken(), per_token);
  EXPECT_EQ(spec.groups.back().kind, kvcache::CacheKind::kSlidingWindow);
  EXPECT_EQ(spec.groups.back().element, kvcache::CacheElement::kFP8E4M3);
  EXPECT_EQ(spec.groups.front().kind, kvcache::CacheKind::kSharedLatent);
  EXPECT_EQ(spec.groups.front().element, kvcache::CacheElement::kFP4E2M1);
  EXPECT_GT(spec.sequence_state_bytes, 0);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, V41SequenceTest, ::testing::ValuesIn(V41FixtureNames()));

}  // namespace
}  // namespace deepinfer::model
