// Codec points checked against deepseek-recipe 0.2.0 (the oracle) by hand, and the deliberate differences
// from it that deviations.json lists without a corpus tag.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "recipe/render.h"
#include "recipe/request.h"

namespace deepinfer::recipe {
namespace {

using Json = nlohmann::ordered_json;

Json NamespaceRequest(const Json& ns_description) {
  Json ns = {{"type", "namespace"}, {"name", "crm"}};
  if (!ns_description.is_null()) ns["description"] = ns_description;
  ns["tools"] = Json::array({{{"type", "function"}, {"name", "lookup"}, {"description", "Find a customer."},
                              {"parameters", {{"type", "object"}, {"properties", Json::object()}}}}});
  return {{"model", "m"}, {"input", "hi"}, {"reasoning", {{"effort", "none"}}}, {"tools", Json::array({ns})}};
}

// The V4.1 rendering prefixes a namespace member's description with the namespace's own, and a newline,
// only when the namespace's description has text. The oracle's conversion gives, for the member
// "Find a customer.": description "" -> "Find a customer.", absent -> the same, "CRM tools." ->
// "CRM tools.\nFind a customer.".
TEST(CodecDeviations, NamespaceWithoutDescriptionAddsNoNewline) {
  RequestOptions options;
  options.model_version = ModelVersion::kV41;
  for (const auto& [ns_description, want] : {std::pair{Json(""), "Find a customer."},
                                             std::pair{Json(), "Find a customer."},
                                             std::pair{Json("CRM tools."), "CRM tools.\nFind a customer."}}) {
    ParseOutcome parsed = ParseResponsesRequest(NamespaceRequest(ns_description).dump(), options);
    ASSERT_TRUE(parsed.ok()) << parsed.error.message;
    ASSERT_EQ(parsed.request->conversation.tools.size(), 1u);
    EXPECT_EQ(parsed.request->conversation.tools[0].description.value_or("<none>"), want) << ns_description.dump();
    auto prompt = RenderPrompt(parsed.request->conversation, ModelVersion::kV41);
    ASSERT_TRUE(prompt.ok()) << prompt.status().ToString();
    // The schema's JSON in the prompt never starts the description with an (escaped) newline.
    EXPECT_EQ(prompt->text.find("\"description\": \"\\nFind"), std::string::npos) << ns_description.dump();
    EXPECT_NE(prompt->text.find("Find a customer."), std::string::npos);
  }
}

// Two inputs the oracle rejects and deepinfer reads (deviations.json): a Responses `refusal` content part
// (its text becomes the message's text) and a UTF-8 byte-order mark before the JSON body.
TEST(CodecDeviations, RefusalPartAndByteOrderMark) {
  const Json refusal = {{"model", "m"},
                        {"reasoning", {{"effort", "none"}}},
                        {"input", Json::array({{{"role", "user"}, {"content", "hi"}},
                                               {{"role", "assistant"},
                                                {"content", Json::array({{{"type", "refusal"}, {"refusal", "I can't."}}})}},
                                               {{"role", "user"}, {"content", "ok"}}})}};
  ParseOutcome parsed = ParseResponsesRequest(refusal.dump());
  ASSERT_TRUE(parsed.ok()) << parsed.error.message;
  auto prompt = RenderPrompt(parsed.request->conversation, ModelVersion::kV4);
  ASSERT_TRUE(prompt.ok());
  EXPECT_NE(prompt->text.find("I can't."), std::string::npos) << prompt->text;

  const std::string bom = "\xEF\xBB\xBF";
  const std::string chat = R"({"model":"m","messages":[{"role":"user","content":"hi"}]})";
  EXPECT_TRUE(ParseChatCompletionsRequest(bom + chat).ok());
  EXPECT_TRUE(ParseResponsesRequest(bom + R"({"model":"m","input":"hi"})").ok());
  EXPECT_TRUE(ParseMessagesRequest(bom + R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]})").ok());
  // Only at the start: a mark inside the body is no whitespace.
  EXPECT_FALSE(ParseChatCompletionsRequest("{" + bom + chat.substr(1)).ok());
}

}  // namespace
}  // namespace deepinfer::recipe
