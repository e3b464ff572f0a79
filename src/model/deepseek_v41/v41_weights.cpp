#include "model/deepseek_v41/v41_weights.h"

#include <cstring>

#include "kernels/number_formats.h"

namespace deepinfer::model {
namespace {

// An Engram table `prefix`.weight [rows, dim] (and its FP8 scales `prefix`.scale).
Result<V41EngramTable> EngramTable(const CheckpointBinder& b, const std::string& prefix, int64_t rows, int64_t dim) {
  V41EngramTable table;
  table.rows = rows;
  table.head_dim = dim;
  DI_ASSIGN_OR_RETURN(table.weight, b.Find(prefix + ".weight"));
  DI_RETURN_IF_ERROR(b.CheckShape(*table.weight, {rows, dim}));
  switch (table.weight->dtype) {
    case DType::kF32:
    case DType::kBF16: break;
    case DType::kF8_E4M3: {
      if (dim % 32) return Status::InvalidArgument("tensor '" + table.weight->name + "': FP8 rows need multiples of 32");
      DI_ASSIGN_OR_RETURN(table.scale, b.Find(prefix + ".scale"));
      DI_RETURN_IF_ERROR(b.CheckShape(*table.scale, {rows, dim / 32}));
      if (table.scale->dtype != DType::kF8_E8M0 && table.scale->dtype != DType::kU8)
        return Status::InvalidArgument("tensor '" + table.scale->name + "': Engram scales must be F8_E8M0");
      break;
    }
    default:
      return Status::InvalidArgument("tensor '" + table.weight->name + "' has unsupported dtype " +
                                     std::string(DTypeName(table.weight->dtype)) + " for an Engram table");
  }
  return table;
}

// A block under `p` ("layers.N." or "mtp.layers.K.") with the given plan and routed expert count.
Status LoadBlock(const CheckpointBinder& b, const V41Config& c, const std::string& p, const V41LayerPlan& plan, int64_t experts,
                 V41BlockWeights* out) {
  const int64_t d = c.hidden_size, hc = c.hc_mult, hd = c.head_dim;
  const BlockShape shape = BlockShape::Of(c);
  DI_RETURN_IF_ERROR(BindBlockSites(b, shape, p, out));
  DI_RETURN_IF_ERROR(BindAttentionProjections(b, shape, p, &out->attention));
  V41AttentionWeights& a = out->attention;
  const std::string ap = p + "attn.";
  if (plan.kv_source) {
    auto cw = std::make_unique<V41CompressorWeights>();
    const std::string cp = ap + "compressor.";
    cw->ratio = plan.ratio;
    DI_ASSIGN_OR_RETURN(cw->wkv, b.Matrix(cp + "wkv", hd, d));
    if (plan.ratio > 1) {
      DI_ASSIGN_OR_RETURN(cw->wgate, b.Matrix(cp + "wgate", hd, d));
    }
    DI_ASSIGN_OR_RETURN(cw->norm, b.Floats(cp + "norm.weight", {hd}));
    a.compressor = std::move(cw);
  }
  if (plan.index_source) {
    auto ix = std::make_unique<V41IndexerWeights>();
    const std::string ip = ap + "indexer.";
    DI_ASSIGN_OR_RETURN(ix->wq_b, b.Matrix(ip + "wq_b", c.index_n_heads * c.index_head_dim, c.q_lora_rank));
    DI_ASSIGN_OR_RETURN(ix->weights_proj, b.Matrix(ip + "weights_proj", c.index_n_heads, d));
    if (plan.kv_source) {
      DI_ASSIGN_OR_RETURN(ix->wk, b.Matrix(ip + "wk", c.index_head_dim, hd));
      DI_ASSIGN_OR_RETURN(ix->k_norm, b.Floats(ip + "k_norm.weight", {c.index_head_dim}));
    }
    a.indexer = std::move(ix);
  }

  V41MoeWeights& m = out->moe;
  const std::string fp = p + "ffn.";
  DI_RETURN_IF_ERROR(BindExpertSet(b, shape, p, experts, &m));
  DI_ASSIGN_OR_RETURN(m.bias, b.Floats(fp + "gate.bias", {experts}));
  DI_ASSIGN_OR_RETURN(m.bias_vl, b.Floats(fp + "gate.bias_vl", {experts}));

  if (plan.engram >= 0) {
    const V41EngramConfig& ec = c.engram;
    auto ew = std::make_unique<V41EngramWeights>();
    const std::string gp = p + "engram.";
    DI_ASSIGN_OR_RETURN(ew->table, EngramTable(b, gp + "embed", ec.num_embeddings[plan.engram], ec.head_dim));
    DI_ASSIGN_OR_RETURN(ew->wkv, b.Matrix(gp + "wkv", (hc + 1) * d, ec.num_columns() * ec.head_dim));
    DI_ASSIGN_OR_RETURN(std::vector<float> q, b.Floats(gp + "q_weight", {hc, d}));
    DI_ASSIGN_OR_RETURN(std::vector<float> k, b.Floats(gp + "k_weight", {hc, d}));
    ew->weight.resize(q.size());
    for (size_t i = 0; i < q.size(); ++i) ew->weight[i] = q[i] * k[i];
    out->engram = std::move(ew);
  }
  return Status::Ok();
}

}  // namespace

void V41EngramTable::Row(int64_t row, float* out) const {
  const int64_t dim = head_dim;
  switch (weight->dtype) {
    case DType::kF32: std::memcpy(out, weight->data + row * dim * 4, static_cast<size_t>(dim) * 4); return;
    case DType::kBF16: {
      const uint8_t* src = weight->data + row * dim * 2;
      for (int64_t i = 0; i < dim; ++i) {
        uint16_t bits;
        std::memcpy(&bits, src + 2 * i, 2);
        out[i] = kernels::Bf16ToFloat(bits);
      }
      return;
    }
    default: {
      const uint8_t* codes = weight->data + row * dim;
      const uint8_t* scales = scale->data + row * (dim / 32);
      for (int64_t g = 0; g < dim / 32; ++g) {
        const float s = kernels::E8M0ToFloat(scales[g]);
        for (int64_t i = 0; i < 32; ++i) out[g * 32 + i] = kernels::Fp8E4M3ToFloat(codes[g * 32 + i]) * s;
      }
      return;
    }
  }
}

int64_t V41EngramTable::row_bytes() const {
  switch (weight->dtype) {
    case DType::kF32: return head_dim * 4;
    case DType::kBF16: return head_dim * 2;
    default: return head_dim + head_dim / 32;
  }
}

Result<std::unique_ptr<V41Weights>> LoadV41Weights(const Checkpoint& checkpoint, const V41Config& c, bool dspark) {
  // The FP8 block shape: the config's, else whichever of the usual shapes a scale tensor fits.
  std::vector<Fp8BlockShape> blocks = {{32, 32}, {128, 128}};
  if (c.weight_block_out > 0) blocks = {{c.weight_block_out, c.weight_block_in}};
  CheckpointBinder b(checkpoint, blocks);
  auto w = std::make_unique<V41Weights>();
  const int64_t d = c.hidden_size;
  DI_ASSIGN_OR_RETURN(w->embed, b.Table("embed.weight", c.vocab_size, d));
  DI_ASSIGN_OR_RETURN(w->head, b.Matrix("head", c.vocab_size, d));
  DI_ASSIGN_OR_RETURN(w->norm, b.Floats("norm.weight", {d}));
  w->layers.resize(c.num_layers);
  for (int64_t l = 0; l < c.num_layers; ++l)
    DI_RETURN_IF_ERROR(LoadBlock(b, c, "layers." + std::to_string(l) + ".", c.layers[l], c.n_routed_experts, &w->layers[l]));
  if (!dspark) return w;
  const V41DsparkConfig& dc = c.dspark;
  if (dc.num_layers <= 0 || dc.target_layer_ids.empty())
    return Status::FailedPrecondition("the config declares no DSpark draft layers (num_nextn_predict_layers, "
                                      "dspark_target_layer_ids)");
  if (checkpoint.Find("mtp.main_proj.weight") == nullptr)
    return Status::NotFound("checkpoint has no tensor 'mtp.main_proj.weight' (no DSpark draft layers to draft with)");
  auto ds = std::make_unique<V41DsparkWeights>();
  const int64_t targets = static_cast<int64_t>(dc.target_layer_ids.size());
  DI_ASSIGN_OR_RETURN(ds->main_proj, b.Matrix("mtp.main_proj", d, targets * d));
  DI_ASSIGN_OR_RETURN(ds->main_norm, b.Floats("mtp.main_norm.weight", {d}));
  ds->layers.resize(static_cast<size_t>(dc.num_layers));
  V41LayerPlan window_only;  // draft layers: sliding window only, no compressed branch, no Engram
  for (int64_t k = 0; k < dc.num_layers; ++k)
    DI_RETURN_IF_ERROR(LoadBlock(b, c, "mtp.layers." + std::to_string(k) + ".", window_only, dc.n_routed_experts,
                                 &ds->layers[k]));
  DI_ASSIGN_OR_RETURN(ds->norm, b.Floats("mtp.norm.weight", {d}));
  DI_ASSIGN_OR_RETURN(ds->markov_embed, b.Table("mtp.markov_head.embed.weight", c.vocab_size, dc.markov_rank));
  DI_ASSIGN_OR_RETURN(ds->markov_head, b.Matrix("mtp.markov_head.head", c.vocab_size, dc.markov_rank));
  DI_ASSIGN_OR_RETURN(ds->confidence, b.Floats("mtp.confidence_head.weight", {1, d + dc.markov_rank}));
  w->dspark = std::move(ds);
  return w;
}

}  // namespace deepinfer::model
