#include "model/deepseek_v4/v4_config.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "v4_fixture.h"

namespace deepinfer::model {
namespace {

nlohmann::json FixtureJson(const std::string& name) {
  std::ifstream in(test_support::FixtureDir(name) + "/config.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

Result<V4Config> ParseV4Config(const nlohmann::json& j) {
  auto hf = HfConfig::Parse(j.dump(), "config.json");
  if (!hf.ok()) return hf.status();
  return V4Config::FromHf(*hf);
}

TEST(V4Config, ReadsReleasedSpelling) {
  auto c = ParseV4Config(FixtureJson("v4_mixed"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->num_layers, 5);
  EXPECT_EQ(c->rope_dim, 16);
  using T = V4AttentionType;
  EXPECT_EQ(c->attention_types, (std::vector<T>{T::kSliding, T::kCsa, T::kHca, T::kCsa, T::kHca}));
  // compress_rates overrides the HCA rate of 128 in compress_ratios.
  EXPECT_EQ(c->compress_ratios, (std::vector<int64_t>{0, 4, 8, 4, 8}));
  using R = V4RouterType;
  EXPECT_EQ(c->router_types, (std::vector<R>{R::kHash, R::kHash, R::kScore, R::kScore, R::kScore}));
  EXPECT_EQ(c->mtp_attention_type, T::kSliding);
  EXPECT_TRUE(c->compress_rope.yarn);
  EXPECT_FALSE(c->main_rope.yarn);
  EXPECT_EQ(c->compress_rope.theta, 160000.0);
}

// transformers' own spelling (what save_pretrained writes) gives the same configuration.
TEST(V4Config, ReadsTransformersSpelling) {
  nlohmann::json j = FixtureJson("v4_mixed");
  j.erase("compress_ratios");
  j.erase("num_hash_layers");
  j.erase("qk_rope_head_dim");
  nlohmann::json yarn = j["rope_scaling"];
  j.erase("rope_scaling");
  j["layer_types"] = {"sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention",
                      "compressed_sparse_attention", "heavily_compressed_attention"};
  j["mlp_layer_types"] = {"hash_moe", "hash_moe", "moe", "moe", "moe"};
  j["partial_rotary_factor"] = 0.25;
  yarn["rope_type"] = "yarn";
  yarn["rope_theta"] = 160000.0;
  yarn["attention_factor"] = 1.0;
  j["rope_parameters"] = {{"main", {{"rope_type", "default"}, {"rope_theta", 10000.0}}}, {"compress", yarn}};
  auto a = ParseV4Config(FixtureJson("v4_mixed"));
  auto b = ParseV4Config(j);
  ASSERT_TRUE(a.ok() && b.ok()) << b.status().ToString();
  EXPECT_EQ(a->attention_types, b->attention_types);
  EXPECT_EQ(a->compress_ratios, b->compress_ratios);
  EXPECT_EQ(a->router_types, b->router_types);
  EXPECT_EQ(a->rope_dim, b->rope_dim);
  EXPECT_EQ(RopeInverseFrequencies(a->compress_rope, a->rope_dim), RopeInverseFrequencies(b->compress_rope, b->rope_dim));
}

TEST(V4Config, ErrorsNameTheProblem) {
  struct Case {
    std::function<void(nlohmann::json&)> edit;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {[](auto& j) { j["model_type"] = "llama"; }, "expected 'deepseek_v4'"},
      {[](auto& j) { j.erase("hidden_size"); }, "hidden_size"},
      {[](auto& j) { j["hidden_size"] = "big"; }, "hidden_size"},
      {[](auto& j) { j["compress_ratios"] = {0, 4, 8, 4, 128, 0}; }, "compress_ratios entry 8"},
      {[](auto& j) { j["compress_ratios"] = {0, 4}; }, "2 entries for 5 layers"},
      {[](auto& j) { j["compress_rates"]["heavily_compressed_attention"] = 48; }, "does not divide 128"},
      {[](auto& j) { j["num_key_value_heads"] = 4; }, "num_key_value_heads"},
      {[](auto& j) { j["num_attention_heads"] = 3; }, "multiple of o_groups"},
      {[](auto& j) { j["qk_rope_head_dim"] = 15; }, "rope dimension"},
      {[](auto& j) { j["scoring_func"] = "softmax"; }, "scoring_func"},
      {[](auto& j) { j["num_experts_per_tok"] = 99; }, "num_experts_per_tok"},
      {[](auto& j) { j["rope_scaling"]["type"] = "longrope"; }, "not supported"},
      {[](auto& j) { j["index_topk"] = 0; }, "index_topk"},
      // Sizes are bounded (far above any DeepSeek model) so that nothing computed from them can blow up.
      {[](auto& j) { j["head_dim"] = int64_t{1} << 40; }, "key 'head_dim' is 1099511627776; allowed: an integer in [2, 16384]"},
      {[](auto& j) { j["moe_intermediate_size"] = int64_t{1} << 30; }, "key 'moe_intermediate_size' is 1073741824; allowed: an integer in [1, 262144]"},
      {[](auto& j) { j["vocab_size"] = int64_t{1} << 30; }, "vocab_size"},
  };
  for (const Case& c : cases) {
    nlohmann::json j = FixtureJson("v4_mixed");
    c.edit(j);
    auto r = ParseV4Config(j);
    ASSERT_FALSE(r.ok()) << c.expect;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status().message();
  }
}

// YaRN as transformers computes it (_compute_yarn_parameters, truncate=True), derived by hand for rope_dim 16,
// theta 160000, factor 16, original 64: the correction dims 16·ln(64/(2π·β))/(2·ln 160000) are −0.77 for
// β = 32 (floor −1, clamped to low = 0) and 1.55 for β = 1 (high = ceil = 2), so the ramp (i − 0)/2 keeps
// frequency 0, mixes frequency 1 half and half, and divides frequencies 2..7 by the factor 16.
TEST(V4Config, YarnFrequencies) {
  RopeParams p;
  p.theta = 160000;
  p.yarn = true;
  p.factor = 16;
  p.original_max_position_embeddings = 64;
  std::vector<float> f = RopeInverseFrequencies(p, 16);
  ASSERT_EQ(f.size(), 8u);
  auto base = [](int i) { return 1.0 / std::pow(160000.0, 2.0 * i / 16); };
  EXPECT_NEAR(f[0], base(0), 1e-7);
  EXPECT_NEAR(f[1], 0.5 * base(1) / 16 + 0.5 * base(1), 1e-7);
  for (int i = 2; i < 8; ++i) EXPECT_NEAR(f[i], base(i) / 16, 1e-7 * base(i)) << i;
  RopeParams plain;
  plain.theta = 10000;
  std::vector<float> g = RopeInverseFrequencies(plain, 16);
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(g[i], 1.0 / std::pow(10000.0, 2.0 * i / 16), 1e-7);
}

}  // namespace
}  // namespace deepinfer::model
