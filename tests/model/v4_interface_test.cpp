// The CausalLM interface as DeepSeek-V4 implements it, beyond the logits themselves: explicit logit rows,
// hidden states, output buffers that keep their capacity, the model info and weights fingerprint, states
// that belong to one model (for every operation), chunks past max_position_embeddings refused, and Draft
// refusing without drafting.
#include <filesystem>
#include <memory>
#include <span>

#include <gtest/gtest.h>

#include "model/causal_lm.h"
#include "model/deepseek_v4/v4_init.h"
#include "model/deepseek_v4/v4_model.h"
#include "model/sequential_blocks.h"
#include "v4_fixture.h"

namespace deepinfer::model {
namespace {

namespace fs = std::filesystem;
using test_support::FixtureDir;

struct Loaded {
  std::unique_ptr<V4Model> model;
  kvcache::KvPools pools;
  std::unique_ptr<SequentialBlocks> blocks;
};

Loaded Load(const std::string& dir, int64_t blocks_each = 64) {
  Loaded l;
  auto m = V4Model::Load(dir);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (!m.ok()) return l;
  l.model = std::move(*m);
  auto pools = kvcache::KvPools::Create(l.model->cache_spec(), blocks_each);
  EXPECT_TRUE(pools.ok());
  l.pools = std::move(*pools);
  l.blocks = std::make_unique<SequentialBlocks>(l.model->cache_spec(), l.pools);
  return l;
}

std::vector<int32_t> InterfaceTokens(int64_t n, int64_t seed = 1) {
  std::vector<int32_t> t;
  for (int64_t i = 0; i < n; ++i) t.push_back(static_cast<int32_t>((i * 37 + seed * 11 + 3) % 256));
  return t;
}

TEST(V4Interface, ExplicitRowsAndHiddenStatesEqualTheRowsOfAFullRun) {
  Loaded l = Load(FixtureDir("v4_mixed"));
  ASSERT_TRUE(l.model);
  const int64_t v = l.model->info().vocab_size, hw = l.model->info().hidden_width;
  EXPECT_EQ(hw, l.model->config().hc_mult * l.model->config().hidden_size);
  const std::vector<int32_t> tokens = InterfaceTokens(40);
  auto full = l.model->NewSequence();
  ASSERT_TRUE(l.blocks->Reserve(*full, 40).ok());
  SequenceChunk all{full.get(), tokens, LogitsWanted::kAll};
  all.want_hidden = true;
  ForwardOutput ref;
  ASSERT_TRUE(l.model->Forward(std::span(&all, 1), l.pools, &ref).ok());
  ASSERT_EQ(ref.num_rows[0], 40);
  ASSERT_EQ(ref.hidden.size(), static_cast<size_t>(40 * hw));

  // The same tokens in two chunks, asking for rows 0, 5, 17 of the first and 3 of the second, batched with
  // another sequence that asks for nothing (and so gets no hidden rows of its own beyond its logits rows).
  auto split = l.model->NewSequence();
  auto other = l.model->NewSequence();
  const std::vector<int32_t> other_tokens = InterfaceTokens(9, 2);
  ASSERT_TRUE(l.blocks->Reserve(*split, 20).ok());
  ASSERT_TRUE(l.blocks->Reserve(*other, 9).ok());
  const int32_t rows_a[] = {0, 5, 17};
  SequenceChunk a{split.get(), std::span(tokens).subspan(0, 20), LogitsWanted::kRows, rows_a, true};
  SequenceChunk b{other.get(), other_tokens, LogitsWanted::kNone};
  SequenceChunk batch[] = {b, a};
  ForwardOutput out;
  ASSERT_TRUE(l.model->Forward(batch, l.pools, &out).ok());
  ASSERT_EQ(out.num_rows[0], 0);
  ASSERT_EQ(out.num_rows[1], 3);
  for (int i = 0; i < 3; ++i) {
    for (int64_t k = 0; k < v; ++k) ASSERT_EQ(out.row(1, i)[k], ref.row(0, rows_a[i])[k]) << "row " << rows_a[i];
    for (int64_t k = 0; k < hw; ++k)
      ASSERT_EQ(out.hidden_row(1, i)[k], ref.hidden_row(0, rows_a[i])[k]) << "hidden row " << rows_a[i];
  }
  ASSERT_TRUE(l.blocks->Reserve(*split, 20).ok());
  const int32_t rows_b[] = {3};
  SequenceChunk c{split.get(), std::span(tokens).subspan(20, 20), LogitsWanted::kRows, rows_b, true};
  ASSERT_TRUE(l.model->Forward(std::span(&c, 1), l.pools, &out).ok());
  for (int64_t k = 0; k < v; ++k) ASSERT_EQ(out.row(0)[k], ref.row(0, 23)[k]);
  for (int64_t k = 0; k < hw; ++k) ASSERT_EQ(out.hidden_row(0)[k], ref.hidden_row(0, 23)[k]);
  EXPECT_EQ(split->num_tokens(), 40);
}

TEST(V4Interface, BadRowListsAreRejected) {
  Loaded l = Load(FixtureDir("v4_mixed"));
  ASSERT_TRUE(l.model);
  auto s = l.model->NewSequence();
  ASSERT_TRUE(l.blocks->Reserve(*s, 4).ok());
  const std::vector<int32_t> tokens = InterfaceTokens(4);
  for (std::vector<int32_t> rows : {std::vector<int32_t>{4}, {-1}, {2, 2}, {3, 1}}) {
    SequenceChunk chunk{s.get(), tokens, LogitsWanted::kRows, rows};
    ForwardOutput out;
    EXPECT_EQ(l.model->Forward(std::span(&chunk, 1), l.pools, &out).code(), StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(s->num_tokens(), 0);
}

TEST(V4Interface, OutputBuffersKeepTheirCapacity) {
  Loaded l = Load(FixtureDir("v4_mixed"));
  ASSERT_TRUE(l.model);
  auto s = l.model->NewSequence();
  const std::vector<int32_t> tokens = InterfaceTokens(30);
  ASSERT_TRUE(l.blocks->Reserve(*s, 30).ok());
  SequenceChunk chunk{s.get(), tokens, LogitsWanted::kAll};
  ForwardOutput out;
  ASSERT_TRUE(l.model->Forward(std::span(&chunk, 1), l.pools, &out).ok());
  const size_t capacity = out.logits.capacity();
  const float* data = out.logits.data();
  ASSERT_GE(capacity, static_cast<size_t>(30 * l.model->info().vocab_size));
  for (int step = 0; step < 3; ++step) {
    const int32_t next = 7;
    ASSERT_TRUE(l.blocks->Reserve(*s, 1).ok());
    SequenceChunk decode{s.get(), std::span(&next, 1), LogitsWanted::kLast};
    ASSERT_TRUE(l.model->Forward(std::span(&decode, 1), l.pools, &out).ok());
    EXPECT_EQ(out.logits.size(), static_cast<size_t>(l.model->info().vocab_size));
    EXPECT_EQ(out.logits.capacity(), capacity);
    EXPECT_EQ(out.logits.data(), data);  // no reallocation
  }
}

TEST(V4Interface, StatesBelongToTheirModel) {
  Loaded a = Load(FixtureDir("v4_mixed")), b = Load(FixtureDir("v4_mixed"));
  ASSERT_TRUE(a.model && b.model);
  auto s = a.model->NewSequence();
  ASSERT_TRUE(b.blocks->Reserve(*s, 3).ok());
  const std::vector<int32_t> tokens = InterfaceTokens(3);
  SequenceChunk chunk{s.get(), tokens, LogitsWanted::kLast};
  ForwardOutput out;
  Status st = b.model->Forward(std::span(&chunk, 1), b.pools, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("not a sequence state of this model"), std::string::npos) << st.message();
  EXPECT_EQ(b.model->Truncate(*s, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(b.model->Fork(*s).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(b.model->RestoreAt(*s, 0, RestoreFrom::kNoWindow, b.pools).code(), StatusCode::kInvalidArgument);
  SequenceChunk null_state{nullptr, tokens, LogitsWanted::kLast};
  EXPECT_EQ(b.model->Forward(std::span(&null_state, 1), b.pools, &out).code(), StatusCode::kInvalidArgument);
}

TEST(V4Interface, InfoComesFromTheConfig) {
  Loaded l = Load(FixtureDir("v4_mixed"));
  ASSERT_TRUE(l.model);
  const ModelInfo& info = l.model->info();
  EXPECT_EQ(info.architecture, "DeepseekV4ForCausalLM");
  EXPECT_EQ(info.vocab_size, l.model->config().vocab_size);
  EXPECT_EQ(info.hidden_size, l.model->config().hidden_size);
  EXPECT_EQ(info.bos_token_id, 0);
  EXPECT_EQ(info.eos_token_ids, std::vector<int32_t>{1});
  EXPECT_EQ(info.draft_kind, "");
  EXPECT_EQ(l.model->cache_spec().sequence_state_bytes % 4, 0);
  EXPECT_GT(l.model->cache_spec().sequence_state_bytes, 0);
}

TEST(V4Interface, FingerprintFollowsTheWeights) {
  auto config = V4PresetConfig("tiny");
  ASSERT_TRUE(config.ok());
  (*config)["vocab_size"] = 512;
  const fs::path root = fs::path(::testing::TempDir()) / "v4_interface_fingerprint";
  fs::remove_all(root);
  const std::string a = (root / "a").string(), b = (root / "b").string(), c = (root / "c").string();
  ASSERT_TRUE(WriteRandomV4Checkpoint(*config, a, 1, V4InitFormat::kBF16).ok());
  ASSERT_TRUE(WriteRandomV4Checkpoint(*config, b, 1, V4InitFormat::kBF16).ok());
  ASSERT_TRUE(WriteRandomV4Checkpoint(*config, c, 2, V4InitFormat::kBF16).ok());  // same headers, other values
  LoadOptions options;
  options.prefault = false;
  auto ma = V4Model::Load(a, options), mb = V4Model::Load(b, options), mc = V4Model::Load(c, options);
  ASSERT_TRUE(ma.ok() && mb.ok() && mc.ok());
  EXPECT_EQ((*ma)->info().weights_fingerprint, (*mb)->info().weights_fingerprint);
  EXPECT_NE((*ma)->info().weights_fingerprint, (*mc)->info().weights_fingerprint);
  EXPECT_NE((*ma)->info().weights_fingerprint, Hash128{});
  fs::remove_all(root);
}

TEST(V4Interface, ChunksPastMaxPositionEmbeddingsAreRejected) {
  auto config = V4PresetConfig("tiny");
  ASSERT_TRUE(config.ok());
  (*config)["vocab_size"] = 512;
  (*config)["max_position_embeddings"] = 24;
  const fs::path root = fs::path(::testing::TempDir()) / "v4_interface_max_positions";
  fs::remove_all(root);
  ASSERT_TRUE(WriteRandomV4Checkpoint(*config, root.string(), 1, V4InitFormat::kBF16).ok());
  Loaded l = Load(root.string());
  ASSERT_TRUE(l.model);
  auto s = l.model->NewSequence();
  ASSERT_TRUE(l.blocks->Reserve(*s, 30).ok());
  const std::vector<int32_t> tokens = InterfaceTokens(30);
  ForwardOutput out;
  SequenceChunk first{s.get(), std::span(tokens).subspan(0, 20), LogitsWanted::kLast};
  ASSERT_TRUE(l.model->Forward(std::span(&first, 1), l.pools, &out).ok());
  // Positions 20..29 pass 24: refused whole, the sequence unchanged.
  SequenceChunk past{s.get(), std::span(tokens).subspan(20, 10), LogitsWanted::kLast};
  EXPECT_EQ(l.model->Forward(std::span(&past, 1), l.pools, &out).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(s->num_tokens(), 20);
  // Up to the bound itself is fine.
  SequenceChunk last{s.get(), std::span(tokens).subspan(20, 4), LogitsWanted::kLast};
  EXPECT_TRUE(l.model->Forward(std::span(&last, 1), l.pools, &out).ok());
  EXPECT_EQ(s->num_tokens(), 24);
  l = Loaded{};
  fs::remove_all(root);
}

TEST(V4Interface, DraftNeedsAModelLoadedForDrafting) {
  Loaded l = Load(FixtureDir("v4_mixed"));
  ASSERT_TRUE(l.model);
  auto s = l.model->NewSequence();
  DraftChunk draft{s.get(), 1};
  ForwardOutput out;
  EXPECT_EQ(l.model->Draft(std::span(&draft, 1), l.pools, &out).code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace deepinfer::model
