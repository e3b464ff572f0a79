#include "model/deepseek_v3/v3_model.h"

#include <algorithm>

#include "core/hf_config.h"
#include "core/log.h"
#include "core/weight_scan.h"
#include "kernels/linear.h"
#include "model/common/checkpoint_io.h"
#include "model/common/forward_batch.h"
#include "model/common/model_info.h"
#include "model/common/rotary.h"
#include "model/deepseek_v3/v32_indexer.h"

namespace deepinfer::model {
namespace {

// quantization_config.weight_block_size [out, in] (128×128 as released and when absent).
Result<std::pair<int64_t, int64_t>> Fp8BlockSize(const HfConfig& hf) {
  std::pair<int64_t, int64_t> block{128, 128};
  auto q = hf.raw().find("quantization_config");
  if (q == hf.raw().end() || !q->is_object()) return block;
  auto size = q->find("weight_block_size");
  if (size == q->end()) return block;
  if (!size->is_array() || size->size() != 2 || !(*size)[0].is_number_integer() || !(*size)[1].is_number_integer() ||
      (*size)[0].get<int64_t>() < 1 || (*size)[0].get<int64_t>() > 4096 || (*size)[1].get<int64_t>() < 1 ||
      (*size)[1].get<int64_t>() > 4096)
    return Status::InvalidArgument(hf.source() +
                                   ": key 'quantization_config.weight_block_size' must be two integers in [1, 4096]");
  return std::pair<int64_t, int64_t>{(*size)[0].get<int64_t>(), (*size)[1].get<int64_t>()};
}

}  // namespace

Result<std::unique_ptr<V3Model>> V3Model::Load(const std::string& dir, const LoadOptions& options) {
  if (options.expert_exchange != nullptr)
    return Status::Unimplemented("expert parallelism is implemented for DeepSeek-V4 and V4.1 checkpoints, not V3");
  std::unique_ptr<V3Model> model(new V3Model());
  model->TakeOptions(options);
  model->kv_bf16_ = options.kv_precision == KvPrecision::kBF16;
  model->drafting_ = options.drafting;
  DI_ASSIGN_OR_RETURN(HfConfig hf, HfConfig::Load(dir));
  DI_ASSIGN_OR_RETURN(model->config_, V3Config::FromHf(hf));
  DI_ASSIGN_OR_RETURN(const auto block, Fp8BlockSize(hf));
  DI_ASSIGN_OR_RETURN(model->checkpoint_, Checkpoint::Open(dir));
  DI_ASSIGN_OR_RETURN(model->weights_,
                      LoadV3Weights(model->checkpoint_, model->config_, block.first, block.second,
                                    model->drafting_, *model->pool_));
  if (const NonFiniteReport bad = ScanNonFinite(model->checkpoint_, model->pool_); bad.values > 0) {
    DI_LOG(kWarn, "checkpoint holds NaN or Inf weights; outputs they reach will be NaN")
        .Field("dir", dir).Field("values", bad.values).Field("tensors", bad.tensors).Field("first", bad.first);
  }
  if (options.prefault) Prefault(model->checkpoint_, nullptr, options.progress);
  model->BuildCacheSpec();
  model->ComputeWeightBytes();
  DI_ASSIGN_OR_RETURN(model->info_, ModelInfoFromConfig(model->config_.has_indexer() ? "DeepseekV32ForCausalLM" : "DeepseekV3ForCausalLM", model->config_, dir,
                                                        model->checkpoint_, model->spec_,
                                                        model->drafting_ ? "mtp" : ""));
  model->info_.supports_state_export = true;
  model->inv_freq_ = RopeInverseFrequencies(model->config_.rope, model->config_.rope_dim);
  return model;
}

void V3Model::BuildCacheSpec() {
  const V3Config& c = config_;
  layer_block_bytes_ = kvcache::kBlockTokens * c.latent_width() * (kv_bf16_ ? 2 : 4);
  kvcache::CacheGroupSpec mla;
  mla.name = "mla";
  mla.kind = kvcache::CacheKind::kCompressed;
  mla.retention = kvcache::CacheRetention::kPrefix;
  mla.ratio = 1;
  mla.bytes_per_block = layer_block_bytes_ * c.num_layers;
  mla.element = kv_bf16_ ? kvcache::CacheElement::kBF16 : kvcache::CacheElement::kF32;
  mla.num_layers = c.num_layers;
  spec_.groups = {mla};
  spec_.sequence_state_bytes = 0;
  if (drafting_) {
    kvcache::CacheGroupSpec mtp = mla;
    mtp.name = "mtp";
    mtp.num_layers = 1;
    mtp.bytes_per_block = layer_block_bytes_ + c.hidden_size * static_cast<int64_t>(sizeof(float));
    spec_.groups.push_back(mtp);
    spec_.sequence_state_bytes = (kV3DraftRollback + 2) * c.hidden_size * static_cast<int64_t>(sizeof(float));
  }
  if (c.has_indexer()) {
    index_layer_block_bytes_ = kvcache::kBlockTokens * v32::IndexKeyBytes(c);
    kvcache::CacheGroupSpec index;
    index.name = "index";
    index.kind = kvcache::CacheKind::kIndexerKeys;
    index.retention = kvcache::CacheRetention::kPrefix;
    index.ratio = 1;
    index.bytes_per_block = index_layer_block_bytes_ * c.num_layers;
    index.element = kvcache::CacheElement::kFP8E4M3;
    index.num_layers = c.num_layers;
    index_group_ = spec_.groups.size();
    spec_.groups.push_back(index);
    if (drafting_) {
      kvcache::CacheGroupSpec draft_index = index;
      draft_index.name = "mtp_index";
      draft_index.num_layers = 1;
      draft_index.bytes_per_block = index_layer_block_bytes_;
      draft_index_group_ = spec_.groups.size();
      spec_.groups.push_back(draft_index);
    }
  }
}

std::unique_ptr<SequenceState> V3Model::NewSequence() const {
  auto state = std::make_unique<V3SequenceState>(this, spec_.groups.size());
  if (drafting_) {
    state->hidden.assign(static_cast<size_t>((kV3DraftRollback + 1) * config_.hidden_size), 0.0f);
    state->draft_hidden.assign(static_cast<size_t>(config_.hidden_size), 0.0f);
  }
  return state;
}

Status V3Model::Truncate(SequenceState& base, int64_t n) {
  if (base.owner() != this) return Status::InvalidArgument("Truncate: not a sequence state of this model");
  auto& state = static_cast<V3SequenceState&>(base);
  const int64_t lowest =
      drafting_ ? std::max(state.rollback_floor, state.high_water - kV3DraftRollback) : state.rollback_floor;
  if (n > state.num_tokens() || n < lowest)
    return Status::OutOfRange("Truncate to " + std::to_string(n) + " positions: the sequence has " +
                              std::to_string(state.num_tokens()) + " and can go back to " + std::to_string(lowest));
  state.SetPosition(n);
  state.draft_steps = 0;
  return Status::Ok();
}

Result<std::unique_ptr<SequenceState>> V3Model::Fork(const SequenceState& base) {
  if (base.owner() != this) return Status::InvalidArgument("Fork: not a sequence state of this model");
  return std::unique_ptr<SequenceState>(std::make_unique<V3SequenceState>(static_cast<const V3SequenceState&>(base)));
}

Status V3Model::RestoreAt(SequenceState& base, int64_t position, RestoreFrom, const kvcache::KvPools& pools) {
  if (base.owner() != this) return Status::InvalidArgument("RestoreAt: not a sequence state of this model");
  auto& state = static_cast<V3SequenceState&>(base);
  if (position < 0 || position % kvcache::kBlockTokens != 0)
    return Status::InvalidArgument("RestoreAt: position " + std::to_string(position) + " is not a multiple of " +
                                   std::to_string(kvcache::kBlockTokens));
  if (Status s = CheckPools(spec_, pools); !s.ok()) return s.WithContext("RestoreAt");
  for (size_t g = 0; g < spec_.groups.size(); ++g) {
    for (int64_t b = 0; b < kvcache::BlocksFor(position); ++b) {
      if (!pools.group(g).contains(state.block_at(g, b * kvcache::kBlockTokens)))
        return Status::InvalidArgument("RestoreAt " + std::to_string(position) + ": group '" + spec_.groups[g].name +
                                       "' has no valid block " + std::to_string(b));
    }
  }
  // No window, and the one hidden state drafting needs is in the last block: both restore modes are exact.
  state.SetPosition(position);
  state.rollback_floor = position;
  state.high_water = position;
  state.draft_steps = 0;
  if (drafting_ && position > 0) {
    const int64_t d = config_.hidden_size;
    const float* h = reinterpret_cast<const float*>(
        pools.group(kDraftGroup).block(state.block_at(kDraftGroup, position - 1)) + layer_block_bytes_);
    std::copy(h, h + d, state.hidden.begin() + ((position - 1) % (kV3DraftRollback + 1)) * d);
  }
  return Status::Ok();
}

void V3Model::ComputeWeightBytes() {
  auto bytes = [](const kernels::WeightView& w) {
    return w.data != nullptr ? static_cast<double>(kernels::WeightBytes(w)) : 0.0;
  };
  auto mlp = [&](const ExpertWeights& e) { return bytes(e.w1) + bytes(e.w2) + bytes(e.w3); };
  dense_weight_bytes_ = bytes(weights_->head);
  expert_weight_bytes_ = 0;
  for (const V3LayerWeights& l : weights_->layers) {
    const V3AttentionWeights& a = l.attention;
    dense_weight_bytes_ += bytes(a.q_proj) + bytes(a.q_a) + bytes(a.q_b) + bytes(a.kv_a) + bytes(a.o_proj);
    if (a.indexer) dense_weight_bytes_ += bytes(a.indexer->wq_b) + bytes(a.indexer->wk) + bytes(a.indexer->weights_proj);
    for (const kernels::WeightView& w : a.uk_t) dense_weight_bytes_ += bytes(w);
    for (const kernels::WeightView& w : a.uv) dense_weight_bytes_ += bytes(w);
    if (!l.moe) {
      dense_weight_bytes_ += mlp(l.dense);
      continue;
    }
    dense_weight_bytes_ += bytes(l.experts.gate) + mlp(l.experts.shared);
    expert_weight_bytes_ += mlp(l.experts.experts[0]);
  }
  embed_row_bytes_ = static_cast<double>(weights_->embed->nbytes()) / static_cast<double>(config_.vocab_size);
}

Result<StepCost> V3Model::EstimateStepCost(std::span<const ChunkShape> chunks) const {
  const V3Config& c = config_;
  const double d = static_cast<double>(c.hidden_size), h = static_cast<double>(c.num_heads);
  const double hd = static_cast<double>(c.head_dim), lw = static_cast<double>(c.latent_width());
  const double r = static_cast<double>(c.kv_lora_rank), vd = static_cast<double>(c.v_head_dim);
  const double query = c.q_lora_rank > 0 ? c.q_lora_rank * (d + h * hd) : d * h * hd;
  // Per token and layer: projections, the absorbed kv_b factors, o_proj (the head counts per logits row).
  // V3.2's indexer: its query, key and head weights.
  const double ih = static_cast<double>(c.index_n_heads), id = static_cast<double>(c.index_head_dim);
  const double indexer_macs = c.has_indexer() ? c.q_lora_rank * ih * id + d * id + d * ih : 0.0;
  const double attention_macs =
      query + d * lw + h * c.qk_nope_head_dim * r + h * vd * r + h * vd * d + indexer_macs;
  const double expert_macs = 3.0 * d * c.moe_intermediate_size;
  const double dense_macs = 3.0 * d * c.intermediate_size;
  const int64_t moe_layers = c.num_layers - c.first_k_dense_replace;
  const double token_macs = c.num_layers * attention_macs + c.first_k_dense_replace * dense_macs +
                            moe_layers * (d * c.n_routed_experts +
                                          (c.num_experts_per_tok + c.n_shared_experts) * expert_macs);
  StepCost cost;
  int64_t tokens = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const ChunkShape& s = chunks[i];
    if (s.start < 0 || s.tokens < 0 || s.logits_rows < 0 || s.logits_rows > s.tokens)
      return Status::InvalidArgument("EstimateStepCost: chunk " + std::to_string(i) + " has an impossible shape");
    tokens += s.tokens;
    cost.flops += 2.0 * d * c.vocab_size * static_cast<double>(s.logits_rows);  // the head, rows asked for
    for (int64_t t = 0; t < s.tokens; ++t) {
      // Scores and the weighted sum over every key's latent_width values, per head.
      const double visible = static_cast<double>(s.start + t + 1);
      // V3.2 scores every visible key (FP8 keys, index heads) and attends the index_topk best.
      const bool sparse = c.has_indexer() && visible > static_cast<double>(c.index_topk);
      const double keys = sparse ? static_cast<double>(c.index_topk) : visible;
      cost.flops += 2.0 * c.num_layers * h * keys * (lw + r);
      cost.kv_bytes += c.num_layers * keys * lw * (kv_bf16_ ? 2 : 4);
      if (sparse) {
        cost.flops += 2.0 * c.num_layers * ih * id * visible;
        cost.kv_bytes += c.num_layers * visible * static_cast<double>(v32::IndexKeyBytes(c));
      }
    }
  }
  cost.flops += 2.0 * token_macs * static_cast<double>(tokens);
  // Each MoE layer's distinct routed experts: at most the experts, at most k per token.
  const double distinct_experts = std::min<double>(static_cast<double>(c.n_routed_experts),
                                                   static_cast<double>(tokens * c.num_experts_per_tok));
  cost.weight_bytes =
      dense_weight_bytes_ + distinct_experts * expert_weight_bytes_ + embed_row_bytes_ * static_cast<double>(tokens);
  return cost;
}

}  // namespace deepinfer::model
