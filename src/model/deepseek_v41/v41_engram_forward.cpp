// The Engram update before a block: each position's n-gram rows gathered from the memory-mapped table,
// projected by `wkv` into a key per stream and one shared value, and added to each stream through a gate
// on how well the stream matches its key (deepseek_v41 DeepseekV41Engram.forward).
#include <cmath>
#include <vector>

#include "kernels/linear.h"
#include "model/deepseek_v41/v41_internal.h"
#include "model/step_profile.h"

namespace deepinfer::model::v41 {

int64_t EngramSlot(const Step& step, const ChunkRows& chunk, int64_t pos) {
  const V41EngramHashing& hashing = *step.hashing;
  const V41SequenceState& state = *chunk.state;
  // Before the sequence's start (or before a restore without window state) n-gram slots take the padding id.
  if (pos < 0 || (pos < chunk.start_pos && pos < state.engram_floor)) return hashing.pad_slot;
  if (pos >= chunk.start_pos) return hashing.token_map[step.rows[chunk.first_row + pos - chunk.start_pos].token];
  return state.engram_ids[pos % state.engram_capacity];
}

void Engram(const Step& step, int64_t layer, float* streams) {
  ScopedPhase phase(Phase::kEngram);
  const V41Config& c = *step.config;
  const V41EngramHashing& hashing = *step.hashing;
  const V41EngramWeights& w = *step.weights->layers[layer].engram;
  const int64_t which = c.layers[layer].engram;
  const int64_t n = step.num_rows(), hc = c.hc_mult, d = c.hidden_size, cols = hashing.columns();
  const int64_t hd = w.table.head_dim, width = cols * hd, ngram = hashing.max_ngram;

  // The rows of every n-gram head, looked up in place.
  std::vector<float> gathered(static_cast<size_t>(n * width));
  ForRows(*step.pool, n, [&](int64_t i) {
    const Row& row = step.rows[i];
    const ChunkRows& chunk = step.chunks[row.chunk];
    thread_local std::vector<int64_t> slots, table_rows;
    slots.resize(static_cast<size_t>(ngram));
    table_rows.resize(static_cast<size_t>(cols));
    for (int64_t k = 0; k < ngram; ++k) slots[k] = EngramSlot(step, chunk, row.pos - k);
    hashing.Rows(which, slots.data(), table_rows.data());
    for (int64_t col = 0; col < cols; ++col) w.table.Row(table_rows[col], gathered.data() + i * width + col * hd);
  });
  std::vector<float> kv(static_cast<size_t>(n * (hc + 1) * d));
  kernels::Linear(gathered.data(), n, width, w.wkv, kv.data(), (hc + 1) * d, step.linear, step.pool);

  const float eps = static_cast<float>(c.rms_norm_eps);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  ForRows(*step.pool, n, [&](int64_t i) {
    const float* value = kv.data() + i * (hc + 1) * d + hc * d;
    for (int64_t k = 0; k < hc; ++k) {
      float* h = streams + (i * hc + k) * d;
      const float* key = kv.data() + i * (hc + 1) * d + k * d;
      const float* weight = w.weight.data() + k * d;
      double hh = 0, kk = 0;
      float dot = 0;
      for (int64_t e = 0; e < d; ++e) {
        hh += static_cast<double>(h[e]) * h[e];
        kk += static_cast<double>(key[e]) * key[e];
        dot += h[e] * weight[e] * key[e];
      }
      const float rstd = (1.0f / std::sqrt(static_cast<float>(hh / d) + eps)) *
                         (1.0f / std::sqrt(static_cast<float>(kk / d) + eps));
      const float x = dot * rstd * scale;
      // Signed square root before the sigmoid, as the training kernel does.
      const float root = std::copysign(std::sqrt(std::max(std::fabs(x), 1e-6f)), x);
      const float gate = 1.0f / (1.0f + std::exp(-root));
      for (int64_t e = 0; e < d; ++e) h[e] = h[e] + gate * value[e];
    }
  });
}

}  // namespace deepinfer::model::v41
