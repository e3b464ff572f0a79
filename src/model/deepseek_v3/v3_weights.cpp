#include "model/deepseek_v3/v3_weights.h"

#include <string>

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

// kv_b_proj in fp32, whatever its stored format: the product of the identity with the matrix gives its
// transpose exactly (every sum adds one stored value to zeros), so one code path decodes F32, BF16 and FP8.
void SplitKvB(const kernels::WeightView& kv_b, const V3Config& c, ThreadPool& pool, V3AttentionWeights* a) {
  const int64_t h = c.num_heads, nope = c.qk_nope_head_dim, v = c.v_head_dim, r = c.kv_lora_rank;
  const int64_t rows = h * (nope + v);
  std::vector<float> identity(static_cast<size_t>(r * r), 0.0f), transposed(static_cast<size_t>(r * rows));
  for (int64_t i = 0; i < r; ++i) identity[i * r + i] = 1.0f;
  kernels::Linear(identity.data(), r, r, kv_b, transposed.data(), rows, &pool);  // [r, rows] = kv_bᵀ
  a->uk_t_values.assign(static_cast<size_t>(h * r * nope), 0.0f);
  a->uv_values.assign(static_cast<size_t>(h * v * r), 0.0f);
  for (int64_t head = 0; head < h; ++head) {
    const int64_t base = head * (nope + v);
    float* uk = a->uk_t_values.data() + head * r * nope;
    float* uv = a->uv_values.data() + head * v * r;
    for (int64_t l = 0; l < r; ++l) {
      const float* row = transposed.data() + l * rows + base;
      for (int64_t j = 0; j < nope; ++j) uk[l * nope + j] = row[j];
      for (int64_t j = 0; j < v; ++j) uv[j * r + l] = row[nope + j];
    }
  }
  for (int64_t head = 0; head < h; ++head) {
    kernels::WeightView uk;
    uk.format = kernels::WeightFormat::kF32;
    uk.out_features = r;
    uk.in_features = nope;
    uk.data = a->uk_t_values.data() + head * r * nope;
    a->uk_t.push_back(uk);
    kernels::WeightView uv;
    uv.format = kernels::WeightFormat::kF32;
    uv.out_features = v;
    uv.in_features = r;
    uv.data = a->uv_values.data() + head * v * r;
    a->uv.push_back(uv);
  }
}

}  // namespace

Result<std::unique_ptr<V3Weights>> LoadV3Weights(const Checkpoint& checkpoint, const V3Config& c, int64_t fp8_block_out,
                                                 int64_t fp8_block_in, ThreadPool& pool) {
  CheckpointBinder b(checkpoint, {{fp8_block_out, fp8_block_in}});
  auto w = std::make_unique<V3Weights>();
  const int64_t d = c.hidden_size, h = c.num_heads, hd = c.head_dim, e = c.n_routed_experts;
  DI_ASSIGN_OR_RETURN(w->embed, b.Table("model.embed_tokens.weight", c.vocab_size, d));
  DI_ASSIGN_OR_RETURN(w->norm, b.Floats("model.norm.weight", {d}));
  DI_ASSIGN_OR_RETURN(w->head, b.Matrix(c.tie_word_embeddings ? "model.embed_tokens" : "lm_head", c.vocab_size, d));
  w->layers.resize(static_cast<size_t>(c.num_layers));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    V3LayerWeights& layer = w->layers[l];
    const std::string p = "model.layers." + std::to_string(l) + ".";
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
    layer.moe = c.is_moe_layer(l);
    const std::string mp = p + "mlp.";
    if (!layer.moe) {
      DI_ASSIGN_OR_RETURN(layer.dense, SwiGluMlp(b, mp, c.intermediate_size, d));
      continue;
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
  }
  return w;
}

}  // namespace deepinfer::model
