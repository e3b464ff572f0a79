// Every size, count, id and float in config.json is range-checked before use: out-of-range values
// are one error naming the file, the key and the allowed range, never a crash, a hang or a huge allocation.
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include <gtest/gtest.h>

#include "model/deepseek_v4/v4_config.h"
#include "v4_fixture.h"

namespace deepinfer::model {
namespace {

nlohmann::json Base() {
  std::ifstream in(test_support::FixtureDir("v4_mixed") + "/config.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

Result<V4Config> Parse(const nlohmann::json& j) {
  auto hf = HfConfig::Parse(j.dump(), "config.json");
  if (!hf.ok()) return hf.status();
  return V4Config::FromHf(*hf);
}

// The value is refused with a message naming config.json and the key.
void ExpectRefused(const char* key, const nlohmann::json& value) {
  nlohmann::json j = Base();
  j[key] = value;
  auto c = Parse(j);
  ASSERT_FALSE(c.ok()) << key << " = " << value.dump();
  const std::string& m = c.status().message();
  EXPECT_EQ(m.rfind("config.json: ", 0), 0u) << m;
  EXPECT_NE(m.find(key), std::string::npos) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
}

TEST(V4ConfigBounds, TheFixtureIsValid) { ASSERT_TRUE(Parse(Base()).ok()); }

TEST(V4ConfigBounds, SizesAndCountsOutOfRange) {
  // The examples: a negative layer count once reached resize(-1), a 2^40 window gave bad_alloc,
  // 10^12 Sinkhorn iterations hung.
  ExpectRefused("num_hidden_layers", -1);
  ExpectRefused("sliding_window", int64_t{1} << 40);
  ExpectRefused("hc_sinkhorn_iters", int64_t{1000000000000});
  ExpectRefused("hc_sinkhorn_iters", 1e12);  // a float where an integer belongs
  for (const char* key : {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "head_dim",
                          "q_lora_rank", "o_lora_rank", "n_routed_experts", "moe_intermediate_size",
                          "sliding_window", "index_n_heads", "index_head_dim", "index_topk", "hc_mult"}) {
    ExpectRefused(key, 0);
    ExpectRefused(key, -5);
    ExpectRefused(key, std::numeric_limits<uint64_t>::max());  // would wrap to -1 as int64
    ExpectRefused(key, "64");
    ExpectRefused(key, nlohmann::json::array());
  }
  ExpectRefused("num_experts_per_tok", 1000);  // more than n_routed_experts
  ExpectRefused("o_groups", 1000);             // more than the heads
  ExpectRefused("num_nextn_predict_layers", 17);
  ExpectRefused("max_position_embeddings", int64_t{1} << 40);
}

TEST(V4ConfigBounds, FloatsMustBeFiniteAndPositive) {
  // Negative epsilons and thetas once ran and produced nonsense.
  for (const char* key : {"rms_norm_eps", "hc_eps", "rope_theta", "compress_rope_theta", "routed_scaling_factor"}) {
    ExpectRefused(key, -1e-6);
    ExpectRefused(key, 0.0);
    ExpectRefused(key, "1e-6");
  }
  ExpectRefused("rms_norm_eps", 2.0);
  // partial_rotary_factor is read only without qk_rope_head_dim.
  nlohmann::json j = Base();
  j.erase("qk_rope_head_dim");
  j["partial_rotary_factor"] = 1.5;
  EXPECT_FALSE(Parse(j).ok());
  j["rope_scaling"]["factor"] = -4;
  EXPECT_FALSE(Parse(j).ok());
}

TEST(V4ConfigBounds, TokenIdsWithinTheVocabulary) {
  nlohmann::json j = Base();
  const int64_t vocab = j["vocab_size"].get<int64_t>();
  ExpectRefused("eos_token_id", vocab);  // one past the last id
  ExpectRefused("bos_token_id", -1);
  ExpectRefused("eos_token_id", nlohmann::json::array({1, vocab + 7}));
  j["eos_token_id"] = vocab - 1;  // the last id is fine
  EXPECT_TRUE(Parse(j).ok());
}

TEST(V4ConfigBounds, MessageNamesTheRange) {
  nlohmann::json j = Base();
  j["sliding_window"] = int64_t{1} << 40;
  auto c = Parse(j);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "config.json: key 'sliding_window' is 1099511627776; allowed: an integer in [1, 65536]");
}

// A key read from the file is quoted as JSON in the message, so a control character in it cannot split the
// one-line error (fuzz_model_config found "compressed_sparse_att\ntion" did).
TEST(V4ConfigBounds, KeysFromTheFileAreQuoted) {
  nlohmann::json j = Base();
  j["compress_rates"] = {{"compressed_sparse_att\ntion", 4}};
  auto c = Parse(j);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "config.json: compress_rates has unknown key \"compressed_sparse_att\\ntion\"");
  j["compress_rates"] = {{"a\nb", 0}};
  c = Parse(j);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message().find('\n'), std::string::npos) << c.status().message();
  // Names quoted as they are (layer types, rope types, model_type) are escaped the same way.
  j = Base();
  j["model_type"] = "deepseek\n_v4\x01";
  c = Parse(j);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "config.json: model_type is 'deepseek\\n_v4\\x01', expected 'deepseek_v4'");
}

}  // namespace
}  // namespace deepinfer::model
