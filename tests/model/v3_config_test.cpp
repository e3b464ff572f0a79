// DeepSeek-V3 config.json reading: the released keys, the derived constants (softmax scale with the YaRN
// mscale, the attention factor on cos and sin), and impossible MLA or routing shapes as one error naming
// the key.
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "core/hf_config.h"
#include "model/deepseek_v3/v3_config.h"
#include "v4_fixture.h"

namespace deepinfer::model {
namespace v3_config_test {

nlohmann::json FixtureConfig(const std::string& name) {
  std::ifstream in(test_support::FixtureDir(name) + "/config.json");
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());
}

Result<V3Config> Parse(const nlohmann::json& j) {
  DI_ASSIGN_OR_RETURN(HfConfig hf, HfConfig::Parse(j.dump(), "config.json"));
  return V3Config::FromHf(hf);
}

TEST(V3Config, ReadsTheReleasedKeys) {
  auto c = Parse(FixtureConfig("v3_tiny_a_bf16"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->head_dim, 24);  // qk_nope_head_dim 16 + qk_rope_head_dim 8
  EXPECT_EQ(c->latent_width(), 40);
  EXPECT_EQ(c->q_lora_rank, 24);
  EXPECT_EQ(c->n_group, 4);
  EXPECT_EQ(c->topk_group, 2);
  EXPECT_FALSE(c->is_moe_layer(0));
  EXPECT_TRUE(c->is_moe_layer(1));
  // mscale = 0.1 · 1.0 · ln 40 + 1 = 1.368888; softmax scale = 24^-0.5 · mscale² = 0.204124 · 1.873856.
  EXPECT_NEAR(c->softmax_scale, 0.3824989, 1e-6);
  // mscale == mscale_all_dim: cos and sin are not scaled.
  EXPECT_EQ(c->rope_attention_factor, 1.0f);

  auto b = Parse(FixtureConfig("v3_tiny_b_f32"));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->q_lora_rank, 0);  // null: a direct q_proj
  EXPECT_EQ(b->num_mtp_layers, 1);
  EXPECT_EQ(c->num_mtp_layers, 0);
  // factor 8: mscale(1) = 0.1 ln 8 + 1 = 1.207944, mscale(0.5) = 0.05 ln 8 + 1 = 1.103972.
  EXPECT_NEAR(b->rope_attention_factor, 1.207944 / 1.103972, 1e-6);
  EXPECT_NEAR(b->softmax_scale, std::pow(24.0, -0.5) * 1.103972 * 1.103972, 1e-6);
}

// Each broken config is refused with one line that names the offending key.
TEST(V3Config, ImpossibleShapesNameTheKey) {
  struct Case {
    const char* key;
    nlohmann::json value;
    const char* named;
  };
  const Case cases[] = {
      {"head_dim", 4, "qk_rope_head_dim"},          // rope dim 8 > head dim 4
      {"qk_rope_head_dim", 7, "qk_rope_head_dim"},  // odd
      {"topk_group", 5, "topk_group"},              // > n_group 4
      {"n_group", 3, "n_group"},                    // 16 experts not divisible by 3
      {"num_experts_per_tok", 9, "num_experts_per_tok"},  // > 2 groups × 4 experts
      {"first_k_dense_replace", 4, "first_k_dense_replace"},
      {"scoring_func", "softmax", "scoring_func"},
      {"kv_lora_rank", 0, "kv_lora_rank"},
      {"moe_layer_freq", 2, "moe_layer_freq"},
      {"n_shared_experts", 0, "n_shared_experts"},
      {"q_lora_rank", -3, "q_lora_rank"},
      {"hidden_size", 1ll << 40, "hidden_size"},
      {"num_nextn_predict_layers", 17, "num_nextn_predict_layers"},
      {"num_nextn_predict_layers", -1, "num_nextn_predict_layers"},
  };
  for (const Case& k : cases) {
    nlohmann::json j = FixtureConfig("v3_tiny_a_bf16");
    j[k.key] = k.value;
    auto c = Parse(j);
    ASSERT_FALSE(c.ok()) << k.key;
    const std::string m = c.status().message();
    EXPECT_NE(m.find(std::string("'") + k.named + "'"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
  nlohmann::json j = FixtureConfig("v3_tiny_a_bf16");
  j["rope_scaling"]["factor"] = -1;
  auto c = Parse(j);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("rope_scaling.factor"), std::string::npos) << c.status().message();
}

// V3.2: the indexer keys; impossible indexer shapes name the key.
TEST(V3Config, ReadsTheIndexerAndRefusesImpossibleShapes) {
  nlohmann::json j = FixtureConfig("v3_tiny_a_bf16");
  EXPECT_FALSE(Parse(j)->has_indexer());
  j["model_type"] = "deepseek_v32";
  auto defaults = Parse(j);
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  // The released values when absent.
  EXPECT_EQ(defaults->index_topk, 2048);
  EXPECT_EQ(defaults->index_n_heads, 64);
  EXPECT_EQ(defaults->index_head_dim, 128);
  EXPECT_FALSE(defaults->index_pow2_scales);
  j["quantization_config"] = {{"scale_fmt", "ue8m0"}};
  EXPECT_TRUE(Parse(j)->index_pow2_scales);
  struct Case {
    const char* key;
    nlohmann::json value;
    const char* named;
  };
  const Case cases[] = {
      {"index_topk", 0, "index_topk"},
      {"index_topk", -5, "index_topk"},
      {"index_n_heads", 0, "index_n_heads"},
      {"index_head_dim", 48, "index_head_dim"},     // not a power of two
      {"index_head_dim", 4, "qk_rope_head_dim"},    // rope dim 8 > 4
      {"q_lora_rank", nullptr, "q_lora_rank"},      // the indexer reads the query latent
      {"quantization_config", {{"scale_fmt", "e5m2"}}, "quantization_config.scale_fmt"},
  };
  for (const Case& k : cases) {
    nlohmann::json bad = j;
    bad[k.key] = k.value;
    auto c = Parse(bad);
    ASSERT_FALSE(c.ok()) << k.key;
    const std::string m = c.status().message();
    EXPECT_NE(m.find(std::string("'") + k.named + "'"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

}  // namespace v3_config_test
}  // namespace deepinfer::model
