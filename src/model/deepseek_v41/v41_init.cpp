#include "model/deepseek_v41/v41_init.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/hf_config.h"
#include "core/safetensors.h"
#include "core/thread_pool.h"
#include "kernels/number_formats.h"
#include "model/common/seeded_checkpoint.h"
#include "model/common/seeded_writer.h"
#include "model/deepseek_v41/v41_config.h"
#include "model/deepseek_v41/v41_engram.h"

namespace deepinfer::model {
namespace {

using nlohmann::ordered_json;

// The released formats: FP8 in 32×32 blocks, packed FP4 experts, FP8 Engram tables with a scale per 32
// values, BF16 norms, and BF16 where a dimension is not a multiple of 32.
SeededFormat FormatOf(V41InitFormat format) {
  SeededFormat f;
  f.precision = format == V41InitFormat::kBF16 ? SeededFormat::Precision::kBF16 : SeededFormat::Precision::kQuantized;
  f.fp8_block = 32;
  f.fp8_whole_blocks = true;
  f.norms_bf16 = true;
  return f;
}

void AddBlock(SeededShardWriter& w, const V41Config& c, const std::string& p, const V41LayerPlan& plan, int64_t experts) {
  const int64_t d = c.hidden_size, hd = c.head_dim, hc = c.hc_mult;
  const BlockShape shape = BlockShape::Of(c);
  const std::string a = p + "attn.";
  WriteAttentionProjections(w, shape, p);
  if (plan.kv_source) {
    w.Matrix(a + "compressor.wkv", hd, d, MatrixKind::kKeepBf16);
    if (plan.ratio > 1) w.Matrix(a + "compressor.wgate", hd, d, MatrixKind::kKeepBf16, 2.0f);
    w.Norm(a + "compressor.norm.weight", hd);
  }
  if (plan.index_source) {
    const std::string ip = a + "indexer.";
    w.Matrix(ip + "wq_b", c.index_n_heads * c.index_head_dim, c.q_lora_rank, MatrixKind::kDense);
    w.Matrix(ip + "weights_proj", c.index_n_heads, d, MatrixKind::kKeepBf16);
    if (plan.kv_source) {
      w.Matrix(ip + "wk", c.index_head_dim, hd, MatrixKind::kKeepBf16);
      w.Norm(ip + "k_norm.weight", c.index_head_dim);
    }
  }
  WriteBlockSites(w, shape, p);
  const std::string f = p + "ffn.";
  const int64_t e = experts;
  w.Matrix(f + "gate", e, d, MatrixKind::kKeepBf16, 2.0f);
  w.Floats(f + "gate.bias", {e}, 0.0f, 0.3f);
  w.Floats(f + "gate.bias_vl", {e}, 0.0f, 0.3f);
  WriteExperts(w, shape, p, e);
  if (plan.engram >= 0) {
    const V41EngramConfig& g = c.engram;
    const std::string gp = p + "engram.";
    w.RowTable(gp + "embed", g.num_embeddings[plan.engram], g.head_dim);
    w.Matrix(gp + "wkv", (hc + 1) * d, g.num_columns() * g.head_dim, MatrixKind::kDense);
    w.Floats(gp + "q_weight", {hc, d}, 1.0f, 0.2f, true);
    w.Floats(gp + "k_weight", {hc, d}, 1.0f, 0.2f, true);
  }
}

ordered_json TextBase() {
  ordered_json c{{"model_type", "deepseek_v41_text"},
                 {"vocab_size", 129280},
                 {"bos_token_id", 0},
                 {"eos_token_id", 1},
                 {"pad_token_id", 2},
                 {"tie_word_embeddings", false},
                 {"hidden_act", "silu"},
                 {"num_key_value_heads", 1},
                 {"n_shared_experts", 1},
                 {"scoring_func", "sqrtsoftplus"},
                 {"gate_temp", 1.0}};
  SetReleaseRoutingAndMhc(&c);
  SetKeys(&c, {{"rms_norm_eps", 1e-20},
               {"rope_theta", 10000.0},
               {"compress_rope_theta", 160000.0},
               {"rope_scaling",
                {{"rope_type", "yarn"}, {"factor", 16}, {"beta_fast", 32}, {"beta_slow", 1},
                 {"original_max_position_embeddings", 65536}}},
               {"max_position_embeddings", 1048576},
               {"engram_max_ngram_size", 4},
               {"engram_pad_id", 2},
               {"engram_compressed_vocab_size", 99092},
               {"dspark_block_size", 5},
               {"dspark_noise_token_id", 128799}});
  return c;
}

}  // namespace

Result<V41InitFormat> ParseV41InitFormat(const std::string& name) {
  if (name == "bf16") return V41InitFormat::kBF16;
  if (name == "fp8") return V41InitFormat::kQuantized;
  return Status::InvalidArgument("unknown weight format '" + name + "' for DeepSeek-V4.1 (bf16, fp8)");
}

Result<ordered_json> V41PresetConfig(const std::string& preset) {
  ordered_json t = TextBase();
  const int64_t layers = preset == "tiny" ? 6 : preset == "small" ? 10 : 12;
  DI_RETURN_IF_ERROR(SetPresetShape(preset, layers, &t));
  // Each preset keeps the release's structure: window-only layers, ratio-2 groups whose KV sources publish
  // latents for the layers after them, a ratio-1 group whose source is the candidate source and re-index
  // sources after it, Engram on a window-only layer and on a later one.
  if (preset == "tiny") {
    SetKeys(&t, {{"compress_ratios", {0, 2, 2, 1, 1, 1}}, {"kv_source_layer_ids", {1, 3}},
                 {"index_source_layer_ids", {1, 3, 4}}, {"candidate_source_layer_id", 3}, {"candidate_topk_blocks", 4},
                 {"candidate_block_size", 8}, {"index_n_heads", 4}, {"index_head_dim", 32}, {"index_topk", 16},
                 {"n_routed_experts", 8}, {"num_experts_per_tok", 2}, {"moe_intermediate_size", 32},
                 {"engram_layer_ids", {0, 4}}, {"engram_vocab_size", 300}, {"engram_n_heads", 2},
                 {"engram_head_dim", 32}, {"num_nextn_predict_layers", 1}, {"dspark_target_layer_ids", {2, 4, 5}},
                 {"dspark_markov_rank", 16}, {"dspark_n_routed_experts", 4}, {"dspark_num_experts_per_tok", 2}});
  } else if (preset == "small") {
    SetKeys(&t, {{"compress_ratios", {0, 0, 2, 2, 2, 2, 1, 1, 1, 1}}, {"kv_source_layer_ids", {2, 4, 6}},
                 {"index_source_layer_ids", {2, 4, 6, 8}}, {"candidate_source_layer_id", 6},
                 {"candidate_topk_blocks", 64}, {"candidate_block_size", 8}, {"index_n_heads", 8},
                 {"index_head_dim", 64}, {"index_topk", 128}, {"n_routed_experts", 16}, {"num_experts_per_tok", 4},
                 {"moe_intermediate_size", 256}, {"engram_layer_ids", {1, 4}}, {"engram_vocab_size", 5000},
                 {"engram_n_heads", 4}, {"engram_head_dim", 64}, {"num_nextn_predict_layers", 2},
                 {"dspark_target_layer_ids", {7, 8, 9}}, {"dspark_markov_rank", 64}, {"dspark_n_routed_experts", 8},
                 {"dspark_num_experts_per_tok", 2}});
  } else {
    SetKeys(&t, {{"compress_ratios", {0, 0, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1}}, {"kv_source_layer_ids", {2, 5, 7}},
                 {"index_source_layer_ids", {2, 5, 7, 9, 11}}, {"candidate_source_layer_id", 7},
                 {"candidate_topk_blocks", 256}, {"candidate_block_size", 8}, {"index_n_heads", 16},
                 {"index_head_dim", 128}, {"index_topk", 512}, {"n_routed_experts", 64}, {"num_experts_per_tok", 6},
                 {"moe_intermediate_size", 512}, {"engram_layer_ids", {1, 7}}, {"engram_vocab_size", 100000},
                 {"engram_n_heads", 8}, {"engram_head_dim", 256}, {"num_nextn_predict_layers", 0}});
  }
  // The table sizes follow from the primes (transformers checks that they agree).
  V41EngramConfig e;
  e.layer_ids = t["engram_layer_ids"].get<std::vector<int64_t>>();
  e.vocab_size = t["engram_vocab_size"].get<int64_t>();
  e.max_ngram_size = t["engram_max_ngram_size"].get<int64_t>();
  e.n_heads = t["engram_n_heads"].get<int64_t>();
  t["engram_num_embeddings"] = EngramTableRows(e);
  return ordered_json{{"architectures", {"DeepseekV41ForCausalLM"}},
                      {"model_type", "deepseek_v41"},
                      {"torch_dtype", "bfloat16"},
                      {"image_token_id", 129264},
                      {"tie_word_embeddings", false},
                      {"text_config", t},
                      {"vision_config",
                       {{"model_type", "deepseek_v41_vision"}, {"hidden_size", 1024}, {"intermediate_size", 2816},
                        {"num_hidden_layers", 32}, {"num_attention_heads", 16}, {"patch_size", 14},
                        {"downsample_ratio", 3}, {"rope_theta", 10000.0}, {"max_image_tokens", 1024},
                        {"min_pixels", 295936}}}};
}

Status WriteRandomV41Checkpoint(const ordered_json& config_json, const std::string& dir, uint64_t seed,
                                V41InitFormat format, const std::function<void(int64_t, int64_t)>& progress) {
  DI_ASSIGN_OR_RETURN(HfConfig hf, HfConfig::Parse(config_json.dump(), "config"));
  DI_ASSIGN_OR_RETURN(V41Config c, V41Config::FromHf(hf));
  for (size_t i = 0; i < c.engram.layer_ids.size(); ++i) {
    if (EngramTableRows(c.engram)[i] != c.engram.num_embeddings[i])
      return Status::InvalidArgument("engram_num_embeddings does not match the prime layout of engram_vocab_size");
  }
  ordered_json written = config_json;
  if (format == V41InitFormat::kQuantized) {
    written["quantization_config"] = {{"activation_scheme", "dynamic"}, {"fmt", "e4m3"}, {"quant_method", "fp8"},
                                      {"scale_fmt", "ue8m0"}, {"weight_block_size", {32, 32}}, {"expert_dtype", "fp4"}};
  }
  const int64_t dspark_layers = c.dspark.num_layers;
  const int64_t shards = 1 + c.num_layers + (dspark_layers > 0 ? 1 : 0);
  const int64_t d = c.hidden_size;
  auto fill = [&](int64_t s, SeededShardWriter& w) {
    if (s == 0) {
      w.Matrix("embed", c.vocab_size, d, MatrixKind::kKeepBf16, std::sqrt(static_cast<float>(d)));
      w.Matrix("head", c.vocab_size, d, MatrixKind::kKeepBf16, 3.0f);
      w.Norm("norm.weight", d);
    } else if (s <= c.num_layers) {
      AddBlock(w, c, "layers." + std::to_string(s - 1) + ".", c.layers[s - 1], c.n_routed_experts);
    } else {
      // DSpark draft layers (window-only blocks), the context projection, the Markov and confidence heads.
      const int64_t targets = static_cast<int64_t>(c.dspark.target_layer_ids.size()), r = c.dspark.markov_rank;
      w.Matrix("mtp.main_proj", d, targets * d, MatrixKind::kDense);
      w.Norm("mtp.main_norm.weight", d);
      for (int64_t k = 0; k < dspark_layers; ++k)
        AddBlock(w, c, "mtp.layers." + std::to_string(k) + ".", V41LayerPlan{}, c.dspark.n_routed_experts);
      w.Norm("mtp.norm.weight", d);
      w.Matrix("mtp.markov_head.embed", c.vocab_size, r, MatrixKind::kKeepBf16, std::sqrt(static_cast<float>(r)));
      w.Matrix("mtp.markov_head.head", c.vocab_size, r, MatrixKind::kKeepBf16);
      w.Floats("mtp.confidence_head.weight", {1, d + r}, 0.0f, 1.0f / std::sqrt(static_cast<float>(d + r)));
    }
  };
  return WriteSeededCheckpoint(written, 1, dir, seed, FormatOf(format), shards, fill, progress);
}

}  // namespace deepinfer::model
