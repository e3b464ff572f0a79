// 1 MB inputs built from the corpus (tools/tokenizer/corpus.py big_input), against the oracle's token count
// and id hash, encoded both sequentially and segment-parallel.
#include <gtest/gtest.h>

#include "test_data.h"
#include "tokenizer/locate.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer {
namespace {

class BigGoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(BigGoldenTest, MegabyteInputsMatchOracle) {
  Result<tokenizer::Tokenizer> tok = tokenizer::LoadTokenizer(GetParam() == "v3" ? "deepseek-v3" : "deepseek-v4");
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  std::vector<std::string> corpus = tokenizer_test::LoadCorpus();
  tokenizer_test::Golden golden = tokenizer_test::LoadGolden(GetParam());
  ASSERT_FALSE(golden.big.empty());
  for (const auto& big : golden.big) {
    std::string text = tokenizer_test::BigInput(corpus, big.seed, big.min_bytes);
    std::vector<int32_t> sequential = tok->EncodeTextSequential(text);
    EXPECT_EQ(sequential.size(), big.token_count) << "seed " << big.seed;
    EXPECT_EQ(tokenizer_test::HashIds(sequential), big.hash) << "seed " << big.seed;
    EXPECT_EQ(tok->EncodeText(text), sequential) << "seed " << big.seed;
    EXPECT_EQ(tok->Decode(sequential), text);
  }
}

INSTANTIATE_TEST_SUITE_P(DeepSeek, BigGoldenTest, ::testing::Values("v3", "v4"));

}  // namespace
}  // namespace deepinfer
