// Which grammar a request with tools gets from ApplyStructuredOutput (pipeline/structured_output.h), read back
// as byte strings the compiled grammar accepts or refuses, written out by hand in deepseek-recipe's V4
// layout (grammar/tool_calls.h; `｜DSML｜` is the vocabulary index's marker bytes M):
//  - a forced call (a named tool, "required", Anthropic "any") is constrained to the listed tools even when
//    they are not strict (their schema as written, best effort), and a response format beside it has no say;
//  - strict tools beside a response format: the formatted answer or calls, nothing else;
//  - Responses function tools without `strict` are strict where their schema can be, Chat's are not;
//  - a strict Chat tool's call keeps the length and count bounds the oracle's rewrite drops from the prompt.
#include <gtest/gtest.h>

#include <optional>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "grammar/compiler.h"
#include "grammar/constraint.h"
#include "grammar/token_index.h"
#include "pipeline/prepare.h"
#include "pipeline/structured_output.h"
#include "recipe/render.h"
#include "recipe/request.h"
#include "sampling/constraint_masks.h"
#include "tokenizer/locate.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::pipeline {
namespace {

using Json = nlohmann::ordered_json;

const std::string M = grammar::TokenIndex::MarkerBytes(0);
const std::string kOpen = "\n\n<" + M + "tool_calls>\n";
const std::string kEnd = "\n</" + M + "tool_calls>";

std::string Param(const std::string& name, bool raw, const std::string& value) {
  return "<" + M + "parameter name=\"" + name + "\" string=\"" + (raw ? "true" : "false") + "\">" + value + "</" + M +
         "parameter>\n";
}

std::string Invoke(const std::string& name, const std::vector<std::string>& params) {
  std::string s = "<" + M + "invoke name=\"" + name + "\">\n";
  for (const std::string& p : params) s += p;
  return s + "</" + M + "invoke>";
}

const Json kLookupSchema = Json::parse(R"({"type":"object","properties":{"q":{"type":"string"}},"required":["q"]})");
const Json kAnswerSchema =
    Json::parse(R"({"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"],"additionalProperties":false})");

Json ChatTool(const std::string& name, const Json& schema, std::optional<bool> strict) {
  Json f = {{"name", name}, {"parameters", schema}};
  if (strict) f["strict"] = *strict;
  return {{"type", "function"}, {"function", f}};
}

Json ResponsesTool(const std::string& name, const Json& schema, std::optional<bool> strict) {
  Json t = {{"type", "function"}, {"name", name}, {"parameters", schema}};
  if (strict) t["strict"] = *strict;
  return t;
}

Json ChatBody(const Json& tools, const Json& tool_choice) {
  return {{"model", "m"},
          {"messages", Json::array({{{"role", "user"}, {"content", "look it up"}}})},
          {"tools", tools},
          {"tool_choice", tool_choice},
          {"thinking", {{"type", "disabled"}}}};
}

Json ResponsesBody(const Json& tools, const Json& tool_choice) {
  return {{"model", "m"}, {"input", "look it up"}, {"tools", tools}, {"tool_choice", tool_choice},
          {"reasoning", {{"effort", "none"}}}};
}

Json ChatFormat() {
  return {{"type", "json_schema"}, {"json_schema", {{"name", "a"}, {"schema", kAnswerSchema}, {"strict", true}}}};
}

Json ResponsesFormat() {
  return {{"format", {{"type", "json_schema"}, {"name", "a"}, {"schema", kAnswerSchema}, {"strict", true}}}};
}

class ForcedTools : public ::testing::Test {
 protected:
  // One tokenizer and vocabulary index for the suite (indexing the vocabulary is most of a test's time).
  static void SetUpTestSuite() {
    auto t = tokenizer::LoadTokenizer("deepseek-v4");
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    tok_ = new tokenizer::Tokenizer(std::move(*t));
    compiler_ = new std::shared_ptr<sampling::ConstraintCompiler>(std::make_shared<sampling::ConstraintCompiler>(tok_));
  }
  static void TearDownTestSuite() {
    delete compiler_;
    delete tok_;
  }

  void SetUp() override {
    options_.tokenizer = tok_;
    options_.model_version = recipe::ModelVersion::kV4;
    options_.constraint_compiler = *compiler_;
  }

  // The grammar spec the request gets (nullopt: none); the request must be accepted.
  std::optional<grammar::ConstraintSpec> Constraint(recipe::Protocol protocol, const Json& body) {
    recipe::RequestOptions ro;
    ro.model_version = recipe::ModelVersion::kV4;
    recipe::ParseOutcome parsed = recipe::ParseRequest(protocol, body.dump(), ro);
    EXPECT_TRUE(parsed.ok()) << parsed.error.message;
    if (!parsed.ok()) return std::nullopt;
    engine::RequestParams params;
    auto error = ApplyStructuredOutput(body.dump(), *parsed.request, options_, &params);
    EXPECT_FALSE(error) << error->message;
    return params.constraint.grammar;
  }

  // The compiled tool-call grammar of the request (the test fails when it has none).
  std::optional<grammar::CompiledGrammar> ToolGrammar(recipe::Protocol protocol, const Json& body) {
    auto spec = Constraint(protocol, body);
    EXPECT_TRUE(spec) << body.dump();
    if (!spec) return std::nullopt;
    EXPECT_EQ(spec->kind, grammar::ConstraintSpec::Kind::kToolCalls);
    auto g = grammar::BuildGrammar(*spec);
    EXPECT_TRUE(g.ok()) << g.status().ToString();
    if (!g.ok()) return std::nullopt;
    auto cg = grammar::Compile(*g);
    EXPECT_TRUE(cg.ok()) << cg.status().ToString();
    if (!cg.ok()) return std::nullopt;
    return std::move(*cg);
  }

  static inline tokenizer::Tokenizer* tok_ = nullptr;
  static inline std::shared_ptr<sampling::ConstraintCompiler>* compiler_ = nullptr;
  PrepareOptions options_;
};

// A named non-strict tool with a response format (Chat) or text.format (Responses): the prompt opened the
// block, so the output is the call, never the format's JSON.
TEST_F(ForcedTools, NamedNonStrictToolBesideAFormatIsTheCall) {
  Json chat = ChatBody(Json::array({ChatTool("lookup", kLookupSchema, std::nullopt)}),
                       {{"type", "function"}, {"function", {{"name", "lookup"}}}});
  chat["response_format"] = ChatFormat();
  Json responses = ResponsesBody(Json::array({ResponsesTool("lookup", kLookupSchema, false)}),
                                 {{"type", "function"}, {"name", "lookup"}});
  responses["text"] = ResponsesFormat();
  for (const auto& [protocol, body] : {std::pair{recipe::Protocol::kChatCompletions, chat},
                                       std::pair{recipe::Protocol::kResponses, responses}}) {
    auto cg = ToolGrammar(protocol, body);
    ASSERT_TRUE(cg);
    EXPECT_TRUE(cg->Matches(Invoke("lookup", {Param("q", true, "weather in Oslo")}) + kEnd));
    // Not strict: its schema as written, best effort (only its properties, the required ones present).
    EXPECT_FALSE(cg->Matches(Invoke("lookup", {Param("limit", false, "[1]"), Param("q", true, "")}) + kEnd));
    EXPECT_FALSE(cg->Matches(Invoke("lookup", {}) + kEnd));
    EXPECT_FALSE(cg->Matches(R"({"answer":"x"})"));
    EXPECT_FALSE(cg->Matches(Invoke("search", {}) + kEnd));
    EXPECT_FALSE(cg->Matches(""));
  }
}

// tool_choice "required" with non-strict tools: calls of the listed tools only; Anthropic "any" (whose prompt
// is rendered as "auto") starts the output with the block. "auto" with non-strict Chat tools: no grammar.
TEST_F(ForcedTools, RequiredNonStrictToolsAreConstrainedToTheList) {
  const Json tools = Json::array({ChatTool("lookup", kLookupSchema, std::nullopt),
                                  ChatTool("ping", {{"type", "object"}}, std::nullopt)});
  auto cg = ToolGrammar(recipe::Protocol::kChatCompletions, ChatBody(tools, "required"));
  ASSERT_TRUE(cg);
  EXPECT_TRUE(cg->Matches(Invoke("lookup", {Param("q", true, "x")}) + "\n" + Invoke("ping", {}) + kEnd));
  // A schema without properties constrains nothing but the call: any parameters, raw or JSON.
  EXPECT_TRUE(cg->Matches(Invoke("ping", {Param("n", false, "[1, {\"a\": null}]"), Param("note", true, "hi")}) + kEnd));
  EXPECT_FALSE(cg->Matches(Invoke("ping", {Param("two words", true, "x")}) + kEnd));
  EXPECT_FALSE(cg->Matches(Invoke("rm", {}) + kEnd));
  EXPECT_FALSE(cg->Matches("I would rather not."));
  EXPECT_FALSE(Constraint(recipe::Protocol::kChatCompletions, ChatBody(tools, "auto")));
  // A schema the grammar cannot take (a look-behind) is no error for a tool not marked strict: any arguments.
  const Json odd = Json::parse(R"({"type":"object","properties":{"p":{"type":"string","pattern":"(?<=a)b"}}})");
  auto best_effort = ToolGrammar(recipe::Protocol::kChatCompletions,
                                 ChatBody(Json::array({ChatTool("odd", odd, std::nullopt)}), "required"));
  ASSERT_TRUE(best_effort);
  EXPECT_TRUE(best_effort->Matches(Invoke("odd", {Param("p", true, "zzz"), Param("q", false, "1")}) + kEnd));

  const Json messages = {{"model", "m"},
                         {"max_tokens", 50},
                         {"messages", Json::array({{{"role", "user"}, {"content", "hi"}}})},
                         {"tools", Json::array({{{"name", "lookup"}, {"input_schema", kLookupSchema}}})},
                         {"tool_choice", {{"type", "any"}}}};
  auto any = ToolGrammar(recipe::Protocol::kMessages, messages);
  ASSERT_TRUE(any);
  EXPECT_TRUE(any->Matches(kOpen + Invoke("lookup", {Param("q", true, "x")}) + kEnd));
  EXPECT_FALSE(any->Matches("Sure." + kOpen + Invoke("lookup", {}) + kEnd));
  EXPECT_FALSE(any->Matches("Sure."));
}

// Strict tools beside a response format (deepseek-recipe refuses the pair, OpenAI takes it): the output is
// the format's JSON, or calls under the tools' schemas, with no text before them.
TEST_F(ForcedTools, StrictToolsBesideAFormatAnswerOrCall) {
  Json chat = ChatBody(Json::array({ChatTool("lookup", kLookupSchema, true)}), "auto");
  chat["response_format"] = ChatFormat();
  Json responses = ResponsesBody(Json::array({ResponsesTool("lookup", kLookupSchema, true)}), "auto");
  responses["text"] = ResponsesFormat();
  for (const auto& [protocol, body] : {std::pair{recipe::Protocol::kChatCompletions, chat},
                                       std::pair{recipe::Protocol::kResponses, responses}}) {
    auto cg = ToolGrammar(protocol, body);
    ASSERT_TRUE(cg);
    EXPECT_TRUE(cg->Matches(R"({"answer":"sunny"})"));
    EXPECT_TRUE(cg->Matches(kOpen + Invoke("lookup", {Param("q", true, "x")}) + kEnd));
    EXPECT_FALSE(cg->Matches(R"({"answer":1})"));
    EXPECT_FALSE(cg->Matches(R"({"answer":"sunny","extra":1})"));
    EXPECT_FALSE(cg->Matches(kOpen + Invoke("lookup", {}) + kEnd));  // q is required by the strict schema
    EXPECT_FALSE(cg->Matches("It is sunny."));
    EXPECT_FALSE(cg->Matches(R"({"answer":"sunny"})" + kOpen + Invoke("lookup", {Param("q", true, "x")}) + kEnd));
  }
  // Anthropic's output_config.format beside strict tools: the same choice.
  const Json messages = {{"model", "m"},
                         {"max_tokens", 50},
                         {"messages", Json::array({{{"role", "user"}, {"content", "hi"}}})},
                         {"tools", Json::array({{{"name", "lookup"}, {"strict", true}, {"input_schema", kLookupSchema}}})},
                         {"output_config", {{"format", {{"type", "json_schema"}, {"schema", kAnswerSchema}}}}},
                         {"thinking", {{"type", "disabled"}}}};
  auto cg = ToolGrammar(recipe::Protocol::kMessages, messages);
  ASSERT_TRUE(cg);
  EXPECT_TRUE(cg->Matches(R"({"answer":"sunny"})"));
  EXPECT_TRUE(cg->Matches(kOpen + Invoke("lookup", {Param("q", true, "x")}) + kEnd));
  EXPECT_FALSE(cg->Matches("It is sunny."));
}

// OpenAI's Responses default: a function tool without `strict` is strict when its schema can be made
// strict (every property required, no others); `strict: false` opts out; a schema the strict rewrite cannot
// read (an untyped property) stays best-effort. The prompt is the oracle's, which reads the tool as non-strict.
TEST_F(ForcedTools, ResponsesToolsAreStrictByDefault) {
  const Json schema = Json::parse(R"({"type":"object","properties":{"city":{"type":"string","enum":["Oslo","Rome"]},
    "days":{"type":"integer"}}})");
  auto cg = ToolGrammar(recipe::Protocol::kResponses,
                        ResponsesBody(Json::array({ResponsesTool("weather", schema, std::nullopt)}), "auto"));
  ASSERT_TRUE(cg);
  const std::string oslo = Param("city", true, "Oslo"), days = Param("days", false, "3");
  EXPECT_TRUE(cg->Matches("Let me check." + kOpen + Invoke("weather", {oslo, days}) + kEnd));
  EXPECT_TRUE(cg->Matches("No call."));
  EXPECT_FALSE(cg->Matches(kOpen + Invoke("weather", {Param("city", true, "Paris"), days}) + kEnd));
  EXPECT_FALSE(cg->Matches(kOpen + Invoke("weather", {oslo}) + kEnd));  // every property is required
  // So with a `required` list naming only some (OpenAI's normalization makes all of them required).
  Json partial = schema;
  partial["required"] = Json::array({"city"});
  auto normalized = ToolGrammar(recipe::Protocol::kResponses,
                                ResponsesBody(Json::array({ResponsesTool("weather", partial, std::nullopt)}), "auto"));
  ASSERT_TRUE(normalized);
  EXPECT_TRUE(normalized->Matches(kOpen + Invoke("weather", {oslo, days}) + kEnd));
  EXPECT_FALSE(normalized->Matches(kOpen + Invoke("weather", {oslo}) + kEnd));

  EXPECT_FALSE(Constraint(recipe::Protocol::kResponses,
                          ResponsesBody(Json::array({ResponsesTool("weather", schema, false)}), "auto")));
  const Json untyped = Json::parse(R"({"type":"object","properties":{"anything":{}}})");
  EXPECT_FALSE(Constraint(recipe::Protocol::kResponses,
                          ResponsesBody(Json::array({ResponsesTool("weather", untyped, std::nullopt)}), "auto")));
  // Chat keeps the non-strict default.
  EXPECT_FALSE(Constraint(recipe::Protocol::kChatCompletions,
                          ChatBody(Json::array({ChatTool("weather", schema, std::nullopt)}), "auto")));

  recipe::ParseOutcome implicit = recipe::ParseResponsesRequest(
      ResponsesBody(Json::array({ResponsesTool("weather", schema, std::nullopt)}), "auto").dump());
  recipe::ParseOutcome loose =
      recipe::ParseResponsesRequest(ResponsesBody(Json::array({ResponsesTool("weather", schema, false)}), "auto").dump());
  ASSERT_TRUE(implicit.ok() && loose.ok());
  auto a = recipe::RenderPrompt(implicit.request->conversation, recipe::ModelVersion::kV4);
  auto b = recipe::RenderPrompt(loose.request->conversation, recipe::ModelVersion::kV4);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->text, b->text);
}

// A strict Chat tool: the prompt shows the oracle's rewrite (no length or count bounds), the grammar holds
// the call to the bounds the client sent.
TEST_F(ForcedTools, StrictToolCallsKeepLengthAndCountBounds) {
  const Json schema = Json::parse(R"({"type":"object","properties":{
    "tags":{"type":"array","items":{"type":"string","maxLength":3},"minItems":1,"maxItems":2}},
    "required":["tags"],"additionalProperties":false})");
  const Json body = ChatBody(Json::array({ChatTool("tag", schema, true)}), "required");
  auto cg = ToolGrammar(recipe::Protocol::kChatCompletions, body);
  ASSERT_TRUE(cg);
  auto call = [](const std::string& tags) { return Invoke("tag", {Param("tags", false, tags)}) + kEnd; };
  EXPECT_TRUE(cg->Matches(call(R"(["a", "bcd"])")));
  EXPECT_FALSE(cg->Matches(call("[]")));
  EXPECT_FALSE(cg->Matches(call(R"(["a", "b", "c"])")));
  EXPECT_FALSE(cg->Matches(call(R"(["abcd"])")));
  recipe::ParseOutcome parsed = recipe::ParseChatCompletionsRequest(body.dump());
  ASSERT_TRUE(parsed.ok());
  auto prompt = recipe::RenderPrompt(parsed.request->conversation, recipe::ModelVersion::kV4);
  ASSERT_TRUE(prompt.ok());
  EXPECT_EQ(prompt->text.find("maxItems"), std::string::npos);
  EXPECT_EQ(prompt->text.find("maxLength"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer::pipeline
