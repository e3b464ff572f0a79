#include "model/common/seeded_writer.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

namespace deepinfer::model {

using seeded_checkpoint::RandomValues;

void SeededShardWriter::Matrix(const std::string& prefix, int64_t out, int64_t in, MatrixKind kind, float gain) {
  std::vector<float> w = RandomValues(seed_, prefix, out * in, 0.0f, gain / std::sqrt(static_cast<float>(in)));
  const std::string name = prefix + ".weight";
  const int64_t block = format_.fp8_block;
  const bool partial = format_.fp8_whole_blocks &&
                       ((kind == MatrixKind::kDense && (out % block || in % block)) ||
                        (kind == MatrixKind::kExpert && in % 32));
  if (format_.precision == SeededFormat::Precision::kF32) {
    shard_.F32(name, {out, in}, w);
  } else if (format_.precision == SeededFormat::Precision::kBF16 || kind == MatrixKind::kKeepBf16 || partial) {
    shard_.Bf16(name, {out, in}, w);
  } else if (format_.fp8_scale_inv) {
    shard_.Fp8ScaleInv(prefix, w, out, in, block, block);
  } else if (kind == MatrixKind::kExpert) {
    shard_.Fp4(prefix, w, out, in);
  } else {
    shard_.Fp8(prefix, w, out, in, block, block);
  }
}

void SeededShardWriter::RowTable(const std::string& prefix, int64_t rows, int64_t dim) {
  std::vector<float> w = RandomValues(seed_, prefix, rows * dim, 0.0f, 1.0f);
  if (format_.precision != SeededFormat::Precision::kQuantized || dim % 32) {
    shard_.Bf16(prefix + ".weight", {rows, dim}, w);
    return;
  }
  shard_.Fp8(prefix, w, rows, dim, 1, 32);
}

void SeededShardWriter::Floats(const std::string& name, std::vector<int64_t> shape, float mean, float std,
                               bool bf16) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v = RandomValues(seed_, name, n, mean, std);
  if (bf16) {
    shard_.Bf16(name, std::move(shape), v);
  } else {
    shard_.F32(name, std::move(shape), v);
  }
}

void SeededShardWriter::Norm(const std::string& name, int64_t n) { Floats(name, {n}, 1.0f, 0.1f, format_.norms_bf16); }

void SeededShardWriter::Ints(const std::string& name, std::vector<int64_t> shape, const std::vector<int32_t>& values) {
  shard_.I32(name, std::move(shape), values);
}

Status SeededShardWriter::Write(const std::string& path, std::map<std::string, std::string>* weight_map,
                                const std::string& file, uint64_t* total_bytes) {
  return shard_.Write(path, weight_map, file, total_bytes);
}

void WriteAttentionProjections(SeededShardWriter& w, const BlockShape& s, const std::string& p) {
  const int64_t d = s.hidden, h = s.heads, hd = s.head_dim;
  const std::string a = p + "attn.";
  w.Matrix(a + "wq_a", s.q_lora_rank, d, MatrixKind::kDense);
  w.Norm(a + "q_norm.weight", s.q_lora_rank);
  w.Matrix(a + "wq_b", h * hd, s.q_lora_rank, MatrixKind::kDense);
  w.Matrix(a + "wkv", hd, d, MatrixKind::kDense);
  w.Norm(a + "kv_norm.weight", hd);
  // Each group's rows of wo_a are a matrix of their own: FP8 needs them on whole row blocks.
  w.Matrix(a + "wo_a", s.o_groups * s.o_lora_rank, h * hd / s.o_groups,
           s.o_lora_rank % w.format().fp8_block == 0 ? MatrixKind::kDense : MatrixKind::kKeepBf16);
  w.Matrix(a + "wo_b", d, s.o_groups * s.o_lora_rank, MatrixKind::kDense);
  w.Floats(a + "attn_sink", {h}, 0.0f, 1.0f);
}

void WriteBlockSites(SeededShardWriter& w, const BlockShape& s, const std::string& p) {
  const int64_t d = s.hidden, hc = s.hc;
  w.Norm(p + "attn_norm.weight", d);
  w.Norm(p + "ffn_norm.weight", d);
  const int64_t mix = (2 + hc) * hc;
  for (const char* site : {"attn", "ffn"}) {
    const std::string name = p + "hc_" + site;
    w.Floats(name + "_fn", {mix, hc * d}, 0.0f, 1.0f / std::sqrt(static_cast<float>(hc * d)));
    w.Floats(name + "_base", {mix}, 0.0f, 0.5f);
    w.Floats(name + "_scale", {3}, 1.0f, 0.25f);
  }
}

void WriteExperts(SeededShardWriter& w, const BlockShape& s, const std::string& p, int64_t experts) {
  const std::string f = p + "ffn.";
  const int64_t d = s.hidden, inter = s.moe_intermediate;
  for (int64_t i = 0; i < experts; ++i) {
    const std::string ep = f + "experts." + std::to_string(i) + ".";
    w.Matrix(ep + "w1", inter, d, MatrixKind::kExpert, 2.0f);
    w.Matrix(ep + "w2", d, inter, MatrixKind::kExpert);
    w.Matrix(ep + "w3", inter, d, MatrixKind::kExpert, 2.0f);
  }
  w.Matrix(f + "shared_experts.w1", inter, d, MatrixKind::kDense, 2.0f);
  w.Matrix(f + "shared_experts.w2", d, inter, MatrixKind::kDense);
  w.Matrix(f + "shared_experts.w3", inter, d, MatrixKind::kDense, 2.0f);
}

void WriteHcHead(SeededShardWriter& w, const BlockShape& s, const std::string& prefix) {
  const int64_t d = s.hidden, hc = s.hc;
  w.Floats(prefix + "_fn", {hc, hc * d}, 0.0f, 1.0f / std::sqrt(static_cast<float>(hc * d)));
  w.Floats(prefix + "_base", {hc}, 0.0f, 0.5f);
  w.Floats(prefix + "_scale", {1}, 1.0f, 0.25f);
}

void SetKeys(nlohmann::ordered_json* config,
             std::initializer_list<std::pair<const char*, nlohmann::ordered_json>> keys) {
  for (const auto& [k, v] : keys) (*config)[k] = v;
}

void SetReleaseRoutingAndMhc(nlohmann::ordered_json* config) {
  SetKeys(config, {{"topk_method", "noaux_tc"},
                   {"norm_topk_prob", true},
                   {"routed_scaling_factor", 1.5},
                   {"swiglu_limit", 10.0},
                   {"sliding_window", 128},
                   {"hc_mult", 4},
                   {"hc_sinkhorn_iters", 20},
                   {"hc_eps", 1e-6}});
}

Status SetPresetShape(const std::string& preset, int64_t num_layers, nlohmann::ordered_json* config) {
  if (preset == "tiny") {
    SetKeys(config, {{"hidden_size", 64}, {"num_hidden_layers", num_layers}, {"num_attention_heads", 4},
                     {"head_dim", 64}, {"qk_rope_head_dim", 16}, {"q_lora_rank", 32}, {"o_groups", 2},
                     {"o_lora_rank", 32}});
  } else if (preset == "small") {
    SetKeys(config, {{"hidden_size", 256}, {"num_hidden_layers", num_layers}, {"num_attention_heads", 4},
                     {"head_dim", 256}, {"qk_rope_head_dim", 64}, {"q_lora_rank", 128}, {"o_groups", 2},
                     {"o_lora_rank", 128}});
  } else if (preset == "bench") {
    SetKeys(config, {{"hidden_size", 1024}, {"num_hidden_layers", num_layers}, {"num_attention_heads", 8},
                     {"head_dim", 512}, {"qk_rope_head_dim", 64}, {"q_lora_rank", 512}, {"o_groups", 2},
                     {"o_lora_rank", 512}});
  } else {
    return Status::InvalidArgument("unknown preset '" + preset + "' (tiny, small, bench)");
  }
  return Status::Ok();
}

Status WriteSeededCheckpoint(const nlohmann::ordered_json& config, int indent, const std::string& dir, uint64_t seed,
                             const SeededFormat& format, int64_t shards,
                             const std::function<void(int64_t, SeededShardWriter&)>& fill,
                             const std::function<void(int64_t, int64_t)>& progress) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IoError(dir + ": cannot create directory: " + ec.message());
  {
    std::ofstream out(dir + "/config.json", std::ios::trunc);
    out << config.dump(indent) << "\n";
    if (!out) return Status::IoError(dir + "/config.json: write failed");
  }
  std::map<std::string, std::string> weight_map;
  uint64_t total_bytes = 0;
  auto shard_name = [&](int64_t i) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "model-%05lld-of-%05lld.safetensors", static_cast<long long>(i + 1),
                  static_cast<long long>(shards));
    return std::string(buf);
  };
  for (int64_t s = 0; s < shards; ++s) {
    SeededShardWriter w(seed, format);
    fill(s, w);
    DI_RETURN_IF_ERROR(w.Write(dir + "/" + shard_name(s), &weight_map, shard_name(s), &total_bytes));
    if (progress) progress(s + 1, shards);
  }
  nlohmann::ordered_json index = {{"metadata", {{"total_size", total_bytes}}},
                                  {"weight_map", nlohmann::ordered_json::object()}};
  for (const auto& [name, file] : weight_map) index["weight_map"][name] = file;
  std::ofstream out(dir + "/model.safetensors.index.json", std::ios::trunc);
  out << index.dump(2) << "\n";
  if (!out) return Status::IoError(dir + "/model.safetensors.index.json: write failed");
  return Status::Ok();
}

}  // namespace deepinfer::model
