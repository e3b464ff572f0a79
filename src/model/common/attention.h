// The attention pieces both DeepSeek families compute alike: the softmax with a per-head sink logit, and the
// grouped low-rank output projection. Which keys a query sees (window, compressed entries, selections) and
// how they are stored is the family's business.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/linear.h"
#include "model/common/block_weights.h"

namespace deepinfer::model {

// The keys (K = V) one query attends over, in their storage precision (fp32 or bf16), and the attention
// kernels over them.
class KeyList {
 public:
  explicit KeyList(bool bf16) : bf16_(bf16) {}
  void clear() {
    f32_.clear();
    bf16s_.clear();
  }
  // A stored entry of the list's precision.
  void push_back(const uint8_t* entry) {
    if (bf16_) bf16s_.push_back(reinterpret_cast<const uint16_t*>(entry));
    else f32_.push_back(reinterpret_cast<const float*>(entry));
  }
  // An fp32 key (fp32 lists only).
  void push_back(const float* key) { f32_.push_back(key); }
  int64_t size() const { return static_cast<int64_t>(bf16_ ? bf16s_.size() : f32_.size()); }
  // kernels::QueryKeyDots / WeightedKeySum over the list.
  void Dots(const float* q, int64_t heads, int64_t dim, float scale, float* out) const;
  void WeightedSum(const float* p, int64_t heads, int64_t dim, float* out) const;
  // kernels::QueryKeyDotsRows over the list's keys [first, first + count).
  void DotsRows(const float* q, int64_t q_stride, int64_t queries, int64_t first, int64_t count, int64_t dim,
                float scale, float* out, int64_t out_stride) const;
  // kernels::WeightedKeySumRows over the list's keys [first, first + count).
  void WeightedSumRows(const float* p, int64_t p_stride, int64_t queries, int64_t first, int64_t count, int64_t dim,
                       float* out, int64_t out_stride, bool accumulate) const;

 private:
  bool bf16_;
  std::vector<const float*> f32_;
  std::vector<const uint16_t*> bf16s_;
};

// One query row's attention: q [heads, head_dim] against `keys` (scaled dots), the sink softmax (`logits` is
// scratch), the weighted sum into o [heads, head_dim], then the inverse RoPE of o's trailing rope_dim
// channels at the row's angles (cos, sin: rope_dim / 2 each).
void AttendRow(const float* q, const KeyList& keys, const float* sinks, int64_t heads, int64_t head_dim,
               int64_t rope_dim, float scale, const float* cos, const float* sin, std::vector<float>* logits,
               float* o);

// Every row's AttendRow with 1/sqrt(head_dim) scaling: q [n, heads, head_dim], the rows' RoPE angles cos, sin
// [n, rope_dim / 2], keys gathered per row by gather(i, keys) into an fp32 KeyList; o [n, heads, head_dim].
// Rows are shared among the pool's threads (each row's result depends only on its keys).
template <class Gather>
void AttendRows(ThreadPool& pool, int64_t n, const float* q, const float* sinks, int64_t heads, int64_t head_dim,
                int64_t rope_dim, const float* cos, const float* sin, const Gather& gather, float* o) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const int64_t half = rope_dim / 2, width = heads * head_dim;
  pool.ParallelFor(n, [&](int64_t begin, int64_t end) {
    KeyList keys(/*bf16=*/false);
    std::vector<float> logits;
    for (int64_t i = begin; i < end; ++i) {
      keys.clear();
      gather(i, keys);
      AttendRow(q + i * width, keys, sinks, heads, head_dim, rope_dim, scale, cos + i * half, sin + i * half, &logits,
                o + i * width);
    }
  }, 1);
}

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
