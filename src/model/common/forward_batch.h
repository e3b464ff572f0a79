// A forward step as both families build it: the fields every step carries, every chunk of the batch checked
// before any state changes, the rows of all chunks in one list (sequence by sequence), the embedded residual
// streams, and the rows whose logits the batch asks for.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/safetensors.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "kernels/linear.h"
#include "kvcache/kv_cache_spec.h"
#include "model/causal_lm.h"

namespace deepinfer::model {

// One token of the step: its id and absolute position, and the chunk it belongs to.
struct Row {
  int32_t token = 0;
  int64_t pos = 0;
  int32_t chunk = 0;
};

// One sequence's contiguous rows in the step.
template <class State>
struct ChunkRows {
  State* state = nullptr;
  int64_t first_row = 0;
  int64_t num_rows = 0;
  int64_t start_pos = 0;
  bool state_only = false;  // writes no kPrefix block
};

// What every forward step of either family carries: the threads, where the KV blocks live, the RoPE tables,
// the matrix-product precision, and the batch's rows and chunks. A family's step extends it.
template <class State>
struct StepBase {
  ThreadPool* pool = nullptr;  // every parallel part of the step runs here (LoadOptions::pool)
  kvcache::KvPools* pools = nullptr;
  const std::vector<float>* main_inv_freq = nullptr;
  const std::vector<float>* compress_inv_freq = nullptr;
  kernels::LinearOptions linear;  // precision of every matrix product
  std::vector<Row> rows;
  std::vector<ChunkRows<State>> chunks;
  int64_t num_rows() const { return static_cast<int64_t>(rows.size()); }
};

// Fills the shared part of a step.
template <class State>
void InitStep(ThreadPool* pool, kvcache::KvPools* pools, const std::vector<float>* main_inv_freq,
              const std::vector<float>* compress_inv_freq, ComputePrecision precision, StepBase<State>* step) {
  step->pool = pool;
  step->pools = pools;
  step->main_inv_freq = main_inv_freq;
  step->compress_inv_freq = compress_inv_freq;
  if (precision == ComputePrecision::kBf16Activations)
    step->linear.precision = kernels::LinearPrecision::kBf16Activations;
}

// What a batch is checked against.
struct BatchRules {
  const void* owner = nullptr;  // the model whose sequence states the chunks must hold
  int64_t vocab_size = 0;
  int64_t max_positions = 0;  // max_position_embeddings; 0: not bounded
  // Window blocks before a state's window_floor are never read, so they need not be in the pool (V4.1);
  // otherwise every window block the chunk's positions span must be (V4).
  bool skip_window_blocks_below_floor = false;
};

// The pools must have the spec's groups with its block sizes.
Status CheckPools(const kvcache::KvCacheSpec& spec, const kvcache::KvPools& pools);

// Checks one chunk whose sequence starts at `start` (tokens, logit rows, positions, block tables);
// `window_floor` is where the window groups' blocks start to be read.
Status CheckChunk(const SequenceChunk& chunk, const std::string& where, const BatchRules& rules,
                  const kvcache::KvCacheSpec& spec, const kvcache::KvPools& pools, int64_t start, int64_t window_floor);

// The step's residual streams [rows, hc, d]: each row's token embedding (`embed`, F32 or BF16) in all hc
// streams.
void EmbedIntoStreams(const TensorInfo& embed, const std::vector<Row>& rows, int64_t hc, int64_t d,
                      ThreadPool& pool, float* streams);

// Clears the output for a batch (the buffers keep their capacity).
void ResetForwardOutput(int64_t vocab_size, int64_t hidden_width, ForwardOutput* out);

// Checks the whole batch (pools, then each chunk: its state is one of `rules.owner`'s, appears once, and
// passes CheckChunk) and appends its rows and chunks to the step. Nothing but the step changes on error.
template <class State>
Status LayOutBatch(std::span<const SequenceChunk> batch, const BatchRules& rules, const kvcache::KvCacheSpec& spec,
                   const kvcache::KvPools& pools, StepBase<State>* step, bool* want_hidden) {
  DI_RETURN_IF_ERROR(CheckPools(spec, pools));
  std::unordered_set<const SequenceState*> seen;
  for (size_t ci = 0; ci < batch.size(); ++ci) {
    const SequenceChunk& chunk = batch[ci];
    const std::string where = "batch chunk " + std::to_string(ci);
    if (chunk.state == nullptr || chunk.state->owner() != rules.owner)
      return Status::InvalidArgument(where + ": not a sequence state of this model");
    auto* state = static_cast<State*>(chunk.state);
    if (!seen.insert(state).second) return Status::InvalidArgument(where + ": the sequence appears twice");
    const int64_t start = state->num_tokens(), len = static_cast<int64_t>(chunk.tokens.size());
    DI_RETURN_IF_ERROR(CheckChunk(chunk, where, rules, spec, pools, start,
                                  rules.skip_window_blocks_below_floor ? state->window_floor : 0));
    *want_hidden = *want_hidden || chunk.want_hidden;
    step->chunks.push_back({state, step->num_rows(), len, start, chunk.state_only});
    for (int64_t i = 0; i < len; ++i) step->rows.push_back({chunk.tokens[i], start + i, static_cast<int32_t>(ci)});
  }
  return Status::Ok();
}

// The step rows whose logits (and hidden states) the batch asks for, in order; sets out->first_row and
// out->num_rows per chunk.
template <class State>
std::vector<int64_t> PickLogitRows(std::span<const SequenceChunk> batch, const std::vector<ChunkRows<State>>& chunks,
                                   ForwardOutput* out) {
  out->first_row.assign(batch.size(), 0);
  out->num_rows.assign(batch.size(), 0);
  std::vector<int64_t> wanted;
  for (size_t ci = 0; ci < batch.size(); ++ci) {
    const ChunkRows<State>& chunk = chunks[ci];
    out->first_row[ci] = static_cast<int64_t>(wanted.size());
    switch (batch[ci].logits) {
      case LogitsWanted::kNone: break;
      case LogitsWanted::kLast: wanted.push_back(chunk.first_row + chunk.num_rows - 1); break;
      case LogitsWanted::kAll:
        for (int64_t i = 0; i < chunk.num_rows; ++i) wanted.push_back(chunk.first_row + i);
        break;
      case LogitsWanted::kRows:
        for (int32_t i : batch[ci].rows) wanted.push_back(chunk.first_row + i);
        break;
    }
    out->num_rows[ci] = static_cast<int64_t>(wanted.size()) - out->first_row[ci];
  }
  return wanted;
}

}  // namespace deepinfer::model
