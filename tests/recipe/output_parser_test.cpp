// Unit tests of the output side's building blocks: the incremental delimiter matcher, the V3.2 block
// spelling (not covered by the deepseek-recipe oracle, which knows V4 and V4.1 only), and the
// serde_json number form of response bodies.
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "recipe/delimiter_matcher.h"
#include "recipe/output_parser.h"
#include "recipe/response_json.h"
#include "recipe/stream_events.h"

namespace deepinfer::recipe {
namespace {

// Property: fed one byte at a time, the matcher reports exactly the leftmost non-overlapping
// occurrences that repeated std::string::find reports.
TEST(DelimiterMatcher, AgreesWithFindOnRandomText) {
  std::mt19937 rng(11);
  const std::string alphabet = "ab<|";
  for (int round = 0; round < 2000; ++round) {
    std::string pattern, text;
    for (int i = 0, n = 1 + static_cast<int>(rng() % 4); i < n; ++i) pattern += alphabet[rng() % alphabet.size()];
    for (int i = 0, n = static_cast<int>(rng() % 40); i < n; ++i) text += alphabet[rng() % alphabet.size()];
    std::vector<size_t> expected;
    for (size_t at = text.find(pattern); at != std::string::npos; at = text.find(pattern, at + pattern.size())) {
      expected.push_back(at + pattern.size());
    }
    DelimiterMatcher matcher(pattern, false);
    std::vector<size_t> got;
    for (size_t i = 0; i < text.size(); ++i) {
      if (matcher.Advance(static_cast<uint8_t>(text[i]))) {
        got.push_back(i + 1);
        EXPECT_EQ(matcher.matched_length(), pattern.size());
      }
    }
    ASSERT_EQ(got, expected) << "pattern '" << pattern << "' text '" << text << "'";
  }
}

TEST(DelimiterMatcher, AbsorbsTheNewlineRunBeforeTheDelimiter) {
  DelimiterMatcher matcher("<x", true);
  const std::string text = "ab\n\n\n<x";
  bool matched = false;
  for (char c : text) matched = matcher.Advance(static_cast<uint8_t>(c));
  EXPECT_TRUE(matched);
  EXPECT_EQ(matcher.matched_length(), 5u);  // three newlines + "<x"
  // A partial match in progress is pending, newlines included: "\n\n<" may still become "\n\n<x".
  for (char c : std::string("\n\n<")) matcher.Advance(static_cast<uint8_t>(c));
  EXPECT_EQ(matcher.pending_length(), 3u);
}

std::string Content(const std::vector<OutputDelta>& deltas) {
  std::string out;
  for (const OutputDelta& d : deltas) {
    if (d.kind == OutputDelta::Kind::kContent) out += d.text;
  }
  return out;
}

TEST(OutputParser, V32FunctionCallsBlockEndsTheOutput) {
  const std::string text =
      "Sure.\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"f\">\n"
      "<｜DSML｜parameter name=\"x\" string=\"false\">1</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
      "</｜DSML｜function_calls>trailing";
  for (ModelVersion version : {ModelVersion::kV32, ModelVersion::kV4}) {
    OutputParserOptions options;
    options.model_version = version;
    OutputParser parser(options);
    std::vector<OutputDelta> deltas;
    parser.Feed(text, &deltas);
    parser.Finish(&deltas);
    EXPECT_EQ(Content(deltas), "Sure.");
    EXPECT_EQ(parser.tool_call_count(), 1);
    std::string arguments;
    for (const OutputDelta& d : deltas) {
      if (d.kind == OutputDelta::Kind::kToolArguments) arguments += d.text;
    }
    EXPECT_EQ(arguments, "{\"x\": 1}");
    // Only V3.2 knows its end tag; a V4 parser keeps looking for `</｜DSML｜tool_calls>`.
    EXPECT_EQ(parser.finished(), version == ModelVersion::kV32);
    EXPECT_EQ(!parser.issues().empty(), version == ModelVersion::kV32);  // "trailing" is invalid
  }
}

TEST(OutputParser, StopSequenceEndsTheAnswerButNotTheReasoning) {
  OutputParserOptions options;
  options.thinking_stage = ThinkingStage::kReasoningStart;
  options.stop_sequences = {"END", ""};
  OutputParser parser(options);
  std::vector<OutputDelta> deltas;
  parser.Feed("think END more</think>answer E", &deltas);
  parser.Feed("ND ignored", &deltas);
  ASSERT_TRUE(parser.stopped_by_sequence());
  EXPECT_EQ(*parser.matched_stop_sequence(), "END");
  std::string reasoning;
  for (const OutputDelta& d : deltas) {
    if (d.kind == OutputDelta::Kind::kReasoning) reasoning += d.text;
  }
  EXPECT_EQ(reasoning, "think END more");
  EXPECT_EQ(Content(deltas), "answer ");
}

// Expected strings follow the ryu layout serde_json uses (digits d1..dn, point position k):
// integral below 1e16 -> "<digits>.0"; 0 < k <= 16 -> plain decimal; -5 < k <= 0 -> "0.000ddd";
// otherwise "d.ddde<k-1>" with '+' on positive exponents and no zero padding (Python would write 1e-07).
// The exponent forms were checked against deepseek-recipe 0.2.0's Messages tool_use input, which writes
// [1e16, 1e-7, 1.5e300, 1e-5, 2.5E+20] as [1e+16,1e-7,1.5e+300,0.00001,2.5e+20].
TEST(ResponseJson, FloatsUseRustShortestForm) {
  auto f = [](double v) {
    std::string out;
    SerdeJsonAppendFloat(out, v);
    return out;
  };
  EXPECT_EQ(f(3.0), "3.0");
  EXPECT_EQ(f(-0.25), "-0.25");
  EXPECT_EQ(f(123.456), "123.456");
  EXPECT_EQ(f(1e-7), "1e-7");
  EXPECT_EQ(f(1e-5), "0.00001");
  EXPECT_EQ(f(0.0001), "0.0001");
  EXPECT_EQ(f(1e15), "1000000000000000.0");
  EXPECT_EQ(f(1e16), "1e+16");
  EXPECT_EQ(f(1.5e300), "1.5e+300");
  EXPECT_EQ(f(2.5e20), "2.5e+20");
  EXPECT_EQ(f(0.0), "0.0");
  EXPECT_EQ(SerdeJsonDumps(nlohmann::ordered_json::parse(R"({"b": [1, 2.50, "é\n"], "a": {"x": null}})")),
            R"({"b":[1,2.5,"é\n"],"a":{"x":null}})");
}

// serde_json's reading of JSON text, which the oracle applies to bodies and tool inputs: -0 keeps its sign,
// duplicate keys keep their first place and last value, nesting past 128 levels is an error.
TEST(SerdeJson, ReadsLikeTheOracle) {
  auto dump = [](std::string_view text) {
    auto parsed = ParseSerdeJson(text);
    return parsed.ok() ? SerdeJsonDumps(*parsed) : "error";
  };
  EXPECT_EQ(dump(R"({"a": -0, "b": [-0, 0, -0.0, -0e1], "c": "-0"})"), R"({"a":-0.0,"b":[-0.0,0,-0.0,-0.0],"c":"-0"})");
  EXPECT_EQ(dump(R"({"k": 1, "j": 2, "k": 3})"), R"({"k":3,"j":2})");
  std::string deep(128, '[');
  deep += std::string(128, ']');
  EXPECT_NE(dump(deep), "error");
  EXPECT_EQ(dump("[" + deep + "]"), "error");
  EXPECT_EQ(NegativeZeroAsFloat("[1, 2]"), std::nullopt);
  EXPECT_EQ(NegativeZeroAsFloat(R"(["-0", -0, -0.5, -01])"), std::optional<std::string>(R"(["-0", -0.0, -0.5, -01])"));
}

std::string RunMessages(const std::string& text, size_t chunk_size) {
  OutputParserOptions options;
  ResponseOptions response_options;
  response_options.id = "msg";
  response_options.tool_call_id = [](int i) { return "call_" + std::to_string(i); };
  std::vector<CompletionChunk> chunks;
  for (size_t i = 0; i < text.size(); i += chunk_size) chunks.push_back({text.substr(i, chunk_size), 1});
  return RunCompletion(Protocol::kMessages, options, response_options, chunks, BackendFinish::kStop, {}).response;
}

// JSON the model writes inside a tool parameter is parsed with a depth bound and without recursion on its
// depth: 100,000 levels are no crash, and the too-deep parameter keeps its raw text as a string while the
// other parameters keep their values (the oracle writes `{}`: deviations.json).
TEST(ToolInput, DeepJsonFromTheModelKeepsItsText) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::string open = "<\xEF\xBD\x9C" "DSML\xEF\xBD\x9C", close = "</\xEF\xBD\x9C" "DSML\xEF\xBD\x9C";
  const std::string text = "r</think>\n\n" + open + "tool_calls>\n" + open + "invoke name=\"f\">\n" + open +
                           "parameter name=\"a\" string=\"false\">" + deep + close + "parameter>\n" + open +
                           "parameter name=\"b\" string=\"false\">{\"x\": [1, \"]\"]}" + close + "parameter>\n" + open +
                           "parameter name=\"c\" string=\"true\">hi, \"you\"" + close + "parameter>\n" + close +
                           "invoke>\n" + close + "tool_calls>";
  const std::string body = RunMessages(text, text.size());
  const std::string want = R"("type":"tool_use","id":"call_0","name":"f","input":{"a":")" + deep +
                           R"(","b":{"x":[1,"]"]},"c":"hi, \"you\""})";
  EXPECT_NE(body.find(want), std::string::npos) << body.substr(0, 300);
  // Malformed (not deep) arguments are still the oracle's `{}`.
  std::string malformed = text;
  malformed.replace(malformed.find("{\"x\""), 1, "");
  EXPECT_NE(RunMessages(malformed, malformed.size()).find(R"("name":"f","input":{})"), std::string::npos);
}

// A Messages tool input keeps the sign of -0 whatever the chunking (the oracle prints -0.0).
TEST(ToolInput, NegativeZeroKeepsItsSign) {
  const std::string text = "r</think>\n\n<\xEF\xBD\x9C" "DSML\xEF\xBD\x9Ctool_calls>\n<\xEF\xBD\x9C" "DSML\xEF\xBD\x9Cinvoke "
                           "name=\"f\">\n<\xEF\xBD\x9C" "DSML\xEF\xBD\x9Cparameter name=\"a\" string=\"false\">[-0, 0]</\xEF\xBD\x9C"
                           "DSML\xEF\xBD\x9Cparameter>\n</\xEF\xBD\x9C" "DSML\xEF\xBD\x9Cinvoke>\n</\xEF\xBD\x9C" "DSML\xEF\xBD\x9Ctool_calls>";
  for (size_t chunk : {text.size(), size_t{1}, size_t{3}, size_t{7}}) {
    EXPECT_NE(RunMessages(text, chunk).find(R"("input":{"a":[-0.0,0]})"), std::string::npos) << chunk;
  }
}

// Responses apply_patch: a patch sent as a JSON string with string="false" is decoded to the patch text,
// the same for every chunking (escapes and surrogate pairs split between chunks included).
TEST(CustomToolInput, OneResultForEveryChunking) {
  const std::string value = R"("*** Begin Patch\n+x = \"\u00e9\" \ud83d\ude00\t\\\n*** End Patch")";
  const std::string want = "*** Begin Patch\n+x = \"\xC3\xA9\" \xF0\x9F\x98\x80\t\\\n*** End Patch";
  const std::string text = "<\xEF\xBD\x9C" "DSML\xEF\xBD\x9Ctool_calls>\n<\xEF\xBD\x9C" "DSML\xEF\xBD\x9Cinvoke name=\"apply_patch\">\n"
                           "<\xEF\xBD\x9C" "DSML\xEF\xBD\x9Cparameter name=\"input\" string=\"false\">" + value +
                           "</\xEF\xBD\x9C" "DSML\xEF\xBD\x9Cparameter>\n</\xEF\xBD\x9C" "DSML\xEF\xBD\x9Cinvoke>\n</\xEF\xBD\x9C"
                           "DSML\xEF\xBD\x9Ctool_calls>";
  OutputParserOptions options;
  options.thinking_stage.reset();
  ResponseOptions response_options;
  response_options.thinking = false;
  response_options.custom_tools = {"apply_patch"};
  response_options.completed_at = 0;
  response_options.tool_call_id = [](int i) { return "call_" + std::to_string(i); };
  for (size_t chunk_size = 1; chunk_size <= text.size(); chunk_size += chunk_size < 16 ? 1 : 97) {
    std::vector<CompletionChunk> chunks;
    for (size_t i = 0; i < text.size(); i += chunk_size) chunks.push_back({text.substr(i, chunk_size), 1});
    const StreamRunResult run = RunCompletion(Protocol::kResponses, options, response_options, chunks,
                                              BackendFinish::kStop, {});
    const auto response = nlohmann::json::parse(run.response);
    ASSERT_EQ(response["output"].size(), 1u) << chunk_size;
    EXPECT_EQ(response["output"][0]["type"], "custom_tool_call") << chunk_size;
    EXPECT_EQ(response["output"][0]["input"], want) << chunk_size;
    // The streamed deltas add up to the same input.
    std::string streamed;
    for (const auto& step : run.events_per_step) {
      for (const StreamEvent& e : step) {
        if (e.name == "response.custom_tool_call_input.delta") streamed += nlohmann::json::parse(e.json)["delta"];
      }
    }
    EXPECT_EQ(streamed, want) << chunk_size;
  }
}

// A server running n > 1 as one stream per choice names each choice's index in every chunk and body.
TEST(ChatChoices, ChoiceIndexInEnvelopeAndBody) {
  OutputParserOptions options;
  options.thinking_stage.reset();
  ResponseOptions response_options;
  response_options.thinking = false;
  response_options.choice_index = 3;
  const StreamRunResult run = RunCompletion(Protocol::kChatCompletions, options, response_options, {{"hi", 1}},
                                            BackendFinish::kStop, {});
  for (const auto& step : run.events_per_step) {
    for (const StreamEvent& e : step) EXPECT_EQ(nlohmann::json::parse(e.json)["choices"][0]["index"], 3) << e.json;
  }
  EXPECT_EQ(nlohmann::json::parse(run.response)["choices"][0]["index"], 3);
}

// Token chunks read the same with or without logprob entries written: emit_logprobs only drops them.
TEST(ChatChoices, TokenReadingWithoutLogprobs) {
  std::vector<CompletionChunk> chunks;
  for (const char* t : {"think", "</think>", "Hel", "lo"}) {
    CompletionChunk c;
    c.text = t;
    c.logprobs.push_back({t, -0.5, {}, std::string(t) == "</think>"});
    chunks.push_back(c);
  }
  OutputParserOptions options;
  options.thinking_stage = ThinkingStage::kReasoningStart;
  ResponseOptions with, without;
  without.emit_logprobs = false;
  with.tool_call_id = without.tool_call_id = [](int i) { return "call_" + std::to_string(i); };
  for (Protocol protocol : {Protocol::kChatCompletions, Protocol::kResponses}) {
    with.completed_at = without.completed_at = 0;
    const auto a = nlohmann::json::parse(RunCompletion(protocol, options, with, chunks, BackendFinish::kStop, {}).response);
    const auto b = nlohmann::json::parse(RunCompletion(protocol, options, without, chunks, BackendFinish::kStop, {}).response);
    if (protocol == Protocol::kChatCompletions) {
      EXPECT_EQ(a["choices"][0]["message"], b["choices"][0]["message"]);
      EXPECT_EQ(b["choices"][0]["message"]["content"], "Hello");
      EXPECT_FALSE(a["choices"][0]["logprobs"].is_null());
      EXPECT_TRUE(b["choices"][0]["logprobs"].is_null());
      EXPECT_EQ(a["usage"], b["usage"]);  // reasoning tokens counted in both
      EXPECT_EQ(b["usage"]["completion_tokens_details"]["reasoning_tokens"], 1);
    } else {
      EXPECT_EQ(b["usage"]["output_tokens_details"]["reasoning_tokens"], 1);
      for (const auto& item : b["output"]) {
        if (item["type"] == "message") {
          EXPECT_TRUE(item["content"][0]["logprobs"].empty());
        }
      }
    }
  }
}

// Without an id given, each protocol's body carries an id in its own style.
TEST(ResponseIds, EachProtocolItsOwnStyle) {
  OutputParserOptions options;
  ResponseOptions response_options;
  response_options.completed_at = 0;
  for (auto [protocol, prefix] : {std::pair{Protocol::kChatCompletions, "chatcmpl-"}, std::pair{Protocol::kResponses, "resp_"},
                                  std::pair{Protocol::kMessages, "msg_"}}) {
    const auto body =
        nlohmann::json::parse(RunCompletion(protocol, options, response_options, {{"a</think>b", 1}}, BackendFinish::kStop, {})
                                  .response);
    const std::string id = body["id"];
    EXPECT_EQ(id.rfind(prefix, 0), 0u) << id;
    EXPECT_EQ(id.size(), std::string(prefix).size() + 24) << id;
  }
}

}  // namespace
}  // namespace deepinfer::recipe
