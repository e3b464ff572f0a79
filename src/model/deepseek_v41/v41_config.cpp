#include "core/utf8.h"
#include "model/deepseek_v41/v41_config.h"

#include <algorithm>
#include <set>
#include <tuple>

namespace deepinfer::model {
namespace {

using nlohmann::json;

// Messages quote names and values from the file: OneLine keeps a control character in them (a fuzzed key
// such as "compressed_sparse_att\ntion") from splitting the one-line error.
Status Invalid(const HfConfig& hf, const std::string& message) {
  return Status::InvalidArgument(hf.source() + ": " + utf8::OneLine(message));
}

std::string ListString(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

Result<RopeParams> RopeFromJson(const HfConfig& hf, const json& j, const std::string& what) {
  if (!j.is_object()) return Invalid(hf, what + " is not an object");
  auto number = [&](const char* key, double fallback) -> double {
    auto it = j.find(key);
    return it != j.end() && it->is_number() ? it->get<double>() : fallback;
  };
  RopeParams p;
  p.theta = number("rope_theta", 0);
  if (!(p.theta > 0)) return Invalid(hf, what + ": rope_theta must be positive");
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
    // deepseek_v41 sets attention_factor 1 (no mscale) unless the config says otherwise.
    if (number("attention_factor", 1.0) != 1.0)
      return Invalid(hf, what + ": attention_factor other than 1 is not supported");
  } else if (type != "default") {
    return Invalid(hf, what + ": rope type '" + type + "' is not supported (default, yarn)");
  }
  return p;
}

// An optional list of integers: the fallback when absent or null, an error when of the wrong type.
Result<std::vector<int64_t>> OptionalList(const HfConfig& hf, const char* key, std::vector<int64_t> fallback) {
  if (!hf.Has(key) || hf.raw()[key].is_null()) return fallback;
  return hf.IntList(key);
}

Status CheckRange(const HfConfig& hf, const std::vector<int64_t>& ids, int64_t n, const char* what) {
  for (int64_t i : ids)
    if (i < 0 || i >= n) return Invalid(hf, std::string(what) + " " + ListString(ids) + " out of range [0, " + std::to_string(n) + ")");
  std::set<int64_t> unique(ids.begin(), ids.end());
  if (unique.size() != ids.size() || !std::is_sorted(ids.begin(), ids.end()))
    return Invalid(hf, std::string(what) + " " + ListString(ids) + " must be increasing");
  return Status::Ok();
}

Status ParseText(const HfConfig& hf, V41Config& c) {
  DI_ASSIGN_OR_RETURN(c.vocab_size, hf.Int("vocab_size"));
  DI_ASSIGN_OR_RETURN(c.hidden_size, hf.Int("hidden_size"));
  DI_ASSIGN_OR_RETURN(c.num_layers, hf.Int("num_hidden_layers"));
  DI_ASSIGN_OR_RETURN(c.num_heads, hf.Int("num_attention_heads"));
  c.head_dim = hf.GetInt("head_dim", 512);
  c.rope_dim = hf.GetInt("qk_rope_head_dim", 64);
  DI_ASSIGN_OR_RETURN(c.q_lora_rank, hf.Int("q_lora_rank"));
  c.o_groups = hf.GetInt("o_groups", 8);
  c.o_lora_rank = hf.GetInt("o_lora_rank", 1024);
  if (hf.GetInt("num_key_value_heads", 1) != 1) return Invalid(hf, "num_key_value_heads must be 1 for DeepSeek-V4.1");
  if (hf.GetBool("attention_bias", false)) return Invalid(hf, "attention_bias is not supported");
  c.sliding_window = hf.GetInt("sliding_window", 128);
  c.max_position_embeddings = hf.GetInt("max_position_embeddings", 1048576);

  c.n_routed_experts = hf.GetInt("n_routed_experts", 384);
  c.num_experts_per_tok = hf.GetInt("num_experts_per_tok", 6);
  c.moe_intermediate_size = hf.GetInt("moe_intermediate_size", 2304);
  if (hf.GetInt("n_shared_experts", 1) != 1) return Invalid(hf, "n_shared_experts must be 1");
  c.scoring_func = hf.GetString("scoring_func", "sqrtsoftplus");
  if (c.scoring_func != "sqrtsoftplus" && c.scoring_func != "sigmoid")
    return Invalid(hf, "scoring_func '" + c.scoring_func + "' is not supported (sqrtsoftplus, sigmoid)");
  c.gate_temp = hf.GetFloat("gate_temp", 1.0);
  c.norm_topk_prob = hf.GetBool("norm_topk_prob", true);
  c.routed_scaling_factor = hf.GetFloat("routed_scaling_factor", 1.5);
  c.swiglu_limit = hf.GetFloat("swiglu_limit", 10.0);
  if (hf.GetString("hidden_act", "silu") != "silu") return Invalid(hf, "hidden_act must be silu");
  if (!(c.gate_temp > 0)) return Invalid(hf, "gate_temp must be positive");

  c.hc_mult = hf.GetInt("hc_mult", 4);
  c.hc_sinkhorn_iters = hf.GetInt("hc_sinkhorn_iters", 20);
  c.hc_eps = hf.GetFloat("hc_eps", 1e-6);
  c.rms_norm_eps = hf.GetFloat("rms_norm_eps", 1e-20);

  c.candidate_topk_blocks = hf.GetInt("candidate_topk_blocks", 2048);
  c.candidate_block_size = hf.GetInt("candidate_block_size", 8);
  c.index_n_heads = hf.GetInt("index_n_heads", 32);
  c.index_head_dim = hf.GetInt("index_head_dim", 128);
  c.index_topk = hf.GetInt("index_topk", 512);

  c.bos_token_id = hf.GetInt("bos_token_id", 0);
  if (hf.Has("eos_token_id") && hf.raw()["eos_token_id"].is_array()) {
    DI_ASSIGN_OR_RETURN(c.eos_token_ids, hf.IntList("eos_token_id"));
    if (c.eos_token_ids.empty()) return Invalid(hf, "eos_token_id is an empty list");
  } else {
    c.eos_token_ids = {hf.GetInt("eos_token_id", 1)};
  }
  c.eos_token_id = c.eos_token_ids.front();
  c.pad_token_id = hf.GetInt("pad_token_id", -1);

  // Layer schedule, as transformers' __post_init__ derives it when fields are left out.
  const int64_t n = c.num_layers;
  // Bounds far above any DeepSeek model (V4.1-Flash: hidden 5120, 40 layers, 384 experts), checked before
  // anything is sized from them, so that tables, cache layouts and buffers stay small and never overflow.
  if (n <= 0 || n > (int64_t{1} << 10)) return Invalid(hf, "num_hidden_layers must be in [1, 1024]");
  c.dspark.num_layers = hf.GetInt("num_nextn_predict_layers", 3);
  const std::vector<int64_t> released = [] {
    std::vector<int64_t> r = {0, 0};
    r.insert(r.end(), 18, 2);
    r.insert(r.end(), 20, 1);
    return r;
  }();
  std::vector<int64_t> default_ratios;
  if (n == static_cast<int64_t>(released.size())) {
    default_ratios = released;
  } else {
    const int64_t slide = std::min<int64_t>(2, n), enc = std::max<int64_t>(0, (n - slide + 1) / 2);
    default_ratios.assign(slide, 0);
    default_ratios.insert(default_ratios.end(), enc, 2);
    default_ratios.insert(default_ratios.end(), std::max<int64_t>(0, n - slide - enc), 1);
  }
  DI_ASSIGN_OR_RETURN(std::vector<int64_t> ratios, OptionalList(hf, "compress_ratios", default_ratios));
  if (static_cast<int64_t>(ratios.size()) < n)
    return Invalid(hf, "compress_ratios has " + std::to_string(ratios.size()) + " entries for " + std::to_string(n) +
                           " layers");
  if (static_cast<int64_t>(ratios.size()) > n + c.dspark.num_layers)
    return Invalid(hf, "compress_ratios has more entries than num_hidden_layers + num_nextn_predict_layers");
  for (size_t i = n; i < ratios.size(); ++i)
    if (ratios[i] != 0) return Invalid(hf, "DSpark draft layers are window-only: compress_ratios[" + std::to_string(i) + "] must be 0");
  ratios.resize(n);
  for (int64_t r : ratios) {
    // Blocks hold 128 positions, so a block holds a whole number of latents.
    if (r < 0 || (r > 0 && 128 % r)) return Invalid(hf, "compression ratio " + std::to_string(r) + " does not divide 128");
  }
  c.compress_ratios = ratios;

  const std::vector<int64_t> released_kv = {2, 8, 14, 20}, released_index = {2, 8, 14, 20, 24, 28, 32, 36};
  std::vector<int64_t> default_kv;
  if (n <= static_cast<int64_t>(released.size()) && std::equal(ratios.begin(), ratios.end(), released.begin())) {
    default_kv = released_kv;
  } else {
    for (int64_t i = 0; i < n; ++i)
      if (ratios[i] > 0 && (i == 0 || ratios[i - 1] != ratios[i])) default_kv.push_back(i);
  }
  DI_ASSIGN_OR_RETURN(c.kv_source_layer_ids, OptionalList(hf, "kv_source_layer_ids", default_kv));
  DI_ASSIGN_OR_RETURN(c.index_source_layer_ids,
                      OptionalList(hf, "index_source_layer_ids",
                                   c.kv_source_layer_ids == released_kv ? released_index : c.kv_source_layer_ids));
  DI_RETURN_IF_ERROR(CheckRange(hf, c.kv_source_layer_ids, n, "kv_source_layer_ids"));
  DI_RETURN_IF_ERROR(CheckRange(hf, c.index_source_layer_ids, n, "index_source_layer_ids"));
  if (hf.Has("candidate_source_layer_id") && !hf.raw()["candidate_source_layer_id"].is_null()) {
    DI_ASSIGN_OR_RETURN(c.candidate_source_layer_id, hf.Int("candidate_source_layer_id"));
  } else {
    c.candidate_source_layer_id = c.kv_source_layer_ids.empty() ? -1 : c.kv_source_layer_ids.back();
  }
  if (c.candidate_source_layer_id < 0) c.candidate_source_layer_id = -1;

  // Derived per-layer plan, with the reference's checks plus those that keep groups consistent.
  const auto& kv = c.kv_source_layer_ids;
  const auto& ix = c.index_source_layer_ids;
  auto contains = [](const std::vector<int64_t>& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); };
  if (c.candidate_source_layer_id >= 0 && !contains(ix, c.candidate_source_layer_id))
    return Invalid(hf, "candidate_source_layer_id " + std::to_string(c.candidate_source_layer_id) +
                           " must be in index_source_layer_ids " + ListString(ix));
  c.layers.assign(n, {});
  int64_t group = -1, index_layer = -1;
  for (int64_t l = 0; l < n; ++l) {
    V41LayerPlan& p = c.layers[l];
    p.ratio = ratios[l];
    p.kv_source = contains(kv, l);
    p.index_source = contains(ix, l);
    if ((p.kv_source || p.index_source) && p.ratio == 0)
      return Invalid(hf, "layer " + std::to_string(l) + " is a KV or index source but has compress ratio 0");
    if (p.kv_source) {
      group = std::find(kv.begin(), kv.end(), l) - kv.begin();
      // A KV source that runs no indexer would leave its group with the previous group's top-k.
      if (!p.index_source && index_layer >= 0)
        return Invalid(hf, "KV source layer " + std::to_string(l) + " must also be an index source");
    }
    if (p.index_source) index_layer = l;
    if (p.ratio > 0) {
      if (group < 0)
        return Invalid(hf, "layer " + std::to_string(l) + " has compress ratio " + std::to_string(p.ratio) +
                               " but no kv_source_layer_ids entry at or before it");
      if (ratios[kv[group]] != p.ratio)
        return Invalid(hf, "layer " + std::to_string(l) + " has compress ratio " + std::to_string(p.ratio) +
                               " but its KV source layer " + std::to_string(kv[group]) + " has " +
                               std::to_string(ratios[kv[group]]));
      p.group = group;
      p.index_layer = index_layer >= kv[group] ? index_layer : -1;
    }
    p.candidate_source = l == c.candidate_source_layer_id;
    p.uses_candidates = p.index_source && c.candidate_source_layer_id >= 0 && c.candidate_source_layer_id < l;
  }
  if (c.candidate_source_layer_id >= 0) {
    if (c.candidate_topk_blocks <= 0 || c.candidate_block_size <= 0)
      return Invalid(hf, "candidate_topk_blocks and candidate_block_size must be positive");
    // Candidate blocks are in the candidate source's latent positions; later sources must share them.
    for (int64_t l = c.candidate_source_layer_id + 1; l < n; ++l) {
      if (c.layers[l].uses_candidates && c.layers[l].group != c.layers[c.candidate_source_layer_id].group)
        return Invalid(hf, "index source layer " + std::to_string(l) +
                               " reads another KV source than the candidate source layer " +
                               std::to_string(c.candidate_source_layer_id));
    }
  }

  // RoPE: nested {main, compress} (transformers) or rope_theta / compress_rope_theta / rope_scaling.
  const json* nested = NestedRopeParameters(hf);
  if (nested) {
    DI_ASSIGN_OR_RETURN(c.main_rope, RopeFromJson(hf, (*nested)["main"], "rope_parameters.main"));
    DI_ASSIGN_OR_RETURN(c.compress_rope, RopeFromJson(hf, (*nested)["compress"], "rope_parameters.compress"));
  } else {
    c.main_rope.theta = hf.GetFloat("rope_theta", 10000.0);
    json compress = json::object();
    if (hf.Has("rope_scaling") && hf.raw()["rope_scaling"].is_object()) compress = hf.raw()["rope_scaling"];
    compress["rope_theta"] = hf.GetFloat("compress_rope_theta", 160000.0);
    DI_ASSIGN_OR_RETURN(c.compress_rope, RopeFromJson(hf, compress, "rope_scaling"));
  }
  if (c.main_rope.yarn) return Invalid(hf, "YaRN on the window-only rope is not supported");

  // Engram.
  V41EngramConfig& e = c.engram;
  DI_ASSIGN_OR_RETURN(e.layer_ids, OptionalList(hf, "engram_layer_ids", {}));
  DI_ASSIGN_OR_RETURN(e.num_embeddings,
                      OptionalList(hf, "engram_num_embeddings", std::vector<int64_t>(e.layer_ids.size(), 0)));
  e.vocab_size = hf.GetInt("engram_vocab_size", 16000000);
  e.max_ngram_size = hf.GetInt("engram_max_ngram_size", 4);
  e.n_heads = hf.GetInt("engram_n_heads", 8);
  e.head_dim = hf.GetInt("engram_head_dim", 256);
  e.pad_id = hf.GetInt("engram_pad_id", 2);
  e.compressed_vocab_size = hf.GetInt("engram_compressed_vocab_size", 99092);
  if (e.enabled()) {
    DI_RETURN_IF_ERROR(CheckRange(hf, e.layer_ids, n, "engram_layer_ids"));
    if (e.num_embeddings.size() != e.layer_ids.size())
      return Invalid(hf, "engram_num_embeddings must have one entry per engram_layer_ids entry");
    if (e.max_ngram_size < 2 || e.max_ngram_size > 16) return Invalid(hf, "engram_max_ngram_size must be in [2, 16]");
    if (e.n_heads <= 0 || e.head_dim <= 0) return Invalid(hf, "engram_n_heads and engram_head_dim must be positive");
    if (e.vocab_size <= 0 || e.vocab_size > (int64_t{1} << 40)) return Invalid(hf, "engram_vocab_size out of range");
    if (e.compressed_vocab_size <= 0 || e.compressed_vocab_size > c.vocab_size)
      return Invalid(hf, "engram_compressed_vocab_size must be in [1, vocab_size]");
    if (e.pad_id < 0 || e.pad_id >= c.vocab_size) return Invalid(hf, "engram_pad_id outside the vocabulary");
    for (size_t i = 0; i < e.layer_ids.size(); ++i) c.layers[e.layer_ids[i]].engram = static_cast<int64_t>(i);
  }

  // DSpark.
  V41DsparkConfig& d = c.dspark;
  d.block_size = hf.GetInt("dspark_block_size", 5);
  d.noise_token_id = hf.GetInt("dspark_noise_token_id", 128799);
  d.markov_rank = hf.GetInt("dspark_markov_rank", 256);
  d.n_routed_experts = hf.GetInt("dspark_n_routed_experts", 128);
  d.num_experts_per_tok = hf.GetInt("dspark_num_experts_per_tok", 3);
  std::vector<int64_t> default_targets;
  for (int64_t i = 0; i < n; ++i)
    if (!contains(kv, i)) default_targets.push_back(i);
  if (default_targets.size() > 3) default_targets.erase(default_targets.begin(), default_targets.end() - 3);
  DI_ASSIGN_OR_RETURN(d.target_layer_ids, OptionalList(hf, "dspark_target_layer_ids", default_targets));
  if (d.num_layers < 0) return Invalid(hf, "num_nextn_predict_layers must not be negative");
  if (d.num_layers > 0 && (d.noise_token_id < 0 || d.noise_token_id >= c.vocab_size))
    return Invalid(hf, "dspark_noise_token_id " + std::to_string(d.noise_token_id) + " is outside the vocabulary");
  if (d.num_layers > 0 && (d.block_size <= 0 || d.markov_rank <= 0 || d.n_routed_experts <= 0 ||
                           d.num_experts_per_tok <= 0 || d.num_experts_per_tok > d.n_routed_experts))
    return Invalid(hf, "DSpark sizes (dspark_block_size, dspark_markov_rank, dspark_n_routed_experts, "
                       "dspark_num_experts_per_tok) must be positive, top-k within the experts");
  for (int64_t t : d.target_layer_ids)
    if (t < 0 || t >= n) return Invalid(hf, "dspark_target_layer_ids " + ListString(d.target_layer_ids) + " out of range");

  for (auto [v, limit, name] : {std::tuple{c.vocab_size, int64_t{1} << 24, "vocab_size"},
                                {c.hidden_size, int64_t{1} << 17, "hidden_size"},
                                {c.num_heads, int64_t{1} << 12, "num_attention_heads"},
                                {c.head_dim, int64_t{1} << 14, "head_dim"},
                                {c.q_lora_rank, int64_t{1} << 17, "q_lora_rank"},
                                {c.o_lora_rank, int64_t{1} << 17, "o_lora_rank"},
                                {c.o_groups, int64_t{1} << 12, "o_groups"},
                                {c.n_routed_experts, int64_t{1} << 16, "n_routed_experts"},
                                {c.num_experts_per_tok, int64_t{1} << 16, "num_experts_per_tok"},
                                {c.moe_intermediate_size, int64_t{1} << 18, "moe_intermediate_size"},
                                {c.hc_sinkhorn_iters, int64_t{1} << 10, "hc_sinkhorn_iters"},
                                {c.index_n_heads, int64_t{1} << 12, "index_n_heads"},
                                {c.index_head_dim, int64_t{1} << 14, "index_head_dim"},
                                {c.index_topk, int64_t{1} << 24, "index_topk"},
                                {c.candidate_topk_blocks, int64_t{1} << 24, "candidate_topk_blocks"},
                                {c.candidate_block_size, int64_t{1} << 16, "candidate_block_size"},
                                {c.max_position_embeddings, int64_t{1} << 40, "max_position_embeddings"},
                                {c.engram.n_heads, int64_t{1} << 8, "engram_n_heads"},
                                {c.engram.head_dim, int64_t{1} << 14, "engram_head_dim"},
                                {c.dspark.num_layers, int64_t{16}, "num_nextn_predict_layers"},
                                {c.dspark.block_size, int64_t{1} << 10, "dspark_block_size"},
                                {c.dspark.markov_rank, int64_t{1} << 16, "dspark_markov_rank"}}) {
    if (v > limit) return Invalid(hf, std::string(name) + " " + std::to_string(v) + " exceeds " + std::to_string(limit));
  }
  for (int64_t rows : c.engram.num_embeddings)
    if (rows < 0 || rows > (int64_t{1} << 40)) return Invalid(hf, "engram_num_embeddings entries must be in [0, 2^40]");
  if (c.max_position_embeddings <= 0) return Invalid(hf, "max_position_embeddings must be positive");

  // Consistency.
  for (auto [v, name] : {std::pair{c.vocab_size, "vocab_size"}, {c.hidden_size, "hidden_size"},
                         {c.num_heads, "num_attention_heads"}, {c.head_dim, "head_dim"},
                         {c.q_lora_rank, "q_lora_rank"}, {c.o_groups, "o_groups"}, {c.o_lora_rank, "o_lora_rank"},
                         {c.n_routed_experts, "n_routed_experts"}, {c.num_experts_per_tok, "num_experts_per_tok"},
                         {c.moe_intermediate_size, "moe_intermediate_size"}, {c.sliding_window, "sliding_window"},
                         {c.hc_mult, "hc_mult"}, {c.hc_sinkhorn_iters, "hc_sinkhorn_iters"},
                         {c.index_n_heads, "index_n_heads"}, {c.index_head_dim, "index_head_dim"},
                         {c.index_topk, "index_topk"}}) {
    if (v <= 0) return Invalid(hf, std::string(name) + " must be positive");
  }
  if (c.rope_dim <= 0 || c.rope_dim % 2 || c.rope_dim > c.head_dim || c.rope_dim > c.index_head_dim)
    return Invalid(hf, "qk_rope_head_dim must be even and within head_dim and index_head_dim");
  if (c.num_heads % c.o_groups) return Invalid(hf, "num_attention_heads must be a multiple of o_groups");
  if (c.hc_mult > 16) return Invalid(hf, "hc_mult above 16 is not supported");
  if (c.num_experts_per_tok > c.n_routed_experts) return Invalid(hf, "num_experts_per_tok exceeds n_routed_experts");
  if (c.sliding_window > 128) return Invalid(hf, "sliding_window above 128 (one block) is not supported");
  return Status::Ok();
}

}  // namespace

Result<V41Config> V41Config::FromHf(const HfConfig& hf) {
  V41Config c;
  const std::string type = hf.model_type();
  if (type == "deepseek_v41") {
    if (!hf.Has("text_config") || !hf.raw()["text_config"].is_object())
      return Invalid(hf, "a deepseek_v41 config needs a text_config object");
    DI_ASSIGN_OR_RETURN(HfConfig text, HfConfig::Parse(hf.raw()["text_config"].dump(), hf.source() + " text_config"));
    if (text.Has("model_type") && text.model_type() != "deepseek_v41_text")
      return Invalid(hf, "text_config.model_type is '" + text.model_type() + "', expected 'deepseek_v41_text'");
    DI_RETURN_IF_ERROR(ParseText(text, c));
    c.image_token_id = hf.GetInt("image_token_id", 129264);
    if (hf.Has("vision_config") && hf.raw()["vision_config"].is_object()) {
      DI_ASSIGN_OR_RETURN(HfConfig v, HfConfig::Parse(hf.raw()["vision_config"].dump(), hf.source() + " vision_config"));
      c.has_vision = true;
      c.vision.hidden_size = v.GetInt("hidden_size", 1024);
      c.vision.intermediate_size = v.GetInt("intermediate_size", 2816);
      c.vision.num_layers = v.GetInt("num_hidden_layers", 32);
      c.vision.num_heads = v.GetInt("num_attention_heads", 16);
      c.vision.patch_size = v.GetInt("patch_size", 14);
      c.vision.downsample_ratio = v.GetInt("downsample_ratio", 3);
      c.vision.max_image_tokens = v.GetInt("max_image_tokens", 1024);
      c.vision.min_pixels = v.GetInt("min_pixels", 295936);
    }
  } else if (type == "deepseek_v41_text") {
    DI_RETURN_IF_ERROR(ParseText(hf, c));
  } else {
    return Invalid(hf, "model_type is '" + type + "', expected 'deepseek_v41' or 'deepseek_v41_text'");
  }
  // The FP8 block shape, at the top level (the release) or in the text config.
  for (const json* q : {hf.Has("quantization_config") ? &hf.raw()["quantization_config"] : nullptr,
                        hf.Has("text_config") && hf.raw()["text_config"].contains("quantization_config")
                            ? &hf.raw()["text_config"]["quantization_config"]
                            : nullptr}) {
    if (q == nullptr || !q->is_object()) continue;
    auto it = q->find("weight_block_size");
    if (it == q->end()) continue;
    if (!it->is_array() || it->size() != 2 || !(*it)[0].is_number_integer() || !(*it)[1].is_number_integer() ||
        (*it)[0].get<int64_t>() <= 0 || (*it)[1].get<int64_t>() <= 0)
      return Invalid(hf, "quantization_config.weight_block_size must be two positive integers");
    c.weight_block_out = (*it)[0].get<int64_t>();
    c.weight_block_in = (*it)[1].get<int64_t>();
  }
  return c;
}

}  // namespace deepinfer::model
