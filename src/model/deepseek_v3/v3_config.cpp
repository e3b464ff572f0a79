#include "model/deepseek_v3/v3_config.h"

#include <cmath>
#include <cstdio>
#include <optional>
#include <string>

#include "core/json.h"
#include "core/utf8.h"
#include "model/common/config_keys.h"

namespace deepinfer::model {
namespace v3_config {

using nlohmann::json;

// An integer key that may be null (q_lora_rank): 0 for null or absent.
Result<int64_t> OptionalIntIn(const HfConfig& hf, const char* key, int64_t lo, int64_t hi) {
  auto it = hf.raw().find(key);
  if (it == hf.raw().end() || it->is_null()) return 0;
  return IntIn(hf, key, std::nullopt, lo, hi);
}

Result<double> FloatIn(const HfConfig& hf, const json& object, const std::string& where, const char* key,
                       double fallback, double lo, double hi) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < lo || it->get<double>() > hi) {
    char range[96];
    std::snprintf(range, sizeof range, "[%g, %g]", lo, hi);
    return KeyError(hf, where + key, *it, std::string("a finite number in ") + range);
  }
  return it->get<double>();
}

Result<bool> BoolKey(const HfConfig& hf, const char* key, bool fallback) {
  auto it = hf.raw().find(key);
  if (it == hf.raw().end() || it->is_null()) return fallback;
  if (!it->is_boolean()) return KeyError(hf, key, *it, "true or false");
  return it->get<bool>();
}

Status StringIs(const HfConfig& hf, const char* key, const std::string& fallback, const std::string& want) {
  auto it = hf.raw().find(key);
  const bool absent = it == hf.raw().end() || it->is_null();
  const std::string value = absent ? fallback : it->is_string() ? it->get<std::string>() : "";
  if (value != want) return KeyError(hf, key, it == hf.raw().end() ? json(fallback) : *it, "\"" + want + "\"");
  return Status::Ok();
}

// yarn_get_mscale: 0.1 · mscale · ln(factor) + 1 (1 for factor ≤ 1).
double YarnMscale(double factor, double mscale) { return factor <= 1 ? 1.0 : 0.1 * mscale * std::log(factor) + 1.0; }

// RoPE from rope_scaling (the released spelling) or rope_parameters (transformers' own), with rope_theta at
// the top level or inside; the mscale folded into the softmax scale as transformers does.
Status ReadRope(const HfConfig& hf, V3Config* c) {
  const json* scaling = nullptr;
  std::string where;
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    auto it = hf.raw().find(key);
    if (it == hf.raw().end() || it->is_null()) continue;
    if (!it->is_object()) return KeyError(hf, key, *it, "an object");
    scaling = &*it;
    where = std::string(key) + ".";
    break;
  }
  static const json kEmpty = json::object();
  const json& j = scaling != nullptr ? *scaling : kEmpty;
  DI_ASSIGN_OR_RETURN(const double top_theta, FloatIn(hf, hf.raw(), "", "rope_theta", 10000.0, 1e-6, 1e12));
  DI_ASSIGN_OR_RETURN(c->rope.theta, FloatIn(hf, j, where, "rope_theta", top_theta, 1e-6, 1e12));
  std::string type = "default";
  if (j.contains("rope_type") && j["rope_type"].is_string()) type = j["rope_type"].get<std::string>();
  else if (j.contains("type") && j["type"].is_string()) type = j["type"].get<std::string>();
  const double base_scale = 1.0 / std::sqrt(static_cast<double>(c->head_dim));
  c->softmax_scale = static_cast<float>(base_scale);
  if (type == "default") return Status::Ok();
  if (type != "yarn") return KeyError(hf, where + "rope_type", json(type), "\"default\" or \"yarn\"");
  c->rope.yarn = true;
  DI_ASSIGN_OR_RETURN(c->rope.factor, FloatIn(hf, j, where, "factor", 0, 1e-6, 1e6));
  if (c->rope.factor <= 0) return KeyError(hf, where + "factor", json(nullptr), "a finite number in [1e-06, 1e+06]");
  DI_ASSIGN_OR_RETURN(c->rope.original_max_position_embeddings,
                      FloatIn(hf, j, where, "original_max_position_embeddings", 0, 1, 1 << 24));
  if (c->rope.original_max_position_embeddings <= 0)
    return KeyError(hf, where + "original_max_position_embeddings", json(nullptr), "a number in [1, 16777216]");
  DI_ASSIGN_OR_RETURN(c->rope.beta_fast, FloatIn(hf, j, where, "beta_fast", 32, 1e-6, 1e6));
  DI_ASSIGN_OR_RETURN(c->rope.beta_slow, FloatIn(hf, j, where, "beta_slow", 1, 1e-6, 1e6));
  if (j.contains("truncate") && !(j["truncate"].is_boolean() && j["truncate"].get<bool>()))
    return KeyError(hf, where + "truncate", j["truncate"], "true");
  DI_ASSIGN_OR_RETURN(const double mscale, FloatIn(hf, j, where, "mscale", 0, 0, 1e6));
  DI_ASSIGN_OR_RETURN(const double mscale_all_dim, FloatIn(hf, j, where, "mscale_all_dim", 0, 0, 1e6));
  // transformers: the attention factor scales cos and sin; mscale_all_dim the softmax (all channels).
  double attention_factor = mscale != 0 && mscale_all_dim != 0
                                ? YarnMscale(c->rope.factor, mscale) / YarnMscale(c->rope.factor, mscale_all_dim)
                                : YarnMscale(c->rope.factor, 1.0);
  DI_ASSIGN_OR_RETURN(attention_factor, FloatIn(hf, j, where, "attention_factor", attention_factor, 1e-6, 1e6));
  c->rope_attention_factor = static_cast<float>(attention_factor);
  double scale = base_scale;
  if (mscale_all_dim != 0) {
    const double m = YarnMscale(c->rope.factor, mscale_all_dim);
    scale = scale * m * m;
  }
  c->softmax_scale = static_cast<float>(scale);
  return Status::Ok();
}

// V3.2's lightning indexer.
Status ReadIndexer(const HfConfig& hf, V3Config* c) {
  if (c->q_lora_rank == 0)
    return KeyError(hf, "q_lora_rank", nullptr, "an integer in [1, 16384] (the indexer reads the query's latent)");
  DI_ASSIGN_OR_RETURN(c->index_topk, IntIn(hf, "index_topk", 2048, 1, 1 << 24));
  DI_ASSIGN_OR_RETURN(c->index_n_heads, IntIn(hf, "index_n_heads", 64, 1, 1024));
  DI_ASSIGN_OR_RETURN(c->index_head_dim, IntIn(hf, "index_head_dim", 128, 1, 1024));
  const int64_t dim = c->index_head_dim;
  if ((dim & (dim - 1)) != 0 || dim < 4)
    return KeyError(hf, "index_head_dim", dim, "a power of two from 4 (the Hadamard transform)");
  if (c->rope_dim > dim)
    return KeyError(hf, "qk_rope_head_dim", c->rope_dim, "at most index_head_dim (" + std::to_string(dim) + ")");
  auto q = hf.raw().find("quantization_config");
  if (q != hf.raw().end() && q->is_object()) {
    auto fmt = q->find("scale_fmt");
    if (fmt != q->end() && !fmt->is_null()) {
      if (!fmt->is_string() || (fmt->get<std::string>() != "ue8m0" && fmt->get<std::string>() != "fp32"))
        return KeyError(hf, "quantization_config.scale_fmt", *fmt, "\"ue8m0\" or \"fp32\"");
      c->index_pow2_scales = fmt->get<std::string>() == "ue8m0";
    }
  }
  return Status::Ok();
}

}  // namespace v3_config

Result<V3Config> V3Config::FromHf(const HfConfig& hf) {
  using namespace v3_config;
  V3Config c;
  c.hc_mult = 1;
  c.scoring_func = "sigmoid";
  DI_ASSIGN_OR_RETURN(c.vocab_size, IntIn(hf, "vocab_size", std::nullopt, 1, 1 << 24));
  DI_ASSIGN_OR_RETURN(c.hidden_size, IntIn(hf, "hidden_size", std::nullopt, 1, 65536));
  DI_ASSIGN_OR_RETURN(c.num_layers, IntIn(hf, "num_hidden_layers", std::nullopt, 1, 1024));
  DI_ASSIGN_OR_RETURN(c.num_heads, IntIn(hf, "num_attention_heads", std::nullopt, 1, 1024));
  DI_ASSIGN_OR_RETURN(c.q_lora_rank, OptionalIntIn(hf, "q_lora_rank", 1, 16384));
  DI_ASSIGN_OR_RETURN(c.kv_lora_rank, IntIn(hf, "kv_lora_rank", 512, 1, 4096));
  DI_ASSIGN_OR_RETURN(c.qk_nope_head_dim, IntIn(hf, "qk_nope_head_dim", 128, 0, 1024));
  DI_ASSIGN_OR_RETURN(c.rope_dim, IntIn(hf, "qk_rope_head_dim", 64, 2, 1024));
  DI_ASSIGN_OR_RETURN(c.v_head_dim, IntIn(hf, "v_head_dim", 128, 1, 1024));
  c.head_dim = c.qk_nope_head_dim + c.rope_dim;
  if (c.rope_dim % 2 != 0)
    return KeyError(hf, "qk_rope_head_dim", c.rope_dim, "an even number (RoPE rotates channel pairs)");
  // transformers derives head_dim = qk_rope_head_dim; a config that states a smaller one cannot hold the
  // rotated channels.
  if (hf.Has("head_dim") && !hf.raw()["head_dim"].is_null()) {
    DI_ASSIGN_OR_RETURN(const int64_t head_dim, IntIn(hf, "head_dim", std::nullopt, 1, 2048));
    if (c.rope_dim > head_dim)
      return KeyError(hf, "qk_rope_head_dim", c.rope_dim, "at most head_dim (" + std::to_string(head_dim) + ")");
  }
  DI_ASSIGN_OR_RETURN(c.intermediate_size, IntIn(hf, "intermediate_size", std::nullopt, 1, 1 << 20));
  DI_ASSIGN_OR_RETURN(c.moe_intermediate_size, IntIn(hf, "moe_intermediate_size", std::nullopt, 1, 1 << 20));
  DI_ASSIGN_OR_RETURN(c.n_routed_experts, IntIn(hf, "n_routed_experts", std::nullopt, 1, 4096));
  DI_ASSIGN_OR_RETURN(c.n_shared_experts, IntIn(hf, "n_shared_experts", 1, 1, 64));
  DI_ASSIGN_OR_RETURN(c.num_experts_per_tok, IntIn(hf, "num_experts_per_tok", std::nullopt, 1, 4096));
  DI_ASSIGN_OR_RETURN(c.first_k_dense_replace, IntIn(hf, "first_k_dense_replace", 0, 0, c.num_layers));
  DI_ASSIGN_OR_RETURN(c.num_mtp_layers, IntIn(hf, "num_nextn_predict_layers", 0, 0, 16));
  DI_ASSIGN_OR_RETURN(const int64_t moe_layer_freq, IntIn(hf, "moe_layer_freq", 1, 1, 1024));
  if (moe_layer_freq != 1)
    return KeyError(hf, "moe_layer_freq", moe_layer_freq, "1 (every layer after the dense ones)");
  DI_ASSIGN_OR_RETURN(c.n_group, IntIn(hf, "n_group", 1, 1, 4096));
  DI_ASSIGN_OR_RETURN(c.topk_group, IntIn(hf, "topk_group", 1, 1, 4096));
  if (c.topk_group > c.n_group)
    return KeyError(hf, "topk_group", c.topk_group, "at most n_group (" + std::to_string(c.n_group) + ")");
  if (c.n_routed_experts % c.n_group != 0)
    return KeyError(hf, "n_group", c.n_group,
                    "a divisor of n_routed_experts (" + std::to_string(c.n_routed_experts) + ")");
  const int64_t per_group = c.n_routed_experts / c.n_group;
  if (c.n_group > 1 && per_group < 2)
    return KeyError(hf, "n_group", c.n_group, "at most n_routed_experts / 2 (a group's score sums its top 2)");
  if (c.num_experts_per_tok > c.topk_group * per_group)
    return KeyError(hf, "num_experts_per_tok", c.num_experts_per_tok,
                    "at most topk_group × experts per group (" + std::to_string(c.topk_group * per_group) + ")");
  DI_ASSIGN_OR_RETURN(c.norm_topk_prob, BoolKey(hf, "norm_topk_prob", true));
  DI_ASSIGN_OR_RETURN(c.routed_scaling_factor, FloatIn(hf, hf.raw(), "", "routed_scaling_factor", 1.0, 0, 1e6));
  DI_ASSIGN_OR_RETURN(c.rms_norm_eps, FloatIn(hf, hf.raw(), "", "rms_norm_eps", 1e-6, 0, 1));
  DI_RETURN_IF_ERROR(StringIs(hf, "scoring_func", "sigmoid", "sigmoid"));
  DI_RETURN_IF_ERROR(StringIs(hf, "topk_method", "noaux_tc", "noaux_tc"));
  DI_RETURN_IF_ERROR(StringIs(hf, "hidden_act", "silu", "silu"));
  DI_ASSIGN_OR_RETURN(const bool attention_bias, BoolKey(hf, "attention_bias", false));
  if (attention_bias) return KeyError(hf, "attention_bias", true, "false");
  DI_ASSIGN_OR_RETURN(const bool rope_interleave, BoolKey(hf, "rope_interleave", true));
  if (!rope_interleave) return KeyError(hf, "rope_interleave", false, "true (DeepSeek's interleaved rope pairs)");
  DI_ASSIGN_OR_RETURN(c.tie_word_embeddings, BoolKey(hf, "tie_word_embeddings", false));
  DI_ASSIGN_OR_RETURN(c.max_position_embeddings, IntIn(hf, "max_position_embeddings", 0, 0, 1 << 24));
  DI_ASSIGN_OR_RETURN(c.bos_token_id, IntIn(hf, "bos_token_id", 0, 0, c.vocab_size - 1));
  if (hf.Has("eos_token_id") && hf.raw()["eos_token_id"].is_array()) {
    const json& ids = hf.raw()["eos_token_id"];
    if (ids.empty() || ids.size() > 64) return KeyError(hf, "eos_token_id", ids, "a list of 1 to 64 ids");
    for (const json& id : ids) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= c.vocab_size)
        return KeyError(hf, "eos_token_id", id, "ids in " + KeyRange(0, c.vocab_size - 1));
      c.eos_token_ids.push_back(id.get<int64_t>());
    }
  } else {
    DI_ASSIGN_OR_RETURN(const int64_t eos, IntIn(hf, "eos_token_id", 1, 0, c.vocab_size - 1));
    c.eos_token_ids = {eos};
  }
  c.eos_token_id = c.eos_token_ids[0];
  DI_RETURN_IF_ERROR(ReadRope(hf, &c));
  c.main_rope = c.compress_rope = c.rope;
  if (hf.model_type() == "deepseek_v32") DI_RETURN_IF_ERROR(ReadIndexer(hf, &c));
  return c;
}

}  // namespace deepinfer::model
