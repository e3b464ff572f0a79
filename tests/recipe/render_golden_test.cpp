// Renders every request of the golden corpora (tools/recipe/gen_requests.py: rendered by the official
// deepseek-recipe package for V4 and V4.1, and by DeepSeek's encoding_dsv32.py for V3.2) and compares the
// prompt byte for byte. Token ids are compared in render_ids_slow_test.cpp.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/utf8.h"
#include "recipe/completion_options.h"
#include "recipe/render.h"
#include "render_corpus.h"
#include "recipe/request.h"

namespace deepinfer::recipe {
namespace {

using Json = nlohmann::ordered_json;

// The oracle names an arbitrary call (hash-map order) when several lack an output; deepinfer names the
// first (deviations.json). Compare the rest.
std::string MaskCallId(const std::string& message) {
  static const std::string kPrefix = "No tool output found for tool call ";
  return message.rfind(kPrefix, 0) == 0 ? kPrefix + "X." : message;
}

struct CorpusCounts {
  int rendered = 0, rejected = 0, messages = 0, deviating = 0;
};

void CheckVersion(Protocol protocol, const std::vector<Json>& corpus, const char* key, ModelVersion version,
                  size_t min_requests = 300, CorpusCounts* counts_out = nullptr) {
  ASSERT_GE(corpus.size(), min_requests);
  CorpusCounts counts;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const Json& line = corpus[i];
    const Json& want = line.at(key);
    RequestOptions options;
    options.model_version = version;
    ParseOutcome parsed = ParseRequest(protocol, RequestBody(line), options);
    Result<RenderedPrompt> prompt = Status::InvalidArgument("not parsed");
    if (parsed.ok()) prompt = RenderPrompt(parsed.request->conversation, version);
    if (const Json* deviation = DeviationOf(line)) {
      // A documented deviation: either the oracle's outcome after all, or exactly the one documented.
      const bool same = want.is_object() ? !parsed.ok() || !prompt.ok()
                                         : parsed.ok() && prompt.ok() && prompt->text == want.get<std::string>();
      if (!same) {
        ++counts.deviating;
        const std::string ours = deviation->at("ours").get<std::string>();
        if (ours == "accepts") {
          EXPECT_TRUE(parsed.ok() && prompt.ok()) << "request #" << i << ": " << deviation->at("tag");
        } else {
          ASSERT_FALSE(parsed.ok()) << "request #" << i << ": " << deviation->at("tag");
          EXPECT_EQ("rejects: " + parsed.error.message, ours) << "request #" << i;
        }
      }
      continue;
    }
    if (want.is_object()) {
      ++counts.rejected;
      EXPECT_FALSE(parsed.ok() && prompt.ok()) << "request #" << i << " should be rejected (HTTP "
                                               << want.at("error") << ")";
      if (!parsed.ok()) {
        EXPECT_EQ(parsed.error.http_status, want.at("error").get<int>()) << "request #" << i;
        // The oracle's message where it is its own (a conversion error), not serde's text for a body it
        // could not deserialize ("decode").
        if (want.contains("message")) {
          ++counts.messages;
          EXPECT_EQ(MaskCallId(parsed.error.message), MaskCallId(want.at("message").get<std::string>()))
              << "request #" << i << " " << key;
          EXPECT_EQ(parsed.error.type, want.value("type", std::string("invalid_request_error"))) << "request #" << i;
        }
      }
      continue;
    }
    ++counts.rendered;
    ASSERT_TRUE(parsed.ok()) << "request #" << i << ": " << parsed.error.param << ": " << parsed.error.message;
    ASSERT_TRUE(prompt.ok()) << "request #" << i << ": " << prompt.status().ToString();
    const std::string& text = want.get_ref<const std::string&>();
    EXPECT_EQ(prompt->text, text) << "request #" << i << " " << key << " " << FirstDifference(text, prompt->text);
    if (version == ModelVersion::kV41 && line.contains("v4.1_special")) {
      // The oracle's control-token ranges, as code-point offsets, must be ours.
      std::vector<int32_t> offsets;
      for (const SpecialRange& r : prompt->special_ranges) {
        offsets.push_back(static_cast<int32_t>(utf8::CountCodePoints(std::string_view(prompt->text).substr(0, r.begin))));
        offsets.push_back(static_cast<int32_t>(utf8::CountCodePoints(std::string_view(prompt->text).substr(0, r.end))));
      }
      EXPECT_EQ(static_cast<int64_t>(offsets.size()), line["v4.1_special"][0].get<int64_t>()) << "request #" << i;
      EXPECT_EQ(Fnv1a64Hex(offsets), line["v4.1_special"][1].get<std::string>()) << "request #" << i;
    }
    // Every marked range spells its control token, in ascending disjoint order.
    size_t end = 0;
    for (const SpecialRange& r : prompt->special_ranges) {
      EXPECT_GE(r.begin, end);
      EXPECT_EQ(prompt->text.substr(r.begin, r.end - r.begin), SpecialTokenSpelling(r.token));
      end = r.end;
    }
  }
  // The corpus must exercise both outcomes.
  EXPECT_GT(counts.rendered, static_cast<int>(corpus.size() / 2));
  EXPECT_GT(counts.rejected, 5);
  if (counts_out) *counts_out = counts;
}

constexpr Protocol kChat = Protocol::kChatCompletions;
constexpr Protocol kAnthropic = Protocol::kMessages;
TEST(RenderGolden, ChatV4) { CheckVersion(kChat, LoadCorpus("chat.jsonl"), "v4", ModelVersion::kV4); }
TEST(RenderGolden, ChatV41) { CheckVersion(kChat, LoadCorpus("chat.jsonl"), "v4.1", ModelVersion::kV41); }
TEST(RenderGolden, ChatV32) { CheckVersion(kChat, LoadCorpus("chat.jsonl"), "v3.2", ModelVersion::kV32); }
TEST(RenderGolden, AnthropicV4) { CheckVersion(kAnthropic, LoadCorpus("anthropic.jsonl"), "v4", ModelVersion::kV4); }
TEST(RenderGolden, AnthropicV41) {
  CheckVersion(kAnthropic, LoadCorpus("anthropic.jsonl"), "v4.1", ModelVersion::kV41);
}
TEST(RenderGolden, AnthropicV32) {
  CheckVersion(kAnthropic, LoadCorpus("anthropic.jsonl"), "v3.2", ModelVersion::kV32);
}

constexpr Protocol kResponses = Protocol::kResponses;
TEST(RenderGolden, ResponsesV4) { CheckVersion(kResponses, LoadCorpus("responses.jsonl"), "v4", ModelVersion::kV4); }
TEST(RenderGolden, ResponsesV41) {
  CheckVersion(kResponses, LoadCorpus("responses.jsonl"), "v4.1", ModelVersion::kV41);
}
TEST(RenderGolden, ResponsesV32) {
  CheckVersion(kResponses, LoadCorpus("responses.jsonl"), "v3.2", ModelVersion::kV32);
}

// Responses requests around the apply_patch custom tool and the echoed settings (gen_requests.py
// --protocol responses_features).
TEST(RenderGolden, ResponsesFeaturesV4) {
  CheckVersion(kResponses, LoadCorpus("responses_features.jsonl"), "v4", ModelVersion::kV4, 200);
}
TEST(RenderGolden, ResponsesFeaturesV41) {
  CheckVersion(kResponses, LoadCorpus("responses_features.jsonl"), "v4.1", ModelVersion::kV41, 200);
}
TEST(RenderGolden, ResponsesFeaturesV32) {
  CheckVersion(kResponses, LoadCorpus("responses_features.jsonl"), "v3.2", ModelVersion::kV32, 200);
}

// The edge classes (tools/recipe/edge_requests.py): what real clients send beyond the basic corpora -
// Responses history as agents replay it, strict and keyword-rich schemas, acceptance edges, edge numbers.
// Each line is rendered for V4, V4.1 and V3.2.
TEST(RenderGolden, ChatEdgeV4) { CheckVersion(kChat, LoadCorpus("chat_edge.jsonl"), "v4", ModelVersion::kV4, 250); }
TEST(RenderGolden, ChatEdgeV41) { CheckVersion(kChat, LoadCorpus("chat_edge.jsonl"), "v4.1", ModelVersion::kV41, 250); }
TEST(RenderGolden, ChatEdgeV32) { CheckVersion(kChat, LoadCorpus("chat_edge.jsonl"), "v3.2", ModelVersion::kV32, 250); }
TEST(RenderGolden, ResponsesHistoryV4) {
  CheckVersion(kResponses, LoadCorpus("responses_history.jsonl"), "v4", ModelVersion::kV4, 250);
}
TEST(RenderGolden, ResponsesHistoryV41) {
  CheckVersion(kResponses, LoadCorpus("responses_history.jsonl"), "v4.1", ModelVersion::kV41, 250);
}
TEST(RenderGolden, ResponsesHistoryV32) {
  CheckVersion(kResponses, LoadCorpus("responses_history.jsonl"), "v3.2", ModelVersion::kV32, 250);
}
TEST(RenderGolden, MessagesEdgeV4) {
  CheckVersion(kAnthropic, LoadCorpus("messages_edge.jsonl"), "v4", ModelVersion::kV4, 250);
}
TEST(RenderGolden, MessagesEdgeV41) {
  CheckVersion(kAnthropic, LoadCorpus("messages_edge.jsonl"), "v4.1", ModelVersion::kV41, 250);
}
TEST(RenderGolden, MessagesEdgeV32) {
  CheckVersion(kAnthropic, LoadCorpus("messages_edge.jsonl"), "v3.2", ModelVersion::kV32, 250);
}

// Every tagged deviation of the corpora is one that deviations.json documents, and each documented one
// occurs (a deviation nothing exercises would be untested).
TEST(RenderGolden, DeviationsAreDocumentedAndExercised) {
  std::map<std::string, int> seen;
  for (const char* name :
       {"chat_edge.jsonl", "responses_history.jsonl", "responses_features.jsonl", "messages_edge.jsonl"}) {
    for (const Json& line : LoadCorpus(name)) {
      if (const Json* d = DeviationOf(line)) ++seen[d->at("tag").get<std::string>()];
    }
  }
  for (const Json& d : LoadDeviations()) EXPECT_GT(seen[d.at("tag").get<std::string>()], 0) << d.at("tag");
}

// Every accepted request of that corpus echoes its settings exactly as the oracle's response objects do.
TEST(ResponsesEchoGolden, ParsedRequestEchoesLikeTheOracle) {
  int checked = 0;
  for (const Json& line : LoadCorpus("responses_features.jsonl")) {
    if (!line.contains("echo")) continue;
    const ParseOutcome parsed = ParseRequest(kResponses, RequestBody(line));
    ASSERT_TRUE(parsed.ok()) << line.at("request").dump();
    const ResponseOptions options = ResponseOptionsFor(*parsed.request);
    const ResponsesEcho& echo = options.responses_echo;
    const Json& want = line.at("echo");
    const std::pair<const char*, const std::string*> fields[] = {
        {"instructions", &echo.instructions}, {"max_output_tokens", &echo.max_output_tokens},
        {"reasoning", &echo.reasoning},       {"temperature", &echo.temperature},
        {"text", &echo.text},                 {"tool_choice", &echo.tool_choice},
        {"tools", &echo.tools},               {"top_logprobs", &echo.top_logprobs},
        {"top_p", &echo.top_p},               {"user", &echo.user}};
    for (const auto& [key, got] : fields) {
      EXPECT_EQ(*got, want.at(key).get<std::string>()) << key << " of " << line.at("request").dump();
    }
    ++checked;
  }
  EXPECT_GT(checked, 150);
}

}  // namespace
}  // namespace deepinfer::recipe
