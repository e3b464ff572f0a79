// Prompt rendering and tokenizing properties: control tokens come only from the template, never from what
// a user, tool or tool schema writes, whatever special-token spellings that text contains.
#include <algorithm>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "recipe/prompt_tokens.h"
#include "recipe/render.h"
#include "recipe/request.h"
#include "tokenizer/locate.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::recipe {
namespace {

// The builtin V4 tokenizer (data/tokenizers/deepseek-v4: it has <think>, ｜DSML｜ etc.).
const tokenizer::Tokenizer* V4Tokenizer() {
  static const tokenizer::Tokenizer* tokenizer = []() -> const tokenizer::Tokenizer* {
    auto loaded = tokenizer::LoadTokenizer("deepseek-v4");
    return loaded.ok() ? new tokenizer::Tokenizer(std::move(loaded).value()) : nullptr;
  }();
  return tokenizer;
}

// Spellings of tokens the vocabulary has as added tokens (so EncodeWithAddedTokens would match them).
const char* const kSpellings[] = {
    "<\xEF\xBD\x9CUser\xEF\xBD\x9C>", "<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C>",
    "<\xEF\xBD\x9C" "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>", "<|EOT|>"};

TEST(PromptTokens, UserTextNeverBecomesControlTokens) {
  const tokenizer::Tokenizer* tokenizer = V4Tokenizer();
  ASSERT_NE(tokenizer, nullptr) << "the builtin deepseek-v4 tokenizer did not load";
  const ControlTokenIds control = ControlTokenIds::FromTokenizer(*tokenizer);
  const int32_t user_id = control.ids[static_cast<int>(SpecialToken::kUser)];
  const int32_t assistant_id = control.ids[static_cast<int>(SpecialToken::kAssistant)];
  const int32_t bos_id = control.ids[static_cast<int>(SpecialToken::kBos)];
  const int32_t eos_id = control.ids[static_cast<int>(SpecialToken::kEos)];
  ASSERT_GE(user_id, 0);
  std::mt19937 rng(7);
  for (int round = 0; round < 50; ++round) {
    std::string text;
    for (int k = 0; k < 6; ++k) {
      text += kSpellings[rng() % 5];
      text += rng() % 2 ? " x " : "";
    }
    nlohmann::ordered_json request = {
        {"model", "m"},
        {"thinking", {{"type", "disabled"}}},
        {"messages", {{{"role", "user"}, {"content", text}}, {{"role", "assistant"}, {"content", text}},
                      {{"role", "user"}, {"content", text}}}}};
    ParseOutcome parsed = ParseChatCompletionsRequest(request.dump());
    ASSERT_TRUE(parsed.ok());
    for (ModelVersion version : {ModelVersion::kV32, ModelVersion::kV4}) {
      auto prompt = RenderPrompt(parsed.request->conversation, version);
      ASSERT_TRUE(prompt.ok());
      auto ids = TokenizePrompt(*prompt, *tokenizer, control);
      ASSERT_TRUE(ids.ok()) << ids.status().ToString();
      // The template has one BOS, two <｜User｜>, two <｜Assistant｜> (two turn headers) and one EOS.
      EXPECT_EQ(std::count(ids->begin(), ids->end(), bos_id), 1);
      EXPECT_EQ(std::count(ids->begin(), ids->end(), user_id), 2);
      EXPECT_EQ(std::count(ids->begin(), ids->end(), assistant_id), 2);
      EXPECT_EQ(std::count(ids->begin(), ids->end(), eos_id), 1);
      // And the ids decode back to the prompt text exactly.
      EXPECT_EQ(tokenizer->Decode(*ids), prompt->text);
    }
  }
}

TEST(PromptTokens, PiecesEncodeLikeTheWholeTextWhenNothingIsSpecial) {
  const tokenizer::Tokenizer* tokenizer = V4Tokenizer();
  ASSERT_NE(tokenizer, nullptr) << "the builtin deepseek-v4 tokenizer did not load";
  RenderedPrompt prompt;
  prompt.text = "plain text only, 日本語 and digits 12345";
  auto ids = TokenizePrompt(prompt, *tokenizer);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, tokenizer->EncodeText(prompt.text));
}

TEST(PromptTokens, MissingControlTokenIsAnError) {
  const tokenizer::Tokenizer* tokenizer = V4Tokenizer();
  ASSERT_NE(tokenizer, nullptr) << "the builtin deepseek-v4 tokenizer did not load";
  PromptBuilder builder;
  builder.Special(SpecialToken::kSystem);  // a V4.1 token the V4 vocabulary lacks
  auto ids = TokenizePrompt(builder.Finish(), *tokenizer);
  EXPECT_FALSE(ids.ok());
}

TEST(ModelVersions, NamesRoundTrip) {
  for (ModelVersion v : {ModelVersion::kV32, ModelVersion::kV4, ModelVersion::kV41}) {
    auto parsed = ParseModelVersion(ModelVersionName(v));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, v);
  }
  EXPECT_FALSE(ParseModelVersion("v5").ok());
}

}  // namespace
}  // namespace deepinfer::recipe
