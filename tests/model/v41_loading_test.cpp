// DeepSeek-V4.1 configuration and loading: the composite config of the release layout with the derived layer
// plan, config errors, checkpoint errors that name the tensor, the Engram tokenizer requirements, and an
// FP8 / packed-FP4 checkpoint giving logits bit-identical to its dequantized F32 copy.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/hf_config.h"
#include "core/safetensors.h"
#include "kernels/number_formats.h"
#include "model/deepseek_v41/v41_config.h"
#include "model/deepseek_v41/v41_model.h"
#include "model/sequential_blocks.h"
#include "v41_fixture.h"

namespace deepinfer::model {
namespace {

namespace fs = std::filesystem;
using test_support::V41FixtureDir;
using test_support::V41Reference;

Result<V41Config> ParseConfig(const std::string& text) {
  DI_ASSIGN_OR_RETURN(HfConfig hf, HfConfig::Parse(text, "config.json"));
  return V41Config::FromHf(hf);
}

TEST(V41ConfigTest, FixtureConfigAndLayerPlan) {
  auto hf = HfConfig::Load(V41FixtureDir("v41_tiny_a_bf16"));
  ASSERT_TRUE(hf.ok());
  auto c = V41Config::FromHf(*hf);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->num_layers, 10);
  EXPECT_EQ(c->hidden_size, 64);
  EXPECT_EQ(c->rope_dim, 16);
  EXPECT_EQ(c->kv_source_layer_ids, (std::vector<int64_t>{2, 4, 6}));
  EXPECT_EQ(c->candidate_source_layer_id, 6);
  EXPECT_DOUBLE_EQ(c->rms_norm_eps, 1e-20);
  EXPECT_TRUE(c->compress_rope.yarn);
  EXPECT_DOUBLE_EQ(c->compress_rope.theta, 160000.0);
  EXPECT_FALSE(c->main_rope.yarn);
  EXPECT_EQ(c->engram.layer_ids, (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(c->engram.compressed_vocab_size, 418);
  EXPECT_EQ(c->image_token_id, 129264);
  EXPECT_TRUE(c->has_vision);
  EXPECT_EQ(c->vision.num_layers, 32);
  // Layers 0-1 window only; 2-5 ratio 2 (sources 2 and 4); 6-9 ratio 1 reading source 6; 8 re-indexes
  // inside the candidate blocks of 6; 3, 5, 7 and 9 reuse the latest index source's top-k.
  const std::vector<V41LayerPlan>& p = c->layers;
  EXPECT_EQ(p[1].ratio, 0);
  EXPECT_EQ(p[1].group, -1);
  EXPECT_EQ(p[3].group, 0);
  EXPECT_EQ(p[3].index_layer, 2);
  EXPECT_EQ(p[5].group, 1);
  EXPECT_EQ(p[5].index_layer, 4);
  EXPECT_TRUE(p[6].candidate_source);
  EXPECT_FALSE(p[6].uses_candidates);
  EXPECT_TRUE(p[8].uses_candidates);
  EXPECT_EQ(p[8].group, 2);
  EXPECT_EQ(p[9].index_layer, 8);
  EXPECT_EQ(p[1].engram, 0);
  EXPECT_EQ(p[4].engram, 1);
  auto b = HfConfig::Load(V41FixtureDir("v41_tiny_b_fp8"));
  ASSERT_TRUE(b.ok());
  auto cb = V41Config::FromHf(*b);
  ASSERT_TRUE(cb.ok());
  EXPECT_EQ(cb->weight_block_out, 32);
  EXPECT_EQ(cb->weight_block_in, 32);
}

TEST(V41ConfigTest, ReleasedDefaultsFromABareTextConfig) {
  // transformers' defaults when a field is left out are the released schedule.
  auto c = ParseConfig(R"({"model_type": "deepseek_v41_text", "vocab_size": 129280, "hidden_size": 5120,
                            "num_hidden_layers": 40, "num_attention_heads": 64, "q_lora_rank": 1280})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->kv_source_layer_ids, (std::vector<int64_t>{2, 8, 14, 20}));
  EXPECT_EQ(c->index_source_layer_ids, (std::vector<int64_t>{2, 8, 14, 20, 24, 28, 32, 36}));
  EXPECT_EQ(c->candidate_source_layer_id, 20);
  EXPECT_EQ(c->compress_ratios[1], 0);
  EXPECT_EQ(c->compress_ratios[19], 2);
  EXPECT_EQ(c->compress_ratios[20], 1);
  EXPECT_EQ(c->layers[21].group, 3);
  EXPECT_EQ(c->layers[25].index_layer, 24);
  EXPECT_EQ(c->dspark.target_layer_ids, (std::vector<int64_t>{37, 38, 39}));
  EXPECT_TRUE(c->engram.layer_ids.empty());  // the config class defaults engram_layer_ids to empty
}

TEST(V41ConfigTest, BadSchedulesAreErrors) {
  const std::string base = R"("model_type": "deepseek_v41_text", "vocab_size": 512, "hidden_size": 64,
                              "num_attention_heads": 4, "head_dim": 64, "qk_rope_head_dim": 16, "q_lora_rank": 32,
                              "o_groups": 2, "o_lora_rank": 32, "index_head_dim": 32, "num_nextn_predict_layers": 0)";
  struct Case {
    std::string fields, message;
  };
  for (const Case& k : std::vector<Case>{
           {R"("num_hidden_layers": 4, "compress_ratios": [0, 3, 3, 3])", "does not divide 128"},
           {R"("num_hidden_layers": 4, "compress_ratios": [0, 2, 2, 1], "kv_source_layer_ids": [0])", "compress ratio 0"},
           {R"("num_hidden_layers": 4, "compress_ratios": [0, 2, 2, 1], "kv_source_layer_ids": [1])", "has compress ratio 1"},
           {R"("num_hidden_layers": 4, "compress_ratios": [0, 2, 2, 2], "kv_source_layer_ids": [2], "index_source_layer_ids": [2])",
            "no kv_source_layer_ids entry"},
           {R"("num_hidden_layers": 4, "compress_ratios": [0, 2, 2, 2], "kv_source_layer_ids": [1], "candidate_source_layer_id": 3)",
            "must be in index_source_layer_ids"},
           {R"("num_hidden_layers": 2, "compress_ratios": [0, 0, 1])", "more entries"},
           {R"("num_hidden_layers": 2, "kv_source_layer_ids": [], "engram_layer_ids": [1], "engram_num_embeddings": [10, 20])",
            "one entry per"},
       }) {
    auto c = ParseConfig("{" + base + ", " + k.fields + "}");
    ASSERT_FALSE(c.ok()) << k.fields;
    EXPECT_NE(c.status().message().find(k.message), std::string::npos) << c.status().message();
  }
  auto no_text = ParseConfig(R"({"model_type": "deepseek_v41"})");
  ASSERT_FALSE(no_text.ok());
  EXPECT_NE(no_text.status().message().find("text_config"), std::string::npos);
}

// A scratch copy of a fixture directory whose safetensors tensors pass through `edit` (return false to
// drop one).
class ScratchCheckpoint {
 public:
  ScratchCheckpoint(const std::string& fixture, const std::string& name,
                    const std::function<bool(TensorInfo&, std::string&)>& edit) {
    dir_ = (fs::temp_directory_path() / ("deepinfer_v41_" + name + "_" + std::to_string(::getpid()))).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    const std::string src = V41FixtureDir(fixture);
    for (const char* f : {"config.json", "tokenizer.json", "tokenizer_config.json"})
      fs::copy_file(src + "/" + f, dir_ + "/" + f);
    auto file = SafetensorsFile::Open(src + "/model.safetensors");
    EXPECT_TRUE(file.ok());
    std::vector<TensorInfo> infos;
    std::vector<std::string> bytes;
    for (const TensorInfo& t : file->tensors()) {
      TensorInfo copy = t;
      std::string data(reinterpret_cast<const char*>(t.data), t.nbytes());
      if (!edit(copy, data)) continue;
      infos.push_back(copy);
      bytes.push_back(std::move(data));
    }
    std::vector<TensorToWrite> out;
    for (size_t i = 0; i < infos.size(); ++i) out.push_back({infos[i].name, infos[i].dtype, infos[i].shape, bytes[i]});
    EXPECT_TRUE(WriteSafetensors(dir_ + "/model.safetensors", out).ok());
  }
  ~ScratchCheckpoint() { fs::remove_all(dir_); }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

TEST(V41LoadingTest, CheckpointErrorsNameTheTensor) {
  {
    ScratchCheckpoint missing("v41_tiny_b_fp8", "missing", [](TensorInfo& t, std::string&) {
      return t.name != "layers.3.attn.indexer.wk.weight";
    });
    auto m = V41Model::Load(missing.dir());
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.status().message().find("layers.3.attn.indexer.wk.weight"), std::string::npos) << m.status().message();
  }
  {
    ScratchCheckpoint reshaped("v41_tiny_b_fp8", "reshaped", [](TensorInfo& t, std::string& data) {
      if (t.name == "layers.2.attn.wq_b.scale") {  // FP8 block scales of the wrong block shape
        t.shape = {t.shape[0] * t.shape[1]};
        (void)data;
      }
      return true;
    });
    auto m = V41Model::Load(reshaped.dir());
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.status().message().find("layers.2.attn.wq_b.scale"), std::string::npos) << m.status().message();
  }
  {
    ScratchCheckpoint no_table_scale("v41_tiny_b_fp8", "noscale", [](TensorInfo& t, std::string&) {
      return t.name != "layers.5.engram.embed.scale";
    });
    auto m = V41Model::Load(no_table_scale.dir());
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.status().message().find("layers.5.engram.embed.scale"), std::string::npos) << m.status().message();
  }
}

TEST(V41LoadingTest, EngramNeedsTheMatchingTokenizer) {
  ScratchCheckpoint copy("v41_tiny_a_bf16", "tokenizer", [](TensorInfo&, std::string&) { return true; });
  // A tokenizer whose compressed classes differ from engram_compressed_vocab_size: "T" (id 54) shares the
  // class of "t"; renamed to a string of its own it makes a class more (419).
  {
    std::ifstream in(copy.dir() + "/tokenizer.json");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string from = "\"T\": 54,";
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos);
    text.replace(at, from.size(), "\"zzqq\": 54,");  // a class of its own
    std::ofstream(copy.dir() + "/tokenizer.json", std::ios::trunc) << text;
  }
  auto m = V41Model::Load(copy.dir());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("engram_compressed_vocab_size"), std::string::npos) << m.status().message();
  fs::remove(copy.dir() + "/tokenizer.json");
  auto none = V41Model::Load(copy.dir());
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("tokenizer.json"), std::string::npos) << none.status().message();
}

// The dequantized value of an FP8 [rows, cols] tensor with [rows/bo, cols/bi] E8M0 scales, or of a packed
// FP4 [rows, cols/2] tensor with [rows, cols/32] E8M0 scales, written out from the formats' definitions.
std::string DequantizeFp8(const TensorInfo& w, const TensorInfo& s) {
  const int64_t rows = w.shape[0], cols = w.shape[1], bo = rows / s.shape[0], bi = cols / s.shape[1];
  std::vector<float> out(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < cols; ++k)
      out[r * cols + k] = kernels::Fp8E4M3ToFloat(w.data[r * cols + k]) *
                          std::ldexp(1.0f, s.data[(r / bo) * s.shape[1] + k / bi] - 127);
  return std::string(reinterpret_cast<const char*>(out.data()), out.size() * 4);
}

std::string DequantizeFp4(const TensorInfo& w, const TensorInfo& s) {
  const int64_t rows = w.shape[0], cols = w.shape[1] * 2;
  std::vector<float> out(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < cols; ++k) {
      const uint8_t byte = w.data[r * cols / 2 + k / 2];
      const uint8_t nibble = k % 2 == 0 ? (byte & 0xF) : (byte >> 4);  // the even element in the low nibble
      out[r * cols + k] = kernels::E2M1ToFloat(nibble) * std::ldexp(1.0f, s.data[r * (cols / 32) + k / 32] - 127);
    }
  }
  return std::string(reinterpret_cast<const char*>(out.data()), out.size() * 4);
}

TEST(V41LoadingTest, QuantizedCheckpointEqualsItsDequantizedCopy) {
  auto file = SafetensorsFile::Open(V41FixtureDir("v41_tiny_b_fp8") + "/model.safetensors");
  ASSERT_TRUE(file.ok());
  ScratchCheckpoint f32("v41_tiny_b_fp8", "dequantized", [&](TensorInfo& t, std::string& data) {
    if (t.name.size() > 6 && t.name.compare(t.name.size() - 6, 6, ".scale") == 0) return false;
    const std::string prefix = t.name.substr(0, t.name.rfind('.'));
    const TensorInfo* scale = file->Find(prefix + ".scale");
    if (t.dtype == DType::kF8_E4M3) {
      data = DequantizeFp8(t, *scale);
    } else if (t.dtype == DType::kI8) {
      data = DequantizeFp4(t, *scale);
      t.shape[1] *= 2;
    } else {
      return true;
    }
    t.dtype = DType::kF32;
    return true;
  });
  // The dequantized copy must not declare FP8 block shapes it no longer has.
  {
    std::ifstream in(f32.dir() + "/config.json");
    nlohmann::json j = nlohmann::json::parse(in);
    j.erase("quantization_config");
    std::ofstream(f32.dir() + "/config.json", std::ios::trunc) << j.dump();
  }
  auto quantized = V41Model::Load(V41FixtureDir("v41_tiny_b_fp8"));
  auto dequantized = V41Model::Load(f32.dir());
  ASSERT_TRUE(quantized.ok()) << quantized.status().ToString();
  ASSERT_TRUE(dequantized.ok()) << dequantized.status().ToString();
  EXPECT_EQ((*dequantized)->weights().layers[0].moe.experts[0].w1.format, kernels::WeightFormat::kF32);
  EXPECT_EQ((*quantized)->weights().layers[0].moe.experts[0].w1.format, kernels::WeightFormat::kMXFP4);
  EXPECT_EQ((*quantized)->weights().layers[0].attention.wq_b.format, kernels::WeightFormat::kFP8Block);
  EXPECT_EQ((*quantized)->weights().layers[0].attention.wq_b.block_out, 32);
  V41Reference ref("v41_tiny_b_fp8");
  const std::vector<int32_t> tokens = ref.Tokens("seq_len150.input_ids");
  auto logits = [&](V41Model& m) {
    auto pools = kvcache::KvPools::Create(m.cache_spec(), 8);
    SequentialBlocks blocks(m.cache_spec(), *pools);
    auto state = m.NewSequence();
    EXPECT_TRUE(blocks.Reserve(*state, static_cast<int64_t>(tokens.size())).ok());
    SequenceChunk chunk{state.get(), tokens, LogitsWanted::kAll};
    ForwardOutput out;
    EXPECT_TRUE(m.Forward(std::span(&chunk, 1), *pools, &out).ok());
    return out.logits;
  };
  const std::vector<float> a = logits(**quantized), b = logits(**dequantized);
  ASSERT_EQ(a.size(), tokens.size() * 512);
  EXPECT_EQ(a, b);  // bit for bit: the kernels dequantize exactly
}

}  // namespace
}  // namespace deepinfer::model
