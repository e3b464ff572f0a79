// The typed DeepSeek-V4.1 configuration (model_type "deepseek_v41"): the composite config.json of the release
// (top-level text_config + vision_config + quantization_config), or a bare text config
// ("deepseek_v41_text"). Only the text model is used; the vision config is read for inspection.
//
// The layer schedule (transformers deepseek_v41 @0a2080b, which the fixtures follow):
//   * every layer has sliding-window attention;
//   * a layer with compress_ratios[l] > 0 also attends over the compressed latents of its group's KV source
//     (the latest KV source at or before it), masked by the top-k of its group's latest index source;
//   * KV sources own the compressor and publish latents and indexer keys; index sources score the shared
//     keys with their own queries; index sources after the candidate source score only inside the
//     candidate source's blocks (two-level top-k).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/hf_config.h"
#include "core/status.h"
#include "model/common/config.h"

namespace deepinfer::model {

struct V41EngramConfig {
  std::vector<int64_t> layer_ids;       // layers whose input streams get the n-gram lookup
  std::vector<int64_t> num_embeddings;  // table rows per Engram layer
  int64_t vocab_size = 0;               // the primes are drawn upward from here
  int64_t max_ngram_size = 0;           // n-grams 2..max_ngram_size
  int64_t n_heads = 0;                  // heads per n-gram size
  int64_t head_dim = 0;                 // table row width
  int64_t pad_id = 0;                   // the token whose compressed id fills slots before the start
  int64_t compressed_vocab_size = 0;    // classes of the tokenizer-derived compressed id map
  int64_t num_columns() const { return (max_ngram_size - 1) * n_heads; }
  bool enabled() const { return !layer_ids.empty(); }
};

struct V41DsparkConfig {
  int64_t num_layers = 0;  // num_nextn_predict_layers
  int64_t block_size = 0;
  int64_t noise_token_id = 0;
  std::vector<int64_t> target_layer_ids;
  int64_t markov_rank = 0;
  int64_t n_routed_experts = 0;
  int64_t num_experts_per_tok = 0;
};

struct V41VisionConfig {
  int64_t hidden_size = 0, intermediate_size = 0, num_layers = 0, num_heads = 0, patch_size = 0;
  int64_t downsample_ratio = 0, max_image_tokens = 0, min_pixels = 0;
};

// Per layer, derived from the schedule.
struct V41LayerPlan {
  int64_t ratio = 0;          // 0: window only
  bool kv_source = false;     // owns the compressor, publishes latents and indexer keys
  bool index_source = false;  // scores the shared keys, publishes a top-k
  int64_t group = -1;         // index of the KV source (in kv_source_layer_ids) whose latents it reads; -1 if none
  int64_t index_layer = -1;   // the index source whose top-k masks its compressed keys; -1 if none
  bool candidate_source = false;
  bool uses_candidates = false;  // an index source after the candidate source
  int64_t engram = -1;           // index into engram.layer_ids, -1 if none
};

struct V41Config : DeepSeekConfig {
  std::vector<int64_t> compress_ratios;  // per layer
  std::vector<int64_t> kv_source_layer_ids;
  std::vector<int64_t> index_source_layer_ids;
  int64_t candidate_source_layer_id = -1;  // -1: no two-level top-k
  int64_t candidate_topk_blocks = 0;
  int64_t candidate_block_size = 0;

  double gate_temp = 1.0;      // router logits are divided by it
  bool norm_topk_prob = true;  // renormalise the chosen experts' weights

  V41EngramConfig engram;
  V41DsparkConfig dspark;
  V41VisionConfig vision;
  bool has_vision = false;

  // From quantization_config (0 when absent): the FP8 block shape the checkpoint declares.
  int64_t weight_block_out = 0, weight_block_in = 0;

  int64_t pad_token_id = -1;
  int64_t image_token_id = -1;

  std::vector<V41LayerPlan> layers;  // derived

  static Result<V41Config> FromHf(const HfConfig& hf);
};

}  // namespace deepinfer::model
