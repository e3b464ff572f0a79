#include "model/deepseek_v4/v4_config.h"

#include <cmath>
#include <cstdio>
#include <optional>

#include "core/json.h"
#include "core/utf8.h"
#include "model/common/config_keys.h"

namespace deepinfer::model {
namespace {

using nlohmann::json;

// Messages quote names and values from the file: OneLine keeps a control character in them (a fuzzed key
// such as "compressed_sparse_att\ntion") from splitting the one-line error.
Status InvalidV4Config(const HfConfig& hf, const std::string& message) {
  return Status::InvalidArgument(hf.source() + ": " + utf8::OneLine(message));
}

// Range-checked reads (model/common/config_keys.h): the bounds are far above every released config and are
// listed in v4_config.h.
// A key or name read from the file, as a JSON string: its quotes and escapes keep a control character (a newline
// in a fuzzed key) out of the one-line error, and the length is capped.
std::string Quoted(const std::string& key) { return DumpJson(json(key.substr(0, 64))); }

// A finite number in [lo, hi] (or (lo, hi] when lo_open).
Result<double> FloatIn(const HfConfig& hf, const json& object, const std::string& where, const char* key,
                       double fallback, double lo, double hi, bool lo_open) {
  auto it = object.find(key);
  if (it == object.end()) return fallback;
  const bool ok = it->is_number() && std::isfinite(it->get<double>()) &&
                  (lo_open ? it->get<double>() > lo : it->get<double>() >= lo) && it->get<double>() <= hi;
  if (!ok) {
    char range[96];
    std::snprintf(range, sizeof range, "%s%g, %g]", lo_open ? "(" : "[", lo, hi);
    return KeyError(hf, where + key, *it, std::string("a finite number in ") + range);
  }
  return it->get<double>();
}

Result<V4AttentionType> AttentionTypeFromName(const HfConfig& hf, const std::string& name) {
  if (name == "sliding_attention") return V4AttentionType::kSliding;
  if (name == "compressed_sparse_attention") return V4AttentionType::kCsa;
  if (name == "heavily_compressed_attention") return V4AttentionType::kHca;
  return InvalidV4Config(hf, "unknown layer type " + Quoted(name));
}

// The released configs list compress ratios 0/4/128; transformers maps exactly these to layer types and
// takes the actual rates from `compress_rates` (so tiny test configs can shrink them).
Result<V4AttentionType> AttentionTypeFromRatio(const HfConfig& hf, int64_t ratio) {
  if (ratio == 0) return V4AttentionType::kSliding;
  if (ratio == 4) return V4AttentionType::kCsa;
  if (ratio == 128) return V4AttentionType::kHca;
  return InvalidV4Config(hf, "compress_ratios entry " + std::to_string(ratio) + " is not 0, 4 or 128");
}

Result<RopeParams> V4RopeFromJson(const HfConfig& hf, const json& j, const std::string& what) {
  RopeParams p;
  if (!j.is_object()) return InvalidV4Config(hf, what + " is not an object");
  const std::string where = what + ".";
  DI_ASSIGN_OR_RETURN(p.theta, FloatIn(hf, j, where, "rope_theta", 0, 0, 1e12, /*lo_open=*/true));
  std::string type = "default";
  if (j.contains("rope_type") && j["rope_type"].is_string()) type = j["rope_type"].get<std::string>();
  else if (j.contains("type") && j["type"].is_string()) type = j["type"].get<std::string>();
  if (type == "yarn") {
    p.yarn = true;
    if (!j.contains("factor") || !j.contains("original_max_position_embeddings"))
      return InvalidV4Config(hf, what + ": yarn needs a positive factor and original_max_position_embeddings");
    DI_ASSIGN_OR_RETURN(p.factor, FloatIn(hf, j, where, "factor", 0, 0, 1e6, true));
    DI_ASSIGN_OR_RETURN(p.original_max_position_embeddings,
                        FloatIn(hf, j, where, "original_max_position_embeddings", 0, 0, 1 << 24, true));
    DI_ASSIGN_OR_RETURN(p.beta_fast, FloatIn(hf, j, where, "beta_fast", 32, 0, 1e6, true));
    DI_ASSIGN_OR_RETURN(p.beta_slow, FloatIn(hf, j, where, "beta_slow", 1, 0, 1e6, true));
    DI_ASSIGN_OR_RETURN(double attention_factor, FloatIn(hf, j, where, "attention_factor", 1.0, 0, 1e6, true));
    if (attention_factor != 1.0) return InvalidV4Config(hf, what + ": attention_factor other than 1 is not supported");
  } else if (type != "default") {
    return InvalidV4Config(hf, what + ": rope type '" + type + "' is not supported");
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
    return InvalidV4Config(hf, "model_type is '" + hf.model_type() + "', expected 'deepseek_v4'");
  V4Config c;
  // Far above any DeepSeek model (V4-Pro: hidden 7168, 61 layers, 384 experts).
  constexpr int64_t kMaxDim = int64_t{1} << 17;
  DI_ASSIGN_OR_RETURN(c.vocab_size, IntIn(hf, "vocab_size", std::nullopt, 1, 1 << 24));
  DI_ASSIGN_OR_RETURN(c.hidden_size, IntIn(hf, "hidden_size", std::nullopt, 1, kMaxDim));
  DI_ASSIGN_OR_RETURN(c.num_layers, IntIn(hf, "num_hidden_layers", std::nullopt, 1, 1024));
  DI_ASSIGN_OR_RETURN(c.num_heads, IntIn(hf, "num_attention_heads", std::nullopt, 1, 4096));
  DI_ASSIGN_OR_RETURN(c.head_dim, IntIn(hf, "head_dim", 512, 2, 16384));
  DI_ASSIGN_OR_RETURN(c.q_lora_rank, IntIn(hf, "q_lora_rank", std::nullopt, 1, kMaxDim));
  DI_ASSIGN_OR_RETURN(c.o_groups, IntIn(hf, "o_groups", std::nullopt, 1, c.num_heads));
  DI_ASSIGN_OR_RETURN(c.o_lora_rank, IntIn(hf, "o_lora_rank", std::nullopt, 1, kMaxDim));
  DI_ASSIGN_OR_RETURN(int64_t kv_heads, IntIn(hf, "num_key_value_heads", 1, 1, 1));
  (void)kv_heads;  // DeepSeek-V4 has one K=V head
  if (hf.Has("qk_rope_head_dim")) {
    DI_ASSIGN_OR_RETURN(c.rope_dim, IntIn(hf, "qk_rope_head_dim", std::nullopt, 2, c.head_dim));
  } else {
    DI_ASSIGN_OR_RETURN(double partial, FloatIn(hf, hf.raw(), "", "partial_rotary_factor", 64.0 / 512.0, 0, 1, true));
    c.rope_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * partial);
  }

  DI_ASSIGN_OR_RETURN(c.n_routed_experts, IntIn(hf, "n_routed_experts", std::nullopt, 1, 65536));
  DI_ASSIGN_OR_RETURN(c.num_experts_per_tok, IntIn(hf, "num_experts_per_tok", std::nullopt, 1, c.n_routed_experts));
  DI_ASSIGN_OR_RETURN(c.moe_intermediate_size, IntIn(hf, "moe_intermediate_size", std::nullopt, 1, 1 << 18));
  c.scoring_func = hf.GetString("scoring_func", "sqrtsoftplus");
  if (c.scoring_func != "sqrtsoftplus" && c.scoring_func != "sigmoid")
    return InvalidV4Config(hf, "scoring_func '" + c.scoring_func + "' is not supported (sqrtsoftplus, sigmoid)");
  DI_ASSIGN_OR_RETURN(c.routed_scaling_factor, FloatIn(hf, hf.raw(), "", "routed_scaling_factor", 1.5, 0, 1e6, true));
  DI_ASSIGN_OR_RETURN(c.swiglu_limit, FloatIn(hf, hf.raw(), "", "swiglu_limit", 10.0, -1e30, 1e30, false));

  DI_ASSIGN_OR_RETURN(c.sliding_window, IntIn(hf, "sliding_window", 128, 1, 1 << 16));
  DI_ASSIGN_OR_RETURN(c.index_n_heads, IntIn(hf, "index_n_heads", 64, 1, 4096));
  DI_ASSIGN_OR_RETURN(c.index_head_dim, IntIn(hf, "index_head_dim", 128, 1, 16384));
  DI_ASSIGN_OR_RETURN(c.index_topk, IntIn(hf, "index_topk", 512, 1, 1 << 24));
  DI_ASSIGN_OR_RETURN(c.hc_mult, IntIn(hf, "hc_mult", 4, 1, 16));
  DI_ASSIGN_OR_RETURN(c.hc_sinkhorn_iters, IntIn(hf, "hc_sinkhorn_iters", 20, 1, 1024));
  DI_ASSIGN_OR_RETURN(c.hc_eps, FloatIn(hf, hf.raw(), "", "hc_eps", 1e-6, 0, 1, true));
  DI_ASSIGN_OR_RETURN(c.rms_norm_eps, FloatIn(hf, hf.raw(), "", "rms_norm_eps", 1e-6, 0, 1, true));
  DI_ASSIGN_OR_RETURN(c.num_mtp_layers, IntIn(hf, "num_nextn_predict_layers", 0, 0, 16));
  DI_ASSIGN_OR_RETURN(c.bos_token_id, IntIn(hf, "bos_token_id", 0, 0, c.vocab_size - 1));
  if (hf.Has("eos_token_id") && hf.raw()["eos_token_id"].is_array()) {
    DI_ASSIGN_OR_RETURN(c.eos_token_ids, hf.IntList("eos_token_id"));
    if (c.eos_token_ids.empty()) return InvalidV4Config(hf, "eos_token_id is an empty list");
    if (c.eos_token_ids.size() > 64) return InvalidV4Config(hf, "eos_token_id lists more than 64 ids");
    for (int64_t id : c.eos_token_ids) {
      if (id < 0 || id >= c.vocab_size)
        return KeyError(hf, "eos_token_id", id, "ids in " + KeyRange(0, c.vocab_size - 1));
    }
  } else {
    DI_ASSIGN_OR_RETURN(int64_t eos, IntIn(hf, "eos_token_id", 1, 0, c.vocab_size - 1));
    c.eos_token_ids = {eos};
  }
  c.eos_token_id = c.eos_token_ids[0];
  DI_ASSIGN_OR_RETURN(c.max_position_embeddings, IntIn(hf, "max_position_embeddings", 0, 0, 1 << 24));

  // Per-type compression rates.
  DI_ASSIGN_OR_RETURN(int64_t csa_rate, IntIn(hf, "compress_rate_csa", 4, 1, 128));
  DI_ASSIGN_OR_RETURN(int64_t hca_rate, IntIn(hf, "compress_rate_hca", 128, 1, 128));
  if (hf.Has("compress_rates")) {
    const json& rates = hf.raw()["compress_rates"];
    if (!rates.is_object()) return InvalidV4Config(hf, "compress_rates is not an object");
    for (const auto& [key, value] : rates.items()) {
      if (!value.is_number_integer() || value.get<int64_t>() < 1 || value.get<int64_t>() > 128)
        return KeyError(hf, "compress_rates." + Quoted(key), value, "an integer in [1, 128]");
      if (key == "compressed_sparse_attention") csa_rate = value.get<int64_t>();
      else if (key == "heavily_compressed_attention") hca_rate = value.get<int64_t>();
      else return InvalidV4Config(hf, "compress_rates has unknown key " + Quoted(key));
    }
  }

  // Layer schedule.
  std::vector<V4AttentionType> types;
  bool have_mtp_type = false;
  if (hf.Has("layer_types")) {
    const json& list = hf.raw()["layer_types"];
    if (!list.is_array()) return InvalidV4Config(hf, "layer_types is not a list");
    for (const auto& v : list) {
      if (!v.is_string()) return InvalidV4Config(hf, "layer_types entries must be strings");
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
    return InvalidV4Config(hf, "needs layer_types or compress_ratios");
  }
  if (static_cast<int64_t>(types.size()) < c.num_layers)
    return InvalidV4Config(hf, "the layer schedule has " + std::to_string(types.size()) + " entries for " +
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
    if (!list.is_array()) return InvalidV4Config(hf, "mlp_layer_types is not a list");
    for (const auto& v : list) {
      std::string s = v.is_string() ? v.get<std::string>() : "";
      if (s == "hash_moe") c.router_types.push_back(V4RouterType::kHash);
      else if (s == "moe") c.router_types.push_back(V4RouterType::kScore);
      else return InvalidV4Config(hf, "mlp_layer_types entries must be 'hash_moe' or 'moe'");
    }
    if (static_cast<int64_t>(c.router_types.size()) < c.num_layers)
      return InvalidV4Config(hf, "mlp_layer_types has fewer entries than num_hidden_layers");
    c.router_types.resize(c.num_layers);
  } else {
    DI_ASSIGN_OR_RETURN(int64_t n_hash, IntIn(hf, "num_hash_layers", 3, 0, 1024));
    for (int64_t i = 0; i < c.num_layers; ++i)
      c.router_types.push_back(i < n_hash ? V4RouterType::kHash : V4RouterType::kScore);
  }

  // RoPE: nested {"main", "compress"} (transformers) or rope_theta / compress_rope_theta / rope_scaling.
  const json* nested = NestedRopeParameters(hf);
  if (nested) {
    DI_ASSIGN_OR_RETURN(c.main_rope, V4RopeFromJson(hf, (*nested)["main"], "rope_parameters.main"));
    DI_ASSIGN_OR_RETURN(c.compress_rope, V4RopeFromJson(hf, (*nested)["compress"], "rope_parameters.compress"));
  } else {
    DI_ASSIGN_OR_RETURN(c.main_rope.theta, FloatIn(hf, hf.raw(), "", "rope_theta", 10000.0, 0, 1e12, true));
    json compress = json::object();
    for (const char* key : {"rope_scaling", "rope_parameters"}) {
      if (hf.Has(key) && hf.raw()[key].is_object()) compress = hf.raw()[key];
    }
    DI_ASSIGN_OR_RETURN(double compress_theta, FloatIn(hf, hf.raw(), "", "compress_rope_theta", 160000.0, 0, 1e12, true));
    compress["rope_theta"] = compress_theta;
    DI_ASSIGN_OR_RETURN(c.compress_rope, V4RopeFromJson(hf, compress, "rope_scaling"));
  }
  if (c.main_rope.yarn) return InvalidV4Config(hf, "YaRN on the sliding-window rope is not supported");

  // Consistency.
  if (c.rope_dim <= 0 || c.rope_dim % 2 || c.rope_dim > c.head_dim)
    return InvalidV4Config(hf, "the rope dimension must be even and within head_dim");
  if (c.num_heads % c.o_groups) return InvalidV4Config(hf, "num_attention_heads must be a multiple of o_groups");
  bool any_csa = false;
  for (size_t i = 0; i < c.compress_ratios.size(); ++i) {
    int64_t r = c.compress_ratios[i];
    if (r == 0) continue;
    // KV blocks hold 128 token positions, so a block holds a whole number of compressed entries.
    if (r < 1 || 128 % r) return InvalidV4Config(hf, "compression rate " + std::to_string(r) + " does not divide 128");
    any_csa |= c.attention_types[i] == V4AttentionType::kCsa;
  }
  if (c.mtp_compress_ratio != 0) return InvalidV4Config(hf, "an MTP layer with compression is not supported");
  if (any_csa) {
    if (c.index_head_dim < c.rope_dim) return InvalidV4Config(hf, "index_head_dim must be at least the rope dimension");
  }
  return c;
}

}  // namespace deepinfer::model
