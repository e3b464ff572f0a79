// Drafting with DeepSeek-V3's MTP layer through CausalLM::Draft, against the MTP reference of
// tools/model/gen_v3_fixtures.py (DeepSeek's MTP composed from transformers' V3 modules) on v3_tiny_b_f32, and
// with V3.2's (whose MTP layer has its own indexer, over the MTP layer's positions) on v32_tiny_c_fp8.
//
// Tolerance as in v3_forward_test.cpp: fp32 on both sides (FP8 weights dequantized alike), the absorbed against
// the naive MLA form, so |ours − ref| ≤ 1e-5 · (1 + max|ref row|); V3.2's selections as discussed there.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "model/causal_lm.h"
#include "model/deepseek_v3/v3_init.h"
#include "model/deepseek_v3/v3_model.h"
#include "model/sequential_blocks.h"
#include "v4_fixture.h"

namespace deepinfer::model {
namespace v3_draft_test {

using test_support::FixtureDir;
using test_support::Reference;

constexpr char kFixture[] = "v3_tiny_b_f32";
constexpr char kV32Fixture[] = "v32_tiny_c_fp8";

::testing::AssertionResult RowClose(const float* ours, const float* ref, int64_t n, const std::string& what) {
  double max_ref = 0, max_diff = 0;
  for (int64_t i = 0; i < n; ++i) {
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(ref[i])));
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(ours[i]) - ref[i]));
  }
  if (max_diff <= 1e-5 * (1 + max_ref)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": max |diff| " << max_diff << " (max |ref| " << max_ref << ")";
}

struct DraftRunner {
  std::unique_ptr<V3Model> model;
  kvcache::KvPools pool;
  std::unique_ptr<SequentialBlocks> blocks;

  explicit DraftRunner(const std::string& fixture = kFixture) {
    LoadOptions options;
    options.drafting = true;
    auto m = V3Model::Load(FixtureDir(fixture), options);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    if (!m.ok()) return;
    model = std::move(*m);
    auto pools = kvcache::KvPools::Create(model->cache_spec(), 16);
    EXPECT_TRUE(pools.ok()) << pools.status().ToString();
    if (pools.ok()) pool = std::move(*pools);
    blocks = std::make_unique<SequentialBlocks>(model->cache_spec(), pool);
  }

  void Forward(SequenceState& state, std::span<const int32_t> tokens) {
    ASSERT_TRUE(blocks->Reserve(state, static_cast<int64_t>(tokens.size())).ok());
    SequenceChunk chunk{&state, tokens, LogitsWanted::kNone};
    ForwardOutput out;
    Status s = model->Forward(std::span(&chunk, 1), pool, &out);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  // One draft step consuming `token` (the slot it writes is reserved first).
  std::vector<float> Draft(SequenceState& state, int32_t token, std::vector<float>* hidden = nullptr) {
    EXPECT_TRUE(blocks->Reserve(state, 1).ok());
    DraftChunk draft{&state, token, nullptr, hidden != nullptr};
    ForwardOutput out;
    Status s = model->Draft(std::span(&draft, 1), pool, &out);
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok()) return {};
    EXPECT_EQ(out.num_rows[0], 1);
    if (hidden != nullptr) *hidden = out.hidden;
    return out.logits;
  }
};

// The MTP prediction for position p + 2 from the main model's state at p and the token at p + 1 is one draft
// step after the main model has run p + 1 positions. Token by token it matches the reference; after uneven
// chunks (crossing the 128-position block) the drafts are bit-identical to the token-by-token ones, and so
// are those of a sequence restored at the block boundary (the hidden state at 127 comes from the block).
class V3DraftFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(V3DraftFixture, MtpMatchesReferenceWhateverTheChunksAndAfterARestore) {
  Reference ref(GetParam());
  ASSERT_TRUE(ref.ok());
  DraftRunner run(GetParam());
  ASSERT_TRUE(run.model);
  ASSERT_EQ(run.model->info().draft_kind, "mtp");
  ASSERT_TRUE(run.model->info().supports_draft);
  std::vector<std::string> groups;
  for (const auto& g : run.model->cache_spec().groups) groups.push_back(g.name);
  if (GetParam() == kV32Fixture) {
    EXPECT_EQ(groups, (std::vector<std::string>{"mla", "mtp", "index", "mtp_index"}));
  } else {
    EXPECT_EQ(groups, (std::vector<std::string>{"mla", "mtp"}));
  }
  const int64_t v = run.model->vocab_size();
  const std::vector<int32_t> tokens = ref.Ints("mtp.tokens");
  const std::vector<float> want = ref.Floats("mtp.logits");
  const size_t total = tokens.size() - 1;
  ASSERT_GT(total, 140u);
  ASSERT_EQ(want.size(), total * static_cast<size_t>(v));

  auto stepwise_state = run.model->NewSequence();
  std::vector<std::vector<float>> stepwise;
  for (size_t p = 0; p < total; ++p) {
    run.Forward(*stepwise_state, std::span(tokens).subspan(p, 1));
    stepwise.push_back(run.Draft(*stepwise_state, tokens[p + 1]));
    ASSERT_EQ(stepwise.back().size(), static_cast<size_t>(v));
    EXPECT_TRUE(RowClose(stepwise.back().data(), want.data() + p * v, v, "MTP position " + std::to_string(p)));
  }

  auto chunked = run.model->NewSequence();
  size_t at = 0, k = 0;
  const std::vector<size_t> sizes = {7, 3, 29, 1, 13};
  while (at < total) {
    const size_t len = std::min(sizes[k++ % sizes.size()], total - at);
    run.Forward(*chunked, std::span(tokens).subspan(at, len));
    at += len;
    EXPECT_EQ(run.Draft(*chunked, tokens[at]), stepwise[at - 1]) << "MTP position " << at - 1 << " after chunks";
  }

  // A fork of the chunked sequence restored at 128 (its blocks up to there shared), then 12 positions more.
  auto fork = run.model->Fork(*chunked);
  ASSERT_TRUE(fork.ok());
  SequenceState& restored = **fork;
  ASSERT_TRUE(run.model->RestoreAt(restored, 128, RestoreFrom::kNoWindow, run.pool).ok());
  // Right after the restore the draft uses the block-end hidden state of position 127.
  EXPECT_EQ(run.Draft(restored, tokens[128]), stepwise[127]);
  run.Forward(restored, std::span(tokens).subspan(128, 12));
  EXPECT_EQ(run.Draft(restored, tokens[140]), stepwise[139]);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, V3DraftFixture, ::testing::Values(kFixture, kV32Fixture));

// A chain of draft steps writes slots ≥ num_tokens and feeds each step's output hidden state to the next; the
// next Forward overwrites those slots, and after a Truncate the draft starts again from the main model's
// hidden state: the same drafts as a sequence that never drafted ahead.
TEST(V3Draft, ChainedDraftsLeaveNoTraceAfterForwardOrTruncate) {
  Reference ref(kFixture);
  ASSERT_TRUE(ref.ok());
  DraftRunner run;
  ASSERT_TRUE(run.model);
  const std::vector<int32_t> tokens = ref.Ints("mtp.tokens");
  auto plain = run.model->NewSequence();
  run.Forward(*plain, std::span(tokens).subspan(0, 20));
  const std::vector<float> first = run.Draft(*plain, tokens[20]);
  run.Forward(*plain, std::span(tokens).subspan(20, 1));
  const std::vector<float> second = run.Draft(*plain, tokens[21]);

  auto chained = run.model->NewSequence();
  run.Forward(*chained, std::span(tokens).subspan(0, 20));
  std::vector<float> hidden;
  EXPECT_EQ(run.Draft(*chained, tokens[20], &hidden), first);
  EXPECT_EQ(hidden.size(), static_cast<size_t>(run.model->info().hidden_width));
  // Two more steps on the draft's own hidden states (positions 21 and 22): different inputs, different logits.
  EXPECT_NE(run.Draft(*chained, 7), first);
  run.Draft(*chained, 9);
  run.Forward(*chained, std::span(tokens).subspan(20, 1));
  EXPECT_EQ(run.Draft(*chained, tokens[21]), second);
  // Verify-style: 3 tokens forwarded, 2 rejected.
  run.Forward(*chained, std::span(tokens).subspan(21, 3));
  ASSERT_TRUE(run.model->Truncate(*chained, 22).ok());
  run.Forward(*plain, std::span(tokens).subspan(21, 1));
  EXPECT_EQ(run.Draft(*chained, tokens[22]), run.Draft(*plain, tokens[22]));
  // Truncate reaches kV3DraftRollback positions back when drafting.
  EXPECT_EQ(run.model->max_rollback(), kV3DraftRollback);
  EXPECT_FALSE(run.model->Truncate(*chained, 22 - kV3DraftRollback - 1).ok());
}

int32_t Argmax(const float* row, int64_t n) { return static_cast<int32_t>(std::max_element(row, row + n) - row); }

// Greedy speculative decoding on the model alone: two chained drafts per step, one verify chunk, the rejected
// positions truncated. The tokens are the reference's greedy continuation whatever is accepted.
TEST(V3Draft, SpeculativeGreedyDecodingEqualsTheReferenceContinuation) {
  Reference ref(kFixture);
  ASSERT_TRUE(ref.ok());
  DraftRunner run;
  ASSERT_TRUE(run.model);
  const int64_t v = run.model->vocab_size();
  const std::vector<int32_t> prompt = ref.Ints("greedy.prompt"), want = ref.Ints("greedy.output");
  auto state = run.model->NewSequence();
  ASSERT_TRUE(run.blocks->Reserve(*state, static_cast<int64_t>(prompt.size())).ok());
  SequenceChunk first{state.get(), prompt, LogitsWanted::kLast};
  ForwardOutput out;
  ASSERT_TRUE(run.model->Forward(std::span(&first, 1), run.pool, &out).ok());
  std::vector<int32_t> got = {Argmax(out.row(0), v)};
  int64_t accepted = 0, step = 0;
  while (got.size() < want.size()) {
    const int64_t n = state->num_tokens();
    // The last token, then two drafts: the MTP layer's own, and every other step the reference's next tokens
    // (random weights make the MTP layer's own rarely right), so that both rejection and acceptance happen.
    std::vector<int32_t> chunk_tokens = {got.back(), 0, 0};
    const bool oracle = (step++ % 2 == 1) && got.size() + 1 < want.size();
    chunk_tokens[1] = Argmax(run.Draft(*state, chunk_tokens[0]).data(), v);
    if (oracle) chunk_tokens[1] = want[got.size()];
    chunk_tokens[2] = Argmax(run.Draft(*state, chunk_tokens[1]).data(), v);
    if (oracle) chunk_tokens[2] = want[got.size() + 1];
    ASSERT_TRUE(run.blocks->Reserve(*state, 3).ok());
    SequenceChunk check{state.get(), chunk_tokens, LogitsWanted::kAll};
    ASSERT_TRUE(run.model->Forward(std::span(&check, 1), run.pool, &out).ok());
    int64_t keep = 1;
    for (int64_t i = 0; i < 3 && got.size() < want.size(); ++i) {
      got.push_back(Argmax(out.row(0, i), v));
      if (i == 2 || got.back() != chunk_tokens[i + 1]) break;
      ++keep;
      ++accepted;
    }
    ASSERT_TRUE(run.model->Truncate(*state, n + keep).ok());
  }
  EXPECT_EQ(got, want);
  EXPECT_GT(accepted, 0);
}

TEST(V3Draft, DraftNeedsAForwardFirstAndAValidToken) {
  DraftRunner run;
  ASSERT_TRUE(run.model);
  auto state = run.model->NewSequence();
  ASSERT_TRUE(run.blocks->Reserve(*state, 1).ok());
  DraftChunk draft{state.get(), 3};
  ForwardOutput out;
  EXPECT_EQ(run.model->Draft(std::span(&draft, 1), run.pool, &out).code(), StatusCode::kFailedPrecondition);
  const std::vector<int32_t> prompt = {1, 2, 3};
  run.Forward(*state, prompt);
  ASSERT_TRUE(run.blocks->Reserve(*state, 1).ok());
  draft.token = static_cast<int32_t>(run.model->vocab_size());
  EXPECT_EQ(run.model->Draft(std::span(&draft, 1), run.pool, &out).code(), StatusCode::kOutOfRange);
}

// init-model's V3 writer and the loader agree on the MTP layer's names and shapes (the tiny preset with a
// small vocabulary): loaded for drafting, a draft step gives finite logits.
TEST(V3Draft, InitModelWritesAnMtpLayerTheLoaderDraftsWith) {
  auto config = V3PresetConfig("tiny");
  ASSERT_TRUE(config.ok());
  ASSERT_EQ((*config)["num_nextn_predict_layers"], 1);
  (*config)["vocab_size"] = 512;
  const std::string dir = (std::filesystem::path(::testing::TempDir()) / "v3_draft_init").string();
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(WriteRandomV3Checkpoint(*config, dir, 5, V3InitFormat::kBF16).ok());
  LoadOptions options;
  options.drafting = true;
  auto m = V3Model::Load(dir, options);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ((*m)->weights().mtp.size(), 1u);
  EXPECT_TRUE((*m)->weights().mtp[0].layer.moe);
  auto pools = kvcache::KvPools::Create((*m)->cache_spec(), 4);
  ASSERT_TRUE(pools.ok());
  SequentialBlocks blocks((*m)->cache_spec(), *pools);
  auto state = (*m)->NewSequence();
  const std::vector<int32_t> prompt = {0, 5, 77, 300};
  ASSERT_TRUE(blocks.Reserve(*state, 5).ok());
  SequenceChunk chunk{state.get(), prompt, LogitsWanted::kNone};
  ForwardOutput out;
  ASSERT_TRUE((*m)->Forward(std::span(&chunk, 1), *pools, &out).ok());
  DraftChunk draft{state.get(), 9};
  ASSERT_TRUE((*m)->Draft(std::span(&draft, 1), *pools, &out).ok());
  ASSERT_EQ(out.logits.size(), 512u);
  EXPECT_TRUE(std::all_of(out.logits.begin(), out.logits.end(), [](float x) { return std::isfinite(x); }));
  std::filesystem::remove_all(dir);
}

TEST(V3Draft, WithoutDraftingThereIsNoMtpGroup) {
  auto m = V3Model::Load(FixtureDir(kFixture));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->cache_spec().groups.size(), 1u);
  EXPECT_EQ((*m)->info().draft_kind, "");
  auto state = (*m)->NewSequence();
  DraftChunk draft{state.get(), 3};
  ForwardOutput out;
  kvcache::KvPools pools;
  EXPECT_EQ((*m)->Draft(std::span(&draft, 1), pools, &out).code(), StatusCode::kFailedPrecondition);
}

}  // namespace v3_draft_test
}  // namespace deepinfer::model
