// Loading a V4 checkpoint: a missing or mis-shaped tensor is an error that names it; Forward rejects bad
// batches without changing any state.
#include <filesystem>

#include <gtest/gtest.h>

#include "core/safetensors.h"
#include "model/causal_lm.h"
#include "model/deepseek_v4/v4_model.h"
#include "v4_fixture.h"

namespace deepinfer::model {
namespace {

namespace fs = std::filesystem;

// Copies the v4_mixed fixture to a temporary directory, dropping `drop` and giving `reshape` a new shape.
std::string CopyFixture(const std::string& tag, const std::string& drop, const std::string& reshape = "",
                        std::vector<int64_t> shape = {}) {
  const std::string src = test_support::FixtureDir("v4_mixed");
  const fs::path dir = fs::path(::testing::TempDir()) / ("v4_loading_" + tag);
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(src + "/config.json", dir / "config.json");
  auto file = SafetensorsFile::Open(src + "/model.safetensors");
  EXPECT_TRUE(file.ok());
  std::vector<TensorToWrite> tensors;
  for (const TensorInfo& t : file->tensors()) {
    if (t.name == drop) continue;
    TensorToWrite w{t.name, t.dtype, t.shape,
                    std::string_view(reinterpret_cast<const char*>(t.data), t.nbytes())};
    if (t.name == reshape) w.shape = shape;
    tensors.push_back(w);
  }
  EXPECT_TRUE(WriteSafetensors((dir / "model.safetensors").string(), tensors).ok());
  return dir.string();
}

TEST(V4Loading, LoadsThroughTheArchitectureRegistry) {
  auto model = LoadCausalLM(test_support::FixtureDir("v4_hca128"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ((*model)->info().architecture, "DeepseekV4ForCausalLM");
  EXPECT_EQ((*model)->info().vocab_size, 256);
  // Layers: HCA 128 (1 entry of 32 per block), CSA 4 (32 entries of 32 + 32 indexer keys of 16), in
  // groups csa_kv, hca_kv, csa_index, then the window (128 K=V vectors of 32 for each of the 3 layers, then the CSA layer's compressor
  // and indexer state at the block's end: first-series kv and gate of 4 positions, 2·4·32 + 2·4·16 floats).
  const kvcache::KvCacheSpec& spec = (*model)->cache_spec();
  int64_t prefix_floats = 0;
  for (const kvcache::CacheGroupSpec& g : spec.groups)
    if (g.retention == kvcache::CacheRetention::kPrefix) prefix_floats += g.bytes_per_block / 4;
  EXPECT_EQ(prefix_floats, 1 * 32 + 32 * 32 + 32 * 16);
  ASSERT_EQ(spec.groups.size(), 4u);
  const std::vector<std::string> names = {"csa_kv", "hca_kv", "csa_index", "window"};
  const std::vector<int64_t> floats = {32 * 32, 1 * 32, 32 * 16, 3 * 128 * 32 + 2 * 4 * 32 + 2 * 4 * 16};
  const std::vector<int64_t> ratios = {4, 128, 4, 1};
  for (size_t g = 0; g < 4; ++g) {
    EXPECT_EQ(spec.groups[g].name, names[g]);
    EXPECT_EQ(spec.groups[g].bytes_per_block, floats[g] * 4) << names[g];
    EXPECT_EQ(spec.groups[g].ratio, ratios[g]) << names[g];
    EXPECT_EQ(spec.groups[g].tokens_per_block, kvcache::kBlockTokens);
    EXPECT_EQ(spec.groups[g].num_layers, g == 3 ? 3 : 1) << names[g];
  }
  EXPECT_EQ(spec.groups[3].retention, kvcache::CacheRetention::kWindow);
  EXPECT_EQ(spec.groups[3].window, 32);  // the fixture's sliding_window
  EXPECT_EQ(spec.groups[3].kind, kvcache::CacheKind::kSlidingWindow);
}

TEST(V4Loading, MissingTensorIsNamed) {
  for (const std::string name : {"layers.1.attn.indexer.compressor.ape", "layers.0.ffn.gate.tid2eid",
                                 "layers.4.ffn.experts.7.w2.weight", "hc_head_fn", "head.weight"}) {
    auto model = V4Model::Load(CopyFixture("missing", name));
    ASSERT_FALSE(model.ok()) << name;
    EXPECT_EQ(model.status().code(), StatusCode::kNotFound);
    EXPECT_NE(model.status().message().find("'" + name + "'"), std::string::npos) << model.status().message();
  }
}

TEST(V4Loading, MisShapedTensorIsNamed) {
  auto model = V4Model::Load(CopyFixture("shape", "", "layers.2.attn.wkv.weight", {32, 128}));
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("'layers.2.attn.wkv.weight' has shape [32, 128], expected [64, 64]"),
            std::string::npos)
      << model.status().message();
}

TEST(V4Loading, BadBatchesAreRejectedWithoutSideEffects) {
  auto loaded = V4Model::Load(test_support::FixtureDir("v4_mixed"));
  ASSERT_TRUE(loaded.ok());
  V4Model& model = **loaded;
  auto made = kvcache::KvPools::Create(model.cache_spec(), 4);
  ASSERT_TRUE(made.ok());
  kvcache::KvPools& pool = *made;
  auto state = model.NewSequence();
  std::vector<int32_t> tokens = {1, 2, 3};
  ForwardOutput out;
  SequenceChunk chunk{state.get(), tokens, LogitsWanted::kLast};
  // No block table yet.
  Status s = model.Forward(std::span(&chunk, 1), pool, &out);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("block table"), std::string::npos) << s.message();
  for (size_t g = 0; g < state->num_groups(); ++g) state->block_table(g).push_back(7);  // not in a pool of 4
  EXPECT_EQ(model.Forward(std::span(&chunk, 1), pool, &out).code(), StatusCode::kOutOfRange);
  for (size_t g = 0; g < state->num_groups(); ++g) state->block_table(g)[0] = 0;
  std::vector<int32_t> bad = {1, 256};
  SequenceChunk bad_chunk{state.get(), bad, LogitsWanted::kLast};
  EXPECT_EQ(model.Forward(std::span(&bad_chunk, 1), pool, &out).code(), StatusCode::kOutOfRange);
  SequenceChunk twice[2] = {chunk, chunk};
  EXPECT_FALSE(model.Forward(twice, pool, &out).ok());
  kvcache::KvCacheSpec wrong_spec = model.cache_spec();
  wrong_spec.groups[0].bytes_per_block += 4;
  auto wrong = kvcache::KvPools::Create(wrong_spec, 4);
  ASSERT_TRUE(wrong.ok());
  EXPECT_FALSE(model.Forward(std::span(&chunk, 1), *wrong, &out).ok());
  EXPECT_EQ(state->num_tokens(), 0);
  ASSERT_TRUE(model.Forward({}, pool, &out).ok());  // an empty batch is a no-op
  EXPECT_TRUE(out.logits.empty());
  ASSERT_TRUE(model.Forward(std::span(&chunk, 1), pool, &out).ok());
  EXPECT_EQ(state->num_tokens(), 3);
}

}  // namespace
}  // namespace deepinfer::model
