#include "model/deepseek_v4/v4_init.h"

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
#include "model/deepseek_v4/v4_config.h"

namespace deepinfer::model {
namespace {

using nlohmann::ordered_json;

using seeded_checkpoint::HashName;
using seeded_checkpoint::SplitMix;

// The released formats: FP8 in 128×128 blocks, MXFP4 experts, BF16 embeddings, heads, routers and
// compressors, F32 norms.
SeededFormat FormatOf(V4InitFormat format) {
  SeededFormat f;
  f.precision = format == V4InitFormat::kF32    ? SeededFormat::Precision::kF32
                : format == V4InitFormat::kBF16 ? SeededFormat::Precision::kBF16
                                                : SeededFormat::Precision::kQuantized;
  f.fp8_block = 128;
  return f;
}

void AddBlock(SeededShardWriter& w, const V4Config& c, const std::string& p, V4AttentionType type, int64_t ratio,
              V4RouterType router, uint64_t seed) {
  const int64_t d = c.hidden_size, hd = c.head_dim;
  const BlockShape shape = BlockShape::Of(c);
  const std::string a = p + "attn.";
  WriteAttentionProjections(w, shape, p);
  if (type != V4AttentionType::kSliding) {
    const bool csa = type == V4AttentionType::kCsa;
    const int64_t width = (csa ? 2 : 1) * hd;
    w.Matrix(a + "compressor.wkv", width, d, MatrixKind::kKeepBf16);
    w.Matrix(a + "compressor.wgate", width, d, MatrixKind::kKeepBf16, 2.0f);
    w.Floats(a + "compressor.ape", {ratio, width}, 0.0f, 0.5f);
    w.Norm(a + "compressor.norm.weight", hd);
    if (csa) {
      const std::string ip = a + "indexer.";
      const int64_t ihd = c.index_head_dim;
      w.Matrix(ip + "wq_b", c.index_n_heads * ihd, c.q_lora_rank, MatrixKind::kDense);
      w.Matrix(ip + "weights_proj", c.index_n_heads, d, MatrixKind::kKeepBf16);
      w.Matrix(ip + "compressor.wkv", 2 * ihd, d, MatrixKind::kKeepBf16);
      w.Matrix(ip + "compressor.wgate", 2 * ihd, d, MatrixKind::kKeepBf16, 2.0f);
      w.Floats(ip + "compressor.ape", {ratio, 2 * ihd}, 0.0f, 0.5f);
      w.Norm(ip + "compressor.norm.weight", ihd);
    }
  }
  WriteBlockSites(w, shape, p);
  const std::string f = p + "ffn.";
  const int64_t e = c.n_routed_experts, k = c.num_experts_per_tok;
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
  WriteExperts(w, shape, p, e);
}

ordered_json V4BaseConfig() {
  ordered_json c{{"architectures", {"DeepseekV4ForCausalLM"}},
                 {"model_type", "deepseek_v4"},
                 {"bos_token_id", 0},
                 {"eos_token_id", 1},
                 {"vocab_size", 129280},
                 {"tie_word_embeddings", false},
                 {"hidden_act", "silu"},
                 {"num_key_value_heads", 1},
                 {"n_shared_experts", 1},
                 {"scoring_func", "sqrtsoftplus"}};
  SetReleaseRoutingAndMhc(&c);
  SetKeys(&c, {{"rms_norm_eps", 1e-6},
               {"rope_theta", 10000.0},
               {"compress_rope_theta", 160000.0},
               {"rope_scaling",
                {{"beta_fast", 32}, {"beta_slow", 1}, {"factor", 16},
                 {"original_max_position_embeddings", 65536}, {"type", "yarn"}}},
               {"max_position_embeddings", 1048576},
               {"num_nextn_predict_layers", 1},
               {"torch_dtype", "bfloat16"}});
  return c;
}

}  // namespace

Result<V4InitFormat> ParseV4InitFormat(const std::string& name) {
  if (name == "f32") return V4InitFormat::kF32;
  if (name == "bf16") return V4InitFormat::kBF16;
  if (name == "fp8") return V4InitFormat::kQuantized;
  return Status::InvalidArgument("unknown weight format '" + name + "' (f32, bf16, fp8)");
}

Result<ordered_json> V4PresetConfig(const std::string& preset) {
  ordered_json c = V4BaseConfig();
  const int64_t layers = preset == "tiny" ? 4 : preset == "small" ? 6 : 8;
  DI_RETURN_IF_ERROR(SetPresetShape(preset, layers, &c));
  if (preset == "tiny") {
    SetKeys(&c, {{"n_routed_experts", 8}, {"num_experts_per_tok", 2}, {"moe_intermediate_size", 32},
                 {"num_hash_layers", 1}, {"compress_ratios", {0, 4, 128, 4, 0}}, {"index_n_heads", 4},
                 {"index_head_dim", 32}, {"index_topk", 16}});
  } else if (preset == "small") {
    SetKeys(&c, {{"n_routed_experts", 16}, {"num_experts_per_tok", 4}, {"moe_intermediate_size", 256},
                 {"num_hash_layers", 2}, {"compress_ratios", {0, 0, 4, 128, 4, 128, 0}}, {"index_n_heads", 8},
                 {"index_head_dim", 64}, {"index_topk", 128}});
  } else {
    SetKeys(&c, {{"n_routed_experts", 64}, {"num_experts_per_tok", 6}, {"moe_intermediate_size", 512},
                 {"num_hash_layers", 3}, {"compress_ratios", {0, 0, 4, 128, 4, 128, 4, 128, 0}}, {"index_n_heads", 16},
                 {"index_head_dim", 128}, {"index_topk", 512}});
  }
  return c;
}

Status WriteRandomV4Checkpoint(const ordered_json& config_json, const std::string& dir, uint64_t seed,
                               V4InitFormat format, const std::function<void(int64_t, int64_t)>& progress) {
  DI_ASSIGN_OR_RETURN(HfConfig hf, HfConfig::Parse(config_json.dump(), "config"));
  DI_ASSIGN_OR_RETURN(V4Config c, V4Config::FromHf(hf));
  if (format == V4InitFormat::kQuantized && (c.hidden_size % 32 || c.moe_intermediate_size % 32))
    return Status::InvalidArgument("MXFP4 experts need hidden_size and moe_intermediate_size in multiples of 32");
  ordered_json written = config_json;
  if (format == V4InitFormat::kQuantized) {
    written["quantization_config"] = {{"activation_scheme", "dynamic"}, {"fmt", "e4m3"}, {"quant_method", "fp8"},
                                      {"scale_fmt", "ue8m0"}, {"weight_block_size", {128, 128}}};
    written["expert_dtype"] = "fp4";
  } else {
    written["torch_dtype"] = format == V4InitFormat::kF32 ? "float32" : "bfloat16";
  }
  const int64_t mtp = c.num_mtp_layers > 0 ? 1 : 0;
  const int64_t shards = 1 + c.num_layers + mtp;
  const int64_t d = c.hidden_size;
  const BlockShape shape = BlockShape::Of(c);
  auto fill = [&](int64_t s, SeededShardWriter& w) {
    if (s == 0) {
      w.Matrix("embed", c.vocab_size, d, MatrixKind::kKeepBf16, std::sqrt(static_cast<float>(d)));
      w.Matrix("head", c.vocab_size, d, MatrixKind::kKeepBf16, 3.0f);
      w.Norm("norm.weight", d);
      WriteHcHead(w, shape, "hc_head");
    } else if (s <= c.num_layers) {
      const int64_t l = s - 1;
      AddBlock(w, c, "layers." + std::to_string(l) + ".", c.attention_types[l], c.compress_ratios[l],
               c.router_types[l], seed);
    } else {
      const std::string p = "mtp.0.";
      AddBlock(w, c, p, c.mtp_attention_type, c.mtp_compress_ratio, V4RouterType::kScore, seed);
      w.Matrix(p + "e_proj", d, d, MatrixKind::kDense);
      w.Matrix(p + "h_proj", d, d, MatrixKind::kDense);
      for (const char* n : {"enorm", "hnorm", "norm"}) w.Norm(p + n + ".weight", d);
      WriteHcHead(w, shape, p + "hc_head");
    }
  };
  return WriteSeededCheckpoint(written, 2, dir, seed, FormatOf(format), shards, fill, progress);
}

}  // namespace deepinfer::model
