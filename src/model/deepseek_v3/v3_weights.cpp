#include "model/deepseek_v3/v3_weights.h"

#include <string>

#include "kernels/number_formats.h"
#include "model/common/checkpoint_binder.h"

namespace deepinfer::model {
namespace {

// A SwiGLU MLP under `prefix` with transformers' names (gate_proj, up_proj, down_proj).
Result<ExpertWeights> SwiGluMlp(const CheckpointBinder& b, const std::string& prefix, int64_t inter, int64_t hidden) {
  ExpertWeights x;
  DI_ASSIGN_OR_RETURN(x.w1, b.Matrix(prefix + "gate_proj", inter, hidden));
  DI_ASSIGN_OR_RETURN(x.w3, b.Matrix(prefix + "up_proj", inter, hidden));
  DI_ASSIGN_OR_RETURN(x.w2, b.Matrix(prefix + "down_proj", hidden, inter));
  return x;
}

// The absorbed form's factors of kv_b_proj. W_UKᵀ needs a transpose: the product of the identity with the
// matrix gives it exactly whatever the stored format (every sum adds one stored value to zeros). W_UV is a
// row range of the stored matrix where the format allows one.
void SplitKvB(const kernels::WeightView& kv_b, const V3Config& c, ThreadPool& pool, V3AttentionWeights* a) {
  const int64_t h = c.num_heads, nope = c.qk_nope_head_dim, v = c.v_head_dim, r = c.kv_lora_rank;
  const int64_t rows = h * (nope + v);
  std::vector<float> identity(static_cast<size_t>(r * r), 0.0f), transposed(static_cast<size_t>(r * rows));
  for (int64_t i = 0; i < r; ++i) identity[i * r + i] = 1.0f;
  kernels::Linear(identity.data(), r, r, kv_b, transposed.data(), rows, &pool);  // [r, rows] = kv_bᵀ
  // BF16 values stay exact in BF16; other formats' decoded values need fp32.
  const bool bf16 = kv_b.format == kernels::WeightFormat::kBF16;
  std::vector<float> uk(static_cast<size_t>(h * r * nope));
  for (int64_t head = 0; head < h; ++head)
    for (int64_t l = 0; l < r; ++l)
      for (int64_t j = 0; j < nope; ++j) uk[(head * r + l) * nope + j] = transposed[l * rows + head * (nope + v) + j];
  if (bf16) {
    a->uk_t_bf16.resize(uk.size());
    kernels::FloatToBf16(uk.data(), a->uk_t_bf16.data(), static_cast<int64_t>(uk.size()));
  } else {
    a->uk_t_values = std::move(uk);
  }
  // W_UV as rows of kv_b where every head's slice is a view of it, else one fp32 copy for all heads.
  std::vector<kernels::WeightView> uv_slices;
  for (int64_t head = 0; head < h; ++head) {
    auto slice = kernels::SliceRows(kv_b, head * (nope + v) + nope, v);
    if (!slice.ok()) break;
    uv_slices.push_back(*slice);
  }
  if (static_cast<int64_t>(uv_slices.size()) != h) {
    uv_slices.clear();
    a->uv_values.assign(static_cast<size_t>(h * v * r), 0.0f);
    for (int64_t head = 0; head < h; ++head)
      for (int64_t l = 0; l < r; ++l)
        for (int64_t j = 0; j < v; ++j)
          a->uv_values[(head * v + j) * r + l] = transposed[l * rows + head * (nope + v) + nope + j];
  }
  for (int64_t head = 0; head < h; ++head) {
    kernels::WeightView uk_view;
    uk_view.format = bf16 ? kernels::WeightFormat::kBF16 : kernels::WeightFormat::kF32;
    uk_view.out_features = r;
    uk_view.in_features = nope;
    uk_view.data = bf16 ? static_cast<const void*>(a->uk_t_bf16.data() + head * r * nope)
                        : static_cast<const void*>(a->uk_t_values.data() + head * r * nope);
    a->uk_t.push_back(uk_view);
    if (!uv_slices.empty()) {
      a->uv.push_back(uv_slices[head]);
      continue;
    }
    kernels::WeightView uv_view;
    uv_view.format = kernels::WeightFormat::kF32;
    uv_view.out_features = v;
    uv_view.in_features = r;
    uv_view.data = a->uv_values.data() + head * v * r;
    a->uv.push_back(uv_view);
  }
}

// One decoder layer under `p` ("model.layers.N."), MoE when `moe`.
Status LoadLayer(const CheckpointBinder& b, const V3Config& c, const std::string& p, bool moe, ThreadPool& pool,
                 V3LayerWeights& layer) {
  const int64_t d = c.hidden_size, h = c.num_heads, hd = c.head_dim, e = c.n_routed_experts;
  DI_ASSIGN_OR_RETURN(layer.input_norm, b.Floats(p + "input_layernorm.weight", {d}));
  DI_ASSIGN_OR_RETURN(layer.post_attention_norm, b.Floats(p + "post_attention_layernorm.weight", {d}));
  V3AttentionWeights& a = layer.attention;
  const std::string ap = p + "self_attn.";
  if (c.q_lora_rank > 0) {
    DI_ASSIGN_OR_RETURN(a.q_a, b.Matrix(ap + "q_a_proj", c.q_lora_rank, d));
    DI_ASSIGN_OR_RETURN(a.q_a_norm, b.Floats(ap + "q_a_layernorm.weight", {c.q_lora_rank}));
    DI_ASSIGN_OR_RETURN(a.q_b, b.Matrix(ap + "q_b_proj", h * hd, c.q_lora_rank));
  } else {
    DI_ASSIGN_OR_RETURN(a.q_proj, b.Matrix(ap + "q_proj", h * hd, d));
  }
  DI_ASSIGN_OR_RETURN(a.kv_a, b.Matrix(ap + "kv_a_proj_with_mqa", c.latent_width(), d));
  DI_ASSIGN_OR_RETURN(a.kv_a_norm, b.Floats(ap + "kv_a_layernorm.weight", {c.kv_lora_rank}));
  DI_ASSIGN_OR_RETURN(kernels::WeightView kv_b,
                      b.Matrix(ap + "kv_b_proj", h * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank));
  SplitKvB(kv_b, c, pool, &a);
  DI_ASSIGN_OR_RETURN(a.o_proj, b.Matrix(ap + "o_proj", d, h * c.v_head_dim));
  if (c.has_indexer()) {
    a.indexer = std::make_unique<V32IndexerWeights>();
    V32IndexerWeights& x = *a.indexer;
    const std::string ip = ap + "indexer.";
    const int64_t id = c.index_head_dim;
    DI_ASSIGN_OR_RETURN(x.wq_b, b.Matrix(ip + "wq_b", c.index_n_heads * id, c.q_lora_rank));
    DI_ASSIGN_OR_RETURN(x.wk, b.Matrix(ip + "wk", id, d));
    DI_ASSIGN_OR_RETURN(x.k_norm, b.Floats(ip + "k_norm.weight", {id}));
    DI_ASSIGN_OR_RETURN(x.k_norm_bias, b.Floats(ip + "k_norm.bias", {id}));
    DI_ASSIGN_OR_RETURN(x.weights_proj, b.Matrix(ip + "weights_proj", c.index_n_heads, d));
  }
  layer.moe = moe;
  const std::string mp = p + "mlp.";
  if (!layer.moe) {
    DI_ASSIGN_OR_RETURN(layer.dense, SwiGluMlp(b, mp, c.intermediate_size, d));
    return Status::Ok();
  }
  DI_ASSIGN_OR_RETURN(layer.experts.gate, b.Matrix(mp + "gate", e, d));
  DI_ASSIGN_OR_RETURN(layer.gate_bias, b.Floats(mp + "gate.e_score_correction_bias", {e}));
  layer.experts.experts.resize(static_cast<size_t>(e));
  for (int64_t x = 0; x < e; ++x) {
    DI_ASSIGN_OR_RETURN(layer.experts.experts[x],
                        SwiGluMlp(b, mp + "experts." + std::to_string(x) + ".", c.moe_intermediate_size, d));
  }
  if (c.n_shared_experts > 0) {
    DI_ASSIGN_OR_RETURN(layer.experts.shared,
                        SwiGluMlp(b, mp + "shared_experts.", c.moe_intermediate_size * c.n_shared_experts, d));
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<V3Weights>> LoadV3Weights(const Checkpoint& checkpoint, const V3Config& c, int64_t fp8_block_out,
                                                 int64_t fp8_block_in, bool mtp, ThreadPool& pool) {
  CheckpointBinder b(checkpoint, {{fp8_block_out, fp8_block_in}});
  auto w = std::make_unique<V3Weights>();
  const int64_t d = c.hidden_size;
  DI_ASSIGN_OR_RETURN(w->embed, b.Table("model.embed_tokens.weight", c.vocab_size, d));
  DI_ASSIGN_OR_RETURN(w->norm, b.Floats("model.norm.weight", {d}));
  DI_ASSIGN_OR_RETURN(w->head, b.Matrix(c.tie_word_embeddings ? "model.embed_tokens" : "lm_head", c.vocab_size, d));
  w->layers.resize(static_cast<size_t>(c.num_layers));
  for (int64_t l = 0; l < c.num_layers; ++l)
    DI_RETURN_IF_ERROR(LoadLayer(b, c, "model.layers." + std::to_string(l) + ".", c.is_moe_layer(l), pool, w->layers[l]));
  if (mtp) {
    if (c.num_mtp_layers < 1) return Status::FailedPrecondition("drafting needs an MTP layer, and num_nextn_predict_layers is 0");
    V3MtpWeights& m = w->mtp.emplace_back();
    const std::string p = "model.layers." + std::to_string(c.num_layers) + ".";
    DI_ASSIGN_OR_RETURN(m.enorm, b.Floats(p + "enorm.weight", {d}));
    DI_ASSIGN_OR_RETURN(m.hnorm, b.Floats(p + "hnorm.weight", {d}));
    DI_ASSIGN_OR_RETURN(m.head_norm, b.Floats(p + "shared_head.norm.weight", {d}));
    DI_ASSIGN_OR_RETURN(m.eh_proj, b.Matrix(p + "eh_proj", d, 2 * d));
    DI_RETURN_IF_ERROR(LoadLayer(b, c, p, c.is_moe_layer(c.num_layers), pool, m.layer));
  }
  return w;
}

}  // namespace deepinfer::model
