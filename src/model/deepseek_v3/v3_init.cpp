#include "model/deepseek_v3/v3_init.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/hf_config.h"
#include "model/common/seeded_writer.h"
#include "model/deepseek_v3/v3_config.h"

namespace deepinfer::model {
namespace {

using nlohmann::ordered_json;

void WriteMlp(SeededShardWriter& w, const std::string& p, int64_t inter, int64_t d, MatrixKind kind) {
  w.Matrix(p + "gate_proj", inter, d, kind);
  w.Matrix(p + "up_proj", inter, d, kind);
  w.Matrix(p + "down_proj", d, inter, kind);
}

void WriteLayer(SeededShardWriter& w, const V3Config& c, int64_t layer) {
  const int64_t d = c.hidden_size, h = c.num_heads, hd = c.head_dim;
  const std::string p = "model.layers." + std::to_string(layer) + ".";
  w.Norm(p + "input_layernorm.weight", d);
  w.Norm(p + "post_attention_layernorm.weight", d);
  const std::string a = p + "self_attn.";
  if (c.q_lora_rank > 0) {
    w.Matrix(a + "q_a_proj", c.q_lora_rank, d, MatrixKind::kDense);
    w.Norm(a + "q_a_layernorm.weight", c.q_lora_rank);
    w.Matrix(a + "q_b_proj", h * hd, c.q_lora_rank, MatrixKind::kDense);
  } else {
    w.Matrix(a + "q_proj", h * hd, d, MatrixKind::kDense);
  }
  w.Matrix(a + "kv_a_proj_with_mqa", c.latent_width(), d, MatrixKind::kDense);
  w.Norm(a + "kv_a_layernorm.weight", c.kv_lora_rank);
  w.Matrix(a + "kv_b_proj", h * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank, MatrixKind::kDense);
  w.Matrix(a + "o_proj", d, h * c.v_head_dim, MatrixKind::kDense);
  if (c.has_indexer()) {
    const int64_t ih = c.index_n_heads, id = c.index_head_dim;
    w.Matrix(a + "indexer.wq_b", ih * id, c.q_lora_rank, MatrixKind::kDense);
    w.Matrix(a + "indexer.wk", id, d, MatrixKind::kDense);
    w.Norm(a + "indexer.k_norm.weight", id);
    w.Floats(a + "indexer.k_norm.bias", {id}, 0.0f, 0.1f);
    w.Matrix(a + "indexer.weights_proj", ih, d, MatrixKind::kKeepBf16);
  }
  const std::string m = p + "mlp.";
  if (!c.is_moe_layer(layer)) {
    WriteMlp(w, m, c.intermediate_size, d, MatrixKind::kDense);
    return;
  }
  w.Matrix(m + "gate", c.n_routed_experts, d, MatrixKind::kKeepBf16, 2.0f);
  w.Floats(m + "gate.e_score_correction_bias", {c.n_routed_experts}, 0.0f, 0.1f);
  for (int64_t e = 0; e < c.n_routed_experts; ++e)
    WriteMlp(w, m + "experts." + std::to_string(e) + ".", c.moe_intermediate_size, d, MatrixKind::kExpert);
  WriteMlp(w, m + "shared_experts.", c.moe_intermediate_size * c.n_shared_experts, d, MatrixKind::kDense);
}

ordered_json BaseConfig() {
  return ordered_json{{"architectures", {"DeepseekV3ForCausalLM"}},
                      {"model_type", "deepseek_v3"},
                      {"bos_token_id", 0},
                      {"eos_token_id", 1},
                      {"vocab_size", 129280},
                      {"tie_word_embeddings", false},
                      {"hidden_act", "silu"},
                      {"attention_bias", false},
                      {"topk_method", "noaux_tc"},
                      {"scoring_func", "sigmoid"},
                      {"norm_topk_prob", true},
                      {"routed_scaling_factor", 2.5},
                      {"n_shared_experts", 1},
                      {"moe_layer_freq", 1},
                      {"first_k_dense_replace", 1},
                      {"rms_norm_eps", 1e-6},
                      {"rope_theta", 10000.0},
                      {"rope_scaling",
                       {{"beta_fast", 32}, {"beta_slow", 1}, {"factor", 40}, {"mscale", 1.0}, {"mscale_all_dim", 1.0},
                        {"original_max_position_embeddings", 4096}, {"type", "yarn"}}},
                      {"max_position_embeddings", 163840},
                      {"num_nextn_predict_layers", 1}};
}

}  // namespace

Result<V3InitFormat> ParseV3InitFormat(const std::string& name) {
  if (name == "f32") return V3InitFormat::kF32;
  if (name == "bf16") return V3InitFormat::kBF16;
  if (name == "fp8") return V3InitFormat::kFp8;
  return Status::InvalidArgument("unknown weight format '" + name + "' (f32, bf16, fp8)");
}

Result<ordered_json> V3PresetConfig(const std::string& preset) {
  ordered_json c = BaseConfig();
  if (preset == "tiny") {
    SetKeys(&c, {{"hidden_size", 64}, {"intermediate_size", 128}, {"moe_intermediate_size", 32},
                 {"num_hidden_layers", 3}, {"num_attention_heads", 4}, {"num_key_value_heads", 4},
                 {"q_lora_rank", 32}, {"kv_lora_rank", 32}, {"qk_nope_head_dim", 16}, {"qk_rope_head_dim", 16},
                 {"v_head_dim", 16}, {"n_routed_experts", 8}, {"num_experts_per_tok", 2}, {"n_group", 4},
                 {"topk_group", 2}});
  } else if (preset == "small") {
    SetKeys(&c, {{"hidden_size", 256}, {"intermediate_size", 768}, {"moe_intermediate_size", 256},
                 {"num_hidden_layers", 6}, {"num_attention_heads", 4}, {"num_key_value_heads", 4},
                 {"q_lora_rank", 128}, {"kv_lora_rank", 128}, {"qk_nope_head_dim", 64}, {"qk_rope_head_dim", 32},
                 {"v_head_dim", 64}, {"n_routed_experts", 16}, {"num_experts_per_tok", 4}, {"n_group", 4},
                 {"topk_group", 2}});
  } else if (preset == "bench") {
    SetKeys(&c, {{"hidden_size", 1024}, {"intermediate_size", 2816}, {"moe_intermediate_size", 512},
                 {"num_hidden_layers", 8}, {"num_attention_heads", 16}, {"num_key_value_heads", 16},
                 {"q_lora_rank", 512}, {"kv_lora_rank", 512}, {"qk_nope_head_dim", 128}, {"qk_rope_head_dim", 64},
                 {"v_head_dim", 128}, {"n_routed_experts", 64}, {"num_experts_per_tok", 6}, {"n_group", 8},
                 {"topk_group", 4}});
  } else {
    return Status::InvalidArgument("unknown preset '" + preset + "' (tiny, small, bench)");
  }
  return c;
}

Result<ordered_json> V32PresetConfig(const std::string& preset) {
  DI_ASSIGN_OR_RETURN(ordered_json c, V3PresetConfig(preset));
  c["architectures"] = {"DeepseekV32ForCausalLM"};
  c["model_type"] = "deepseek_v32";
  if (preset == "tiny") SetKeys(&c, {{"index_n_heads", 4}, {"index_head_dim", 32}, {"index_topk", 64}});
  else if (preset == "small") SetKeys(&c, {{"index_n_heads", 8}, {"index_head_dim", 64}, {"index_topk", 256}});
  else SetKeys(&c, {{"index_n_heads", 64}, {"index_head_dim", 128}, {"index_topk", 2048}});
  return c;
}

Status WriteRandomV3Checkpoint(const ordered_json& config_json, const std::string& dir, uint64_t seed,
                               V3InitFormat format, const std::function<void(int64_t, int64_t)>& progress) {
  DI_ASSIGN_OR_RETURN(HfConfig hf, HfConfig::Parse(config_json.dump(), "config"));
  DI_ASSIGN_OR_RETURN(V3Config c, V3Config::FromHf(hf));
  ordered_json written = config_json;
  SeededFormat f;
  if (format == V3InitFormat::kFp8) {
    f.precision = SeededFormat::Precision::kQuantized;
    f.fp8_scale_inv = true;
    written["quantization_config"] = {{"activation_scheme", "dynamic"}, {"fmt", "e4m3"}, {"quant_method", "fp8"},
                                      {"weight_block_size", {128, 128}}};
    written["torch_dtype"] = "bfloat16";
  } else {
    f.precision = format == V3InitFormat::kF32 ? SeededFormat::Precision::kF32 : SeededFormat::Precision::kBF16;
    written["torch_dtype"] = format == V3InitFormat::kF32 ? "float32" : "bfloat16";
  }
  f.fp8_block = 128;
  const int64_t d = c.hidden_size;
  auto fill = [&](int64_t s, SeededShardWriter& w) {
    if (s == 0) {
      w.Matrix("model.embed_tokens", c.vocab_size, d, MatrixKind::kKeepBf16, std::sqrt(static_cast<float>(d)));
      w.Matrix("lm_head", c.vocab_size, d, MatrixKind::kKeepBf16, 3.0f);
      w.Norm("model.norm.weight", d);
    } else if (s <= c.num_layers) {
      WriteLayer(w, c, s - 1);
    } else {
      // The MTP layer (released: layer 61), as the main layers' MoE block plus its own norms and eh_proj.
      WriteLayer(w, c, c.num_layers);
      const std::string p = "model.layers." + std::to_string(c.num_layers) + ".";
      w.Norm(p + "enorm.weight", d);
      w.Norm(p + "hnorm.weight", d);
      w.Matrix(p + "eh_proj", d, 2 * d, MatrixKind::kDense);
      w.Norm(p + "shared_head.norm.weight", d);
    }
  };
  return WriteSeededCheckpoint(written, 2, dir, seed, f, 1 + c.num_layers + std::min<int64_t>(c.num_mtp_layers, 1),
                               fill, progress);
}

}  // namespace deepinfer::model
