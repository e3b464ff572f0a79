// Prompt rendering and tokenizing properties: control tokens come only from the template, never from what
// a user, tool or tool schema writes, whatever special-token spellings that text contains.
#include <algorithm>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "recipe/conversation.h"
#include "recipe/prompt_tokens.h"
#include "recipe/protocol.h"
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

// A user's own text may spell the image placeholder <｜image｜>: only the request's image parts become image
// tokens, wherever the literal spellings fall (deepseek-recipe keeps content parts apart; so do we, by offset).
TEST(PromptImages, OnlyImagePartsBecomeImageTokens) {
  const std::string image(kImageToken);
  const std::string pieces[] = {"a", image, " ", "<\xEF\xBD\x9C", "image\xEF\xBD\x9C>", "\n\n"};
  std::mt19937 rng(11);
  for (int round = 0; round < 40; ++round) {
    std::vector<std::pair<bool, std::string>> parts;  // (is an image, text)
    for (int k = 0, n = 1 + static_cast<int>(rng() % 5); k < n; ++k) {
      if (rng() % 2) {
        parts.push_back({true, image});
      } else {
        std::string text = "a";
        for (int j = static_cast<int>(rng() % 4); j > 0; --j) text += pieces[rng() % 6];
        parts.push_back({false, text});
      }
    }
    // The user turn is the parts joined by "\n\n"; the images start where their parts do.
    std::string joined;
    std::vector<size_t> expected;
    for (size_t k = 0; k < parts.size(); ++k) {
      if (k) joined += "\n\n";
      if (parts[k].first) expected.push_back(joined.size());
      joined += parts[k].second;
    }
    for (Protocol protocol : {Protocol::kChatCompletions, Protocol::kResponses, Protocol::kMessages}) {
      nlohmann::ordered_json content = nlohmann::ordered_json::array();
      for (const auto& [is_image, text] : parts) {
        if (protocol == Protocol::kChatCompletions) {
          content.push_back(is_image ? nlohmann::ordered_json{{"type", "image_url"},
                                                              {"image_url", {{"url", "data:image/png;base64,AAAA"}}}}
                                     : nlohmann::ordered_json{{"type", "text"}, {"text", text}});
        } else if (protocol == Protocol::kResponses) {
          content.push_back(is_image ? nlohmann::ordered_json{{"type", "input_image"},
                                                              {"image_url", "data:image/png;base64,AAAA"}}
                                     : nlohmann::ordered_json{{"type", "input_text"}, {"text", text}});
        } else {
          content.push_back(is_image ? nlohmann::ordered_json{{"type", "image"},
                                                              {"source", {{"type", "base64"},
                                                                          {"media_type", "image/png"},
                                                                          {"data", "AAAA"}}}}
                                     : nlohmann::ordered_json{{"type", "text"}, {"text", text}});
        }
      }
      nlohmann::ordered_json message = {{"role", "user"}, {"content", content}};
      nlohmann::ordered_json request = {{"model", "m"}, {"max_tokens", 5}};
      request[protocol == Protocol::kResponses ? "input" : "messages"] = nlohmann::ordered_json::array({message});
      RequestOptions options;
      options.model_version = ModelVersion::kV41;
      ParseOutcome parsed = ParseRequest(protocol, request.dump(), options);
      ASSERT_TRUE(parsed.ok()) << parsed.error.message << " " << request.dump();
      auto prompt = RenderPrompt(parsed.request->conversation, ModelVersion::kV41);
      ASSERT_TRUE(prompt.ok());
      const size_t at = prompt->text.find(joined);
      ASSERT_NE(at, std::string::npos) << ProtocolName(protocol) << " " << request.dump();
      std::vector<size_t> got;
      for (const SpecialRange& r : prompt->special_ranges) {
        if (r.token == SpecialToken::kImage) got.push_back(r.begin - at);
      }
      EXPECT_EQ(got, expected) << ProtocolName(protocol) << " " << request.dump();
    }
  }
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
