// A request of each API through Prepare: the prompt ids are the rendered prompt's, the engine parameters
// follow the request (the codec's fields, the fields only the pipeline reads, the defaults), and each
// refusal is the protocol's error with its status.
#include "pipeline/prepare.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "pipeline/structured_output.h"
#include "recipe/render.h"
#include "sampling/constraint_masks.h"
#include "tokenizer/locate.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::pipeline {
namespace {

// The builtin V4 tokenizer, loaded once.
const tokenizer::Tokenizer* V4Tokenizer() {
  static const Result<tokenizer::Tokenizer> loaded = tokenizer::LoadTokenizer("deepseek-v4");
  return loaded.ok() ? &*loaded : nullptr;
}

PrepareOptions Options() {
  PrepareOptions options;
  options.tokenizer = V4Tokenizer();
  options.control_ids = recipe::ControlTokenIds::FromTokenizer(*options.tokenizer);
  options.served_model_names = {"served", "alias"};
  options.max_model_len = 1000;
  return options;
}

// The ids the codec gives the request's prompt.
std::vector<int32_t> PromptIds(recipe::Protocol protocol, const std::string& body) {
  recipe::RequestOptions request_options;
  request_options.max_n = sampling::kMaxN;
  recipe::ParseOutcome parsed = recipe::ParseRequest(protocol, body, request_options);
  EXPECT_TRUE(parsed.ok());
  auto rendered = recipe::RenderPrompt(parsed.request->conversation, recipe::ModelVersion::kV4);
  EXPECT_TRUE(rendered.ok());
  auto ids = recipe::TokenizePrompt(*rendered, *V4Tokenizer());
  EXPECT_TRUE(ids.ok());
  return *ids;
}

class PipelinePrepareTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NE(V4Tokenizer(), nullptr) << "the builtin deepseek-v4 tokenizer did not load"; }
};

TEST_F(PipelinePrepareTest, ChatCompletions) {
  const std::string body =
      R"({"model":"alias","messages":[{"role":"user","content":"Hello there"}],"max_tokens":20,"temperature":0.5,)"
      R"("top_k":3,"seed":9,"n":2,"logprobs":true,"top_logprobs":2,"presence_penalty":1.5,"min_tokens":4,"stream":true,)"
      R"("thinking":{"type":"disabled"}})";
  PrepareOutcome out = Prepare(Api::kChatCompletions, body, Options());
  ASSERT_TRUE(out.ok()) << out.refusal.body;
  const PreparedRequest& r = *out.request;
  EXPECT_EQ(r.prompt, PromptIds(recipe::Protocol::kChatCompletions, body));
  EXPECT_FALSE(r.prompt.empty());
  EXPECT_EQ(r.params.sampling.max_tokens, 20);
  EXPECT_EQ(r.params.sampling.temperature, 0.5);
  EXPECT_EQ(r.params.sampling.top_k, 3);
  EXPECT_EQ(r.params.sampling.seed, 9u);
  EXPECT_EQ(r.params.sampling.n, 2);
  EXPECT_TRUE(r.params.sampling.logprobs);
  EXPECT_EQ(r.params.sampling.top_logprobs, 2);
  EXPECT_EQ(r.params.sampling.presence_penalty, 1.5);
  EXPECT_EQ(r.params.sampling.min_tokens, 4);
  EXPECT_TRUE(r.stream());
  EXPECT_EQ(r.request.model, "alias");
}

TEST_F(PipelinePrepareTest, ResponsesReadsItsSeedAndFillsTheContext) {
  const std::string body = R"({"model":"served","input":"Hi","seed":77,"kv_ttl_class":"agent"})";
  PrepareOutcome out = Prepare(Api::kResponses, body, Options());
  ASSERT_TRUE(out.ok()) << out.refusal.body;
  const PreparedRequest& r = *out.request;
  EXPECT_EQ(r.prompt, PromptIds(recipe::Protocol::kResponses, body));
  EXPECT_EQ(r.params.sampling.seed, 77u);
  EXPECT_EQ(r.params.kv_ttl_class, "agent");
  // Without max_output_tokens: the rest of the context.
  EXPECT_EQ(r.params.sampling.max_tokens, 1000 - static_cast<int64_t>(r.prompt.size()));
  EXPECT_FALSE(r.stream());
}

TEST_F(PipelinePrepareTest, MessagesWithTheCallersDefaults) {
  const std::string body = R"({"model":"served","max_tokens":12,"messages":[{"role":"user","content":"Hi"}]})";
  PrepareOptions options = Options();
  options.default_sampling.top_k = 5;
  options.default_sampling.repetition_penalty = 1.3;
  options.default_sampling.logprobs = true;
  options.default_sampling.top_logprobs = 4;
  PrepareOutcome out = Prepare(Api::kMessages, body, options);
  ASSERT_TRUE(out.ok()) << out.refusal.body;
  const PreparedRequest& r = *out.request;
  EXPECT_EQ(r.prompt, PromptIds(recipe::Protocol::kMessages, body));
  EXPECT_EQ(r.params.sampling.max_tokens, 12);
  EXPECT_EQ(r.params.sampling.top_k, 5);
  EXPECT_EQ(r.params.sampling.repetition_penalty, 1.3);
  EXPECT_TRUE(r.params.sampling.logprobs);  // the caller's default holds for a request that asks for none
  EXPECT_EQ(r.params.sampling.top_logprobs, 4);
}

TEST_F(PipelinePrepareTest, DefaultMaxTokens) {
  PrepareOptions options = Options();
  options.default_max_tokens = 64;
  PrepareOutcome out =
      Prepare(Api::kChatCompletions, R"({"model":"served","messages":[{"role":"user","content":"Hi"}]})", options);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out.request->params.sampling.max_tokens, 64);
}

TEST_F(PipelinePrepareTest, LegacyCompletions) {
  const std::string body =
      R"({"model":"served","prompt":"Once upon","max_tokens":7,"echo":true,"stream":true,)"
      R"("stream_options":{"include_usage":true},"logprobs":2,"stop":["end"],"n":3})";
  PrepareOutcome out = Prepare(Api::kCompletions, body, Options());
  ASSERT_TRUE(out.ok()) << out.refusal.body;
  const PreparedRequest& r = *out.request;
  EXPECT_EQ(r.prompt, V4Tokenizer()->EncodeText("Once upon"));
  EXPECT_EQ(r.params.sampling.max_tokens, 7);
  EXPECT_EQ(r.params.sampling.stop, std::vector<std::string>{"end"});
  EXPECT_EQ(r.params.sampling.top_logprobs, 2);
  EXPECT_EQ(r.completions.prompt_texts, std::vector<std::string>{"Once upon"});
  EXPECT_TRUE(r.completions.echo && r.completions.stream && r.completions.include_usage);
  EXPECT_EQ(r.completions.logprobs, 2);
  EXPECT_EQ(r.completions.n, 3);
  EXPECT_TRUE(r.stream());
  // Token ids as the prompt, and OpenAI's default max_tokens.
  out = Prepare(Api::kCompletions, R"({"model":"served","prompt":[5,6,7]})", Options());
  ASSERT_TRUE(out.ok()) << out.refusal.body;
  EXPECT_EQ(out.request->prompt, (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(out.request->params.sampling.max_tokens, 16);
}

TEST_F(PipelinePrepareTest, LegacyCompletionsTakeAListOfPrompts) {
  PrepareOutcome out =
      Prepare(Api::kCompletions, R"({"model":"served","prompt":["Once upon",[5,6,7],"x"],"n":2})", Options());
  ASSERT_TRUE(out.ok()) << out.refusal.body;
  const PreparedRequest& r = *out.request;
  EXPECT_EQ(r.prompt, V4Tokenizer()->EncodeText("Once upon"));
  ASSERT_EQ(r.more_prompts.size(), 2u);
  EXPECT_EQ(r.more_prompts[0], (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(r.more_prompts[1], V4Tokenizer()->EncodeText("x"));
  EXPECT_EQ(r.completions.prompt_texts.size(), 3u);
  EXPECT_EQ(r.completions.n, 2);
  // Each prompt is checked, and named by its place in the list.
  out = Prepare(Api::kCompletions, R"({"model":"served","prompt":["a",""]})", Options());
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(nlohmann::json::parse(out.refusal.body)["error"]["param"], "prompt[1]");
  out = Prepare(Api::kCompletions, R"({"model":"served","prompt":["a",[5,"b"]]})", Options());
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(nlohmann::json::parse(out.refusal.body)["error"]["param"], "prompt[1][1]");
  // At most 128 choices: 2 prompts of n = 65 are 130.
  out = Prepare(Api::kCompletions, R"({"model":"served","prompt":["a","b"],"n":65})", Options());
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(nlohmann::json::parse(out.refusal.body)["error"]["param"], "n");
}

TEST_F(PipelinePrepareTest, TheTranslatorFollowsTheApi) {
  PrepareOutcome out = Prepare(Api::kCompletions, R"({"model":"served","prompt":"x","stream":true})", Options());
  ASSERT_TRUE(out.ok());
  ResponseContext context;
  context.id = "cmpl-x";
  auto translator = out.request->TakeTranslator(context);
  EXPECT_TRUE(translator->stream());
  const std::vector<recipe::StreamEvent> end = translator->StreamEnd();
  ASSERT_EQ(end.size(), 1u);
  EXPECT_EQ(end[0].json, "[DONE]");
  out = Prepare(Api::kMessages, R"({"model":"served","max_tokens":3,"messages":[{"role":"user","content":"Hi"}]})",
                Options());
  ASSERT_TRUE(out.ok());
  translator = out.request->TakeTranslator(context);
  EXPECT_FALSE(translator->stream());
  EXPECT_TRUE(translator->StreamEnd().empty());
}

nlohmann::json BodyOf(const RequestRefusal& refusal) { return nlohmann::json::parse(refusal.body); }

TEST_F(PipelinePrepareTest, CodecErrorsInTheProtocolsShape) {
  PrepareOutcome out = Prepare(Api::kChatCompletions, R"({"model":"served","messages":[]})", Options());
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.refusal.status, 400);
  recipe::ParseOutcome parsed =
      recipe::ParseRequest(recipe::Protocol::kChatCompletions, R"({"model":"served","messages":[]})");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(out.refusal.body, recipe::ErrorBody(recipe::Protocol::kChatCompletions, parsed.error));
  out = Prepare(Api::kMessages, R"({"model":"served","messages":[{"role":"user","content":"Hi"}]})", Options());
  ASSERT_FALSE(out.ok());  // Messages requires max_tokens
  EXPECT_EQ(out.refusal.status, 400);
  EXPECT_EQ(BodyOf(out.refusal)["type"], "error");
}

// Structured output is Prepare's: the grammar is compiled (through the shared compiler, so the engine's
// compile is a hit) and set on the parameters; an invalid schema is refused as the protocol's error,
// exactly the body of its RequestError; without a compiler nothing is constrained or refused.
TEST_F(PipelinePrepareTest, StructuredOutput) {
  PrepareOptions options = Options();
  options.constraint_compiler = std::make_shared<sampling::ConstraintCompiler>(options.tokenizer);
  const std::string chat =
      R"({"model":"served","messages":[{"role":"user","content":"Hi"}],"thinking":{"type":"disabled"},)"
      R"("response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object",)"
      R"("properties":{"a":{"type":"integer"}},"required":["a"]}}}})";
  PrepareOutcome out = Prepare(Api::kChatCompletions, chat, options);
  ASSERT_TRUE(out.ok()) << out.refusal.body;
  ASSERT_TRUE(out.request->params.constraint.grammar);
  EXPECT_EQ(out.request->params.constraint.grammar->kind, grammar::ConstraintSpec::Kind::kJsonSchema);
  const size_t hits = options.constraint_compiler->hits();
  EXPECT_TRUE(options.constraint_compiler->Compile(*out.request->params.constraint.grammar).ok());
  EXPECT_EQ(options.constraint_compiler->hits(), hits + 1);

  const std::string bad_chat =
      R"({"model":"served","messages":[{"role":"user","content":"Hi"}],)"
      R"("response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"string",)"
      R"("pattern":"(?<=a)b"}}}})";
  const std::string bad_messages =
      R"({"model":"served","max_tokens":5,"messages":[{"role":"user","content":"Hi"}],)"
      R"("output_config":{"format":{"type":"json_schema","schema":{"type":"string","pattern":"(?<=a)b"}}}})";
  for (const auto& [api, body] :
       {std::pair{Api::kChatCompletions, bad_chat}, std::pair{Api::kMessages, bad_messages}}) {
    const recipe::Protocol protocol = *ChatProtocol(api);
    out = Prepare(api, body, options);
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.refusal.status, 400);
    recipe::ParseOutcome parsed = recipe::ParseRequest(protocol, body);
    ASSERT_TRUE(parsed.ok());
    engine::RequestParams params;
    std::optional<recipe::RequestError> error = ApplyStructuredOutput(body, *parsed.request, options, &params);
    ASSERT_TRUE(error);
    EXPECT_EQ(out.refusal.body, recipe::ErrorBody(protocol, *error));
  }
  EXPECT_EQ(BodyOf(out.refusal)["type"], "error");

  out = Prepare(Api::kChatCompletions, bad_chat, Options());
  ASSERT_TRUE(out.ok()) << out.refusal.body;
  EXPECT_TRUE(out.request->params.constraint.empty());
}

TEST_F(PipelinePrepareTest, UnknownModelIs404InEachFamily) {
  PrepareOutcome out =
      Prepare(Api::kChatCompletions, R"({"model":"other","messages":[{"role":"user","content":"Hi"}]})", Options());
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.refusal.status, 404);
  EXPECT_EQ(BodyOf(out.refusal)["error"]["code"], "model_not_found");
  EXPECT_EQ(BodyOf(out.refusal)["error"]["param"], "model");
  out = Prepare(Api::kMessages, R"({"model":"other","max_tokens":3,"messages":[{"role":"user","content":"Hi"}]})",
                Options());
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.refusal.status, 404);
  EXPECT_EQ(BodyOf(out.refusal)["error"]["type"], "not_found_error");
  out = Prepare(Api::kCompletions, R"({"model":"other","prompt":"x"})", Options());
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.refusal.status, 404);
  // Without served names any name goes.
  PrepareOptions any = Options();
  any.served_model_names.clear();
  EXPECT_TRUE(Prepare(Api::kCompletions, R"({"model":"other","prompt":"x"})", any).ok());
}

TEST_F(PipelinePrepareTest, ContextLength) {
  PrepareOptions options = Options();
  options.max_model_len = 30;
  const std::string long_text(400, 'x');
  PrepareOutcome out = Prepare(
      Api::kChatCompletions, R"({"model":"served","messages":[{"role":"user","content":")" + long_text + R"("}]})",
      options);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.refusal.status, 400);
  EXPECT_EQ(BodyOf(out.refusal)["error"]["param"], "messages");
  EXPECT_NE(out.refusal.message.find("maximum context length is 30 tokens"), std::string::npos);
  EXPECT_NE(out.refusal.message.find("at least"), std::string::npos);  // not encoded to the end
  out = Prepare(Api::kMessages, R"({"model":"served","max_tokens":29,"messages":[{"role":"user","content":"Hi"}]})",
                options);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.refusal.message.find("prompt is too long"), std::string::npos);
  out = Prepare(Api::kCompletions, R"({"model":"served","prompt":"Hi","max_tokens":30})", options);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(BodyOf(out.refusal)["error"]["code"], "context_length_exceeded");
}

TEST_F(PipelinePrepareTest, FieldsOnlyThePipelineReads) {
  PrepareOutcome out = Prepare(
      Api::kChatCompletions,
      R"({"model":"served","messages":[{"role":"user","content":"Hi"}],"repetition_penalty":50})", Options());
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.refusal.status, 400);
  EXPECT_EQ(BodyOf(out.refusal)["error"]["param"], "repetition_penalty");
  out = Prepare(Api::kCompletions, R"({"model":"served","prompt":"x","kv_ttl_class":"forever"})", Options());
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(BodyOf(out.refusal)["error"]["param"], "kv_ttl_class");
  out = Prepare(Api::kCompletions, R"({"model":"served","prompt":""})", Options());
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(BodyOf(out.refusal)["error"]["param"], "prompt");
  out = Prepare(Api::kCompletions, "[1]", Options());
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.refusal.status, 400);
}

TEST_F(PipelinePrepareTest, TheTestHookOnlyWhenEnabled) {
  const std::string body =
      R"({"model":"served","max_tokens":1,"messages":[{"role":"user","content":"Hi"}],"deepinfer_test_output":"a b c"})";
  PrepareOutcome out = Prepare(Api::kChatCompletions, body, Options());
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out.request->params.sampling.max_tokens, 1);
  PrepareOptions hooks = Options();
  hooks.enable_test_hooks = true;
  out = Prepare(Api::kChatCompletions, body, hooks);
  ASSERT_TRUE(out.ok());
  EXPECT_GT(out.request->params.sampling.max_tokens, 1);  // room for the whole script
}

TEST_F(PipelinePrepareTest, ChatPromptStopsEncodingPastTheBound) {
  const std::string body = R"({"model":"served","messages":[{"role":"user","content":")" + std::string(400, 'x') +
                           R"("}]})";
  ChatPromptOutcome out = PrepareChatPrompt(recipe::Protocol::kChatCompletions, body, Options(), 10);
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(out.prompt->ids.empty());
  EXPECT_EQ(out.prompt->at_least_ids, 11);
  out = PrepareChatPrompt(recipe::Protocol::kChatCompletions, body, Options());
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out.prompt->ids, PromptIds(recipe::Protocol::kChatCompletions, body));
}

}  // namespace
}  // namespace deepinfer::pipeline
