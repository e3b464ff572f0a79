#include "model/deepseek_v41/v41_model.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <unordered_set>

#include "core/hash.h"
#include "core/hf_config.h"
#include "core/mapped_file.h"
#include "kernels/elementwise.h"
#include "kernels/kv_quant.h"
#include "kernels/linear.h"
#include "model/common/checkpoint_io.h"
#include "model/common/model_info.h"
#include "model/deepseek_v41/v41_dspark.h"
#include "model/step_profile.h"

namespace deepinfer::model {
namespace {

// The Engram tables (about 98 GB each in the release, of which a decode step reads a few rows) are left
// out of the prefault: faulting them in whole would read the disk for minutes.
bool IsEngramTable(const TensorInfo& t) { return t.name.find(".engram.embed.") != std::string::npos; }

kvcache::CacheElement ElementOf(kernels::KvQuant q, int64_t n) {
  switch (kernels::EffectiveKvQuant(q, n)) {
    case kernels::KvQuant::kFp8Pow2x32: return kvcache::CacheElement::kFP8E4M3;
    case kernels::KvQuant::kFp4E4m3x16:
    case kernels::KvQuant::kFp4Pow2x32: return kvcache::CacheElement::kFP4E2M1;
    default: return kvcache::CacheElement::kF32;
  }
}

}  // namespace

Result<std::unique_ptr<V41Model>> V41Model::Load(const std::string& dir, const LoadOptions& options) {
  std::unique_ptr<V41Model> model(new V41Model());
  model->TakeOptions(options);
  if (options.kv_precision != KvPrecision::kF32)
    return Status::InvalidArgument("DeepSeek-V4.1 keeps its caches in its own FP8/FP4 formats (the quantizers are "
                                   "part of the model); a KV precision other than the default does not apply");
  DI_ASSIGN_OR_RETURN(HfConfig hf, HfConfig::Load(dir));
  DI_ASSIGN_OR_RETURN(model->config_, V41Config::FromHf(hf));
  const V41Config& c = model->config_;
  if (c.rope_dim > 512) return Status::InvalidArgument(hf.source() + ": qk_rope_head_dim above 512 is not supported");
  DI_ASSIGN_OR_RETURN(model->checkpoint_, Checkpoint::Open(dir));
  DI_ASSIGN_OR_RETURN(model->weights_, LoadV41Weights(model->checkpoint_, c, options.drafting));
  if (c.engram.enabled()) {
    // The hashes work on the tokenizer's compressed ids, so the tokenizer is part of the model here.
    const std::string tokenizer = (std::filesystem::path(dir) / "tokenizer.json").string();
    if (!std::filesystem::exists(tokenizer))
      return Status::NotFound(tokenizer + ": not found; DeepSeek-V4.1's Engram layers hash the tokenizer's "
                              "compressed token ids, so the checkpoint directory needs its tokenizer.json");
    int64_t classes = 0;
    DI_ASSIGN_OR_RETURN(std::vector<int32_t> map, BuildEngramTokenMap(tokenizer, c.vocab_size, &classes));
    DI_ASSIGN_OR_RETURN(V41EngramHashing hashing, V41EngramHashing::Create(c.engram, std::move(map), classes));
    model->hashing_ = std::make_unique<V41EngramHashing>(std::move(hashing));
  }
  if (options.expert_exchange != nullptr) {
    if (options.drafting)
      return Status::Unimplemented("expert parallelism: the DSpark draft layers are not sharded; run without drafting");
    std::vector<ExpertSetWeights*> sets;
    for (V41BlockWeights& layer : model->weights_->layers) sets.push_back(&layer.moe);
    DI_RETURN_IF_ERROR(ShardExpertSets(options.expert_exchange, c.n_routed_experts, sets));
    options.expert_exchange->SetExpertWeightPages(CheckpointExpertPages(model->checkpoint_));
  }
  // Under expert parallelism the other members' experts are never read here: out of memory.
  std::function<bool(const TensorInfo&)> skip = IsEngramTable, remote;
  if (options.expert_exchange != nullptr) {
    const ExpertShard shard = ExpertShard::Of(c.n_routed_experts, options.expert_exchange->rank(),
                                              options.expert_exchange->size());
    remote = [shard](const TensorInfo& t) { return IsRemoteExpertTensor(t.name, shard); };
    skip = [remote](const TensorInfo& t) { return IsEngramTable(t) || remote(t); };
  }
  if (options.prefault) Prefault(model->checkpoint_, skip, options.progress);
  DI_RETURN_IF_ERROR(model->BuildCacheSpec());
  DI_ASSIGN_OR_RETURN(model->info_, ModelInfoFromConfig("DeepseekV41ForCausalLM", c, dir, model->checkpoint_,
                                                        model->spec_, model->weights_->dspark ? "dspark" : ""));
  if (model->weights_->dspark) model->info_.max_draft_steps = c.dspark.block_size;
  model->info_.supports_state_export = true;
  model->BuildRopeTables();
  // Last: every read of the load (the fingerprint's samples too, which fault whole neighbourhoods in) is done.
  if (remote) ReleaseTensorPages(model->checkpoint_, remote);
  return model;
}

Status V41Model::BuildCacheSpec() {
  const V41Config& c = config_;
  V41CacheLayout& L = layout_;
  L.window_bytes = kernels::KvQuantBytes(L.window_format, c.head_dim);
  L.latent_bytes = kernels::KvQuantBytes(L.latent_format, c.head_dim);
  L.key_bytes = kernels::KvQuantBytes(L.key_format, c.index_head_dim);
  spec_.groups.clear();
  // One latent group and one key group per KV-source ratio, in order of first appearance.
  std::vector<int64_t> ratios;
  for (int64_t src : c.kv_source_layer_ids)
    if (std::find(ratios.begin(), ratios.end(), c.compress_ratios[src]) == ratios.end())
      ratios.push_back(c.compress_ratios[src]);
  L.sources.assign(c.kv_source_layer_ids.size(), {});
  for (int64_t r : ratios) {
    kvcache::CacheGroupSpec latent{"latent_r" + std::to_string(r), kvcache::CacheKind::kSharedLatent,
                                   kvcache::CacheRetention::kPrefix, r, 0, kvcache::kBlockTokens, 0,
                                   ElementOf(L.latent_format, c.head_dim), 0};
    kvcache::CacheGroupSpec keys{"index_r" + std::to_string(r), kvcache::CacheKind::kIndexerKeys,
                                 kvcache::CacheRetention::kPrefix, r, 0, kvcache::kBlockTokens, 0,
                                 ElementOf(L.key_format, c.index_head_dim), 0};
    const int latent_group = static_cast<int>(spec_.groups.size());
    const int key_group = latent_group + 1;
    bool any_keys = false;
    for (size_t s = 0; s < c.kv_source_layer_ids.size(); ++s) {
      const int64_t layer = c.kv_source_layer_ids[s];
      if (c.compress_ratios[layer] != r) continue;
      L.sources[s].latent_group = latent_group;
      L.sources[s].latent_offset = latent.bytes_per_block;
      latent.bytes_per_block += kvcache::kBlockTokens / r * L.latent_bytes;
      ++latent.num_layers;
      if (c.layers[layer].index_source) {
        any_keys = true;
        L.sources[s].key_group = key_group;
        L.sources[s].key_offset = keys.bytes_per_block;
        keys.bytes_per_block += kvcache::kBlockTokens / r * L.key_bytes;
        ++keys.num_layers;
      }
    }
    spec_.groups.push_back(latent);
    if (any_keys) spec_.groups.push_back(keys);
  }
  kvcache::CacheGroupSpec window{"window", kvcache::CacheKind::kSlidingWindow, kvcache::CacheRetention::kWindow, 1,
                                 c.sliding_window, kvcache::kBlockTokens, 0, ElementOf(L.window_format, c.head_dim),
                                 c.num_layers};
  L.window_offset.clear();
  for (int64_t l = 0; l < c.num_layers; ++l) {
    L.window_offset.push_back(window.bytes_per_block);
    window.bytes_per_block += kvcache::kBlockTokens * L.window_bytes;
  }
  L.ids_offset = window.bytes_per_block;
  window.bytes_per_block += kvcache::kBlockTokens * 4;
  L.window_group = static_cast<int>(spec_.groups.size());
  spec_.groups.push_back(window);
  // Outside the blocks: the compressor and Engram rings (see the header).
  int64_t bytes = 0;
  for (int64_t src : c.kv_source_layer_ids) {
    const int64_t r = c.compress_ratios[src];
    if (r > 1) bytes += (kMaxRollback + r - 1) * 2 * c.head_dim * 4;
  }
  if (hashing_) bytes += (kMaxRollback + hashing_->max_ngram - 1) * 4;
  if (weights_->dspark)
    bytes += static_cast<int64_t>(weights_->dspark->layers.size()) * (c.sliding_window + kMaxRollback) * L.window_bytes +
             c.dspark.block_size * c.hidden_size * 4;
  spec_.sequence_state_bytes = bytes;
  return Status::Ok();
}

std::unique_ptr<SequenceState> V41Model::NewSequence() const {
  auto state = std::make_unique<V41SequenceState>(this, spec_.groups.size());
  const V41Config& c = config_;
  int64_t max_ratio = 1;
  for (int64_t src : c.kv_source_layer_ids) max_ratio = std::max(max_ratio, c.compress_ratios[src]);
  state->compressor_capacity = kMaxRollback + max_ratio - 1;
  state->compressor_rows.resize(c.kv_source_layer_ids.size());
  for (size_t s = 0; s < c.kv_source_layer_ids.size(); ++s)
    if (c.compress_ratios[c.kv_source_layer_ids[s]] > 1)
      state->compressor_rows[s].assign(static_cast<size_t>(state->compressor_capacity * 2 * c.head_dim), 0.0f);
  if (hashing_) {
    state->engram_capacity = kMaxRollback + hashing_->max_ngram - 1;
    state->engram_ids.assign(static_cast<size_t>(state->engram_capacity), 0);
  }
  if (weights_->dspark) {
    state->draft_capacity = c.sliding_window + kMaxRollback;
    state->draft_kv.assign(weights_->dspark->layers.size(),
                           std::vector<uint8_t>(static_cast<size_t>(state->draft_capacity * layout_.window_bytes)));
  }
  return state;
}

Status V41Model::Truncate(SequenceState& s, int64_t n) {
  if (s.owner() != this) return Status::InvalidArgument("Truncate: not a sequence state of this model");
  auto& state = static_cast<V41SequenceState&>(s);
  const int64_t have = state.num_tokens();
  if (n > have || n < 0)
    return Status::OutOfRange("Truncate to " + std::to_string(n) + " positions: the sequence has " + std::to_string(have));
  if (n < have - kMaxRollback || n < state.floor)
    return Status::OutOfRange("Truncate to " + std::to_string(n) + " positions: only the last " +
                              std::to_string(std::min(kMaxRollback, have - state.floor)) + " of " +
                              std::to_string(have) + " can be dropped from the sequence state");
  // Everything per sequence is addressed by position in rings that reach max_rollback back: the open
  // group and the n-grams at n are read from positions < n, which the rings still hold.
  state.SetTokens(n);
  return Status::Ok();
}

Result<std::unique_ptr<SequenceState>> V41Model::Fork(const SequenceState& s) {
  if (s.owner() != this) return Status::InvalidArgument("Fork: not a sequence state of this model");
  const auto& state = static_cast<const V41SequenceState&>(s);
  auto copy = std::make_unique<V41SequenceState>(this, spec_.groups.size());
  for (size_t g = 0; g < spec_.groups.size(); ++g) copy->block_table(g) = state.block_table(g);
  copy->compressor_rows = state.compressor_rows;
  copy->compressor_capacity = state.compressor_capacity;
  copy->engram_ids = state.engram_ids;
  copy->engram_capacity = state.engram_capacity;
  copy->floor = state.floor;
  copy->window_floor = state.window_floor;
  copy->engram_floor = state.engram_floor;
  copy->draft_kv = state.draft_kv;
  copy->draft_capacity = state.draft_capacity;
  copy->SetTokens(state.num_tokens());
  copy->draft_steps = state.draft_steps;
  copy->draft_hidden = state.draft_hidden;
  return std::unique_ptr<SequenceState>(std::move(copy));
}

Status V41Model::RestoreAt(SequenceState& s, int64_t position, RestoreFrom from, const kvcache::KvPools& pools) {
  if (s.owner() != this) return Status::InvalidArgument("RestoreAt: not a sequence state of this model");
  auto& state = static_cast<V41SequenceState&>(s);
  if (position < 0 || position % kvcache::kBlockTokens)
    return Status::InvalidArgument("RestoreAt: position " + std::to_string(position) + " is not a multiple of " +
                                   std::to_string(kvcache::kBlockTokens));
  if (pools.num_groups() != spec_.groups.size())
    return Status::InvalidArgument("RestoreAt: the pools have " + std::to_string(pools.num_groups()) + " groups, not " +
                                   std::to_string(spec_.groups.size()));
  for (size_t g = 0; g < spec_.groups.size(); ++g) {
    if (spec_.groups[g].retention != kvcache::CacheRetention::kPrefix) continue;
    const int64_t need = kvcache::BlocksFor(position);
    const std::vector<int32_t>& table = state.block_table(g);
    for (int64_t b = 0; b < need; ++b)
      if (b >= static_cast<int64_t>(table.size()) || !pools.group(g).contains(table[b]))
        return Status::InvalidArgument("RestoreAt " + std::to_string(position) + ": group '" + spec_.groups[g].name +
                                       "' has no valid block " + std::to_string(b));
  }
  const int32_t last =
      position > 0 ? state.block_at(static_cast<size_t>(layout_.window_group), position - 1) : kvcache::kNoBlock;
  if (from == RestoreFrom::kWindowBlocks && position > 0 && !pools.group(layout_.window_group).contains(last))
    return Status::InvalidArgument("RestoreAt " + std::to_string(position) +
                                   ": the window block before the position is not in the table");
  // The compressors hold no open group at a block boundary (every ratio divides the block), so what is left
  // is the Engram history: the window block ending at `position` holds its positions' compressed ids.
  state.SetTokens(position);
  state.floor = position;
  if (from == RestoreFrom::kWindowBlocks || position == 0) {
    state.window_floor = 0;
    state.engram_floor = 0;
    if (position > 0 && hashing_) {
      const auto* ids = reinterpret_cast<const int32_t*>(pools.group(layout_.window_group).block(last) + layout_.ids_offset);
      for (int64_t p = std::max<int64_t>(0, position - state.engram_capacity); p < position; ++p)
        state.engram_ids[p % state.engram_capacity] = ids[p % kvcache::kBlockTokens];
    }
  } else {
    state.window_floor = position;
    state.engram_floor = position;
  }
  return Status::Ok();
}

v41::Step V41Model::NewStep(kvcache::KvPools& pools) const {
  v41::Step step;
  InitStep(pool_, &pools, &main_inv_freq_, &compress_inv_freq_, precision_, &step);
  step.config = &config_;
  step.layout = &layout_;
  step.weights = weights_.get();
  step.hashing = hashing_.get();
  return step;
}

Status V41Model::Draft(std::span<const DraftChunk> batch, kvcache::KvPools& pools, ForwardOutput* out) {
  const V41Config& c = config_;
  ResetForwardOutput(c.vocab_size, info_.hidden_width, out);
  if (!weights_->dspark) return Status::FailedPrecondition("DeepSeek-V4.1: the model was loaded without drafting");
  std::unordered_set<const SequenceState*> seen;
  for (size_t ci = 0; ci < batch.size(); ++ci) {
    const DraftChunk& chunk = batch[ci];
    const std::string where = "draft chunk " + std::to_string(ci);
    if (chunk.state == nullptr || chunk.state->owner() != this)
      return Status::InvalidArgument(where + ": not a sequence state of this model");
    if (!seen.insert(chunk.state).second) return Status::InvalidArgument(where + ": the sequence appears twice");
    if (chunk.token < 0 || chunk.token >= c.vocab_size)
      return Status::OutOfRange(where + ": token id " + std::to_string(chunk.token) + " outside the vocabulary");
    if (chunk.hidden != nullptr || chunk.want_hidden)
      return Status::InvalidArgument(where + ": DSpark reads the target's context from the sequence state and keeps "
                                     "its hidden rows to itself (no hidden in or out)");
    const auto* state = static_cast<const V41SequenceState*>(chunk.state);
    if (state->draft_steps >= c.dspark.block_size)
      return Status::OutOfRange(where + ": a DSpark block drafts at most " + std::to_string(c.dspark.block_size) +
                                " tokens (dspark_block_size) before the next Forward or Truncate");
    if (state->num_tokens() + c.dspark.block_size > c.max_position_embeddings)
      return Status::OutOfRange(where + ": the draft block passes max_position_embeddings");
  }
  // The blocks to run: one per sequence at its first draft step (the anchor, then the noise token).
  v41::Step step = NewStep(pools);
  for (size_t ci = 0; ci < batch.size(); ++ci) {
    auto* state = static_cast<V41SequenceState*>(batch[ci].state);
    if (state->draft_steps != 0) continue;
    const int64_t start = state->num_tokens();
    step.chunks.push_back({state, step.num_rows(), c.dspark.block_size, start, false});
    for (int64_t j = 0; j < c.dspark.block_size; ++j)
      step.rows.push_back({j == 0 ? batch[ci].token : static_cast<int32_t>(c.dspark.noise_token_id), start + j,
                           static_cast<int32_t>(step.chunks.size() - 1)});
  }
  if (!step.chunks.empty()) v41::DraftBlock(step);
  // Step k of each sequence: the block's base logits at row k plus the Markov bias of the token consumed.
  const int64_t d = c.hidden_size, v = c.vocab_size, m = static_cast<int64_t>(batch.size());
  std::vector<float> rows(static_cast<size_t>(m * d));
  for (int64_t i = 0; i < m; ++i) {
    const auto* state = static_cast<const V41SequenceState*>(batch[i].state);
    std::copy(state->draft_hidden.begin() + state->draft_steps * d, state->draft_hidden.begin() + (state->draft_steps + 1) * d,
              rows.begin() + i * d);
  }
  out->logits.resize(static_cast<size_t>(m * v));
  out->confidence.resize(static_cast<size_t>(m));
  kernels::Linear(rows.data(), m, d, weights_->head, out->logits.data(), v, step.linear, step.pool);
  for (int64_t i = 0; i < m; ++i) {
    out->confidence[static_cast<size_t>(i)] =
        v41::MarkovBias(step, batch[i].token, rows.data() + i * d, out->logits.data() + i * v);
    out->first_row.push_back(i);
    out->num_rows.push_back(1);
    ++static_cast<V41SequenceState*>(batch[i].state)->draft_steps;
  }
  return Status::Ok();
}

Result<StepCost> V41Model::EstimateStepCost(std::span<const ChunkShape> chunks) const {
  const V41Config& c = config_;
  const V41Weights& w = *weights_;
  auto mat = [](const kernels::WeightView& v) { return static_cast<double>(v.out_features) * v.in_features; };
  auto bytes = [](const kernels::WeightView& v) { return static_cast<double>(kernels::WeightBytes(v)); };
  StepCost cost;
  double rows = 0, logits = 0;
  for (const ChunkShape& ch : chunks) {
    rows += static_cast<double>(ch.tokens);
    logits += static_cast<double>(ch.logits_rows);
  }
  cost.flops += 2.0 * logits * mat(w.head);
  cost.weight_bytes += bytes(w.head);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const V41BlockWeights& b = w.layers[l];
    const V41AttentionWeights& a = b.attention;
    double dense = mat(a.wq_a) + mat(a.wq_b) + mat(a.wkv) + mat(a.wo_b) + mat(b.moe.gate) + mat(b.attn_hc.fn_view) +
                   mat(b.ffn_hc.fn_view) + mat(b.moe.shared.w1) + mat(b.moe.shared.w2) + mat(b.moe.shared.w3);
    double dense_bytes = bytes(a.wq_a) + bytes(a.wq_b) + bytes(a.wkv) + bytes(a.wo_b) + bytes(b.moe.gate) +
                         bytes(b.moe.shared.w1) + bytes(b.moe.shared.w2) + bytes(b.moe.shared.w3) +
                         4.0 * static_cast<double>(b.attn_hc.fn.size() + b.ffn_hc.fn.size());
    for (const auto& g : a.wo_a_groups) {
      dense += mat(g);
      dense_bytes += bytes(g);
    }
    if (a.compressor) {
      dense += mat(a.compressor->wkv) + (a.compressor->ratio > 1 ? mat(a.compressor->wgate) : 0);
      dense_bytes += bytes(a.compressor->wkv) + (a.compressor->ratio > 1 ? bytes(a.compressor->wgate) : 0);
    }
    if (a.indexer) {
      dense += mat(a.indexer->wq_b) + mat(a.indexer->weights_proj);
      dense_bytes += bytes(a.indexer->wq_b) + bytes(a.indexer->weights_proj);
    }
    const ExpertWeights& e = b.moe.experts[0];
    const double expert = mat(e.w1) + mat(e.w2) + mat(e.w3), expert_bytes = bytes(e.w1) + bytes(e.w2) + bytes(e.w3);
    const double k = static_cast<double>(c.num_experts_per_tok), ne = static_cast<double>(c.n_routed_experts);
    cost.flops += 2.0 * rows * (dense + k * expert);
    cost.weight_bytes += dense_bytes + ne * (1.0 - std::pow(1.0 - k / ne, rows)) * expert_bytes;
    if (b.engram) {
      cost.flops += 2.0 * rows * mat(b.engram->wkv);
      cost.weight_bytes += bytes(b.engram->wkv) + rows * c.engram.num_columns() * b.engram->table.row_bytes();
    }
    // Attention and indexer arithmetic and KV bytes, position by position.
    const V41LayerPlan& plan = c.layers[l];
    for (const ChunkShape& ch : chunks) {
      for (int64_t p = ch.start; p < ch.start + ch.tokens; ++p) {
        const double window = static_cast<double>(std::min(p + 1, c.sliding_window));
        double latents = 0, keys = 0;
        if (plan.ratio > 0 && plan.index_layer >= 0) {
          const double count = static_cast<double>((p + 1) / plan.ratio);
          latents = std::min(count, static_cast<double>(c.index_topk));
          if (plan.index_source) keys = count;
        }
        cost.flops += 2.0 * (2.0 * c.num_heads * c.head_dim * (window + latents) +
                             static_cast<double>(c.index_n_heads) * c.index_head_dim * keys);
        cost.kv_bytes += window * layout_.window_bytes + latents * layout_.latent_bytes + keys * layout_.key_bytes;
      }
    }
  }
  return cost;
}

Status V41Model::Forward(std::span<const SequenceChunk> batch, kvcache::KvPools& pools, ForwardOutput* out) {
  return Run(batch, pools, out, nullptr, nullptr);
}

Status V41Model::ForwardProbed(std::span<const SequenceChunk> batch, kvcache::KvPools& pools, ForwardOutput* out,
                               V41Trace* trace, V41Probe* probe) {
  return Run(batch, pools, out, trace, probe);
}

Status V41Model::Run(std::span<const SequenceChunk> batch, kvcache::KvPools& pools, ForwardOutput* out, V41Trace* trace,
                     V41Probe* probe) {
  const V41Config& c = config_;
  ResetForwardOutput(c.vocab_size, info_.hidden_width, out);
  if (batch.empty()) {
    // An expert-parallel member without rows serves its experts to the others in every layer.
    if (!weights_->layers.empty() && weights_->layers[0].moe.exchange != nullptr) {
      v41::Step step = NewStep(pools);
      for (int64_t l = 0; l < c.num_layers; ++l) v41::Moe(step, l, nullptr, nullptr);
    }
    return Status::Ok();
  }
  v41::Step step = NewStep(pools);
  step.probe = probe;
  bool want_hidden = false;
  DI_RETURN_IF_ERROR(LayOutBatch(batch, BatchRules{this, c.vocab_size, c.max_position_embeddings, true}, spec_, pools,
                                 &step, &want_hidden));

  const int64_t n = step.num_rows(), hc = c.hc_mult, d = c.hidden_size, v = c.vocab_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  std::vector<float> streams(static_cast<size_t>(n * hc * d));
  {
    ScopedPhase phase(Phase::kEmbed);
    EmbedIntoStreams(*weights_->embed, step.rows, hc, d, *step.pool, streams.data());
  }
  v41::SinglePassMhc mhc(c, n);
  std::vector<float> collapsed(static_cast<size_t>(n * d)), sub(static_cast<size_t>(n * d));
  if (trace) *trace = V41Trace{};
  auto record = [&](std::vector<float>* where) {
    if (trace) where->insert(where->end(), collapsed.begin(), collapsed.end());
  };
  // With drafting, the attention inputs (mean over the streams) of the DSpark target layers, for the context.
  const int64_t targets = static_cast<int64_t>(c.dspark.target_layer_ids.size());
  std::vector<float> target_inputs;
  if (weights_->dspark) target_inputs.resize(static_cast<size_t>(n * targets * d));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const V41BlockWeights& w = weights_->layers[l];
    if (w.engram) v41::Engram(step, l, streams.data());
    if (weights_->dspark) {
      for (int64_t t = 0; t < targets; ++t) {
        if (c.dspark.target_layer_ids[t] != l) continue;
        ForRows(*step.pool, n, [&](int64_t i) {
          float* dst = target_inputs.data() + (i * targets + t) * d;
          const float* x = streams.data() + i * hc * d;
          for (int64_t e = 0; e < d; ++e) {
            float sum = 0;
            for (int64_t j = 0; j < hc; ++j) sum += x[j * d + e];
            dst[e] = sum / static_cast<float>(hc);
          }
        });
      }
    }
    // Each site: its input, normalised; the sub-block; its output spread back over the streams.
    auto site = [&](const HyperConnectionWeights& hc_weights, const std::vector<float>& norm,
                    std::vector<float>* trace_in, auto&& sub_block) {
      {
        ScopedPhase phase(Phase::kHcPre);
        mhc.Collapse(hc_weights, streams.data(), collapsed.data(), *step.pool);
        record(trace_in);
        kernels::RmsNormRows(collapsed.data(), d, norm.data(), eps, n, d, collapsed.data(), d);
      }
      sub_block();
      ScopedPhase phase(Phase::kHcPost);
      mhc.Expand(sub.data(), streams.data(), *step.pool);
    };
    site(w.attn_hc, w.attn_norm, trace ? &trace->attn_in : nullptr,
         [&] { v41::Attention(step, l, collapsed.data(), sub.data()); });
    site(w.ffn_hc, w.ffn_norm, trace ? &trace->ffn_in : nullptr, [&] { v41::Moe(step, l, collapsed.data(), sub.data()); });
  }

  // Logits (and hidden states) for the rows asked for: the last pre collapses the streams, then norm, head.
  const std::vector<float>& pre_mix = mhc.pre_mix();
  const std::vector<int64_t> wanted = PickLogitRows(batch, step.chunks, out);
  {
    ScopedPhase phase(Phase::kHead);
    const int64_t m = static_cast<int64_t>(wanted.size());
    std::vector<float> picked(static_cast<size_t>(m * hc * d)), picked_pre(static_cast<size_t>(m * hc));
    for (int64_t r = 0; r < m; ++r) {
      std::copy(streams.data() + wanted[r] * hc * d, streams.data() + (wanted[r] + 1) * hc * d,
                picked.data() + r * hc * d);
      std::copy(pre_mix.data() + wanted[r] * hc, pre_mix.data() + (wanted[r] + 1) * hc, picked_pre.data() + r * hc);
    }
    std::vector<float> y(static_cast<size_t>(m * d));
    HcCollapse(HcShape::Of(c), picked_pre.data(), picked.data(), m, y.data(), *step.pool);
    if (trace) {
      trace->final_norm_in.resize(static_cast<size_t>(n * d));
      HcCollapse(HcShape::Of(c), pre_mix.data(), streams.data(), n, trace->final_norm_in.data(), *step.pool);
    }
    kernels::RmsNormRows(y.data(), d, weights_->norm.data(), eps, m, d, y.data(), d);
    out->logits.resize(static_cast<size_t>(m * v));
    kernels::Linear(y.data(), m, d, weights_->head, out->logits.data(), v, step.linear, step.pool);
    if (want_hidden) out->hidden.assign(picked.begin(), picked.end());
  }

  if (weights_->dspark) v41::StoreDraftContext(step, target_inputs.data());

  // The Engram ids of the new positions: into the ring (for the next chunk's n-grams) and the window
  // block (for RestoreAt).
  for (const v41::ChunkRows& chunk : step.chunks) {
    V41SequenceState& state = *chunk.state;
    if (hashing_) {
      for (int64_t i = 0; i < chunk.num_rows; ++i) {
        const int64_t pos = chunk.start_pos + i;
        const int32_t id = hashing_->token_map[step.rows[chunk.first_row + i].token];
        state.engram_ids[pos % state.engram_capacity] = id;
        *v41::EngramIdSlot(step, chunk, pos) = id;
      }
    }
    state.SetTokens(chunk.start_pos + chunk.num_rows);
  }
  return Status::Ok();
}

}  // namespace deepinfer::model
