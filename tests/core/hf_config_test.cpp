#include "core/hf_config.h"

#include <gtest/gtest.h>

namespace deepinfer {
namespace {

TEST(HfConfig, TypedAccessAndErrors) {
  auto config = HfConfig::Parse(
      R"({"model_type": "deepseek_v4", "architectures": ["DeepseekV4ForCausalLM"], "hidden_size": 4096,
          "rms_norm_eps": 1e-6, "tie_word_embeddings": false, "compress_ratios": [0, 0, 4, 128], "hc_eps": 1})",
      "m/config.json");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->model_type(), "deepseek_v4");
  EXPECT_EQ(config->architectures(), std::vector<std::string>{"DeepseekV4ForCausalLM"});
  EXPECT_EQ(*config->Int("hidden_size"), 4096);
  EXPECT_DOUBLE_EQ(*config->Float("rms_norm_eps"), 1e-6);
  EXPECT_DOUBLE_EQ(*config->Float("hc_eps"), 1.0);  // an integer literal is a valid float
  EXPECT_FALSE(*config->Bool("tie_word_embeddings"));
  EXPECT_EQ(*config->IntList("compress_ratios"), (std::vector<int64_t>{0, 0, 4, 128}));
  EXPECT_EQ(config->GetInt("missing", 7), 7);

  auto missing = config->Int("num_hidden_layers");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "m/config.json: missing key 'num_hidden_layers'");
  auto wrong = config->Int("model_type");
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().message(), "m/config.json: key 'model_type' is not an integer");
}

TEST(HfConfig, RejectsBadDocuments) {
  EXPECT_FALSE(HfConfig::Parse("{", "c.json").ok());
  EXPECT_FALSE(HfConfig::Parse("[]", "c.json").ok());
  auto missing_file = HfConfig::Load("/nonexistent/dir/config.json");
  ASSERT_FALSE(missing_file.ok());
  EXPECT_EQ(missing_file.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace deepinfer
