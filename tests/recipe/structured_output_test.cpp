// The structured-output constraint read from each protocol's request: where it comes from, its kind and
// text, strictness, the field errors name, and two constraints in one request refused.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "recipe/structured_output.h"

namespace deepinfer::recipe {
namespace {

using Kind = StructuredOutput::Kind;
using Json = nlohmann::ordered_json;

struct Read {
  bool parsed = false;
  std::optional<RequestError> error;
  StructuredOutput out;
};

Read ReadFrom(Protocol protocol, const Json& body) {
  Read r;
  const std::string text = body.dump();
  ParseOutcome parsed = ParseRequest(protocol, text);
  if (!parsed.ok()) return r;
  r.parsed = true;
  r.error = ReadStructuredOutput(text, *parsed.request, &r.out);
  return r;
}

const Json kSchema = {{"type", "object"},
                      {"properties", {{"a", {{"type", "integer"}}}}},
                      {"required", {"a"}},
                      {"additionalProperties", false}};

Json Chat(Json extra) {
  Json body = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "answer in json"}}}}};
  for (auto& [k, v] : extra.items()) body[k] = v;
  return body;
}

TEST(StructuredOutput, NoneWhenTheRequestHasNone) {
  Read r = ReadFrom(Protocol::kChatCompletions, Chat(Json::object()));
  ASSERT_TRUE(r.parsed);
  EXPECT_FALSE(r.error);
  EXPECT_EQ(r.out.kind, Kind::kNone);
}

TEST(StructuredOutput, ChatResponseFormat) {
  Read r = ReadFrom(Protocol::kChatCompletions,
                    Chat({{"response_format", {{"type", "json_schema"},
                                               {"json_schema", {{"name", "x"}, {"schema", kSchema}, {"strict", true}}}}}}));
  ASSERT_TRUE(r.parsed);
  ASSERT_FALSE(r.error) << r.error->message;
  EXPECT_EQ(r.out.kind, Kind::kJsonSchema);
  EXPECT_TRUE(r.out.strict);
  EXPECT_EQ(r.out.param, "response_format.json_schema.schema");
  EXPECT_EQ(Json::parse(r.out.text)["properties"]["a"]["type"], "integer");

  r = ReadFrom(Protocol::kChatCompletions, Chat({{"response_format", {{"type", "json_object"}}}}));
  ASSERT_TRUE(r.parsed);
  EXPECT_EQ(r.out.kind, Kind::kJsonObject);
  r = ReadFrom(Protocol::kChatCompletions, Chat({{"response_format", {{"type", "text"}}}}));
  EXPECT_EQ(r.out.kind, Kind::kNone);
}

TEST(StructuredOutput, ResponsesTextFormat) {
  Json body = {{"model", "m"},
               {"input", "hi"},
               {"text", {{"format", {{"type", "json_schema"}, {"name", "x"}, {"schema", kSchema}, {"strict", false}}}}}};
  Read r = ReadFrom(Protocol::kResponses, body);
  ASSERT_TRUE(r.parsed);
  ASSERT_FALSE(r.error);
  EXPECT_EQ(r.out.kind, Kind::kJsonSchema);
  EXPECT_FALSE(r.out.strict);
  EXPECT_EQ(r.out.param, "text.format.schema");
}

TEST(StructuredOutput, MessagesOutputConfigFormat) {
  Json body = {{"model", "m"},
               {"max_tokens", 10},
               {"messages", {{{"role", "user"}, {"content", "hi"}}}},
               {"output_config", {{"format", {{"type", "json_schema"}, {"schema", kSchema}}}}}};
  Read r = ReadFrom(Protocol::kMessages, body);
  ASSERT_TRUE(r.parsed);
  ASSERT_FALSE(r.error);
  EXPECT_EQ(r.out.kind, Kind::kJsonSchema);
  EXPECT_TRUE(r.out.strict);
  EXPECT_EQ(r.out.param, "output_config.format.schema");
  body["output_config"]["format"]["type"] = "json";
  r = ReadFrom(Protocol::kMessages, body);
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->param, "output_config.format.type");
}

TEST(StructuredOutput, VllmExtensionFields) {
  Read r = ReadFrom(Protocol::kChatCompletions, Chat({{"structured_outputs", {{"choice", {"yes", "no"}}}}}));
  ASSERT_FALSE(r.error);
  EXPECT_EQ(r.out.kind, Kind::kChoice);
  EXPECT_EQ(r.out.choices, (std::vector<std::string>{"yes", "no"}));
  r = ReadFrom(Protocol::kChatCompletions, Chat({{"structured_outputs", {{"regex", "[0-9]+"}}}}));
  EXPECT_EQ(r.out.kind, Kind::kRegex);
  EXPECT_EQ(r.out.text, "[0-9]+");
  r = ReadFrom(Protocol::kChatCompletions, Chat({{"structured_outputs", {{"grammar", "root ::= \"a\""}}}}));
  EXPECT_EQ(r.out.kind, Kind::kGrammar);
  // `json` as an object or as its text.
  r = ReadFrom(Protocol::kChatCompletions, Chat({{"structured_outputs", {{"json", kSchema.dump()}}}}));
  EXPECT_EQ(r.out.kind, Kind::kJsonSchema);
  EXPECT_EQ(Json::parse(r.out.text), kSchema);
  EXPECT_EQ(r.out.param, "structured_outputs.json");
  r = ReadFrom(Protocol::kChatCompletions, Chat({{"structured_outputs", {{"json_object", true}}}}));
  EXPECT_EQ(r.out.kind, Kind::kJsonObject);
  r = ReadFrom(Protocol::kChatCompletions, Chat({{"guided_regex", "a|b"}}));
  EXPECT_EQ(r.out.kind, Kind::kRegex);
  EXPECT_EQ(r.out.param, "guided_regex");
}

TEST(StructuredOutput, ErrorsNameTheField) {
  Read r = ReadFrom(Protocol::kChatCompletions, Chat({{"structured_outputs", {{"choice", Json::array()}}}}));
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->param, "structured_outputs.choice");
  r = ReadFrom(Protocol::kChatCompletions, Chat({{"structured_outputs", {{"choice", {"a", 1}}}}}));
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->param, "structured_outputs.choice[1]");
  r = ReadFrom(Protocol::kChatCompletions, Chat({{"structured_outputs", {{"regex", 5}}}}));
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->param, "structured_outputs.regex");
  r = ReadFrom(Protocol::kChatCompletions, Chat({{"structured_outputs", "x"}}));
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->param, "structured_outputs");
  r = ReadFrom(Protocol::kChatCompletions,
               Chat({{"response_format", {{"type", "json_object"}}}, {"structured_outputs", {{"regex", "a"}}}}));
  ASSERT_TRUE(r.error);
  EXPECT_NE(r.error->message.find("only one"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer::recipe
