#include "core/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

namespace deepinfer {
namespace {

namespace fs = std::filesystem;

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("deepinfer_st_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  // Writes a raw file: 8-byte length + header text + data bytes.
  std::string WriteRaw(const std::string& name, const std::string& header, size_t data_bytes,
                       std::optional<uint64_t> declared_len = std::nullopt) {
    std::ofstream out(Path(name), std::ios::binary);
    uint64_t len = declared_len.value_or(header.size());
    char buf[8];
    for (int i = 0; i < 8; ++i) buf[i] = static_cast<char>((len >> (8 * i)) & 0xFF);
    out.write(buf, 8);
    out << header;
    out << std::string(data_bytes, '\0');
    return Path(name);
  }

  fs::path dir_;
};

TEST_F(SafetensorsTest, WriteThenReadRoundTrips) {
  std::vector<float> a = {1.0f, -2.5f, 3.25f, 0.0f, 7.0f, 8.0f};
  std::vector<uint16_t> b = {0x3f80, 0xc000};
  std::vector<uint8_t> c = {0x12, 0x34, 0x56};
  std::vector<TensorToWrite> tensors = {
      {"layers.0.w", DType::kF32, {2, 3}, {reinterpret_cast<const char*>(a.data()), a.size() * 4}},
      {"layers.0.b", DType::kBF16, {2}, {reinterpret_cast<const char*>(b.data()), b.size() * 2}},
      {"experts.w_fp4", DType::kU8, {1, 3}, {reinterpret_cast<const char*>(c.data()), c.size()}},
  };
  ASSERT_TRUE(WriteSafetensors(Path("m.safetensors"), tensors, {{"format", "pt"}}).ok());
  auto file = SafetensorsFile::Open(Path("m.safetensors"));
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->metadata().at("format"), "pt");
  const TensorInfo* w = file->Find("layers.0.w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype, DType::kF32);
  EXPECT_EQ(w->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(w->numel(), 6);
  EXPECT_EQ(std::memcmp(w->data, a.data(), 24), 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(w->data) % 8, 0u);  // the writer pads the header to 8 bytes
  EXPECT_EQ(std::memcmp(file->Find("experts.w_fp4")->data, c.data(), 3), 0);
  EXPECT_EQ(file->Find("missing"), nullptr);
}

TEST_F(SafetensorsTest, ShardedCheckpointThroughIndex) {
  std::vector<float> x(4, 1.0f), y(8, 2.0f);
  ASSERT_TRUE(WriteSafetensors(Path("model-00001-of-00002.safetensors"),
                               {{"a", DType::kF32, {4}, {reinterpret_cast<const char*>(x.data()), 16}}}).ok());
  ASSERT_TRUE(WriteSafetensors(Path("model-00002-of-00002.safetensors"),
                               {{"b", DType::kF32, {2, 4}, {reinterpret_cast<const char*>(y.data()), 32}}}).ok());
  std::ofstream(Path("model.safetensors.index.json"))
      << R"({"metadata": {"total_size": 48}, "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}})";
  auto ckpt = Checkpoint::Open(dir_.string());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().ToString();
  EXPECT_EQ(ckpt->num_files(), 2u);
  EXPECT_EQ(ckpt->tensors().size(), 2u);
  EXPECT_EQ(ckpt->total_params(), 12);
  EXPECT_EQ(ckpt->total_bytes(), 48u);
  ASSERT_NE(ckpt->Find("b"), nullptr);
  EXPECT_EQ(reinterpret_cast<const float*>(ckpt->Find("b")->data)[7], 2.0f);

  fs::remove(Path("model-00002-of-00002.safetensors"));
  auto missing = Checkpoint::Open(dir_.string());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("model-00002-of-00002.safetensors"), std::string::npos);
}

struct Malformed {
  std::string name;
  std::string header;
  size_t data_bytes;
  std::optional<uint64_t> declared_len;
  std::string expected_fragment;
};

// Each malformed file must give a one-line error naming the file and the problem.
TEST_F(SafetensorsTest, MalformedFilesGiveOneLineErrors) {
  const std::string ok_entry = R"("t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]})";
  std::vector<Malformed> cases = {
      {"len_past_end", "{}", 0, 1000, "runs past the end"},
      {"huge_len", "{}", 0, 1ull << 40, "exceeds"},
      {"bad_json", "{\"t\": [", 0, std::nullopt, "not valid JSON"},
      {"not_object", "[1, 2]", 0, std::nullopt, "not a JSON object"},
      {"unknown_dtype", R"({"t": {"dtype": "F128", "shape": [1], "data_offsets": [0, 16]}})", 16, std::nullopt,
       "unknown dtype 'F128'"},
      {"end_out_of_range", ok_entry.substr(0, 0) + R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})",
       4, std::nullopt, "past the data section"},
      {"begin_after_end", R"({"t": {"dtype": "F32", "shape": [0], "data_offsets": [8, 0]}})", 8, std::nullopt,
       "begin 8 > end 0"},
      {"shape_mismatch", R"({"t": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8, std::nullopt,
       "shape needs 3 x 4 bytes"},
      {"overlap", R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
       12, std::nullopt, "overlap"},
      {"negative_dim", R"({"t": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4, std::nullopt,
       "non-negative"},
      {"missing_offsets", R"({"t": {"dtype": "F32", "shape": [1]}})", 4, std::nullopt, "data_offsets"},
      {"bad_metadata", R"({"__metadata__": {"k": 1}})", 0, std::nullopt, "__metadata__"},
      {"shape_overflow", R"({"t": {"dtype": "F32", "shape": [4294967296, 4294967296, 4], "data_offsets": [0, 4]}})",
       4, std::nullopt, "overflow"},
  };
  for (const auto& c : cases) {
    const std::string path = WriteRaw(c.name + ".safetensors", c.header, c.data_bytes, c.declared_len);
    auto file = SafetensorsFile::Open(path);
    ASSERT_FALSE(file.ok()) << c.name;
    const std::string& msg = file.status().message();
    EXPECT_NE(msg.find(path), std::string::npos) << c.name << ": " << msg;
    EXPECT_NE(msg.find(c.expected_fragment), std::string::npos) << c.name << ": " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << c.name << ": " << msg;
  }
  std::ofstream(Path("short.safetensors")) << "abc";
  auto truncated = SafetensorsFile::Open(Path("short.safetensors"));
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("truncated"), std::string::npos);
}

// Property: no prefix of a valid file, and no single corrupted byte, crashes the parser or yields offsets
// outside the file.
TEST_F(SafetensorsTest, TruncationsAndBitFlipsNeverEscapeTheFile) {
  std::vector<float> a(16, 1.0f);
  ASSERT_TRUE(WriteSafetensors(Path("v.safetensors"),
                               {{"w", DType::kF32, {4, 4}, {reinterpret_cast<const char*>(a.data()), 64}},
                                {"v", DType::kF32, {0}, {}}}).ok());
  std::ifstream in(Path("v.safetensors"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto check = [](const std::string& b) {
    auto h = ParseSafetensorsHeader(b, b.size());
    if (!h.ok()) return;
    for (const auto& t : h->tensors) ASSERT_LE(h->data_offset + t.data_end, b.size());
  };
  for (size_t n = 0; n < bytes.size(); ++n) check(bytes.substr(0, n));
  std::mt19937 rng(3);
  for (int i = 0; i < 3000; ++i) {
    std::string b = bytes;
    b[rng() % b.size()] = static_cast<char>(rng());
    check(b);
  }
}

}  // namespace
}  // namespace deepinfer

namespace deepinfer {
namespace {

// Found by the fuzzer: a number too large for a double made the JSON library throw out_of_range.
TEST(SafetensorsHeader, NumberOverflowIsAnError) {
  const std::string json = R"({"t": {"dtype": "F32", "shape": [1E99999999], "data_offsets": [0, 4]}})";
  std::string bytes(8, '\0');
  bytes[0] = static_cast<char>(json.size());
  bytes += json;
  bytes += std::string(4, '\0');
  auto header = ParseSafetensorsHeader(bytes, bytes.size());
  ASSERT_FALSE(header.ok());
  EXPECT_NE(header.status().message().find("not valid JSON"), std::string::npos) << header.status().message();
}

}  // namespace
}  // namespace deepinfer
