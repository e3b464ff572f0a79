// Writing a seeded random checkpoint of a DeepSeek family (`init-model`, test fixtures): a shard writer
// that stores each tensor in the format the family's release uses for it, the block parts both families
// write alike, and the driver that lays out config.json, the shards and their index.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "model/common/block_weights.h"
#include "model/common/seeded_checkpoint.h"

namespace deepinfer::model {

// How a family stores its random weights.
struct SeededFormat {
  enum class Precision { kF32, kBF16, kQuantized } precision = Precision::kBF16;
  int64_t fp8_block = 128;         // quantized dense matrices: FP8 in square blocks of this size
  bool fp8_whole_blocks = false;   // keep BF16 a quantized matrix whose sides are not whole blocks
  bool norms_bf16 = false;         // norm weights in BF16 (else F32)
  // Quantized dense (and expert) matrices as FP8 with fp32 `weight_scale_inv` block scales (DeepSeek-V3),
  // instead of E8M0 `scale` (and packed FP4 experts).
  bool fp8_scale_inv = false;
};

// What a stored matrix is for, which decides its format when quantized.
enum class MatrixKind {
  kDense,     // FP8 blocks
  kExpert,    // packed FP4 (an E8M0 scale per 32 inputs)
  kKeepBf16,  // BF16 even when quantized (embeddings, heads, routers, compressors)
};

// One shard's random tensors, values from (seed, tensor name) alone.
class SeededShardWriter {
 public:
  SeededShardWriter(uint64_t seed, SeededFormat format) : seed_(seed), format_(format) {}

  const SeededFormat& format() const { return format_; }
  // `prefix`.weight [out, in] uniform with the variance of N(0, gain² / in) (and its scales).
  void Matrix(const std::string& prefix, int64_t out, int64_t in, MatrixKind kind, float gain = 1.0f);
  // Rows of `dim` values from N(0, 1): FP8 with an E8M0 scale per 32 when quantized (else BF16).
  void RowTable(const std::string& prefix, int64_t rows, int64_t dim);
  void Floats(const std::string& name, std::vector<int64_t> shape, float mean, float std, bool bf16 = false);
  // A norm weight [n] near 1, in the format's norm precision.
  void Norm(const std::string& name, int64_t n);
  void Ints(const std::string& name, std::vector<int64_t> shape, const std::vector<int32_t>& values);
  Status Write(const std::string& path, std::map<std::string, std::string>* weight_map, const std::string& file,
               uint64_t* total_bytes);

 private:
  uint64_t seed_;
  SeededFormat format_;
  seeded_checkpoint::Shard shard_;
};

// The block parts both families write alike, under a block prefix `p` ("layers.3.").
void WriteAttentionProjections(SeededShardWriter& w, const BlockShape& s, const std::string& p);
void WriteBlockSites(SeededShardWriter& w, const BlockShape& s, const std::string& p);
// The routed experts and the shared expert under `p`ffn. (the gate and routing tensors are the family's).
void WriteExperts(SeededShardWriter& w, const BlockShape& s, const std::string& p, int64_t experts);
// An mHC head site `prefix`_fn / _base / _scale.
void WriteHcHead(SeededShardWriter& w, const BlockShape& s, const std::string& prefix);

// Sets config keys in order, each replacing its value or appended.
void SetKeys(nlohmann::ordered_json* config,
             std::initializer_list<std::pair<const char*, nlohmann::ordered_json>> keys);
// The routing, window and mHC constants both families' releases set (topk_method through hc_eps), appended
// in config.json's order.
void SetReleaseRoutingAndMhc(nlohmann::ordered_json* config);
// The shape both families' init-model presets ("tiny", "small", "bench") share: hidden size, heads, head
// and rope dims and the low ranks, with the family's layer count. An unknown preset is an error.
Status SetPresetShape(const std::string& preset, int64_t num_layers, nlohmann::ordered_json* config);

// Creates `dir`, writes `config` there as config.json (indented by `indent`), then `shards` shards named
// model-0000i-of-0000n.safetensors, each filled by fill(index, writer), and model.safetensors.index.json.
// `progress(done, total)` is called after each shard.
Status WriteSeededCheckpoint(const nlohmann::ordered_json& config, int indent, const std::string& dir, uint64_t seed,
                             const SeededFormat& format, int64_t shards,
                             const std::function<void(int64_t, SeededShardWriter&)>& fill,
                             const std::function<void(int64_t, int64_t)>& progress);

}  // namespace deepinfer::model
