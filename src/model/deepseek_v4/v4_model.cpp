#include "model/deepseek_v4/v4_model.h"

#include <algorithm>
#include <unordered_set>

#include "core/hash.h"
#include "core/hf_config.h"
#include "core/log.h"
#include "core/mapped_file.h"
#include "core/thread_pool.h"
#include "core/weight_scan.h"
#include "kernels/elementwise.h"
#include "kernels/linear.h"
#include "model/common/checkpoint_io.h"
#include "model/common/model_info.h"
#include "model/deepseek_v4/v4_internal.h"
#include "model/deepseek_v4/v4_state.h"
#include "model/step_profile.h"

namespace deepinfer::model {

namespace v4 {

void Block(const Step& step, const BlockRef& block, float* streams) {
  const V4Config& c = *step.config;
  const V4BlockWeights& w = *block.weights;
  const int64_t n = step.num_rows(), hc = c.hc_mult, d = c.hidden_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const HcShape hc_shape = HcShape::Of(c);
  // V4 collapses each sub-block's input with its own site's pre.
  std::vector<float> pre(static_cast<size_t>(n * hc)), post(pre.size()), comb(static_cast<size_t>(n * hc * hc));
  std::vector<float> collapsed(static_cast<size_t>(n * d)), out(static_cast<size_t>(n * d));
  // Each site: its input, normalised; the sub-block; its output spread back over the streams.
  auto site = [&](const HyperConnectionWeights& hc_weights, const std::vector<float>& norm, auto&& sub_block) {
    {
      ScopedPhase phase(Phase::kHcPre);
      HcCoefficients(hc_shape, hc_weights, streams, n, pre.data(), post.data(), comb.data(), *step.pool);
      HcCollapse(hc_shape, pre.data(), streams, n, collapsed.data(), *step.pool);
      kernels::RmsNormRows(collapsed.data(), d, norm.data(), eps, n, d, collapsed.data(), d);
    }
    sub_block();
    ScopedPhase phase(Phase::kHcPost);
    HcExpand(hc_shape, post.data(), comb.data(), out.data(), n, streams, *step.pool);
  };
  site(w.attn_hc, w.attn_norm, [&] { Attention(step, block, collapsed.data(), out.data()); });
  site(w.ffn_hc, w.ffn_norm, [&] { Moe(step, block, collapsed.data(), out.data()); });
}

}  // namespace v4

Result<std::unique_ptr<V4Model>> V4Model::Load(const std::string& dir, const LoadOptions& options) {
  std::unique_ptr<V4Model> model(new V4Model());
  model->TakeOptions(options);
  model->kv_bf16_ = options.kv_precision == KvPrecision::kBF16;
  DI_ASSIGN_OR_RETURN(HfConfig hf, HfConfig::Load(dir));
  DI_ASSIGN_OR_RETURN(model->config_, V4Config::FromHf(hf));
  DI_ASSIGN_OR_RETURN(model->checkpoint_, Checkpoint::Open(dir));
  DI_ASSIGN_OR_RETURN(model->weights_, LoadV4Weights(model->checkpoint_, model->config_));
  // NaN/Inf weights load (the forward pass stays faithful), but such a model gives NaN logits wherever they
  // reach: a loud warning once, rather than a server answering with empty completions (core/weight_scan.h).
  if (const NonFiniteReport bad = ScanNonFinite(model->checkpoint_, model->pool_); bad.values > 0) {
    DI_LOG(kWarn, "checkpoint holds NaN or Inf weights; outputs they reach will be NaN")
        .Field("dir", dir).Field("values", bad.values).Field("tensors", bad.tensors).Field("first", bad.first);
  }
  if (options.drafting) {
    if (model->weights_->mtp.empty())
      return Status::FailedPrecondition(dir + ": drafting needs the MTP layer, and the checkpoint has none");
    if (model->config_.mtp_attention_type != V4AttentionType::kSliding)
      return Status::Unimplemented("DeepSeek-V4: drafting with a compressed MTP layer is not implemented");
    model->drafting_ = true;
  }
  if (options.expert_exchange != nullptr) {
    if (options.drafting)
      return Status::Unimplemented("expert parallelism: the MTP draft layer is not sharded; run without drafting");
    std::vector<ExpertSetWeights*> sets;
    for (V4BlockWeights& layer : model->weights_->layers) sets.push_back(&layer.moe);
    DI_RETURN_IF_ERROR(ShardExpertSets(options.expert_exchange, model->config_.n_routed_experts, sets));
    options.expert_exchange->SetExpertWeightPages(CheckpointExpertPages(model->checkpoint_));
  }
  // Under expert parallelism the other members' experts are never read here: out of memory.
  std::function<bool(const TensorInfo&)> remote;
  if (options.expert_exchange != nullptr) {
    const ExpertShard shard = ExpertShard::Of(model->config_.n_routed_experts, options.expert_exchange->rank(),
                                              options.expert_exchange->size());
    remote = [shard](const TensorInfo& t) { return IsRemoteExpertTensor(t.name, shard); };
  }
  if (options.prefault) Prefault(model->checkpoint_, remote, options.progress);
  const V4Config& c = model->config_;
  DI_RETURN_IF_ERROR(model->BuildCacheSpec());
  model->ComputeCostFigures();
  DI_ASSIGN_OR_RETURN(model->info_, ModelInfoFromConfig("DeepseekV4ForCausalLM", c, dir, model->checkpoint_,
                                                        model->spec_, model->drafting_ ? "mtp" : ""));
  model->info_.supports_state_export = true;
  model->BuildRopeTables();
  // Last: every read of the load (the fingerprint's samples too, which fault whole neighbourhoods in) is done.
  if (remote) ReleaseTensorPages(model->checkpoint_, remote);
  return model;
}

Status V4Model::BuildCacheSpec() {
  const V4Config& c = config_;
  // Groups are made in a fixed order: compressed entries by ratio (CSA ratios, then HCA ones), indexer
  // keys by ratio, the window. Offsets are in floats.
  // Offsets and sizes in bytes: entries in the KV precision, the boundary state in fp32.
  const int64_t eb = kv_bf16_ ? 2 : 4, fb = static_cast<int64_t>(sizeof(float));
  struct Pending {
    kvcache::CacheGroupSpec spec;
    int64_t bytes = 0;
  };
  std::vector<Pending> groups;
  auto group_for = [&](const std::string& name, kvcache::CacheKind kind, int64_t ratio) -> int {
    for (size_t g = 0; g < groups.size(); ++g)
      if (groups[g].spec.kind == kind && groups[g].spec.name == name) return static_cast<int>(g);
    Pending p;
    p.spec.name = name;
    p.spec.kind = kind;
    p.spec.retention = kvcache::CacheRetention::kPrefix;
    p.spec.ratio = ratio;
    groups.push_back(p);
    return static_cast<int>(groups.size()) - 1;
  };
  std::vector<int64_t> csa_ratios, hca_ratios;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const int64_t r = c.compress_ratios[l];
    if (r == 0) continue;
    if (kvcache::kBlockTokens % r != 0)
      return Status::Unimplemented("DeepSeek-V4: layer " + std::to_string(l) + "'s compress ratio " +
                                   std::to_string(r) + " does not divide the " + std::to_string(kvcache::kBlockTokens) +
                                   "-position KV block");
    auto& list = c.attention_types[l] == V4AttentionType::kCsa ? csa_ratios : hca_ratios;
    if (std::find(list.begin(), list.end(), r) == list.end()) list.push_back(r);
  }
  auto kv_name = [&](V4AttentionType type, int64_t r) {
    const bool csa = type == V4AttentionType::kCsa;
    const auto& list = csa ? csa_ratios : hca_ratios;
    return std::string(csa ? "csa_kv" : "hca_kv") + (list.size() > 1 ? std::to_string(r) : "");
  };
  auto index_name = [&](int64_t r) { return "csa_index" + (csa_ratios.size() > 1 ? std::to_string(r) : std::string()); };
  for (int64_t r : csa_ratios) group_for(kv_name(V4AttentionType::kCsa, r), kvcache::CacheKind::kCompressed, r);
  for (int64_t r : hca_ratios) group_for(kv_name(V4AttentionType::kHca, r), kvcache::CacheKind::kCompressed, r);
  for (int64_t r : csa_ratios) group_for(index_name(r), kvcache::CacheKind::kIndexerKeys, r);
  layout_.layers.assign(static_cast<size_t>(c.num_layers), {});
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const int64_t r = c.compress_ratios[l];
    if (r == 0) continue;
    V4CacheLayout::Layer& layer = layout_.layers[l];
    Pending& kv = groups[group_for(kv_name(c.attention_types[l], r), kvcache::CacheKind::kCompressed, r)];
    layer.kv_group = group_for(kv_name(c.attention_types[l], r), kvcache::CacheKind::kCompressed, r);
    layer.kv_offset = kv.bytes;
    kv.bytes += kvcache::kBlockTokens / r * c.head_dim * eb;
    ++kv.spec.num_layers;
    if (c.attention_types[l] == V4AttentionType::kCsa) {
      layer.index_group = group_for(index_name(r), kvcache::CacheKind::kIndexerKeys, r);
      Pending& index = groups[layer.index_group];
      layer.index_offset = index.bytes;
      index.bytes += kvcache::kBlockTokens / r * c.index_head_dim * eb;
      ++index.spec.num_layers;
    }
  }
  Pending window;
  window.spec.name = "window";
  window.spec.kind = kvcache::CacheKind::kSlidingWindow;
  window.spec.retention = kvcache::CacheRetention::kWindow;
  window.spec.window = c.sliding_window;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    layout_.layers[l].window_offset = window.bytes;
    window.bytes += kvcache::kBlockTokens * c.head_dim * eb;
    ++window.spec.num_layers;
  }
  if (drafting_) {
    layout_.mtp.window_offset = window.bytes;
    window.bytes += kvcache::kBlockTokens * c.head_dim * eb;
    ++window.spec.num_layers;
  }
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const V4AttentionWeights& a = weights_->layers[l].attention;
    if (a.compressor && a.compressor->overlapping) {
      layout_.layers[l].kv_boundary_offset = window.bytes;
      window.bytes += v4::CompressorBoundaryFloats(*a.compressor) * fb;
    }
    if (a.indexer) {
      if (!a.indexer->compressor.overlapping)
        return Status::Unimplemented("DeepSeek-V4: layer " + std::to_string(l) + "'s indexer compressor does not overlap");
      layout_.layers[l].index_boundary_offset = window.bytes;
      window.bytes += v4::CompressorBoundaryFloats(a.indexer->compressor) * fb;
    }
  }
  if (drafting_) {
    layout_.hidden_offset = window.bytes;
    window.bytes += c.hc_mult * c.hidden_size * fb;
  }
  groups.push_back(window);
  layout_.window_group = static_cast<int>(groups.size()) - 1;
  spec_.groups.clear();
  for (Pending& g : groups) {
    g.spec.bytes_per_block = g.bytes;
    g.spec.element = kv_bf16_ ? kvcache::CacheElement::kBF16 : kvcache::CacheElement::kF32;
    spec_.groups.push_back(g.spec);
  }
  // Outside the blocks: each compressor's recent raw rows (kv and gate); drafting: recent hidden states.
  int64_t floats = 0;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const V4AttentionWeights& a = weights_->layers[l].attention;
    auto rows = [](const V4CompressorWeights& w) {
      return v4::CompressorCapacity(w) * 2 * (w.overlapping ? 2 : 1) * w.head_dim;
    };
    if (a.compressor) floats += rows(*a.compressor);
    if (a.indexer) floats += rows(a.indexer->compressor);
  }
  if (drafting_) floats += (kV4MaxRollback + 2) * c.hc_mult * c.hidden_size;
  spec_.sequence_state_bytes = floats * static_cast<int64_t>(sizeof(float));
  return Status::Ok();
}

std::unique_ptr<SequenceState> V4Model::NewSequence() const {
  auto state = std::make_unique<V4SequenceState>(this, spec_.groups.size());
  state->layers.resize(config_.num_layers);
  if (drafting_) {
    const int64_t width = config_.hc_mult * config_.hidden_size;
    state->hidden.assign(static_cast<size_t>((kV4MaxRollback + 1) * width), 0.0f);
    state->draft_hidden.assign(static_cast<size_t>(width), 0.0f);
  }
  return state;
}

Status V4Model::Truncate(SequenceState& base, int64_t n) {
  if (base.owner() != this) return Status::InvalidArgument("Truncate: not a sequence state of this model");
  auto& state = static_cast<V4SequenceState&>(base);
  // The compressors' rows reach back kV4MaxRollback positions (plus their windows) from the most positions
  // the state has held; a restore leaves nothing before its position.
  const int64_t lowest = std::max(state.rollback_floor, state.high_water - kV4MaxRollback);
  if (n > state.num_tokens() || n < lowest)
    return Status::OutOfRange("Truncate to " + std::to_string(n) + " positions: the sequence has " +
                              std::to_string(state.num_tokens()) + " and can go back to " + std::to_string(lowest));
  state.SetPosition(n);
  state.draft_steps = 0;
  return Status::Ok();
}

Result<std::unique_ptr<SequenceState>> V4Model::Fork(const SequenceState& base) {
  if (base.owner() != this) return Status::InvalidArgument("Fork: not a sequence state of this model");
  return std::unique_ptr<SequenceState>(std::make_unique<V4SequenceState>(static_cast<const V4SequenceState&>(base)));
}

Status V4Model::RestoreAt(SequenceState& base, int64_t position, RestoreFrom from, const kvcache::KvPools& pools) {
  if (base.owner() != this) return Status::InvalidArgument("RestoreAt: not a sequence state of this model");
  auto& state = static_cast<V4SequenceState&>(base);
  if (position < 0 || position % kvcache::kBlockTokens != 0)
    return Status::InvalidArgument("RestoreAt: position " + std::to_string(position) + " is not a multiple of " +
                                   std::to_string(kvcache::kBlockTokens));
  if (Status s = CheckPools(spec_, pools); !s.ok()) return s.WithContext("RestoreAt");
  for (size_t g = 0; g < spec_.groups.size(); ++g) {
    if (spec_.groups[g].retention != kvcache::CacheRetention::kPrefix) continue;
    for (int64_t b = 0; b < kvcache::BlocksFor(position); ++b) {
      if (!pools.group(g).contains(state.block_at(g, b * kvcache::kBlockTokens)))
        return Status::InvalidArgument("RestoreAt " + std::to_string(position) + ": group '" + spec_.groups[g].name +
                                       "' has no valid block " + std::to_string(b));
    }
  }
  const bool window = from == RestoreFrom::kWindowBlocks && position > 0;
  const size_t wg = static_cast<size_t>(layout_.window_group);
  const int32_t boundary_block = window ? state.block_at(wg, position - 1) : kvcache::kNoBlock;
  if (window && !pools.group(wg).contains(boundary_block))
    return Status::InvalidArgument("RestoreAt " + std::to_string(position) + " from window blocks: window block " +
                                   std::to_string(position / kvcache::kBlockTokens - 1) + " is not valid");
  // Validated: replace the per-sequence state.
  for (V4LayerState& ls : state.layers) ls = V4LayerState{};
  state.draft_steps = 0;
  state.mtp_floor = window ? 0 : position;
  state.SetPosition(position);
  state.high_water = position;
  state.rollback_floor = position;
  state.window_floor = window ? 0 : position;
  state.compress_floor = window ? 0 : position;
  if (window) {
    const uint8_t* block = pools.group(wg).block(boundary_block);
    for (int64_t l = 0; l < config_.num_layers; ++l) {
      const V4AttentionWeights& a = weights_->layers[l].attention;
      const V4CacheLayout::Layer& where = layout_.layers[l];
      if (where.kv_boundary_offset >= 0)
        v4::LoadCompressorBoundary(*a.compressor, state.layers[l].compressor, position,
                                   reinterpret_cast<const float*>(block + where.kv_boundary_offset));
      if (where.index_boundary_offset >= 0)
        v4::LoadCompressorBoundary(a.indexer->compressor, state.layers[l].index_compressor, position,
                                   reinterpret_cast<const float*>(block + where.index_boundary_offset));
    }
    if (drafting_) {
      const int64_t width = config_.hc_mult * config_.hidden_size;
      const float* h = reinterpret_cast<const float*>(block + layout_.hidden_offset);
      std::copy(h, h + width, state.hidden.begin() + ((position - 1) % (kV4MaxRollback + 1)) * width);
    }
  }
  return Status::Ok();
}

v4::Step V4Model::NewStep(kvcache::KvPools& pools) const {
  v4::Step step;
  InitStep(pool_, &pools, &main_inv_freq_, &compress_inv_freq_, precision_, &step);
  step.config = &config_;
  step.layout = &layout_;
  step.kv_bf16 = kv_bf16_;
  return step;
}

void V4Model::Head(const v4::Step& step, const HyperConnectionWeights& hc_head, const std::vector<float>& norm,
                   const float* streams, int64_t m, std::vector<float>* logits) const {
  ScopedPhase phase(Phase::kHead);
  const int64_t d = config_.hidden_size, v = config_.vocab_size;
  std::vector<float> y(static_cast<size_t>(m * d));
  HcHead(HcShape::Of(config_), hc_head, streams, m, y.data(), *step.pool);
  kernels::RmsNormRows(y.data(), d, norm.data(), static_cast<float>(config_.rms_norm_eps), m, d, y.data(), d);
  logits->resize(static_cast<size_t>(m * v));
  kernels::Linear(y.data(), m, d, weights_->head, logits->data(), v, step.linear, step.pool);
}

std::vector<float> V4Model::RunMtp(const v4::Step& step, const float* hidden) const {
  ScopedPhase phase(Phase::kMtp);
  const V4Config& c = config_;
  const int64_t n = step.num_rows(), hc = c.hc_mult, d = c.hidden_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  // x = e_proj(enorm(embed(next))) broadcast over the streams + h_proj(hnorm(stream)), then one block.
  const V4MtpWeights& mw = weights_->mtp[0];
  std::vector<float> e(static_cast<size_t>(n * d)), ep(static_cast<size_t>(n * d));
  for (int64_t i = 0; i < n; ++i) EmbeddingRow(*weights_->embed, step.rows[i].token, d, e.data() + i * d);
  kernels::RmsNormRows(e.data(), d, mw.enorm.data(), eps, n, d, e.data(), d);
  kernels::Linear(e.data(), n, d, mw.e_proj, ep.data(), d, step.linear, step.pool);
  std::vector<float> hn(static_cast<size_t>(n * hc * d)), x(static_cast<size_t>(n * hc * d));
  kernels::RmsNormRows(hidden, d, mw.hnorm.data(), eps, n * hc, d, hn.data(), d);
  kernels::Linear(hn.data(), n * hc, d, mw.h_proj, x.data(), d, step.linear, step.pool);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < hc; ++j)
      for (int64_t k = 0; k < d; ++k) x[(i * hc + j) * d + k] += ep[i * d + k];
  v4::BlockRef block{&mw.block, c.mtp_attention_type, 0, V4RouterType::kScore, 0, true};
  v4::Block(step, block, x.data());
  return x;
}

Status V4Model::Draft(std::span<const DraftChunk> batch, kvcache::KvPools& pools, ForwardOutput* out) {
  if (!drafting_) return Status::FailedPrecondition("DeepSeek-V4: the model was loaded without drafting");
  const V4Config& c = config_;
  const int64_t width = c.hc_mult * c.hidden_size;
  ResetForwardOutput(c.vocab_size, info_.hidden_width, out);
  if (batch.empty()) return Status::Ok();
  // Validate everything before any state changes.
  DI_RETURN_IF_ERROR(CheckPools(spec_, pools));
  std::unordered_set<const SequenceState*> seen;
  v4::Step step = NewStep(pools);
  bool want_hidden = false;
  std::vector<float> hidden(static_cast<size_t>(batch.size() * width));
  const size_t wg = static_cast<size_t>(layout_.window_group);
  for (size_t ci = 0; ci < batch.size(); ++ci) {
    const DraftChunk& chunk = batch[ci];
    const std::string where = "draft chunk " + std::to_string(ci);
    if (chunk.state == nullptr || chunk.state->owner() != this)
      return Status::InvalidArgument(where + ": not a sequence state of this model");
    auto* state = static_cast<V4SequenceState*>(chunk.state);
    if (!seen.insert(state).second) return Status::InvalidArgument(where + ": the sequence appears twice");
    if (chunk.token < 0 || chunk.token >= c.vocab_size)
      return Status::OutOfRange(where + ": token id " + std::to_string(chunk.token) + " outside the vocabulary");
    // The MTP layer's position: the one before the consumed token's.
    const int64_t slot = state->num_tokens() + state->draft_steps, pos = slot - 1;
    if (pos < state->mtp_floor)
      return Status::FailedPrecondition(where + ": no hidden state before position " + std::to_string(slot) +
                                        " to draft from (a fresh or window-less restored sequence needs a Forward first)");
    const kvcache::BlockSpan need = kvcache::BlocksNeeded(spec_.groups[wg], slot, slot + 1);
    const std::vector<int32_t>& table = state->block_table(wg);
    if (static_cast<int64_t>(table.size()) < need.end)
      return Status::InvalidArgument(where + ": the window block table does not reach position " + std::to_string(slot));
    for (int64_t b = need.first; b < need.end; ++b) {
      if (!pools.group(wg).contains(table[b]))
        return Status::OutOfRange(where + ": window block " + std::to_string(b) + " is not in the pool");
    }
    const float* h = chunk.hidden != nullptr ? chunk.hidden
                     : state->draft_steps == 0
                         ? state->hidden.data() + (pos % (kV4MaxRollback + 1)) * width
                         : state->draft_hidden.data();
    std::copy(h, h + width, hidden.begin() + static_cast<int64_t>(ci) * width);
    want_hidden = want_hidden || chunk.want_hidden;
    step.rows.push_back({chunk.token, pos, static_cast<int32_t>(ci)});
    step.chunks.push_back({state, static_cast<int64_t>(ci), 1, pos, false});
  }
  std::vector<float> x = RunMtp(step, hidden.data());
  const V4MtpWeights& mw = weights_->mtp[0];
  Head(step, mw.hc_head, mw.norm, x.data(), static_cast<int64_t>(batch.size()), &out->logits);
  if (want_hidden) out->hidden.assign(x.begin(), x.end());
  for (size_t ci = 0; ci < batch.size(); ++ci) {
    out->first_row.push_back(static_cast<int64_t>(ci));
    out->num_rows.push_back(1);
    auto* state = static_cast<V4SequenceState*>(batch[ci].state);
    std::copy(x.begin() + static_cast<int64_t>(ci) * width, x.begin() + static_cast<int64_t>(ci + 1) * width,
              state->draft_hidden.begin());
    ++state->draft_steps;
  }
  return Status::Ok();
}

Status V4Model::Forward(std::span<const SequenceChunk> batch, kvcache::KvPools& pools, ForwardOutput* out) {
  const V4Config& c = config_;
  ResetForwardOutput(c.vocab_size, info_.hidden_width, out);
  if (batch.empty()) {
    // An expert-parallel member without rows serves its experts to the others in every layer.
    if (!weights_->layers.empty() && weights_->layers[0].moe.exchange != nullptr) {
      v4::Step step = NewStep(pools);
      for (int64_t l = 0; l < c.num_layers; ++l) {
        v4::BlockRef block{&weights_->layers[l], c.attention_types[l], c.compress_ratios[l], c.router_types[l], l, false};
        v4::Moe(step, block, nullptr, nullptr);
      }
    }
    return Status::Ok();
  }
  v4::Step step = NewStep(pools);
  bool want_hidden = false;
  DI_RETURN_IF_ERROR(LayOutBatch(batch, BatchRules{this, c.vocab_size, c.max_position_embeddings, false}, spec_, pools,
                                 &step, &want_hidden));

  const int64_t n = step.num_rows(), hc = c.hc_mult, d = c.hidden_size, width = hc * d;
  std::vector<float> streams(static_cast<size_t>(n * width));
  {
    ScopedPhase phase(Phase::kEmbed);
    EmbedIntoStreams(*weights_->embed, step.rows, hc, d, *step.pool, streams.data());
  }
  for (int64_t l = 0; l < c.num_layers; ++l) {
    v4::BlockRef block{&weights_->layers[l], c.attention_types[l], c.compress_ratios[l], c.router_types[l], l, false};
    v4::Block(step, block, streams.data());
  }

  // Logits (and hidden states) for the rows asked for.
  const std::vector<int64_t> wanted = PickLogitRows(batch, step.chunks, out);
  const int64_t m = static_cast<int64_t>(wanted.size());
  std::vector<float> picked(static_cast<size_t>(m * width));
  for (int64_t r = 0; r < m; ++r)
    std::copy(streams.data() + wanted[r] * width, streams.data() + (wanted[r] + 1) * width, picked.data() + r * width);
  Head(step, weights_->hc_head, weights_->norm, picked.data(), m, &out->logits);
  if (want_hidden) out->hidden.assign(picked.begin(), picked.end());

  if (drafting_) {
    // The MTP layer keeps pace: for a chunk over [s, e) it makes the entries of positions [s − 1, e − 1)
    // (those whose next token is known), from the hidden state before the chunk (kept in the state) and
    // the chunk's own; they land in the slots of [s, e), which the chunk writes anyway.
    v4::Step mtp = NewStep(pools);
    std::vector<float> mtp_hidden;
    for (size_t ci = 0; ci < batch.size(); ++ci) {
      const v4::ChunkRows& chunk = step.chunks[ci];
      V4SequenceState& state = *chunk.state;
      const int64_t s = chunk.start_pos, e = s + chunk.num_rows;
      const int64_t first = std::max(s - 1, state.mtp_floor);
      v4::ChunkRows rows{&state, mtp.num_rows(), std::max<int64_t>(0, e - 1 - first), first, chunk.state_only};
      for (int64_t p = first; p < e - 1; ++p) {
        mtp.rows.push_back({batch[ci].tokens[p + 1 - s], p, static_cast<int32_t>(ci)});
        const float* h = p < s ? state.hidden.data() + (p % (kV4MaxRollback + 1)) * width
                               : streams.data() + (chunk.first_row + p - s) * width;
        mtp_hidden.insert(mtp_hidden.end(), h, h + width);
      }
      mtp.chunks.push_back(rows);
    }
    if (mtp.num_rows() > 0) RunMtp(mtp, mtp_hidden.data());
    // Then the hidden states it will need next: the last kV4MaxRollback + 1 positions, and each finished
    // window block's last one (the resume point of a restore).
    for (const v4::ChunkRows& chunk : step.chunks) {
      V4SequenceState& state = *chunk.state;
      for (int64_t i = std::max<int64_t>(0, chunk.num_rows - (kV4MaxRollback + 1)); i < chunk.num_rows; ++i) {
        const float* h = streams.data() + (chunk.first_row + i) * width;
        std::copy(h, h + width, state.hidden.begin() + ((chunk.start_pos + i) % (kV4MaxRollback + 1)) * width);
      }
      for (int64_t i = 0; i < chunk.num_rows; ++i) {
        const int64_t p = chunk.start_pos + i;
        if ((p + 1) % kvcache::kBlockTokens != 0) continue;
        const float* h = streams.data() + (chunk.first_row + i) * width;
        uint8_t* block = v4::WindowBlock(step, chunk, p / kvcache::kBlockTokens);
        std::copy(h, h + width, reinterpret_cast<float*>(block + layout_.hidden_offset));
      }
    }
  }

  for (size_t ci = 0; ci < batch.size(); ++ci) {
    auto* state = static_cast<V4SequenceState*>(batch[ci].state);
    state->Advance(static_cast<int64_t>(batch[ci].tokens.size()));
    state->draft_steps = 0;
  }
  return Status::Ok();
}

}  // namespace deepinfer::model
