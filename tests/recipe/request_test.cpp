// Request parsing: malformed requests of each protocol get the protocol's error shape, the HTTP status and
// the offending parameter; tolerated fields are tolerated; the parsed settings reach the conversation.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "recipe/render.h"
#include "recipe/render_internal.h"
#include "recipe/request.h"

namespace deepinfer::recipe {
namespace {

using Json = nlohmann::ordered_json;

struct Malformed {
  Protocol protocol;
  std::string body;
  std::string param;  // expected offending parameter ("" = the body itself)
};

// Each body breaks one rule; the parameter is where the official APIs point for that rule.
const std::vector<Malformed>& MalformedCorpus() {
  static const std::vector<Malformed> corpus = {
      {Protocol::kChatCompletions, "", ""},
      {Protocol::kChatCompletions, "{", ""},
      {Protocol::kChatCompletions, "[]", ""},
      {Protocol::kChatCompletions, "\"text\"", ""},
      {Protocol::kChatCompletions, std::string(1000, '[') + std::string(1000, ']'), ""},
      {Protocol::kChatCompletions, R"({"messages":[{"role":"user","content":"x"}]})", "model"},
      {Protocol::kChatCompletions, R"({"model":"m"})", "messages"},
      {Protocol::kChatCompletions, R"({"model":"m","messages":{}})", "messages"},
      {Protocol::kChatCompletions, R"({"model":"m","messages":[]})", "messages"},
      {Protocol::kChatCompletions, R"({"model":"m","messages":[7]})", "messages[0]"},
      {Protocol::kChatCompletions, R"({"model":"m","messages":[{"content":"x"}]})", "messages[0].role"},
      {Protocol::kChatCompletions, R"({"model":"m","messages":[{"role":"robot","content":"x"}]})", "messages[0].role"},
      {Protocol::kChatCompletions, R"({"model":"m","messages":[{"role":"user"}]})", "messages[0].content"},
      {Protocol::kChatCompletions, R"({"model":"m","messages":[{"role":"user","content":5}]})", "messages[0].content"},
      {Protocol::kChatCompletions, R"({"model":"m","messages":[{"role":"user","content":[{"type":"audio"}]}]})",
       "messages[0].content[0].type"},
      {Protocol::kChatCompletions,
       R"({"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"ftp://x"}}]}]})",
       "messages[0].content[0].image_url.url"},
      {Protocol::kChatCompletions, R"({"model":"m","messages":[{"role":"tool","content":"x","tool_call_id":"a"}]})",
       "messages[0]"},
      {Protocol::kChatCompletions,
       R"({"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]}]})",
       "messages[1]"},
      {Protocol::kChatCompletions, R"({"model":"m","messages":[{"role":"user","content":"x"}],"temperature":3})",
       "temperature"},
      {Protocol::kChatCompletions, R"({"model":"m","messages":[{"role":"user","content":"x"}],"temperature":"hot"})",
       "temperature"},
      {Protocol::kChatCompletions, R"({"model":"m","messages":[{"role":"user","content":"x"}],"top_p":0})", "top_p"},
      {Protocol::kChatCompletions, R"({"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":0})",
       "max_tokens"},
      {Protocol::kChatCompletions, R"({"model":"m","messages":[{"role":"user","content":"x"}],"n":2})", "n"},
      {Protocol::kChatCompletions,
       R"({"model":"m","messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":21})", "top_logprobs"},
      {Protocol::kChatCompletions, R"({"model":"m","messages":[{"role":"user","content":"x"}],"stop":[1]})", "stop[0]"},
      {Protocol::kChatCompletions,
       R"({"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"a b"}}]})",
       "tools[0].function.name"},
      {Protocol::kChatCompletions,
       R"({"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}})",
       "response_format"},
      {Protocol::kChatCompletions,
       R"({"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"yaml"}})",
       "response_format.type"},
      {Protocol::kChatCompletions, R"({"model":"m","messages":[{"role":"user","content":"x"}],"reasoning_effort":"huge"})",
       "reasoning_effort"},
      {Protocol::kChatCompletions, R"({"model":"m","messages":[{"role":"user","content":"x"}],"thinking":{"type":"on"}})",
       "thinking.type"},
      {Protocol::kMessages, R"({"model":"m","messages":[{"role":"user","content":"x"}]})", "max_tokens"},
      {Protocol::kMessages, R"({"model":"m","max_tokens":5,"messages":[]})", "messages"},
      {Protocol::kMessages, R"({"model":"m","max_tokens":5,"messages":[{"role":"system","content":"x"}]})",
       "messages[0].role"},
      {Protocol::kMessages, R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":[]}]})",
       "messages[0]"},
      {Protocol::kMessages,
       R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"x"}]}]})",
       "messages[0].content[0]"},
      {Protocol::kMessages,
       R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},{"role":"user","content":"x"}]})",
       "messages[2]"},
      {Protocol::kMessages,
       R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"tools":[{"type":"web_search_20250305","name":"w"}]})",
       "tools[0].type"},
      {Protocol::kMessages,
       R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"maybe"}})",
       "tool_choice.type"},
      {Protocol::kResponses, R"({"model":"m"})", "input"},
      {Protocol::kResponses, R"({"model":"m","input":[]})", "input"},
      {Protocol::kResponses, R"({"model":"m","input":42})", "input"},
      {Protocol::kResponses, R"({"model":"m","input":[{"type":"function_call_output","call_id":"x","output":"y"}]})",
       "input"},
      {Protocol::kResponses, R"({"model":"m","input":[{"content":"x"}]})", "input[0].type"},
      {Protocol::kResponses, R"({"model":"m","input":"x","tools":[{"type":"custom","name":"other"}]})",
       "tools[0].name"},
      {Protocol::kResponses, R"({"model":"m","input":"x","reasoning":{"effort":"huge"}})", "reasoning.effort"},
      {Protocol::kResponses, R"({"model":"m","input":"x","max_output_tokens":0})", "max_tokens"},
      // Where two rules fail, deepseek-recipe's first one names the error (its messages, found by parity.py):
      // a bad tool before the items ("Unsupported custom tool ..."), the thinking tool_choice rule before
      // the prefix rules ("Thinking mode does not support this tool_choice").
      {Protocol::kResponses, R"({"model":"m","input":[],"tools":[{"type":"custom","name":"other"}]})",
       "tools[0].name"},
      {Protocol::kResponses,
       R"({"model":"m","input":[{"type":"function_call_output","call_id":"x","output":"o"}],)"
       R"("tools":[{"type":"custom","name":"other"}]})",
       "tools[0].name"},
      {Protocol::kChatCompletions,
       R"({"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","content":"y","prefix":true}],)"
       R"("tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required"})",
       "tool_choice"},
  };
  return corpus;
}

TEST(RequestErrors, MalformedRequestsGetTheProtocolsErrorShape) {
  for (const Malformed& m : MalformedCorpus()) {
    SCOPED_TRACE(std::string(ProtocolName(m.protocol)) + " " + m.body.substr(0, 200));
    const ParseOutcome outcome = ParseRequest(m.protocol, m.body);
    ASSERT_FALSE(outcome.ok());
    EXPECT_EQ(outcome.error.http_status, 400);
    EXPECT_EQ(outcome.error.param, m.param);
    EXPECT_FALSE(outcome.error.message.empty());
    const Json body = Json::parse(ErrorBody(m.protocol, outcome.error));
    if (m.protocol == Protocol::kMessages) {
      EXPECT_EQ(body["type"], "error");
      EXPECT_EQ(body["error"]["type"], "invalid_request_error");
      EXPECT_TRUE(body["error"]["message"].is_string());
    } else {
      EXPECT_EQ(body["error"]["type"], "invalid_request_error");
      EXPECT_EQ(body["error"]["param"], m.param.empty() ? Json() : Json(m.param));
      EXPECT_TRUE(body["error"].contains("code"));
    }
  }
}

// Every prefix of a valid request is either a valid request or rejected with a 400: never a crash.
TEST(RequestErrors, EveryTruncationIsRejectedCleanly) {
  const std::string body =
      R"({"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"é"}]}],)"
      R"("tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"temperature":0.5})";
  ASSERT_TRUE(ParseChatCompletionsRequest(body).ok());
  for (size_t n = 0; n < body.size(); ++n) {
    const ParseOutcome outcome = ParseChatCompletionsRequest(body.substr(0, n));
    EXPECT_FALSE(outcome.ok()) << n;
    EXPECT_EQ(outcome.error.http_status, 400);
  }
}

TEST(RequestParsing, UnknownFieldsAreTolerated) {
  const ParseOutcome outcome = ParseChatCompletionsRequest(
      R"({"model":"m","messages":[{"role":"user","content":"x","name":"bob","extra":1}],"store":true,"foo":{"bar":[]}})");
  ASSERT_TRUE(outcome.ok()) << outcome.error.message;
  EXPECT_EQ(outcome.request->conversation.messages.size(), 1u);
}

TEST(RequestParsing, SettingsReachTheConversation) {
  const ParseOutcome outcome = ParseChatCompletionsRequest(
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"thinking":{"type":"disabled"},"temperature":0.25,)"
      R"("top_p":0.5,"top_k":7,"max_completion_tokens":99,"seed":3,"stop":"END","logprobs":true,"top_logprobs":2,)"
      R"("stream":true,"stream_options":{"include_usage":true},"user":"u","metadata":{"k":"v"}})");
  ASSERT_TRUE(outcome.ok()) << outcome.error.message;
  const InferenceOptions& inf = outcome.request->inference;
  EXPECT_FALSE(outcome.request->conversation.thinking_mode);
  EXPECT_EQ(inf.temperature, 0.25);
  EXPECT_EQ(inf.top_p, 0.5);
  EXPECT_EQ(inf.top_k, 7);
  EXPECT_EQ(inf.max_tokens, 99);
  EXPECT_EQ(inf.seed, 3);
  EXPECT_EQ(inf.stop, std::vector<std::string>{"END"});
  EXPECT_TRUE(inf.logprobs);
  EXPECT_EQ(inf.top_logprobs, 2);
  EXPECT_TRUE(inf.stream);
  EXPECT_TRUE(inf.include_usage);
  EXPECT_EQ(inf.user, "u");
  EXPECT_EQ(inf.metadata["k"], "v");
}

// Anthropic tools[].strict reaches the Conversation (the server's strict tool-call grammar then applies), and the
// schema stays as written: Chat's strict rewrite would drop maxLength (deepseek-recipe's rule), which the grammar
// must honour here, and deepseek-recipe renders an Anthropic tool's schema unchanged.
TEST(RequestParsing, MessagesStrictToolKeepsItsSchema) {
  const std::string schema = R"({"type":"object","properties":{"q":{"type":"string","maxLength":4}},"required":["q"]})";
  const ParseOutcome outcome = ParseMessagesRequest(
      R"({"model":"m","max_tokens":9,"messages":[{"role":"user","content":"x"}],"tools":[)"
      R"({"name":"a","strict":true,"input_schema":)" + schema + R"(},{"name":"b","input_schema":{"type":"object"}}]})");
  ASSERT_TRUE(outcome.ok()) << outcome.error.message;
  const auto& tools = outcome.request->conversation.tools;
  ASSERT_EQ(tools.size(), 2u);
  EXPECT_EQ(tools[0].strict, std::optional<bool>(true));
  EXPECT_EQ(tools[0].parameters.dump(), schema);
  EXPECT_EQ(tools[1].strict, std::nullopt);
  // strict must be a boolean.
  const ParseOutcome bad = ParseMessagesRequest(
      R"({"model":"m","max_tokens":9,"messages":[{"role":"user","content":"x"}],"tools":[)"
      R"({"name":"a","strict":"yes","input_schema":{"type":"object"}}]})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error.http_status, 400);
  EXPECT_NE(bad.error.param.find("tools"), std::string::npos) << bad.error.param;
}

TEST(RequestParsing, ThinkingModeForcesTemperatureOneAndDefaultsEffortToHigh) {
  // deepseek-recipe: thinking mode samples at temperature 1.0; an unset effort means "high".
  const ParseOutcome outcome =
      ParseChatCompletionsRequest(R"({"model":"m","messages":[{"role":"user","content":"x"}],"temperature":0.2})");
  ASSERT_TRUE(outcome.ok());
  EXPECT_TRUE(outcome.request->conversation.thinking_mode);
  EXPECT_EQ(outcome.request->conversation.reasoning_effort, ReasoningEffort::kHigh);
  EXPECT_EQ(outcome.request->inference.temperature, 1.0);
}

// OpenAI-shaped bodies carry the oracle's type and code, and the parameter path as the OpenAI API does
// (deepseek-recipe writes null there: deviations.json).
TEST(ErrorBodies, OpenAiShape) {
  const ParseOutcome outcome =
      ParseChatCompletionsRequest(R"({"model":"m","messages":[{"role":"user","content":"x"}],"stop":["a",""]})");
  ASSERT_FALSE(outcome.ok());
  const Json body = Json::parse(ErrorBody(Protocol::kChatCompletions, outcome.error));
  // The oracle's message and type, verbatim.
  EXPECT_EQ(body["error"]["message"],
            "Invalid 'stop[1]': empty string. Expected a string with minimum length 1, but got an empty string instead.");
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  EXPECT_EQ(body["error"]["code"], "invalid_request_error");
  EXPECT_EQ(body["error"]["param"], "stop[1]");
}

// Messages errors keep Anthropic's shape (the anthropic SDK parses it), with the message naming the
// parameter the way Anthropic's do.
TEST(ErrorBodies, AnthropicShape) {
  const ParseOutcome outcome = ParseMessagesRequest(R"({"model":"m","max_tokens":5,"messages":[]})");
  ASSERT_FALSE(outcome.ok());
  const Json body = Json::parse(ErrorBody(Protocol::kMessages, outcome.error));
  EXPECT_EQ(body, Json::parse(R"({"type":"error","error":{"type":"invalid_request_error",)"
                              R"("message":"messages: at least one message is required"}})"));
}

// The meta-schema rules deepseek-recipe applies to the schemas of non-strict tools, with its messages
// (jsonschema's wording, as the oracle printed them for these inputs).
TEST(SchemaKeywords, MetaSchemaRules) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"multipleOf":0})", "0 is less than or equal to the minimum of 0"},
      {R"({"multipleOf":-2.5})", "-2.5 is less than or equal to the minimum of 0"},
      {R"({"minLength":-1})", "-1 is less than the minimum of 0"},
      {R"({"type":"number","minItems":-1})", "-1 is less than the minimum of 0"},
      {R"({"type":"foo"})", R"("foo" is not valid under any of the schemas listed in the 'anyOf' keyword)"},
      {R"({"type":["string","foo"]})", R"(["string","foo"] is not valid under any of the schemas listed in the 'anyOf' keyword)"},
      {R"({"required":"x"})", R"("x" is not of type "array")"},
      {R"({"enum":"x"})", R"("x" is not of type "array")"},
      {R"({"items":5})", R"(5 is not of types "boolean", "object")"},
      {R"({"maxLength":1.5})", R"(1.5 is not of type "integer")"},
      {R"({"uniqueItems":"x"})", R"("x" is not of type "boolean")"},
      {R"({"anyOf":[]})", "[] has less than 1 item"},
      {R"({"required":["a","a"]})", R"(["a","a"] has non-unique elements)"},
      {R"({"exclusiveMinimum":true})", R"(true is not of type "number")"},
      {R"({"description":5})", R"(5 is not of type "string")"},
  };
  for (const auto& [property, message] : cases) {
    const std::string body = R"({"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function",)"
                             R"("function":{"name":"f","parameters":{"type":"object","properties":{"a":)" +
                             property + "}}}}]}";
    const ParseOutcome outcome = ParseChatCompletionsRequest(body);
    ASSERT_FALSE(outcome.ok()) << property;
    EXPECT_EQ(outcome.error.message, "Invalid schema for function 'f': " + message) << property;
  }
  // Accepted: an integral float where an integer is asked for, an empty enum, a null const.
  for (const char* property : {R"({"minLength":1.0})", R"({"enum":[]})", R"({"const":null})"}) {
    const std::string body = R"({"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function",)"
                             R"("function":{"name":"f","parameters":{"type":"object","properties":{"a":)" +
                             std::string(property) + "}}}}]}";
    EXPECT_TRUE(ParseChatCompletionsRequest(body).ok()) << property;
  }
}

// Duplicate checks are linear: 100,000 tools (the last a duplicate) are rejected, and a request with
// 100,000 distinct ones is accepted. A quadratic check would take about 5e9 comparisons here; past a
// test timeout, it fails.
TEST(RequestLimits, ManyToolsAreCheckedInLinearTime) {
  for (Protocol protocol : {Protocol::kChatCompletions, Protocol::kResponses, Protocol::kMessages}) {
    for (bool duplicate : {false, true}) {
      const char* open = protocol == Protocol::kChatCompletions ? R"({"type":"function","function":{"name":"f)"
                         : protocol == Protocol::kResponses     ? R"({"type":"function","name":"f)"
                                                                : R"({"name":"f)";
      const char* close = protocol == Protocol::kChatCompletions ? R"("}})"
                          : protocol == Protocol::kResponses     ? R"("})"
                                                                 : R"(","input_schema":{"type":"object"}})";
      std::string body = protocol == Protocol::kResponses
                             ? R"({"model":"m","input":"hi","tools":[)"
                             : R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"tools":[)";
      const int n = protocol == Protocol::kChatCompletions ? 100000 : 20000;  // keeps the sanitizer pass short
      for (int i = 0; i < n; ++i) {
        if (i) body.append(",");
        body.append(open).append(std::to_string(duplicate && i == n - 1 ? 0 : i)).append(close);
      }
      body.append("]}");
      const ParseOutcome outcome = ParseRequest(protocol, body);
      EXPECT_EQ(outcome.ok(), !duplicate) << ProtocolName(protocol);
      if (duplicate && !outcome.ok()) {
        EXPECT_EQ(outcome.error.message, "Tool names must be unique.");
      }
    }
  }
}

// n > 1 is a server's choice (RequestOptions::max_n); the default keeps deepseek-recipe's n = 1 rule.
TEST(RequestParsing, NUpToMaxN) {
  const std::string body = R"({"model":"m","messages":[{"role":"user","content":"x"}],"n":4})";
  EXPECT_FALSE(ParseChatCompletionsRequest(body).ok());
  RequestOptions options;
  options.max_n = 128;
  const ParseOutcome outcome = ParseChatCompletionsRequest(body, options);
  ASSERT_TRUE(outcome.ok()) << outcome.error.message;
  EXPECT_EQ(outcome.request->inference.n, 4);
  for (const char* n : {"0", "129", "-1"}) {
    const ParseOutcome bad =
        ParseChatCompletionsRequest(R"({"model":"m","messages":[{"role":"user","content":"x"}],"n":)" + std::string(n) + "}",
                                    options);
    ASSERT_FALSE(bad.ok()) << n;
    EXPECT_EQ(bad.error.param, "n");
    EXPECT_EQ(bad.error.message, "Invalid n value, the valid range of n is [1, 128]");
  }
}

// Tool-call arguments are JSON inside a string of the body: rendering parses them with a depth bound and
// without recursion on their depth, so 100,000 levels are a clean error (the oracle's serde_json refuses
// them too), and 128 levels render.
TEST(RequestLimits, DeepToolCallArgumentsAreBounded) {
  for (int depth : {128, 100000}) {
    const std::string arguments = R"({\"a\": )" + std::string(depth - 1, '[') + std::string(depth - 1, ']') + "}";
    const std::string body =
        R"({"model":"m","messages":[{"role":"user","content":"q"},{"role":"assistant","content":null,"tool_calls":[)"
        R"({"id":"c","type":"function","function":{"name":"f","arguments":")" + arguments +
        R"("}}]},{"role":"tool","tool_call_id":"c","content":"r"}],"tools":[{"type":"function","function":{"name":"f"}}]})";
    const ParseOutcome parsed = ParseChatCompletionsRequest(body);
    ASSERT_TRUE(parsed.ok()) << parsed.error.message;
    for (ModelVersion version : {ModelVersion::kV32, ModelVersion::kV4, ModelVersion::kV41}) {
      const Result<RenderedPrompt> prompt = RenderPrompt(parsed.request->conversation, version);
      EXPECT_EQ(prompt.ok(), depth == 128) << depth << " " << ModelVersionName(version);
    }
  }
}

// Values the oracle (deepseek-recipe 0.2.0, DeepSeek-V4-Pro) printed for these floats in a tool schema.
TEST(RecipeJson, FloatsUseTheOraclesLayout) {
  const std::vector<std::pair<double, std::string>> cases = {
      {1e-5, "0.00001"}, {1e-6, "1e-6"}, {0.0001, "0.0001"}, {1e15, "1000000000000000.0"}, {1e16, "1e+16"},
      {1.5e16, "1.5e+16"}, {123456789012345680000.0, "1.2345678901234568e+20"}, {1e-7, "1e-7"},
      {2.5e-5, "0.000025"}, {0.1, "0.1"}, {100.0, "100.0"}, {-0.0, "-0.0"}, {5e-324, "5e-324"},
      {1.7976931348623157e308, "1.7976931348623157e+308"}};
  for (const auto& [value, text] : cases) EXPECT_EQ(RecipeFloatRepr(value), text) << value;
}

}  // namespace
}  // namespace deepinfer::recipe
