// Internals of the DeepSeek-V4.1 forward pass shared by its source files (not part of the model API).
#pragma once

#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/kv_quant.h"
#include "kernels/linear.h"
#include "model/causal_lm.h"
#include "model/common/forward_batch.h"
#include "model/common/hyper_connection.h"
#include "model/common/row_parallel.h"
#include "model/deepseek_v41/v41_config.h"
#include "model/deepseek_v41/v41_engram.h"
#include "model/deepseek_v41/v41_probe.h"
#include "model/deepseek_v41/v41_state.h"
#include "model/deepseek_v41/v41_weights.h"

namespace deepinfer::model {

// The storage formats of V4.1's caches (the model's own quantizers) and where every entry sits in the
// groups' blocks (byte offsets from a block's start).
struct V41CacheLayout {
  kernels::KvQuant window_format = kernels::KvQuant::kFp8Pow2x32;  // window K=V, after RoPE
  kernels::KvQuant latent_format = kernels::KvQuant::kFp4E4m3x16;  // compressed latents, after RoPE
  kernels::KvQuant key_format = kernels::KvQuant::kFp4Pow2x32;     // indexer keys (and queries)
  int64_t window_bytes = 0, latent_bytes = 0, key_bytes = 0;       // one stored vector of each
  struct Source {
    int latent_group = -1;
    int64_t latent_offset = 0;  // [128 / ratio] latents
    int key_group = -1;         // -1: the source runs no indexer
    int64_t key_offset = 0;     // [128 / ratio] indexer keys
  };
  std::vector<Source> sources;          // per KV source
  int window_group = -1;
  std::vector<int64_t> window_offset;   // per layer: [128] window entries
  int64_t ids_offset = 0;               // [128] int32 Engram compressed ids (the boundary state)
};

namespace v41 {

using ChunkRows = model::ChunkRows<V41SequenceState>;

// The selection an index source published for the following layers of its group ("Reuse"): per row, the
// chosen latent indices in increasing order; and per chunk, the chosen latents decoded to fp32 once.
struct Selection {
  int64_t group = -1;
  std::vector<std::vector<int32_t>> rows;   // per row: latent indices
  std::vector<std::vector<float>> decoded;  // per chunk: [chosen latents of any of its rows, head_dim]
  std::vector<std::vector<int32_t>> slot;   // per chunk: latent index → row in `decoded`, −1 if unused
};

struct Step : StepBase<V41SequenceState> {
  const V41Config* config = nullptr;
  const V41CacheLayout* layout = nullptr;
  const V41Weights* weights = nullptr;
  const V41EngramHashing* hashing = nullptr;
  V41Probe* probe = nullptr;  // tests only

  // Published within the step ("shared" in the reference): the latest index source's selection, and per
  // row the candidate blocks of the candidate source (empty until it has run).
  Selection selection;
  std::vector<std::vector<uint8_t>> candidate_blocks;  // per row: kept flag per candidate block
};

// Stored entries of a chunk's sequence.
uint8_t* LatentEntry(const Step& step, const ChunkRows& chunk, int64_t source, int64_t index);
uint8_t* KeyEntry(const Step& step, const ChunkRows& chunk, int64_t source, int64_t index);
uint8_t* WindowEntry(const Step& step, const ChunkRows& chunk, int64_t layer, int64_t pos);
int32_t* EngramIdSlot(const Step& step, const ChunkRows& chunk, int64_t pos);

// Single-pass mHC over a stack of sites (v41_single_pass_mhc.cpp): a site's coefficients come from the
// streams it sees, its input is collapsed with the previous site's pre.
class SinglePassMhc {
 public:
  SinglePassMhc(const V41Config& c, int64_t n);
  // The site's coefficients from the streams [n, hc, d], and its input (before its norm) into collapsed [n, d].
  void Collapse(const HyperConnectionWeights& w, const float* streams, float* collapsed, ThreadPool& pool);
  // streams ← post ⊗ out + combᵀ · streams with the site's coefficients; its pre then collapses the next input.
  void Expand(const float* out, float* streams, ThreadPool& pool);
  // The pre that collapses the next input [n, hc] (after the last site: the final norm's).
  const std::vector<float>& pre_mix() const { return pre_mix_; }

 private:
  HcShape shape_;
  int64_t n_;
  std::vector<float> pre_mix_, pre_, post_, comb_;
};

// The compressed id of the token at `pos` for a row of `chunk` (pos ≤ the row's position).
int64_t EngramSlot(const Step& step, const ChunkRows& chunk, int64_t pos);

// The Engram update of layer `layer` on the streams [n, hc, d] (before the layer's block).
void Engram(const Step& step, int64_t layer, float* streams);

// Attention sub-block of `layer` on normalised inputs x [n, d]; writes out [n, d]. Runs the compressor and
// indexer of source layers (storing latents and keys, publishing the selection) and writes the windows.
void Attention(Step& step, int64_t layer, const float* x, float* out);

// MoE sub-block of `layer` on normalised inputs x [n, d]; writes out [n, d].
void Moe(const Step& step, int64_t layer, const float* x, float* out);
// The same for any MoE weights with top-k routing (`layer` names it to the probe).
void MoeBlock(const Step& step, const V41MoeWeights& w, int64_t k, int64_t layer, const float* x, float* out);

// Quantizes a vector into storage through the probe (a no-op without one): records near-boundary decisions
// and takes the flipped ones the other way.
void QuantizeProbed(const Step& step, V41DecisionKind kind, int64_t layer, int64_t position, kernels::KvQuant q,
                    float* x, int64_t n, uint8_t* out);
// The same for a fake-quantized vector (indexer queries).
void FakeQuantizeProbed(const Step& step, V41DecisionKind kind, int64_t layer, int64_t position, kernels::KvQuant q,
                        float* x, int64_t n);
// A top-k through the probe: `scores[0..n)` and the k chosen indices (descending by score); records a near tie
// between the k-th and the (k+1)-th and swaps them when flipped. `exclude` (−1: none) is never swapped out.
void TopKProbed(const Step& step, V41DecisionKind kind, int64_t layer, int64_t position, const float* scores,
                int64_t n, int64_t k, int32_t* chosen, int32_t exclude = -1);

}  // namespace v41
}  // namespace deepinfer::model
