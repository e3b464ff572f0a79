#include "model/v4_config.h"

#include <cmath>
#include <tuple>

namespace deepinfer::model {
namespace {

using nlohmann::json;

Status Invalid(const HfConfig& hf, const std::string& message) {
  return Status::InvalidArgument(hf.source() + ": " + message);
}

Result<V4AttentionType> AttentionTypeFromName(const HfConfig& hf, const std::string& name) {
  if (name == "sliding_attention") return V4AttentionType::kSliding;
  if (name == "compressed_sparse_attention") return V4AttentionType::kCsa;
  if (name == "heavily_compressed_attention") return V4AttentionType::kHca;
  return Invalid(hf, "unknown layer type '" + name + "'");
}

// The released configs list compress ratios 0/4/128; transformers maps exactly these to layer types and
// takes the actual rates from `compress_rates` (so tiny test configs can shrink them).
Result<V4AttentionType> AttentionTypeFromRatio(const HfConfig& hf, int64_t ratio) {
  if (ratio == 0) return V4AttentionType::kSliding;
  if (ratio == 4) return V4AttentionType::kCsa;
  if (ratio == 128) return V4AttentionType::kHca;
  return Invalid(hf, "compress_ratios entry " + std::to_string(ratio) + " is not 0, 4 or 128");
}

Result<RopeParams> RopeFromJson(const HfConfig& hf, const json& j, const std::string& what) {
  RopeParams p;
  if (!j.is_object()) return Invalid(hf, what + " is not an object");
  auto number = [&](const char* key, double fallback) -> double {
    auto it = j.find(key);
    return it != j.end() && it->is_number() ? it->get<double>() : fallback;
  };
  p.theta = number("rope_theta", 0);
  std::string type = "default";
  if (j.contains("rope_type") && j["rope_type"].is_string()) type = j["rope_type"].get<std::string>();
  else if (j.contains("type") && j["type"].is_string()) type = j["type"].get<std::string>();
  if (type == "yarn") {
    p.yarn = true;
    p.factor = number("factor", 0);
    p.original_max_position_embeddings = number("original_max_position_embeddings", 0);
    p.beta_fast = number("beta_fast", 32);
    p.beta_slow = number("beta_slow", 1);
    if (p.factor <= 0 || p.original_max_position_embeddings <= 0)
      return Invalid(hf, what + ": yarn needs a positive factor and original_max_position_embeddings");
    if (number("attention_factor", 1.0) != 1.0)
      return Invalid(hf, what + ": attention_factor other than 1 is not supported");
  } else if (type != "default") {
    return Invalid(hf, what + ": rope type '" + type + "' is not supported");
  }
  return p;
}

}  // namespace

const char* V4AttentionTypeName(V4AttentionType type) {
  switch (type) {
    case V4AttentionType::kSliding: return "sliding_attention";
    case V4AttentionType::kCsa: return "compressed_sparse_attention";
    case V4AttentionType::kHca: return "heavily_compressed_attention";
  }
  return "?";
}

Result<V4Config> V4Config::FromHf(const HfConfig& hf) {
  if (hf.model_type() != "deepseek_v4")
    return Invalid(hf, "model_type is '" + hf.model_type() + "', expected 'deepseek_v4'");
  V4Config c;
  DI_ASSIGN_OR_RETURN(c.vocab_size, hf.Int("vocab_size"));
  DI_ASSIGN_OR_RETURN(c.hidden_size, hf.Int("hidden_size"));
  DI_ASSIGN_OR_RETURN(c.num_layers, hf.Int("num_hidden_layers"));
  DI_ASSIGN_OR_RETURN(c.num_heads, hf.Int("num_attention_heads"));
  c.head_dim = hf.GetInt("head_dim", 512);
  DI_ASSIGN_OR_RETURN(c.q_lora_rank, hf.Int("q_lora_rank"));
  DI_ASSIGN_OR_RETURN(c.o_groups, hf.Int("o_groups"));
  DI_ASSIGN_OR_RETURN(c.o_lora_rank, hf.Int("o_lora_rank"));
  if (hf.GetInt("num_key_value_heads", 1) != 1) return Invalid(hf, "num_key_value_heads must be 1 for DeepSeek-V4");
  if (hf.Has("qk_rope_head_dim")) {
    DI_ASSIGN_OR_RETURN(c.rope_dim, hf.Int("qk_rope_head_dim"));
  } else {
    c.rope_dim = static_cast<int64_t>(c.head_dim * hf.GetFloat("partial_rotary_factor", 64.0 / 512.0));
  }

  DI_ASSIGN_OR_RETURN(c.n_routed_experts, hf.Int("n_routed_experts"));
  DI_ASSIGN_OR_RETURN(c.num_experts_per_tok, hf.Int("num_experts_per_tok"));
  DI_ASSIGN_OR_RETURN(c.moe_intermediate_size, hf.Int("moe_intermediate_size"));
  c.scoring_func = hf.GetString("scoring_func", "sqrtsoftplus");
  if (c.scoring_func != "sqrtsoftplus" && c.scoring_func != "sigmoid")
    return Invalid(hf, "scoring_func '" + c.scoring_func + "' is not supported (sqrtsoftplus, sigmoid)");
  c.routed_scaling_factor = hf.GetFloat("routed_scaling_factor", 1.5);
  c.swiglu_limit = hf.GetFloat("swiglu_limit", 10.0);

  c.sliding_window = hf.GetInt("sliding_window", 128);
  c.index_n_heads = hf.GetInt("index_n_heads", 64);
  c.index_head_dim = hf.GetInt("index_head_dim", 128);
  c.index_topk = hf.GetInt("index_topk", 512);
  c.hc_mult = hf.GetInt("hc_mult", 4);
  c.hc_sinkhorn_iters = hf.GetInt("hc_sinkhorn_iters", 20);
  c.hc_eps = hf.GetFloat("hc_eps", 1e-6);
  c.rms_norm_eps = hf.GetFloat("rms_norm_eps", 1e-6);
  c.num_mtp_layers = hf.GetInt("num_nextn_predict_layers", 0);
  c.bos_token_id = hf.GetInt("bos_token_id", 0);
  if (hf.Has("eos_token_id") && hf.raw()["eos_token_id"].is_array()) {
    DI_ASSIGN_OR_RETURN(c.eos_token_ids, hf.IntList("eos_token_id"));
    if (c.eos_token_ids.empty()) return Invalid(hf, "eos_token_id is an empty list");
  } else {
    c.eos_token_ids = {hf.GetInt("eos_token_id", 1)};
  }
  c.eos_token_id = c.eos_token_ids[0];
  c.max_position_embeddings = hf.GetInt("max_position_embeddings", 0);

  // Per-type compression rates.
  int64_t csa_rate = hf.GetInt("compress_rate_csa", 4), hca_rate = hf.GetInt("compress_rate_hca", 128);
  if (hf.Has("compress_rates")) {
    const json& rates = hf.raw()["compress_rates"];
    if (!rates.is_object()) return Invalid(hf, "compress_rates is not an object");
    for (const auto& [key, value] : rates.items()) {
      if (!value.is_number_integer()) return Invalid(hf, "compress_rates." + key + " is not an integer");
      if (key == "compressed_sparse_attention") csa_rate = value.get<int64_t>();
      else if (key == "heavily_compressed_attention") hca_rate = value.get<int64_t>();
      else return Invalid(hf, "compress_rates has unknown key '" + key + "'");
    }
  }

  // Layer schedule.
  std::vector<V4AttentionType> types;
  bool have_mtp_type = false;
  if (hf.Has("layer_types")) {
    const json& list = hf.raw()["layer_types"];
    if (!list.is_array()) return Invalid(hf, "layer_types is not a list");
    for (const auto& v : list) {
      if (!v.is_string()) return Invalid(hf, "layer_types entries must be strings");
      DI_ASSIGN_OR_RETURN(V4AttentionType t, AttentionTypeFromName(hf, v.get<std::string>()));
      types.push_back(t);
    }
  } else if (hf.Has("compress_ratios")) {
    DI_ASSIGN_OR_RETURN(std::vector<int64_t> ratios, hf.IntList("compress_ratios"));
    for (int64_t r : ratios) {
      DI_ASSIGN_OR_RETURN(V4AttentionType t, AttentionTypeFromRatio(hf, r));
      types.push_back(t);
    }
    if (static_cast<int64_t>(types.size()) > c.num_layers) {
      c.mtp_attention_type = types[c.num_layers];
      have_mtp_type = true;
    }
  } else {
    return Invalid(hf, "needs layer_types or compress_ratios");
  }
  if (static_cast<int64_t>(types.size()) < c.num_layers)
    return Invalid(hf, "the layer schedule has " + std::to_string(types.size()) + " entries for " +
                           std::to_string(c.num_layers) + " layers");
  types.resize(c.num_layers);
  if (!have_mtp_type) c.mtp_attention_type = V4AttentionType::kSliding;
  auto rate_of = [&](V4AttentionType t) -> int64_t {
    return t == V4AttentionType::kCsa ? csa_rate : t == V4AttentionType::kHca ? hca_rate : 0;
  };
  c.attention_types = types;
  for (auto t : types) c.compress_ratios.push_back(rate_of(t));
  c.mtp_compress_ratio = rate_of(c.mtp_attention_type);

  if (hf.Has("mlp_layer_types")) {
    const json& list = hf.raw()["mlp_layer_types"];
    if (!list.is_array()) return Invalid(hf, "mlp_layer_types is not a list");
    for (const auto& v : list) {
      std::string s = v.is_string() ? v.get<std::string>() : "";
      if (s == "hash_moe") c.router_types.push_back(V4RouterType::kHash);
      else if (s == "moe") c.router_types.push_back(V4RouterType::kScore);
      else return Invalid(hf, "mlp_layer_types entries must be 'hash_moe' or 'moe'");
    }
    if (static_cast<int64_t>(c.router_types.size()) < c.num_layers)
      return Invalid(hf, "mlp_layer_types has fewer entries than num_hidden_layers");
    c.router_types.resize(c.num_layers);
  } else {
    int64_t n_hash = hf.GetInt("num_hash_layers", 3);
    for (int64_t i = 0; i < c.num_layers; ++i)
      c.router_types.push_back(i < n_hash ? V4RouterType::kHash : V4RouterType::kScore);
  }

  // RoPE: nested {"main", "compress"} (transformers) or rope_theta / compress_rope_theta / rope_scaling.
  const json* nested = nullptr;
  if (hf.Has("rope_parameters") && hf.raw()["rope_parameters"].is_object() &&
      hf.raw()["rope_parameters"].contains("main") && hf.raw()["rope_parameters"].contains("compress"))
    nested = &hf.raw()["rope_parameters"];
  if (nested) {
    DI_ASSIGN_OR_RETURN(c.main_rope, RopeFromJson(hf, (*nested)["main"], "rope_parameters.main"));
    DI_ASSIGN_OR_RETURN(c.compress_rope, RopeFromJson(hf, (*nested)["compress"], "rope_parameters.compress"));
  } else {
    c.main_rope.theta = hf.GetFloat("rope_theta", 10000.0);
    json compress = json::object();
    for (const char* key : {"rope_scaling", "rope_parameters"}) {
      if (hf.Has(key) && hf.raw()[key].is_object()) compress = hf.raw()[key];
    }
    compress["rope_theta"] = hf.GetFloat("compress_rope_theta", 160000.0);
    DI_ASSIGN_OR_RETURN(c.compress_rope, RopeFromJson(hf, compress, "rope_scaling"));
  }
  if (c.main_rope.yarn) return Invalid(hf, "YaRN on the sliding-window rope is not supported");

  // Consistency.
  auto positive = [&](int64_t v, const char* name) -> Status {
    if (v <= 0) return Invalid(hf, std::string(name) + " must be positive");
    return Status::Ok();
  };
  for (auto [v, name] : {std::pair{c.vocab_size, "vocab_size"}, {c.hidden_size, "hidden_size"},
                         {c.num_layers, "num_hidden_layers"}, {c.num_heads, "num_attention_heads"},
                         {c.head_dim, "head_dim"}, {c.q_lora_rank, "q_lora_rank"}, {c.o_groups, "o_groups"},
                         {c.o_lora_rank, "o_lora_rank"}, {c.n_routed_experts, "n_routed_experts"},
                         {c.num_experts_per_tok, "num_experts_per_tok"},
                         {c.moe_intermediate_size, "moe_intermediate_size"}, {c.sliding_window, "sliding_window"},
                         {c.hc_mult, "hc_mult"}, {c.hc_sinkhorn_iters, "hc_sinkhorn_iters"}}) {
    DI_RETURN_IF_ERROR(positive(v, name));
  }
  // Bounds far above any DeepSeek model (V4-Pro: hidden 7168, 61 layers, 384 experts), so that sizes
  // computed from the config (tables, cache layouts, buffers) stay small and never overflow.
  for (auto [v, limit, name] : {std::tuple{c.vocab_size, int64_t{1} << 24, "vocab_size"},
                                {c.hidden_size, int64_t{1} << 17, "hidden_size"},
                                {c.num_layers, int64_t{1} << 10, "num_hidden_layers"},
                                {c.num_heads, int64_t{1} << 12, "num_attention_heads"},
                                {c.head_dim, int64_t{1} << 14, "head_dim"},
                                {c.q_lora_rank, int64_t{1} << 17, "q_lora_rank"},
                                {c.o_lora_rank, int64_t{1} << 17, "o_lora_rank"},
                                {c.n_routed_experts, int64_t{1} << 16, "n_routed_experts"},
                                {c.moe_intermediate_size, int64_t{1} << 18, "moe_intermediate_size"},
                                {c.sliding_window, int64_t{1} << 16, "sliding_window"},
                                {c.hc_sinkhorn_iters, int64_t{1} << 10, "hc_sinkhorn_iters"},
                                {c.index_n_heads, int64_t{1} << 12, "index_n_heads"},
                                {c.index_head_dim, int64_t{1} << 14, "index_head_dim"},
                                {c.index_topk, int64_t{1} << 24, "index_topk"},
                                {c.num_mtp_layers, int64_t{16}, "num_nextn_predict_layers"}}) {
    if (v > limit) return Invalid(hf, std::string(name) + " " + std::to_string(v) + " exceeds " + std::to_string(limit));
  }
  if (c.rope_dim <= 0 || c.rope_dim % 2 || c.rope_dim > c.head_dim)
    return Invalid(hf, "the rope dimension must be even and within head_dim");
  if (c.num_heads % c.o_groups) return Invalid(hf, "num_attention_heads must be a multiple of o_groups");
  if (c.hc_mult > 16) return Invalid(hf, "hc_mult above 16 is not supported");
  if (c.num_experts_per_tok > c.n_routed_experts) return Invalid(hf, "num_experts_per_tok exceeds n_routed_experts");
  bool any_csa = false;
  for (size_t i = 0; i < c.compress_ratios.size(); ++i) {
    int64_t r = c.compress_ratios[i];
    if (r == 0) continue;
    // KV blocks hold 128 token positions, so a block holds a whole number of compressed entries.
    if (r < 1 || 128 % r) return Invalid(hf, "compression rate " + std::to_string(r) + " does not divide 128");
    any_csa |= c.attention_types[i] == V4AttentionType::kCsa;
  }
  if (c.mtp_compress_ratio != 0) return Invalid(hf, "an MTP layer with compression is not supported");
  if (any_csa) {
    DI_RETURN_IF_ERROR(positive(c.index_n_heads, "index_n_heads"));
    DI_RETURN_IF_ERROR(positive(c.index_topk, "index_topk"));
    if (c.index_head_dim < c.rope_dim) return Invalid(hf, "index_head_dim must be at least the rope dimension");
  }
  return c;
}

std::vector<float> RopeInverseFrequencies(const RopeParams& p, int64_t rope_dim) {
  const int64_t half = rope_dim / 2;
  std::vector<float> pos_freqs(half), out(half);
  const float base = static_cast<float>(p.theta);
  for (int64_t i = 0; i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(rope_dim);
    pos_freqs[i] = static_cast<float>(std::pow(static_cast<double>(base), static_cast<double>(exponent)));
  }
  if (!p.yarn) {
    for (int64_t i = 0; i < half; ++i) out[i] = 1.0f / pos_freqs[i];
    return out;
  }
  auto correction_dim = [&](double rotations) {
    return rope_dim * std::log(p.original_max_position_embeddings / (rotations * 2 * M_PI)) / (2 * std::log(p.theta));
  };
  double low = std::max(std::floor(correction_dim(p.beta_fast)), 0.0);
  double high = std::min(std::ceil(correction_dim(p.beta_slow)), static_cast<double>(rope_dim - 1));
  if (low == high) high += 0.001;
  const float factor = static_cast<float>(p.factor);
  for (int64_t i = 0; i < half; ++i) {
    float ramp = (static_cast<float>(i) - static_cast<float>(low)) / static_cast<float>(high - low);
    ramp = std::min(std::max(ramp, 0.0f), 1.0f);
    const float extrapolation = 1.0f - ramp;
    const float inv_extrapolation = 1.0f / pos_freqs[i];
    const float inv_interpolation = 1.0f / (factor * pos_freqs[i]);
    out[i] = inv_interpolation * (1.0f - extrapolation) + inv_extrapolation * extrapolation;
  }
  return out;
}

}  // namespace deepinfer::model
