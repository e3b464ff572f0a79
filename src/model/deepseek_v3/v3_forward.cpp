// The DeepSeek-V3 forward pass: pre-norm blocks of absorbed-form MLA and a dense SwiGLU MLP or the grouped
// sigmoid-routed MoE with shared experts, then the final norm and lm_head.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/elementwise.h"
#include "kernels/linear.h"
#include "kernels/number_formats.h"
#include "model/common/attention.h"
#include "model/common/checkpoint_binder.h"
#include "model/common/forward_batch.h"
#include "model/common/moe.h"
#include "model/common/rotary.h"
#include "model/common/row_parallel.h"
#include "model/deepseek_v3/v3_model.h"
#include "model/step_profile.h"

namespace deepinfer::model {
namespace v3 {

using Chunk = ChunkRows<V3SequenceState>;

struct Step : StepBase<V3SequenceState> {
  const V3Config* config = nullptr;
  const V3Weights* weights = nullptr;
  bool kv_bf16 = false;
  int64_t layer_bytes = 0;  // one layer's entries in a block
};

// The cache entry (latent_width values) of `layer` at `pos` of the chunk's sequence.
uint8_t* Entry(const Step& step, const Chunk& chunk, int64_t layer, int64_t pos) {
  const int32_t block = chunk.state->block_table(0)[pos / kvcache::kBlockTokens];
  const int64_t bytes = (step.kv_bf16 ? 2 : 4) * step.config->latent_width();
  return step.pools->group(0).block(block) + layer * step.layer_bytes + (pos % kvcache::kBlockTokens) * bytes;
}

void Attention(const Step& step, int64_t layer, const float* x, float* out) {
  const V3Config& c = *step.config;
  const V3AttentionWeights& w = step.weights->layers[layer].attention;
  const int64_t n = step.num_rows(), d = c.hidden_size, h = c.num_heads, hd = c.head_dim, rd = c.rope_dim;
  const int64_t nope = c.qk_nope_head_dim, r = c.kv_lora_rank, lw = c.latent_width(), vd = c.v_head_dim;
  const int64_t half = rd / 2, ql = c.q_lora_rank;
  const float eps = static_cast<float>(c.rms_norm_eps);

  ScopedPhase phase(Phase::kAttnProjections);
  std::vector<float> q(static_cast<size_t>(n * h * hd)), latent(static_cast<size_t>(n * lw)), qa;
  if (ql > 0) {
    qa.resize(static_cast<size_t>(n * ql));
    RunLinearTasks({{x, n, d, &w.q_a, qa.data(), ql}, {x, n, d, &w.kv_a, latent.data(), lw}}, step.linear, *step.pool);
    kernels::RmsNormRows(qa.data(), ql, w.q_a_norm.data(), eps, n, ql, qa.data(), ql);
    kernels::Linear(qa.data(), n, ql, w.q_b, q.data(), h * hd, step.linear, step.pool);
  } else {
    RunLinearTasks({{x, n, d, &w.q_proj, q.data(), h * hd}, {x, n, d, &w.kv_a, latent.data(), lw}}, step.linear,
                   *step.pool);
  }
  kernels::RmsNormRows(latent.data(), lw, w.kv_a_norm.data(), eps, n, r, latent.data(), lw);
  std::vector<float> cos(static_cast<size_t>(half)), sin(static_cast<size_t>(half));
  for (int64_t i = 0; i < n; ++i) {
    RopeAngles(*step.main_inv_freq, step.rows[i].pos, cos.data(), sin.data());
    if (c.rope_attention_factor != 1.0f) {
      for (int64_t j = 0; j < half; ++j) {
        cos[j] *= c.rope_attention_factor;
        sin[j] *= c.rope_attention_factor;
      }
    }
    kernels::ApplyRope(q.data() + i * h * hd, h, hd, nope, rd, cos.data(), sin.data(),
                       kernels::RopeLayout::kInterleaved);
    kernels::ApplyRope(latent.data() + i * lw, 1, lw, r, rd, cos.data(), sin.data(), kernels::RopeLayout::kInterleaved);
  }
  // The query in latent space per head: [q_nope · W_UK | q_rope].
  std::vector<float> qt(static_cast<size_t>(n * h * lw));
  std::vector<LinearTask> tasks;
  for (int64_t head = 0; head < h; ++head)
    tasks.push_back({q.data() + head * hd, n, h * hd, &w.uk_t[head], qt.data() + head * lw, h * lw});
  RunLinearTasks(tasks, step.linear, *step.pool);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t head = 0; head < h; ++head)
      std::copy_n(q.data() + (i * h + head) * hd + nope, rd, qt.data() + (i * h + head) * lw + r);

  phase.Switch(Phase::kAttend);
  // The chunk's entries go to the blocks first, so that every key is read from where later steps read it
  // (a state-only chunk's are there already, in shared blocks it may not write).
  for (const Chunk& chunk : step.chunks) {
    if (chunk.state_only) continue;
    for (int64_t i = 0; i < chunk.num_rows; ++i) {
      uint8_t* dst = Entry(step, chunk, layer, chunk.start_pos + i);
      const float* src = latent.data() + (chunk.first_row + i) * lw;
      if (step.kv_bf16) kernels::FloatToBf16(src, reinterpret_cast<uint16_t*>(dst), lw);
      else std::memcpy(dst, src, static_cast<size_t>(lw) * sizeof(float));
    }
  }
  std::vector<float> ol(static_cast<size_t>(n * h * lw));
  auto attend = [&](int64_t begin, int64_t end) {
    KeyList keys(step.kv_bf16);
    std::vector<float> logits;
    for (int64_t i = begin; i < end; ++i) {
      const Row& row = step.rows[i];
      const Chunk& chunk = step.chunks[row.chunk];
      keys.clear();
      for (int64_t t = 0; t <= row.pos; ++t) keys.push_back(Entry(step, chunk, layer, t));
      const int64_t nk = keys.size();
      logits.resize(static_cast<size_t>(h * nk));
      keys.Dots(qt.data() + i * h * lw, h, lw, c.softmax_scale, logits.data());
      for (int64_t head = 0; head < h; ++head) kernels::Softmax(logits.data() + head * nk, nk);
      keys.WeightedSum(logits.data(), h, lw, ol.data() + i * h * lw);
    }
  };
  if (n == 1) attend(0, 1);
  else step.pool->ParallelFor(n, attend, 1);

  phase.Switch(Phase::kAttnOutput);
  // Each head's latent output (its first kv_lora_rank values) back through W_UV, then o_proj.
  std::vector<float> o(static_cast<size_t>(n * h * vd));
  tasks.clear();
  for (int64_t head = 0; head < h; ++head)
    tasks.push_back({ol.data() + head * lw, n, h * lw, &w.uv[head], o.data() + head * vd, h * vd});
  RunLinearTasks(tasks, step.linear, *step.pool);
  kernels::Linear(o.data(), n, h * vd, w.o_proj, out, d, step.linear, step.pool);
}

// Grouped sigmoid routing: the top topk_group groups by the sum of their two best biased scores, then the
// top experts by biased score inside them; weights from the unbiased scores.
struct RouteScratch {
  std::vector<float> scores, biased, group_scores, top2;
  std::vector<int32_t> kept, top2_index;
  std::vector<char> keep;
};

void Route(const V3Config& c, const float* logits, const float* bias, RouteScratch& s, int32_t* chosen,
           float* weights) {
  const int64_t e = c.n_routed_experts, k = c.num_experts_per_tok, groups = c.n_group, per = e / groups;
  s.scores.resize(e);
  s.biased.resize(e);
  for (int64_t j = 0; j < e; ++j) {
    s.scores[j] = RouterScore("sigmoid", logits[j]);
    s.biased[j] = s.scores[j] + bias[j];
  }
  if (groups > 1) {
    s.group_scores.resize(groups);
    s.top2.resize(2);
    s.top2_index.resize(2);
    s.kept.resize(c.topk_group);
    for (int64_t g = 0; g < groups; ++g) {
      kernels::TopK(s.biased.data() + g * per, per, 2, s.top2_index.data(), s.top2.data());
      s.group_scores[g] = s.top2[0] + s.top2[1];
    }
    kernels::TopK(s.group_scores.data(), groups, c.topk_group, s.kept.data(), nullptr);
    s.keep.assign(groups, 0);
    for (int32_t g : s.kept) s.keep[g] = 1;
    for (int64_t j = 0; j < e; ++j)
      if (!s.keep[j / per]) s.biased[j] = -INFINITY;
  }
  kernels::TopK(s.biased.data(), e, k, chosen, nullptr);
  RoutingWeights(s.scores.data(), chosen, k, c.norm_topk_prob, static_cast<float>(c.routed_scaling_factor), weights);
}

void Mlp(const Step& step, int64_t layer, const float* x, float* out) {
  const V3Config& c = *step.config;
  const V3LayerWeights& w = step.weights->layers[layer];
  const int64_t n = step.num_rows(), d = c.hidden_size;
  const ExpertDispatch dispatch{0.0f, RoutingWeightAt::kCombine, step.linear};
  ScopedPhase phase(Phase::kMoeGate);
  if (!w.moe) {
    // The dense MLP is the dispatch's always-on expert with no routed ones.
    ExpertSetWeights dense;
    dense.shared = w.dense;
    DispatchExperts(dense, dispatch, x, n, d, nullptr, nullptr, 0, *step.pool, phase, out);
    return;
  }
  const int64_t e = c.n_routed_experts, k = c.num_experts_per_tok;
  std::vector<float> logits(static_cast<size_t>(n * e));
  kernels::Linear(x, n, d, w.experts.gate, logits.data(), e, step.linear, step.pool);
  std::vector<int32_t> chosen(static_cast<size_t>(n * k));
  std::vector<float> weights(static_cast<size_t>(n * k));
  ForRowRanges(*step.pool, n, [&](int64_t begin, int64_t end) {
    RouteScratch scratch;
    for (int64_t i = begin; i < end; ++i)
      Route(c, logits.data() + i * e, w.gate_bias.data(), scratch, chosen.data() + i * k, weights.data() + i * k);
  });
  DispatchExperts(w.experts, dispatch, x, n, d, chosen.data(), weights.data(), k, *step.pool, phase, out);
}

void Block(const Step& step, int64_t layer, float* hidden) {
  const V3Config& c = *step.config;
  const V3LayerWeights& w = step.weights->layers[layer];
  const int64_t n = step.num_rows(), d = c.hidden_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  std::vector<float> x(static_cast<size_t>(n * d)), y(static_cast<size_t>(n * d));
  kernels::RmsNormRows(hidden, d, w.input_norm.data(), eps, n, d, x.data(), d);
  Attention(step, layer, x.data(), y.data());
  for (int64_t i = 0; i < n * d; ++i) hidden[i] += y[i];
  kernels::RmsNormRows(hidden, d, w.post_attention_norm.data(), eps, n, d, x.data(), d);
  Mlp(step, layer, x.data(), y.data());
  for (int64_t i = 0; i < n * d; ++i) hidden[i] += y[i];
}

}  // namespace v3

Status V3Model::Forward(std::span<const SequenceChunk> batch, kvcache::KvPools& pools, ForwardOutput* out) {
  const V3Config& c = config_;
  ResetForwardOutput(c.vocab_size, info_.hidden_width, out);
  if (batch.empty()) return Status::Ok();
  v3::Step step;
  InitStep(pool_, &pools, &inv_freq_, &inv_freq_, precision_, &step);
  step.config = &c;
  step.weights = weights_.get();
  step.kv_bf16 = kv_bf16_;
  step.layer_bytes = layer_block_bytes_;
  bool want_hidden = false;
  DI_RETURN_IF_ERROR(LayOutBatch(batch, BatchRules{this, c.vocab_size, c.max_position_embeddings, false}, spec_, pools,
                                 &step, &want_hidden));
  const int64_t n = step.num_rows(), d = c.hidden_size;
  std::vector<float> hidden(static_cast<size_t>(n * d));
  {
    ScopedPhase phase(Phase::kEmbed);
    ForRows(*step.pool, n,
            [&](int64_t i) { EmbeddingRow(*weights_->embed, step.rows[i].token, d, hidden.data() + i * d); });
  }
  for (int64_t l = 0; l < c.num_layers; ++l) v3::Block(step, l, hidden.data());

  const std::vector<int64_t> wanted = PickLogitRows(batch, step.chunks, out);
  const int64_t m = static_cast<int64_t>(wanted.size());
  std::vector<float> picked(static_cast<size_t>(m * d));
  for (int64_t r = 0; r < m; ++r)
    std::copy(hidden.data() + wanted[r] * d, hidden.data() + (wanted[r] + 1) * d, picked.data() + r * d);
  if (want_hidden) out->hidden.assign(picked.begin(), picked.end());
  {
    ScopedPhase phase(Phase::kHead);
    kernels::RmsNormRows(picked.data(), d, weights_->norm.data(), static_cast<float>(c.rms_norm_eps), m, d,
                         picked.data(), d);
    out->logits.resize(static_cast<size_t>(m * c.vocab_size));
    kernels::Linear(picked.data(), m, d, weights_->head, out->logits.data(), c.vocab_size, step.linear, step.pool);
  }
  for (size_t ci = 0; ci < batch.size(); ++ci) {
    auto* state = static_cast<V3SequenceState*>(batch[ci].state);
    state->SetPosition(state->num_tokens() + static_cast<int64_t>(batch[ci].tokens.size()));
  }
  return Status::Ok();
}

}  // namespace deepinfer::model
