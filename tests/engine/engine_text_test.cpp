// The engine's text side with a real tokenizer (the V4 tokenizer beside the tiny preset's random weights
// and 129,280-token vocabulary): token bytes and control flags, detokenized text, and stop strings matched
// across token boundaries and cut from the text.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "core/utf8.h"
#include "engine_test_support.h"
#include "model/deepseek_v4/v4_init.h"
#include "tokenizer/locate.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::engine {
namespace {

class EngineText : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string((std::filesystem::temp_directory_path() / ("engine_text_" + std::to_string(::getpid()))).string());
    auto config = model::V4PresetConfig("tiny");
    ASSERT_TRUE(config.ok());
    ASSERT_TRUE(model::WriteRandomV4Checkpoint(*config, *dir_, 7, model::V4InitFormat::kBF16).ok());
    auto t = tokenizer::LoadTokenizer("deepseek-v4");
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    tokenizer_ = new tokenizer::Tokenizer(std::move(t).value());
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
    delete tokenizer_;
  }

  std::unique_ptr<Engine> Make(const std::string& dir = *dir_, std::vector<int32_t> eos_token_ids = {}) {
    model::LoadOptions load;
    load.prefault = false;
    auto m = model::LoadCausalLM(dir, load);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    EngineOptions o;
    o.eos_token_ids = std::move(eos_token_ids);
    o.kv_cache_bytes = int64_t{256} << 20;
    o.tokenizer = tokenizer_;
    auto e = Engine::Create(std::move(m).value(), o);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return std::move(e).value();
  }

  static GenerateOutput::Sequence Run(Engine& e, const std::vector<int32_t>& prompt, RequestParams p) {
    auto r = e.Generate(std::vector<std::vector<int32_t>>{prompt}, p);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return (*r)[0].sequences[0];
  }

  static std::string* dir_;
  static tokenizer::Tokenizer* tokenizer_;
};

std::string* EngineText::dir_ = nullptr;
tokenizer::Tokenizer* EngineText::tokenizer_ = nullptr;

RequestParams GreedyWithLogprobs(int64_t n) { return test_support::GreedyProbe(n, 2); }

TEST_F(EngineText, BytesControlFlagsAndTextFollowTheTokenizer) {
  auto e = Make();
  const std::vector<int32_t> prompt = tokenizer_->EncodeText("The quick brown fox jumps over the lazy dog.");
  const GenerateOutput::Sequence s = Run(*e, prompt, GreedyWithLogprobs(40));
  ASSERT_EQ(s.tokens.size(), 40u);
  std::vector<int32_t> ids;
  std::string bytes;
  for (const GeneratedToken& t : s.tokens) {
    ids.push_back(t.id);
    bytes += t.bytes;
    EXPECT_EQ(t.bytes, tokenizer_->TokenBytes(t.id));
    EXPECT_EQ(t.control, tokenizer_->IsAddedToken(t.id));
    ASSERT_EQ(t.top_logprobs.size(), 2u);
    EXPECT_EQ(t.top_logprobs[0].bytes, tokenizer_->TokenBytes(t.top_logprobs[0].id));
  }
  EXPECT_EQ(s.text, tokenizer_->Decode(ids, /*skip_special=*/true));
}

TEST_F(EngineText, StopStringsSpanTokensAndAreCutFromTheText) {
  auto e = Make();
  const std::vector<int32_t> prompt = tokenizer_->EncodeText("Once upon a time");
  const GenerateOutput::Sequence free_run = Run(*e, prompt, GreedyWithLogprobs(40));
  // A stop string of whole characters from the middle of the text (random weights' text; greedy, so the
  // same every run), long enough to span several tokens.
  const std::string& text = free_run.text;
  ASSERT_GT(text.size(), 24u);
  size_t from = text.size() / 3, to = from + 7;
  while (from < text.size() && (static_cast<unsigned char>(text[from]) & 0xC0) == 0x80) ++from;
  while (to < text.size() && (static_cast<unsigned char>(text[to]) & 0xC0) == 0x80) ++to;
  const std::string stop = text.substr(from, to - from);
  const size_t at = text.find(stop);
  ASSERT_NE(at, std::string::npos);

  RequestParams p = GreedyWithLogprobs(40);
  p.sampling.stop = {stop};
  const GenerateOutput::Sequence stopped = Run(*e, prompt, p);
  EXPECT_EQ(stopped.finish, FinishReason::kStop);
  EXPECT_EQ(stopped.stop_string, stop);
  EXPECT_EQ(stopped.text, text.substr(0, at));
  // The tokens up to the one completing the stop were reported, none after it.
  std::vector<int32_t> seen;
  for (const GeneratedToken& t : stopped.tokens) seen.push_back(t.id);
  EXPECT_NE(tokenizer_->Decode(seen, true).find(stop), std::string::npos);
  seen.pop_back();
  EXPECT_EQ(tokenizer_->Decode(seen, true).find(stop), std::string::npos);

  p.sampling.include_stop_str_in_output = true;
  EXPECT_EQ(Run(*e, prompt, p).text, text.substr(0, at + stop.size()));
}

// A continuation of an interrupted output (its tokens so far at the prompt's end, primed_output_tokens of
// them) reports the text the uninterrupted output would have gone on with: a character whose first byte came
// before the cut is completed, and a stop string that spans the cut is found.
TEST_F(EngineText, PrimedOutputTokensContinueTheInterruptedText) {
  auto e = Make();
  // The byte-level vocabulary has a token for each single byte; "中" is E4 B8 AD.
  auto byte_token = [&](unsigned char b) {
    for (int32_t id = 0; id < static_cast<int32_t>(tokenizer_->vocab_size()); ++id)
      if (tokenizer_->TokenBytes(id) == std::string(1, static_cast<char>(b))) return id;
    ADD_FAILURE() << "no token for byte " << int{b};
    return int32_t{0};
  };
  const std::vector<int32_t> prompt = tokenizer_->EncodeText("Say it:");
  const std::vector<int32_t> rest = tokenizer_->EncodeText("! done");
  RequestParams p;
  p.sampling.max_tokens = static_cast<int64_t>(rest.size()) + 2;
  std::vector<int32_t> script = {byte_token(0xB8), byte_token(0xAD)};
  script.insert(script.end(), rest.begin(), rest.end());
  p.constraint.scripted_tokens = script;
  std::vector<int32_t> continued = prompt;
  continued.push_back(byte_token(0xE4));  // the interrupted output's one token, an incomplete character
  p.primed_output_tokens = 1;
  EXPECT_EQ(Run(*e, continued, p).text, "\u4e2d! done");
  // Unprimed, the continuation bytes stand alone: each is a replacement character.
  p.primed_output_tokens = 0;
  EXPECT_EQ(Run(*e, continued, p).text, "\ufffd\ufffd! done");

  // A stop string across the cut: "it:!" begins in the primed tokens (the prompt's last ones here).
  p.sampling.stop = {"it:!"};
  p.primed_output_tokens = static_cast<int64_t>(tokenizer_->EncodeText(" it:").size());
  p.constraint.scripted_tokens = rest;
  p.sampling.max_tokens = static_cast<int64_t>(rest.size());
  const GenerateOutput::Sequence stopped = Run(*e, prompt, p);
  EXPECT_EQ(stopped.finish, FinishReason::kStop);
  EXPECT_EQ(stopped.text, "");
  p.primed_output_tokens = 0;
  EXPECT_EQ(Run(*e, prompt, p).text, "! done");

  // At least one prompt token is the prompt's own.
  p.primed_output_tokens = static_cast<int64_t>(prompt.size());
  EXPECT_FALSE(e->Generate(std::vector<std::vector<int32_t>>{prompt}, p).ok());
}

// End-of-sequence ids are config.json's and the tokenizer's end-of-sentence control token;
// EngineOptions::eos_token_ids replaces both.
TEST_F(EngineText, TheTokenizersEndOfSentenceEndsGenerationUnlessOverridden) {
  const std::optional<int32_t> eos = tokenizer_->TokenToId("<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>");
  ASSERT_TRUE(eos.has_value());
  const int32_t config_eos = *eos == 3 ? 4 : 3;
  // A copy of the checkpoint whose config.json names another end token than the tokenizer's.
  const std::string dir = *dir_ + "_eos";
  std::filesystem::remove_all(dir);
  std::filesystem::copy(*dir_, dir);
  std::stringstream config;
  config << std::ifstream(dir + "/config.json").rdbuf();
  const std::regex field("\"eos_token_id\"\\s*:\\s*[0-9]+");
  ASSERT_TRUE(std::regex_search(config.str(), field));
  std::ofstream(dir + "/config.json") << std::regex_replace(config.str(), field,
                                                            "\"eos_token_id\": " + std::to_string(config_eos));

  RequestParams p;
  p.sampling.temperature = 0;
  p.sampling.max_tokens = 10;
  const std::vector<int32_t> script = {5, *eos, 6};
  p.constraint.scripted_tokens = script;
  const std::vector<int32_t> prompt = tokenizer_->EncodeText("Once upon a time");
  std::vector<int32_t> ids;
  {
    auto e = Make(dir);
    const GenerateOutput::Sequence s = Run(*e, prompt, p);
    for (const GeneratedToken& t : s.tokens) ids.push_back(t.id);
    EXPECT_EQ(ids, std::vector<int32_t>{5});
    EXPECT_EQ(s.finish, FinishReason::kStop);
  }
  {
    auto e = Make(dir, {config_eos});
    const GenerateOutput::Sequence s = Run(*e, prompt, p);
    ids.clear();
    for (const GeneratedToken& t : s.tokens) ids.push_back(t.id);
    EXPECT_EQ(ids, script);  // the end-of-sentence token is an ordinary token now; the script ends it
    EXPECT_EQ(s.finish, FinishReason::kStop);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace deepinfer::engine
