// tokenizer.json loading: constructs outside the DeepSeek family fail with an error that names them.
#include <gtest/gtest.h>

#include "test_data.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/vocabulary.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/locate.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer {
namespace {

using Json = nlohmann::json;

// A small tokenizer.json of the DeepSeek shape: the 256 byte tokens, three merges, one added token.
const Json& SmallJson() {
  static const Json j = [] {
    Json vocab = Json::object();
    for (int b = 0; b < 256; ++b) vocab[tokenizer::byte_level::Encode(std::string(1, static_cast<char>(b)))] = b;
    vocab["he"] = 256;
    vocab["ll"] = 257;
    vocab["hell"] = 258;
    Json split = Json::array();
    for (std::string_view p : tokenizer::kDeepSeekSplitPatterns) {
      split.push_back({{"type", "Split"}, {"pattern", {{"Regex", std::string(p)}}}, {"behavior", "Isolated"},
                       {"invert", false}});
    }
    split.push_back({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}});
    Json out = {
        {"version", "1.0"},
        {"truncation", nullptr},
        {"padding", nullptr},
        {"added_tokens", Json::array({{{"id", 259}, {"content", "<｜User｜>"}, {"single_word", false},
                                       {"lstrip", false}, {"rstrip", false}, {"normalized", true},
                                       {"special", false}}})},
        {"normalizer", {{"type", "Sequence"}, {"normalizers", Json::array()}}},
        {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", split}}},
        {"post_processor", {{"type", "ByteLevel"}}},
        {"decoder", {{"type", "ByteLevel"}}},
        {"model",
         {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
          {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false}, {"vocab", vocab},
          {"merges", Json::array({"h e", "l l", "he ll"})}}},
    };
    return out;
  }();
  return j;
}

Status LoadModified(const std::function<void(Json&)>& edit) {
  Json j = SmallJson();
  edit(j);
  Result<tokenizer::Tokenizer> t = tokenizer::Tokenizer::FromJson(j.dump());
  return t.status();
}

void ExpectUnsupported(const std::function<void(Json&)>& edit, const std::string& named) {
  Status s = LoadModified(edit);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented) << s.ToString();
  EXPECT_NE(s.message().find(named), std::string::npos) << s.message();
}

TEST(TokenizerLoader, UnsupportedConstructsAreNamed) {
  ExpectUnsupported([](Json& j) { j["normalizer"] = {{"type", "NFC"}}; }, "NFC");
  ExpectUnsupported([](Json& j) { j["normalizer"]["normalizers"].push_back({{"type", "NFKC"}}); }, "NFKC");
  ExpectUnsupported([](Json& j) { j["model"]["type"] = "WordPiece"; }, "WordPiece");
  ExpectUnsupported([](Json& j) { j["model"]["byte_fallback"] = true; }, "byte_fallback");
  ExpectUnsupported([](Json& j) { j["model"]["dropout"] = 0.1; }, "dropout");
  ExpectUnsupported([](Json& j) { j["model"]["ignore_merges"] = true; }, "ignore_merges");
  ExpectUnsupported([](Json& j) { j["pre_tokenizer"]["pretokenizers"][2]["pattern"]["Regex"] = "\\s+"; }, "\\s+");
  ExpectUnsupported([](Json& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed"; }, "Removed");
  ExpectUnsupported([](Json& j) { j["pre_tokenizer"]["pretokenizers"][3]["use_regex"] = true; }, "use_regex");
  ExpectUnsupported([](Json& j) { j["pre_tokenizer"] = {{"type", "Whitespace"}}; }, "Whitespace");
  ExpectUnsupported([](Json& j) { j["decoder"] = {{"type", "WordPiece"}}; }, "WordPiece");
  ExpectUnsupported([](Json& j) { j["added_tokens"][0]["lstrip"] = true; }, "lstrip");
  ExpectUnsupported([](Json& j) { j["truncation"] = {{"max_length", 10}}; }, "truncation");
}

TEST(TokenizerLoader, MalformedFilesAreInvalidArguments) {
  EXPECT_EQ(tokenizer::Tokenizer::FromJson("{").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(tokenizer::Tokenizer::FromJson("[]").status().code(), StatusCode::kInvalidArgument);
  Status s = LoadModified([](Json& j) { j["model"]["merges"].push_back("nosuch token"); });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  s = LoadModified([](Json& j) { j["model"]["merges"].push_back("a b c"); });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  s = LoadModified([](Json& j) { j["model"]["vocab"].erase("h"); });
  EXPECT_FALSE(s.ok());
  s = LoadModified([](Json& j) { j["model"]["vocab"]["x"] = "seven"; });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_EQ(tokenizer::Tokenizer::FromFile("/nonexistent/tokenizer.json").status().code() == StatusCode::kOk, false);
}

TEST(TokenizerLoader, SmallTokenizerEncodesByRank) {
  Result<tokenizer::Tokenizer> t = tokenizer::Tokenizer::FromJson(SmallJson().dump());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  // "hello": h e l l o -> he l l o -> he ll o -> hell o (merge ranks 0, 1, 2).
  EXPECT_EQ(t->EncodeText("hello"), (std::vector<int32_t>{258, 'o'}));
  EXPECT_EQ(t->EncodeWithAddedTokens("hello<｜User｜>"), (std::vector<int32_t>{258, 'o', 259}));
  EXPECT_EQ(t->vocab_size(), 260u);
}

TEST(TokenizerLoader, MergesAsPairsLoadLikeStrings) {
  Json j = SmallJson();
  for (auto& m : j["model"]["merges"]) {
    std::string s = m.get<std::string>();
    size_t space = s.find(' ');
    m = Json::array({s.substr(0, space), s.substr(space + 1)});
  }
  Result<tokenizer::Tokenizer> pairs = tokenizer::Tokenizer::FromJson(j.dump());
  ASSERT_TRUE(pairs.ok()) << pairs.status().ToString();
  EXPECT_EQ(pairs->EncodeText("hello hell"), (std::vector<int32_t>{258, 'o', ' ', 258}));
}

TEST(TokenizerLoader, DeepSeekV3LoadsWithItsCounts) {
  Result<tokenizer::Tokenizer> t = tokenizer::LoadTokenizer("deepseek-v3");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->vocab_size(), 128815u);
  EXPECT_EQ(t->model().merges().size(), 127741u);
  EXPECT_EQ(t->model().added_tokens().size(), 818u);
}

}  // namespace
}  // namespace deepinfer
