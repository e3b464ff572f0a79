#include "model/v41_weights.h"

#include <cstring>

#include "kernels/number_formats.h"

namespace deepinfer::model {
namespace {

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

class Binder {
 public:
  Binder(const Checkpoint& checkpoint, const V41Config& config) : checkpoint_(checkpoint), config_(config) {}

  Result<const TensorInfo*> Find(const std::string& name) const {
    const TensorInfo* t = checkpoint_.Find(name);
    if (t == nullptr) return Status::NotFound("checkpoint has no tensor '" + name + "'");
    return t;
  }

  Status CheckShape(const TensorInfo& t, const std::vector<int64_t>& want) const {
    if (t.shape != want)
      return Status::InvalidArgument("tensor '" + t.name + "' has shape " + ShapeString(t.shape) + ", expected " +
                                     ShapeString(want));
    return Status::Ok();
  }

  // `prefix`.weight as an [out, in] matrix in its stored format (scales in `prefix`.scale).
  Result<WeightView> Matrix(const std::string& prefix, int64_t out, int64_t in) const {
    DI_ASSIGN_OR_RETURN(const TensorInfo* t, Find(prefix + ".weight"));
    WeightView w;
    w.out_features = out;
    w.in_features = in;
    w.data = t->data;
    switch (t->dtype) {
      case DType::kF32: w.format = kernels::WeightFormat::kF32; break;
      case DType::kBF16: w.format = kernels::WeightFormat::kBF16; break;
      case DType::kF8_E4M3: {
        w.format = kernels::WeightFormat::kFP8Block;
        DI_RETURN_IF_ERROR(CheckShape(*t, {out, in}));
        const TensorInfo* s = checkpoint_.Find(prefix + ".scale");
        if (s == nullptr) s = checkpoint_.Find(prefix + ".weight_scale_inv");
        if (s == nullptr) return Status::NotFound("checkpoint has no tensor '" + prefix + ".scale' (FP8 block scales)");
        // The block shape: the config's, else whichever of the usual shapes the scale tensor fits.
        std::vector<std::pair<int64_t, int64_t>> blocks;
        if (config_.weight_block_out > 0) blocks.push_back({config_.weight_block_out, config_.weight_block_in});
        else blocks = {{32, 32}, {128, 128}};
        bool matched = false;
        for (auto [bo, bi] : blocks) {
          if (s->shape == std::vector<int64_t>{(out + bo - 1) / bo, (in + bi - 1) / bi}) {
            w.block_out = bo;
            w.block_in = bi;
            matched = true;
            break;
          }
        }
        if (!matched) {
          const auto [bo, bi] = blocks.front();
          return Status::InvalidArgument("tensor '" + s->name + "' has shape " + ShapeString(s->shape) + ", expected " +
                                         ShapeString({(out + bo - 1) / bo, (in + bi - 1) / bi}) + " (" +
                                         std::to_string(bo) + "x" + std::to_string(bi) + " FP8 blocks)");
        }
        if (s->dtype == DType::kF8_E8M0 || s->dtype == DType::kU8) w.scale_format = kernels::ScaleFormat::kUE8M0;
        else if (s->dtype == DType::kF32) w.scale_format = kernels::ScaleFormat::kF32;
        else return Status::InvalidArgument("tensor '" + s->name + "': FP8 scales must be F32 or F8_E8M0");
        w.scales = s->data;
        DI_RETURN_IF_ERROR(kernels::ValidateWeightView(w));
        // Checked once here so that the decode kernels need not watch every byte.
        w.fp8_nan_free = !kernels::Fp8ContainsNanCodes(w);
        return w;
      }
      case DType::kI8:
      case DType::kU8: {
        w.format = kernels::WeightFormat::kMXFP4;
        if (in % 32) return Status::InvalidArgument("tensor '" + t->name + "': packed FP4 needs inputs in multiples of 32");
        DI_RETURN_IF_ERROR(CheckShape(*t, {out, in / 2}));
        DI_ASSIGN_OR_RETURN(const TensorInfo* s, Find(prefix + ".scale"));
        DI_RETURN_IF_ERROR(CheckShape(*s, {out, in / 32}));
        if (s->dtype != DType::kF8_E8M0 && s->dtype != DType::kU8)
          return Status::InvalidArgument("tensor '" + s->name + "': FP4 scales must be F8_E8M0");
        w.scales = s->data;
        DI_RETURN_IF_ERROR(kernels::ValidateWeightView(w));
        return w;
      }
      default:
        return Status::InvalidArgument("tensor '" + t->name + "' has unsupported dtype " +
                                       std::string(DTypeName(t->dtype)) + " for a matrix");
    }
    DI_RETURN_IF_ERROR(CheckShape(*t, {out, in}));
    DI_RETURN_IF_ERROR(kernels::ValidateWeightView(w));
    return w;
  }

  // A small fp32 parameter (stored F32 or BF16) of the given shape.
  Result<std::vector<float>> Floats(const std::string& name, const std::vector<int64_t>& shape) const {
    DI_ASSIGN_OR_RETURN(const TensorInfo* t, Find(name));
    DI_RETURN_IF_ERROR(CheckShape(*t, shape));
    std::vector<float> out(static_cast<size_t>(t->numel()));
    if (t->dtype == DType::kF32) {
      std::memcpy(out.data(), t->data, out.size() * sizeof(float));
    } else if (t->dtype == DType::kBF16) {
      std::vector<uint16_t> bits(out.size());
      std::memcpy(bits.data(), t->data, bits.size() * sizeof(uint16_t));
      kernels::Bf16ToFloat(bits.data(), out.data(), static_cast<int64_t>(out.size()));
    } else {
      return Status::InvalidArgument("tensor '" + name + "' has dtype " + std::string(DTypeName(t->dtype)) +
                                     ", expected F32 or BF16");
    }
    return out;
  }

  Result<V4HyperConnectionWeights> HyperConnection(const std::string& prefix, int64_t rows, int64_t width) const {
    V4HyperConnectionWeights w;
    DI_ASSIGN_OR_RETURN(w.fn, Floats(prefix + "_fn", {rows, width}));
    DI_ASSIGN_OR_RETURN(w.base, Floats(prefix + "_base", {rows}));
    DI_ASSIGN_OR_RETURN(w.scale, Floats(prefix + "_scale", {3}));
    w.fn_view.format = kernels::WeightFormat::kF32;
    w.fn_view.out_features = rows;
    w.fn_view.in_features = width;
    w.fn_view.data = w.fn.data();
    return w;
  }

  Result<V41EngramTable> EngramTable(const std::string& prefix, int64_t rows, int64_t dim) const {
    V41EngramTable table;
    table.rows = rows;
    table.head_dim = dim;
    DI_ASSIGN_OR_RETURN(table.weight, Find(prefix + ".weight"));
    DI_RETURN_IF_ERROR(CheckShape(*table.weight, {rows, dim}));
    switch (table.weight->dtype) {
      case DType::kF32:
      case DType::kBF16: break;
      case DType::kF8_E4M3: {
        if (dim % 32) return Status::InvalidArgument("tensor '" + table.weight->name + "': FP8 rows need multiples of 32");
        DI_ASSIGN_OR_RETURN(table.scale, Find(prefix + ".scale"));
        DI_RETURN_IF_ERROR(CheckShape(*table.scale, {rows, dim / 32}));
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

 private:
  const Checkpoint& checkpoint_;
  const V41Config& config_;
};

// A block under `p` ("layers.N." or "mtp.layers.K.") with the given plan and routed expert count.
Status LoadBlock(const Binder& b, const V41Config& c, const std::string& p, const V41LayerPlan& plan, int64_t experts,
                 V41BlockWeights* out) {
  const int64_t d = c.hidden_size, hc = c.hc_mult, hd = c.head_dim, h = c.num_heads;
  DI_ASSIGN_OR_RETURN(out->attn_norm, b.Floats(p + "attn_norm.weight", {d}));
  DI_ASSIGN_OR_RETURN(out->ffn_norm, b.Floats(p + "ffn_norm.weight", {d}));
  DI_ASSIGN_OR_RETURN(out->attn_hc, b.HyperConnection(p + "hc_attn", (2 + hc) * hc, hc * d));
  DI_ASSIGN_OR_RETURN(out->ffn_hc, b.HyperConnection(p + "hc_ffn", (2 + hc) * hc, hc * d));

  V41AttentionWeights& a = out->attention;
  const std::string ap = p + "attn.";
  DI_ASSIGN_OR_RETURN(a.wq_a, b.Matrix(ap + "wq_a", c.q_lora_rank, d));
  DI_ASSIGN_OR_RETURN(a.q_norm, b.Floats(ap + "q_norm.weight", {c.q_lora_rank}));
  DI_ASSIGN_OR_RETURN(a.wq_b, b.Matrix(ap + "wq_b", h * hd, c.q_lora_rank));
  DI_ASSIGN_OR_RETURN(a.wkv, b.Matrix(ap + "wkv", hd, d));
  DI_ASSIGN_OR_RETURN(a.kv_norm, b.Floats(ap + "kv_norm.weight", {hd}));
  const int64_t group_in = h * hd / c.o_groups;
  DI_ASSIGN_OR_RETURN(WeightView wo_a, b.Matrix(ap + "wo_a", c.o_groups * c.o_lora_rank, group_in));
  DI_ASSIGN_OR_RETURN(a.wo_b, b.Matrix(ap + "wo_b", d, c.o_groups * c.o_lora_rank));
  DI_ASSIGN_OR_RETURN(a.sink, b.Floats(ap + "attn_sink", {h}));
  for (int64_t g = 0; g < c.o_groups; ++g) {
    auto view = kernels::SliceRows(wo_a, g * c.o_lora_rank, c.o_lora_rank);
    if (!view.ok())
      return Status::InvalidArgument("tensor '" + ap + "wo_a.weight': its groups of o_lora_rank rows do not start on "
                                     "FP8 blocks (" + view.status().message() + ")");
    a.wo_a_groups.push_back(*view);
  }
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
  const int64_t e = experts, inter = c.moe_intermediate_size;
  DI_ASSIGN_OR_RETURN(m.gate, b.Matrix(fp + "gate", e, d));
  DI_ASSIGN_OR_RETURN(m.bias, b.Floats(fp + "gate.bias", {e}));
  DI_ASSIGN_OR_RETURN(m.bias_vl, b.Floats(fp + "gate.bias_vl", {e}));
  for (int64_t i = 0; i < e; ++i) {
    const std::string ep = fp + "experts." + std::to_string(i) + ".";
    V4ExpertWeights x;
    DI_ASSIGN_OR_RETURN(x.w1, b.Matrix(ep + "w1", inter, d));
    DI_ASSIGN_OR_RETURN(x.w2, b.Matrix(ep + "w2", d, inter));
    DI_ASSIGN_OR_RETURN(x.w3, b.Matrix(ep + "w3", inter, d));
    m.experts.push_back(x);
  }
  DI_ASSIGN_OR_RETURN(m.shared.w1, b.Matrix(fp + "shared_experts.w1", inter, d));
  DI_ASSIGN_OR_RETURN(m.shared.w2, b.Matrix(fp + "shared_experts.w2", d, inter));
  DI_ASSIGN_OR_RETURN(m.shared.w3, b.Matrix(fp + "shared_experts.w3", inter, d));

  if (plan.engram >= 0) {
    const V41EngramConfig& ec = c.engram;
    auto ew = std::make_unique<V41EngramWeights>();
    const std::string gp = p + "engram.";
    DI_ASSIGN_OR_RETURN(ew->table, b.EngramTable(gp + "embed", ec.num_embeddings[plan.engram], ec.head_dim));
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
  Binder b(checkpoint, c);
  auto w = std::make_unique<V41Weights>();
  const int64_t d = c.hidden_size;
  DI_ASSIGN_OR_RETURN(w->embed, b.Find("embed.weight"));
  DI_RETURN_IF_ERROR(b.CheckShape(*w->embed, {c.vocab_size, d}));
  if (w->embed->dtype != DType::kF32 && w->embed->dtype != DType::kBF16)
    return Status::InvalidArgument("tensor 'embed.weight' must be F32 or BF16");
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
  DI_ASSIGN_OR_RETURN(ds->markov_embed, b.Find("mtp.markov_head.embed.weight"));
  DI_RETURN_IF_ERROR(b.CheckShape(*ds->markov_embed, {c.vocab_size, dc.markov_rank}));
  if (ds->markov_embed->dtype != DType::kF32 && ds->markov_embed->dtype != DType::kBF16)
    return Status::InvalidArgument("tensor 'mtp.markov_head.embed.weight' must be F32 or BF16");
  DI_ASSIGN_OR_RETURN(ds->markov_head, b.Matrix("mtp.markov_head.head", c.vocab_size, dc.markov_rank));
  DI_ASSIGN_OR_RETURN(ds->confidence, b.Floats("mtp.confidence_head.weight", {1, d + dc.markov_rank}));
  w->dspark = std::move(ds);
  return w;
}

}  // namespace deepinfer::model
