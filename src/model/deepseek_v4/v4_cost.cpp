// What a DeepSeek-V4 step costs: FLOPs of the matrix products, attention and indexer scoring, weight bytes
// read (every dense weight once per step, the expected number of distinct routed experts the step's tokens
// touch), and KV bytes read by attention. For the scheduler's cost model and `deepinfer bench model`.
#include <algorithm>
#include <cmath>

#include "kernels/linear.h"
#include "model/deepseek_v4/v4_model.h"

namespace deepinfer::model {
namespace {

double Bytes(const kernels::WeightView& w) { return static_cast<double>(kernels::WeightBytes(w)); }
double Macs(const kernels::WeightView& w) { return static_cast<double>(w.out_features) * w.in_features; }

// Keys one query at position p reads in a layer, and the indexer keys it scores.
struct Visible {
  int64_t keys = 0, index_keys = 0;
};
Visible VisibleAt(const V4Config& c, int64_t layer, int64_t p) {
  Visible v;
  v.keys = std::min(p + 1, c.sliding_window);
  const int64_t r = c.compress_ratios[layer];
  if (r == 0) return v;
  const int64_t count = (p + 1) / r;
  if (c.attention_types[layer] == V4AttentionType::kCsa) {
    v.index_keys = count;
    v.keys += std::min(count, c.index_topk);
  } else {
    v.keys += count;
  }
  return v;
}

}  // namespace

void V4Model::ComputeCostFigures() {
  const V4Config& c = config_;
  CostFigures& f = cost_;
  f = CostFigures{};
  f.dense_bytes = Bytes(weights_->head);
  for (const V4BlockWeights& b : weights_->layers) {
    const V4AttentionWeights& a = b.attention;
    f.dense_bytes += Bytes(a.wq_a) + Bytes(a.wq_b) + Bytes(a.wkv) + Bytes(a.wo_b);
    f.token_macs += Macs(a.wq_a) + Macs(a.wq_b) + Macs(a.wkv) + Macs(a.wo_b) + Macs(b.moe.gate);
    for (const kernels::WeightView& g : a.wo_a_groups) {
      f.dense_bytes += Bytes(g);
      f.token_macs += Macs(g);
    }
    if (a.compressor) {
      f.dense_bytes += Bytes(a.compressor->wkv) + Bytes(a.compressor->wgate);
      f.token_macs += Macs(a.compressor->wkv) + Macs(a.compressor->wgate);
    }
    if (a.indexer) {
      f.dense_bytes += Bytes(a.indexer->wq_b) + Bytes(a.indexer->weights_proj) + Bytes(a.indexer->compressor.wkv) +
                       Bytes(a.indexer->compressor.wgate);
      f.token_macs += Macs(a.indexer->wq_b) + Macs(a.indexer->weights_proj) + Macs(a.indexer->compressor.wkv) +
                      Macs(a.indexer->compressor.wgate);
    }
    f.dense_bytes += Bytes(b.moe.gate) + Bytes(b.moe.shared.w1) + Bytes(b.moe.shared.w2) + Bytes(b.moe.shared.w3);
    f.dense_bytes += static_cast<double>(b.attn_hc.fn.size() + b.ffn_hc.fn.size()) * 4;
    const ExpertWeights& e = b.moe.experts[0];
    f.expert_bytes += Bytes(e.w1) + Bytes(e.w2) + Bytes(e.w3);
    f.token_macs += (c.num_experts_per_tok + 1) * (Macs(e.w1) + Macs(e.w2) + Macs(e.w3));
    f.token_macs += Macs(b.attn_hc.fn_view) + Macs(b.ffn_hc.fn_view);
  }
  f.embed_row_bytes = static_cast<double>(weights_->embed->nbytes()) / static_cast<double>(c.vocab_size);
}

Result<StepCost> V4Model::EstimateStepCost(std::span<const ChunkShape> chunks) const {
  const V4Config& c = config_;
  const double kv_element = spec_.groups.empty() || spec_.groups[0].element == kvcache::CacheElement::kF32 ? 4.0 : 2.0;
  StepCost cost;
  int64_t tokens = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const ChunkShape& ch = chunks[i];
    if (ch.start < 0 || ch.tokens < 0 || ch.logits_rows < 0 || ch.logits_rows > ch.tokens)
      return Status::InvalidArgument("EstimateStepCost: chunk " + std::to_string(i) + " has start " +
                                     std::to_string(ch.start) + ", " + std::to_string(ch.tokens) + " tokens and " +
                                     std::to_string(ch.logits_rows) + " logits rows");
    tokens += ch.tokens;
    double macs = static_cast<double>(ch.tokens) * cost_.token_macs + static_cast<double>(ch.logits_rows) *
                                                                          c.vocab_size * c.hidden_size;
    for (int64_t p = ch.start; p < ch.start + ch.tokens; ++p) {
      for (int64_t l = 0; l < c.num_layers; ++l) {
        const Visible v = VisibleAt(c, l, p);
        macs += 2.0 * c.num_heads * v.keys * c.head_dim + static_cast<double>(c.index_n_heads) * v.index_keys * c.index_head_dim;
        cost.kv_bytes += kv_element * (static_cast<double>(v.keys) * c.head_dim + static_cast<double>(v.index_keys) * c.index_head_dim);
      }
    }
    cost.flops += 2 * macs;
  }
  if (tokens == 0) return cost;
  // Each token picks experts_per_tok of n experts; a step of T tokens touches n·(1 − (1 − k/n)^T) distinct
  // ones per layer on average (independent uniform choices).
  const double k = static_cast<double>(c.num_experts_per_tok), e = static_cast<double>(c.n_routed_experts);
  const double distinct = e * (1.0 - std::pow(1.0 - k / e, static_cast<double>(tokens)));
  cost.weight_bytes = cost_.dense_bytes + distinct * cost_.expert_bytes + tokens * cost_.embed_row_bytes;
  return cost;
}

}  // namespace deepinfer::model
