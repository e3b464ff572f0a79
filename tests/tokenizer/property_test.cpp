// Properties that need no oracle: segment-parallel encoding equals sequential, safe cuts really are safe,
// added-token spellings in text never become their ids, and the pieces entry point composes.
#include <random>

#include <gtest/gtest.h>

#include "test_data.h"
#include "tokenizer/vocabulary.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/locate.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer {
namespace {

const tokenizer::Tokenizer& V3() {
  static tokenizer::Tokenizer* tok = [] {
    Result<tokenizer::Tokenizer> t = tokenizer::LoadTokenizer("deepseek-v3");
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return new tokenizer::Tokenizer(std::move(*t));
  }();
  return *tok;
}

const std::vector<std::string>& Corpus() {
  static const std::vector<std::string> corpus = tokenizer_test::LoadCorpus();
  return corpus;
}

// Random text from corpus fragments, occasionally cut mid-code-point or salted with arbitrary bytes, so
// invalid UTF-8 is covered too (EncodeText accepts any bytes).
std::string RandomText(std::mt19937_64& rng, size_t min_bytes) {
  std::string out;
  const auto& corpus = Corpus();
  while (out.size() < min_bytes) {
    const std::string& e = corpus[rng() % corpus.size()];
    switch (rng() % 8) {
      case 0:
        out += e.substr(rng() % (e.size() + 1));
        break;
      case 1:
        for (int i = 0, n = static_cast<int>(rng() % 6); i < n; ++i) out.push_back(static_cast<char>(rng()));
        break;
      default:
        out += e;
    }
  }
  return out;
}

TEST(TokenizerProperty, SegmentParallelEqualsSequential) {
  std::mt19937_64 rng(42);
  for (int round = 0; round < 6; ++round) {
    std::string text = RandomText(rng, 64 * 1024 + rng() % (256 * 1024));
    ASSERT_EQ(V3().EncodeText(text), V3().EncodeTextSequential(text)) << "round " << round;
  }
}

TEST(TokenizerProperty, EverySafeCutSplitsTheEncoding) {
  std::mt19937_64 rng(7);
  int cuts_checked = 0;
  for (int round = 0; round < 300; ++round) {
    std::string text = RandomText(rng, 1 + rng() % 300);
    std::vector<int32_t> whole = V3().EncodeTextSequential(text);
    for (size_t p = 1; p < text.size(); ++p) {
      if (!tokenizer::IsSafeCut(text, p)) continue;
      std::vector<int32_t> joined = V3().EncodeTextSequential(text.substr(0, p));
      std::vector<int32_t> right = V3().EncodeTextSequential(text.substr(p));
      joined.insert(joined.end(), right.begin(), right.end());
      ASSERT_EQ(joined, whole) << "cut at " << p << " of "
                               << nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      ++cuts_checked;
    }
  }
  EXPECT_GT(cuts_checked, 1000);
}

TEST(TokenizerProperty, CutsExistInEnglishChineseAndCode) {
  for (std::string_view text : {"hello world", "写代码。然后", "x=foo(bar);", "中文and English"}) {
    EXPECT_LT(tokenizer::NextSafeCut(text, 1), text.size()) << text;
  }
}

TEST(TokenizerProperty, AddedTokenSpellingsInTextNeverBecomeTheirIds) {
  const tokenizer::Tokenizer& tok = V3();
  const auto& added = tok.model().added_tokens();
  ASSERT_GT(added.size(), 800u);
  std::mt19937_64 rng(3);
  for (const tokenizer::AddedToken& t : added) {
    std::string text = Corpus()[rng() % Corpus().size()] + t.content + t.content + " " + t.content;
    for (int32_t id : tok.EncodeText(text)) ASSERT_FALSE(tok.IsAddedToken(id)) << t.content;
    EXPECT_EQ(tok.Decode(tok.EncodeText(text)), text);
    // The Hugging Face entry point, by contrast, does match them.
    std::vector<int32_t> matched = tok.EncodeWithAddedTokens(t.content);
    EXPECT_EQ(matched, std::vector<int32_t>{t.id}) << t.content;
  }
  std::vector<int32_t> user = tok.EncodeText("<｜Assistant｜>");
  EXPECT_GT(user.size(), 1u);
}

TEST(TokenizerProperty, PiecesConcatenateControlIdsAndText) {
  const tokenizer::Tokenizer& tok = V3();
  int32_t bos = *tok.TokenToId("<｜begin▁of▁sentence｜>");
  int32_t user = *tok.TokenToId("<｜User｜>");
  EXPECT_EQ(bos, 0);
  EXPECT_EQ(user, 128803);
  std::mt19937_64 rng(5);
  std::string big = RandomText(rng, 100 * 1024);
  std::vector<tokenizer::EncodePiece> pieces = {{bos, {}}, {-1, "Hi <｜Assistant｜>"}, {user, {}}, {-1, big}, {-1, ""}};
  std::vector<int32_t> expected = {bos};
  for (int32_t id : tok.EncodeText("Hi <｜Assistant｜>")) expected.push_back(id);
  expected.push_back(user);
  for (int32_t id : tok.EncodeTextSequential(big)) expected.push_back(id);
  EXPECT_EQ(tok.Encode(pieces), expected);
}

// EncodeWithin is Encode when the ids fit the limit and kOutOfRange past it, at every limit around the
// true count; and the byte bound holds: no id decodes to more than max_token_bytes() bytes.
TEST(TokenizerProperty, EncodeWithinIsEncodeOrOutOfRange) {
  const tokenizer::Tokenizer& tok = V3();
  for (size_t id = 0; id < tok.vocab_size(); ++id) {
    ASSERT_LE(tok.TokenBytes(static_cast<int32_t>(id)).size(), tok.max_token_bytes());
  }
  std::mt19937_64 rng(11);
  const std::string big = RandomText(rng, 300 * 1024);
  const std::vector<tokenizer::EncodePiece> pieces = {{0, {}}, {-1, big}, {1, {}}};
  const std::vector<int32_t> all = tok.Encode(pieces);
  for (size_t limit : {all.size() + 100, all.size(), all.size() - 1, all.size() / 2, size_t{1}, size_t{0}}) {
    auto within = tok.EncodeWithin(pieces, limit);
    if (limit >= all.size()) {
      ASSERT_TRUE(within.ok()) << limit;
      EXPECT_EQ(*within, all);
    } else {
      ASSERT_FALSE(within.ok()) << limit;
      EXPECT_EQ(within.status().code(), StatusCode::kOutOfRange);
    }
  }
  // 64 MiB of text: refused from its length alone, before any of it is encoded.
  const std::string huge(64 << 20, 'a');
  auto refused = tok.EncodeWithin({{{-1, huge}}}, 4096);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("at least"), std::string::npos) << refused.status().message();
}

TEST(TokenizerProperty, TokenLookupsAgree) {
  const tokenizer::Tokenizer& tok = V3();
  EXPECT_EQ(tok.vocab_size(), 128815u);
  for (int32_t id : {0, 1, 3, 100, 259, 127999, 128000, 128805, 128814}) {
    std::string_view spelling = tok.IdToToken(id);
    ASSERT_FALSE(spelling.empty()) << id;
    EXPECT_EQ(tok.TokenToId(spelling), id) << spelling;
  }
  EXPECT_TRUE(tok.IdToToken(-1).empty());
  EXPECT_TRUE(tok.IdToToken(129000).empty());
  EXPECT_FALSE(tok.TokenToId("no such token").has_value());
  EXPECT_TRUE(tok.IsSpecialToken(0));
  EXPECT_FALSE(tok.IsSpecialToken(128803));  // <｜User｜> is an added token with special: false in V3
  EXPECT_TRUE(tok.IsAddedToken(128803));
  // Unknown ids decode to nothing, as in the oracle.
  std::vector<int32_t> ids = {19923, 129000, -5, 2058};
  EXPECT_EQ(tok.Decode(ids), "Hello world");
}

TEST(TokenizerProperty, StreamingHoldsBackIncompleteCodePoints) {
  const tokenizer::Tokenizer& tok = V3();
  // "你" is E4 BD A0; feed its bytes as single-byte tokens.
  std::string text = "你";
  std::vector<int32_t> ids = tok.EncodeText(text);
  tokenizer::StreamingDetokenizer stream(tok);
  std::string out;
  for (unsigned char b : text) {
    int32_t id = -1;
    for (int32_t cand = 0; cand < 300; ++cand) {
      if (tok.TokenBytes(cand) == std::string(1, static_cast<char>(b))) id = cand;
    }
    ASSERT_GE(id, 0);
    out += stream.Add(id);
    if (out.empty()) {
      EXPECT_GT(stream.pending_bytes(), 0u);
    }
  }
  EXPECT_EQ(out, "你");
  EXPECT_EQ(stream.Finish(), "");
  // An unfinished lead byte flushes as U+FFFD.
  int32_t lead = -1;
  for (int32_t cand = 0; cand < 300; ++cand) {
    if (tok.TokenBytes(cand) == "\xE4") lead = cand;
  }
  ASSERT_GE(lead, 0);
  EXPECT_EQ(stream.Add(lead), "");
  EXPECT_EQ(stream.Finish(), "\xEF\xBF\xBD");
}

}  // namespace
}  // namespace deepinfer
