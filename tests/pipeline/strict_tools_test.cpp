// Strict tools end to end inside the process, with the real DeepSeek V4 / V4.1 tokenizers: a chat request is
// parsed by the codec, ApplyStructuredOutput (pipeline/structured_output.h) turns its strict tools into the grammar
// whose logits mask the engine would run, and
//  - the DSML block deepseek-recipe's renderer writes for a historical call with valid arguments (random
//    ones, per seed) is accepted token by token, and the end-of-sentence token is allowed right after it;
//  - tokens sampled uniformly at random among the allowed ones (what random weights amount to) always
//    decode to a block that the codec's own output parser reads as calls of listed tools whose arguments
//    satisfy the schema (checked member by member below against the schema's own bounds);
//  - a bad strict schema is a 400 that names the tool and the path.
#include <gtest/gtest.h>

#include <random>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "recipe/output_parser.h"
#include "recipe/render.h"
#include "recipe/request.h"
#include "sampling/constraint_masks.h"
#include "sampling/grammar_mask.h"
#include "pipeline/prepare.h"
#include "pipeline/structured_output.h"
#include "tokenizer/locate.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::pipeline {
namespace {

using Json = nlohmann::ordered_json;

// Every member bounded but the array (an enum, an integer range, strings of 1-3 letters by a pattern, a
// boolean), so random sampling ends well within the step budget; `note` (a plain string, written raw) is only
// rendered.
const Json kWeather = Json::parse(R"({"type":"object","properties":{
  "city":{"type":"string","enum":["Paris","Rome","Oslo"]},
  "days":{"type":"integer","minimum":1,"maximum":7},
  "tags":{"type":"array","items":{"type":"string","pattern":"^[a-z]{1,3}$"}},
  "sunny":{"type":"boolean"}},
  "required":["city","days","tags","sunny"],"additionalProperties":false})");
const Json kNote = Json::parse(R"({"type":"object","properties":{"note":{"type":"string"},"n":{"type":"number"}},
  "required":["note","n"],"additionalProperties":false})");

Json Tools() {
  Json tools = Json::array();
  auto add = [&](const char* name, const Json& schema) {
    tools.push_back({{"type", "function"}, {"function", {{"name", name}, {"strict", true}, {"parameters", schema}}}});
  };
  add("get_weather", kWeather);
  add("take_note", kNote);
  return tools;
}

struct Setup {
  recipe::ModelVersion version;
  const char* tokenizer;
};

class StrictTools : public ::testing::TestWithParam<Setup> {
 protected:
  void SetUp() override {
    auto t = tokenizer::LoadTokenizer(GetParam().tokenizer);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    tok_ = std::make_unique<tokenizer::Tokenizer>(std::move(*t));
    options_.tokenizer = tok_.get();
    options_.model_version = GetParam().version;
    options_.constraint_compiler = std::make_shared<sampling::ConstraintCompiler>(tok_.get());
    eos_ = *tok_->TokenToId("<｜end▁of▁sentence｜>");
  }

  recipe::ParsedRequest Parse(const Json& body) {
    recipe::RequestOptions options;
    options.model_version = GetParam().version;
    auto outcome = recipe::ParseChatCompletionsRequest(body.dump(), options);
    EXPECT_TRUE(outcome.ok()) << outcome.error.message;
    return outcome.ok() ? *outcome.request : recipe::ParsedRequest{};
  }

  std::unique_ptr<sampling::LogitsMask> Mask(const Json& body) {
    recipe::ParsedRequest request = Parse(body);
    engine::RequestParams params;
    auto error = ApplyStructuredOutput(body.dump(), request, options_, &params);
    EXPECT_FALSE(error) << error->message;
    if (error || !params.constraint.grammar) return nullptr;
    // What the engine does with the spec: compile it (a hit: ApplyStructuredOutput compiled it), one mask per
    // output.
    const size_t hits = options_.constraint_compiler->hits();
    auto bound = options_.constraint_compiler->Compile(*params.constraint.grammar);
    EXPECT_TRUE(bound.ok());
    EXPECT_EQ(options_.constraint_compiler->hits(), hits + 1);
    if (!bound.ok()) return nullptr;
    return std::make_unique<sampling::GrammarLogitsMask>(*bound, params.constraint.grammar_start_after_token);
  }

  std::vector<int32_t> Allowed(sampling::LogitsMask* mask) {
    sampling::TokenBitmask bits(static_cast<int64_t>(tok_->vocab_size()));
    bool all = false;
    EXPECT_TRUE(mask->FillAllowed(&bits, &all).ok());
    EXPECT_FALSE(all);  // non-thinking: the constraint is active from the first token
    std::vector<int32_t> ids;
    for (int32_t id = 0; id < static_cast<int32_t>(tok_->vocab_size()); ++id)
      if (bits.allowed(id)) ids.push_back(id);
    return ids;
  }

  std::string BlockTag() const { return GetParam().version == recipe::ModelVersion::kV41 ? " calls" : "tool_calls"; }

  std::unique_ptr<tokenizer::Tokenizer> tok_;
  PrepareOptions options_;
  int32_t eos_ = -1;
};

Json Body(const Json& messages, const Json& tool_choice) {
  return {{"model", "m"}, {"messages", messages}, {"tools", Tools()}, {"tool_choice", tool_choice},
          {"thinking", {{"type", "disabled"}}}};
}

// Random arguments that satisfy the schemas (by construction from their bounds), in schema order.
Json RandomArguments(std::mt19937& rng, bool weather) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  const std::vector<std::string> pieces = {"a", "Z", " ", "\"", "\\", "\n", "<", ">", "é", "日", "{", "}", ":", "/"};
  auto text = [&](int max_len) {
    std::string s;
    for (int i = pick(max_len + 1); i > 0; --i) s += pieces[static_cast<size_t>(pick(static_cast<int>(pieces.size())))];
    return s;
  };
  Json a = Json::object();
  if (weather) {
    a["city"] = std::vector<std::string>{"Paris", "Rome", "Oslo"}[static_cast<size_t>(pick(3))];
    a["days"] = 1 + pick(7);
    a["tags"] = Json::array();
    for (int i = pick(3); i > 0; --i) {
      std::string t;
      for (int k = 1 + pick(3); k > 0; --k) t += static_cast<char>('a' + pick(26));
      a["tags"].push_back(t);
    }
    a["sunny"] = pick(2) == 1;
  } else {
    a["note"] = text(12);
    a["n"] = pick(2) ? Json(pick(1000) - 500) : Json(0.25 * (pick(40) - 20));
  }
  return a;
}

// The schema's bounds, checked by hand on parsed arguments.
void ExpectValidWeather(const Json& a) {
  ASSERT_TRUE(a.is_object()) << a.dump();
  ASSERT_EQ(a.size(), 4u) << a.dump();
  EXPECT_TRUE(a["city"] == "Paris" || a["city"] == "Rome" || a["city"] == "Oslo") << a.dump();
  ASSERT_TRUE(a["days"].is_number_integer()) << a.dump();
  EXPECT_GE(a["days"].get<int64_t>(), 1);
  EXPECT_LE(a["days"].get<int64_t>(), 7);
  ASSERT_TRUE(a["tags"].is_array()) << a.dump();
  for (const Json& t : a["tags"]) {
    ASSERT_TRUE(t.is_string()) << a.dump();
    const std::string s = t.get<std::string>();
    EXPECT_TRUE(s.size() >= 1 && s.size() <= 3) << a.dump();
    for (char c : s) EXPECT_TRUE(c >= 'a' && c <= 'z') << a.dump();
  }
  EXPECT_TRUE(a["sunny"].is_boolean()) << a.dump();
}

TEST_P(StrictTools, RenderedCallsAreAcceptedTokenByToken) {
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    std::mt19937 rng(seed);
    const bool weather = seed % 2 == 1;
    const Json args = RandomArguments(rng, weather);
    Json calls = Json::array();
    calls.push_back({{"id", "call_1"}, {"type", "function"},
                     {"function", {{"name", weather ? "get_weather" : "take_note"}, {"arguments", args.dump()}}}});
    if (seed % 3 == 0) {  // a second, parallel call
      calls.push_back({{"id", "call_2"}, {"type", "function"},
                       {"function", {{"name", "get_weather"}, {"arguments", RandomArguments(rng, true).dump()}}}});
    }
    Json messages = Json::array();
    messages.push_back({{"role", "user"}, {"content", "hi"}});
    messages.push_back({{"role", "assistant"}, {"content", ""}, {"tool_calls", calls}});
    for (const Json& c : calls) messages.push_back({{"role", "tool"}, {"tool_call_id", c["id"]}, {"content", "ok"}});
    messages.push_back({{"role", "user"}, {"content", "again"}});
    // Rendered with tool_choice auto, so that the historical block is the last one the prompt opens.
    recipe::ParsedRequest rendered = Parse(Body(messages, "auto"));
    auto prompt = recipe::RenderPrompt(rendered.conversation, GetParam().version);
    ASSERT_TRUE(prompt.ok()) << prompt.status().ToString();
    const std::string open = "\n\n<｜DSML｜" + BlockTag() + ">\n", close = "</｜DSML｜" + BlockTag() + ">";
    const size_t begin = prompt->text.rfind(open);
    ASSERT_NE(begin, std::string::npos);
    const size_t end = prompt->text.find(close, begin);
    ASSERT_NE(end, std::string::npos);
    const std::string block = prompt->text.substr(begin + open.size(), end + close.size() - begin - open.size());

    // The mask of a request with tool_choice "required": the prompt opened the block, the output is its rest.
    auto mask = Mask(Body(messages, "required"));
    ASSERT_TRUE(mask);
    for (int32_t id : tok_->EncodeWithAddedTokens(block)) {
      auto allowed = Allowed(mask.get());
      ASSERT_TRUE(std::binary_search(allowed.begin(), allowed.end(), id))
          << "seed " << seed << ": token " << id << " '" << tok_->TokenBytes(id) << "' refused in\n" << block;
      ASSERT_TRUE(mask->Accept(id).ok());
    }
    EXPECT_EQ(Allowed(mask.get()), std::vector<int32_t>{eos_}) << "seed " << seed;
  }
}

TEST_P(StrictTools, RandomTokensUnderTheMaskAreValidCalls) {
  for (uint32_t seed = 1; seed <= 8; ++seed) {
    std::mt19937 rng(seed);
    Json messages = Json::array({{{"role", "user"}, {"content", "weather?"}}});
    // A named tool: only get_weather may be called (take_note's raw note would let random tokens run on).
    Json choice = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
    auto mask = Mask(Body(messages, choice));
    ASSERT_TRUE(mask);
    std::vector<int32_t> ids;
    for (int step = 0; step < 2000 && !mask->Terminated(); ++step) {
      auto allowed = Allowed(mask.get());
      ASSERT_FALSE(allowed.empty()) << "seed " << seed << ": a dead end after " << tok_->Decode(ids);
      const int32_t id = allowed[rng() % allowed.size()];
      ASSERT_TRUE(mask->Accept(id).ok());
      ids.push_back(id);
    }
    ASSERT_TRUE(mask->Terminated()) << "seed " << seed << ": " << tok_->Decode(ids);
    ASSERT_EQ(ids.back(), eos_);
    ids.pop_back();
    // What the server's parser reads from it (the block opened in the prompt: starts_in_tool_calls).
    recipe::OutputParserOptions po;
    po.model_version = GetParam().version;
    po.starts_in_tool_calls = true;
    recipe::OutputParser parser(po);
    std::vector<recipe::OutputDelta> deltas;
    parser.Feed(tok_->Decode(ids), &deltas, true);
    parser.Finish(&deltas);
    EXPECT_TRUE(parser.finished()) << tok_->Decode(ids);
    std::vector<std::string> names, arguments;
    for (const auto& d : deltas) {
      if (d.kind == recipe::OutputDelta::Kind::kToolCallBegin) {
        names.push_back(d.text);
        arguments.emplace_back();
      } else if (d.kind == recipe::OutputDelta::Kind::kToolArguments) {
        ASSERT_FALSE(arguments.empty());
        arguments.back() += d.text;
      }
    }
    ASSERT_FALSE(names.empty()) << tok_->Decode(ids);
    for (size_t i = 0; i < names.size(); ++i) {
      EXPECT_EQ(names[i], "get_weather");
      ExpectValidWeather(Json::parse(arguments[i]));
    }
  }
}

TEST_P(StrictTools, AutoChoiceLeavesTextFreeAndOffersTheBlock) {
  auto mask = Mask(Body(Json::array({{{"role", "user"}, {"content", "hi"}}}), "auto"));
  ASSERT_TRUE(mask);
  // Text first: most of the vocabulary (every ordinary token that is whole UTF-8 without '｜') and the end.
  auto allowed = Allowed(mask.get());
  EXPECT_GT(allowed.size(), tok_->vocab_size() / 2);
  EXPECT_TRUE(std::binary_search(allowed.begin(), allowed.end(), eos_));
  const int32_t dsml = *tok_->TokenToId("｜DSML｜");
  EXPECT_FALSE(std::binary_search(allowed.begin(), allowed.end(), dsml));
  for (int32_t id : tok_->EncodeWithAddedTokens("Sure.\n\n<")) ASSERT_TRUE(mask->Accept(id).ok());
  allowed = Allowed(mask.get());
  EXPECT_TRUE(std::binary_search(allowed.begin(), allowed.end(), dsml));
}

TEST_P(StrictTools, BadStrictSchemaIsA400NamingToolAndPath) {
  Json body = Body(Json::array({{{"role", "user"}, {"content", "hi"}}}), "auto");
  body["tools"][1]["function"]["parameters"]["properties"]["note"]["pattern"] = "(?<=a)b";
  recipe::ParsedRequest request = Parse(body);
  engine::RequestParams params;
  auto error = ApplyStructuredOutput(body.dump(), request, options_, &params);
  ASSERT_TRUE(error);
  EXPECT_EQ(error->http_status, 400);
  EXPECT_EQ(error->param, "tools");
  EXPECT_NE(error->message.find("tool \"take_note\": parameters.properties.note"), std::string::npos) << error->message;
  EXPECT_TRUE(params.constraint.empty());
  // Chat tools without strict constrain nothing while no call is forced (forced_tools_test.cpp: when one is).
  Json loose = Body(Json::array({{{"role", "user"}, {"content", "hi"}}}), "auto");
  for (Json& t : loose["tools"]) t["function"].erase("strict");
  engine::RequestParams none;
  EXPECT_FALSE(ApplyStructuredOutput(loose.dump(), Parse(loose), options_, &none));
  EXPECT_TRUE(none.constraint.empty());
}

INSTANTIATE_TEST_SUITE_P(Versions, StrictTools,
                         ::testing::Values(Setup{recipe::ModelVersion::kV4, "deepseek-v4"},
                                           Setup{recipe::ModelVersion::kV41, "deepseek-v4.1"}),
                         [](const auto& p) { return p.param.version == recipe::ModelVersion::kV4 ? "V4" : "V41"; });

}  // namespace
}  // namespace deepinfer::pipeline
