// V4.1 attention: low-rank queries (no per-head norm), one K=V latent per token kept FP8 in the window, the
// shared compressed latents of the layer's KV source (FP4) selected by its group's latest index source,
// a per-head sink, inverse RoPE on the output and the grouped output projection. KV sources also run the
// compressor (pairs pooled with a softmax gate at ratio 2, every token at ratio 1) and publish indexer keys
// from the pre-RoPE latent; index sources score the keys with their own FP4 queries and publish a top-k,
// the candidate source first keeping its best blocks for the index sources after it.
#include <algorithm>
#include <cmath>
#include <optional>

#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/elementwise.h"
#include "kernels/kv_quant.h"
#include "kernels/linear.h"
#include "model/common/attention.h"
#include "model/deepseek_v41/v41_internal.h"
#include "model/step_profile.h"

namespace deepinfer::model::v41 {

namespace {

int64_t SourceRatio(const Step& step, int64_t source) {
  return step.config->compress_ratios[step.config->kv_source_layer_ids[source]];
}

uint8_t* GroupEntry(const Step& step, const ChunkRows& chunk, int group, int64_t offset, int64_t ratio,
                    int64_t bytes, int64_t index) {
  const int64_t per_block = kvcache::kBlockTokens / ratio;
  const int32_t block = chunk.state->block_table(group)[index / per_block];
  return step.pools->group(group).block(block) + offset + (index % per_block) * bytes;
}

}  // namespace

uint8_t* LatentEntry(const Step& step, const ChunkRows& chunk, int64_t source, int64_t index) {
  const V41CacheLayout::Source& s = step.layout->sources[source];
  return GroupEntry(step, chunk, s.latent_group, s.latent_offset, SourceRatio(step, source), step.layout->latent_bytes,
                    index);
}

uint8_t* KeyEntry(const Step& step, const ChunkRows& chunk, int64_t source, int64_t index) {
  const V41CacheLayout::Source& s = step.layout->sources[source];
  return GroupEntry(step, chunk, s.key_group, s.key_offset, SourceRatio(step, source), step.layout->key_bytes, index);
}

uint8_t* WindowEntry(const Step& step, const ChunkRows& chunk, int64_t layer, int64_t pos) {
  return GroupEntry(step, chunk, step.layout->window_group, step.layout->window_offset[layer], 1,
                    step.layout->window_bytes, pos);
}

int32_t* EngramIdSlot(const Step& step, const ChunkRows& chunk, int64_t pos) {
  return reinterpret_cast<int32_t*>(GroupEntry(step, chunk, step.layout->window_group, step.layout->ids_offset, 1, 4, pos));
}

namespace {

// Runs fn(i) for i < n on the pool (one item per hand-off), or inline for a single item.
template <class Fn>
void ForEach(ThreadPool& pool, int64_t n, const Fn& fn) {
  if (n == 1) return fn(int64_t{0});
  pool.ParallelFor(n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) fn(i);
  }, 1);
}

// A latent the compressor completed in this step: its chunk and latent index.
struct Emitted {
  int32_t chunk;
  int64_t index;
};

// Feeds the KV source's compressor with the step's projections (kv, gate: [n, head_dim]; gate unused at
// ratio 1) and returns the completed latents before RoPE ([m, head_dim], normalised) in `latents`. The raw
// projections of every row go into the sequence's ring, from which the open group is read.
std::vector<Emitted> Compress(Step& step, int64_t layer, const float* kv, const float* gate,
                              std::vector<float>* latents) {
  const V41Config& c = *step.config;
  const V41CompressorWeights& w = *step.weights->layers[layer].attention.compressor;
  const int64_t source = c.layers[layer].group, r = w.ratio, hd = c.head_dim;
  const float eps = static_cast<float>(c.rms_norm_eps);
  std::vector<std::vector<Emitted>> per_chunk(step.chunks.size());
  std::vector<std::vector<float>> per_chunk_latents(step.chunks.size());
  ForEach(*step.pool, static_cast<int64_t>(step.chunks.size()), [&](int64_t ci) {
    const ChunkRows& chunk = step.chunks[ci];
    V41SequenceState& state = *chunk.state;
    std::vector<float>& out = per_chunk_latents[ci];
    std::vector<float> latent(static_cast<size_t>(hd)), g(static_cast<size_t>(r)), v(static_cast<size_t>(r));
    for (int64_t i = chunk.first_row; i < chunk.first_row + chunk.num_rows; ++i) {
      const int64_t pos = step.rows[i].pos;
      if (r == 1) {
        std::copy(kv + i * hd, kv + (i + 1) * hd, latent.begin());
      } else {
        std::vector<float>& ring = state.compressor_rows[source];
        const int64_t cap = state.compressor_capacity;
        float* slot = ring.data() + (pos % cap) * 2 * hd;
        std::copy(kv + i * hd, kv + (i + 1) * hd, slot);
        std::copy(gate + i * hd, gate + (i + 1) * hd, slot + hd);
        if ((pos + 1) % r != 0) continue;
        // The group is complete: softmax over its r positions per channel (fp32), then the gated sum.
        const int64_t first = pos + 1 - r;
        for (int64_t ch = 0; ch < hd; ++ch) {
          for (int64_t s = 0; s < r; ++s) {
            const float* row = ring.data() + ((first + s) % cap) * 2 * hd;
            v[s] = row[ch];
            g[s] = row[hd + ch];
          }
          latent[ch] = GatedPool(v.data(), g.data(), r);
        }
      }
      kernels::RmsNorm(latent.data(), w.norm.data(), eps, hd, latent.data());
      per_chunk[ci].push_back({static_cast<int32_t>(ci), pos / r});
      out.insert(out.end(), latent.begin(), latent.end());
    }
  });
  std::vector<Emitted> emitted;
  latents->clear();
  for (size_t ci = 0; ci < per_chunk.size(); ++ci) {
    emitted.insert(emitted.end(), per_chunk[ci].begin(), per_chunk[ci].end());
    latents->insert(latents->end(), per_chunk_latents[ci].begin(), per_chunk_latents[ci].end());
  }
  return emitted;
}

// Stores the completed latents (rotated at their group's first position, FP4) and their indexer keys
// (k_norm(wk(latent)), rotated, FP4). A state-only chunk stores nothing: its latents are already in the
// (shared, immutable) prefix blocks.
void Publish(Step& step, int64_t layer, const std::vector<Emitted>& emitted, std::vector<float>& latents) {
  const V41Config& c = *step.config;
  const V41AttentionWeights& w = step.weights->layers[layer].attention;
  const V41CacheLayout& layout = *step.layout;
  const int64_t source = c.layers[layer].group, r = c.layers[layer].ratio, hd = c.head_dim, rd = c.rope_dim;
  const int64_t m = static_cast<int64_t>(emitted.size()), ihd = c.index_head_dim;
  if (m == 0) return;
  std::vector<float> keys;
  const bool with_keys = layout.sources[source].key_group >= 0;
  if (with_keys) {
    keys.resize(static_cast<size_t>(m * ihd));
    kernels::Linear(latents.data(), m, hd, w.indexer->wk, keys.data(), ihd, step.linear, step.pool);
    kernels::RmsNormRows(keys.data(), ihd, w.indexer->k_norm.data(), static_cast<float>(c.rms_norm_eps), m, ihd,
                         keys.data(), ihd);
  }
  ForRows(*step.pool, m, [&](int64_t e) {
    const ChunkRows& chunk = step.chunks[emitted[e].chunk];
    if (chunk.state_only) return;
    const int64_t index = emitted[e].index;
    float cos[256], sin[256];  // rope_dim ≤ 512 (checked at load)
    RopeAngles(*step.compress_inv_freq, index * r, cos, sin);
    if (with_keys) {
      float* k = keys.data() + e * ihd;
      kernels::ApplyRope(k, 1, ihd, ihd - rd, rd, cos, sin, kernels::RopeLayout::kInterleaved);
      QuantizeProbed(step, V41DecisionKind::kKey, layer, index, layout.key_format, k, ihd,
                     KeyEntry(step, chunk, source, index));
    }
    float* latent = latents.data() + e * hd;
    kernels::ApplyRope(latent, 1, hd, hd - rd, rd, cos, sin, kernels::RopeLayout::kInterleaved);
    QuantizeProbed(step, V41DecisionKind::kLatent, layer, index, layout.latent_format, latent, hd,
                   LatentEntry(step, chunk, source, index));
  });
}

// The index source's selection for every row (and, at the candidate source, its candidate blocks).
void Index(Step& step, int64_t layer, float* iq, const float* iw) {
  ScopedPhase phase(Phase::kIndexer);
  const V41Config& c = *step.config;
  const V41LayerPlan& plan = c.layers[layer];
  const V41CacheLayout& layout = *step.layout;
  const int64_t n = step.num_rows(), ih = c.index_n_heads, ihd = c.index_head_dim, rd = c.rope_dim;
  const int64_t source = plan.group, r = plan.ratio;
  Selection& sel = step.selection;
  sel.group = source;
  sel.rows.assign(static_cast<size_t>(n), {});
  if (layout.sources[source].key_group < 0) return;  // a KV source without an indexer publishes no keys

  // Every visible key of each chunk, decoded once.
  std::vector<std::vector<float>> chunk_keys(step.chunks.size());
  ForEach(*step.pool, static_cast<int64_t>(step.chunks.size()), [&](int64_t ci) {
    const ChunkRows& chunk = step.chunks[ci];
    const int64_t count = (chunk.start_pos + chunk.num_rows) / r;
    chunk_keys[ci].resize(static_cast<size_t>(count * ihd));
    for (int64_t t = 0; t < count; ++t)
      kernels::KvDequantize(layout.key_format, KeyEntry(step, chunk, source, t), ihd, chunk_keys[ci].data() + t * ihd);
  });

  if (plan.candidate_source) step.candidate_blocks.assign(static_cast<size_t>(n), {});
  const bool masked = plan.uses_candidates && !step.candidate_blocks.empty();
  const float softmax_scale = 1.0f / std::sqrt(static_cast<float>(ihd));
  const float heads_scale = 1.0f / std::sqrt(static_cast<float>(ih));
  const int64_t bs = c.candidate_block_size;
  step.pool->ParallelFor(n, [&](int64_t begin, int64_t end) {
    std::vector<float> dots, scores, block_scores;
    std::vector<const float*> keys;
    std::vector<int32_t> picked, allowed;
    float cos[256], sin[256];
    for (int64_t i = begin; i < end; ++i) {
      const Row& row = step.rows[i];
      const int64_t count = (row.pos + 1) / r;
      if (count == 0) continue;
      // The query: rotated with the compress rope at the row's position, FP4 per head (as the keys).
      float* q = iq + i * ih * ihd;
      RopeAngles(*step.compress_inv_freq, row.pos, cos, sin);
      kernels::ApplyRope(q, ih, ihd, ihd - rd, rd, cos, sin, kernels::RopeLayout::kInterleaved);
      for (int64_t h = 0; h < ih; ++h)
        FakeQuantizeProbed(step, V41DecisionKind::kQuery, layer, row.pos, layout.key_format, q + h * ihd, ihd);
      keys.resize(static_cast<size_t>(count));
      const float* base = chunk_keys[row.chunk].data();
      for (int64_t t = 0; t < count; ++t) keys[t] = base + t * ihd;
      dots.resize(static_cast<size_t>(ih * count));
      kernels::QueryKeyDots(q, ih, ihd, keys.data(), count, 1.0f, dots.data());
      scores.assign(static_cast<size_t>(count), 0.0f);
      for (int64_t h = 0; h < ih; ++h) {
        const float wh = iw[i * ih + h] * heads_scale;
        for (int64_t t = 0; t < count; ++t) scores[t] += std::max(dots[h * count + t], 0.0f) * softmax_scale * wh;
      }

      if (plan.candidate_source) {
        // Level one: the best candidate_topk_blocks blocks by their best score, the block holding the newest
        // visible entry always kept. (Its own top-k below is not restricted to them.)
        const int64_t blocks = (count + bs - 1) / bs;
        std::vector<uint8_t>& keep = step.candidate_blocks[i];
        keep.assign(static_cast<size_t>(blocks), 0);
        if (blocks <= c.candidate_topk_blocks) {
          std::fill(keep.begin(), keep.end(), 1);
        } else {
          block_scores.assign(static_cast<size_t>(blocks), -INFINITY);
          for (int64_t t = 0; t < count; ++t) block_scores[t / bs] = std::max(block_scores[t / bs], scores[t]);
          block_scores[blocks - 1] = INFINITY;
          picked.resize(static_cast<size_t>(c.candidate_topk_blocks));
          TopKProbed(step, V41DecisionKind::kCandidates, layer, row.pos, block_scores.data(), blocks,
                     c.candidate_topk_blocks, picked.data(), static_cast<int32_t>(blocks - 1));
          for (int32_t b : picked) keep[b] = 1;
        }
      }

      // Level two (or the only level): the top index_topk among the allowed entries.
      allowed.clear();
      const std::vector<uint8_t>* keep = masked ? &step.candidate_blocks[i] : nullptr;
      for (int64_t t = 0; t < count; ++t) {
        if (keep && (t / bs >= static_cast<int64_t>(keep->size()) || !(*keep)[t / bs])) {
          scores[t] = -INFINITY;
          continue;
        }
        allowed.push_back(static_cast<int32_t>(t));
      }
      std::vector<int32_t>& out = sel.rows[i];
      if (static_cast<int64_t>(allowed.size()) <= c.index_topk) {
        out = allowed;
      } else {
        picked.resize(static_cast<size_t>(c.index_topk));
        TopKProbed(step, V41DecisionKind::kIndexTopK, layer, row.pos, scores.data(), count, c.index_topk, picked.data());
        out.assign(picked.begin(), picked.end());
        std::sort(out.begin(), out.end());
      }
    }
  }, 1);
}

// Decodes, per chunk, every latent some row of the chunk selected (once for the whole group run).
void DecodeSelection(Step& step) {
  const V41Config& c = *step.config;
  const V41CacheLayout& layout = *step.layout;
  Selection& sel = step.selection;
  const int64_t hd = c.head_dim, r = SourceRatio(step, sel.group);
  sel.decoded.assign(step.chunks.size(), {});
  sel.slot.assign(step.chunks.size(), {});
  ForEach(*step.pool, static_cast<int64_t>(step.chunks.size()), [&](int64_t ci) {
    const ChunkRows& chunk = step.chunks[ci];
    std::vector<int32_t>& slot = sel.slot[ci];
    slot.assign(static_cast<size_t>((chunk.start_pos + chunk.num_rows) / r), -1);
    int32_t used = 0;
    for (int64_t i = chunk.first_row; i < chunk.first_row + chunk.num_rows; ++i)
      for (int32_t t : sel.rows[i])
        if (slot[t] < 0) slot[t] = used++;
    std::vector<float>& decoded = sel.decoded[ci];
    decoded.resize(static_cast<size_t>(used * hd));
    for (size_t t = 0; t < slot.size(); ++t)
      if (slot[t] >= 0)
        kernels::KvDequantize(layout.latent_format, LatentEntry(step, chunk, sel.group, static_cast<int64_t>(t)), hd,
                              decoded.data() + slot[t] * hd);
  });
}

}  // namespace

void Attention(Step& step, int64_t layer, const float* x, float* out) {
  const V41Config& c = *step.config;
  const V41LayerPlan& plan = c.layers[layer];
  const V41AttentionWeights& w = step.weights->layers[layer].attention;
  const V41CacheLayout& layout = *step.layout;
  const int64_t n = step.num_rows(), d = c.hidden_size, h = c.num_heads, hd = c.head_dim, rd = c.rope_dim;
  const int64_t win = c.sliding_window, ql = c.q_lora_rank, ih = c.index_n_heads, ihd = c.index_head_dim;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const std::vector<float>& inv_freq = plan.ratio > 0 ? *step.compress_inv_freq : *step.main_inv_freq;
  const int64_t half = rd / 2;

  ScopedPhase phase(Phase::kAttnProjections);
  std::vector<float> qr(static_cast<size_t>(n * ql)), q(static_cast<size_t>(n * h * hd)), kv(static_cast<size_t>(n * hd));
  std::vector<float> ckv, cgate, iq, iw;
  std::vector<LinearTask> tasks = {{x, n, d, &w.wq_a, qr.data(), ql}, {x, n, d, &w.wkv, kv.data(), hd}};
  if (w.compressor) {
    ckv.resize(static_cast<size_t>(n * hd));
    tasks.push_back({x, n, d, &w.compressor->wkv, ckv.data(), hd});
    if (w.compressor->ratio > 1) {
      cgate.resize(static_cast<size_t>(n * hd));
      tasks.push_back({x, n, d, &w.compressor->wgate, cgate.data(), hd});
    }
  }
  if (w.indexer) {
    iw.resize(static_cast<size_t>(n * ih));
    iq.resize(static_cast<size_t>(n * ih * ihd));
    tasks.push_back({x, n, d, &w.indexer->weights_proj, iw.data(), ih});
  }
  RunLinearTasks(tasks, step.linear, *step.pool);
  kernels::RmsNormRows(qr.data(), ql, w.q_norm.data(), eps, n, ql, qr.data(), ql);
  tasks = {{qr.data(), n, ql, &w.wq_b, q.data(), h * hd}};
  if (w.indexer) tasks.push_back({qr.data(), n, ql, &w.indexer->wq_b, iq.data(), ih * ihd});
  RunLinearTasks(tasks, step.linear, *step.pool);
  kernels::RmsNormRows(kv.data(), hd, w.kv_norm.data(), eps, n, hd, kv.data(), hd);
  // RoPE on the queries and the window K=V, which is stored FP8 in the window blocks and used as stored
  // (also by the chunk's own rows).
  std::vector<float> cos(static_cast<size_t>(n * half)), sin(static_cast<size_t>(n * half));
  ForRows(*step.pool, n, [&](int64_t i) {
    const Row& row = step.rows[i];
    RopeAngles(inv_freq, row.pos, cos.data() + i * half, sin.data() + i * half);
    kernels::ApplyRope(q.data() + i * h * hd, h, hd, hd - rd, rd, cos.data() + i * half, sin.data() + i * half,
                       kernels::RopeLayout::kInterleaved);
    float* k = kv.data() + i * hd;
    kernels::ApplyRope(k, 1, hd, hd - rd, rd, cos.data() + i * half, sin.data() + i * half,
                       kernels::RopeLayout::kInterleaved);
    uint8_t* stored = WindowEntry(step, step.chunks[row.chunk], layer, row.pos);
    QuantizeProbed(step, V41DecisionKind::kWindow, layer, row.pos, layout.window_format, k, hd, stored);
    kernels::KvDequantize(layout.window_format, stored, hd, k);
  });

  // The compressed branch: a KV source completes groups and publishes them; an index source selects.
  if (plan.ratio > 0) {
    phase.Switch(Phase::kAttnCompress);
    if (plan.kv_source) {
      std::vector<float> latents;
      std::vector<Emitted> emitted = Compress(step, layer, ckv.data(), cgate.empty() ? nullptr : cgate.data(), &latents);
      Publish(step, layer, emitted, latents);
    }
    if (plan.index_source) {
      phase.Stop();
      Index(step, layer, iq.data(), iw.data());
      phase.Switch(Phase::kAttnCompress);
      DecodeSelection(step);
    }
  }
  const bool compressed = plan.ratio > 0 && plan.index_layer >= 0 && step.selection.group == plan.group &&
                          layout.sources[plan.group].key_group >= 0;

  phase.Switch(Phase::kAttend);
  // The window entries before each chunk (that it may see), decoded once per chunk.
  std::vector<std::vector<float>> before(step.chunks.size());
  std::vector<int64_t> before_first(step.chunks.size(), 0);
  ForEach(*step.pool, static_cast<int64_t>(step.chunks.size()), [&](int64_t ci) {
    const ChunkRows& chunk = step.chunks[ci];
    const int64_t first = std::max({int64_t{0}, chunk.start_pos - win + 1, chunk.state->window_floor});
    before_first[ci] = first;
    if (first >= chunk.start_pos) return;
    before[ci].resize(static_cast<size_t>((chunk.start_pos - first) * hd));
    for (int64_t t = first; t < chunk.start_pos; ++t)
      kernels::KvDequantize(layout.window_format, WindowEntry(step, chunk, layer, t), hd,
                            before[ci].data() + (t - first) * hd);
  });
  // Each row sees the window before it (stored entries before the chunk, the chunk's own rows) and, in a
  // layer with a compressed branch, the latents its index source selected.
  std::vector<float> o(static_cast<size_t>(n * h * hd));
  auto gather = [&](int64_t i, KeyList& keys) {
    const Row& row = step.rows[i];
    const ChunkRows& chunk = step.chunks[row.chunk];
    const int64_t p = row.pos;
    for (int64_t t = std::max(p - win + 1, before_first[row.chunk]); t <= p; ++t) {
      keys.push_back(t >= chunk.start_pos ? kv.data() + (chunk.first_row + t - chunk.start_pos) * hd
                                          : before[row.chunk].data() + (t - before_first[row.chunk]) * hd);
    }
    if (compressed) {
      const std::vector<float>& decoded = step.selection.decoded[row.chunk];
      const std::vector<int32_t>& slot = step.selection.slot[row.chunk];
      for (int32_t t : step.selection.rows[i]) keys.push_back(decoded.data() + slot[t] * hd);
    }
  };
  AttendRows(*step.pool, n, q.data(), w.sink.data(), h, hd, rd, cos.data(), sin.data(), gather, o.data());

  phase.Switch(Phase::kAttnOutput);
  GroupedOutputProjection(w, BlockShape::Of(c), o.data(), n, step.linear, *step.pool, out);
}

}  // namespace deepinfer::model::v41
