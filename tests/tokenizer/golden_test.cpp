// Ids, decode and streaming against the oracle's golden output (tools/tokenizer/gen_golden.py) for the
// DeepSeek V3 and V4 tokenizers.
#include <gtest/gtest.h>

#include "core/utf8.h"
#include "test_data.h"
#include "tokenizer/locate.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer {
namespace {

using tokenizer_test::Golden;

struct Loaded {
  std::vector<std::string> corpus;
  Golden golden;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
};

// Loads once per tokenizer name.
const Loaded& Get(const std::string& name) {
  static std::map<std::string, Loaded> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  Loaded l;
  Result<tokenizer::Tokenizer> t = tokenizer::LoadTokenizer(name == "v3" ? "deepseek-v3" : "deepseek-v4");
  EXPECT_TRUE(t.ok()) << t.status().message();
  if (t.ok()) l.tokenizer = std::make_unique<tokenizer::Tokenizer>(std::move(*t));
  l.corpus = tokenizer_test::LoadCorpus();
  l.golden = tokenizer_test::LoadGolden(name);
  return cache.emplace(name, std::move(l)).first->second;
}

class GoldenTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    loaded_ = &Get(GetParam());
    ASSERT_NE(loaded_->tokenizer, nullptr);
    ASSERT_EQ(loaded_->corpus.size(), loaded_->golden.text_ids.size());
  }
  const tokenizer::Tokenizer& tok() const { return *loaded_->tokenizer; }
  const Loaded* loaded_ = nullptr;
};

TEST_P(GoldenTest, EncodeTextMatchesOracle) {
  int failures = 0;
  for (size_t i = 0; i < loaded_->corpus.size() && failures < 10; ++i) {
    std::vector<int32_t> ids = tok().EncodeText(loaded_->corpus[i]);
    if (ids != loaded_->golden.text_ids[i]) {
      ++failures;
      ADD_FAILURE() << "entry " << i << ": " << nlohmann::json(loaded_->corpus[i]).dump();
    }
  }
}

TEST_P(GoldenTest, EncodeWithAddedTokensMatchesOracle) {
  int failures = 0;
  for (size_t i = 0; i < loaded_->corpus.size() && failures < 10; ++i) {
    if (tok().EncodeWithAddedTokens(loaded_->corpus[i]) != loaded_->golden.added_ids[i]) {
      ++failures;
      ADD_FAILURE() << "entry " << i << ": " << nlohmann::json(loaded_->corpus[i]).dump();
    }
  }
}

TEST_P(GoldenTest, DecodeInvertsEncode) {
  for (size_t i = 0; i < loaded_->corpus.size(); ++i) {
    const std::string& text = loaded_->corpus[i];
    ASSERT_EQ(tok().Decode(loaded_->golden.text_ids[i]), text) << "entry " << i;
    ASSERT_EQ(tok().Decode(loaded_->golden.added_ids[i]), text) << "entry " << i;
  }
}

// For every prefix of every id sequence, what the detokenizer emitted plus its flush equals the one-shot
// decode of that prefix, and what it emitted is always whole code points.
void ExpectStreamingMatches(const tokenizer::Tokenizer& tok, const std::vector<int32_t>& ids, bool skip_special) {
  tokenizer::StreamingDetokenizer stream(tok, skip_special);
  std::string emitted;
  for (size_t k = 0; k < ids.size(); ++k) {
    std::string piece = stream.Add(ids[k]);
    ASSERT_TRUE(utf8::IsValid(piece));
    emitted += piece;
    tokenizer::StreamingDetokenizer flushed = stream;
    std::span<const int32_t> prefix(ids.data(), k + 1);
    ASSERT_EQ(emitted + flushed.Finish(), tok.Decode(prefix, skip_special)) << "prefix " << k + 1;
  }
}

TEST_P(GoldenTest, StreamingMatchesOneShotDecodeForEveryPrefix) {
  for (size_t i = 0; i < loaded_->corpus.size(); ++i) {
    ExpectStreamingMatches(tok(), loaded_->golden.added_ids[i], false);
    if (HasFatalFailure()) FAIL() << "entry " << i;
  }
}

TEST_P(GoldenTest, DecodeOfArbitraryIdsMatchesOracle) {
  // Byte tokens that leave UTF-8 incomplete or invalid, special tokens, skip_special both ways.
  for (const auto& c : loaded_->golden.decode) {
    ASSERT_EQ(tok().Decode(c.ids, c.skip_special), c.text) << nlohmann::json(c.ids).dump();
    ExpectStreamingMatches(tok(), c.ids, c.skip_special);
    if (HasFatalFailure()) FAIL() << nlohmann::json(c.ids).dump();
  }
}

TEST_P(GoldenTest, EverySingleIdDecodesAsOracle) {
  ASSERT_EQ(tok().vocab_size(), loaded_->golden.id_limit);
  uint64_t h = 0xCBF29CE484222325ULL;
  for (int32_t id = 0; id < static_cast<int32_t>(loaded_->golden.id_limit); ++id) {
    std::string s = tok().Decode(std::span<const int32_t>(&id, 1)) + "\xff";
    h = tokenizer_test::Fnv1a64(s.data(), s.size(), h);
  }
  EXPECT_EQ(h, loaded_->golden.single_decode_hash);
}

INSTANTIATE_TEST_SUITE_P(DeepSeek, GoldenTest, ::testing::Values("v3", "v4"));

}  // namespace
}  // namespace deepinfer
