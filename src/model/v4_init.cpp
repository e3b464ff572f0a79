#include "model/v4_init.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/hf_config.h"
#include "core/safetensors.h"
#include "core/thread_pool.h"
#include "kernels/number_formats.h"
#include "model/seeded_checkpoint.h"
#include "model/v4_config.h"

namespace deepinfer::model {
namespace {

using nlohmann::ordered_json;

using seeded_checkpoint::HashName;
using seeded_checkpoint::RandomValues;
using seeded_checkpoint::SplitMix;

enum class MatrixKind { kDense, kExpert, kKeepBf16 };

// Which released format holds each V4 tensor: FP8 in 128×128 blocks, MXFP4 experts, BF16 or F32.
class ShardWriter {
 public:
  ShardWriter(uint64_t seed, V4InitFormat format) : seed_(seed), format_(format) {}

  void Matrix(const std::string& prefix, int64_t out, int64_t in, MatrixKind kind, float gain = 1.0f) {
    std::vector<float> w = RandomValues(seed_, prefix, out * in, 0.0f, gain / std::sqrt(static_cast<float>(in)));
    const std::string name = prefix + ".weight";
    if (format_ == V4InitFormat::kF32) {
      shard_.F32(name, {out, in}, w);
    } else if (format_ == V4InitFormat::kBF16 || kind == MatrixKind::kKeepBf16) {
      shard_.Bf16(name, {out, in}, w);
    } else if (kind == MatrixKind::kExpert) {
      shard_.Fp4(prefix, w, out, in);
    } else {
      shard_.Fp8(prefix, w, out, in, 128, 128);
    }
  }

  void Floats(const std::string& name, std::vector<int64_t> shape, float mean, float std) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    shard_.F32(name, std::move(shape), RandomValues(seed_, name, n, mean, std));
  }

  void Ints(const std::string& name, std::vector<int64_t> shape, const std::vector<int32_t>& values) {
    shard_.I32(name, std::move(shape), values);
  }

  Status Write(const std::string& path, std::map<std::string, std::string>* weight_map, const std::string& file,
               uint64_t* total_bytes) {
    return shard_.Write(path, weight_map, file, total_bytes);
  }

 private:
  uint64_t seed_;
  V4InitFormat format_;
  seeded_checkpoint::Shard shard_;
};

void AddBlock(ShardWriter& w, const V4Config& c, const std::string& p, V4AttentionType type, int64_t ratio,
              V4RouterType router, uint64_t seed) {
  const int64_t d = c.hidden_size, h = c.num_heads, hd = c.head_dim, hc = c.hc_mult;
  const std::string a = p + "attn.";
  w.Matrix(a + "wq_a", c.q_lora_rank, d, MatrixKind::kDense);
  w.Floats(a + "q_norm.weight", {c.q_lora_rank}, 1.0f, 0.1f);
  w.Matrix(a + "wq_b", h * hd, c.q_lora_rank, MatrixKind::kDense);
  w.Matrix(a + "wkv", hd, d, MatrixKind::kDense);
  w.Floats(a + "kv_norm.weight", {hd}, 1.0f, 0.1f);
  // Each group's rows of wo_a are a matrix of their own, so FP8 needs groups aligned to its 128-row blocks.
  w.Matrix(a + "wo_a", c.o_groups * c.o_lora_rank, h * hd / c.o_groups,
           c.o_lora_rank % 128 == 0 ? MatrixKind::kDense : MatrixKind::kKeepBf16);
  w.Matrix(a + "wo_b", d, c.o_groups * c.o_lora_rank, MatrixKind::kDense);
  w.Floats(a + "attn_sink", {h}, 0.0f, 1.0f);
  if (type != V4AttentionType::kSliding) {
    const bool csa = type == V4AttentionType::kCsa;
    const int64_t width = (csa ? 2 : 1) * hd;
    w.Matrix(a + "compressor.wkv", width, d, MatrixKind::kKeepBf16);
    w.Matrix(a + "compressor.wgate", width, d, MatrixKind::kKeepBf16, 2.0f);
    w.Floats(a + "compressor.ape", {ratio, width}, 0.0f, 0.5f);
    w.Floats(a + "compressor.norm.weight", {hd}, 1.0f, 0.1f);
    if (csa) {
      const std::string ip = a + "indexer.";
      const int64_t ihd = c.index_head_dim;
      w.Matrix(ip + "wq_b", c.index_n_heads * ihd, c.q_lora_rank, MatrixKind::kDense);
      w.Matrix(ip + "weights_proj", c.index_n_heads, d, MatrixKind::kKeepBf16);
      w.Matrix(ip + "compressor.wkv", 2 * ihd, d, MatrixKind::kKeepBf16);
      w.Matrix(ip + "compressor.wgate", 2 * ihd, d, MatrixKind::kKeepBf16, 2.0f);
      w.Floats(ip + "compressor.ape", {ratio, 2 * ihd}, 0.0f, 0.5f);
      w.Floats(ip + "compressor.norm.weight", {ihd}, 1.0f, 0.1f);
    }
  }
  w.Floats(p + "attn_norm.weight", {d}, 1.0f, 0.1f);
  w.Floats(p + "ffn_norm.weight", {d}, 1.0f, 0.1f);
  const int64_t mix = (2 + hc) * hc;
  for (const char* site : {"attn", "ffn"}) {
    const std::string s = p + "hc_" + site;
    w.Floats(s + "_fn", {mix, hc * d}, 0.0f, 1.0f / std::sqrt(static_cast<float>(hc * d)));
    w.Floats(s + "_base", {mix}, 0.0f, 0.5f);
    w.Floats(s + "_scale", {3}, 1.0f, 0.25f);
  }
  const std::string f = p + "ffn.";
  const int64_t e = c.n_routed_experts, inter = c.moe_intermediate_size, k = c.num_experts_per_tok;
  w.Matrix(f + "gate", e, d, MatrixKind::kKeepBf16, 2.0f);
  if (router == V4RouterType::kHash) {
    // Distinct experts per token: a seeded partial Fisher–Yates shuffle per row.
    std::vector<int32_t> table(static_cast<size_t>(c.vocab_size * k)), perm(e);
    uint64_t state = SplitMix(seed ^ HashName(f + "gate.tid2eid"));
    for (int64_t t = 0; t < c.vocab_size; ++t) {
      for (int64_t i = 0; i < e; ++i) perm[i] = static_cast<int32_t>(i);
      for (int64_t i = 0; i < k; ++i) {
        state = SplitMix(state);
        const int64_t j = i + static_cast<int64_t>(state % static_cast<uint64_t>(e - i));
        std::swap(perm[i], perm[j]);
        table[t * k + i] = perm[i];
      }
    }
    w.Ints(f + "gate.tid2eid", {c.vocab_size, k}, table);
  } else {
    w.Floats(f + "gate.bias", {e}, 0.0f, 0.3f);
  }
  for (int64_t i = 0; i < e; ++i) {
    const std::string ep = f + "experts." + std::to_string(i) + ".";
    w.Matrix(ep + "w1", inter, d, MatrixKind::kExpert, 2.0f);
    w.Matrix(ep + "w2", d, inter, MatrixKind::kExpert);
    w.Matrix(ep + "w3", inter, d, MatrixKind::kExpert, 2.0f);
  }
  w.Matrix(f + "shared_experts.w1", inter, d, MatrixKind::kDense, 2.0f);
  w.Matrix(f + "shared_experts.w2", d, inter, MatrixKind::kDense);
  w.Matrix(f + "shared_experts.w3", inter, d, MatrixKind::kDense, 2.0f);
}

ordered_json BaseConfig() {
  return ordered_json{{"architectures", {"DeepseekV4ForCausalLM"}},
                      {"model_type", "deepseek_v4"},
                      {"bos_token_id", 0},
                      {"eos_token_id", 1},
                      {"vocab_size", 129280},
                      {"tie_word_embeddings", false},
                      {"hidden_act", "silu"},
                      {"num_key_value_heads", 1},
                      {"n_shared_experts", 1},
                      {"scoring_func", "sqrtsoftplus"},
                      {"topk_method", "noaux_tc"},
                      {"norm_topk_prob", true},
                      {"routed_scaling_factor", 1.5},
                      {"swiglu_limit", 10.0},
                      {"sliding_window", 128},
                      {"hc_mult", 4},
                      {"hc_sinkhorn_iters", 20},
                      {"hc_eps", 1e-6},
                      {"rms_norm_eps", 1e-6},
                      {"rope_theta", 10000.0},
                      {"compress_rope_theta", 160000.0},
                      {"rope_scaling",
                       {{"beta_fast", 32}, {"beta_slow", 1}, {"factor", 16},
                        {"original_max_position_embeddings", 65536}, {"type", "yarn"}}},
                      {"max_position_embeddings", 1048576},
                      {"num_nextn_predict_layers", 1},
                      {"torch_dtype", "bfloat16"}};
}

}  // namespace

Result<V4InitFormat> ParseV4InitFormat(const std::string& name) {
  if (name == "f32") return V4InitFormat::kF32;
  if (name == "bf16") return V4InitFormat::kBF16;
  if (name == "fp8") return V4InitFormat::kQuantized;
  return Status::InvalidArgument("unknown weight format '" + name + "' (f32, bf16, fp8)");
}

Result<ordered_json> V4PresetConfig(const std::string& preset) {
  ordered_json c = BaseConfig();
  auto set = [&](std::initializer_list<std::pair<const char*, ordered_json>> kv) {
    for (const auto& [k, v] : kv) c[k] = v;
  };
  if (preset == "tiny") {
    set({{"hidden_size", 64}, {"num_hidden_layers", 4}, {"num_attention_heads", 4}, {"head_dim", 64},
         {"qk_rope_head_dim", 16}, {"q_lora_rank", 32}, {"o_groups", 2}, {"o_lora_rank", 32},
         {"n_routed_experts", 8}, {"num_experts_per_tok", 2}, {"moe_intermediate_size", 32}, {"num_hash_layers", 1},
         {"compress_ratios", {0, 4, 128, 4, 0}}, {"index_n_heads", 4}, {"index_head_dim", 32}, {"index_topk", 16}});
  } else if (preset == "small") {
    set({{"hidden_size", 256}, {"num_hidden_layers", 6}, {"num_attention_heads", 4}, {"head_dim", 256},
         {"qk_rope_head_dim", 64}, {"q_lora_rank", 128}, {"o_groups", 2}, {"o_lora_rank", 128},
         {"n_routed_experts", 16}, {"num_experts_per_tok", 4}, {"moe_intermediate_size", 256},
         {"num_hash_layers", 2}, {"compress_ratios", {0, 0, 4, 128, 4, 128, 0}}, {"index_n_heads", 8},
         {"index_head_dim", 64}, {"index_topk", 128}});
  } else if (preset == "bench") {
    set({{"hidden_size", 1024}, {"num_hidden_layers", 8}, {"num_attention_heads", 8}, {"head_dim", 512},
         {"qk_rope_head_dim", 64}, {"q_lora_rank", 512}, {"o_groups", 2}, {"o_lora_rank", 512},
         {"n_routed_experts", 64}, {"num_experts_per_tok", 6}, {"moe_intermediate_size", 512},
         {"num_hash_layers", 3}, {"compress_ratios", {0, 0, 4, 128, 4, 128, 4, 128, 0}}, {"index_n_heads", 16},
         {"index_head_dim", 128}, {"index_topk", 512}});
  } else {
    return Status::InvalidArgument("unknown preset '" + preset + "' (tiny, small, bench)");
  }
  return c;
}

Status WriteRandomV4Checkpoint(const ordered_json& config_json, const std::string& dir, uint64_t seed,
                               V4InitFormat format, const std::function<void(int64_t, int64_t)>& progress) {
  DI_ASSIGN_OR_RETURN(HfConfig hf, HfConfig::Parse(config_json.dump(), "config"));
  DI_ASSIGN_OR_RETURN(V4Config c, V4Config::FromHf(hf));
  if (format == V4InitFormat::kQuantized && (c.hidden_size % 32 || c.moe_intermediate_size % 32))
    return Status::InvalidArgument("MXFP4 experts need hidden_size and moe_intermediate_size in multiples of 32");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IoError(dir + ": cannot create directory: " + ec.message());
  ordered_json written = config_json;
  if (format == V4InitFormat::kQuantized) {
    written["quantization_config"] = {{"activation_scheme", "dynamic"}, {"fmt", "e4m3"}, {"quant_method", "fp8"},
                                      {"scale_fmt", "ue8m0"}, {"weight_block_size", {128, 128}}};
    written["expert_dtype"] = "fp4";
  } else {
    written["torch_dtype"] = format == V4InitFormat::kF32 ? "float32" : "bfloat16";
  }
  {
    std::ofstream out(dir + "/config.json", std::ios::trunc);
    out << written.dump(2) << "\n";
    if (!out) return Status::IoError(dir + "/config.json: write failed");
  }

  const int64_t mtp = c.num_mtp_layers > 0 ? 1 : 0;
  const int64_t shards = 1 + c.num_layers + mtp;
  std::map<std::string, std::string> weight_map;
  uint64_t total_bytes = 0;
  auto shard_name = [&](int64_t i) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "model-%05lld-of-%05lld.safetensors", static_cast<long long>(i + 1),
                  static_cast<long long>(shards));
    return std::string(buf);
  };
  const int64_t d = c.hidden_size, hc = c.hc_mult;
  for (int64_t s = 0; s < shards; ++s) {
    ShardWriter w(seed, format);
    if (s == 0) {
      w.Matrix("embed", c.vocab_size, d, MatrixKind::kKeepBf16, std::sqrt(static_cast<float>(d)));
      w.Matrix("head", c.vocab_size, d, MatrixKind::kKeepBf16, 3.0f);
      w.Floats("norm.weight", {d}, 1.0f, 0.1f);
      w.Floats("hc_head_fn", {hc, hc * d}, 0.0f, 1.0f / std::sqrt(static_cast<float>(hc * d)));
      w.Floats("hc_head_base", {hc}, 0.0f, 0.5f);
      w.Floats("hc_head_scale", {1}, 1.0f, 0.25f);
    } else if (s <= c.num_layers) {
      const int64_t l = s - 1;
      AddBlock(w, c, "layers." + std::to_string(l) + ".", c.attention_types[l], c.compress_ratios[l],
               c.router_types[l], seed);
    } else {
      const std::string p = "mtp.0.";
      AddBlock(w, c, p, c.mtp_attention_type, c.mtp_compress_ratio, V4RouterType::kScore, seed);
      w.Matrix(p + "e_proj", d, d, MatrixKind::kDense);
      w.Matrix(p + "h_proj", d, d, MatrixKind::kDense);
      for (const char* n : {"enorm", "hnorm", "norm"}) w.Floats(p + n + ".weight", {d}, 1.0f, 0.1f);
      w.Floats(p + "hc_head_fn", {hc, hc * d}, 0.0f, 1.0f / std::sqrt(static_cast<float>(hc * d)));
      w.Floats(p + "hc_head_base", {hc}, 0.0f, 0.5f);
      w.Floats(p + "hc_head_scale", {1}, 1.0f, 0.25f);
    }
    DI_RETURN_IF_ERROR(w.Write(dir + "/" + shard_name(s), &weight_map, shard_name(s), &total_bytes));
    if (progress) progress(s + 1, shards);
  }
  ordered_json index = {{"metadata", {{"total_size", total_bytes}}}, {"weight_map", ordered_json::object()}};
  for (const auto& [name, file] : weight_map) index["weight_map"][name] = file;
  std::ofstream out(dir + "/model.safetensors.index.json", std::ios::trunc);
  out << index.dump(2) << "\n";
  if (!out) return Status::IoError(dir + "/model.safetensors.index.json: write failed");
  return Status::Ok();
}

}  // namespace deepinfer::model
