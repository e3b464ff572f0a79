// The attention pieces both DeepSeek families compute alike: the softmax with a per-head sink logit, and the
// grouped low-rank output projection. Which keys a query sees (window, compressed entries, selections) and
// how they are stored is the family's business.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/thread_pool.h"
#include "kernels/linear.h"
#include "model/common/block_weights.h"

namespace deepinfer::model {

// logits [heads, nk] ← softmax over each head's keys and its sink logit `sinks[head]`, which only enlarges
// the denominator.
void SinkSoftmax(const float* sinks, int64_t heads, int64_t nk, float* logits);

// The compressors' gated pooling: Σ_s v[s] · softmax(g)[s] over `slots` positions, in fp32 in a fixed order
// (g is overwritten with exp(g − max)).
inline float GatedPool(const float* v, float* g, int64_t slots) {
  float mx = -INFINITY;
  for (int64_t s = 0; s < slots; ++s) mx = std::max(mx, g[s]);
  float sum = 0;
  for (int64_t s = 0; s < slots; ++s) sum += g[s] = std::exp(g[s] - mx);
  float acc = 0;
  for (int64_t s = 0; s < slots; ++s) acc += v[s] * (g[s] / sum);
  return acc;
}

// out [n, hidden] = wo_b · (per group g: wo_a_g · o[:, g-th heads·head_dim / o_groups slice]) for the
// attention output o [n, heads · head_dim].
void GroupedOutputProjection(const AttentionProjections& w, const BlockShape& s, const float* o, int64_t n,
                             const kernels::LinearOptions& linear, ThreadPool& pool, float* out);

}  // namespace deepinfer::model
