// V4 attention: low-rank queries with per-head RMS normalisation, one shared K=V latent per token, RoPE on
// the trailing channels, the sliding window plus (CSA) indexer-selected or (HCA) all compressed entries,
// a per-head sink in the softmax denominator, inverse RoPE on the output and the grouped output projection.
#include <cmath>
#include <optional>

#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/elementwise.h"
#include "kernels/linear.h"
#include "model/common/attention.h"
#include "model/deepseek_v4/v4_internal.h"
#include "model/step_profile.h"

namespace deepinfer::model::v4 {
namespace {

// Feeds one compressor's projections (kv, gate: [n, coff · head_dim]) through every sequence of the step,
// writing finished entries to the KV blocks (not for state-only chunks) and, at each block's last
// position, an overlapping compressor's boundary state to the window block.
void FeedCompressor(const Step& step, const BlockRef& block, const V4CompressorWeights& w, const float* kv,
                    const float* gate, bool index_compressor) {
  const V4Config& c = *step.config;
  const int64_t width = (w.overlapping ? 2 : 1) * w.head_dim;
  const V4CacheLayout::Layer& where = step.layout->layers[block.layer];
  const int group = index_compressor ? where.index_group : where.kv_group;
  const int64_t offset = index_compressor ? where.index_offset : where.kv_offset;
  const int64_t boundary = index_compressor ? where.index_boundary_offset : where.kv_boundary_offset;
  auto feed = [&](int64_t begin, int64_t end) {
    std::vector<float> entry(w.head_dim);
    for (int64_t ci = begin; ci < end; ++ci) {
      const ChunkRows& chunk = step.chunks[ci];
      V4LayerState& ls = LayerState(chunk, block);
      V4CompressorState& state = index_compressor ? ls.index_compressor : ls.compressor;
      for (int64_t i = chunk.first_row; i < chunk.first_row + chunk.num_rows; ++i) {
        const int64_t pos = step.rows[i].pos;
        if (CompressorFeed(w, *step.compress_inv_freq, static_cast<float>(c.rms_norm_eps), state,
                           chunk.state->compress_floor, pos, kv + i * width, gate + i * width,
                           chunk.state_only ? nullptr : entry.data()) &&
            !chunk.state_only) {
          StoreEntry(step, CompressedEntry(step, chunk, group, w.ratio, offset, w.head_dim, pos / w.ratio),
                     entry.data(), w.head_dim);
        }
        if (boundary >= 0 && (pos + 1) % kvcache::kBlockTokens == 0)
          SaveCompressorBoundary(
              w, state, pos + 1,
              reinterpret_cast<float*>(WindowBlock(step, chunk, pos / kvcache::kBlockTokens) + boundary));
      }
    }
  };
  const int64_t chunks = static_cast<int64_t>(step.chunks.size());
  if (chunks == 1) feed(0, 1);
  else step.pool->ParallelFor(chunks, feed, 1);
}

}  // namespace

void Attention(const Step& step, const BlockRef& block, const float* x, float* out) {
  const V4Config& c = *step.config;
  const V4AttentionWeights& w = block.weights->attention;
  const int64_t n = step.num_rows(), d = c.hidden_size, h = c.num_heads, hd = c.head_dim, rd = c.rope_dim;
  const int64_t win = c.sliding_window, ql = c.q_lora_rank;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const std::vector<float>& inv_freq =
      block.type == V4AttentionType::kSliding ? *step.main_inv_freq : *step.compress_inv_freq;
  const int64_t half = rd / 2;

  // Every projection of x, then those of the normalised low-rank query.
  const bool csa = block.type == V4AttentionType::kCsa;
  const int64_t ih = c.index_n_heads, ihd = c.index_head_dim;
  ScopedPhase phase(Phase::kAttnProjections);
  std::vector<float> qr(static_cast<size_t>(n * ql)), q(static_cast<size_t>(n * h * hd)), kv(static_cast<size_t>(n * hd));
  std::vector<float> ckv, cgate, ikv, igate, iq, iw;
  std::vector<LinearTask> tasks = {{x, n, d, &w.wq_a, qr.data(), ql}, {x, n, d, &w.wkv, kv.data(), hd}};
  if (w.compressor) {
    const int64_t width = (w.compressor->overlapping ? 2 : 1) * hd;
    ckv.resize(static_cast<size_t>(n * width));
    cgate.resize(static_cast<size_t>(n * width));
    tasks.push_back({x, n, d, &w.compressor->wkv, ckv.data(), width});
    tasks.push_back({x, n, d, &w.compressor->wgate, cgate.data(), width});
  }
  if (csa) {
    ikv.resize(static_cast<size_t>(n * 2 * ihd));
    igate.resize(static_cast<size_t>(n * 2 * ihd));
    iq.resize(static_cast<size_t>(n * ih * ihd));
    iw.resize(static_cast<size_t>(n * ih));
    tasks.push_back({x, n, d, &w.indexer->compressor.wkv, ikv.data(), 2 * ihd});
    tasks.push_back({x, n, d, &w.indexer->compressor.wgate, igate.data(), 2 * ihd});
    tasks.push_back({x, n, d, &w.indexer->weights_proj, iw.data(), ih});
  }
  RunLinearTasks(tasks, step.linear, *step.pool);
  kernels::RmsNormRows(qr.data(), ql, w.q_norm.data(), eps, n, ql, qr.data(), ql);
  tasks = {{qr.data(), n, ql, &w.wq_b, q.data(), h * hd}};
  if (csa) tasks.push_back({qr.data(), n, ql, &w.indexer->wq_b, iq.data(), ih * ihd});
  RunLinearTasks(tasks, step.linear, *step.pool);
  kernels::RmsNormRows(kv.data(), hd, w.kv_norm.data(), eps, n, hd, kv.data(), hd);
  std::vector<float> cos(static_cast<size_t>(n * half)), sin(static_cast<size_t>(n * half));
  for (int64_t i = 0; i < n; ++i) {
    RopeAngles(inv_freq, step.rows[i].pos, cos.data() + i * half, sin.data() + i * half);
    float* qi = q.data() + i * h * hd;
    kernels::RmsNormRows(qi, hd, nullptr, eps, h, hd, qi, hd);
    kernels::ApplyRope(qi, h, hd, hd - rd, rd, cos.data() + i * half, sin.data() + i * half,
                       kernels::RopeLayout::kInterleaved);
    kernels::ApplyRope(kv.data() + i * hd, 1, hd, hd - rd, rd, cos.data() + i * half, sin.data() + i * half,
                       kernels::RopeLayout::kInterleaved);
  }

  phase.Switch(Phase::kAttnCompress);
  // Compressed entries first: a query sees the entries of every window complete at its position.
  const int64_t ratio = block.ratio;
  if (w.compressor) FeedCompressor(step, block, *w.compressor, ckv.data(), cgate.data(), false);
  if (csa) {
    FeedCompressor(step, block, w.indexer->compressor, ikv.data(), igate.data(), true);
    const float weight_scale = 1.0f / std::sqrt(static_cast<float>(ih));
    std::vector<float> icos(half), isin(half);
    for (int64_t i = 0; i < n; ++i) {
      RopeAngles(*step.compress_inv_freq, step.rows[i].pos, icos.data(), isin.data());
      kernels::ApplyRope(iq.data() + i * ih * ihd, ih, ihd, ihd - rd, rd, icos.data(), isin.data(),
                         kernels::RopeLayout::kInterleaved);
      for (int64_t j = 0; j < ih; ++j) iw[i * ih + j] *= weight_scale;
    }
  }

  phase.Switch(Phase::kAttend);
  // The chunk's K=V vectors go to the window blocks first, so that every key is read from where later
  // steps will read it. The MTP layer's entry of position p (made from the main model's state at p and the
  // token at p + 1) sits in the slot of position p + 1, inside the blocks the step writes anyway.
  const V4CacheLayout::Layer* where = block.mtp ? &step.layout->mtp : &step.layout->layers[block.layer];
  const int64_t shift = block.mtp ? 1 : 0;
  for (const ChunkRows& chunk : step.chunks) {
    for (int64_t i = 0; i < chunk.num_rows; ++i) {
      const float* src = kv.data() + (chunk.first_row + i) * hd;
      StoreEntry(step, WindowEntry(step, chunk, where->window_offset, chunk.start_pos + i + shift), src, hd);
    }
  }
  std::vector<float> o(static_cast<size_t>(n * h * hd));
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const float index_scale = csa ? 1.0f / std::sqrt(static_cast<float>(ihd)) : 0.0f;
  auto attend = [&](int64_t begin, int64_t end) {
    KeyList keys(step.kv_bf16), index_keys(step.kv_bf16);
    std::vector<float> logits, scores, dots;
    std::vector<int32_t> picked;
    for (int64_t i = begin; i < end; ++i) {
      const Row& row = step.rows[i];
      const ChunkRows& chunk = step.chunks[row.chunk];
      const int64_t p = row.pos;
      const int64_t floor = block.mtp ? chunk.state->mtp_floor : chunk.state->window_floor;
      keys.clear();
      for (int64_t t = std::max<int64_t>(floor, p - win + 1); t <= p; ++t)
        keys.push_back(WindowEntry(step, chunk, where->window_offset, t + shift));
      if (ratio > 0) {
        const int64_t count = (p + 1) / ratio;
        const int kv_group = where->kv_group;
        const int64_t kv_offset = where->kv_offset;
        if (!csa || count <= c.index_topk) {
          for (int64_t t = 0; t < count; ++t)
            keys.push_back(CompressedEntry(step, chunk, kv_group, ratio, kv_offset, hd, t));
        } else {
          const int index_group = where->index_group;
          const int64_t index_offset = where->index_offset;
          const float* qi = iq.data() + i * ih * ihd;
          const float* wi = iw.data() + i * ih;
          scores.assign(static_cast<size_t>(count), 0.0f);
          index_keys.clear();
          for (int64_t t = 0; t < count; ++t)
            index_keys.push_back(CompressedEntry(step, chunk, index_group, ratio, index_offset, ihd, t));
          dots.resize(static_cast<size_t>(ih * count));
          index_keys.Dots(qi, ih, ihd, 1.0f, dots.data());
          for (int64_t t = 0; t < count; ++t) {
            float acc = 0;
            for (int64_t j = 0; j < ih; ++j) acc += std::max(dots[j * count + t], 0.0f) * index_scale * wi[j];
            scores[t] = acc;
          }
          picked.resize(static_cast<size_t>(c.index_topk));
          kernels::TopK(scores.data(), count, c.index_topk, picked.data(), nullptr);
          for (int32_t t : picked) keys.push_back(CompressedEntry(step, chunk, kv_group, ratio, kv_offset, hd, t));
        }
      }
      AttendRow(q.data() + i * h * hd, keys, w.sink.data(), h, hd, rd, scale, cos.data() + i * half,
                sin.data() + i * half, &logits, o.data() + i * h * hd);
    }
  };
  if (n == 1) attend(0, 1);
  else step.pool->ParallelFor(n, attend, 1);

  phase.Switch(Phase::kAttnOutput);
  GroupedOutputProjection(w, BlockShape::Of(c), o.data(), n, step.linear, *step.pool, out);
}

}  // namespace deepinfer::model::v4
