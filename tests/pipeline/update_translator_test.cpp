// Engine updates scripted by hand through the translators: the events and bodies equal what the codec
// gives for the same tokens fed directly (the chat protocols) or the legacy Completions objects, and the
// SSE framing is the bytes clients parse.
#include "pipeline/update_translator.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "pipeline/sse.h"
#include "recipe/completion_options.h"

namespace deepinfer::pipeline {
namespace {

recipe::ParsedRequest Parse(recipe::Protocol protocol, const std::string& body, int64_t max_n = 1) {
  recipe::RequestOptions options;
  options.max_n = max_n;
  recipe::ParseOutcome parsed = recipe::ParseRequest(protocol, body, options);
  EXPECT_TRUE(parsed.ok()) << parsed.error.message;
  return std::move(*parsed.request);
}

engine::GeneratedToken Token(int32_t id, std::string bytes, bool control = false) {
  engine::GeneratedToken t;
  t.id = id;
  t.bytes = std::move(bytes);
  t.control = control;
  return t;
}

engine::RequestUpdate Update(std::vector<engine::SequenceDelta> deltas, bool finished) {
  engine::RequestUpdate u;
  u.id = 1;
  u.prompt_tokens = 5;
  u.prompt_cache_hit_tokens = 2;
  u.sequences = std::move(deltas);
  u.finished = finished;
  return u;
}

engine::SequenceDelta Delta(int index, std::vector<engine::GeneratedToken> tokens,
                            std::optional<engine::FinishReason> finish = std::nullopt) {
  engine::SequenceDelta d;
  d.index = index;
  for (const auto& t : tokens) d.text += t.bytes;
  d.tokens = std::move(tokens);
  d.finish = finish;
  return d;
}

ResponseContext Context(std::string id) {
  ResponseContext c;
  c.id = std::move(id);
  c.model = "served";
  c.created = 7;
  return c;
}

// The codec fed the same tokens directly, as one completion.
recipe::StreamRunResult Direct(recipe::Protocol protocol, const recipe::ParsedRequest& request,
                               const std::vector<std::vector<engine::GeneratedToken>>& steps,
                               std::optional<recipe::BackendFinish> finish) {
  recipe::ResponseOptions options = recipe::ResponseOptionsFor(request);
  options.id = "id-1";
  options.model = "served";
  options.created = 7;
  options.emit_logprobs = false;
  std::vector<recipe::CompletionChunk> chunks;
  for (const auto& step : steps) {
    recipe::CompletionChunk chunk;
    chunk.token_count = 0;
    for (const auto& t : step) {
      ++chunk.token_count;
      recipe::TokenLogprob entry;
      entry.token = t.bytes;
      entry.control = t.control;
      chunk.logprobs.push_back(entry);
    }
    chunks.push_back(chunk);
  }
  recipe::UsageCounts usage;
  usage.prompt_tokens = 5;
  usage.prompt_cache_hit_tokens = 2;
  return recipe::RunCompletion(protocol, recipe::OutputParserOptionsFor(request, recipe::ModelVersion::kV4), options,
                               chunks, finish, usage);
}

std::vector<recipe::StreamEvent> Flatten(const std::vector<std::vector<recipe::StreamEvent>>& steps) {
  std::vector<recipe::StreamEvent> out;
  for (const auto& step : steps) out.insert(out.end(), step.begin(), step.end());
  return out;
}

struct ProtocolCase {
  recipe::Protocol protocol;
  std::string body;
};

class PipelineChatTranslatorTest : public ::testing::TestWithParam<ProtocolCase> {};

TEST_P(PipelineChatTranslatorTest, EventsAndBodyAreTheCodecsForTheSameTokens) {
  const ProtocolCase& c = GetParam();
  const recipe::ParsedRequest request = Parse(c.protocol, c.body);
  const std::vector<std::vector<engine::GeneratedToken>> steps = {{Token(10, "Hel"), Token(11, "lo")},
                                                                   {Token(12, " wor"), Token(13, "ld")}};
  auto translator = NewChatTranslator(c.protocol, request, Context("id-1"));
  EXPECT_TRUE(translator->stream());
  std::vector<recipe::StreamEvent> events;
  for (size_t i = 0; i < steps.size(); ++i) {
    const bool last = i + 1 == steps.size();
    TranslatedUpdate t = translator->Translate(
        Update({Delta(0, steps[i], last ? std::optional(engine::FinishReason::kLength) : std::nullopt)}, last));
    EXPECT_FALSE(t.stop_engine);
    events.insert(events.end(), t.events.begin(), t.events.end());
  }
  const recipe::StreamRunResult direct = Direct(c.protocol, request, steps, recipe::BackendFinish::kLength);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events, Flatten(direct.events_per_step));
  EXPECT_EQ(translator->Body(), direct.response);
  EXPECT_TRUE(translator->failure().ok());
  const std::vector<recipe::StreamEvent> end = translator->StreamEnd();
  if (c.protocol == recipe::Protocol::kChatCompletions) {
    EXPECT_EQ(FormatSse(end), "data: [DONE]\n\n");
  } else {
    EXPECT_TRUE(end.empty());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Protocols, PipelineChatTranslatorTest,
    ::testing::Values(
        ProtocolCase{recipe::Protocol::kChatCompletions,
                     R"({"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"disabled"}})"},
        ProtocolCase{recipe::Protocol::kResponses,
                     R"({"model":"m","stream":true,"input":"hi"})"},
        ProtocolCase{recipe::Protocol::kMessages,
                     R"({"model":"m","stream":true,"max_tokens":9,"messages":[{"role":"user","content":"hi"}]})"}));

TEST(PipelineChatTranslator, AStopSequenceEndsTheOutputAndStopsTheEngine) {
  const recipe::ParsedRequest request = Parse(
      recipe::Protocol::kChatCompletions,
      R"({"model":"m","stop":["wor"],"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"disabled"}})");
  auto translator = NewChatTranslator(recipe::Protocol::kChatCompletions, request, Context("id-1"));
  EXPECT_FALSE(translator->stream());
  EXPECT_FALSE(translator->Translate(Update({Delta(0, {Token(10, "Hello")})}, false)).stop_engine);
  EXPECT_TRUE(translator->Translate(Update({Delta(0, {Token(12, " world")})}, false)).stop_engine);
  // The engine's final update after its abort adds nothing.
  EXPECT_TRUE(translator->Translate(Update({Delta(0, {}, engine::FinishReason::kAbort)}, true)).events.empty());
  const nlohmann::json body = nlohmann::json::parse(translator->Body());
  EXPECT_EQ(body["choices"][0]["message"]["content"], "Hello ");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(body["model"], "served");
  EXPECT_EQ(body["id"], "id-1");
}

TEST(PipelineChatTranslator, SeveralOutputsMergeIntoOneBody) {
  const recipe::ParsedRequest request =
      Parse(recipe::Protocol::kChatCompletions,
            R"({"model":"m","n":2,"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"disabled"}})", 2);
  auto translator = NewChatTranslator(recipe::Protocol::kChatCompletions, request, Context("id-1"));
  translator->Translate(Update({Delta(1, {Token(10, "b"), Token(11, "b")}), Delta(0, {Token(12, "a")})}, false));
  translator->Translate(Update(
      {Delta(0, {}, engine::FinishReason::kStop), Delta(1, {Token(13, "c")}, engine::FinishReason::kLength)}, true));
  const nlohmann::json body = nlohmann::json::parse(translator->Body());
  ASSERT_EQ(body["choices"].size(), 2u);
  // In output order, whichever output the engine reported first.
  EXPECT_EQ(body["choices"][0]["index"], 0);
  EXPECT_EQ(body["choices"][0]["message"]["content"], "a");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(body["choices"][1]["index"], 1);
  EXPECT_EQ(body["choices"][1]["message"]["content"], "bbc");
  EXPECT_EQ(body["choices"][1]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["completion_tokens"], 4);
  EXPECT_EQ(body["usage"]["total_tokens"], 9);
}

TEST(PipelineChatTranslator, SeveralStreamedOutputsReportTheirTotalUsageOnce) {
  const recipe::ParsedRequest request =
      Parse(recipe::Protocol::kChatCompletions,
            R"({"model":"m","n":2,"stream":true,"stream_options":{"include_usage":true},)"
            R"("messages":[{"role":"user","content":"hi"}],"thinking":{"type":"disabled"}})",
            2);
  auto translator = NewChatTranslator(recipe::Protocol::kChatCompletions, request, Context("id-1"));
  std::vector<recipe::StreamEvent> events;
  for (const TranslatedUpdate& t :
       {translator->Translate(Update({Delta(1, {Token(10, "b"), Token(11, "b")}), Delta(0, {Token(12, "a")})}, false)),
        translator->Translate(Update({Delta(0, {}, engine::FinishReason::kStop)}, false)),
        translator->Translate(Update({Delta(1, {Token(13, "c")}, engine::FinishReason::kLength)}, true))}) {
    events.insert(events.end(), t.events.begin(), t.events.end());
  }
  std::vector<nlohmann::json> usages;
  for (const recipe::StreamEvent& event : events) {
    const nlohmann::json chunk = nlohmann::json::parse(event.json);
    if (chunk.contains("usage") && !chunk["usage"].is_null()) usages.push_back(chunk["usage"]);
  }
  // Output 0 generated "a", output 1 "b", "b", "c": 4 completion tokens over a 5-token prompt, reported once.
  ASSERT_EQ(usages.size(), 1u);
  EXPECT_EQ(usages[0]["prompt_tokens"], 5);
  EXPECT_EQ(usages[0]["completion_tokens"], 4);
  EXPECT_EQ(usages[0]["total_tokens"], 9);
  EXPECT_EQ(nlohmann::json::parse(events.back().json)["usage"]["completion_tokens"], 4);
}

TEST(PipelineChatTranslator, ACutInsideACharacterKeepsItsTokens) {
  const recipe::ParsedRequest request =
      Parse(recipe::Protocol::kChatCompletions,
            R"({"model":"m","logprobs":true,"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"disabled"}})");
  auto translator = NewChatTranslator(recipe::Protocol::kChatCompletions, request, Context("id-1"));
  // U+20000 is F0 A0 80 80; max_tokens ends the output after its first two bytes.
  translator->Translate(Update({Delta(0, {Token(10, "a")})}, false));
  translator->Translate(Update({Delta(0, {Token(11, "\xF0"), Token(12, "\xA0")}, engine::FinishReason::kLength)}, true));
  const nlohmann::json body = nlohmann::json::parse(translator->Body());
  EXPECT_EQ(body["choices"][0]["message"]["content"], "a\xEF\xBF\xBD");  // U+FFFD for the cut character
  EXPECT_EQ(body["usage"]["completion_tokens"], 3);
  EXPECT_EQ(body["choices"][0]["logprobs"]["content"].size(), 3u);
}

TEST(PipelineChatTranslator, ReasoningTokensAreTheGeneratedTokens) {
  const recipe::ParsedRequest request =
      Parse(recipe::Protocol::kChatCompletions, R"({"model":"m","messages":[{"role":"user","content":"hi"}]})");
  auto translator = NewChatTranslator(recipe::Protocol::kChatCompletions, request, Context("id-1"));
  // "a" + "a" re-encodes to one token "aa"; the model generated two. Then `</think>` and one content token.
  translator->Translate(Update({Delta(0, {Token(10, "a"), Token(10, "a"), Token(1, "</think>", true)})}, false));
  translator->Translate(Update({Delta(0, {Token(11, "Hi")}, engine::FinishReason::kLength)}, true));
  const nlohmann::json body = nlohmann::json::parse(translator->Body());
  EXPECT_EQ(body["choices"][0]["message"]["reasoning_content"], "aa");
  EXPECT_EQ(body["usage"]["completion_tokens"], 4);
  EXPECT_EQ(body["usage"]["completion_tokens_details"]["reasoning_tokens"], 2);
}

TEST(PipelineChatTranslator, SpecialTokensWriteNoTextUnlessAsked) {
  const recipe::ParsedRequest request =
      Parse(recipe::Protocol::kChatCompletions, R"({"model":"m","messages":[{"role":"user","content":"hi"}]})");
  const std::string placeholder = "<\xEF\xBD\x9Cplace\xE2\x96\x81holder\xE2\x96\x81no\xE2\x96\x81" "433\xEF\xBD\x9C>";
  for (bool skip : {true, false}) {
    ResponseContext context = Context("id-1");
    context.skip_special_tokens = skip;
    auto translator = NewChatTranslator(recipe::Protocol::kChatCompletions, request, context);
    engine::GeneratedToken special = Token(128433, placeholder, true);
    special.special = true;
    // `</think>` is an added token but not a special one: the parser needs it whatever the request says.
    translator->Translate(Update({Delta(0, {Token(10, "ab"), special, Token(1, "</think>", true)})}, false));
    translator->Translate(Update({Delta(0, {special, Token(11, "Hi")}, engine::FinishReason::kLength)}, true));
    const nlohmann::json body = nlohmann::json::parse(translator->Body());
    const nlohmann::json& message = body["choices"][0]["message"];
    EXPECT_EQ(message["reasoning_content"], skip ? "ab" : "ab" + placeholder) << skip;
    EXPECT_EQ(message["content"], skip ? "Hi" : placeholder + "Hi") << skip;
    EXPECT_EQ(body["usage"]["completion_tokens"], 5) << skip;  // skipped or not, every token counts
  }
}

TEST(PipelineChatTranslator, AnEngineErrorIsTheFailure) {
  const recipe::ParsedRequest request = Parse(
      recipe::Protocol::kMessages, R"({"model":"m","max_tokens":9,"messages":[{"role":"user","content":"hi"}]})");
  auto translator = NewChatTranslator(recipe::Protocol::kMessages, request, Context("id-1"));
  engine::RequestUpdate update = Update({Delta(0, {Token(10, "x")}, engine::FinishReason::kError)}, true);
  update.status = Status::Internal("mask failed");
  translator->Translate(update);
  EXPECT_EQ(translator->failure().message(), "mask failed");
}

TEST(PipelineCompletionsTranslator, StreamEventsAndBody) {
  CompletionsShape shape;
  shape.prompt_texts = {"Say:"};
  shape.echo = true;
  shape.stream = true;
  shape.include_usage = true;
  shape.logprobs = 0;
  auto translator = NewCompletionsTranslator(shape, Context("cmpl-1"));
  EXPECT_TRUE(translator->stream());
  TranslatedUpdate first = translator->Translate(Update({Delta(0, {Token(10, " hi")})}, false));
  engine::SequenceDelta last = Delta(0, {Token(11, "!")}, engine::FinishReason::kLength);
  TranslatedUpdate second = translator->Translate(Update({last}, true));
  ASSERT_EQ(first.events.size(), 1u);
  EXPECT_EQ(first.events[0].json,
            R"({"choices":[{"finish_reason":null,"index":0,"logprobs":{"text_offset":[4],"token_logprobs":[0.0],)"
            R"("tokens":[" hi"],"top_logprobs":[{}]},"text":"Say: hi"}],"created":7,"id":"cmpl-1","model":"served",)"
            R"("object":"text_completion","usage":null})");
  ASSERT_EQ(second.events.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(second.events[0].json)["choices"][0]["finish_reason"], "length");
  const std::vector<recipe::StreamEvent> end = translator->StreamEnd();
  ASSERT_EQ(end.size(), 2u);
  const nlohmann::json usage = nlohmann::json::parse(end[0].json);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(usage["usage"]["completion_tokens"], 2);
  EXPECT_EQ(FormatSse({&end[1], 1}), "data: [DONE]\n\n");
  const nlohmann::json body = nlohmann::json::parse(translator->Body());
  EXPECT_EQ(body["choices"][0]["text"], "Say: hi!");
  // Offsets into the returned text, after the 4 bytes of the echoed "Say:".
  EXPECT_EQ(body["choices"][0]["logprobs"]["text_offset"], nlohmann::json::array({4, 7}));
}

TEST(PipelineCompletionsTranslator, ReturnTokenIdsCarriesEachTokenWithTheFirstChunkOfItsText) {
  CompletionsShape shape;
  shape.stream = true;
  shape.return_token_ids = true;
  shape.prompt_ids = {{1, 2, 3}};
  auto translator = NewCompletionsTranslator(shape, Context("cmpl-1"));
  const auto choice = [](const TranslatedUpdate& u) { return nlohmann::json::parse(u.events.at(0).json)["choices"][0]; };
  const nlohmann::json first = choice(translator->Translate(Update({Delta(0, {Token(10, "a")})}, false)));
  EXPECT_EQ(first["prompt_token_ids"], nlohmann::json::array({1, 2, 3}));
  EXPECT_EQ(first["token_ids"], nlohmann::json::array({10}));
  // A token whose text is held back (half a character) makes no chunk: its id goes with the next one.
  engine::SequenceDelta held = Delta(0, {Token(11, "")});
  EXPECT_TRUE(translator->Translate(Update({held}, false)).events.empty());
  const nlohmann::json third =
      choice(translator->Translate(Update({Delta(0, {Token(12, "b")}, engine::FinishReason::kLength)}, true)));
  EXPECT_FALSE(third.contains("prompt_token_ids"));  // once per choice
  EXPECT_EQ(third["token_ids"], nlohmann::json::array({11, 12}));
}

TEST(PipelineCompletionsTranslator, WithoutStreamNoEventsAndTheChoicesInOrder) {
  CompletionsShape shape;
  shape.n = 2;
  auto translator = NewCompletionsTranslator(shape, Context("cmpl-1"));
  EXPECT_FALSE(translator->stream());
  EXPECT_TRUE(translator->Translate(Update({Delta(1, {Token(10, "b")}, engine::FinishReason::kStop),
                                            Delta(0, {Token(11, "a")}, engine::FinishReason::kLength)},
                                           true))
                  .events.empty());
  const nlohmann::json body = nlohmann::json::parse(translator->Body());
  EXPECT_EQ(body["choices"][0]["text"], "a");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["choices"][1]["text"], "b");
  EXPECT_EQ(body["choices"][1]["finish_reason"], "stop");
  EXPECT_TRUE(body["choices"][0]["logprobs"].is_null());
}

TEST(PipelineCompletionsTranslator, APromptListsChoicesArePromptMajorAndItsUsageAddsUp) {
  CompletionsShape shape;
  shape.prompt_texts = {"A:", "B:"};
  shape.echo = true;
  shape.n = 2;
  auto translator = NewCompletionsTranslator(shape, Context("cmpl-1"));
  // The second prompt's request (its outputs numbered 2 and 3) with a 4-token prompt, then the first's
  // with 5 (Update's), 2 of them cached.
  engine::RequestUpdate second = Update({Delta(2, {Token(10, "c")}, engine::FinishReason::kLength),
                                         Delta(3, {Token(11, "d")}, engine::FinishReason::kLength)},
                                        true);
  second.prompt_tokens = 4;
  second.prompt_cache_hit_tokens = 0;
  translator->Translate(second);
  translator->Translate(Update({Delta(0, {Token(12, "a")}, engine::FinishReason::kStop),
                                Delta(1, {Token(13, "b"), Token(14, "b")}, engine::FinishReason::kLength)},
                               true));
  const nlohmann::json body = nlohmann::json::parse(translator->Body());
  ASSERT_EQ(body["choices"].size(), 4u);
  EXPECT_EQ(body["choices"][0]["text"], "A:a");
  EXPECT_EQ(body["choices"][1]["text"], "A:bb");
  EXPECT_EQ(body["choices"][2]["text"], "B:c");
  EXPECT_EQ(body["choices"][3]["text"], "B:d");
  EXPECT_EQ(body["choices"][3]["index"], 3);
  EXPECT_EQ(body["usage"]["prompt_tokens"], 9);  // 5 + 4
  EXPECT_EQ(body["usage"]["prompt_tokens_details"]["cached_tokens"], 2);
  EXPECT_EQ(body["usage"]["completion_tokens"], 5);
  EXPECT_EQ(body["usage"]["total_tokens"], 14);
}

TEST(PipelineSse, NamedAndUnnamedEvents) {
  const std::vector<recipe::StreamEvent> events = {{"message_start", R"({"a":1})"}, {"", R"({"b":2})"}};
  EXPECT_EQ(FormatSse(events), "event: message_start\ndata: {\"a\":1}\n\ndata: {\"b\":2}\n\n");
  EXPECT_EQ(FormatSse({}), "");
}

}  // namespace
}  // namespace deepinfer::pipeline
