// DeepSeek-V4.1's DSpark draft layers through CausalLM::Draft, on a random checkpoint with draft layers (there
// is no reference to compare with: transformers does not implement them). Internal consistency: shapes,
// determinism, draft logits that do not depend on batching, forking or rollback, the block limit, and the
// draft's context following the target sequence.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <unistd.h>

#include "model/deepseek_v41/v41_init.h"
#include "model/deepseek_v41/v41_model.h"
#include "model/sequential_blocks.h"

namespace deepinfer::model {
namespace {

namespace fs = std::filesystem;

class V41DsparkTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string((fs::temp_directory_path() / ("deepinfer_v41_dspark_" + std::to_string(::getpid()))).string());
    auto config = V41PresetConfig("tiny");
    ASSERT_TRUE(config.ok());
    auto& t = (*config)["text_config"];
    t["vocab_size"] = 512;  // a small vocabulary, and no Engram (it would need the tokenizer)
    t["engram_layer_ids"] = nlohmann::ordered_json::array();
    t["engram_num_embeddings"] = nlohmann::ordered_json::array();
    t["num_nextn_predict_layers"] = 2;
    t["dspark_noise_token_id"] = 2;
    ASSERT_TRUE(WriteRandomV41Checkpoint(*config, *dir_, 5, V41InitFormat::kQuantized).ok());
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }

  void SetUp() override {
    LoadOptions options;
    options.drafting = true;
    auto m = V41Model::Load(*dir_, options);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::move(*m);
    auto p = kvcache::KvPools::Create(model_->cache_spec(), 32);
    ASSERT_TRUE(p.ok());
    pools_ = std::move(*p);
    blocks_ = std::make_unique<SequentialBlocks>(model_->cache_spec(), pools_);
    for (int i = 0; i < 300; ++i) tokens_.push_back(static_cast<int32_t>((i * 37 + 11) % 512));
  }

  void Run(SequenceState& s, int64_t begin, int64_t end) {
    ASSERT_TRUE(blocks_->Reserve(s, end - begin).ok());
    SequenceChunk chunk{&s, std::span(tokens_).subspan(begin, end - begin), LogitsWanted::kNone};
    ForwardOutput out;
    ASSERT_TRUE(model_->Forward(std::span(&chunk, 1), pools_, &out).ok());
  }

  // Draft steps for each state with the given tokens (one per state per step); returns the logits per step.
  std::vector<std::vector<float>> Draft(std::vector<SequenceState*> states, const std::vector<int32_t>& step_tokens) {
    std::vector<std::vector<float>> logits;
    for (int32_t t : step_tokens) {
      std::vector<DraftChunk> chunks;
      for (SequenceState* s : states) chunks.push_back({s, t});
      ForwardOutput out;
      Status st = model_->Draft(chunks, pools_, &out);
      EXPECT_TRUE(st.ok()) << st.ToString();
      logits.push_back(out.logits);
    }
    return logits;
  }

  static std::string* dir_;
  std::unique_ptr<V41Model> model_;
  kvcache::KvPools pools_;
  std::unique_ptr<SequentialBlocks> blocks_;
  std::vector<int32_t> tokens_;
};

std::string* V41DsparkTest::dir_ = nullptr;

TEST_F(V41DsparkTest, ShapesAndDeterminism) {
  EXPECT_EQ(model_->info().draft_kind, "dspark");
  const int64_t v = model_->vocab_size(), gamma = model_->config().dspark.block_size;
  auto a = model_->NewSequence(), b = model_->NewSequence();
  Run(*a, 0, 200);
  Run(*b, 0, 200);
  const std::vector<int32_t> steps = {tokens_[200], 7, 99, 3, 250};
  ASSERT_EQ(static_cast<int64_t>(steps.size()), gamma);
  auto da = Draft({a.get()}, steps), db = Draft({b.get()}, steps);
  for (size_t k = 0; k < steps.size(); ++k) {
    ASSERT_EQ(static_cast<int64_t>(da[k].size()), v);
    for (float x : da[k]) ASSERT_TRUE(std::isfinite(x));
    EXPECT_EQ(da[k], db[k]) << "step " << k;
  }
  // Different drafted tokens give different logits at the next step (the Markov head), the same anchor
  // the same first step.
  auto c = model_->NewSequence();
  Run(*c, 0, 200);
  auto dc = Draft({c.get()}, {tokens_[200], 8});
  EXPECT_EQ(dc[0], da[0]);
  EXPECT_NE(dc[1], da[1]);
  // A block drafts at most dspark_block_size tokens; Forward starts a new block.
  DraftChunk more{a.get(), 1};
  ForwardOutput out;
  EXPECT_EQ(model_->Draft(std::span(&more, 1), pools_, &out).code(), StatusCode::kOutOfRange);
  Run(*a, 200, 201);
  EXPECT_TRUE(model_->Draft(std::span(&more, 1), pools_, &out).ok());
}

TEST_F(V41DsparkTest, BatchedDraftsEqualSingleOnes) {
  auto a = model_->NewSequence(), b = model_->NewSequence(), a1 = model_->NewSequence(), b1 = model_->NewSequence();
  Run(*a, 0, 150);
  Run(*b, 0, 260);
  Run(*a1, 0, 150);
  Run(*b1, 0, 260);
  const std::vector<int32_t> steps = {5, 6, 7};
  auto alone_a = Draft({a1.get()}, steps), alone_b = Draft({b1.get()}, steps);
  auto together = Draft({a.get(), b.get()}, steps);
  const int64_t v = model_->vocab_size();
  for (size_t k = 0; k < steps.size(); ++k) {
    EXPECT_TRUE(std::equal(alone_a[k].begin(), alone_a[k].end(), together[k].begin())) << k;
    EXPECT_TRUE(std::equal(alone_b[k].begin(), alone_b[k].end(), together[k].begin() + v)) << k;
  }
}

TEST_F(V41DsparkTest, DraftFollowsTruncateAndFork) {
  auto fresh = model_->NewSequence();
  Run(*fresh, 0, 190);
  const auto want = Draft({fresh.get()}, {4, 5});
  // Ran 200, rolled back to 190: the draft's context is the one of 190 positions.
  auto rolled = model_->NewSequence();
  Run(*rolled, 0, 200);
  Draft({rolled.get()}, {1});
  ASSERT_TRUE(model_->Truncate(*rolled, 190).ok());
  EXPECT_EQ(Draft({rolled.get()}, {4, 5}), want);
  // A fork drafts as its parent would.
  auto parent = model_->NewSequence();
  Run(*parent, 0, 190);
  auto child = model_->Fork(*parent);
  ASSERT_TRUE(child.ok());
  EXPECT_EQ(Draft({child->get()}, {4, 5}), want);
  EXPECT_EQ(Draft({parent.get()}, {4, 5}), want);
  // The context matters: another prefix drafts otherwise.
  auto other = model_->NewSequence();
  Run(*other, 0, 189);
  EXPECT_NE(Draft({other.get()}, {4, 5}), want);
}

TEST_F(V41DsparkTest, RefusedWithoutDraftingOrWithHiddenStates) {
  auto plain = V41Model::Load(*dir_);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ((*plain)->info().draft_kind, "");
  auto s = (*plain)->NewSequence();
  DraftChunk chunk{s.get(), 1};
  ForwardOutput out;
  EXPECT_EQ((*plain)->Draft(std::span(&chunk, 1), pools_, &out).code(), StatusCode::kFailedPrecondition);
  auto t = model_->NewSequence();
  Run(*t, 0, 10);
  const std::vector<float> hidden(static_cast<size_t>(model_->info().hidden_width));
  DraftChunk with_hidden{t.get(), 1, hidden.data()};
  EXPECT_EQ(model_->Draft(std::span(&with_hidden, 1), pools_, &out).code(), StatusCode::kInvalidArgument);
  DraftChunk bad_token{t.get(), 100000};
  EXPECT_EQ(model_->Draft(std::span(&bad_token, 1), pools_, &out).code(), StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace deepinfer::model
