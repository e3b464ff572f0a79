#include "model/common/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/attention.h"
#include "kernels/elementwise.h"
#include "model/common/row_parallel.h"

namespace deepinfer::model {

void KeyList::Dots(const float* q, int64_t heads, int64_t dim, float scale, float* out) const {
  if (bf16_) kernels::QueryKeyDots(q, heads, dim, bf16s_.data(), size(), scale, out);
  else kernels::QueryKeyDots(q, heads, dim, f32_.data(), size(), scale, out);
}

void KeyList::WeightedSum(const float* p, int64_t heads, int64_t dim, float* out) const {
  if (bf16_) kernels::WeightedKeySum(p, heads, bf16s_.data(), size(), dim, out);
  else kernels::WeightedKeySum(p, heads, f32_.data(), size(), dim, out);
}

void KeyList::DotsRows(const float* q, int64_t q_stride, int64_t queries, int64_t first, int64_t count, int64_t dim,
                       float scale, float* out, int64_t out_stride) const {
  if (bf16_)
    kernels::QueryKeyDotsRows(q, q_stride, queries, bf16s_.data() + first, count, dim, scale, out, out_stride);
  else kernels::QueryKeyDotsRows(q, q_stride, queries, f32_.data() + first, count, dim, scale, out, out_stride);
}

void KeyList::WeightedSumRows(const float* p, int64_t p_stride, int64_t queries, int64_t first, int64_t count,
                              int64_t dim, float* out, int64_t out_stride, bool accumulate) const {
  if (bf16_)
    kernels::WeightedKeySumRows(p, p_stride, queries, bf16s_.data() + first, count, dim, out, out_stride, accumulate);
  else kernels::WeightedKeySumRows(p, p_stride, queries, f32_.data() + first, count, dim, out, out_stride, accumulate);
}

void AttendRow(const float* q, const KeyList& keys, const float* sinks, int64_t heads, int64_t head_dim,
               int64_t rope_dim, float scale, const float* cos, const float* sin, std::vector<float>* logits,
               float* o) {
  const int64_t nk = keys.size();
  logits->resize(static_cast<size_t>(heads * nk));
  keys.Dots(q, heads, head_dim, scale, logits->data());
  SinkSoftmax(sinks, heads, nk, logits->data());
  keys.WeightedSum(logits->data(), heads, head_dim, o);
  kernels::ApplyRope(o, heads, head_dim, head_dim - rope_dim, rope_dim, cos, sin, kernels::RopeLayout::kInterleaved,
                     /*inverse=*/true);
}

void SinkSoftmax(const float* sinks, int64_t heads, int64_t nk, float* logits) {
  for (int64_t head = 0; head < heads; ++head) {
    float* l = logits + head * nk;
    const float sink = sinks[head];
    float mx = sink;
    for (int64_t t = 0; t < nk; ++t) mx = std::max(mx, l[t]);
    float den = std::exp(sink - mx);
    for (int64_t t = 0; t < nk; ++t) den += l[t] = std::exp(l[t] - mx);
    for (int64_t t = 0; t < nk; ++t) l[t] /= den;
  }
}

void GroupedOutputProjection(const AttentionProjections& w, const BlockShape& s, const float* o, int64_t n,
                             const kernels::LinearOptions& linear, ThreadPool& pool, float* out) {
  const int64_t h = s.heads, hd = s.head_dim, groups = s.o_groups, lr = s.o_lora_rank, group_in = h * hd / groups;
  std::vector<float> low(static_cast<size_t>(n * groups * lr));
  std::vector<LinearTask> tasks;
  for (int64_t g = 0; g < groups; ++g)
    tasks.push_back({o + g * group_in, n, h * hd, &w.wo_a_groups[g], low.data() + g * lr, groups * lr});
  RunLinearTasks(tasks, linear, pool);
  kernels::Linear(low.data(), n, groups * lr, w.wo_b, out, s.hidden, linear, &pool);
}

}  // namespace deepinfer::model
