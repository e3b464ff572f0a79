// The reference vectors of shared/spec/formats.md §9.8 (Hugging Face tokenizers output recorded there).
#include <gtest/gtest.h>

#include "test_data.h"
#include "tokenizer/locate.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer {
namespace {

using Ids = std::vector<int32_t>;

const tokenizer::Tokenizer& SpecV3() {
  static tokenizer::Tokenizer* tok = [] {
    Result<tokenizer::Tokenizer> t = tokenizer::LoadTokenizer("deepseek-v3");
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return new tokenizer::Tokenizer(std::move(*t));
  }();
  return *tok;
}

TEST(TokenizerSpecVectors, DeepSeekV3PlainText) {
  const std::vector<std::pair<std::string, Ids>> cases = {
      {"Hello! 毕老师！1 + 1 = 2 ĠÑĤÐ²ÑĬÑĢ",
       {19923, 3, 223, 5464, 5008, 1175, 19, 940, 223, 19, 438, 223, 20, 6113, 257, 76589, 131, 100, 76032, 1628,
        76589, 131, 108, 76589, 131, 98}},
      {"Hello, my dog is cute", {19923, 14, 1026, 6397, 344, 33125}},
      {"你好，世界！今天天气很好。", {30594, 303, 3427, 1175, 5237, 16652, 12210, 320}},
      {"emoji 🤗🚀👨‍👩‍👧 test",
       {18872, 7063, 112838, 248, 74287, 225, 25730, 104, 46088, 25730, 105, 46088, 25730, 103, 1950}},
      {"1234567890 3.14159 1,000,000", {6895, 18009, 25744, 18, 223, 21, 16, 9926, 3318, 223, 19, 14, 1320, 14, 1320}},
      {"def foo(x):\n    return x**2  # comment\n\n\tindent",
       {3465, 52735, 4042, 3395, 361, 1354, 1527, 666, 20, 223, 1823, 7006, 271, 200, 655, 309}},
      {"ied 4 ½ months", {1199, 223, 22, 223, 23951, 4447}},
      {"Äpfel", {38857, 33015, 317}},
      {"", {}},
      {" ", {223}},
      {"   ", {361}},
      {"\t\n", {7028}},
      {"\n\n\n", {6328}},
      {" Hello World!", {45948, 4495, 3}},
      {" this is 🦙.cpp", {566, 344, 7351, 102, 250, 16, 85525}},
      {"w048 7tuijk dsdfhu", {89, 30633, 223, 25, 19679, 10637, 47502, 5920, 13524}},
      {"нещо на Български", {4136, 2418, 355, 1857, 8211, 83377, 76004, 4313}},
      {"    Hello\n    Hello", {361, 45948, 201, 361, 45948}},
      {"\n =", {201, 438}},
      {"' era", {9, 9861}},
      {"Hello, y'all! How are you 😁 ?我想在apple工作1314151天～",
       {19923, 14, 383, 98513, 3, 1730, 477, 440, 53769, 226, 4054, 11458, 445, 42123, 1472, 9049, 19453, 19, 954,
        9596}},
      {"!!!!!!", {27656, 6909}},
      {"33333333", {11722, 11722, 1671}},
      {"Cửa Việt", {37, 70712, 67, 19239, 96272}},
  };
  for (const auto& [text, ids] : cases) {
    EXPECT_EQ(SpecV3().EncodeText(text), ids) << text;
    EXPECT_EQ(SpecV3().Decode(ids), text);
  }
}

TEST(TokenizerSpecVectors, DeepSeekV3AddedTokensOnlyWhenAsked) {
  const std::string text = "<｜begin▁of▁sentence｜>Hi<｜User｜>Q<｜Assistant｜>";
  EXPECT_EQ(SpecV3().EncodeWithAddedTokens(text), (Ids{0, 23166, 128803, 51, 128804}));
  for (int32_t id : SpecV3().EncodeText(text)) EXPECT_FALSE(SpecV3().IsAddedToken(id));
}

TEST(TokenizerSpecVectors, DeepSeekV4AddedTokens) {
  Result<tokenizer::Tokenizer> v4 = tokenizer::LoadTokenizer("deepseek-v4");
  ASSERT_TRUE(v4.ok()) << v4.status().ToString();
  EXPECT_EQ(v4->EncodeWithAddedTokens("<｜User｜>你好<｜Assistant｜><think>推理</think>答案<｜end▁of▁sentence｜>"),
            (Ids{128803, 30594, 128804, 128821, 36101, 128822, 7624, 1}));
  EXPECT_EQ(v4->TokenToId("｜DSML｜"), 128825);
  EXPECT_EQ(v4->TokenToId("<｜image｜>"), 129279);
}

}  // namespace
}  // namespace deepinfer
