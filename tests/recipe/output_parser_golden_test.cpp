// Replays the committed corpus of model completions (tests/recipe/data/parse/chat_cases.jsonl, made by
// tools/recipe/gen_outputs.py from deepseek-recipe 0.2's StreamProcessor) and requires the Chat
// Completions chunks of every step, and the non-streaming body, to be byte-identical to the oracle's.
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "recipe/output_parser.h"
#include "recipe/response_chat.h"
#include "recipe/stream_events.h"

namespace deepinfer::recipe {
namespace {

// The generator strips this envelope from every stored chunk (see ENVELOPE in gen_outputs.py).
constexpr std::string_view kEnvelope =
    "{\"id\":\"resp-1\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"deepseek-test\","
    "\"system_fingerprint\":null,\"choices\":[";

std::vector<nlohmann::json> LoadCases() {
  std::ifstream in(std::string(DEEPINFER_SOURCE_DIR) + "/tests/recipe/data/parse/chat_cases.jsonl");
  std::vector<nlohmann::json> cases;
  std::string line;
  while (std::getline(in, line)) cases.push_back(nlohmann::json::parse(line));
  return cases;
}

OutputParserOptions ParserOptions(const nlohmann::json& c) {
  OutputParserOptions options;
  options.parse_tool_calls = c["tools"].get<bool>();
  options.starts_in_tool_calls = c["starts_in_tool_calls"].get<bool>();
  options.parse_json_output = c["json_mode"].get<bool>();
  if (!c["initial_stage"].is_null()) {
    const std::string stage = c["initial_stage"];
    options.thinking_stage = stage == "reasoning_start"          ? ThinkingStage::kReasoningStart
                             : stage == "reasoning_continuation" ? ThinkingStage::kReasoningContinuation
                                                                 : ThinkingStage::kContentContinuation;
  }
  for (const auto& stop : c["stop"]) options.stop_sequences.push_back(stop);
  return options;
}

ResponseOptions TestResponseOptions(const nlohmann::json& c) {
  ResponseOptions options;
  options.id = "resp-1";
  options.model = "deepseek-test";
  options.created = 0;
  options.thinking = c["thinking"].get<bool>();
  if (!c["include_usage"].is_null()) options.include_usage = c["include_usage"].get<bool>();
  options.tool_call_id = [](int index) {
    return std::string("call_") + static_cast<char>('0' + index / 10) + static_cast<char>('0' + index % 10) + "_ID";
  };
  return options;
}

std::optional<BackendFinish> Finish(const nlohmann::json& c) {
  if (c["finish"].is_null()) return std::nullopt;
  const std::string f = c["finish"];
  return f == "length" ? BackendFinish::kLength
         : f == "content_filter" ? BackendFinish::kContentFilter
                                 : BackendFinish::kStop;
}

TEST(OutputParserGolden, ChatCompletionsChunksMatchOracle) {
  const std::vector<nlohmann::json> cases = LoadCases();
  ASSERT_GE(cases.size(), 300u);
  int failures = 0;
  for (const nlohmann::json& c : cases) {
    std::vector<CompletionChunk> chunks;
    for (const auto& text : c["chunks"]) chunks.push_back({text.get<std::string>(), 1});
    const StreamRunResult run =
        RunChatCompletion(ParserOptions(c), TestResponseOptions(c), chunks, Finish(c), UsageCounts{11, 4, 0});
    std::vector<std::vector<std::string>> expected;
    for (const auto& step : c["pushes"]) {
      std::vector<std::string> events;
      for (const auto& e : step) events.push_back(std::string(kEnvelope) + e.get<std::string>());
      expected.push_back(std::move(events));
    }
    const bool same = run.events_per_step == expected && run.response == c["response"].get<std::string>();
    EXPECT_TRUE(same) << c["name"].get<std::string>();
    if (!same && ++failures <= 3) {
      for (size_t i = 0; i < std::max(expected.size(), run.events_per_step.size()); ++i) {
        const auto got = i < run.events_per_step.size() ? nlohmann::json(run.events_per_step[i]) : nlohmann::json();
        const auto want = i < expected.size() ? nlohmann::json(expected[i]) : nlohmann::json();
        if (got != want) {
          ADD_FAILURE() << c["name"].get<std::string>() << " step " << i << "\n got:  " << got.dump()
                        << "\n want: " << want.dump();
          break;
        }
      }
      if (run.response != c["response"].get<std::string>()) {
        ADD_FAILURE() << "response\n got:  " << run.response << "\n want: " << c["response"].get<std::string>();
      }
    }
  }
  EXPECT_EQ(failures, 0);
}

}  // namespace
}  // namespace deepinfer::recipe
