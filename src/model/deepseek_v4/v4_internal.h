// Internals of the DeepSeek-V4 forward pass shared by its source files (not part of the model API).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/linear.h"
#include "model/causal_lm.h"
#include "model/common/forward_batch.h"
#include "model/common/hyper_connection.h"
#include "model/common/rotary.h"
#include "model/common/row_parallel.h"
#include "model/deepseek_v4/v4_config.h"
#include "model/deepseek_v4/v4_model.h"
#include "model/deepseek_v4/v4_state.h"
#include "model/deepseek_v4/v4_weights.h"

namespace deepinfer::model::v4 {

using ChunkRows = model::ChunkRows<V4SequenceState>;

struct Step : StepBase<V4SequenceState> {
  const V4Config* config = nullptr;
  const V4CacheLayout* layout = nullptr;
  bool kv_bf16 = false;  // KV entries stored as bfloat16 (else fp32)
};

// Which block runs: a main layer (its index addresses the KV block layout) or an MTP layer.
struct BlockRef {
  const V4BlockWeights* weights = nullptr;
  V4AttentionType type = V4AttentionType::kSliding;
  int64_t ratio = 0;
  V4RouterType router = V4RouterType::kScore;
  int64_t layer = 0;  // index into the state's layers and the cache layout (unused for the MTP layer)
  bool mtp = false;
};

inline V4LayerState& LayerState(const ChunkRows& chunk, const BlockRef& block) {
  return chunk.state->layers[block.layer];  // (the MTP layer has no compressor)
}

// Attention sub-block on normalised inputs x [n, d]; writes out [n, d]. Feeds the compressors, writes
// compressed entries and the window's K=V vectors to KV blocks (the MTP layer: to its window ring).
void Attention(const Step& step, const BlockRef& block, const float* x, float* out);

// Positions of raw projections a compressor's state keeps (see V4CompressorState).
inline int64_t CompressorCapacity(const V4CompressorWeights& w) {
  return kV4MaxRollback + (w.overlapping ? 2 : 1) * w.ratio;
}

// Stores one token's raw compressor projections (kv, gate: coff · head_dim each) at position `pos`; when
// that completes a window, writes the finished entry (normalised, rotated) to `entry` (unless null) and
// returns true. Windows start at multiples of the ratio; the first one at or after `floor` has no previous
// window (an overlapping compressor pools zeros with −∞ gates in its place).
bool CompressorFeed(const V4CompressorWeights& w, const std::vector<float>& inv_freq, float eps,
                    V4CompressorState& state, int64_t floor, int64_t pos, const float* kv, const float* gate,
                    float* entry);

// An overlapping compressor's state at a block's end boundary, as the window block keeps it: the first
// series (head_dim values) of the raw kv, then of the raw gate, of the last `ratio` positions.
inline int64_t CompressorBoundaryFloats(const V4CompressorWeights& w) {
  return w.overlapping ? 2 * w.ratio * w.head_dim : 0;
}
// Copies the boundary state at `end` (a multiple of the ratio) out of the state to `dst`, or from `src`
// into the state (whose other rows become zero).
void SaveCompressorBoundary(const V4CompressorWeights& w, const V4CompressorState& state, int64_t end, float* dst);
void LoadCompressorBoundary(const V4CompressorWeights& w, V4CompressorState& state, int64_t end, const float* src);

// Block-addressed storage. Offsets are in bytes from a block's start; KV entries are stored in the step's
// KV precision (fp32, or bf16 rounded to nearest even), the window blocks' boundary state in fp32.
inline int64_t KvElementBytes(const Step& step) { return step.kv_bf16 ? 2 : 4; }
// The address of entry `index` (one per `ratio` positions, `width` values) of a layer in a prefix group.
uint8_t* CompressedEntry(const Step& step, const ChunkRows& chunk, int group, int64_t ratio, int64_t offset,
                         int64_t width, int64_t index);
// The address of the window K=V vector at position `pos` of a layer.
uint8_t* WindowEntry(const Step& step, const ChunkRows& chunk, int64_t offset, int64_t pos);
// The start of the chunk's window block `index`.
uint8_t* WindowBlock(const Step& step, const ChunkRows& chunk, int64_t index);
// Writes n values to an entry in the KV precision.
void StoreEntry(const Step& step, uint8_t* dst, const float* src, int64_t n);

// MoE sub-block on normalised inputs x [n, d]; writes out [n, d].
void Moe(const Step& step, const BlockRef& block, const float* x, float* out);

// A whole block (attention and MoE with their mHC sites) on the streams [n, hc, d].
void Block(const Step& step, const BlockRef& block, float* streams);

}  // namespace deepinfer::model::v4
