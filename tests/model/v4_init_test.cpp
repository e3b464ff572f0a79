// Random V4 checkpoints: reproducible from the seed, loadable, and in the released FP8/MXFP4 formats giving
// the same logits as the dequantized F32 checkpoint (the kernels dequantize exactly and reduce in the same
// order, so the results are bit-identical).
#include "model/deepseek_v4/v4_init.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "core/safetensors.h"
#include "kernels/number_formats.h"
#include "model/deepseek_v4/v4_model.h"
#include "model/sequential_blocks.h"

namespace deepinfer::model {
namespace {

namespace fs = std::filesystem;

std::string TempDir(const std::string& tag) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("v4_init_" + tag);
  fs::remove_all(dir);
  return dir.string();
}

nlohmann::ordered_json TinyConfig() {
  auto c = V4PresetConfig("tiny");
  EXPECT_TRUE(c.ok());
  (*c)["vocab_size"] = 512;  // keeps the test fast; the preset itself uses the real vocabulary
  (*c)["sliding_window"] = 16;
  (*c)["compress_rates"] = {{"compressed_sparse_attention", 4}, {"heavily_compressed_attention", 8}};
  (*c)["index_topk"] = 3;
  return *c;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Rewrites a checkpoint with every FP8 / MXFP4 matrix decoded to F32 (scales dropped).
void Dequantize(const std::string& src, const std::string& dst) {
  fs::create_directories(dst);
  fs::copy_file(src + "/config.json", dst + "/config.json");
  auto ckpt = Checkpoint::Open(src);
  ASSERT_TRUE(ckpt.ok());
  std::vector<std::vector<float>> keep;
  std::vector<TensorToWrite> out;
  keep.reserve(ckpt->tensors().size());
  for (const TensorInfo* t : ckpt->tensors()) {
    if (t->name.size() > 6 && t->name.ends_with(".scale")) continue;
    if (t->dtype != DType::kF8_E4M3 && t->dtype != DType::kI8) {
      out.push_back({t->name, t->dtype, t->shape, std::string_view(reinterpret_cast<const char*>(t->data), t->nbytes())});
      continue;
    }
    const std::string prefix = t->name.substr(0, t->name.size() - std::string(".weight").size());
    const TensorInfo* s = ckpt->Find(prefix + ".scale");
    ASSERT_NE(s, nullptr) << prefix;
    const bool fp8 = t->dtype == DType::kF8_E4M3;
    const int64_t rows = t->shape[0], cols = fp8 ? t->shape[1] : t->shape[1] * 2;
    std::vector<float> w(static_cast<size_t>(rows * cols));
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t k = 0; k < cols; ++k) {
        float v, scale;
        if (fp8) {
          v = kernels::Fp8E4M3ToFloat(t->data[i * cols + k]);
          scale = kernels::E8M0ToFloat(s->data[(i / 128) * s->shape[1] + k / 128]);
        } else {
          const uint8_t byte = t->data[(i * cols + k) / 2];
          v = kernels::E2M1ToFloat(k % 2 ? byte >> 4 : byte & 0xF);
          scale = kernels::E8M0ToFloat(s->data[i * (cols / 32) + k / 32]);
        }
        w[i * cols + k] = v * scale;
      }
    }
    keep.push_back(std::move(w));
    out.push_back({t->name, DType::kF32, {rows, cols},
                   std::string_view(reinterpret_cast<const char*>(keep.back().data()), keep.back().size() * 4)});
  }
  ASSERT_TRUE(WriteSafetensors(dst + "/model.safetensors", out).ok());
}

std::vector<float> AllLogits(const std::string& dir, const std::vector<int32_t>& tokens) {
  auto model = V4Model::Load(dir);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  if (!model.ok()) return {};
  auto pool = kvcache::KvPools::Create((*model)->cache_spec(), 8);
  EXPECT_TRUE(pool.ok()) << pool.status().ToString();
  if (!pool.ok()) return {};
  auto state = (*model)->NewSequence();
  SequentialBlocks blocks((*model)->cache_spec(), *pool);
  EXPECT_TRUE(blocks.Reserve(*state, static_cast<int64_t>(tokens.size())).ok());
  SequenceChunk chunk{state.get(), tokens, LogitsWanted::kAll};
  ForwardOutput out;
  EXPECT_TRUE((*model)->Forward(std::span(&chunk, 1), *pool, &out).ok());
  return out.logits;
}

TEST(V4Init, SameSeedSameBytes) {
  const std::string a = TempDir("a"), b = TempDir("b");
  ASSERT_TRUE(WriteRandomV4Checkpoint(TinyConfig(), a, 42, V4InitFormat::kBF16).ok());
  ASSERT_TRUE(WriteRandomV4Checkpoint(TinyConfig(), b, 42, V4InitFormat::kBF16).ok());
  for (const auto& entry : fs::directory_iterator(a))
    EXPECT_EQ(ReadAll(entry.path().string()), ReadAll(b + "/" + entry.path().filename().string()))
        << entry.path().filename();
  EXPECT_TRUE(fs::exists(a + "/model.safetensors.index.json"));
}

TEST(V4Init, QuantizedEqualsDequantized) {
  const std::string q = TempDir("q"), f = TempDir("f");
  ASSERT_TRUE(WriteRandomV4Checkpoint(TinyConfig(), q, 7, V4InitFormat::kQuantized).ok());
  auto ckpt = Checkpoint::Open(q);
  ASSERT_TRUE(ckpt.ok());
  ASSERT_EQ(ckpt->Find("layers.1.attn.wq_b.weight")->dtype, DType::kF8_E4M3);
  ASSERT_EQ(ckpt->Find("layers.1.ffn.experts.3.w2.weight")->dtype, DType::kI8);
  Dequantize(q, f);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 40; ++i) tokens.push_back((i * 37 + 11) % 512);
  std::vector<float> a = AllLogits(q, tokens), b = AllLogits(f, tokens);
  ASSERT_EQ(a.size(), tokens.size() * 512);
  ASSERT_EQ(a, b);
  // The logits are not degenerate.
  float lo = a[0], hi = a[0];
  for (float v : a) lo = std::min(lo, v), hi = std::max(hi, v);
  EXPECT_GT(hi - lo, 1.0f);
}

// Loading checks FP8 weights for E4M3 NaN codes once (so that the decode kernels can skip the check); a
// weight that holds one must still make NaN, as its dequantised F32 copy would, not finite garbage.
TEST(V4Init, Fp8NanCodeStillGivesNan) {
  const std::string q = TempDir("nan");
  ASSERT_TRUE(WriteRandomV4Checkpoint(TinyConfig(), q, 7, V4InitFormat::kQuantized).ok());
  std::vector<int32_t> tokens = {5, 17, 300};
  std::vector<float> clean = AllLogits(q, tokens);
  for (float v : clean) ASSERT_TRUE(std::isfinite(v));
  // Overwrite one byte of an FP8 weight (row 0, column 0 of layers.1.attn.wq_b) with the NaN code 0x7F.
  std::string path;
  {
    auto ckpt = Checkpoint::Open(q);
    ASSERT_TRUE(ckpt.ok());
    const TensorInfo* t = ckpt->Find("layers.1.attn.wq_b.weight");
    ASSERT_NE(t, nullptr);
    ASSERT_EQ(t->dtype, DType::kF8_E4M3);
    path = t->file;
  }
  std::string bytes = ReadAll(path);
  auto header = ParseSafetensorsHeader(bytes, bytes.size());
  ASSERT_TRUE(header.ok());
  for (const TensorInfo& t : header->tensors) {
    if (t.name == "layers.1.attn.wq_b.weight") bytes[header->data_offset + t.data_begin] = static_cast<char>(0x7F);
  }
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << bytes;
  }
  std::vector<float> poisoned = AllLogits(q, tokens);
  ASSERT_EQ(poisoned.size(), clean.size());
  EXPECT_TRUE(std::any_of(poisoned.begin(), poisoned.end(), [](float v) { return std::isnan(v); }));
}

TEST(V4Init, UnknownPresetAndFormat) {
  EXPECT_FALSE(V4PresetConfig("huge").ok());
  EXPECT_FALSE(ParseV4InitFormat("int3").ok());
}

}  // namespace
}  // namespace deepinfer::model
