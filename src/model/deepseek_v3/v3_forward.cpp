// The DeepSeek-V3 forward pass: pre-norm blocks of absorbed-form MLA (V3.2: over the positions its lightning
// indexer selects) and a dense SwiGLU MLP or the grouped sigmoid-routed MoE with shared experts, then the final
// norm and lm_head.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <unordered_set>

#include "kernels/elementwise.h"
#include "kernels/linear.h"
#include "kernels/number_formats.h"
#include "model/common/attention.h"
#include "model/common/checkpoint_binder.h"
#include "model/common/forward_batch.h"
#include "model/common/moe.h"
#include "model/common/rotary.h"
#include "model/common/row_parallel.h"
#include "model/deepseek_v3/v32_indexer.h"
#include "model/deepseek_v3/v3_model.h"
#include "model/step_profile.h"

namespace deepinfer::model {
namespace v3 {

using Chunk = ChunkRows<V3SequenceState>;

struct Step : StepBase<V3SequenceState> {
  const V3Config* config = nullptr;
  bool kv_bf16 = false;
};

// Where a layer's cache entries live: the entry of position p sits in slot p + slot_shift of the group's
// blocks, at layer_offset in each block; V3.2's indexer key of p in the same slot of index_group's blocks, at
// index_offset.
struct CacheRef {
  size_t group = 0;
  int64_t layer_offset = 0;
  int64_t slot_shift = 0;
  size_t index_group = 0;
  int64_t index_offset = 0;
};

// The cache entry (latent_width values) at `pos` of the chunk's sequence.
uint8_t* Entry(const Step& step, const Chunk& chunk, const CacheRef& cache, int64_t pos) {
  const int64_t slot = pos + cache.slot_shift;
  const int32_t block = chunk.state->block_table(cache.group)[slot / kvcache::kBlockTokens];
  const int64_t bytes = (step.kv_bf16 ? 2 : 4) * step.config->latent_width();
  return step.pools->group(cache.group).block(block) + cache.layer_offset + (slot % kvcache::kBlockTokens) * bytes;
}

// The indexer key of `pos` of the chunk's sequence.
uint8_t* IndexEntry(const Step& step, const Chunk& chunk, const CacheRef& cache, int64_t pos) {
  const int64_t slot = pos + cache.slot_shift;
  const int32_t block = chunk.state->block_table(cache.index_group)[slot / kvcache::kBlockTokens];
  return step.pools->group(cache.index_group).block(block) + cache.index_offset +
         (slot % kvcache::kBlockTokens) * v32::IndexKeyBytes(*step.config);
}

// Dense attention tiles: rows that see every position up to their own, scored kDenseTileRows at a time (a
// decode row is a tile of one: its heads still make the product a small GEMM, faster than per-key dots).
constexpr int64_t kDenseTileRows = 8;

// `count` rows of `chunk` from step row `first` on (consecutive positions), each attending every position up to
// its own, with the arithmetic of the one-row path (KeyList::Dots, kernels::Softmax, KeyList::WeightedSum) so
// that a row's bits do not depend on how it was batched. All the tile's rows and heads share one key per
// position (the latent), so both halves are products over the tile's (row, head) query vectors, reading the
// keys where they lie in the cache blocks: the dots are kernels::QueryKeyDotsRows (each the one-query dot times
// the softmax scale), first over the positions every row sees, then over the later ones for the rows after the
// first (a row's dots past its own position are never read); the weighted sum is kernels::WeightedKeySumRows,
// first over the positions every row sees, then each later position for the rows that see it (accumulating, so
// each output is still one chain of fused multiply-adds over its own positions in increasing order).
void AttendDenseTile(const Step& step, const Chunk& chunk, const CacheRef& cache, int64_t first, int64_t count,
                     const float* qt, KeyList& keys, std::vector<float>& logits, float* ol) {
  const V3Config& c = *step.config;
  const int64_t h = c.num_heads, lw = c.latent_width();
  const int64_t first_pos = step.rows[first].pos, nk = first_pos + count;  // positions [0, nk) cover the tile
  logits.resize(static_cast<size_t>(count * h * nk));
  keys.clear();
  for (int64_t t = 0; t < nk; ++t) keys.push_back(Entry(step, chunk, cache, t));
  const float* q = qt + first * h * lw;
  keys.DotsRows(q, lw, count * h, 0, first_pos + 1, lw, c.softmax_scale, logits.data(), nk);
  if (count > 1)
    keys.DotsRows(q + h * lw, lw, (count - 1) * h, first_pos + 1, count - 1, lw, c.softmax_scale,
                  logits.data() + h * nk + first_pos + 1, nk);
  // Each (row, head)'s probabilities over its own positions, in place.
  for (int64_t r = 0; r < count; ++r) {
    const int64_t seen = first_pos + r + 1;
    for (int64_t head = 0; head < h; ++head) kernels::Softmax(logits.data() + (r * h + head) * nk, seen);
  }
  float* out = ol + first * h * lw;
  keys.WeightedSumRows(logits.data(), nk, count * h, 0, first_pos + 1, lw, out, lw, false);
  for (int64_t r = 1; r < count; ++r)  // position first_pos + r, seen by rows r and later
    keys.WeightedSumRows(logits.data() + r * h * nk + first_pos + r, nk, (count - r) * h, first_pos + r, 1, lw,
                         out + r * h * lw, lw, true);
}

void Attention(const Step& step, const V3AttentionWeights& w, const CacheRef& cache, const float* x, float* out) {
  const V3Config& c = *step.config;
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
  // Every row's angles (the indexer rotates with them too).
  std::vector<float> cos(static_cast<size_t>(n * half)), sin(static_cast<size_t>(n * half));
  for (int64_t i = 0; i < n; ++i) {
    float* ci = cos.data() + i * half;
    float* si = sin.data() + i * half;
    RopeAngles(*step.main_inv_freq, step.rows[i].pos, ci, si);
    if (c.rope_attention_factor != 1.0f) {
      for (int64_t j = 0; j < half; ++j) {
        ci[j] *= c.rope_attention_factor;
        si[j] *= c.rope_attention_factor;
      }
    }
    kernels::ApplyRope(q.data() + i * h * hd, h, hd, nope, rd, ci, si, kernels::RopeLayout::kInterleaved);
    kernels::ApplyRope(latent.data() + i * lw, 1, lw, r, rd, ci, si, kernels::RopeLayout::kInterleaved);
  }
  v32::IndexerRows index;
  if (w.indexer) v32::ProjectIndexer(c, *w.indexer, x, qa.data(), n, cos.data(), sin.data(), &step.linear, step.pool, &index);
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
      uint8_t* dst = Entry(step, chunk, cache, chunk.start_pos + i);
      const float* src = latent.data() + (chunk.first_row + i) * lw;
      if (step.kv_bf16) kernels::FloatToBf16(src, reinterpret_cast<uint16_t*>(dst), lw);
      else std::memcpy(dst, src, static_cast<size_t>(lw) * sizeof(float));
      if (w.indexer) {
        const int64_t bytes = v32::IndexKeyBytes(c);
        std::memcpy(IndexEntry(step, chunk, cache, chunk.start_pos + i),
                    index.keys.data() + (chunk.first_row + i) * bytes, static_cast<size_t>(bytes));
      }
    }
  }
  // V3.2: each chunk's sequence's indexer keys up to the chunk's end, dequantized once for its rows.
  std::vector<std::vector<float>> index_keys(w.indexer ? step.chunks.size() : 0);
  for (size_t ci = 0; ci < index_keys.size(); ++ci) {
    const Chunk& chunk = step.chunks[ci];
    const int64_t end = chunk.start_pos + chunk.num_rows, dim = c.index_head_dim;
    if (end <= c.index_topk) continue;  // every row attends every position
    index_keys[ci].resize(static_cast<size_t>(end * dim));
    for (int64_t t = 0; t < end; ++t)
      v32::DequantizeKey(c, IndexEntry(step, chunk, cache, t), index_keys[ci].data() + t * dim);
  }
  std::vector<float> ol(static_cast<size_t>(n * h * lw));
  // V3.2's rows over their selected positions, one at a time.
  auto attend_row = [&](int64_t i, KeyList& keys, std::vector<float>& logits, v32::SelectScratch& scratch,
                        std::vector<int64_t>& selected) {
    const Row& row = step.rows[i];
    const Chunk& chunk = step.chunks[row.chunk];
    const int64_t ih = c.index_n_heads;
    v32::SelectPositions(c, index.queries.data() + i * ih * c.index_head_dim, index.weights.data() + i * ih, row.pos,
                         index_keys[row.chunk].data(), scratch, &selected);
    keys.clear();
    for (int64_t t : selected) keys.push_back(Entry(step, chunk, cache, t));
    const int64_t nk = keys.size();
    logits.resize(static_cast<size_t>(h * nk));
    keys.Dots(qt.data() + i * h * lw, h, lw, c.softmax_scale, logits.data());
    for (int64_t head = 0; head < h; ++head) kernels::Softmax(logits.data() + head * nk, nk);
    keys.WeightedSum(logits.data(), h, lw, ol.data() + i * h * lw);
  };
  // Work items: a run of rows of one chunk that all attend every position up to their own (V3, and V3.2 rows
  // within index_topk) goes as tiles of kDenseTileRows rows (AttendDenseTile), any other row alone.
  struct Item {
    int64_t row, count;
    bool dense;
  };
  std::vector<Item> items;
  for (const Chunk& chunk : step.chunks) {
    int64_t dense_rows = chunk.num_rows;
    if (w.indexer) dense_rows = std::clamp<int64_t>(c.index_topk - chunk.start_pos, 0, chunk.num_rows);
    for (int64_t at = 0; at < dense_rows; at += kDenseTileRows)
      items.push_back({chunk.first_row + at, std::min(kDenseTileRows, dense_rows - at), true});
    for (int64_t at = dense_rows; at < chunk.num_rows; ++at) items.push_back({chunk.first_row + at, 1, false});
  }
  auto attend = [&](int64_t begin, int64_t end) {
    KeyList keys(step.kv_bf16);
    std::vector<float> logits;
    v32::SelectScratch scratch;
    std::vector<int64_t> selected;
    for (int64_t it = begin; it < end; ++it) {
      const Item& item = items[it];
      if (item.dense) {
        AttendDenseTile(step, step.chunks[step.rows[item.row].chunk], cache, item.row, item.count, qt.data(), keys,
                        logits, ol.data());
      } else {
        attend_row(item.row, keys, logits, scratch, selected);
      }
    }
  };
  const int64_t num_items = static_cast<int64_t>(items.size());
  if (num_items == 1) attend(0, 1);
  else step.pool->ParallelFor(num_items, attend, 1);

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

void Mlp(const Step& step, const V3LayerWeights& w, const float* x, float* out) {
  const V3Config& c = *step.config;
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

void Block(const Step& step, const V3LayerWeights& w, const CacheRef& cache, float* hidden) {
  const V3Config& c = *step.config;
  const int64_t n = step.num_rows(), d = c.hidden_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  std::vector<float> x(static_cast<size_t>(n * d)), y(static_cast<size_t>(n * d));
  kernels::RmsNormRows(hidden, d, w.input_norm.data(), eps, n, d, x.data(), d);
  Attention(step, w.attention, cache, x.data(), y.data());
  for (int64_t i = 0; i < n * d; ++i) hidden[i] += y[i];
  kernels::RmsNormRows(hidden, d, w.post_attention_norm.data(), eps, n, d, x.data(), d);
  Mlp(step, w, x.data(), y.data());
  for (int64_t i = 0; i < n * d; ++i) hidden[i] += y[i];
}

// The MTP layer over `step`'s rows (each row's token is the one after its position; hidden: the main
// model's last hidden state at that position, or the previous draft's output): x = eh_proj([enorm(embed);
// hnorm(hidden)]), then its decoder layer, whose entries go to the draft group (entry of position p in
// slot p + 1).
std::vector<float> RunMtp(const Step& step, const V3Weights& weights, const CacheRef& cache, const float* hidden) {
  ScopedPhase phase(Phase::kMtp);
  const V3Config& c = *step.config;
  const V3MtpWeights& mw = weights.mtp[0];
  const int64_t n = step.num_rows(), d = c.hidden_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  std::vector<float> joined(static_cast<size_t>(n * 2 * d)), x(static_cast<size_t>(n * d));
  for (int64_t i = 0; i < n; ++i) EmbeddingRow(*weights.embed, step.rows[i].token, d, joined.data() + i * 2 * d);
  kernels::RmsNormRows(joined.data(), 2 * d, mw.enorm.data(), eps, n, d, joined.data(), 2 * d);
  kernels::RmsNormRows(hidden, d, mw.hnorm.data(), eps, n, d, joined.data() + d, 2 * d);
  kernels::Linear(joined.data(), n, 2 * d, mw.eh_proj, x.data(), d, step.linear, step.pool);
  Block(step, mw.layer, cache, x.data());
  return x;
}

}  // namespace v3

Status V3Model::Forward(std::span<const SequenceChunk> batch, kvcache::KvPools& pools, ForwardOutput* out) {
  const V3Config& c = config_;
  ResetForwardOutput(c.vocab_size, info_.hidden_width, out);
  if (batch.empty()) return Status::Ok();
  v3::Step step;
  InitStep(pool_, &pools, &inv_freq_, &inv_freq_, precision_, &step);
  step.config = &c;
  step.kv_bf16 = kv_bf16_;
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
  for (int64_t l = 0; l < c.num_layers; ++l) {
    v3::Block(step, weights_->layers[l],
              v3::CacheRef{0, l * layer_block_bytes_, 0, index_group_, l * index_layer_block_bytes_}, hidden.data());
  }
  if (drafting_) KeepDraftPace(step, hidden.data());

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
    state->high_water = std::max(state->high_water, state->num_tokens());
    state->draft_steps = 0;
  }
  return Status::Ok();
}

v3::CacheRef V3Model::DraftCacheRef() const { return v3::CacheRef{kDraftGroup, 0, 1, draft_index_group_, 0}; }

void V3Model::KeepDraftPace(const v3::Step& step, const float* hidden) {
  const int64_t d = config_.hidden_size, ring = kV3DraftRollback + 1;
  v3::Step mtp;
  InitStep(pool_, step.pools, &inv_freq_, &inv_freq_, precision_, &mtp);
  mtp.config = &config_;
  mtp.kv_bf16 = kv_bf16_;
  std::vector<float> inputs;
  for (const v3::Chunk& chunk : step.chunks) {
    V3SequenceState& state = *chunk.state;
    const int64_t s = chunk.start_pos, e = s + chunk.num_rows;
    auto row = [&](int64_t p) { return hidden + (chunk.first_row + p - s) * d; };
    if (!chunk.state_only) {
      // Entries of [s − 1, e − 1): those whose next token is known (slots [s, e)).
      const int64_t first = std::max<int64_t>(s - 1, 0);
      if (first < e - 1) {
        const int32_t index = static_cast<int32_t>(mtp.chunks.size());
        mtp.chunks.push_back({&state, mtp.num_rows(), e - 1 - first, first, false});
        for (int64_t p = first; p < e - 1; ++p) {
          const float* h = p < s ? state.hidden.data() + (p % ring) * d : row(p);
          inputs.insert(inputs.end(), h, h + d);
          mtp.rows.push_back({step.rows[chunk.first_row + p + 1 - s].token, p, index});
        }
      }
      for (int64_t p = s; p < e; ++p) {
        if (p % kvcache::kBlockTokens != kvcache::kBlockTokens - 1) continue;
        uint8_t* block = step.pools->group(kDraftGroup).block(state.block_at(kDraftGroup, p));
        std::memcpy(block + layer_block_bytes_, row(p), static_cast<size_t>(d) * sizeof(float));
      }
    }
    for (int64_t p = std::max(s, e - ring); p < e; ++p) std::copy(row(p), row(p) + d, state.hidden.begin() + (p % ring) * d);
  }
  if (mtp.num_rows() > 0) v3::RunMtp(mtp, *weights_, DraftCacheRef(), inputs.data());
}

Status V3Model::Draft(std::span<const DraftChunk> batch, kvcache::KvPools& pools, ForwardOutput* out) {
  if (!drafting_) return Status::FailedPrecondition("DeepSeek-V3: the model was loaded without drafting");
  const V3Config& c = config_;
  const int64_t d = c.hidden_size, ring = kV3DraftRollback + 1;
  ResetForwardOutput(c.vocab_size, info_.hidden_width, out);
  if (batch.empty()) return Status::Ok();
  // Validate everything before any state changes.
  DI_RETURN_IF_ERROR(CheckPools(spec_, pools));
  v3::Step step;
  InitStep(pool_, &pools, &inv_freq_, &inv_freq_, precision_, &step);
  step.config = &c;
  step.kv_bf16 = kv_bf16_;
  std::unordered_set<const SequenceState*> seen;
  std::vector<float> hidden(batch.size() * static_cast<size_t>(d));
  bool want_hidden = false;
  for (size_t ci = 0; ci < batch.size(); ++ci) {
    const DraftChunk& chunk = batch[ci];
    const std::string where = "draft chunk " + std::to_string(ci);
    if (chunk.state == nullptr || chunk.state->owner() != this)
      return Status::InvalidArgument(where + ": not a sequence state of this model");
    auto* state = static_cast<V3SequenceState*>(chunk.state);
    if (!seen.insert(state).second) return Status::InvalidArgument(where + ": the sequence appears twice");
    if (chunk.token < 0 || chunk.token >= c.vocab_size)
      return Status::OutOfRange(where + ": token id " + std::to_string(chunk.token) + " outside the vocabulary");
    // The MTP layer's position is the one before the consumed token's; its entry goes to that token's slot.
    const int64_t slot = state->num_tokens() + state->draft_steps, pos = slot - 1;
    if (pos < 0) return Status::FailedPrecondition(where + ": a fresh sequence needs a Forward before drafting");
    if (slot >= c.max_position_embeddings)
      return Status::OutOfRange(where + ": position " + std::to_string(slot) + " is past max_position_embeddings");
    const int64_t blocks = slot / kvcache::kBlockTokens + 1;
    for (size_t group : {kDraftGroup, draft_index_group_}) {
      if (group == 0) continue;  // V3: no draft index group
      const std::vector<int32_t>& table = state->block_table(group);
      const std::string& name = spec_.groups[group].name;
      if (static_cast<int64_t>(table.size()) < blocks)
        return Status::InvalidArgument(where + ": the " + name + " block table does not reach position " +
                                       std::to_string(slot));
      for (int64_t b = 0; b < blocks; ++b) {
        if (!pools.group(group).contains(table[b]))
          return Status::OutOfRange(where + ": " + name + " block " + std::to_string(b) + " is not in the pool");
      }
    }
    const float* h = chunk.hidden != nullptr     ? chunk.hidden
                     : state->draft_steps == 0 ? state->hidden.data() + (pos % ring) * d
                                               : state->draft_hidden.data();
    std::copy(h, h + d, hidden.begin() + static_cast<int64_t>(ci) * d);
    want_hidden = want_hidden || chunk.want_hidden;
    step.rows.push_back({chunk.token, pos, static_cast<int32_t>(ci)});
    step.chunks.push_back({state, static_cast<int64_t>(ci), 1, pos, false});
  }
  std::vector<float> x = v3::RunMtp(step, *weights_, DraftCacheRef(), hidden.data());
  const int64_t m = static_cast<int64_t>(batch.size());
  {
    ScopedPhase phase(Phase::kHead);
    std::vector<float> normed(x.size());
    kernels::RmsNormRows(x.data(), d, weights_->mtp[0].head_norm.data(), static_cast<float>(c.rms_norm_eps), m, d,
                         normed.data(), d);
    out->logits.resize(static_cast<size_t>(m * c.vocab_size));
    kernels::Linear(normed.data(), m, d, weights_->head, out->logits.data(), c.vocab_size, step.linear, step.pool);
  }
  if (want_hidden) out->hidden.assign(x.begin(), x.end());
  for (size_t ci = 0; ci < batch.size(); ++ci) {
    out->first_row.push_back(static_cast<int64_t>(ci));
    out->num_rows.push_back(1);
    auto* state = static_cast<V3SequenceState*>(batch[ci].state);
    std::copy(x.begin() + static_cast<int64_t>(ci) * d, x.begin() + static_cast<int64_t>(ci + 1) * d,
              state->draft_hidden.begin());
    ++state->draft_steps;
  }
  return Status::Ok();
}

}  // namespace deepinfer::model
