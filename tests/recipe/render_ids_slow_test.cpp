// Token ids of the golden corpora: every V4 prompt encoded with the V4 tokenizer.json must give the ids
// deepseek-recipe's own encoder gave (count and FNV-1a 64 digest). Slow under sanitizers: Release only.
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "recipe/prompt_tokens.h"
#include "recipe/render.h"
#include "recipe/request.h"
#include "render_corpus.h"
#include "tokenizer/locate.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::recipe {
namespace {

constexpr Protocol kChat = Protocol::kChatCompletions;
constexpr Protocol kAnthropic = Protocol::kMessages;
constexpr Protocol kResponses = Protocol::kResponses;

// Token ids need the V4 tokenizer (the builtin one, data/tokenizers/deepseek-v4).
void CheckTokenIds(Protocol protocol, const std::string& corpus_name) {
  auto tokenizer = tokenizer::LoadTokenizer("deepseek-v4");
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  const ControlTokenIds control = ControlTokenIds::FromTokenizer(*tokenizer);
  int compared = 0;
  const std::vector<Json> corpus = LoadCorpus(corpus_name);
  for (size_t i = 0; i < corpus.size(); ++i) {
    const Json& line = corpus[i];
    if (!line.contains("v4_ids") || DeviationOf(line)) continue;
    RequestOptions options;
    options.model_version = ModelVersion::kV4;
    ParseOutcome parsed = ParseRequest(protocol, RequestBody(line), options);
    ASSERT_TRUE(parsed.ok()) << "request #" << i;
    auto prompt = RenderPrompt(parsed.request->conversation, ModelVersion::kV4);
    ASSERT_TRUE(prompt.ok());
    auto ids = TokenizePrompt(*prompt, *tokenizer, control);
    ASSERT_TRUE(ids.ok()) << ids.status().ToString();
    EXPECT_EQ(static_cast<int64_t>(ids->size()), line["v4_ids"][0].get<int64_t>()) << "request #" << i;
    EXPECT_EQ(Fnv1a64Hex(*ids), line["v4_ids"][1].get<std::string>()) << "request #" << i;
    ++compared;
  }
  EXPECT_GT(compared, 140);
}

TEST(RenderGolden, ChatV4TokenIds) { CheckTokenIds(kChat, "chat.jsonl"); }
TEST(RenderGolden, AnthropicV4TokenIds) { CheckTokenIds(kAnthropic, "anthropic.jsonl"); }
TEST(RenderGolden, ResponsesV4TokenIds) { CheckTokenIds(kResponses, "responses.jsonl"); }
TEST(RenderGolden, ChatEdgeV4TokenIds) { CheckTokenIds(kChat, "chat_edge.jsonl"); }
TEST(RenderGolden, ResponsesHistoryV4TokenIds) { CheckTokenIds(kResponses, "responses_history.jsonl"); }
TEST(RenderGolden, MessagesEdgeV4TokenIds) { CheckTokenIds(kAnthropic, "messages_edge.jsonl"); }

}  // namespace
}  // namespace deepinfer::recipe
