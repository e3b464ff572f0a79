// DeepSeek-V3.2's lightning indexer: its pieces against values derived by hand, and the selection doing
// something (the logits of positions past index_topk change when every position is attended instead).
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kernels/number_formats.h"
#include "model/deepseek_v3/v32_indexer.h"
#include "model/deepseek_v3/v3_model.h"
#include "model/sequential_blocks.h"
#include "v4_fixture.h"

namespace deepinfer::model {
namespace v32_indexer_test {

TEST(V32Indexer, HadamardRotateIsTheSylvesterMatrixTimesTheScale) {
  // H4 = [[1,1,1,1],[1,-1,1,-1],[1,1,-1,-1],[1,-1,-1,1]]; H4 · (1,2,3,4) = (10, -2, -4, 0), times 4^-0.5.
  std::vector<float> x = {1, 2, 3, 4};
  v32::HadamardRotate(x.data(), 4);
  EXPECT_EQ(x, (std::vector<float>{5, -1, -2, 0}));
  // Orthogonal: applied twice it gives the input back (H·H = n·I, scaled by n^-1).
  std::vector<float> y = {0.5f, -1.25f, 3, 0.75f, -2, 1, 0.25f, 4}, z = y;
  v32::HadamardRotate(z.data(), 8);
  v32::HadamardRotate(z.data(), 8);
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(z[i], y[i], 1e-6) << i;
}

TEST(V32Indexer, Fp8KeysFollowTheReleasedQuantizer) {
  // amax 1: fp32 scale 1 · fl(1/448); power-of-two scale 2^ceil(log2(1/448)) = 2^-8 (log2 448 = 8.807).
  const std::vector<float> x = {1.0f, -0.5f, 0.3f, 0.0f};
  std::vector<uint8_t> codes(4);
  std::vector<float> scale(1), back(4);
  v32::QuantizeFp8(x.data(), 4, 4, true, codes.data(), scale.data());
  EXPECT_EQ(scale[0], std::ldexp(1.0f, -8));
  v32::DequantizeFp8(codes.data(), scale.data(), 4, 4, back.data());
  // 1 · 256 = 256 and 0.5 · 256 = 128 are E4M3 values; 0.3 · 256 = 76.8 lies in [64, 128) where E4M3 steps
  // by 8, so it rounds to 80: 80 / 256 = 0.3125.
  EXPECT_EQ(back, (std::vector<float>{1.0f, -0.5f, 0.3125f, 0.0f}));
  v32::QuantizeFp8(x.data(), 4, 4, false, codes.data(), scale.data());
  EXPECT_EQ(scale[0], 1.0f * (1.0f / 448.0f));
  EXPECT_EQ(kernels::Fp8E4M3ToFloat(codes[0]), 448.0f);  // the amax maps to the largest code
  // A block of zeros keeps the floor amax 1e-4 (no division by zero).
  const std::vector<float> zeros(4, 0.0f);
  v32::QuantizeFp8(zeros.data(), 4, 4, false, codes.data(), scale.data());
  EXPECT_EQ(scale[0], 1e-4f * (1.0f / 448.0f));
}

// A copy of a V3.2 fixture with index_topk above every sequence: every position attends everything.
std::string DenseCopy(const std::string& fixture) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / (fixture + "_dense");
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(test_support::FixtureDir(fixture) + "/model.safetensors", dir / "model.safetensors",
                             std::filesystem::copy_options::overwrite_existing);
  std::ifstream in(test_support::FixtureDir(fixture) + "/config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  config["index_topk"] = 1 << 20;
  std::ofstream(dir / "config.json") << config.dump();
  return dir.string();
}

std::vector<float> Logits(const std::string& dir, const std::vector<int32_t>& tokens) {
  auto model = V3Model::Load(dir);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  if (!model.ok()) return {};
  auto pools = kvcache::KvPools::Create((*model)->cache_spec(), 8);
  EXPECT_TRUE(pools.ok());
  SequentialBlocks blocks((*model)->cache_spec(), *pools);
  auto state = (*model)->NewSequence();
  EXPECT_TRUE(blocks.Reserve(*state, static_cast<int64_t>(tokens.size())).ok());
  SequenceChunk chunk{state.get(), tokens, LogitsWanted::kAll};
  ForwardOutput out;
  Status s = (*model)->Forward(std::span(&chunk, 1), *pools, &out);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out.logits;
}

TEST(V32Indexer, SelectionChangesOnlyPositionsPastTopK) {
  const std::string fixture = "v32_tiny_a_bf16";
  test_support::Reference ref(fixture);
  ASSERT_TRUE(ref.ok());
  const std::vector<int32_t> tokens = ref.Ints("seq2.tokens");
  std::ifstream in(test_support::FixtureDir(fixture) + "/config.json");
  const nlohmann::json config = nlohmann::json::parse(in);
  const int64_t topk = config["index_topk"].get<int64_t>(), v = config["vocab_size"].get<int64_t>();
  ASSERT_GT(static_cast<int64_t>(tokens.size()), topk);
  const std::vector<float> sparse = Logits(test_support::FixtureDir(fixture), tokens);
  const std::vector<float> dense = Logits(DenseCopy(fixture), tokens);
  ASSERT_EQ(sparse.size(), dense.size());
  ASSERT_EQ(sparse.size(), tokens.size() * v);
  // Positions up to index_topk − 1 see every earlier position either way: the same operations, the same bits.
  for (int64_t i = 0; i < topk * v; ++i) ASSERT_EQ(sparse[i], dense[i]) << "position " << i / v;
  // Later ones attend a subset: their logits move (by far more than rounding).
  double moved = 0;
  for (size_t i = topk * v; i < sparse.size(); ++i) moved = std::max(moved, std::fabs(double(sparse[i]) - dense[i]));
  EXPECT_GT(moved, 1e-2);
}

// The cache spec holds a second prefix group of FP8 indexer keys, and a step's cost counts every visible key
// for the indexer but only index_topk for MLA.
TEST(V32Indexer, CacheSpecAndStepCostCountTheIndexerKeys) {
  auto model = V3Model::Load(test_support::FixtureDir("v32_tiny_a_bf16"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const kvcache::KvCacheSpec& spec = (*model)->cache_spec();
  ASSERT_EQ(spec.groups.size(), 2u);
  const kvcache::CacheGroupSpec& index = spec.groups[1];
  EXPECT_EQ(index.name, "index");
  EXPECT_EQ(index.kind, kvcache::CacheKind::kIndexerKeys);
  EXPECT_EQ(index.retention, kvcache::CacheRetention::kPrefix);
  EXPECT_EQ(index.element, kvcache::CacheElement::kFP8E4M3);
  // 3 layers × 128 positions × (32 FP8 codes + one fp32 scale).
  EXPECT_EQ(index.bytes_per_block, 3 * 128 * (32 + 4));
  EXPECT_EQ((*model)->info().architecture, "DeepseekV32ForCausalLM");
  // One decode token at position 1000 and at 2000 (both past index_topk 24): MLA attends 24 keys either way,
  // the indexer scores 1000 more keys: 2 · 3 layers · 16 heads · 32 dims · 1000 flops, 3 · 1000 · 36 bytes.
  const ChunkShape near{1000, 1, 1}, far{2000, 1, 1};
  auto a = (*model)->EstimateStepCost(std::span(&near, 1));
  auto b = (*model)->EstimateStepCost(std::span(&far, 1));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_DOUBLE_EQ(b->flops - a->flops, 2.0 * 3 * 16 * 32 * 1000);
  EXPECT_DOUBLE_EQ(b->kv_bytes - a->kv_bytes, 3.0 * 1000 * 36);
}

}  // namespace v32_indexer_test
}  // namespace deepinfer::model
