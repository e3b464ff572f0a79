// DeepSeek-V4.1's own invariances (the reference comparisons are in v41_reference_slow_test): uneven chunked
// prefill, token-by-token decode and mixed batches bit-identical to one full prefill; the logits and hidden
// rows asked for; refused inputs that change nothing.
#include <algorithm>
#include <memory>
#include <span>

#include <gtest/gtest.h>

#include "model/causal_lm.h"
#include "model/deepseek_v41/v41_model.h"
#include "v41_fixture.h"
#include "v41_runner.h"

namespace deepinfer::model {
namespace {

using test_support::Runner;
using test_support::V41FixtureNames;
using test_support::V41Reference;

class V41ForwardTest : public ::testing::TestWithParam<std::string> {};

TEST_P(V41ForwardTest, ChunkedPrefillAndDecodeAreBitIdenticalToFullPrefill) {
  Runner run(GetParam());
  ASSERT_TRUE(run.model);
  V41Reference ref(GetParam());
  const std::vector<int32_t> tokens = ref.Tokens("seq_len400.input_ids");
  const int64_t n = static_cast<int64_t>(tokens.size());
  const std::vector<float> full = run.RunChunked(tokens, {n});
  ASSERT_EQ(static_cast<int64_t>(full.size()), n * run.model->vocab_size());
  // Uneven chunks that split groups, candidate blocks and KV blocks in every way.
  for (const std::vector<int64_t>& sizes : std::vector<std::vector<int64_t>>{{151, 249}, {1, 2, 3, 5, 7, 11, 13, 131}}) {
    const std::vector<float> chunked = run.RunChunked(tokens, sizes);
    ASSERT_EQ(chunked.size(), full.size());
    EXPECT_EQ(chunked, full) << "chunk sizes starting " << sizes[0];
  }
  // Token by token across the first block boundary (and b's window of 32 sliding).
  const int64_t m = 160;
  const std::span<const int32_t> head(tokens.data(), m);
  const std::vector<float> head_full = run.RunChunked(head, {m});
  EXPECT_EQ(run.RunChunked(head, {1}), head_full);
  EXPECT_TRUE(std::equal(head_full.begin(), head_full.end(), full.begin()))
      << "a prefix's prefill equals the longer prefill's rows";
}

TEST_P(V41ForwardTest, RowsAndHiddenStatesAskedFor) {
  Runner run(GetParam());
  ASSERT_TRUE(run.model);
  V41Reference ref(GetParam());
  const std::vector<int32_t> tokens = ref.Tokens("seq_len150.input_ids");
  const int64_t v = run.model->vocab_size(), width = run.model->info().hidden_width;
  EXPECT_EQ(width, run.model->config().hc_mult * run.model->config().hidden_size);
  const std::vector<float> all = run.RunChunked(tokens, {150});
  run.Reset();
  auto state = run.model->NewSequence();
  const std::vector<int32_t> rows = {0, 5, 77, 149};
  SequenceChunk chunk{state.get(), tokens, LogitsWanted::kRows, rows, /*want_hidden=*/true};
  ForwardOutput out;
  ASSERT_TRUE(run.Step(std::span(&chunk, 1), &out).ok());
  ASSERT_EQ(out.num_rows[0], 4);
  ASSERT_EQ(static_cast<int64_t>(out.hidden.size()), 4 * width);
  for (size_t k = 0; k < rows.size(); ++k)
    EXPECT_TRUE(std::equal(out.row(0, k), out.row(0, k) + v, all.begin() + rows[k] * v)) << rows[k];
  // kNone: the state advances, no rows come back.
  std::vector<int32_t> more = {tokens[3], tokens[4]};
  SequenceChunk none{state.get(), more, LogitsWanted::kNone};
  ASSERT_TRUE(run.Step(std::span(&none, 1), &out).ok());
  EXPECT_EQ(out.num_rows[0], 0);
  EXPECT_TRUE(out.logits.empty());
  EXPECT_EQ(state->num_tokens(), 152);
}

TEST_P(V41ForwardTest, BadInputsAreRefusedWithNothingChanged) {
  Runner run(GetParam());
  ASSERT_TRUE(run.model);
  auto state = run.model->NewSequence();
  std::vector<int32_t> tokens = {0, 5, 7};
  ForwardOutput out;
  SequenceChunk ok{state.get(), tokens, LogitsWanted::kLast};
  ASSERT_TRUE(run.Step(std::span(&ok, 1), &out).ok());
  auto expect_refused = [&](std::vector<SequenceChunk> chunks, StatusCode code, const char* what) {
    Status s = run.model->Forward(chunks, run.pools, &out);
    EXPECT_EQ(s.code(), code) << what << ": " << s.ToString();
    EXPECT_EQ(state->num_tokens(), 3) << what;
  };
  std::vector<int32_t> bad = {1, static_cast<int32_t>(run.model->vocab_size())};
  expect_refused({{state.get(), bad, LogitsWanted::kLast}}, StatusCode::kOutOfRange, "token id");
  std::vector<int32_t> long_chunk(200, 3);  // needs block 1, which the tables do not hold
  expect_refused({{state.get(), long_chunk, LogitsWanted::kLast}}, StatusCode::kInvalidArgument, "block table");
  expect_refused({{state.get(), tokens, LogitsWanted::kLast}, {state.get(), tokens, LogitsWanted::kLast}},
                 StatusCode::kInvalidArgument, "duplicate state");
  const std::vector<int32_t> rows = {2, 1};
  expect_refused({{state.get(), tokens, LogitsWanted::kRows, rows}}, StatusCode::kInvalidArgument, "rows");
  Runner other(GetParam());
  auto foreign = other.model->NewSequence();
  expect_refused({{foreign.get(), tokens, LogitsWanted::kLast}}, StatusCode::kInvalidArgument, "foreign state");
  kvcache::KvPools empty;
  EXPECT_EQ(run.model->Forward(std::vector<SequenceChunk>{{state.get(), tokens}}, empty, &out).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(run.model->Draft({}, run.pools, &out).code(), StatusCode::kFailedPrecondition);
}

TEST_P(V41ForwardTest, MixedBatchesAreBitIdenticalToSingleSequences) {
  Runner run(GetParam());
  ASSERT_TRUE(run.model);
  V41Reference ref(GetParam());
  const std::vector<int32_t> a = ref.Tokens("seq_len150.input_ids"), b = ref.Tokens("seq_len400.input_ids");
  const int64_t vocab = run.model->vocab_size();
  const std::vector<float> alone_a = run.RunChunked(a, {static_cast<int64_t>(a.size())});
  const std::vector<float> alone_b = run.RunChunked(b, {static_cast<int64_t>(b.size())});
  // Both sequences in every step: b's prefill of 200 beside a's chunks of 37, then decode steps of both.
  run.Reset();
  auto sa = run.model->NewSequence(), sb = run.model->NewSequence();
  std::vector<float> got_a, got_b;
  size_t at_a = 0, at_b = 0;
  while (at_a < a.size() || at_b < b.size()) {
    std::vector<SequenceChunk> chunks;
    const size_t len_a = std::min<size_t>(at_b == 0 ? 37 : 1, a.size() - at_a);
    const size_t len_b = std::min<size_t>(at_b == 0 ? 200 : 3, b.size() - at_b);
    if (len_a) chunks.push_back({sa.get(), std::span(a).subspan(at_a, len_a), LogitsWanted::kAll});
    if (len_b) chunks.push_back({sb.get(), std::span(b).subspan(at_b, len_b), LogitsWanted::kAll});
    ForwardOutput out;
    ASSERT_TRUE(run.Step(chunks, &out).ok());
    size_t k = 0;
    if (len_a) {
      got_a.insert(got_a.end(), out.row(k), out.row(k) + len_a * vocab);
      ++k;
    }
    if (len_b) got_b.insert(got_b.end(), out.row(k), out.row(k) + len_b * vocab);
    at_a += len_a;
    at_b += len_b;
  }
  EXPECT_EQ(got_a, alone_a);
  EXPECT_EQ(got_b, alone_b);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, V41ForwardTest, ::testing::ValuesIn(V41FixtureNames()));

}  // namespace
}  // namespace deepinfer::model
