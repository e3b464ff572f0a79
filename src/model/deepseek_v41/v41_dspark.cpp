// DSpark draft layers (models.md §3.7, §4; not in the reference): a block of dspark_block_size positions —
// the anchor token, then the noise token — runs once through the window-only draft layers, whose keys are
// the block's own plus the context: the target layers' attention inputs (mean over the streams) at the
// previous positions, concatenated, projected by main_proj and normalised, then each draft layer's wkv.
// Block positions attend to each other in both directions. Step k of drafting then returns the block's
// base logits at row k plus the Markov head's bias of the token just consumed:
// logits_k = head(norm(h_k)) + W2·W1[x_k] (semi-autoregressive: one block forward, then one head per step).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/attention.h"
#include "kernels/elementwise.h"
#include "kernels/kv_quant.h"
#include "kernels/linear.h"
#include "kernels/number_formats.h"
#include "model/common/attention.h"
#include "model/deepseek_v41/v41_dspark.h"
#include "model/step_profile.h"

namespace deepinfer::model::v41 {
namespace {

// kv = rope(kv_norm(wkv(x))) at each row's position, FP8-quantized as a window entry (stored in `stored`,
// [n, window_bytes], and dequantized back into kv).
void WindowKv(const Step& step, const V41AttentionWeights& w, const float* x, int64_t n, const int64_t* positions,
              float* kv, uint8_t* stored) {
  const V41Config& c = *step.config;
  const int64_t d = c.hidden_size, hd = c.head_dim, rd = c.rope_dim, half = rd / 2;
  kernels::Linear(x, n, d, w.wkv, kv, hd, step.linear, step.pool);
  kernels::RmsNormRows(kv, hd, w.kv_norm.data(), static_cast<float>(c.rms_norm_eps), n, hd, kv, hd);
  ForRows(*step.pool, n, [&](int64_t i) {
    float cos[256], sin[256];
    RopeAngles(*step.main_inv_freq, positions[i], cos, sin);
    float* k = kv + i * hd;
    kernels::ApplyRope(k, 1, hd, hd - rd, rd, cos, sin, kernels::RopeLayout::kInterleaved);
    (void)half;
    uint8_t* s = stored + i * step.layout->window_bytes;
    kernels::KvQuantize(step.layout->window_format, k, hd, s);
    kernels::KvDequantize(step.layout->window_format, s, hd, k);
  });
}

// A draft layer's attention over its block rows (x [n, d], γ rows per chunk) and each chunk's context window.
void DraftAttention(Step& step, int64_t k, const float* x, float* out) {
  const V41Config& c = *step.config;
  const V41BlockWeights& blockw = step.weights->dspark->layers[k];
  const V41AttentionWeights& w = blockw.attention;
  const int64_t n = step.num_rows(), d = c.hidden_size, h = c.num_heads, hd = c.head_dim, rd = c.rope_dim;
  const int64_t ql = c.q_lora_rank, win = c.sliding_window, gamma = c.dspark.block_size, half = rd / 2;
  const float eps = static_cast<float>(c.rms_norm_eps);
  std::vector<float> qr(static_cast<size_t>(n * ql)), q(static_cast<size_t>(n * h * hd)), kv(static_cast<size_t>(n * hd));
  kernels::Linear(x, n, d, w.wq_a, qr.data(), ql, step.linear, step.pool);
  kernels::RmsNormRows(qr.data(), ql, w.q_norm.data(), eps, n, ql, qr.data(), ql);
  kernels::Linear(qr.data(), n, ql, w.wq_b, q.data(), h * hd, step.linear, step.pool);
  std::vector<int64_t> positions(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) positions[i] = step.rows[i].pos;
  std::vector<uint8_t> stored(static_cast<size_t>(n * step.layout->window_bytes));
  WindowKv(step, w, x, n, positions.data(), kv.data(), stored.data());
  std::vector<float> cos(static_cast<size_t>(n * half)), sin(static_cast<size_t>(n * half));
  ForRows(*step.pool, n, [&](int64_t i) {
    RopeAngles(*step.main_inv_freq, positions[i], cos.data() + i * half, sin.data() + i * half);
    kernels::ApplyRope(q.data() + i * h * hd, h, hd, hd - rd, rd, cos.data() + i * half, sin.data() + i * half,
                       kernels::RopeLayout::kInterleaved);
  });
  // Each chunk's context window: the last win − γ positions before the block, decoded once.
  std::vector<std::vector<float>> context(step.chunks.size());
  std::vector<int64_t> context_first(step.chunks.size());
  for (size_t ci = 0; ci < step.chunks.size(); ++ci) {
    const ChunkRows& chunk = step.chunks[ci];
    const V41SequenceState& state = *chunk.state;
    const int64_t first = std::max({int64_t{0}, chunk.start_pos - (win - gamma), state.window_floor, state.floor});
    context_first[ci] = first;
    context[ci].resize(static_cast<size_t>(std::max<int64_t>(0, chunk.start_pos - first) * hd));
    for (int64_t t = first; t < chunk.start_pos; ++t)
      kernels::KvDequantize(step.layout->window_format,
                            state.draft_kv[k].data() + (t % state.draft_capacity) * step.layout->window_bytes, hd,
                            context[ci].data() + (t - first) * hd);
  }
  // Each row sees its chunk's context window and the whole draft block.
  std::vector<float> o(static_cast<size_t>(n * h * hd));
  auto gather = [&](int64_t i, KeyList& keys) {
    const int64_t ci = step.rows[i].chunk;
    const ChunkRows& chunk = step.chunks[ci];
    for (int64_t t = context_first[ci]; t < chunk.start_pos; ++t)
      keys.push_back(context[ci].data() + (t - context_first[ci]) * hd);
    for (int64_t j = 0; j < chunk.num_rows; ++j) keys.push_back(kv.data() + (chunk.first_row + j) * hd);
  };
  AttendRows(*step.pool, n, q.data(), w.sink.data(), h, hd, rd, cos.data(), sin.data(), gather, o.data());
  GroupedOutputProjection(w, BlockShape::Of(c), o.data(), n, step.linear, *step.pool, out);
}

}  // namespace

void StoreDraftContext(Step& step, const float* target_inputs) {
  const V41Config& c = *step.config;
  const V41DsparkWeights& ds = *step.weights->dspark;
  const int64_t n = step.num_rows(), d = c.hidden_size;
  const int64_t targets = static_cast<int64_t>(c.dspark.target_layer_ids.size());
  std::vector<float> ctx(static_cast<size_t>(n * d));
  kernels::Linear(target_inputs, n, targets * d, ds.main_proj, ctx.data(), d, step.linear, step.pool);
  kernels::RmsNormRows(ctx.data(), d, ds.main_norm.data(), static_cast<float>(c.rms_norm_eps), n, d, ctx.data(), d);
  std::vector<int64_t> positions(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) positions[i] = step.rows[i].pos;
  std::vector<float> kv(static_cast<size_t>(n * c.head_dim));
  std::vector<uint8_t> stored(static_cast<size_t>(n * step.layout->window_bytes));
  for (size_t k = 0; k < ds.layers.size(); ++k) {
    WindowKv(step, ds.layers[k].attention, ctx.data(), n, positions.data(), kv.data(), stored.data());
    for (int64_t i = 0; i < n; ++i) {
      V41SequenceState& state = *step.chunks[step.rows[i].chunk].state;
      std::memcpy(state.draft_kv[k].data() + (positions[i] % state.draft_capacity) * step.layout->window_bytes,
                  stored.data() + i * step.layout->window_bytes, static_cast<size_t>(step.layout->window_bytes));
    }
  }
}

void DraftBlock(Step& step) {
  ScopedPhase phase(Phase::kMtp);
  const V41Config& c = *step.config;
  const V41DsparkWeights& ds = *step.weights->dspark;
  const int64_t n = step.num_rows(), hc = c.hc_mult, d = c.hidden_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  std::vector<float> streams(static_cast<size_t>(n * hc * d));
  EmbedIntoStreams(*step.weights->embed, step.rows, hc, d, *step.pool, streams.data());
  std::vector<float> collapsed(static_cast<size_t>(n * d)), sub(collapsed.size());
  SinglePassMhc mhc(c, n);
  for (size_t k = 0; k < ds.layers.size(); ++k) {
    const V41BlockWeights& w = ds.layers[k];
    mhc.Collapse(w.attn_hc, streams.data(), collapsed.data(), *step.pool);
    kernels::RmsNormRows(collapsed.data(), d, w.attn_norm.data(), eps, n, d, collapsed.data(), d);
    DraftAttention(step, static_cast<int64_t>(k), collapsed.data(), sub.data());
    mhc.Expand(sub.data(), streams.data(), *step.pool);
    mhc.Collapse(w.ffn_hc, streams.data(), collapsed.data(), *step.pool);
    kernels::RmsNormRows(collapsed.data(), d, w.ffn_norm.data(), eps, n, d, collapsed.data(), d);
    // Draft layers are named after the backbone in the probe (layer num_layers + k).
    MoeBlock(step, w.moe, c.dspark.num_experts_per_tok, c.num_layers + static_cast<int64_t>(k), collapsed.data(),
             sub.data());
    mhc.Expand(sub.data(), streams.data(), *step.pool);
  }
  HcCollapse(HcShape::Of(c), mhc.pre_mix().data(), streams.data(), n, collapsed.data(), *step.pool);
  kernels::RmsNormRows(collapsed.data(), d, ds.norm.data(), eps, n, d, collapsed.data(), d);
  for (const ChunkRows& chunk : step.chunks)
    chunk.state->draft_hidden.assign(collapsed.begin() + chunk.first_row * d,
                                     collapsed.begin() + (chunk.first_row + chunk.num_rows) * d);
}

float MarkovBias(const Step& step, int32_t token, const float* hidden, float* logits) {
  const V41Config& c = *step.config;
  const V41DsparkWeights& ds = *step.weights->dspark;
  const int64_t r = c.dspark.markov_rank, v = c.vocab_size;
  std::vector<float> embed(static_cast<size_t>(r)), bias(static_cast<size_t>(v));
  const uint8_t* row = ds.markov_embed->data + static_cast<int64_t>(token) * r * (ds.markov_embed->dtype == DType::kF32 ? 4 : 2);
  for (int64_t i = 0; i < r; ++i) {
    if (ds.markov_embed->dtype == DType::kF32) {
      std::memcpy(&embed[i], row + 4 * i, 4);
    } else {
      uint16_t bits;
      std::memcpy(&bits, row + 2 * i, 2);
      embed[i] = kernels::Bf16ToFloat(bits);
    }
  }
  kernels::Linear(embed.data(), 1, r, ds.markov_head, bias.data(), v, step.linear, step.pool);
  for (int64_t i = 0; i < v; ++i) logits[i] += bias[i];
  const int64_t d = c.hidden_size;
  double z = 0;
  for (int64_t i = 0; i < d; ++i) z += static_cast<double>(ds.confidence[static_cast<size_t>(i)]) * hidden[i];
  for (int64_t i = 0; i < r; ++i) z += static_cast<double>(ds.confidence[static_cast<size_t>(d + i)]) * embed[i];
  return static_cast<float>(1.0 / (1.0 + std::exp(-z)));
}

}  // namespace deepinfer::model::v41
