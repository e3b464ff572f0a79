// Replays the committed corpus of model completions (tests/recipe/data/parse/*_cases.jsonl, made by
// tools/recipe/gen_outputs.py from deepseek-recipe 0.2's StreamProcessor) and requires the Chat
// Completions chunks and Anthropic Messages events of every step, and the non-streaming bodies, to be
// byte-identical to the oracle's.
// DEEPINFER_PARSE_CASES names a directory of such files to replay instead (a wider, fresh corpus:
// tools/recipe/parity.py writes one and reads the "parity" count lines these tests print).
#include <cstdio>
#include <cstdlib>
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

// The replayed corpus: DEEPINFER_PARSE_CASES (a directory) or the committed one. Only the committed one has
// the minimum sizes the tests check.
const char* OtherCorpus() {
  const char* dir = std::getenv("DEEPINFER_PARSE_CASES");
  return dir != nullptr && *dir != '\0' ? dir : nullptr;
}
std::string CasesPath(const std::string& file) {
  const char* dir = OtherCorpus();
  return (dir != nullptr ? std::string(dir) : std::string(DEEPINFER_SOURCE_DIR) + "/tests/recipe/data/parse") + "/" +
         file;
}
size_t AtLeast(size_t n) { return OtherCorpus() != nullptr ? 0 : n; }

// One line per test for tools/recipe/parity.py: how many cases gave exactly the oracle's output.
void PrintCounts(const char* what, int cases, int failures) {
  std::printf("parity %s: %d of %d equal\n", what, cases - failures, cases);
}

std::vector<nlohmann::json> LoadCases() {
  std::ifstream in(CasesPath("chat_cases.jsonl"));
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

nlohmann::json StepJson(const std::vector<StreamEvent>& events) {
  nlohmann::json out = nlohmann::json::array();
  for (const StreamEvent& e : events) out.push_back(e.name + " " + e.json);
  return out;
}

// Where a Responses object's repeated request settings lie ("parallel_tool_calls" up to and including
// "truncation"): the generator stores them once, in the final response, and marks them @ECHO@ in events.
struct EchoSpan {
  size_t begin = std::string::npos, end = std::string::npos;
  bool found() const { return begin != std::string::npos && end != std::string::npos && end > begin; }
};
EchoSpan FindEcho(const std::string& response) {
  const std::string end_marker = "\"truncation\":\"disabled\",";
  EchoSpan span;
  span.begin = response.find("\"parallel_tool_calls\":");
  const size_t end = response.find(end_marker);
  if (end != std::string::npos) span.end = end + end_marker.size();
  return span;
}

void ReportFirstDifference(const std::string& name, const StreamRunResult& run,
                           const std::vector<std::vector<StreamEvent>>& expected, const std::string& response) {
  for (size_t i = 0; i < std::max(expected.size(), run.events_per_step.size()); ++i) {
    const auto got = i < run.events_per_step.size() ? StepJson(run.events_per_step[i]) : nlohmann::json();
    const auto want = i < expected.size() ? StepJson(expected[i]) : nlohmann::json();
    if (got != want) {
      ADD_FAILURE() << name << " step " << i << "\n got:  " << got.dump() << "\n want: " << want.dump();
      break;
    }
  }
  if (run.response != response) ADD_FAILURE() << "response\n got:  " << run.response << "\n want: " << response;
}

// A case's decoded text chunks (one token each).
std::vector<CompletionChunk> TextChunks(const nlohmann::json& c) {
  std::vector<CompletionChunk> chunks;
  for (const auto& text : c["chunks"]) chunks.push_back({text.get<std::string>(), 1});
  return chunks;
}

// Chat Completions chunks per push, stored without their common envelope.
std::vector<std::vector<StreamEvent>> ChatEvents(const nlohmann::json& pushes) {
  std::vector<std::vector<StreamEvent>> expected;
  for (const auto& step : pushes) {
    std::vector<StreamEvent> events;
    for (const auto& e : step) events.push_back({"", std::string(kEnvelope) + e.get<std::string>()});
    expected.push_back(std::move(events));
  }
  return expected;
}

// Named events per push, stored as "name data" with the repeated parts marked: @ECHO@ for the Responses
// request settings, @RESPONSE@ for the final response object (itself with its echo marked). An empty
// replacement leaves its mark alone.
std::vector<std::vector<StreamEvent>> NamedEvents(const nlohmann::json& pushes, const std::string& echo = "",
                                                  const std::string& stored_response = "") {
  std::vector<std::vector<StreamEvent>> expected;
  for (const auto& step : pushes) {
    std::vector<StreamEvent> events;
    for (const auto& e : step) {
      std::string text = e.get<std::string>();
      if (const size_t at = text.find("@RESPONSE@"); !stored_response.empty() && at != std::string::npos)
        text.replace(at, 10, stored_response);
      if (const size_t at = text.find("@ECHO@"); !echo.empty() && at != std::string::npos) text.replace(at, 6, echo);
      const size_t space = text.find(' ');
      events.push_back({text.substr(0, space), text.substr(space + 1)});
    }
    expected.push_back(std::move(events));
  }
  return expected;
}

// Whether a run gave the expected events and response; the first `max_reports` differences are printed.
bool SameAsOracle(const std::string& name, const StreamRunResult& run,
                  const std::vector<std::vector<StreamEvent>>& expected, const std::string& response, int* failures,
                  int max_reports = 3) {
  const bool same = run.events_per_step == expected && run.response == response;
  EXPECT_TRUE(same) << name;
  if (!same && ++*failures <= max_reports) ReportFirstDifference(name, run, expected, response);
  return same;
}

TEST(OutputParserGolden, ChatCompletionsChunksMatchOracle) {
  const std::vector<nlohmann::json> cases = LoadCases();
  ASSERT_GE(cases.size(), AtLeast(300));
  int failures = 0;
  for (const nlohmann::json& c : cases) {
    const std::vector<CompletionChunk> chunks = TextChunks(c);
    const StreamRunResult run = RunCompletion(Protocol::kChatCompletions, ParserOptions(c),
                                              TestResponseOptions(c), chunks, Finish(c), UsageCounts{11, 4, 0});
    SameAsOracle(c["name"], run, ChatEvents(c["pushes"]), c["response"], &failures);
  }
  PrintCounts("chat", static_cast<int>(cases.size()), failures);
  EXPECT_EQ(failures, 0);
}

TEST(OutputParserGolden, MessagesEventsMatchOracle) {
  const std::vector<nlohmann::json> cases = LoadCases();
  std::ifstream in(CasesPath("messages_cases.jsonl"));
  std::string line;
  size_t index = 0;
  int failures = 0;
  while (std::getline(in, line)) {
    const nlohmann::json golden = nlohmann::json::parse(line);
    ASSERT_LT(index, cases.size());
    const nlohmann::json& c = cases[index++];
    ASSERT_EQ(golden["name"], c["name"]);
    const std::vector<CompletionChunk> chunks = TextChunks(c);
    ResponseOptions options = TestResponseOptions(c);
    options.id = "msg-1";
    const StreamRunResult run =
        RunCompletion(Protocol::kMessages, ParserOptions(c), options, chunks, Finish(c), UsageCounts{11, 4, 0});
    SameAsOracle(c["name"], run, NamedEvents(golden["pushes"]), golden["response"], &failures);
  }
  EXPECT_GE(index, AtLeast(200));
  PrintCounts("messages", static_cast<int>(index), failures);
  EXPECT_EQ(failures, 0);
}

TEST(OutputParserGolden, ResponsesEventsMatchOracle) {
  const std::vector<nlohmann::json> cases = LoadCases();
  std::ifstream in(CasesPath("responses_cases.jsonl"));
  std::string line;
  size_t index = 0;
  int failures = 0;
  while (std::getline(in, line)) {
    const nlohmann::json golden = nlohmann::json::parse(line);
    ASSERT_LT(index, cases.size());
    const nlohmann::json& c = cases[index++];
    ASSERT_EQ(golden["name"], c["name"]);
    const std::vector<CompletionChunk> chunks = TextChunks(c);
    ResponseOptions options = TestResponseOptions(c);
    options.id = "resp-1";
    options.completed_at = 0;
    if (c["tools"].get<bool>()) {  // RESPONSES_TOOLS of gen_outputs.py, as the oracle echoes it
      options.responses_echo.tools =
          R"([{"type":"function","name":"get_weather","description":"Weather of a city","parameters":)"
          R"({"type":"object","properties":{"city":{"type":"string"}}},"strict":null}])";
    }
    const StreamRunResult run =
        RunCompletion(Protocol::kResponses, ParserOptions(c), options, chunks, Finish(c), UsageCounts{11, 4, 0});
    // The generator stored the repeated request settings once, in the final response.
    const std::string response = golden["response"];
    const EchoSpan span = FindEcho(response);
    ASSERT_TRUE(span.found());
    const std::string echo = response.substr(span.begin, span.end - span.begin);
    SameAsOracle(c["name"], run, NamedEvents(golden["pushes"], echo), response, &failures);
  }
  EXPECT_GE(index, AtLeast(120));
  PrintCounts("responses", static_cast<int>(index), failures);
  EXPECT_EQ(failures, 0);
}

// Responses completions for a request that declares the apply_patch custom tool, get_weather and a namespace
// (responses_custom_cases.jsonl: each line holds its case; the final response object is stored once and
// the request settings are left out of the events, as in responses_cases.jsonl).
TEST(OutputParserGolden, ResponsesCustomToolCallsMatchOracle) {
  std::ifstream in(CasesPath("responses_custom_cases.jsonl"));
  std::string line;
  int cases = 0, failures = 0;
  while (std::getline(in, line)) {
    const nlohmann::json c = nlohmann::json::parse(line);
    ++cases;
    const std::vector<CompletionChunk> chunks = TextChunks(c);
    ResponseOptions options = TestResponseOptions(c);
    options.completed_at = 0;
    options.custom_tools = {"apply_patch"};
    // The namespace member as the case's model names it (the other version's spelling stays unsplit).
    const bool v41 = c.value("model", std::string()) == "DeepSeek-V4.1-Flash";
    options.namespace_tools = {{v41 ? "docs::lookup" : "docs__lookup", "docs", "lookup"}};
    options.responses_echo.tools =  // CUSTOM_TOOLS of gen_outputs.py, as the oracle echoes it
        R"([{"type":"custom","name":"apply_patch"},{"type":"function","name":"get_weather","description":)"
        R"("Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}}},"strict":null},)"
        R"({"type":"namespace","name":"docs","description":"Docs","tools":[{"type":"function","name":"lookup",)"
        R"("description":null,"parameters":{"type":"object","properties":{"q":{"type":"string"}}},"strict":null}]}])";
    const StreamRunResult run =
        RunCompletion(Protocol::kResponses, ParserOptions(c), options, chunks, Finish(c), UsageCounts{11, 4, 0});
    const std::string response = c["response"];
    const EchoSpan span = FindEcho(response);
    ASSERT_TRUE(span.found());
    const std::string echo = response.substr(span.begin, span.end - span.begin);
    std::string stored_response = response;
    stored_response.replace(span.begin, span.end - span.begin, "@ECHO@");
    SameAsOracle(c["name"], run, NamedEvents(c["pushes"], echo, stored_response), response, &failures);
  }
  EXPECT_GE(cases, static_cast<int>(AtLeast(64)));
  PrintCounts("responses_custom", cases, failures);
  EXPECT_EQ(failures, 0);
}

std::string FromHex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

// Completions that arrive as tokens with log probabilities (logprob_cases.jsonl: the oracle got token ids
// and decoded them with the V4 tokenizer; we get each token's bytes and whether it is an added token): the
// logprobs entries of every chunk or event, and the usage's completion and reasoning tokens, must be the
// oracle's. The wide* cases put added tokens in every stage, `</think>` spelled as text, stop sequences
// inside a run of tokens and JSON opening inside a token.
// DEEPINFER_LOGPROB_CASES names another file of such cases (a wider run: gen_outputs.py --logprobs-only N).
TEST(OutputParserGolden, LogprobsMatchOracle) {
  const char* file = std::getenv("DEEPINFER_LOGPROB_CASES");
  const char* other = file != nullptr && *file != '\0' ? file : OtherCorpus();
  std::ifstream in(file != nullptr && *file != '\0' ? std::string(file) : CasesPath("logprob_cases.jsonl"));
  std::string line;
  int cases = 0, failures = 0;
  while (std::getline(in, line)) {
    const nlohmann::json c = nlohmann::json::parse(line);
    ++cases;
    std::vector<CompletionChunk> chunks;
    for (size_t p = 0; p < c["token_pushes"].size(); ++p) {
      const auto& push = c["token_pushes"][p];
      CompletionChunk chunk;
      chunk.text = c["push_texts"][p].get<std::string>();  // what the streaming detokenizer released
      chunk.token_count = static_cast<int64_t>(push.size());
      for (const auto& token : push) {
        TokenLogprob entry{FromHex(token[0]), token[1].get<double>(), {}, token.size() > 3 && token[3] == 1};
        for (const auto& alternative : token[2]) {
          entry.top_logprobs.push_back({FromHex(alternative[0]), alternative[1].get<double>()});
        }
        chunk.logprobs.push_back(std::move(entry));
      }
      chunks.push_back(std::move(chunk));
    }
    const bool chat = c["protocol"] == "chat";
    ResponseOptions options = TestResponseOptions(c);
    options.completed_at = 0;
    // The oracle's tokenizer, for the one text the stream should count: the reasoning (-1000 otherwise).
    const std::string reasoning = c["reasoning_count"][0];
    const int64_t reasoning_count = c["reasoning_count"][1];
    options.count_tokens = [reasoning, reasoning_count](std::string_view text) -> int64_t {
      return text == reasoning ? reasoning_count : -1000;
    };
    const StreamRunResult run = RunCompletion(chat ? Protocol::kChatCompletions : Protocol::kResponses,
                                              ParserOptions(c), options, chunks, Finish(c), UsageCounts{11, 4, 0});
    const std::string response = c["response"];
    std::string echo;
    if (!chat) {
      const EchoSpan span = FindEcho(response);
      ASSERT_TRUE(span.found());
      echo = response.substr(span.begin, span.end - span.begin);
    }
    SameAsOracle(c["name"], run, chat ? ChatEvents(c["pushes"]) : NamedEvents(c["pushes"], echo), response,
                 &failures, 20);
  }
  if (other == nullptr) {
    EXPECT_GE(cases, 90);  // 40 plain, 32 wider and 20 hand-made shapes
  }
  PrintCounts("logprobs", cases, failures);
  EXPECT_EQ(failures, 0);
}

}  // namespace
}  // namespace deepinfer::recipe
