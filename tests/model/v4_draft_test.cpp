// Drafting with V4's MTP layer through CausalLM::Draft: autoregressive draft steps (each on the draft's own
// previous hidden state), drafts that never disturb the main model, batch invariance, and drafts after
// Truncate / Fork / RestoreAt equal to those of a fresh sequence. (The first draft step against the
// reference is V4Forward.MtpMatchesReference.)
#include <memory>
#include <span>
#include <vector>

#include <gtest/gtest.h>

#include "model/causal_lm.h"
#include "model/deepseek_v4/v4_model.h"
#include "model/sequential_blocks.h"
#include "v4_fixture.h"

namespace deepinfer::model {
namespace {

using test_support::FixtureDir;
using test_support::FixtureNames;

std::vector<int32_t> Tokens(int64_t n, int64_t seed) {
  std::vector<int32_t> t;
  for (int64_t i = 0; i < n; ++i) t.push_back(static_cast<int32_t>((i * 97 + seed * 31 + (i * i) % 13) % 256));
  return t;
}

struct Drafter {
  std::unique_ptr<V4Model> model;
  kvcache::KvPools pools;
  std::unique_ptr<SequentialBlocks> blocks;

  explicit Drafter(const std::string& fixture, bool drafting = true) {
    LoadOptions options;
    options.drafting = drafting;
    auto m = V4Model::Load(FixtureDir(fixture), options);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    if (!m.ok()) return;
    model = std::move(*m);
    auto p = kvcache::KvPools::Create(model->cache_spec(), 256);
    EXPECT_TRUE(p.ok());
    pools = std::move(*p);
    blocks = std::make_unique<SequentialBlocks>(model->cache_spec(), pools);
  }

  std::vector<float> Forward(SequenceState& s, std::span<const int32_t> tokens, LogitsWanted want = LogitsWanted::kAll,
                             std::vector<float>* hidden = nullptr) {
    EXPECT_TRUE(blocks->Reserve(s, static_cast<int64_t>(tokens.size())).ok());
    SequenceChunk chunk{&s, tokens, want};
    chunk.want_hidden = hidden != nullptr;
    ForwardOutput out;
    Status st = model->Forward(std::span(&chunk, 1), pools, &out);
    EXPECT_TRUE(st.ok()) << st.ToString();
    if (hidden) *hidden = out.hidden;
    return out.logits;
  }

  // One draft step; reserves the window block its slot needs.
  std::vector<float> Draft(SequenceState& s, int32_t token, const float* hidden = nullptr,
                           std::vector<float>* out_hidden = nullptr) {
    auto& v4 = static_cast<V4SequenceState&>(s);
    EXPECT_TRUE(blocks->Reserve(s, v4.draft_steps + 1).ok());
    DraftChunk d{&s, token, hidden, out_hidden != nullptr};
    ForwardOutput out;
    Status st = model->Draft(std::span(&d, 1), pools, &out);
    EXPECT_TRUE(st.ok()) << st.ToString();
    if (out_hidden) *out_hidden = out.hidden;
    return out.logits;
  }

  // Fork with copy-on-write of the partial last block of every group.
  std::unique_ptr<SequenceState> Fork(const SequenceState& s) {
    auto f = model->Fork(s);
    EXPECT_TRUE(f.ok());
    const int64_t last = (s.num_tokens() - 1) / kvcache::kBlockTokens;
    for (size_t g = 0; g < (*f)->num_groups(); ++g) (*f)->block_table(g)[last] = kvcache::kNoBlock;
    EXPECT_TRUE(blocks->Reserve(**f, 1).ok());
    for (size_t g = 0; g < (*f)->num_groups(); ++g)
      pools.group(g).CopyBlock(s.block_table(g)[last], (*f)->block_table(g)[last]);
    return std::move(*f);
  }
};

class V4Draft : public ::testing::TestWithParam<std::string> {};

TEST_P(V4Draft, DraftingLeavesTheMainModelAlone) {
  Drafter with(GetParam()), without(GetParam(), /*drafting=*/false);
  ASSERT_TRUE(with.model && without.model);
  EXPECT_EQ(without.model->info().draft_kind, "");
  // The window group holds one more layer (the MTP one) and each block's last hidden state.
  const size_t wg = with.model->cache_spec().groups.size() - 1;
  EXPECT_EQ(with.model->cache_spec().groups[wg].num_layers, without.model->cache_spec().groups[wg].num_layers + 1);
  const std::vector<int32_t> prompt = Tokens(150, 1);
  auto a = without.model->NewSequence(), b = with.model->NewSequence(), c = with.model->NewSequence();
  std::vector<float> plain, drafted, other;
  for (size_t at = 0; at < prompt.size();) {
    const size_t len = std::min<size_t>(at % 3 == 0 ? 17 : 5, prompt.size() - at);
    const auto part = std::span(prompt).subspan(at, len);
    const auto x = without.Forward(*a, part), y = with.Forward(*b, part), z = with.Forward(*c, part);
    plain.insert(plain.end(), x.begin(), x.end());
    drafted.insert(drafted.end(), y.begin(), y.end());
    other.insert(other.end(), z.begin(), z.end());
    at += len;
    if (at == prompt.size()) break;
    // Sequence b drafts three steps of arbitrary tokens between chunks; c does not.
    for (int k = 0; k < 3; ++k) with.Draft(*b, static_cast<int32_t>((at * 7 + k) % 256));
  }
  EXPECT_EQ(plain, drafted);
  EXPECT_EQ(plain, other);
  // And the next drafts agree too: the draft's writes were all overwritten by the next Forward.
  EXPECT_EQ(with.Draft(*b, 5), with.Draft(*c, 5));
  EXPECT_EQ(with.Draft(*b, 9), with.Draft(*c, 9));
}

TEST_P(V4Draft, StepsAreAutoregressiveOnTheDraftsOwnHiddenState) {
  Drafter d(GetParam());
  ASSERT_TRUE(d.model);
  const std::vector<int32_t> prompt = Tokens(60, 2);
  auto s = d.model->NewSequence();
  std::vector<float> main_hidden;
  d.Forward(*s, prompt, LogitsWanted::kLast, &main_hidden);
  ASSERT_EQ(main_hidden.size(), static_cast<size_t>(d.model->info().hidden_width));
  auto f1 = d.Fork(*s), f2 = d.Fork(*s);
  std::vector<float> h0;
  const std::vector<float> l0 = d.Draft(*s, 11, nullptr, &h0);
  const std::vector<float> l1 = d.Draft(*s, 23);
  const std::vector<float> l2 = d.Draft(*s, 42);
  // The first step's hidden input is the main model's last hidden state; later ones the draft's own.
  EXPECT_EQ(d.Draft(*f1, 11, main_hidden.data()), l0);
  EXPECT_EQ(d.Draft(*f1, 23, h0.data()), l1);
  EXPECT_EQ(d.Draft(*f1, 42), l2);
  // The step really depends on what came before: another first token changes the second step.
  d.Draft(*f2, 12);
  EXPECT_NE(d.Draft(*f2, 23), l1);
  EXPECT_EQ(s->num_tokens(), 60);  // drafts do not advance the sequence
}

TEST_P(V4Draft, BatchedDraftsEqualSingleOnes) {
  Drafter d(GetParam());
  ASSERT_TRUE(d.model);
  auto a = d.model->NewSequence(), b = d.model->NewSequence();
  d.Forward(*a, Tokens(40, 3));
  d.Forward(*b, Tokens(77, 4));
  auto a1 = d.Fork(*a), b1 = d.Fork(*b);
  const std::vector<float> sa = d.Draft(*a1, 3), sb = d.Draft(*b1, 8);
  ASSERT_TRUE(d.blocks->Reserve(*a, 1).ok());
  ASSERT_TRUE(d.blocks->Reserve(*b, 1).ok());
  DraftChunk batch[] = {{b.get(), 8}, {a.get(), 3}};
  ForwardOutput out;
  ASSERT_TRUE(d.model->Draft(batch, d.pools, &out).ok());
  const int64_t v = d.model->info().vocab_size;
  EXPECT_EQ(std::vector<float>(out.row(0), out.row(0) + v), sb);
  EXPECT_EQ(std::vector<float>(out.row(1), out.row(1) + v), sa);
}

TEST_P(V4Draft, DraftsAfterRollbackForkAndRestoreEqualFreshOnes) {
  Drafter d(GetParam());
  ASSERT_TRUE(d.model);
  const std::vector<int32_t> prompt = Tokens(250, 5), guess = Tokens(5, 6);
  // Speculative cycle: verify 5 guessed tokens, keep 2, draft.
  auto s = d.model->NewSequence();
  d.Forward(*s, prompt);
  d.Draft(*s, guess[0]);
  d.Forward(*s, guess);
  ASSERT_TRUE(d.model->Truncate(*s, 252).ok());
  std::vector<int32_t> kept = prompt;
  kept.insert(kept.end(), guess.begin(), guess.begin() + 2);
  auto fresh = d.model->NewSequence();
  d.Forward(*fresh, kept);
  EXPECT_EQ(d.Draft(*s, 77), d.Draft(*fresh, 77));
  EXPECT_EQ(d.Draft(*s, 78), d.Draft(*fresh, 78));
  // Resumed from window blocks at 128 and 256 (drafting state included): the same drafts.
  auto cold = d.model->NewSequence();
  d.Forward(*cold, Tokens(300, 7));
  const std::vector<float> want = d.Draft(*cold, 99);
  for (int64_t at : {128, 256}) {
    auto hit = d.model->NewSequence();
    for (size_t g = 0; g < hit->num_groups(); ++g) {
      const bool prefix = d.model->cache_spec().groups[g].retention == kvcache::CacheRetention::kPrefix;
      hit->block_table(g).assign(static_cast<size_t>(at / kvcache::kBlockTokens), kvcache::kNoBlock);
      for (int64_t b = 0; b < at / kvcache::kBlockTokens; ++b)
        if (prefix || b == at / kvcache::kBlockTokens - 1) hit->block_table(g)[b] = cold->block_table(g)[b];
    }
    ASSERT_TRUE(d.model->RestoreAt(*hit, at, RestoreFrom::kWindowBlocks, d.pools).ok());
    const std::vector<int32_t> rest = Tokens(300, 7);
    d.Forward(*hit, std::span(rest).subspan(at));
    EXPECT_EQ(d.Draft(*hit, 99), want) << "resumed at " << at;
  }
}

TEST_P(V4Draft, BadDraftsAreRefusedAndChangeNothing) {
  Drafter d(GetParam()), plain(GetParam(), false);
  ASSERT_TRUE(d.model && plain.model);
  auto p = plain.model->NewSequence();
  plain.Forward(*p, Tokens(5, 8));
  DraftChunk pd{p.get(), 1};
  ForwardOutput out;
  EXPECT_EQ(plain.model->Draft(std::span(&pd, 1), plain.pools, &out).code(), StatusCode::kFailedPrecondition);
  auto fresh = d.model->NewSequence();
  ASSERT_TRUE(d.blocks->Reserve(*fresh, 1).ok());
  DraftChunk none{fresh.get(), 1};
  EXPECT_EQ(d.model->Draft(std::span(&none, 1), d.pools, &out).code(), StatusCode::kFailedPrecondition);
  auto s = d.model->NewSequence();
  d.Forward(*s, Tokens(127, 9));
  auto twin = d.Fork(*s);
  DraftChunk bad{s.get(), 256};
  EXPECT_EQ(d.model->Draft(std::span(&bad, 1), d.pools, &out).code(), StatusCode::kOutOfRange);
  // Position 127's slot is in block 0; the second step's (128) needs window block 1, not reserved yet.
  DraftChunk ok{s.get(), 4};
  ASSERT_TRUE(d.model->Draft(std::span(&ok, 1), d.pools, &out).ok());
  DraftChunk beyond{s.get(), 5};
  EXPECT_EQ(d.model->Draft(std::span(&beyond, 1), d.pools, &out).code(), StatusCode::kInvalidArgument);
  d.Draft(*twin, 4);
  EXPECT_EQ(d.Draft(*s, 5), d.Draft(*twin, 5));  // the refusal left the draft where it was
  // A window-less restore has no hidden state before its position: Forward first.
  auto r = d.model->NewSequence();
  for (size_t g = 0; g < r->num_groups(); ++g) r->block_table(g) = {s->block_table(g)[0]};
  ASSERT_TRUE(d.model->RestoreAt(*r, 128, RestoreFrom::kNoWindow, d.pools).ok());
  ASSERT_TRUE(d.blocks->Reserve(*r, 1).ok());
  DraftChunk early{r.get(), 3};
  EXPECT_EQ(d.model->Draft(std::span(&early, 1), d.pools, &out).code(), StatusCode::kFailedPrecondition);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, V4Draft, ::testing::ValuesIn(FixtureNames()));

}  // namespace
}  // namespace deepinfer::model
