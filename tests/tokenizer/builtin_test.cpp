// The builtin tokenizers (data/tokenizers/, embedded) and how a tokenizer is named (tokenizer/locate.h).
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "core/hash.h"
#include "core/mapped_file.h"
#include "tokenizer/builtin.h"
#include "tokenizer/locate.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::tokenizer {
namespace {

namespace fs = std::filesystem;

TEST(BuiltinTokenizers, EveryOneLoadsWithTheModelsVocabulary) {
  // Vocabulary sizes from the files themselves: V3 128,815 ids (max added id 128814), V4 and V4.1 129,280
  // (max added id 129279), equal to the V4 configs' vocab_size.
  for (auto [name, vocab] : {std::pair{"deepseek-v3", 128815u}, {"deepseek-v4", 129280u}, {"deepseek-v4.1", 129280u}}) {
    auto t = LoadTokenizer(name);
    ASSERT_TRUE(t.ok()) << name << ": " << t.status().message();
    EXPECT_EQ(t->vocab_size(), vocab) << name;
    // The vocabulary and merges are shared: ordinary text has the same ids in all three.
    EXPECT_EQ(t->EncodeText("Hello, 世界"), LoadTokenizer("deepseek-v3")->EncodeText("Hello, 世界")) << name;
  }
}

TEST(BuiltinTokenizers, V41IsV4WithItsNineEntriesRewritten) {
  // data/tokenizers/deepseek-v4.1/README.md: 128799 is <｜System｜> only in V4.1, <｜image｜> (129279) only in V4,
  // 129264 is <｜image2｜> in V4 and <｜deepseek_image｜> in V4.1.
  auto v4 = LoadTokenizer("deepseek-v4");
  auto v41 = LoadTokenizer("deepseek-v4.1");
  ASSERT_TRUE(v4.ok() && v41.ok());
  EXPECT_EQ(v41->TokenToId("<｜System｜>"), 128799);
  EXPECT_FALSE(v4->TokenToId("<｜System｜>").has_value());
  EXPECT_EQ(v4->TokenToId("<｜image｜>"), 129279);
  EXPECT_FALSE(v41->TokenToId("<｜image｜>").has_value());
  EXPECT_EQ(v4->TokenToId("<｜image2｜>"), 129264);
  EXPECT_EQ(v41->TokenToId("<｜deepseek_image｜>"), 129264);
  for (const char* same : {"<｜User｜>", "<｜Assistant｜>", "<think>", "</think>", "｜DSML｜", "<｜latest_reminder｜>"}) {
    EXPECT_EQ(v4->TokenToId(same), v41->TokenToId(same)) << same;
    EXPECT_TRUE(v41->TokenToId(same).has_value()) << same;
  }
  // Byte sizes of the upstream files (README: 6,367,146 and 6,367,257 bytes); the content hash is checked
  // by BuiltinTokenizerJson itself on every call.
  EXPECT_EQ(BuiltinTokenizerJson("deepseek-v4")->size(), 6367146u);
  EXPECT_EQ(BuiltinTokenizerJson("deepseek-v4.1")->size(), 6367257u);
  EXPECT_EQ(BuiltinTokenizerJson("deepseek-v3")->size(), 7847652u);
}

TEST(BuiltinTokenizers, UnknownNamesAreNotFound) {
  EXPECT_EQ(BuiltinTokenizerJson("deepseek-v9").status().code(), StatusCode::kNotFound);
  auto missing = ResolveTokenizer("no-such-tokenizer");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("deepseek-v3, deepseek-v4, deepseek-v4.1"), std::string::npos);
}

class TokenizerNaming : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(testing::TempDir()) / ("naming_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    unsetenv("DEEPINFER_TOKENIZER");
  }
  void TearDown() override {
    unsetenv("DEEPINFER_TOKENIZER");
    fs::remove_all(dir_);
  }
  fs::path dir_;
};

TEST_F(TokenizerNaming, DefaultIsTheCallersBuiltinUnlessTheEnvironmentNamesOne) {
  EXPECT_EQ(ResolveTokenizer("")->builtin, "deepseek-v4");
  EXPECT_EQ(ResolveTokenizer("", "deepseek-v3")->builtin, "deepseek-v3");
  setenv("DEEPINFER_TOKENIZER", "deepseek-v4.1", 1);
  EXPECT_EQ(ResolveTokenizer("")->builtin, "deepseek-v4.1");
  EXPECT_EQ(ResolveTokenizer("deepseek-v3")->builtin, "deepseek-v3");  // an explicit name beats the variable
}

TEST_F(TokenizerNaming, AnExistingPathWinsOverABuiltinName) {
  const fs::path cwd = fs::current_path();
  fs::current_path(dir_);
  std::ofstream("deepseek-v4") << "{}";
  auto source = ResolveTokenizer("deepseek-v4");
  fs::current_path(cwd);
  ASSERT_TRUE(source.ok());
  EXPECT_EQ(source->path, "deepseek-v4");
  EXPECT_TRUE(source->builtin.empty());
}

TEST_F(TokenizerNaming, WrittenFilesAreTheUpstreamBytesAndLoadBack) {
  auto source = ResolveTokenizer("deepseek-v4.1");
  ASSERT_TRUE(source.ok());
  ASSERT_TRUE(WriteTokenizerFiles(*source, dir_.string()).ok());
  auto written = ReadFileToString((dir_ / "tokenizer.json").string());
  ASSERT_TRUE(written.ok());
  EXPECT_EQ(*written, *BuiltinTokenizerJson("deepseek-v4.1"));
  EXPECT_EQ(ReadFileToString((dir_ / "tokenizer_config.json").string())->size(), 801u);
  // The directory now names a tokenizer, and copying from it carries the config along.
  auto from_dir = ResolveTokenizer(dir_.string());
  ASSERT_TRUE(from_dir.ok());
  EXPECT_EQ(from_dir->path, (dir_ / "tokenizer.json").string());
  EXPECT_EQ(LoadTokenizer(*from_dir)->TokenToId("<｜System｜>"), 128799);
  const fs::path copy = dir_ / "copy";
  fs::create_directories(copy);
  ASSERT_TRUE(WriteTokenizerFiles(*from_dir, copy.string()).ok());
  EXPECT_TRUE(fs::exists(copy / "tokenizer_config.json"));
  EXPECT_FALSE(ResolveTokenizer(copy.string() + "/nothing").ok());
  fs::create_directories(dir_ / "empty");
  EXPECT_EQ(ResolveTokenizer((dir_ / "empty").string()).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace deepinfer::tokenizer
